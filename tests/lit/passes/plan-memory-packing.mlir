// RUN: fsdp-opt %s -fsdp-plan-memory | FileCheck %s
// RUN: fsdp-opt %s '-fsdp-plan-memory=estimate=true' | FileCheck %s --check-prefix=ESTIMATE

// estimate (the autotuner's trials on large steps): liveness only, the
// arena taken as the live peak, no offsets, the timeline still drawn.
// ESTIMATE: module attributes {fsdp.arena_bytes = 5184 : i64, fsdp.live_peak_bytes = 5184 : i64}
// ESTIMATE: fsdp.live_bytes = array<i64:
// ESTIMATE-NOT: fsdp.offsets

// Offsets are packed offline, largest buffer first, each in the smallest
// gap its lifetime allows. Allocating in program order (first fit) would
// put %b above %y, because %x's kilobyte freed at op 1 is too small for it,
// and %c above %b: 8256 bytes. Packed, the arena is the most bytes ever
// live (at the add: %a, %b, %c and %y, 64-byte aligned), 5184, less the
// padding after the scalar %y on top: 5124.
// CHECK: module attributes {fsdp.arena_bytes = 5124 : i64, fsdp.live_peak_bytes = 5184 : i64}
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: fsdp.offset = 0 : i64
func.func @train_step(%x: tensor<16x16xf32> {fsdp.name = "x"}) -> (tensor<2x16x16xf32> {fsdp.name = "c"}, tensor<f32> {fsdp.name = "y"}) {
  // CHECK: fsdp.tanh {{.*}} {fsdp.offsets = array<i64: 4096>}
  %a = fsdp.tanh %x : tensor<16x16xf32>
  // CHECK: fsdp.reduce_sum {{.*}} fsdp.offsets = array<i64: 5120>
  %y = fsdp.reduce_sum %x {axes = array<i64: 0, 1>, keepdims = false} : tensor<16x16xf32> -> tensor<f32>
  // CHECK: fsdp.broadcast {{.*}} {fsdp.offsets = array<i64: 0>}
  %b = fsdp.broadcast %a : tensor<16x16xf32> -> tensor<2x16x16xf32>
  // CHECK: fsdp.add {{.*}} {fsdp.offsets = array<i64: 2048>}
  %c = fsdp.add %b, %a : tensor<2x16x16xf32>, tensor<16x16xf32> -> tensor<2x16x16xf32>
  return %c, %y : tensor<2x16x16xf32>, tensor<f32>
}
