// The simulator prices a collective on the links its group really crosses,
// on a device in JSON with round numbers: 2 devices a node, a node's bus at
// 1 MB/s, its NICs together at 400 kB/s, no latency, 10 SMs of which a
// running collective holds 5.
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=4' -fsdp-insert-collectives -fsdp-schedule -fsdp-plan-memory '-fsdp-simulate=device=%S/Inputs/topology-device.json' 2>/dev/null | FileCheck %s --check-prefix=RING
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=4 strategy=hybrid-shard replicate-groups=2' -fsdp-insert-collectives -fsdp-schedule -fsdp-plan-memory '-fsdp-simulate=device=%S/Inputs/topology-device.json' 2>/dev/null | FileCheck %s --check-prefix=HYBRID
// RUN: echo '{"flops_f32": 1, "mem_bandwidth": 1, "intra_bandwidth": 1, "inter_bandwidth": 1, "sms": 4, "collective_ctas": 4}' > %t.json
// RUN: not fsdp-opt %s -fsdp-build-train-step=loss=mse '-fsdp-simulate=device=%t.json' 2>&1 | FileCheck %s --check-prefix=BADCTAS
// BADCTAS: error: --device: device file {{.*}}.json: collective_ctas must be fewer than sms

// Full-shard over 4 ranks on 2 nodes: a ring across nodes at the NICs'
// 400 kB/s (3/4 of the 48-byte buffer: 90 us). The second unit's gather
// queues behind the first on the link; layers.0's matmul (36 flops at
// 1 GFLOP/s: 36 ns) runs beside it on half the SMs: 72 ns.
// RING: fsdp.all_gather_start {{.*}}fsdp.sim = array<f64: 0.000000e+00, 9.000000e-05>{{.*}}unit = @layers.0
// RING: fsdp.all_gather_start {{.*}}fsdp.sim = array<f64: 9.000000e-05, 1.800000e-04>{{.*}}unit = @layers.1
// RING: fsdp.matmul {{.*}}fsdp.sim = array<f64: 9.000000e-05, 9.007200e-05>

// Hybrid-shard: the shard groups (2 ranks) stay on the node's bus (half
// of 40 bytes at 1 MB/s: 20 us); a replica group takes one rank of each
// node, so it shares the node's NICs with the node's other replica group:
// 200 kB/s, and an all-reduce of the 20-byte shard is 2 x 10 / 2e5 s.
// HYBRID: fsdp.all_gather_start {{.*}}fsdp.sim = array<f64: 0.000000e+00, 2.000000e-05>{{.*}}group = "shard"
// It starts once the backward has reduce-scattered the gradient (at
// 80.161 us) and ends 100 us later.
// HYBRID: fsdp.all_reduce {{.*}}fsdp.sim = array<f64: 8.0161000000000007E-5, 1.8016100000000003E-4>{{.*}}group = "replicate"

fsdp.parameter @"layers.0.w" : tensor<3x3xf32> {module_path = "layers.0"}
fsdp.parameter @"layers.1.w" : tensor<3x3xf32> {module_path = "layers.1"}
func.func @forward(%x: tensor<2x3xf32> {fsdp.name = "x"}) -> (tensor<2x3xf32> {fsdp.name = "y"}) {
  %w0 = fsdp.get_parameter @"layers.0.w" : tensor<3x3xf32>
  %h0 = fsdp.matmul %x, %w0 : tensor<2x3xf32>, tensor<3x3xf32> -> tensor<2x3xf32>
  %r0 = fsdp.tanh %h0 : tensor<2x3xf32>
  %w1 = fsdp.get_parameter @"layers.1.w" : tensor<3x3xf32>
  %h1 = fsdp.matmul %r0, %w1 : tensor<2x3xf32>, tensor<3x3xf32> -> tensor<2x3xf32>
  return %h1 : tensor<2x3xf32>
}
