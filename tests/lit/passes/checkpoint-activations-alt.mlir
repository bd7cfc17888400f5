// Selective op checkpointing as torchtitan does it (`ops-alt`): of a
// unit's matmuls in forward order the 1st, 3rd, ... outputs are kept and
// every second one is recomputed in the reverse pass (a fresh read of its
// weight), where `ops` keeps them all and recomputes no matmul.
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units -fsdp-checkpoint-activations=activation-checkpointing=ops-alt 2>/dev/null | FileCheck %s --check-prefix=ALT
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units -fsdp-checkpoint-activations=activation-checkpointing=layers.0:ops-alt,layers.1:ops-alt 2>/dev/null | FileCheck %s --check-prefix=ALT
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units -fsdp-checkpoint-activations=activation-checkpointing=ops 2>/dev/null | FileCheck %s --check-prefix=OPS
// RUN: not fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units -fsdp-checkpoint-activations=activation-checkpointing=layers.0:ops-most 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: error: --activation-checkpointing: 'layers.0:ops-most' is not none, units, ops, ops-alt or the name of a unit (optionally with :ops or :ops-alt)

// ALT-LABEL: func.func @train_step
// ALT: fsdp.reduce_mean {{.*}}fsdp.loss
// ALT-NOT: fsdp.get_parameter @layers.{{[01]}}.{{[ac]}}
// ALT: %[[B1:.*]] = fsdp.get_parameter @layers.1.b
// ALT-NEXT: fsdp.matmul %{{.*}}, %[[B1]]
// ALT-NOT: fsdp.get_parameter @layers.{{[01]}}.{{[ac]}}
// ALT: %[[B0:.*]] = fsdp.get_parameter @layers.0.b
// ALT-NEXT: fsdp.matmul %{{.*}}, %[[B0]]
// ALT-NOT: fsdp.get_parameter @layers.{{[01]}}.{{[ac]}}
// ALT: return

// OPS-LABEL: func.func @train_step
// OPS: fsdp.reduce_mean {{.*}}fsdp.loss
// OPS-NOT: fsdp.get_parameter
// OPS: return
fsdp.parameter @"layers.0.a" : tensor<3x3xf32> {module_path = "layers.0"}
fsdp.parameter @"layers.0.b" : tensor<3x3xf32> {module_path = "layers.0"}
fsdp.parameter @"layers.0.c" : tensor<3x3xf32> {module_path = "layers.0"}
fsdp.parameter @"layers.1.a" : tensor<3x3xf32> {module_path = "layers.1"}
fsdp.parameter @"layers.1.b" : tensor<3x3xf32> {module_path = "layers.1"}
fsdp.parameter @"layers.1.c" : tensor<3x3xf32> {module_path = "layers.1"}
func.func @forward(%x: tensor<2x3xf32> {fsdp.name = "x"}) -> (tensor<2x3xf32> {fsdp.name = "y"}) {
  %a0 = fsdp.get_parameter @"layers.0.a" : tensor<3x3xf32>
  %h01 = fsdp.matmul %x, %a0 : tensor<2x3xf32>, tensor<3x3xf32> -> tensor<2x3xf32>
  %r01 = fsdp.tanh %h01 : tensor<2x3xf32>
  %b0 = fsdp.get_parameter @"layers.0.b" : tensor<3x3xf32>
  %h02 = fsdp.matmul %r01, %b0 : tensor<2x3xf32>, tensor<3x3xf32> -> tensor<2x3xf32>
  %r02 = fsdp.tanh %h02 : tensor<2x3xf32>
  %c0 = fsdp.get_parameter @"layers.0.c" : tensor<3x3xf32>
  %h03 = fsdp.matmul %r02, %c0 : tensor<2x3xf32>, tensor<3x3xf32> -> tensor<2x3xf32>
  %r03 = fsdp.tanh %h03 : tensor<2x3xf32>
  %a1 = fsdp.get_parameter @"layers.1.a" : tensor<3x3xf32>
  %h11 = fsdp.matmul %r03, %a1 : tensor<2x3xf32>, tensor<3x3xf32> -> tensor<2x3xf32>
  %r11 = fsdp.tanh %h11 : tensor<2x3xf32>
  %b1 = fsdp.get_parameter @"layers.1.b" : tensor<3x3xf32>
  %h12 = fsdp.matmul %r11, %b1 : tensor<2x3xf32>, tensor<3x3xf32> -> tensor<2x3xf32>
  %r12 = fsdp.tanh %h12 : tensor<2x3xf32>
  %c1 = fsdp.get_parameter @"layers.1.c" : tensor<3x3xf32>
  %h13 = fsdp.matmul %r12, %c1 : tensor<2x3xf32>, tensor<3x3xf32> -> tensor<2x3xf32>
  %r13 = fsdp.tanh %h13 : tensor<2x3xf32>
  return %r13 : tensor<2x3xf32>
}
