// RUN: fsdp-opt %s -split-input-file -fsdp-attention-layout | FileCheck %s

// GPT-2's attention as exported: q, k, v moved from [B, T, H, D] to
// [B, H, T, D] and the output back. The four transposes go; attention
// reads and writes [B, T, H, D].
// CHECK-LABEL: func.func @heads
// CHECK-NOT: fsdp.transpose
// CHECK: %[[Y:.*]] = fsdp.attention %arg0, %arg1, %arg2 {causal = true, layout = "bshd", scale = 2.500000e-01 : f32} : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32>
// CHECK-NOT: fsdp.transpose
// CHECK: return %[[Y]]
func.func @heads(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x4x16xf32>, %v: tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32> {
  %tq = fsdp.transpose %q {perm = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %tk = fsdp.transpose %k {perm = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %tv = fsdp.transpose %v {perm = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %o = fsdp.attention %tq, %tk, %tv {causal = true, scale = 0.25 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %y = fsdp.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x8x16xf32> -> tensor<2x8x4x16xf32>
  return %y : tensor<2x8x4x16xf32>
}

// -----

// Cross-attention (tq != tk), a mask, and one tensor for k and v: the
// mask keeps its [B, H, Tq, Tk] meaning; the shared transpose goes once.
// CHECK-LABEL: func.func @cross
// CHECK-NOT: fsdp.transpose
// CHECK: fsdp.attention %arg0, %arg1, %arg1, %arg2 {layout = "bshd", scale = 1.000000e+00 : f32} : (tensor<2x3x4x8xf32>, tensor<2x5x4x8xf32>, tensor<2x5x4x8xf32>, tensor<2x1x3x5xi1>) -> tensor<2x3x4x8xf32>
func.func @cross(%q: tensor<2x3x4x8xf32>, %kv: tensor<2x5x4x8xf32>, %m: tensor<2x1x3x5xi1>) -> tensor<2x3x4x8xf32> {
  %tq = fsdp.transpose %q {perm = array<i64: 0, 2, 1, 3>} : tensor<2x3x4x8xf32> -> tensor<2x4x3x8xf32>
  %tkv = fsdp.transpose %kv {perm = array<i64: 0, 2, 1, 3>} : tensor<2x5x4x8xf32> -> tensor<2x4x5x8xf32>
  %o = fsdp.attention %tq, %tkv, %tkv, %m {scale = 1.0 : f32} : (tensor<2x4x3x8xf32>, tensor<2x4x5x8xf32>, tensor<2x4x5x8xf32>, tensor<2x1x3x5xi1>) -> tensor<2x4x3x8xf32>
  %y = fsdp.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x3x8xf32> -> tensor<2x3x4x8xf32>
  return %y : tensor<2x3x4x8xf32>
}

// -----

// Nothing folds where a transpose would have to be made: v not
// transposed (the heads already first), the output read as it is, or a
// transpose that moves another dimension. A transpose the attention
// shares with another user stays for that user.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: layout = "bshd"
// CHECK: return
func.func @kept(%q: tensor<2x8x4x16xf32>, %v: tensor<2x4x8x16xf32>, %r: tensor<8x2x4x16xf32>)
    -> (tensor<2x8x4x16xf32>, tensor<2x4x8x16xf32>, tensor<2x8x4x16xf32>) {
  %tq = fsdp.transpose %q {perm = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %o1 = fsdp.attention %tq, %tq, %v {scale = 1.0 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %y1 = fsdp.transpose %o1 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x8x16xf32> -> tensor<2x8x4x16xf32>
  %o2 = fsdp.attention %tq, %tq, %tq {scale = 1.0 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %tr = fsdp.transpose %r {perm = array<i64: 1, 2, 0, 3>} : tensor<8x2x4x16xf32> -> tensor<2x4x8x16xf32>
  %o3 = fsdp.attention %tr, %tr, %tr {scale = 1.0 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %y3 = fsdp.transpose %o3 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x8x16xf32> -> tensor<2x8x4x16xf32>
  return %y1, %o2, %y3 : tensor<2x8x4x16xf32>, tensor<2x4x8x16xf32>, tensor<2x8x4x16xf32>
}
