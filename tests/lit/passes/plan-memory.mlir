// RUN: fsdp-opt %s -fsdp-plan-memory | FileCheck %s
// RUN: fsdp-opt %s -fsdp-plan-memory -fsdp-emit-plan | FileCheck %s --check-prefix=PLAN

// Results placed while the op's inputs are live; a buffer reuses the bytes
// of one whose lifetime ended (64-byte aligned); reshapes alias their operand;
// parameter reads and constants live outside the arena (-1).
fsdp.parameter @w : tensor<16x16xf32> {module_path = ""}
// CHECK: module attributes {fsdp.arena_bytes = 3072 : i64, fsdp.live_peak_bytes = 3072 : i64}
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %arg0: tensor<16x16xf32> {fsdp.name = "x", fsdp.offset = 0 : i64}
func.func @train_step(%x: tensor<16x16xf32> {fsdp.name = "x"}) -> (tensor<f32> {fsdp.name = "loss"}) {
  // CHECK: fsdp.get_parameter @w {fsdp.offsets = array<i64: -1>}
  %w = fsdp.get_parameter @w : tensor<16x16xf32>
  // CHECK: fsdp.matmul {{.*}} {fsdp.offsets = array<i64: 1024>}
  %a = fsdp.matmul %x, %w : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  // %a is still read by the tanh: its result goes above.
  // CHECK: fsdp.tanh {{.*}} {fsdp.offsets = array<i64: 2048>}
  %b = fsdp.tanh %a : tensor<16x16xf32>
  // %a died at the tanh: the add reuses its bytes (%x, read here, stays).
  // CHECK: fsdp.add {{.*}} {fsdp.offsets = array<i64: 1024>}
  %c = fsdp.add %b, %x : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  // CHECK: fsdp.reshape {{.*}} {fsdp.offsets = array<i64: 1024>}
  %r = fsdp.reshape %c : tensor<16x16xf32> -> tensor<256xf32>
  // %x died at the add: the sum takes its bytes.
  // CHECK: fsdp.reduce_sum {{.*}} {axes = array<i64: 0>, fsdp.offsets = array<i64: 0>, keepdims = false}
  %s = fsdp.reduce_sum %r {axes = array<i64: 0>, keepdims = false} : tensor<256xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// PLAN: "arena_bytes": 3072,
// PLAN: "inputs": [
// PLAN: "name": "x",
// PLAN-NEXT: "offset": 0,
// PLAN: "outputs": [
// PLAN: "name": "loss",
// PLAN-NEXT: "offset": 0,
// PLAN: "params": [
// PLAN: "name": "w",
// PLAN: "program": [
// PLAN: "space": "param"
// PLAN: "op": "matmul",
// PLAN: "version": 1
