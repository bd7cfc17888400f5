// The same plan priced as fsdp-run runs it and as eager PyTorch FSDP2 ran
// torchtitan's Llama (simulate-runtime=fsdp2-eager), on an H100 pair (4 us a
// kernel launch): FSDP2 copies each gathered unit out of its flat buffer
// on the compute stream (the wait lasts a launch more), divides each
// reduce-scatter's input in place before it (the reduce-scatter starts a
// launch later), runs RMSNorm as 8 eager f32 kernels and its backward as
// 12, and AdamW(foreach=True) as 8 passes.
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=2' -fsdp-insert-collectives -fsdp-schedule -fsdp-plan-memory '-fsdp-simulate=device=h100-sxm' 2>/dev/null | FileCheck %s --check-prefix=FSDP
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=2' -fsdp-insert-collectives -fsdp-schedule -fsdp-plan-memory '-fsdp-simulate=device=h100-sxm simulate-runtime=fsdp2-eager' 2>/dev/null | FileCheck %s --check-prefix=EAGER
// RUN: not fsdp-opt %s -fsdp-build-train-step=loss=mse '-fsdp-simulate=device=h100-sxm simulate-runtime=fsdp1' 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: error: --simulate-runtime must be fsdp or fsdp2-eager, not 'fsdp1'

// FSDP: fsdp.wait %{{.*}} {{{.*}}fsdp.sim = array<f64: 5.0001111111111112E-6, 5.0001111111111112E-6>}
// FSDP: fsdp.rms_norm {{.*}}fsdp.sim = array<f64: 9.000153565505803E-6, 1.3000180099502485E-5>}
// FSDP: fsdp.rms_norm_grad {{.*}}fsdp.sim = array<f64: 4.5000367164179102E-5, 4.9000430845771141E-5>}
// FSDP: fsdp.pack {{.*}}fsdp.sim = array<f64: 5.3000473300165832E-5, 5.70005263681592E-5>
// FSDP-NEXT: fsdp.reduce_scatter_start {{.*}}fsdp.sim = array<f64: 5.70005263681592E-5,
// FSDP: fsdp.adamw {{.*}}fsdp.sim = array<f64: 9.6000717578772771E-5, 1.0000081044776117E-4>

// EAGER: fsdp.wait %{{.*}} {{{.*}}fsdp.sim = array<f64: 5.0001111111111112E-6, 9.0001641791044768E-6>}
// EAGER: fsdp.rms_norm {{.*}}fsdp.sim = array<f64: 1.300020663349917E-5, 4.5000323383084575E-5>}
// EAGER: fsdp.rms_norm_grad {{.*}}fsdp.sim = array<f64: 7.7000510447761196E-5, 1.2500075456053068E-4>}
// EAGER: fsdp.pack {{.*}}fsdp.sim = array<f64: 1.2900079701492538E-4, 1.3300085008291875E-4>
// EAGER-NEXT: fsdp.reduce_scatter_start {{.*}}fsdp.sim = array<f64: 1.3700090315091213E-4,
// EAGER: fsdp.adamw {{.*}}fsdp.sim = array<f64: 1.7600109436152571E-4, 2.0800135970149255E-4>

fsdp.parameter @"layers.0.w" : tensor<4x4xf32> {module_path = "layers.0"}
fsdp.parameter @"layers.0.g" : tensor<4xf32> {module_path = "layers.0"}
func.func @forward(%x: tensor<2x4xf32> {fsdp.name = "x"}) -> (tensor<2x4xf32> {fsdp.name = "y"}) {
  %w = fsdp.get_parameter @"layers.0.w" : tensor<4x4xf32>
  %g = fsdp.get_parameter @"layers.0.g" : tensor<4xf32>
  %h = fsdp.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %y = fsdp.rms_norm %h, %g {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}
