// RUN: fsdp-opt %s -split-input-file -fsdp-fuse-matmul-bias | FileCheck %s

// nn.Linear on a batch of rows: the bias add joins the product.
// CHECK-LABEL: func.func @linear
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x16xf32>, %[[W:.*]]: tensor<32x16xf32>, %[[B:.*]]: tensor<32xf32>)
// CHECK-NEXT: %[[Y:.*]] = fsdp.matmul %[[X]], %[[W]] bias %[[B]] {transpose_rhs = true} : tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<32xf32> -> tensor<2x8x32xf32>
// CHECK-NEXT: return %[[Y]]
func.func @linear(%x: tensor<2x8x16xf32>, %w: tensor<32x16xf32>, %b: tensor<32xf32>) -> tensor<2x8x32xf32> {
  %y = fsdp.matmul %x, %w {transpose_rhs = true} : tensor<2x8x16xf32>, tensor<32x16xf32> -> tensor<2x8x32xf32>
  %z = fsdp.add %b, %y : tensor<32xf32>, tensor<2x8x32xf32> -> tensor<2x8x32xf32>
  return %z : tensor<2x8x32xf32>
}

// -----

// The bias on the right.
// CHECK-LABEL: func.func @bias_right
// CHECK: fsdp.matmul %{{.*}}, %{{.*}} bias %{{.*}} :
// CHECK-NOT: fsdp.add
func.func @bias_right(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>, %b: tensor<4xf32>) -> tensor<8x4xf32> {
  %y = fsdp.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32> -> tensor<8x4xf32>
  %z = fsdp.add %y, %b : tensor<8x4xf32>, tensor<4xf32> -> tensor<8x4xf32>
  return %z : tensor<8x4xf32>
}

// -----

// Not fused: the product has another user, the addend is not one value per
// column (a residual, a column vector).
// CHECK-LABEL: func.func @not_a_bias
// CHECK-NOT: bias
// CHECK: return
func.func @not_a_bias(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>, %b: tensor<4xf32>, %r: tensor<8x4xf32>, %c: tensor<8x1xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>) {
  %y = fsdp.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32> -> tensor<8x4xf32>
  %z = fsdp.add %y, %b : tensor<8x4xf32>, tensor<4xf32> -> tensor<8x4xf32>
  %y2 = fsdp.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32> -> tensor<8x4xf32>
  %z2 = fsdp.add %y2, %r : tensor<8x4xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
  %y3 = fsdp.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32> -> tensor<8x4xf32>
  %z3 = fsdp.add %c, %y3 : tensor<8x1xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
  return %z, %y, %z2, %z3 : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>
}
