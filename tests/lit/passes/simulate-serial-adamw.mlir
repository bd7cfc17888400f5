// AdamW's CPU loop splits over the cores from 2049 elements on, not 32769
// (common/CostRows.h: kCpuParallelMinAdamW, the kernel's threshold in
// runtime/cpu/kernels/Optimizers.cpp), and the simulator prices it so:
// here "adamw" costs 1 ns a flop (15 an element) and "adamw.serial" a
// fixed 7 us: the update of a 2048-element parameter takes 7 us, of a
// 2049-element one 30.735 us.
// RUN: rm -rf %t && mkdir -p %t
// RUN: echo '{"flops_f32": 1e12, "mem_bandwidth": 1e12, "intra_bandwidth": 1e12, "inter_bandwidth": 1e12, "cores": 2, "threads": 2, "op_cost": {"adamw": [1e-9, 0], "adamw.serial": [0, 0]}, "op_overhead": {"adamw.serial": 7e-6}}' > %t/cpu.json
// RUN: sed 's/2048/2049/g' %s > %t/large.mlir
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=1' -fsdp-insert-collectives -fsdp-schedule -fsdp-plan-memory '-fsdp-simulate=device=%t/cpu.json' -o %t/small.out 2>/dev/null
// RUN: fsdp-opt %t/large.mlir -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=1' -fsdp-insert-collectives -fsdp-schedule -fsdp-plan-memory '-fsdp-simulate=device=%t/cpu.json' -o %t/large.out 2>/dev/null
// RUN: python3 -c "import re,sys; d=lambda f: (lambda m: float(m[1])-float(m[0]))(re.search(r'fsdp.adamw @w.*fsdp.sim = array<f64: ([^,]+), ([^>]+)>', open(f).read()).groups()); print('%%.3f %%.3f' %% (d('%t/small.out')*1e6, d('%t/large.out')*1e6))" | FileCheck %s --check-prefix=TIMES
// TIMES: 7.000 30.735
fsdp.parameter @"w" : tensor<2048xf32> {module_path = "layers.0"}
func.func @forward(%x: tensor<8x2048xf32> {fsdp.name = "x"}) -> (tensor<8x2048xf32> {fsdp.name = "y"}) {
  %w = fsdp.get_parameter @"w" : tensor<2048xf32>
  %a = fsdp.add %x, %w : tensor<8x2048xf32>, tensor<2048xf32> -> tensor<8x2048xf32>
  return %a : tensor<8x2048xf32>
}
