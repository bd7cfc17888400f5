// A binary op on the CPU kernel's strided loop (common/CostRows.h:
// binaryPath, the loop the kernel itself chooses by) is priced by the fit
// keyed "mul.strided" where the device has one; a mul of equal shapes by
// "mul". Here "mul" is free and "mul.strided" 1 us a flop: x * w costs 0,
// (x * w) * s, s of shape 2x1 (no trailing repeat, no scalar), 6 us.
// RUN: rm -rf %t && mkdir -p %t
// RUN: echo '{"flops_f32": 1e12, "mem_bandwidth": 1e12, "intra_bandwidth": 1e12, "inter_bandwidth": 1e12, "op_cost": {"mul": [0, 0], "mul.strided": [1e-6, 0]}}' > %t/variant.json
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=1' -fsdp-insert-collectives -fsdp-schedule -fsdp-plan-memory '-fsdp-simulate=device=%t/variant.json' 2>/dev/null | FileCheck %s
// CHECK: fsdp.mul %arg0, %{{.*}} {{{.*}}fsdp.sim = array<f64: 0.000000e+00, 0.000000e+00>} : tensor<2x3xf32>, tensor<2x3xf32>
// CHECK: fsdp.mul %{{.*}}, %arg1 {{{.*}}fsdp.sim = array<f64: 0.000000e+00, 6.000000e-06>} : tensor<2x3xf32>, tensor<2x1xf32>
// Without "mul.strided" the strided mul falls back to "mul" (free here).
// RUN: echo '{"flops_f32": 1e12, "mem_bandwidth": 1e12, "intra_bandwidth": 1e12, "inter_bandwidth": 1e12, "op_cost": {"mul": [0, 0]}}' > %t/plain.json
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=1' -fsdp-insert-collectives -fsdp-schedule -fsdp-plan-memory '-fsdp-simulate=device=%t/plain.json' 2>/dev/null | FileCheck %s --check-prefix=PLAIN
// PLAIN: fsdp.mul %{{.*}}, %arg1 {{{.*}}fsdp.sim = array<f64: 0.000000e+00, 0.000000e+00>} : tensor<2x3xf32>, tensor<2x1xf32>
fsdp.parameter @"w" : tensor<2x3xf32> {module_path = "layers.0"}
func.func @forward(%x: tensor<2x3xf32> {fsdp.name = "x"}, %s: tensor<2x1xf32> {fsdp.name = "s"}) -> (tensor<2x3xf32> {fsdp.name = "y"}) {
  %w = fsdp.get_parameter @"w" : tensor<2x3xf32>
  %p = fsdp.mul %x, %w : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %q = fsdp.mul %p, %s : tensor<2x3xf32>, tensor<2x1xf32> -> tensor<2x3xf32>
  return %q : tensor<2x3xf32>
}
