// RUN: fsdp-opt %s -split-input-file -fsdp-fuse-loss-grad | FileCheck %s

// A loss gradient defined before the loss (an argument) is used as it is;
// the class weight and the sum reduction go with the fused op.
// CHECK-LABEL: func.func @argument_grad
// CHECK-SAME: (%[[X:.*]]: tensor<4x6xf32>, %[[T:.*]]: tensor<4xi64>, %[[G:.*]]: tensor<f32>, %[[W:.*]]: tensor<6xf32>)
// CHECK-NEXT: %[[L:.*]], %[[D:.*]] = fsdp.cross_entropy_with_grad %[[X]], %[[T]], %[[G]], %[[W]] {reduction = "sum"}
// CHECK-NEXT: return %[[L]], %[[D]]
func.func @argument_grad(%x: tensor<4x6xf32>, %t: tensor<4xi64>, %g: tensor<f32>, %w: tensor<6xf32>) -> (tensor<f32>, tensor<4x6xf32>) {
  %l = fsdp.cross_entropy %x, %t, %w {reduction = "sum"} : (tensor<4x6xf32>, tensor<4xi64>, tensor<6xf32>) -> tensor<f32>
  %d = fsdp.cross_entropy_grad %x, %t, %g, %w {kind = "softmax", reduction = "sum"} : (tensor<4x6xf32>, tensor<4xi64>, tensor<f32>, tensor<6xf32>) -> tensor<4x6xf32>
  return %l, %d : tensor<f32>, tensor<4x6xf32>
}

// -----

// Left alone: a loss gradient computed after the loss (from it), a pair
// with other targets, per-position losses, and nll_loss's gradient.
// CHECK-LABEL: func.func @not_fused
// CHECK-NOT: fsdp.cross_entropy_with_grad
// CHECK: return
func.func @not_fused(%x: tensor<4x6xf32>, %t: tensor<4xi64>, %u: tensor<4xi64>, %g4: tensor<4xf32>) -> (tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>) {
  %l = fsdp.cross_entropy %x, %t : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<f32>
  %g = fsdp.mul %l, %l : tensor<f32>, tensor<f32> -> tensor<f32>
  %d1 = fsdp.cross_entropy_grad %x, %t, %g {kind = "softmax"} : (tensor<4x6xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x6xf32>
  %d2 = fsdp.cross_entropy_grad %x, %u, %l {kind = "softmax"} : (tensor<4x6xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x6xf32>
  %ln = fsdp.cross_entropy %x, %t {reduction = "none"} : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<4xf32>
  %d3 = fsdp.cross_entropy_grad %x, %t, %g4 {kind = "softmax", reduction = "none"} : (tensor<4x6xf32>, tensor<4xi64>, tensor<4xf32>) -> tensor<4x6xf32>
  %d4 = fsdp.cross_entropy_grad %x, %t, %l {kind = "nll"} : (tensor<4x6xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x6xf32>
  return %d1, %d2, %d3, %d4 : tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>
}
