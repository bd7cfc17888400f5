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

// -----

// Grouped-query attention as Llama writes it (repeat_kv: each of 2 key and
// value heads broadcast to the 2 query heads it serves): attention reads
// k and v of 2 heads; then the head transposes fold as above.
// CHECK-LABEL: func.func @gqa
// CHECK-NOT: fsdp.broadcast
// CHECK-NOT: fsdp.transpose
// CHECK: fsdp.attention %arg0, %arg1, %arg2 {causal = true, layout = "bshd", scale = 2.500000e-01 : f32} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> tensor<2x8x4x16xf32>
func.func @gqa(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>, %v: tensor<2x8x2x16xf32>) -> tensor<2x8x4x16xf32> {
  %tq = fsdp.transpose %q {perm = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %tk = fsdp.transpose %k {perm = array<i64: 0, 2, 1, 3>} : tensor<2x8x2x16xf32> -> tensor<2x2x8x16xf32>
  %tv = fsdp.transpose %v {perm = array<i64: 0, 2, 1, 3>} : tensor<2x8x2x16xf32> -> tensor<2x2x8x16xf32>
  %k1 = fsdp.reshape %tk : tensor<2x2x8x16xf32> -> tensor<2x2x1x8x16xf32>
  %k2 = fsdp.broadcast %k1 : tensor<2x2x1x8x16xf32> -> tensor<2x2x2x8x16xf32>
  %k3 = fsdp.reshape %k2 : tensor<2x2x2x8x16xf32> -> tensor<2x4x8x16xf32>
  %v1 = fsdp.reshape %tv : tensor<2x2x8x16xf32> -> tensor<2x2x1x8x16xf32>
  %v2 = fsdp.broadcast %v1 : tensor<2x2x1x8x16xf32> -> tensor<2x2x2x8x16xf32>
  %v3 = fsdp.reshape %v2 : tensor<2x2x2x8x16xf32> -> tensor<2x4x8x16xf32>
  %o = fsdp.attention %tq, %k3, %v3 {causal = true, scale = 0.25 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %y = fsdp.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x8x16xf32> -> tensor<2x8x4x16xf32>
  return %y : tensor<2x8x4x16xf32>
}

// -----

// A broadcast that is not repeat_kv (it repeats the rows, not the heads)
// stays.
// CHECK-LABEL: func.func @not_gqa
// CHECK: fsdp.broadcast
func.func @not_gqa(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x4x16xf32>) -> tensor<2x4x8x16xf32> {
  %k1 = fsdp.reshape %k : tensor<2x4x4x16xf32> -> tensor<2x4x4x1x16xf32>
  %k2 = fsdp.broadcast %k1 : tensor<2x4x4x1x16xf32> -> tensor<2x4x4x2x16xf32>
  %k3 = fsdp.reshape %k2 : tensor<2x4x4x2x16xf32> -> tensor<2x4x8x16xf32>
  %o = fsdp.attention %q, %k3, %k3 {scale = 0.25 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// RoPE between the transpose and the attention (Llama's rotate_half): the
// transposes move down through it, the cos and sin tables are reshaped
// (their heads dimension is 1), the slices and the concat keep their
// last-dimension bounds, and then fold into the attention.
// CHECK-LABEL: func.func @rope
// CHECK-NOT: fsdp.transpose
// CHECK: %[[C:.*]] = fsdp.reshape %arg1 : tensor<1x1x8x16xf32> -> tensor<1x8x1x16xf32>
// CHECK: fsdp.mul %arg0, %[[C]] : tensor<2x8x4x16xf32>, tensor<1x8x1x16xf32> -> tensor<2x8x4x16xf32>
// CHECK: fsdp.slice %arg0 {limits = array<i64: 2, 8, 4, 16>, starts = array<i64: 0, 0, 0, 8>, strides = array<i64: 1, 1, 1, 1>}
// CHECK: fsdp.concat {{.*}} {axis = 3 : i64} : (tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>) -> tensor<2x8x4x16xf32>
// CHECK: fsdp.attention {{.*}} {causal = true, layout = "bshd", scale = 2.500000e-01 : f32} : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32>
// CHECK-NOT: fsdp.transpose
func.func @rope(%q: tensor<2x8x4x16xf32>, %cos: tensor<1x1x8x16xf32>, %sin: tensor<1x1x8x16xf32>) -> tensor<2x8x4x16xf32> {
  %t = fsdp.transpose %q {perm = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %a = fsdp.mul %t, %cos : tensor<2x4x8x16xf32>, tensor<1x1x8x16xf32> -> tensor<2x4x8x16xf32>
  %hi = fsdp.slice %t {limits = array<i64: 2, 4, 8, 16>, starts = array<i64: 0, 0, 0, 8>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x8x16xf32> -> tensor<2x4x8x8xf32>
  %lo = fsdp.slice %t {limits = array<i64: 2, 4, 8, 8>, starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x8x16xf32> -> tensor<2x4x8x8xf32>
  %n = fsdp.neg %hi : tensor<2x4x8x8xf32>
  %r = fsdp.concat %n, %lo {axis = 3 : i64} : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x16xf32>
  %b = fsdp.mul %r, %sin : tensor<2x4x8x16xf32>, tensor<1x1x8x16xf32> -> tensor<2x4x8x16xf32>
  %qr = fsdp.add %a, %b : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  %o = fsdp.attention %qr, %qr, %t {causal = true, scale = 0.25 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %y = fsdp.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x8x16xf32> -> tensor<2x8x4x16xf32>
  return %y : tensor<2x8x4x16xf32>
}

// -----

// A transpose with a full-size operand beside it (a residual of another
// layout) does not move: that would take a copy of the operand.
// CHECK-LABEL: func.func @unmoved
// CHECK: fsdp.transpose
// CHECK: fsdp.add
func.func @unmoved(%q: tensor<2x8x4x16xf32>, %r: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %t = fsdp.transpose %q {perm = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %s = fsdp.add %t, %r : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  %o = fsdp.attention %s, %s, %s {scale = 0.25 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}
