// RUN: fsdp-opt %s -fsdp-build-train-step=compute-dtype=bf16 | FileCheck %s
// RUN: fsdp-opt %s -fsdp-build-train-step=compute-dtype=bf16 -fsdp-wrap-units=wrap=none -fsdp-shard='world-size=2 param-dtype=bf16' -fsdp-insert-collectives | FileCheck %s --check-prefix=GATHER
// RUN: fsdp-opt %s -fsdp-build-train-step=compute-dtype=bf16 -fsdp-wrap-units=wrap=none -fsdp-shard='world-size=2' -fsdp-insert-collectives | FileCheck %s --check-prefix=GATHER32
// RUN: fsdp-opt %s -fsdp-build-train-step=compute-dtype=bf16 -fsdp-shard='world-size=2 strategy=no-shard' -fsdp-insert-collectives | FileCheck %s --check-prefix=NOSHARD
// RUN: not fsdp-opt %s -fsdp-build-train-step=compute-dtype=f64 2>&1 | FileCheck %s --check-prefix=BAD

// Computing in bf16: the f32 input is cast on entry, parameters are read
// and constants stored in bf16, activations and their gradients are bf16;
// the reduced loss is f32. The two uses of the one (tied) read sum in bf16,
// as PyTorch's bf16 copy of the weight accumulates its gradient; every
// parameter's gradient is then cast to f32 (the master weights') for the
// norm and the update.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[IDS:.*]]: tensor<3xi64> {fsdp.name = "ids"}, %[[X:.*]]: tensor<3x4xf32> {fsdp.name = "x"}, %{{.*}}: tensor<3xi64> {fsdp.name = "targets"})
// CHECK: %[[XB:.*]] = fsdp.cast %[[X]] : tensor<3x4xf32> -> tensor<3x4xbf16>
// CHECK: fsdp.constant dense<5.000000e-01> : tensor<bf16>
// CHECK: fsdp.get_parameter @emb : tensor<10x4xbf16>
// CHECK: fsdp.get_parameter @w : tensor<4x4xbf16>
// CHECK: fsdp.matmul {{.*}} : tensor<3x4xbf16>, tensor<4x4xbf16> -> tensor<3x4xbf16>
// CHECK: %[[LOSS:.*]] = fsdp.cross_entropy {{.*}} : (tensor<3x10xbf16>, tensor<3xi64>) -> tensor<f32>
// Each cast sits where its gradient becomes final (so a unit's
// reduce-scatter can start during the backward), not before the return;
// the embedding's gradient is summed in f32 (as PyTorch's embedding
// backward accumulates) from a broadcast zero, not a stored splat, and
// rounded once.
// CHECK: fsdp.cross_entropy_grad {{.*}} -> tensor<3x10xbf16>
// CHECK: %[[DW:.*]] = fsdp.matmul {{.*}} -> tensor<4x4xbf16>
// CHECK-NEXT: %[[G2:.*]] = fsdp.cast %[[DW]] : tensor<4x4xbf16> -> tensor<4x4xf32>
// CHECK: %[[Z:.*]] = fsdp.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[ZS:.*]] = fsdp.broadcast %[[Z]] : tensor<f32> -> tensor<10x4xf32>
// CHECK-NEXT: %[[SA:.*]] = fsdp.scatter_add %[[ZS]]
// CHECK-NEXT: fsdp.cast %[[SA]] : tensor<10x4xf32> -> tensor<10x4xbf16>
// CHECK-NEXT: %[[TIED:.*]] = fsdp.add {{.*}} : tensor<10x4xbf16>, tensor<10x4xbf16> -> tensor<10x4xbf16>
// CHECK-NEXT: %[[G1:.*]] = fsdp.cast %[[TIED]] : tensor<10x4xbf16> -> tensor<10x4xf32>
// CHECK: fsdp.adamw @emb, %[[G1]] {{.*}} : tensor<10x4xf32>
// CHECK: fsdp.adamw @w, %[[G2]] {{.*}} : tensor<4x4xf32>
// CHECK: return %[[LOSS]], %{{.*}} : tensor<f32>, tensor<f32>
//
// Gathered in bf16 and computed in bf16: the views are read as they are.
// GATHER-LABEL: func.func @train_step
// GATHER: fsdp.all_gather_start {{.*}} -> !fsdp.future<tensor<56xbf16>>
// GATHER: %[[EV:.*]] = fsdp.param_view {{.*}} -> tensor<10x4xbf16>
// GATHER-NEXT: %[[WV:.*]] = fsdp.param_view {{.*}} -> tensor<4x4xbf16>
// GATHER-NEXT: fsdp.gather %[[EV]]
// GATHER-NOT: fsdp.cast
// GATHER: fsdp.matmul %{{.*}}, %[[WV]]
// The bf16 gradients are packed as they are into the f32 flat gradient
// (no f32 copy of either), which is reduced in f32.
// GATHER-NOT: fsdp.cast %{{.*}} : tensor<4x4xbf16> -> tensor<4x4xf32>
// GATHER: fsdp.pack {{.*}} : (tensor<10x4xbf16>, tensor<4x4xbf16>) -> tensor<56xf32>
// GATHER-NEXT: fsdp.reduce_scatter_start {{.*}} -> !fsdp.future<tensor<28xf32>>
//
// Gathered in f32 and computed in bf16: each view is cast.
// GATHER32-LABEL: func.func @train_step
// GATHER32: fsdp.all_gather_start {{.*}} -> !fsdp.future<tensor<56xf32>>
// GATHER32: %[[V:.*]] = fsdp.param_view {{.*}} -> tensor<10x4xf32>
// GATHER32: fsdp.cast %[[V]] : tensor<10x4xf32> -> tensor<10x4xbf16>
//
// Unsharded: the stored f32 parameter is read and cast.
// NOSHARD-LABEL: func.func @train_step
// NOSHARD: %[[P:.*]] = fsdp.get_parameter @emb : tensor<10x4xf32>
// NOSHARD: fsdp.cast %[[P]] : tensor<10x4xf32> -> tensor<10x4xbf16>
//
// BAD: unknown --compute-dtype 'f64' (f32, bf16 or f16)
fsdp.parameter @emb : tensor<10x4xf32> {module_path = ""}
fsdp.parameter @w : tensor<4x4xf32> {module_path = "fc"}
func.func @forward(%ids: tensor<3xi64> {fsdp.name = "ids"}, %xin: tensor<3x4xf32> {fsdp.name = "x"}, %t: tensor<3xi64> {fsdp.name = "targets"}) -> (tensor<f32> {fsdp.name = "loss"}) {
  %half = fsdp.constant dense<0.5> : tensor<f32>
  %e = fsdp.get_parameter @emb : tensor<10x4xf32>
  %w = fsdp.get_parameter @w : tensor<4x4xf32>
  %x0 = fsdp.gather %e, %ids : tensor<10x4xf32>, tensor<3xi64> -> tensor<3x4xf32>
  %xs = fsdp.mul %xin, %half : tensor<3x4xf32>, tensor<f32> -> tensor<3x4xf32>
  %x = fsdp.add %x0, %xs : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %h = fsdp.matmul %x, %w : tensor<3x4xf32>, tensor<4x4xf32> -> tensor<3x4xf32>
  %a = fsdp.tanh %h : tensor<3x4xf32>
  %logits = fsdp.matmul %a, %e {transpose_rhs = true} : tensor<3x4xf32>, tensor<10x4xf32> -> tensor<3x10xf32>
  %loss = fsdp.cross_entropy %logits, %t : (tensor<3x10xf32>, tensor<3xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
