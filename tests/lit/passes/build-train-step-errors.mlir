// RUN: fsdp-opt %s -split-input-file -fsdp-build-train-step -verify-diagnostics | FileCheck %s
// RUN: not fsdp-opt %s -split-input-file -fsdp-build-train-step=optimizer=adam 2>&1 | FileCheck %s --check-prefix=OPT
// OPT: error: unknown --optimizer 'adam' (adamw or sgd)
// RUN: not fsdp-opt %s -split-input-file '-fsdp-build-train-step=frozen=(' 2>&1 | FileCheck %s --check-prefix=RE
// RE: error: invalid --frozen regular expression '('

// loss=auto needs one scalar output.
// expected-error @below {{--loss=auto needs exactly one scalar float graph output, the graph has: logits : tensor<2x3xf32>; choose --loss=cross-entropy, mse or bce}}
func.func @forward(%x: tensor<2x3xf32>) -> (tensor<2x3xf32> {fsdp.name = "logits"}) {
  return %x : tensor<2x3xf32>
}

// -----

// A parameter that does not reach the loss is reported, not updated.
// expected-remark @+1 {{parameter 'unused' does not affect the loss: a buffer (no gradient, no update, kept whole on every rank, never sharded)}}
fsdp.parameter @unused : tensor<4xf32> {module_path = ""}
fsdp.parameter @v : tensor<4xf32> {module_path = ""}
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: fsdp.adamw @unused
// CHECK: fsdp.adamw @v
func.func @forward(%x: tensor<4xf32> {fsdp.name = "x"}) -> (tensor<f32> {fsdp.name = "loss"}) {
  %v = fsdp.get_parameter @v : tensor<4xf32>
  %p = fsdp.mul %x, %v : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %s = fsdp.reduce_sum %p {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// A value no backend computes (float64: torch 1.13's ONNX exporter writes
// torch.where(mask, 2.0, 0.5) in double) is refused at the op computing
// it, not by fsdp-run reading the plan.
func.func @forward(%x: tensor<4xf32> {fsdp.name = "x"}) -> (tensor<f32> {fsdp.name = "loss"}) {
  // expected-error @+1 {{'fsdp.cast' computes 'tensor<4xf64>': no backend computes its element type (they compute f32, bf16, f16, i64 and i1); cast it, or export the model in float32}}
  %d = fsdp.cast %x : tensor<4xf32> -> tensor<4xf64>
  %m = fsdp.mul %d, %d : tensor<4xf64>, tensor<4xf64> -> tensor<4xf64>
  %f = fsdp.cast %m : tensor<4xf64> -> tensor<4xf32>
  %s = fsdp.reduce_sum %f {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// An int32 input no backend reads.
// expected-error @+1 {{input 0 is 'tensor<4xi32>': no backend computes its element type}}
func.func @forward(%ids: tensor<4xi32> {fsdp.name = "ids"}, %x: tensor<4xf32> {fsdp.name = "x"}) -> (tensor<f32> {fsdp.name = "loss"}) {
  %f = fsdp.cast %ids : tensor<4xi32> -> tensor<4xf32>
  %p = fsdp.mul %f, %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %s = fsdp.reduce_sum %p {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %s : tensor<f32>
}
