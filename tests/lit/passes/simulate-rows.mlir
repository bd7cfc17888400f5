// Attention is priced per query row where the device's fitted cost has a
// price per row (common/CostRows.h): [per_flop, on_bytes, per_row]. The
// queries are 2 x 4 heads x 8 positions = 64 rows: the forward takes 64 us
// at 1 us a row, the backward 128 us at 2 us (its flops free).
// RUN: rm -rf %t && mkdir -p %t
// RUN: echo '{"flops_f32": 1e12, "mem_bandwidth": 1e12, "intra_bandwidth": 1e12, "inter_bandwidth": 1e12, "op_cost": {"attention": [0, 0, 1e-6], "attention_grad": [0, 0, 2e-6]}}' > %t/rows.json
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=1' -fsdp-insert-collectives -fsdp-schedule -fsdp-plan-memory '-fsdp-simulate=device=%t/rows.json' 2>/dev/null | FileCheck %s
// CHECK: fsdp.attention {{.*}}fsdp.sim = array<f64: 3.276800e-08, 6.4032767999999994E-5>
// CHECK: fsdp.attention_grad {{.*}}fsdp.sim = array<f64: 6.4102420000000006E-5, 1.9210241999999999E-4>
// Without a price per row the pair prices flops and bytes only.
// RUN: echo '{"flops_f32": 1e12, "mem_bandwidth": 1e12, "intra_bandwidth": 1e12, "inter_bandwidth": 1e12, "op_cost": {"attention": [0, 0], "attention_grad": [0, 0]}}' > %t/pair.json
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=1' -fsdp-insert-collectives -fsdp-schedule -fsdp-plan-memory '-fsdp-simulate=device=%t/pair.json' 2>/dev/null | FileCheck %s --check-prefix=PAIR
// PAIR: fsdp.attention {{.*}}fsdp.sim = array<f64: 3.276800e-08, 3.276800e-08>
// A fourth number is a price per byte wherever the bytes are (a GEMM's,
// FitDevice.cpp): the matmul reads 4096 + 1024 bytes and writes 4096, at
// 1 ns a byte 9.216 us.
// RUN: echo '{"flops_f32": 1e12, "mem_bandwidth": 1e12, "intra_bandwidth": 1e12, "inter_bandwidth": 1e12, "op_cost": {"matmul": [0, 0, 0, 1e-9]}}' > %t/bytes.json
// RUN: fsdp-opt %s -fsdp-build-train-step=loss=mse -fsdp-wrap-units '-fsdp-shard=world-size=1' -fsdp-insert-collectives -fsdp-schedule -fsdp-plan-memory '-fsdp-simulate=device=%t/bytes.json' 2>/dev/null | FileCheck %s --check-prefix=BYTES
// BYTES: fsdp.matmul {{.*}}fsdp.sim = array<f64: 0.000000e+00, 9.216
// A fifth number, or a negative price per row, is an error naming it.
// RUN: echo '{"flops_f32": 1, "mem_bandwidth": 1, "intra_bandwidth": 1, "inter_bandwidth": 1, "op_cost": {"attention": [0, 0, 1, 1, 1]}}' > %t/four.json
// RUN: echo '{"flops_f32": 1, "mem_bandwidth": 1, "intra_bandwidth": 1, "inter_bandwidth": 1, "op_cost": {"attention": [0, 0, -1e-6]}}' > %t/negative.json
// RUN: not fsdp-opt %s -fsdp-build-train-step=loss=mse '-fsdp-simulate=device=%t/four.json' 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not fsdp-opt %s -fsdp-build-train-step=loss=mse '-fsdp-simulate=device=%t/negative.json' 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: error: --device: device file {{.*}}.json: op_cost.attention must be [per_flop, on_bytes], [per_flop, on_bytes, per_row] or [per_flop, on_bytes, per_row, per_byte], numbers at least 0
fsdp.parameter @"w" : tensor<16x16xf32> {module_path = "layers.0"}
func.func @forward(%x: tensor<2x4x8x16xf32> {fsdp.name = "x"}) -> (tensor<2x4x8x16xf32> {fsdp.name = "y"}) {
  %w = fsdp.get_parameter @"w" : tensor<16x16xf32>
  %q = fsdp.matmul %x, %w : tensor<2x4x8x16xf32>, tensor<16x16xf32> -> tensor<2x4x8x16xf32>
  %a = fsdp.attention %q, %q, %q {causal = true, scale = 0.25 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %a : tensor<2x4x8x16xf32>
}
