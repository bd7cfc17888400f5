// RUN: fsdp-opt %s -split-input-file -fsdp-build-train-step='loss=mse frozen=^layers.1.b$' '-fsdp-wrap-units=wrap=regex:layers\.[0-9]+' '-fsdp-shard=world-size=4' 2>/dev/null | FileCheck %s
// RUN: fsdp-opt %s -split-input-file -fsdp-build-train-step='loss=mse frozen=^layers.1.b$' '-fsdp-wrap-units=wrap=regex:layers\.[0-9]+' '-fsdp-shard=world-size=4' 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK
// RUN: fsdp-opt %s -split-input-file -fsdp-build-train-step=loss=mse '-fsdp-wrap-units=wrap=regex:layers\.[0-9]+' '-fsdp-shard=world-size=2 strategy=shard-grad-op' | FileCheck %s --check-prefix=SGO
// RUN: fsdp-opt %s -split-input-file -fsdp-build-train-step=loss=mse '-fsdp-wrap-units=wrap=regex:layers\.[0-9]+' '-fsdp-shard=world-size=2 strategy=no-shard' | FileCheck %s --check-prefix=NOSHARD
// RUN: fsdp-opt %s -split-input-file -fsdp-build-train-step=loss=mse '-fsdp-wrap-units=wrap=regex:layers\.[0-9]+' '-fsdp-shard=world-size=4 strategy=hybrid-shard replicate-groups=2' 2>/dev/null | FileCheck %s --check-prefix=HYBRID
// RUN: not fsdp-opt %s -split-input-file -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=4 replicate-groups=2' 2>&1 | FileCheck %s --check-prefix=REPLICAS
// RUN: not fsdp-opt %s -split-input-file -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=4 strategy=hybrid-shard replicate-groups=3' 2>&1 | FileCheck %s --check-prefix=REPLICAS3
// RUN: fsdp-opt %s -split-input-file -fsdp-build-train-step=loss=mse '-fsdp-wrap-units=wrap=regex:layers\.[0-9]+' '-fsdp-shard=world-size=4 reshard-after-forward=false,layers.1=2,root=true' 2>/dev/null | FileCheck %s --check-prefix=PERUNIT
// RUN: not fsdp-opt %s -split-input-file -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=4 reshard-after-forward=3' 2>&1 | FileCheck %s --check-prefix=BADN
// RUN: not fsdp-opt %s -split-input-file -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=4 reshard-after-forward=true,nope=false' 2>&1 | FileCheck %s --check-prefix=BADUNIT
// RUN: not fsdp-opt %s -split-input-file -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=4 strategy=shard-grad-op reshard-after-forward=true' 2>&1 | FileCheck %s --check-prefix=SGORESHARD
// RUN: not fsdp-opt %s -split-input-file -fsdp-build-train-step=loss=mse '-fsdp-shard=world-size=2' 2>&1 | FileCheck %s --check-prefix=NOUNITS
// RUN: not fsdp-opt %s -split-input-file -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=strategy=zero-4' 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not fsdp-opt %s -split-input-file -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=reshard-after-forward=sometimes' 2>&1 | FileCheck %s --check-prefix=RESHARD
// One rank: full-shard and shard-grad-op use parameters in place, as
// no-shard (nothing to gather); a 16-bit gather keeps the sharded schedule.
// RUN: fsdp-opt %s -split-input-file -fsdp-build-train-step=loss=mse -fsdp-wrap-units -fsdp-shard -fsdp-insert-collectives 2>&1 | FileCheck %s --check-prefix=ONERANK
// ONERANK: remark: --strategy=full-shard on one rank: parameters used in place, no gathers or reduce-scatters (as no-shard; --offload keeps the shards)
// ONERANK: fsdp.strategy = "no-shard"
// ONERANK-NOT: fsdp.all_gather_start
// ONERANK-NOT: fsdp.reduce_scatter_start
// RUN: fsdp-opt %s -split-input-file -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=param-dtype=bf16' -fsdp-insert-collectives 2>/dev/null | FileCheck %s --check-prefix=ONERANKBF16
// ONERANKBF16: fsdp.strategy = "full-shard"
// ONERANKBF16: fsdp.all_gather_start

// Trained parameters are laid end to end in the unit's order and padded to a
// multiple of the 4 ranks (15 elements -> 4 per rank); the frozen bias gets
// a buffer of its own. The root keeps reshard_after_forward = false.
// CHECK: module attributes {fsdp.compute_dtype = f32, fsdp.param_dtype = f32, fsdp.reduce_dtype = f32, fsdp.replicate_groups = 1 : i64, fsdp.strategy = "full-shard", {{.*}}fsdp.world_size = 4 : i64}
// CHECK: fsdp.unit @layers.0 {params = [@layers.0.w, @layers.0.b]}
// CHECK-NEXT: fsdp.flat_parameter @layers.0.flat : tensor<4xf32> {group_size = 4 : i64, numel = 15 : i64, offsets = array<i64: 0, 12>, params = [@layers.0.w, @layers.0.b], trainable = true, unit = @layers.0}
// CHECK: fsdp.unit @layers.1 {params = [@layers.1.w, @layers.1.b]}
// CHECK-NEXT: fsdp.flat_parameter @layers.1.flat : tensor<3xf32> {group_size = 4 : i64, numel = 9 : i64, offsets = array<i64: 0>, params = [@layers.1.w], trainable = true, unit = @layers.1}
// CHECK-NEXT: fsdp.flat_parameter @layers.1.frozen_flat : tensor<1xf32> {group_size = 4 : i64, numel = 3 : i64, offsets = array<i64: 0>, params = [@layers.1.b], trainable = false, unit = @layers.1}
// CHECK: fsdp.unit @root {params = [@head.w], reshard_after_forward = false}
// CHECK-NEXT: fsdp.flat_parameter @root.flat : tensor<2xf32> {group_size = 4 : i64, numel = 6 : i64

// SHARD_GRAD_OP keeps every unit gathered between forward and backward.
// SGO: fsdp.unit @layers.0 {params = [@layers.0.w, @layers.0.b], reshard_after_forward = false}
// SGO: fsdp.flat_parameter @layers.0.flat : tensor<8xf32> {group_size = 2 : i64, numel = 15 : i64
// SGO: fsdp.unit @layers.1 {params = [@layers.1.w, @layers.1.b], reshard_after_forward = false}

// Hybrid: 2 replica groups of 4 ranks shard over groups of 2.
// HYBRID: module attributes {fsdp.compute_dtype = f32, fsdp.param_dtype = f32, fsdp.reduce_dtype = f32, fsdp.replicate_groups = 2 : i64, fsdp.strategy = "hybrid-shard", {{.*}}fsdp.world_size = 4 : i64}
// HYBRID: fsdp.flat_parameter @layers.0.flat : tensor<8xf32> {group_size = 2 : i64, numel = 15 : i64
// REPLICAS: error: --replicate-groups=2 must divide --world-size=4 and needs --strategy=hybrid-shard
// REPLICAS3: error: --replicate-groups=3 must divide --world-size=4 and needs --strategy=hybrid-shard

// NOSHARD: module attributes {fsdp.compute_dtype = f32, fsdp.param_dtype = f32, fsdp.reduce_dtype = f32, fsdp.replicate_groups = 1 : i64, fsdp.strategy = "no-shard", {{.*}}fsdp.world_size = 2 : i64}
// NOSHARD-NOT: fsdp.flat_parameter

// Uneven sizes are padded, and each unit says so where it begins.
// REMARK: shard.mlir:[[L0:[0-9]+]]:1: remark: unit 'layers.0': 15 trained elements padded to 16 (4 per rank)
// REMARK: remark: unit 'layers.1': 9 trained elements padded to 12 (3 per rank)
// REMARK: remark: unit 'layers.1': 3 frozen elements padded to 4 (1 per rank)
// REMARK: remark: unit 'root': 6 trained elements padded to 8 (2 per rank)

// Per unit: a global choice, then UNIT=true|false|N (keep 1/N after forward).
// PERUNIT: fsdp.unit @layers.0 {params = [@layers.0.w, @layers.0.b], reshard_after_forward = false}
// PERUNIT: fsdp.unit @layers.1 {params = [@layers.1.w, @layers.1.b], reshard_to = 2 : i64}
// PERUNIT: fsdp.unit @root {params = [@head.w]}
// BADN: error: --reshard-after-forward: '3' for unit 'root' must be default, true, false or a number of ranks that divides the shard group of 4
// BADUNIT: error: --reshard-after-forward names unit 'nope', which does not exist
// SGORESHARD: error: --reshard-after-forward does not apply to shard-grad-op

// NOUNITS: error: --strategy=full-shard needs fsdp.unit ops: run fsdp-wrap-units first
// UNKNOWN: error: unknown --strategy 'zero-4' (full-shard, shard-grad-op, no-shard or hybrid-shard)
// RESHARD: error: --reshard-after-forward: 'sometimes' for unit 'root' must be default, true, false or a number of ranks

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
