// RUN: fsdp-opt %s -split-input-file '-fsdp-build-train-step=loss-average=tokens world-size=2' -verify-diagnostics | FileCheck %s
// RUN: fsdp-opt %s -split-input-file '-fsdp-build-train-step=loss-average=tokens' -verify-diagnostics | FileCheck %s --check-prefix=ONE
// RUN: not fsdp-opt %s -split-input-file '-fsdp-build-train-step=loss-average=tokens world-size=2 grad-accum=2' 2>&1 | FileCheck %s --check-prefix=ACCUM
// RUN: not fsdp-opt %s --loss-average=rows 2>&1 | FileCheck %s --check-prefix=FLAG
// RUN: fsdp-opt %s -split-input-file '-fsdp-build-train-step=world-size=2' 2>&1 | FileCheck %s --check-prefix=RANKS
// RUN: fsdp-opt %s -split-input-file -fsdp-build-train-step 2>&1 | FileCheck %s --check-prefix=QUIET
// RANKS: remark: the loss is a mean over counted targets (ignore_index): each rank averages its own, and the ranks' means are averaged, as PyTorch DDP and FSDP do; --loss-average=tokens takes the mean over every rank's targets, as transformers' Trainer does
// RANKS-NOT: remark: the loss is a mean
// QUIET-NOT: remark: the loss is a mean
// ACCUM: error: --loss-average=tokens with --grad-accum > 1: the count would span the micro-steps (use --grad-accum=1)
// FLAG: for the --loss-average option: 'rows' is not one of ranks, tokens

// --loss-average=tokens on 2 ranks: each rank's summed loss over the ranks'
// mean count of targets that are not ignore_index (an all-reduce of the
// count in the forward); the ranks' average of that is the mean over every
// counted target. The gradient is the sum's, scaled. On one rank the step
// is as with --loss-average=ranks.
// CHECK: loss_average = "tokens"
// CHECK-LABEL: func.func @train_step
// CHECK: %[[T:.*]] = fsdp.reshape %{{.*}} : tensor<2x3xi64> -> tensor<6xi64>
// CHECK: %[[IGNORED:.*]] = fsdp.equal %[[T]], %{{.*}} : tensor<6xi64>, tensor<i64> -> tensor<6xi1>
// CHECK: %[[KEPT:.*]] = fsdp.not %[[IGNORED]]
// CHECK: %[[ONES:.*]] = fsdp.cast %[[KEPT]] : tensor<6xi1> -> tensor<6xf32>
// CHECK: %[[N:.*]] = fsdp.reduce_sum %[[ONES]] {axes = array<i64: 0>, keepdims = false}
// CHECK: %[[F:.*]] = fsdp.all_reduce %[[N]] {group_size = 2 : i64, reduction = "avg"}
// CHECK: %[[MEAN:.*]] = fsdp.wait %[[F]]
// CHECK: %[[SUM:.*]] = fsdp.cross_entropy %{{.*}}, %[[T]] {ignore_index = -100 : i64, reduction = "sum"}
// CHECK: %[[LOSS:.*]] = fsdp.div %[[SUM]], %[[MEAN]] {fsdp.loss}
// CHECK: return %[[LOSS]], %{{.*}} : tensor<f32>, tensor<f32>
// ONE-LABEL: func.func @train_step
// ONE-NOT: fsdp.all_reduce
// ONE: fsdp.cross_entropy %{{.*}}, %{{.*}} {fsdp.loss, ignore_index = -100 : i64}
// ONE-NOT: fsdp.all_reduce
fsdp.parameter @w : tensor<4x10xf32> {module_path = "head"}
func.func @forward(%x: tensor<2x3x4xf32> {fsdp.name = "x"}, %t: tensor<2x3xi64> {fsdp.name = "targets"}) -> (tensor<f32> {fsdp.name = "loss"}) {
  %w = fsdp.get_parameter @w : tensor<4x10xf32>
  %logits = fsdp.matmul %x, %w : tensor<2x3x4xf32>, tensor<4x10xf32> -> tensor<2x3x10xf32>
  %flat = fsdp.reshape %logits : tensor<2x3x10xf32> -> tensor<6x10xf32>
  %tf = fsdp.reshape %t : tensor<2x3xi64> -> tensor<6xi64>
  %loss = fsdp.cross_entropy %flat, %tf {ignore_index = -100 : i64} : (tensor<6x10xf32>, tensor<6xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A loss that counts no targets (a mean squared error) is refused.
fsdp.parameter @w : tensor<4xf32> {module_path = ""}
func.func @forward(%x: tensor<4xf32> {fsdp.name = "x"}) -> (tensor<f32> {fsdp.name = "loss"}) {
  %w = fsdp.get_parameter @w : tensor<4xf32>
  %d = fsdp.sub %x, %w : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %s = fsdp.mul %d, %d : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  // expected-error @+1 {{--loss-average=tokens needs the loss to be a mean cross-entropy or NLL loss over class targets, whose counted targets it averages over; this loss is computed by 'fsdp.reduce_mean'}}
  %l = fsdp.reduce_mean %s {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Class weights would make the count a sum of weights: refused.
fsdp.parameter @w : tensor<4x10xf32> {module_path = ""}
func.func @forward(%x: tensor<6x4xf32> {fsdp.name = "x"}, %t: tensor<6xi64> {fsdp.name = "targets"}, %cw: tensor<10xf32> {fsdp.name = "class_weights"}) -> (tensor<f32> {fsdp.name = "loss"}) {
  %w = fsdp.get_parameter @w : tensor<4x10xf32>
  %logits = fsdp.matmul %x, %w : tensor<6x4xf32>, tensor<4x10xf32> -> tensor<6x10xf32>
  // expected-error @+1 {{--loss-average=tokens needs an unweighted mean loss; this 'fsdp.cross_entropy' has class weights}}
  %loss = fsdp.cross_entropy %logits, %t, %cw {ignore_index = -100 : i64} : (tensor<6x10xf32>, tensor<6xi64>, tensor<10xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A summed loss has nothing to average.
fsdp.parameter @w : tensor<4x10xf32> {module_path = ""}
func.func @forward(%x: tensor<6x4xf32> {fsdp.name = "x"}, %t: tensor<6xi64> {fsdp.name = "targets"}) -> (tensor<f32> {fsdp.name = "loss"}) {
  %w = fsdp.get_parameter @w : tensor<4x10xf32>
  %logits = fsdp.matmul %x, %w : tensor<6x4xf32>, tensor<4x10xf32> -> tensor<6x10xf32>
  // expected-error @+1 {{--loss-average=tokens needs a mean loss; this 'fsdp.cross_entropy' has reduction 'sum'}}
  %loss = fsdp.cross_entropy %logits, %t {reduction = "sum"} : (tensor<6x10xf32>, tensor<6xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
