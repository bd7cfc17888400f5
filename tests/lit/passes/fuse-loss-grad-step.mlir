// RUN: fsdp-opt %s -fsdp-build-train-step -fsdp-fuse-loss-grad | FileCheck %s --check-prefix=STEP

// A training step: the loss and autodiff's first gradient (whose loss
// gradient is the seed constant, made at the end of the forward) become
// one op where the loss was, the seed cloned before it; the op keeps the
// loss's mark.
// STEP-LABEL: func.func @train_step
// STEP-NOT: fsdp.cross_entropy_grad
// STEP: %[[SEED:.*]] = fsdp.constant dense<1.000000e+00> : tensor<f32>
// STEP-NEXT: %[[L:.*]], %[[D:.*]] = fsdp.cross_entropy_with_grad %{{.*}}, %{{.*}}, %[[SEED]] {fsdp.loss, ignore_index = -1 : i64} : (tensor<3x10xf32>, tensor<3xi64>, tensor<f32>) -> (tensor<f32>, tensor<3x10xf32>)
// STEP-NOT: fsdp.cross_entropy
// STEP: fsdp.matmul %[[D]]
// STEP: return %[[L]]
fsdp.parameter @w : tensor<10x4xf32> {module_path = ""}
func.func @forward(%x: tensor<3x4xf32> {fsdp.name = "x"}, %t: tensor<3xi64> {fsdp.name = "targets"}) -> (tensor<f32> {fsdp.name = "loss"}) {
  %w = fsdp.get_parameter @w : tensor<10x4xf32>
  %logits = fsdp.matmul %x, %w {transpose_rhs = true} : tensor<3x4xf32>, tensor<10x4xf32> -> tensor<3x10xf32>
  %loss = fsdp.cross_entropy %logits, %t {ignore_index = -1 : i64} : (tensor<3x10xf32>, tensor<3xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

