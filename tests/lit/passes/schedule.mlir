// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=2' -fsdp-insert-collectives -fsdp-schedule 2>/dev/null | FileCheck %s --check-prefix=PRE
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=2' -fsdp-insert-collectives '-fsdp-schedule=backward-prefetch=post' 2>/dev/null | FileCheck %s --check-prefix=POST
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=2' -fsdp-insert-collectives '-fsdp-schedule=backward-prefetch=none forward-prefetch=false' 2>/dev/null | FileCheck %s --check-prefix=NONE
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=2' -fsdp-insert-collectives '-fsdp-schedule=prefetch-depth=2 limit-all-gathers=2' 2>/dev/null | FileCheck %s --check-prefix=DEPTH
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=2' -fsdp-insert-collectives '-fsdp-schedule=prefetch-depth=3 limit-all-gathers=1' 2>/dev/null | FileCheck %s --check-prefix=PRE
// RUN: not fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=2' -fsdp-insert-collectives '-fsdp-schedule=backward-prefetch=sometimes' 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: error: --backward-prefetch must be pre, post or none, got 'sometimes'

// Forward prefetch: the next unit's gather starts as soon as the current
// one completes, before the current unit computes. Backward (pre): the same
// in the reverse pass. A reduce-scatter's wait sinks to the next one's
// start (one in flight), the last one's to the norm.
// PRE-LABEL: func.func @train_step
// PRE: fsdp.wait {{.*}}tensor<10xf32>>
// PRE-NEXT: fsdp.get_shard @layers.1.flat
// PRE-NEXT: fsdp.all_gather_start {{.*}}unit = @layers.1
// PRE-NEXT: fsdp.param_view
// PRE-NEXT: fsdp.matmul
// PRE: fsdp.loss
// PRE: %[[W3:.*]] = fsdp.wait {{.*}}tensor<10xf32>>
// PRE-NEXT: fsdp.get_shard @layers.2.flat
// PRE-NEXT: fsdp.all_gather_start {{.*}}unit = @layers.2
// PRE: %[[RS3:.*]] = fsdp.reduce_scatter_start {{.*}}unit = @layers.3
// PRE-NOT: fsdp.wait %[[RS3]]
// PRE: fsdp.wait %[[RS3]]
// PRE-NEXT: fsdp.reduce_scatter_start {{.*}}unit = @layers.2
// PRE: %[[RS0:.*]] = fsdp.reduce_scatter_start {{.*}}unit = @layers.0
// PRE-NOT: fsdp.wait %[[RS0]]
// PRE: fsdp.wait %[[RS0]]
// PRE: fsdp.all_reduce

// Backward (post): the next gather starts after the current unit's
// gradients are handed to the reduce-scatter.
// POST: fsdp.loss
// POST: fsdp.reduce_scatter_start {{.*}}unit = @layers.3
// POST-NEXT: fsdp.get_shard @layers.2.flat
// POST-NEXT: fsdp.all_gather_start {{.*}}unit = @layers.2

// No prefetch: every gather waits at once.
// NONE: fsdp.all_gather_start {{.*}}unit = @layers.0
// NONE-NEXT: fsdp.wait
// NONE: fsdp.all_gather_start {{.*}}unit = @layers.1
// NONE-NEXT: fsdp.wait
// NONE: fsdp.loss
// NONE: fsdp.all_gather_start {{.*}}unit = @layers.2
// NONE-NEXT: fsdp.wait

// Two ahead: layers.2 starts when layers.0 completes.
// DEPTH: fsdp.all_gather_start {{.*}}unit = @layers.0
// DEPTH-NEXT: fsdp.wait
// DEPTH-NEXT: fsdp.get_shard @layers.2.flat
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
