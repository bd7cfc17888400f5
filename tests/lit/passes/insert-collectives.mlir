// RUN: fsdp-opt %s -split-input-file -fsdp-build-train-step '-fsdp-shard=world-size=4 strategy=no-shard' -fsdp-insert-collectives | FileCheck %s

// no-shard: every gradient is averaged over the 4 ranks before the norm and
// the update read it; the logged loss is averaged too.
fsdp.parameter @w : tensor<4xf32> {module_path = ""}
// CHECK: module attributes {fsdp.compute_dtype = f32, fsdp.param_dtype = f32, fsdp.reduce_dtype = f32, fsdp.replicate_groups = 1 : i64, fsdp.strategy = "no-shard", {{.*}}fsdp.world_size = 4 : i64}
// CHECK-LABEL: func.func @train_step
// CHECK: %[[F:.*]] = fsdp.all_reduce %[[G:.*]] {group_size = 4 : i64, reduction = "avg"} : tensor<4xf32> -> !fsdp.future<tensor<4xf32>>
// CHECK: %[[A:.*]] = fsdp.wait %[[F]]
// CHECK: fsdp.sum_squares %[[A]]
// CHECK: fsdp.adamw @w, %[[A]]
// CHECK: %[[LF:.*]] = fsdp.all_reduce %{{.*}} {group_size = 4 : i64, reduction = "avg"} : tensor<f32>
// CHECK: %[[L:.*]] = fsdp.wait %[[LF]]
// CHECK: return %[[L]], %{{.*}} : tensor<f32>, tensor<f32>
func.func @forward(%x: tensor<4xf32> {fsdp.name = "x"}) -> (tensor<f32> {fsdp.name = "loss"}) {
  %w = fsdp.get_parameter @w : tensor<4xf32>
  %p = fsdp.mul %x, %w : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %s = fsdp.reduce_sum %p {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %s : tensor<f32>
}
