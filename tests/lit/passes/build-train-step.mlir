// RUN: fsdp-opt %s -split-input-file -fsdp-build-train-step -verify-diagnostics | FileCheck %s
// RUN: fsdp-opt %s -split-input-file '-fsdp-build-train-step=optimizer=sgd momentum=0.9 frozen=^emb grad-clip=1.0' | FileCheck %s --check-prefix=SGD
// RUN: fsdp-opt %s '-fsdp-build-train-step=grad-accum=4' | FileCheck %s --check-prefix=ACCUM

// With accumulation the micro-step differentiates loss / 4 and accumulates;
// @apply_update reads the sums and updates.
// ACCUM-LABEL: func.func @train_step
// ACCUM-SAME: -> (tensor<f32> {fsdp.name = "loss"})
// ACCUM: fsdp.constant dense<2.500000e-01>
// ACCUM-DAG: fsdp.accumulate_grad @emb, %{{.*}} : tensor<10x4xf32>
// ACCUM-DAG: fsdp.accumulate_grad @w, %{{.*}} : tensor<4x4xf32>
// ACCUM-NOT: fsdp.adamw
// ACCUM-LABEL: func.func @apply_update() -> (tensor<f32> {fsdp.name = "grad_norm"})
// ACCUM: fsdp.read_grad @emb : tensor<10x4xf32>
// ACCUM: fsdp.adamw @emb

// A tied embedding (read for the lookup and for the output projection)
// accumulates both gradients; every parameter gets one update.
fsdp.parameter @emb : tensor<10x4xf32> {module_path = ""}
fsdp.parameter @w : tensor<4x4xf32> {module_path = "fc"}
// CHECK: module attributes {fsdp.compute_dtype = f32, fsdp.train = {grad_accum = 1 : i64, grad_clip = 0.000000e+00 : f32, loss = "auto", loss_average = "ranks", lr_schedule = "constant", optimizer = "adamw", total_steps = 0 : i64, warmup_steps = 0 : i64}
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%{{.*}}: tensor<3xi64> {fsdp.name = "ids"}, %[[T:.*]]: tensor<3xi64> {fsdp.name = "targets"}) -> (tensor<f32> {fsdp.name = "loss"}, tensor<f32> {fsdp.name = "grad_norm"})
// CHECK: %[[CE:.*]] = fsdp.cross_entropy
// CHECK: fsdp.cross_entropy_grad
// CHECK: %[[SCATTER:.*]] = fsdp.scatter_add
// CHECK: %[[TIED:.*]] = fsdp.add %{{.*}}, %[[SCATTER]] : tensor<10x4xf32>, tensor<10x4xf32> -> tensor<10x4xf32>
// CHECK: %[[NORM:.*]] = fsdp.sqrt
// CHECK-DAG: fsdp.adamw @emb, %[[TIED]] {{.*}}weight_decay = 0.00999999977 : f32} : tensor<10x4xf32>
// CHECK-DAG: fsdp.adamw @w, %{{.*}} : tensor<4x4xf32>
// CHECK: return %[[CE]], %[[NORM]] : tensor<f32>, tensor<f32>
//
// Frozen parameters get no update; clipping scales the gradients by
// min(1, max_norm / (norm + 1e-6)).
// SGD-LABEL: func.func @train_step
// SGD: fsdp.min
// SGD-NOT: fsdp.sgd @emb
// SGD: fsdp.sgd @w, %{{.*}} scaled by %{{.*}} : tensor<f32> {lr = 1.000000e-03 : f32, momentum = 0.899999976 : f32, nesterov = false, weight_decay = 0.000000e+00 : f32} : tensor<4x4xf32>
// SGD-NOT: fsdp.sgd @emb
func.func @forward(%ids: tensor<3xi64> {fsdp.name = "ids"}, %t: tensor<3xi64> {fsdp.name = "targets"}) -> (tensor<f32> {fsdp.name = "loss"}) {
  %e = fsdp.get_parameter @emb : tensor<10x4xf32>
  %w = fsdp.get_parameter @w : tensor<4x4xf32>
  %x = fsdp.gather %e, %ids : tensor<10x4xf32>, tensor<3xi64> -> tensor<3x4xf32>
  %h = fsdp.matmul %x, %w : tensor<3x4xf32>, tensor<4x4xf32> -> tensor<3x4xf32>
  %a = fsdp.tanh %h : tensor<3x4xf32>
  %logits = fsdp.matmul %a, %e {transpose_rhs = true} : tensor<3x4xf32>, tensor<10x4xf32> -> tensor<3x10xf32>
  %loss = fsdp.cross_entropy %logits, %t : (tensor<3x10xf32>, tensor<3xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
