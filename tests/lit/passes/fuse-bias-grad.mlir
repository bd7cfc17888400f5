// RUN: fsdp-opt %s -split-input-file -fsdp-fuse-bias-grad | FileCheck %s

// nn.Linear's weight and bias gradients from one output gradient: the
// reduction over the tokens becomes the weight GEMM's second result.
// CHECK-LABEL: func.func @linear
// CHECK-NOT: fsdp.reduce_sum
// CHECK: %[[D:.*]] = fsdp.reshape %arg0 : tensor<2x3x8xf32> -> tensor<6x8xf32>
// CHECK: %[[W:.*]], %[[S:.*]] = fsdp.matmul %[[D]], %arg1 {lhs_sums, transpose_lhs = true} : tensor<6x8xf32>, tensor<6x4xf32> -> tensor<8x4xf32>, tensor<8xf32>
// CHECK: %[[B:.*]] = fsdp.reshape %[[S]] : tensor<8xf32> -> tensor<1x1x8xf32>
// CHECK: return %[[W]], %[[B]]
func.func @linear(%dy: tensor<2x3x8xf32>, %x: tensor<6x4xf32>) -> (tensor<8x4xf32>, tensor<1x1x8xf32>) {
  %d = fsdp.reshape %dy : tensor<2x3x8xf32> -> tensor<6x8xf32>
  %dw = fsdp.matmul %d, %x {transpose_lhs = true} : tensor<6x8xf32>, tensor<6x4xf32> -> tensor<8x4xf32>
  %db = fsdp.reduce_sum %dy {axes = array<i64: 0, 1>} : tensor<2x3x8xf32> -> tensor<1x1x8xf32>
  return %dw, %db : tensor<8x4xf32>, tensor<1x1x8xf32>
}

// -----

// The reduction first (autodiff may order them so): the fused GEMM takes
// its place; bf16 stays bf16.
// CHECK-LABEL: func.func @reduction_first
// CHECK: fsdp.matmul %arg0, %arg1 {lhs_sums, transpose_lhs = true} : tensor<6x8xbf16>, tensor<6x4xbf16> -> tensor<8x4xbf16>, tensor<8xbf16>
// CHECK-NOT: fsdp.reduce_sum
func.func @reduction_first(%dy: tensor<6x8xbf16>, %x: tensor<6x4xbf16>) -> (tensor<1x8xbf16>, tensor<8x4xbf16>) {
  %db = fsdp.reduce_sum %dy {axes = array<i64: 0>} : tensor<6x8xbf16> -> tensor<1x8xbf16>
  %dw = fsdp.matmul %dy, %x {transpose_lhs = true} : tensor<6x8xbf16>, tensor<6x4xbf16> -> tensor<8x4xbf16>
  return %db, %dw : tensor<1x8xbf16>, tensor<8x4xbf16>
}

// -----

// Nothing fuses where the sums are not the GEMM's: a reduction over the
// last dimension, a GEMM that does not contract the rows (no
// transpose_lhs), a GEMM over other rows, or a GEMM with a bias.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: lhs_sums
// CHECK: return
func.func @kept(%dy: tensor<6x8xf32>, %x: tensor<6x4xf32>, %w: tensor<8x4xf32>, %b: tensor<4xf32>, %o: tensor<6x8xf32>)
    -> (tensor<6x1xf32>, tensor<8x4xf32>, tensor<6x4xf32>, tensor<1x8xf32>, tensor<8x4xf32>, tensor<6x4xf32>) {
  %r1 = fsdp.reduce_sum %dy {axes = array<i64: 1>} : tensor<6x8xf32> -> tensor<6x1xf32>
  %m1 = fsdp.matmul %dy, %x {transpose_lhs = true} : tensor<6x8xf32>, tensor<6x4xf32> -> tensor<8x4xf32>
  %m2 = fsdp.matmul %o, %w : tensor<6x8xf32>, tensor<8x4xf32> -> tensor<6x4xf32>
  %r2 = fsdp.reduce_sum %o {axes = array<i64: 0>} : tensor<6x8xf32> -> tensor<1x8xf32>
  %m3 = fsdp.matmul %dy, %x {transpose_lhs = true} : tensor<6x8xf32>, tensor<6x4xf32> -> tensor<8x4xf32>
  %m4 = fsdp.matmul %o, %w bias %b : tensor<6x8xf32>, tensor<8x4xf32>, tensor<4xf32> -> tensor<6x4xf32>
  return %r1, %m1, %m2, %r2, %m3, %m4 : tensor<6x1xf32>, tensor<8x4xf32>, tensor<6x4xf32>, tensor<1x8xf32>, tensor<8x4xf32>, tensor<6x4xf32>
}
