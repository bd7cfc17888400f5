// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units -fsdp-checkpoint-activations=activation-checkpointing=units 2>/dev/null | FileCheck %s
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units -fsdp-checkpoint-activations=activation-checkpointing=none 2>/dev/null | FileCheck %s --check-prefix=NONE
// RUN: not fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units -fsdp-checkpoint-activations=activation-checkpointing=all 2>&1 | FileCheck %s --check-prefix=BAD
// Per unit: naming layers.3 is the same as `units` here; naming layers.1
// alone recomputes nothing (its values are all kept for the next layer).
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units -fsdp-checkpoint-activations=activation-checkpointing=layers.3 2>/dev/null | FileCheck %s
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units -fsdp-checkpoint-activations=activation-checkpointing=layers.1 2>/dev/null | FileCheck %s --check-prefix=NONE
// BAD: error: --activation-checkpointing: 'all' is not none, units, ops, ops-alt or the name of a unit (optionally with :ops or :ops-alt)
// Selective (every unit, or layers.3 alone): the matmul's output is kept
// and only the difference the MSE gradient needs is recomputed from it,
// with no second read of layers.3.w and no second matmul.
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units -fsdp-checkpoint-activations=activation-checkpointing=ops 2>/dev/null | FileCheck %s --check-prefix=OPS
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units -fsdp-checkpoint-activations=activation-checkpointing=layers.3:ops 2>/dev/null | FileCheck %s --check-prefix=OPS
// RUN: not fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units -fsdp-checkpoint-activations=activation-checkpointing=layers.3:most 2>&1 | FileCheck %s --check-prefix=BADHOW
// BADHOW: error: --activation-checkpointing: 'layers.3:most' is not none, units, ops, ops-alt or the name of a unit (optionally with :ops or :ops-alt)
// OPS-LABEL: func.func @train_step
// OPS: fsdp.get_parameter @layers.3.w
// OPS-NEXT: %[[M:.*]] = fsdp.matmul
// OPS-NEXT: fsdp.sub %[[M]], %arg1
// OPS: fsdp.reduce_mean {{.*}}fsdp.loss
// OPS-NOT: fsdp.get_parameter
// OPS: %[[S:.*]] = fsdp.sub %[[M]], %arg1
// OPS-NEXT: fsdp.mul %{{.*}}, %[[S]]

// Each layer's output (tanh) feeds the next layer and is kept; what only
// the reverse pass reads is recomputed there: layers.3's matmul and the
// difference the MSE gradient needs, with a fresh read of layers.3.w (the
// unit's backward gather will serve it).
// CHECK-LABEL: func.func @train_step
// CHECK: fsdp.reduce_mean {{.*}}fsdp.loss
// CHECK: %[[W:.*]] = fsdp.get_parameter @layers.3.w
// CHECK-NEXT: %[[M:.*]] = fsdp.matmul %{{.*}}, %[[W]]
// CHECK-NEXT: %[[S:.*]] = fsdp.sub %[[M]], %arg1
// CHECK-NOT: fsdp.loss
// CHECK: fsdp.mul %{{.*}}, %[[S]]

// NONE-LABEL: func.func @train_step
// NONE: fsdp.loss
// NONE-NOT: fsdp.get_parameter
// NONE: return
fsdp.parameter @"layers.0.w" : tensor<3x3xf32> {module_path = "layers.0"}
fsdp.parameter @"layers.1.w" : tensor<3x3xf32> {module_path = "layers.1"}
fsdp.parameter @"layers.2.w" : tensor<3x3xf32> {module_path = "layers.2"}
fsdp.parameter @"layers.3.w" : tensor<3x3xf32> {module_path = "layers.3"}
func.func @forward(%x: tensor<2x3xf32> {fsdp.name = "x"}) -> (tensor<2x3xf32> {fsdp.name = "y"}) {
  %w0 = fsdp.get_parameter @"layers.0.w" : tensor<3x3xf32>
  %h0 = fsdp.matmul %x, %w0 : tensor<2x3xf32>, tensor<3x3xf32> -> tensor<2x3xf32>
  %r0 = fsdp.tanh %h0 : tensor<2x3xf32>
  %w1 = fsdp.get_parameter @"layers.1.w" : tensor<3x3xf32>
  %h1 = fsdp.matmul %r0, %w1 : tensor<2x3xf32>, tensor<3x3xf32> -> tensor<2x3xf32>
  %r1 = fsdp.tanh %h1 : tensor<2x3xf32>
  %w2 = fsdp.get_parameter @"layers.2.w" : tensor<3x3xf32>
  %h2 = fsdp.matmul %r1, %w2 : tensor<2x3xf32>, tensor<3x3xf32> -> tensor<2x3xf32>
  %r2 = fsdp.tanh %h2 : tensor<2x3xf32>
  %w3 = fsdp.get_parameter @"layers.3.w" : tensor<3x3xf32>
  %h3 = fsdp.matmul %r2, %w3 : tensor<2x3xf32>, tensor<3x3xf32> -> tensor<2x3xf32>
  return %h3 : tensor<2x3xf32>
}
