// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=2' -fsdp-insert-collectives -fsdp-schedule -fsdp-plan-memory '-fsdp-simulate=device=h100-sxm' 2>/dev/null | FileCheck %s
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=2' -fsdp-insert-collectives -fsdp-schedule -fsdp-plan-memory '-fsdp-simulate=device=%S/Inputs/slow-device.json' 2>/dev/null | FileCheck %s --check-prefix=SLOW
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=2' -fsdp-insert-collectives -fsdp-schedule -fsdp-plan-memory '-fsdp-simulate=device=%S/Inputs/no-progress-device.json' 2>/dev/null | FileCheck %s --check-prefix=NOPROGRESS
// RUN: not fsdp-opt %s -fsdp-build-train-step=loss=mse '-fsdp-simulate=device=tpu-v9' 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=2' -fsdp-insert-collectives -fsdp-schedule -fsdp-plan-memory '-fsdp-simulate=device=cpu' 2>/dev/null | FileCheck %s --check-prefix=CPU
// On the CPU the process also holds the runtime (76 MiB: libraries, MPI,
// OpenBLAS's buffers) and, while OpenMPI reduces a unit's gradient, a
// temporary as large as the reduce-scatter's input: 10 floats (3x3 padded
// to a multiple of 2).
// CPU: fsdp.predicted = {{{.*}}comm_scratch_bytes = 40 : i64{{.*}}peak_bytes = [[P:[0-9]+]] : i64, process_peak_bytes = {{[0-9]+}} : i64, runtime_bytes = 79691776 : i64
// RUN: rm -rf %t && mkdir -p %t
// RUN: echo '{"flops_f32": 1, "mem_bandwidth": 1, "intra_bandwidth": 1, "inter_bandwidth": 1, "async_progress": 1}' > %t/progress.json
// RUN: not fsdp-opt %s -fsdp-build-train-step=loss=mse '-fsdp-simulate=device=%t/progress.json' 2>&1 | FileCheck %s --check-prefix=BADPROGRESS
// BADPROGRESS: error: --device: device file {{.*}}progress.json: async_progress must be true or false
// RUN: echo '{"flops_f32": 1, "mem_bandwidth": 1, "intra_bandwidth": 1, "inter_bandwidth": 1, "op_scale_threads": {"two": {"add": 1}}}' > %t/threads.json
// RUN: not fsdp-opt %s -fsdp-build-train-step=loss=mse '-fsdp-simulate=device=%t/threads.json' 2>&1 | FileCheck %s --check-prefix=BADTHREADS
// BADTHREADS: error: --device: device file {{.*}}threads.json: op_scale_threads.two: must be a thread count mapped to {op: number}
// RUN: echo '{"flops_f32": 1, "mem_bandwidth": 1, "intra_bandwidth": 1, "inter_bandwidth": 1, "op_scale_threads": {"1": {"add": -2}}}' > %t/threads2.json
// RUN: not fsdp-opt %s -fsdp-build-train-step=loss=mse '-fsdp-simulate=device=%t/threads2.json' 2>&1 | FileCheck %s --check-prefix=BADFACTOR
// BADFACTOR: error: --device: device file {{.*}}threads2.json: op_scale_threads.1.add must be a positive number
// The calibration's fitted costs are checked as strictly.
// RUN: echo '{"flops_f32": 1, "mem_bandwidth": 1, "intra_bandwidth": 1, "inter_bandwidth": 1, "op_overhead": {"add": -1e-6}}' > %t/overhead.json
// RUN: not fsdp-opt %s -fsdp-build-train-step=loss=mse '-fsdp-simulate=device=%t/overhead.json' 2>&1 | FileCheck %s --check-prefix=BADOVERHEAD
// BADOVERHEAD: error: --device: device file {{.*}}overhead.json: op_overhead.add must be a number of seconds, at least 0
// RUN: echo '{"flops_f32": 1, "mem_bandwidth": 1, "intra_bandwidth": 1, "inter_bandwidth": 1, "op_cost_threads": {"1": {"matmul": [1e-12]}}}' > %t/cost.json
// RUN: not fsdp-opt %s -fsdp-build-train-step=loss=mse '-fsdp-simulate=device=%t/cost.json' 2>&1 | FileCheck %s --check-prefix=BADCOST
// BADCOST: error: --device: device file {{.*}}cost.json: op_cost_threads.1.matmul must be [per_flop, on_bytes], [per_flop, on_bytes, per_row] or [per_flop, on_bytes, per_row, per_byte], numbers at least 0
// A field of the wrong type is an error naming it, never the default.
// RUN: echo '{"flops_f32": 1, "mem_bandwidth": 1, "intra_bandwidth": 1, "inter_bandwidth": 1, "gemm_efficiency": "0.5"}' > %t/quoted.json
// RUN: not fsdp-opt %s -fsdp-build-train-step=loss=mse '-fsdp-simulate=device=%t/quoted.json' 2>&1 | FileCheck %s --check-prefix=QUOTED
// QUOTED: error: --device: device file {{.*}}quoted.json: 'gemm_efficiency' is not a number;
// RUN: echo '{"flops_f32": 1, "mem_bandwidth": 1, "intra_bandwidth": 1, "inter_bandwidth": 1, "memory_efficiency": 1.5}' > %t/memeff.json
// RUN: not fsdp-opt %s -fsdp-build-train-step=loss=mse '-fsdp-simulate=device=%t/memeff.json' 2>&1 | FileCheck %s --check-prefix=MEMEFF
// MEMEFF: error: --device: device file {{.*}}memeff.json: gemm_efficiency, attention_efficiency, memory_efficiency and sustained must be within (0, 1]
// `sustained`: the fraction of their best rate GEMMs and attention keep in
// a step. At 1000 flop/s the first matmul's 36 flops take 36 ms, at half
// of it 72 ms.
// RUN: echo '{"flops_f32": 1e3, "mem_bandwidth": 1e12, "intra_bandwidth": 1e12, "inter_bandwidth": 1e12}' > %t/full.json
// RUN: echo '{"flops_f32": 1e3, "mem_bandwidth": 1e12, "intra_bandwidth": 1e12, "inter_bandwidth": 1e12, "sustained": 0.5}' > %t/half.json
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=2' -fsdp-insert-collectives -fsdp-schedule -fsdp-plan-memory '-fsdp-simulate=device=%t/full.json' 2>/dev/null | FileCheck %s --check-prefix=FULL
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=2' -fsdp-insert-collectives -fsdp-schedule -fsdp-plan-memory '-fsdp-simulate=device=%t/half.json' 2>/dev/null | FileCheck %s --check-prefix=HALF
// FULL: fsdp.matmul %arg0, {{.*}}fsdp.cost = array<i64: 36, 84>{{.*}}fsdp.sim = array<f64: 2.000000e-11, 0.036000000019999999>
// HALF: fsdp.matmul %arg0, {{.*}}fsdp.cost = array<i64: 36, 84>{{.*}}fsdp.sim = array<f64: 2.000000e-11, 0.072000000019999996>
// RUN: echo '{"flops_f32": 1, "mem_bandwidth": 1, "intra_bandwidth": 1, "inter_bandwidth": 1, "sustained": 0}' > %t/sustained0.json
// RUN: not fsdp-opt %s -fsdp-build-train-step=loss=mse '-fsdp-simulate=device=%t/sustained0.json' 2>&1 | FileCheck %s --check-prefix=SUSTAINED0
// SUSTAINED0: error: --device: device file {{.*}}sustained0.json: gemm_efficiency, attention_efficiency, memory_efficiency and sustained must be within (0, 1]
// "base": a built-in device the file changes. Only what differs is given
// (a 500 W H100's peak): the rest, the H100's NVLink gather below
// included, is the built-in's.
// RUN: echo '{"base": "h100-sxm", "name": "h100-500w", "flops_bf16": 886e12}' > %t/based.json
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=2' -fsdp-insert-collectives -fsdp-schedule -fsdp-plan-memory '-fsdp-simulate=device=%t/based.json' 2>/dev/null | FileCheck %s --check-prefix=BASED
// BASED: device = "h100-500w", device_file = "{{.*}}based.json"
// BASED: fsdp.all_gather_start %{{.*}} {fsdp.offsets = array<i64: {{[0-9]+}}>, fsdp.sim = array<f64: 0.000000e+00, 5.0000555555555558E-6>
// A base is a built-in's name: not a file (no chains), not a number.
// RUN: echo '{"base": "tpu-v9"}' > %t/base1.json
// RUN: echo '{"base": "%t/based.json"}' > %t/base2.json
// RUN: echo '{"base": 3}' > %t/base3.json
// RUN: not fsdp-opt %s -fsdp-build-train-step=loss=mse '-fsdp-simulate=device=%t/base1.json' 2>&1 | FileCheck %s --check-prefix=BADBASE
// RUN: not fsdp-opt %s -fsdp-build-train-step=loss=mse '-fsdp-simulate=device=%t/base2.json' 2>&1 | FileCheck %s --check-prefix=BADBASE
// RUN: not fsdp-opt %s -fsdp-build-train-step=loss=mse '-fsdp-simulate=device=%t/base3.json' 2>&1 | FileCheck %s --check-prefix=BADBASE
// BADBASE: error: --device: device file {{.*}}base{{[123]}}.json: base must name a built-in device (h100-sxm, h200, a100-80g, cpu-generic)
// UNKNOWN: error: --device: unknown device 'tpu-v9' (h100-sxm, h200, a100-80g, cpu, cpu-generic, or a JSON file)

// On an H100 pair: the first gather is 2 x 5 floats over NVLink: one
// latency step (5 us) plus 20 bytes at NCCL's measured 360 GB/s bus
// bandwidth (not the 450 GB/s link peak); the wait exposes all of it
// (nothing to overlap with yet); the step time and the memory the plan
// needs are summarised on the module.
// On a GPU the runtime's own bytes and MPI's temporaries are not in the
// plan's device memory: the process peak is the plan's.
// CHECK: fsdp.predicted = {arena_bytes = [[ARENA:[0-9]+]] : i64, comm_scratch_bytes = 0 : i64, comm_seconds = {{.*}}, compute_seconds = {{.*}}, device = "h100-sxm", device_file = "", exposed_comm_seconds = {{.*}}, peak_bytes = [[PEAK:[0-9]+]] : i64, process_peak_bytes = [[PEAK]] : i64, runtime_bytes = 0 : i64, scratch_bytes = {{[0-9]+}} : i64, state_bytes = {{[0-9]+}} : i64, step_seconds = {{.*}}}
// CHECK: fsdp.all_gather_start %{{.*}} {fsdp.offsets = array<i64: {{[0-9]+}}>, fsdp.sim = array<f64: 0.000000e+00, 5.0000555555555558E-6>
// CHECK-NEXT: fsdp.wait %{{.*}} {fsdp.offsets = {{.*}}, fsdp.sim = array<f64: 5.0000555555555558E-6, 5.0000555555555558E-6>}

// A device described in JSON: across nodes (one device per node) at
// 100 kB/s, the gathers dominate: 1 ms latency + 20 bytes / 1e5 B/s.
// SLOW: device = "slow"
// SLOW: fsdp.all_gather_start %{{.*}}fsdp.sim = array<f64: 0.000000e+00, 0.0012000000000000001>
// Without asynchronous progress (MPI's collectives move only inside a
// wait) the prefetched gather of layers.1, issued before layers.0's
// matmul, is priced from its wait on: after layers.0's tanh.
// NOPROGRESS: fsdp.all_gather_start %{{.*}}fsdp.sim = array<f64: 0.000000e+00, 1.020000e-03>
// NOPROGRESS: fsdp.all_gather_start %{{.*}}fsdp.sim = array<f64: [[TANH:[0-9.e-]+]], 0.0020401320000000001>{{.*}}unit = @layers.1
// NOPROGRESS: fsdp.tanh %{{.*}}fsdp.sim = array<f64: {{[0-9.e-]+}}, [[TANH]]>
// Collectives that progress on threads of their own (Gloo's) are priced
// the same on a CPU whose cores the ranks' kernels all take (2 ranks, a
// thread each on 2 cores): their transfers wait for a core. With a core
// free (3 cores) the prefetched gather moves as soon as it is issued.
// RUN: echo '{"name": "gloo-like", "flops_f32": 1e9, "mem_bandwidth": 1e9, "intra_bandwidth": 1e6, "inter_bandwidth": 1e6, "intra_latency": 1e-3, "inter_latency": 1e-3, "async_progress": true, "cores": 2}' > %t/busy.json
// RUN: echo '{"name": "gloo-like", "flops_f32": 1e9, "mem_bandwidth": 1e9, "intra_bandwidth": 1e6, "inter_bandwidth": 1e6, "intra_latency": 1e-3, "inter_latency": 1e-3, "async_progress": true, "cores": 3}' > %t/free.json
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=2' -fsdp-insert-collectives -fsdp-schedule -fsdp-plan-memory '-fsdp-simulate=device=%t/busy.json' 2>/dev/null | FileCheck %s --check-prefix=NOPROGRESS
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=2' -fsdp-insert-collectives -fsdp-schedule -fsdp-plan-memory '-fsdp-simulate=device=%t/free.json' 2>/dev/null | FileCheck %s --check-prefix=FREECORE
// FREECORE: fsdp.all_gather_start %{{.*}}fsdp.sim = array<f64: 0.000000e+00, 1.020000e-03>
// FREECORE: fsdp.all_gather_start %{{.*}}fsdp.sim = array<f64: 1.020000e-03, 2.040000e-03>{{.*}}unit = @layers.1

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
