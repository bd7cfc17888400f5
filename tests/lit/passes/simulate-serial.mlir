// On a CPU (a device with cores), an op whose largest tensor has at most
// 32768 elements runs its loop on one thread (common/CostRows.h:
// serialOnCpu, the CPU kernels' kParallelMin) and is priced by the fit
// keyed "op.serial" where the device has one. Here "neg" costs 1 ns a
// flop and "neg.serial" a fixed 5 us: the 8x4096 neg (32768 elements)
// takes 5 us, an 8x4097 one (32776) 32.776 us.
// RUN: rm -rf %t && mkdir -p %t
// RUN: echo '{"flops_f32": 1e12, "mem_bandwidth": 1e12, "intra_bandwidth": 1e12, "inter_bandwidth": 1e12, "cores": 2, "threads": 2, "op_cost": {"neg": [1e-9, 0], "neg.serial": [0, 0]}, "op_overhead": {"neg.serial": 5e-6}}' > %t/both.json
// RUN: echo '{"flops_f32": 1e12, "mem_bandwidth": 1e12, "intra_bandwidth": 1e12, "inter_bandwidth": 1e12, "cores": 2, "threads": 2, "op_cost": {"neg": [1e-9, 0]}, "op_overhead": {"neg.serial": 5e-6}}' > %t/serial.json
// RUN: sed 's/4096/4097/g' %s > %t/large.mlir
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=1' -fsdp-insert-collectives -fsdp-schedule -fsdp-plan-memory '-fsdp-simulate=device=%t/both.json' 2>/dev/null | FileCheck %s
// CHECK: fsdp.neg %arg0 {{{.*}}fsdp.sim = array<f64: 0.000000e+00, 5.000000e-06>} : tensor<8x4096xf32>
// RUN: fsdp-opt %t/large.mlir -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=1' -fsdp-insert-collectives -fsdp-schedule -fsdp-plan-memory '-fsdp-simulate=device=%t/both.json' 2>/dev/null | FileCheck %s --check-prefix=LARGE
// LARGE: fsdp.neg %arg0 {{{.*}}fsdp.sim = array<f64: 0.000000e+00, 3.277600e-05>} : tensor<8x4097xf32>
// Without a fitted "neg.serial" cost the small neg is priced as "neg" (its
// overhead, keyed apart, still its own).
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=1' -fsdp-insert-collectives -fsdp-schedule -fsdp-plan-memory '-fsdp-simulate=device=%t/serial.json' 2>/dev/null | FileCheck %s --check-prefix=FALLBACK
// FALLBACK: fsdp.neg %arg0 {{{.*}}fsdp.sim = array<f64: 0.000000e+00, 3.776800e-05>} : tensor<8x4096xf32>
fsdp.parameter @"w" : tensor<4xf32> {module_path = "layers.0"}
func.func @forward(%x: tensor<8x4096xf32> {fsdp.name = "x"}) -> (tensor<8x4096xf32> {fsdp.name = "y"}) {
  %w = fsdp.get_parameter @"w" : tensor<4xf32>
  %a = fsdp.neg %x : tensor<8x4096xf32>
  return %a : tensor<8x4096xf32>
}
