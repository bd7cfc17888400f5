// RUN: fsdp-opt %s -fsdp-build-train-step='loss=mse grad-clip=1.0' '-fsdp-wrap-units=wrap=regex:layers\.[0-9]+' '-fsdp-shard=world-size=2' -fsdp-insert-collectives 2>/dev/null | FileCheck %s
// RUN: fsdp-opt %s -fsdp-build-train-step='loss=mse' '-fsdp-wrap-units=wrap=regex:layers\.[0-9]+' '-fsdp-shard=world-size=2 strategy=shard-grad-op' -fsdp-insert-collectives 2>/dev/null | FileCheck %s --check-prefix=SGO
// RUN: fsdp-opt %s -fsdp-build-train-step='loss=mse grad-accum=2' '-fsdp-wrap-units=wrap=regex:layers\.[0-9]+' '-fsdp-shard=world-size=2' -fsdp-insert-collectives 2>/dev/null | FileCheck %s --check-prefix=ACCUM
// RUN: fsdp-opt %s -fsdp-build-train-step='loss=mse' '-fsdp-wrap-units=wrap=regex:layers\.[0-9]+' '-fsdp-shard=world-size=2' -fsdp-insert-collectives -fsdp-plan-memory 2>/dev/null | FileCheck %s --check-prefix=MEM
// RUN: fsdp-opt %s -fsdp-build-train-step='loss=mse grad-clip=1.0' '-fsdp-wrap-units=wrap=regex:layers\.[0-9]+' '-fsdp-shard=world-size=4 strategy=hybrid-shard replicate-groups=2' -fsdp-insert-collectives -fsdp-verify-plan 2>/dev/null | FileCheck %s --check-prefix=HYBRID

// RUN: fsdp-opt %s -fsdp-build-train-step='loss=mse' '-fsdp-wrap-units=wrap=regex:layers\.[0-9]+' '-fsdp-shard=world-size=2 param-dtype=bf16' -fsdp-insert-collectives -fsdp-verify-plan 2>/dev/null | FileCheck %s --check-prefix=BF16
// RUN: not fsdp-opt %s -fsdp-build-train-step='loss=mse' -fsdp-wrap-units '-fsdp-shard=world-size=2 param-dtype=f8' 2>&1 | FileCheck %s --check-prefix=BADDTYPE
// RUN: fsdp-opt %s -fsdp-build-train-step='loss=mse' '-fsdp-wrap-units=wrap=regex:layers\.[0-9]+' '-fsdp-shard=world-size=4 strategy=hybrid-shard replicate-groups=2 reduce-dtype=bf16' -fsdp-insert-collectives -fsdp-verify-plan 2>/dev/null | FileCheck %s --check-prefix=REDUCE
// RUN: not fsdp-opt %s -fsdp-build-train-step='loss=mse' -fsdp-wrap-units '-fsdp-shard=world-size=2 strategy=no-shard param-dtype=bf16' 2>&1 | FileCheck %s --check-prefix=NOSHARDBF16

// Mixed precision: the f32 shard (master weights) is cast to bf16 before
// the gather; views are bf16 and cast to f32 for the CPU's compute; the
// gradient is packed, reduced and applied in f32.
// BF16-LABEL: func.func @train_step
// BF16: %[[S:.*]] = fsdp.get_shard @layers.0.flat : tensor<8xf32>
// BF16-NEXT: %[[C:.*]] = fsdp.cast %[[S]] : tensor<8xf32> -> tensor<8xbf16>
// BF16-NEXT: %[[F:.*]] = fsdp.all_gather_start %[[C]] {{.*}} : tensor<8xbf16> -> !fsdp.future<tensor<16xbf16>>
// BF16-NEXT: %[[G:.*]] = fsdp.wait %[[F]]
// BF16-NEXT: %[[V:.*]] = fsdp.param_view %[[G]] {offset = 0 : i64} : tensor<16xbf16> -> tensor<4x3xbf16>
// BF16-NEXT: fsdp.cast %[[V]] : tensor<4x3xbf16> -> tensor<4x3xf32>
// BF16: fsdp.reduce_scatter_start {{.*}} : tensor<16xf32> -> !fsdp.future<tensor<8xf32>>
// BF16: fsdp.adamw @layers.0.flat, {{.*}} : tensor<8xf32>
// BADDTYPE: error: --param-dtype and --reduce-dtype must be f32, bf16 or f16, got 'f8' and 'f32'
// reduce-dtype: the f32 gradients are packed into a bf16 flat buffer (the
// pack converts); the replica all-reduce runs in bf16 too; the shard
// returns to f32.
// REDUCE-LABEL: func.func @train_step
// REDUCE: %[[P:.*]] = fsdp.pack {{.*}} : (tensor<3x2xf32>) -> tensor<6xbf16>
// REDUCE-NEXT: %[[R:.*]] = fsdp.reduce_scatter_start %[[P]] {{.*}} : tensor<6xbf16> -> !fsdp.future<tensor<3xbf16>>
// REDUCE-NEXT: %[[W:.*]] = fsdp.wait %[[R]]
// REDUCE-NEXT: %[[A:.*]] = fsdp.all_reduce %[[W]] {group = "replicate", group_size = 2 : i64, reduction = "avg"} : tensor<3xbf16>
// REDUCE-NEXT: %[[AW:.*]] = fsdp.wait %[[A]]
// REDUCE-NEXT: fsdp.cast %[[AW]] : tensor<3xbf16> -> tensor<3xf32>
// NOSHARDBF16: error: --param-dtype=bf16 needs a sharded strategy

// RUN: fsdp-opt %s -fsdp-build-train-step='loss=mse' '-fsdp-wrap-units=wrap=regex:layers\.[0-9]+' '-fsdp-shard=world-size=4 reshard-after-forward=default,layers.1=2' -fsdp-insert-collectives -fsdp-verify-plan 2>/dev/null | FileCheck %s --check-prefix=PARTIAL

// Partial resharding (layers.1 keeps 1/2): after forward, the rank keeps
// its half of the gathered buffer; backward gathers the halves among 2.
// PARTIAL-LABEL: func.func @train_step
// PARTIAL: %[[G:.*]] = fsdp.wait {{.*}} : !fsdp.future<tensor<12xf32>>
// PARTIAL: %[[K:.*]] = fsdp.reshard %[[G]] {group_size = 2 : i64} : tensor<12xf32> -> tensor<6xf32>
// PARTIAL-NEXT: fsdp.free %[[G]]
// PARTIAL: fsdp.all_gather_start %[[K]] {group = "block", group_size = 2 : i64, unit = @layers.1} : tensor<6xf32> -> !fsdp.future<tensor<12xf32>>

// Hybrid (2 replica groups of 2): gathers and reduce-scatters stay in the
// shard group; each gradient shard is then averaged over the replicas; the
// norm sums over the shard group only (the replicas hold equal shards); the
// loss is averaged over the world.
// HYBRID-LABEL: func.func @train_step
// HYBRID: fsdp.all_gather_start %{{.*}} {group = "shard", group_size = 2 : i64, unit = @layers.0}
// HYBRID: %[[RS:.*]] = fsdp.reduce_scatter_start %{{.*}} {group = "shard", group_size = 2 : i64, reduction = "avg", unit = @root}
// HYBRID-NEXT: %[[W:.*]] = fsdp.wait %[[RS]]
// HYBRID-NEXT: fsdp.all_reduce %[[W]] {group = "replicate", group_size = 2 : i64, reduction = "avg"}
// HYBRID: fsdp.all_reduce %{{.*}} {group = "shard", group_size = 2 : i64} : tensor<f32>
// HYBRID: fsdp.sqrt
// HYBRID: fsdp.all_reduce %{{.*}} {group_size = 4 : i64, reduction = "avg"} : tensor<f32>

// full-shard: each unit is gathered right before its first forward use and
// freed after its last; layers.1 is gathered again for backward (its weight
// feeds the input gradient), layers.0 is not (nothing in backward reads
// it). The root stays gathered until its last backward use. Gradients are
// packed and reduce-scattered (avg) after their last contribution; the norm
// sums the shards' squares over the ranks; AdamW runs on the shards.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[S0:.*]] = fsdp.get_shard @layers.0.flat : tensor<8xf32>
// CHECK: %[[F0:.*]] = fsdp.all_gather_start %[[S0]] {group_size = 2 : i64, unit = @layers.0} : tensor<8xf32> -> !fsdp.future<tensor<16xf32>>
// CHECK: %[[G0:.*]] = fsdp.wait %[[F0]]
// CHECK: %[[W0:.*]] = fsdp.param_view %[[G0]] {offset = 0 : i64} : tensor<16xf32> -> tensor<4x3xf32>
// CHECK: %[[B0:.*]] = fsdp.param_view %[[G0]] {offset = 12 : i64} : tensor<16xf32> -> tensor<3xf32>
// CHECK: fsdp.gemm %{{.*}}, %[[W0]], %[[B0]]
// CHECK-NEXT: fsdp.free %[[G0]] : tensor<16xf32>
// CHECK: fsdp.all_gather_start {{.*}}unit = @layers.1
// CHECK: fsdp.free {{.*}} : tensor<12xf32>
// CHECK: %[[GR:.*]] = fsdp.wait {{.*}}tensor<6xf32>>
// CHECK: fsdp.matmul
// CHECK: fsdp.matmul {{.*}}transpose_rhs = true
// CHECK-NEXT: fsdp.free %[[GR]] : tensor<6xf32>
// CHECK: %[[PR:.*]] = fsdp.pack {{.*}} -> tensor<6xf32>
// CHECK: fsdp.reduce_scatter_start %[[PR]] {group_size = 2 : i64, reduction = "avg", unit = @root} : tensor<6xf32> -> !fsdp.future<tensor<3xf32>>
// CHECK: fsdp.get_shard @layers.1.flat
// CHECK: fsdp.all_gather_start {{.*}}unit = @layers.1
// CHECK: fsdp.free {{.*}} : tensor<12xf32>
// CHECK: fsdp.pack {{.*}} {offsets = array<i64: 0, 9>} : (tensor<3x3xf32>, tensor<3xf32>) -> tensor<12xf32>
// CHECK-NOT: fsdp.all_gather_start
// CHECK: fsdp.pack {{.*}} {offsets = array<i64: 0, 12>} : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<16xf32>
// CHECK: %[[RS0:.*]] = fsdp.reduce_scatter_start {{.*}}unit = @layers.0
// CHECK: %[[GS0:.*]] = fsdp.wait %[[RS0]] : !fsdp.future<tensor<8xf32>>
// CHECK: %[[SQ:.*]] = fsdp.all_reduce %{{.*}} {group_size = 2 : i64} : tensor<f32>
// CHECK: %[[SQW:.*]] = fsdp.wait %[[SQ]]
// CHECK: %[[NORM:.*]] = fsdp.sqrt %[[SQW]]
// CHECK: fsdp.adamw @layers.0.flat, %[[GS0]] scaled by
// CHECK: fsdp.adamw @layers.1.flat
// CHECK: fsdp.adamw @root.flat
// CHECK-NOT: fsdp.adamw
// CHECK: fsdp.all_reduce {{.*}}reduction = "avg"
// CHECK: return %{{.*}}, %[[NORM]]

// shard-grad-op: one gather per unit, freed after the backward.
// SGO-LABEL: func.func @train_step
// SGO-COUNT-3: fsdp.all_gather_start
// SGO-NOT: fsdp.all_gather_start
// SGO: return

// Gradient accumulation: micro-steps reduce-scatter and accumulate shards;
// the update reads the shards' sums.
// ACCUM-LABEL: func.func @train_step
// ACCUM: %[[W:.*]] = fsdp.wait {{.*}} : !fsdp.future<tensor<8xf32>>
// ACCUM: fsdp.accumulate_grad @layers.0.flat, %[[W]] : tensor<8xf32>
// ACCUM-LABEL: func.func @apply_update
// ACCUM-DAG: fsdp.read_grad @layers.0.flat : tensor<8xf32>
// ACCUM-DAG: fsdp.read_grad @layers.1.flat : tensor<6xf32>
// ACCUM-DAG: fsdp.read_grad @root.flat : tensor<3xf32>
// ACCUM: fsdp.all_reduce
// ACCUM: fsdp.adamw @layers.0.flat

// Memory: parameter views alias their gathered buffer (at their offset),
// and a reduce-scatter's input stays allocated until its wait.
// MEM: %[[G:.*]] = fsdp.wait %{{.*}} {fsdp.offsets = array<i64: [[#OFF:]]>} : !fsdp.future<tensor<16xf32>>
// MEM-NEXT: fsdp.param_view %[[G]] {fsdp.offsets = array<i64: [[#OFF]]>, offset = 0 : i64}
// MEM-NEXT: fsdp.param_view %[[G]] {fsdp.offsets = array<i64: [[#OFF+48]]>, offset = 12 : i64}
fsdp.parameter @"layers.0.w" : tensor<4x3xf32> {module_path = "layers.0"}
fsdp.parameter @"layers.0.b" : tensor<3xf32> {module_path = "layers.0"}
fsdp.parameter @"layers.1.w" : tensor<3x3xf32> {module_path = "layers.1"}
fsdp.parameter @"layers.1.b" : tensor<3xf32> {module_path = "layers.1"}
fsdp.parameter @"head.w" : tensor<3x2xf32> {module_path = "head"}
func.func @forward(%x: tensor<2x4xf32> {fsdp.name = "x"}) -> (tensor<2x2xf32> {fsdp.name = "y"}) {
  %w0 = fsdp.get_parameter @"layers.0.w" : tensor<4x3xf32>
  %b0 = fsdp.get_parameter @"layers.0.b" : tensor<3xf32>
  %h0 = fsdp.gemm %x, %w0, %b0 : (tensor<2x4xf32>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %r0 = fsdp.relu %h0 : tensor<2x3xf32>
  %w1 = fsdp.get_parameter @"layers.1.w" : tensor<3x3xf32>
  %b1 = fsdp.get_parameter @"layers.1.b" : tensor<3xf32>
  %h1 = fsdp.gemm %r0, %w1, %b1 : (tensor<2x3xf32>, tensor<3x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %r1 = fsdp.relu %h1 : tensor<2x3xf32>
  %wh = fsdp.get_parameter @"head.w" : tensor<3x2xf32>
  %y = fsdp.matmul %r1, %wh : tensor<2x3xf32>, tensor<3x2xf32> -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}
