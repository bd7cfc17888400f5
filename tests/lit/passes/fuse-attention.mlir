// RUN: fsdp-opt %s -split-input-file -fsdp-fuse-attention | FileCheck %s

// Causal keep-mask in fsdp.where, scale as a multiplication.
// CHECK-LABEL: func.func @causal_where
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x3x8xf32>, %[[K:.*]]: tensor<2x4x3x8xf32>, %[[V:.*]]: tensor<2x4x3x8xf32>)
// CHECK: %[[O:.*]] = fsdp.attention %[[Q]], %[[K]], %[[V]] {causal = true, scale = 5.000000e-01 : f32}
// CHECK-NOT: fsdp.softmax
// CHECK: return %[[O]]
func.func @causal_where(%q: tensor<2x4x3x8xf32>, %k: tensor<2x4x3x8xf32>, %v: tensor<2x4x3x8xf32>) -> tensor<2x4x3x8xf32> {
  %kt = fsdp.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<2x4x3x8xf32> -> tensor<2x4x8x3xf32>
  %s = fsdp.matmul %q, %kt : tensor<2x4x3x8xf32>, tensor<2x4x8x3xf32> -> tensor<2x4x3x3xf32>
  %c = fsdp.constant dense<0.5> : tensor<f32>
  %ss = fsdp.mul %s, %c : tensor<2x4x3x3xf32>, tensor<f32> -> tensor<2x4x3x3xf32>
  %keep = fsdp.constant dense<[[[[true, false, false], [true, true, false], [true, true, true]]]]> : tensor<1x1x3x3xi1>
  %ninf = fsdp.constant dense<0xFF800000> : tensor<f32>
  %m = fsdp.where %keep, %ss, %ninf : tensor<1x1x3x3xi1>, tensor<2x4x3x3xf32>, tensor<f32> -> tensor<2x4x3x3xf32>
  %p = fsdp.softmax %m {axis = 3 : i64} : tensor<2x4x3x3xf32>
  %o = fsdp.matmul %p, %v : tensor<2x4x3x3xf32>, tensor<2x4x3x8xf32> -> tensor<2x4x3x8xf32>
  return %o : tensor<2x4x3x8xf32>
}

// -----

// GPT-2's form: where(mask == 0, -inf, scores) keeps where the condition is
// false; the inverted upper triangle is causal. Scale by division.
// CHECK-LABEL: func.func @causal_inverted
// CHECK: fsdp.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true, scale = 2.500000e-01 : f32}
func.func @causal_inverted(%q: tensor<2x3x8xf32>, %k: tensor<2x3x8xf32>, %v: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  %s = fsdp.matmul %q, %k {transpose_rhs = true} : tensor<2x3x8xf32>, tensor<2x3x8xf32> -> tensor<2x3x3xf32>
  %c = fsdp.constant dense<4.0> : tensor<f32>
  %ss = fsdp.div %s, %c : tensor<2x3x3xf32>, tensor<f32> -> tensor<2x3x3xf32>
  %hide = fsdp.constant dense<[[false, true, true], [false, false, true], [false, false, false]]> : tensor<3x3xi1>
  %ninf = fsdp.constant dense<-1.0e+09> : tensor<f32>
  %m = fsdp.where %hide, %ninf, %ss : tensor<3x3xi1>, tensor<f32>, tensor<2x3x3xf32> -> tensor<2x3x3xf32>
  %p = fsdp.softmax %m {axis = 2 : i64} : tensor<2x3x3xf32>
  %o = fsdp.matmul %p, %v : tensor<2x3x3xf32>, tensor<2x3x8xf32> -> tensor<2x3x8xf32>
  return %o : tensor<2x3x8xf32>
}

// -----

// An additive mask from a graph input stays an operand; k is transposed.
// CHECK-LABEL: func.func @padding_mask
// CHECK-SAME: %[[MASK:[a-z0-9]+]]: tensor<2x1x1x3xf32>
// CHECK: fsdp.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[MASK]] {scale = 1.000000e+00 : f32}
func.func @padding_mask(%q: tensor<2x4x3x8xf32>, %kt: tensor<2x4x8x3xf32>, %v: tensor<2x4x3x8xf32>, %mask: tensor<2x1x1x3xf32>) -> tensor<2x4x3x8xf32> {
  %s = fsdp.matmul %q, %kt : tensor<2x4x3x8xf32>, tensor<2x4x8x3xf32> -> tensor<2x4x3x3xf32>
  %m = fsdp.add %s, %mask : tensor<2x4x3x3xf32>, tensor<2x1x1x3xf32> -> tensor<2x4x3x3xf32>
  %p = fsdp.softmax %m {axis = 3 : i64} : tensor<2x4x3x3xf32>
  %o = fsdp.matmul %p, %v : tensor<2x4x3x3xf32>, tensor<2x4x3x8xf32> -> tensor<2x4x3x8xf32>
  return %o : tensor<2x4x3x8xf32>
}

// -----

// The probabilities are used elsewhere: fusing would drop them, so no match.
// CHECK-LABEL: func.func @probabilities_escape
// CHECK-NOT: fsdp.attention
// CHECK: fsdp.softmax
func.func @probabilities_escape(%q: tensor<3x8xf32>, %k: tensor<3x8xf32>, %v: tensor<3x8xf32>) -> (tensor<3x8xf32>, tensor<3x3xf32>) {
  %s = fsdp.matmul %q, %k {transpose_rhs = true} : tensor<3x8xf32>, tensor<3x8xf32> -> tensor<3x3xf32>
  %p = fsdp.softmax %s {axis = 1 : i64} : tensor<3x3xf32>
  %o = fsdp.matmul %p, %v : tensor<3x3xf32>, tensor<3x8xf32> -> tensor<3x8xf32>
  return %o, %p : tensor<3x8xf32>, tensor<3x3xf32>
}

// -----

// Softmax over a non-final axis is not attention.
// CHECK-LABEL: func.func @wrong_axis
// CHECK-NOT: fsdp.attention
func.func @wrong_axis(%q: tensor<3x8xf32>, %k: tensor<3x8xf32>, %v: tensor<3x8xf32>) -> tensor<3x8xf32> {
  %s = fsdp.matmul %q, %k {transpose_rhs = true} : tensor<3x8xf32>, tensor<3x8xf32> -> tensor<3x3xf32>
  %p = fsdp.softmax %s {axis = 0 : i64} : tensor<3x3xf32>
  %o = fsdp.matmul %p, %v : tensor<3x3xf32>, tensor<3x8xf32> -> tensor<3x8xf32>
  return %o : tensor<3x8xf32>
}

// -----

// A constant mask that is not triangular stays a mask.
// CHECK-LABEL: func.func @constant_not_causal
// CHECK: %[[M:.*]] = fsdp.constant dense<{{.*}}> : tensor<2x2xi1>
// CHECK: fsdp.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[M]] {scale
func.func @constant_not_causal(%q: tensor<2x8xf32>, %k: tensor<2x8xf32>, %v: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %s = fsdp.matmul %q, %k {transpose_rhs = true} : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x2xf32>
  %keep = fsdp.constant dense<[[true, true], [false, true]]> : tensor<2x2xi1>
  %ninf = fsdp.constant dense<0xFF800000> : tensor<f32>
  %m = fsdp.where %keep, %s, %ninf : tensor<2x2xi1>, tensor<2x2xf32>, tensor<f32> -> tensor<2x2xf32>
  %p = fsdp.softmax %m {axis = 1 : i64} : tensor<2x2xf32>
  %o = fsdp.matmul %p, %v : tensor<2x2xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  return %o : tensor<2x8xf32>
}

// -----

// A causal mask too long to fold at import stays trilu(splat): recognised
// by its structure (upper triangle from k = 1 filled with -inf).
// CHECK-LABEL: func.func @causal_trilu_additive
// CHECK: fsdp.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true
// CHECK-NOT: fsdp.trilu
func.func @causal_trilu_additive(%q: tensor<1x4x5x8xf32>, %kt: tensor<1x4x8x5xf32>, %v: tensor<1x4x5x8xf32>) -> tensor<1x4x5x8xf32> {
  %s = fsdp.matmul %q, %kt : tensor<1x4x5x8xf32>, tensor<1x4x8x5xf32> -> tensor<1x4x5x5xf32>
  %fill = fsdp.constant dense<0xFF800000> : tensor<5x5xf32>
  %mask = fsdp.trilu %fill {k = 1 : i64, upper = true} : tensor<5x5xf32>
  %m = fsdp.add %s, %mask : tensor<1x4x5x5xf32>, tensor<5x5xf32> -> tensor<1x4x5x5xf32>
  %p = fsdp.softmax %m {axis = 3 : i64} : tensor<1x4x5x5xf32>
  %o = fsdp.matmul %p, %v : tensor<1x4x5x5xf32>, tensor<1x4x5x8xf32> -> tensor<1x4x5x8xf32>
  return %o : tensor<1x4x5x8xf32>
}

// -----

// The boolean forms: where(tril(ones), scores, -inf) and
// where(triu(ones, 1), -inf, scores).
// CHECK-LABEL: func.func @causal_trilu_bool
// CHECK: fsdp.attention {{.*}} {causal = true
// CHECK: fsdp.attention {{.*}} {causal = true
// CHECK-NOT: fsdp.not
func.func @causal_trilu_bool(%q: tensor<2x5x8xf32>, %k: tensor<2x5x8xf32>, %v: tensor<2x5x8xf32>) -> (tensor<2x5x8xf32>, tensor<2x5x8xf32>) {
  %ones = fsdp.constant dense<true> : tensor<5x5xi1>
  %ninf = fsdp.constant dense<-1.0e+09> : tensor<f32>
  %s = fsdp.matmul %q, %k {transpose_rhs = true} : tensor<2x5x8xf32>, tensor<2x5x8xf32> -> tensor<2x5x5xf32>
  %keep = fsdp.trilu %ones {k = 0 : i64, upper = false} : tensor<5x5xi1>
  %m = fsdp.where %keep, %s, %ninf : tensor<5x5xi1>, tensor<2x5x5xf32>, tensor<f32> -> tensor<2x5x5xf32>
  %p = fsdp.softmax %m {axis = 2 : i64} : tensor<2x5x5xf32>
  %o = fsdp.matmul %p, %v : tensor<2x5x5xf32>, tensor<2x5x8xf32> -> tensor<2x5x8xf32>
  %s2 = fsdp.matmul %q, %k {transpose_rhs = true} : tensor<2x5x8xf32>, tensor<2x5x8xf32> -> tensor<2x5x5xf32>
  %hide = fsdp.trilu %ones {k = 1 : i64, upper = true} : tensor<5x5xi1>
  %m2 = fsdp.where %hide, %ninf, %s2 : tensor<5x5xi1>, tensor<f32>, tensor<2x5x5xf32> -> tensor<2x5x5xf32>
  %p2 = fsdp.softmax %m2 {axis = 2 : i64} : tensor<2x5x5xf32>
  %o2 = fsdp.matmul %p2, %v : tensor<2x5x5xf32>, tensor<2x5x8xf32> -> tensor<2x5x8xf32>
  return %o, %o2 : tensor<2x5x8xf32>, tensor<2x5x8xf32>
}

// -----

// A band that also hides the diagonal (k = 0) is not causal: it stays an
// explicit mask.
// CHECK-LABEL: func.func @trilu_not_causal
// CHECK: %[[MASK:.*]] = fsdp.trilu
// CHECK: fsdp.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[MASK]] {scale
func.func @trilu_not_causal(%q: tensor<1x4x5x8xf32>, %kt: tensor<1x4x8x5xf32>, %v: tensor<1x4x5x8xf32>) -> tensor<1x4x5x8xf32> {
  %s = fsdp.matmul %q, %kt : tensor<1x4x5x8xf32>, tensor<1x4x8x5xf32> -> tensor<1x4x5x5xf32>
  %fill = fsdp.constant dense<0xFF800000> : tensor<5x5xf32>
  %mask = fsdp.trilu %fill {k = 0 : i64, upper = true} : tensor<5x5xf32>
  %m = fsdp.add %s, %mask : tensor<1x4x5x5xf32>, tensor<5x5xf32> -> tensor<1x4x5x5xf32>
  %p = fsdp.softmax %m {axis = 3 : i64} : tensor<1x4x5x5xf32>
  %o = fsdp.matmul %p, %v : tensor<1x4x5x5xf32>, tensor<1x4x5x8xf32> -> tensor<1x4x5x8xf32>
  return %o : tensor<1x4x5x8xf32>
}

// -----

// PyTorch's safe softmax, as the tracer writes scaled_dot_product_attention
// with a mask from the data: a query whose every key is masked gets zeros.
// It fuses, and the attention says so.
// CHECK-LABEL: func.func @safe_softmax
// CHECK-SAME: %[[KEEP:[a-z0-9]+]]: tensor<2x1x1x3xi1>
// CHECK: %[[O:.*]] = fsdp.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[KEEP]] {safe_softmax = true, scale = 5.000000e-01 : f32}
// CHECK-NOT: fsdp.softmax
// CHECK-NOT: fsdp.reduce_max
// CHECK: return %[[O]]
func.func @safe_softmax(%q: tensor<2x4x3x8xf32>, %kt: tensor<2x4x8x3xf32>, %v: tensor<2x4x3x8xf32>, %keep: tensor<2x1x1x3xi1>) -> tensor<2x4x3x8xf32> {
  %s = fsdp.matmul %q, %kt : tensor<2x4x3x8xf32>, tensor<2x4x8x3xf32> -> tensor<2x4x3x3xf32>
  %c = fsdp.constant dense<0.5> : tensor<f32>
  %ss = fsdp.mul %s, %c : tensor<2x4x3x3xf32>, tensor<f32> -> tensor<2x4x3x3xf32>
  %ninf = fsdp.constant dense<0xFF800000> : tensor<f32>
  %m = fsdp.where %keep, %ss, %ninf : tensor<2x1x1x3xi1>, tensor<2x4x3x3xf32>, tensor<f32> -> tensor<2x4x3x3xf32>
  %top = fsdp.reduce_max %m {axes = array<i64: 3>, keepdims = true} : tensor<2x4x3x3xf32> -> tensor<2x4x3x1xf32>
  %ninf2 = fsdp.constant dense<0xFF800000> : tensor<f32>
  %dead = fsdp.equal %top, %ninf2 : tensor<2x4x3x1xf32>, tensor<f32> -> tensor<2x4x3x1xi1>
  %zero = fsdp.constant dense<0.0> : tensor<f32>
  %m0 = fsdp.where %dead, %zero, %m : tensor<2x4x3x1xi1>, tensor<f32>, tensor<2x4x3x3xf32> -> tensor<2x4x3x3xf32>
  %p = fsdp.softmax %m0 {axis = 3 : i64} : tensor<2x4x3x3xf32>
  %p0 = fsdp.where %dead, %zero, %p : tensor<2x4x3x1xi1>, tensor<f32>, tensor<2x4x3x3xf32> -> tensor<2x4x3x3xf32>
  %o = fsdp.matmul %p0, %v : tensor<2x4x3x3xf32>, tensor<2x4x3x8xf32> -> tensor<2x4x3x8xf32>
  return %o : tensor<2x4x3x8xf32>
}

// -----

// The same, with the empty rows' flags read elsewhere too: fusing would
// drop what they are computed from, so no match.
// CHECK-LABEL: func.func @safe_softmax_flags_escape
// CHECK-NOT: fsdp.attention
// CHECK: fsdp.softmax
func.func @safe_softmax_flags_escape(%q: tensor<2x4x3x8xf32>, %kt: tensor<2x4x8x3xf32>, %v: tensor<2x4x3x8xf32>, %keep: tensor<2x1x1x3xi1>) -> (tensor<2x4x3x8xf32>, tensor<2x4x3x1xi1>) {
  %s = fsdp.matmul %q, %kt : tensor<2x4x3x8xf32>, tensor<2x4x8x3xf32> -> tensor<2x4x3x3xf32>
  %ninf = fsdp.constant dense<0xFF800000> : tensor<f32>
  %m = fsdp.where %keep, %s, %ninf : tensor<2x1x1x3xi1>, tensor<2x4x3x3xf32>, tensor<f32> -> tensor<2x4x3x3xf32>
  %top = fsdp.reduce_max %m {axes = array<i64: 3>, keepdims = true} : tensor<2x4x3x3xf32> -> tensor<2x4x3x1xf32>
  %dead = fsdp.equal %top, %ninf : tensor<2x4x3x1xf32>, tensor<f32> -> tensor<2x4x3x1xi1>
  %zero = fsdp.constant dense<0.0> : tensor<f32>
  %m0 = fsdp.where %dead, %zero, %m : tensor<2x4x3x1xi1>, tensor<f32>, tensor<2x4x3x3xf32> -> tensor<2x4x3x3xf32>
  %p = fsdp.softmax %m0 {axis = 3 : i64} : tensor<2x4x3x3xf32>
  %p0 = fsdp.where %dead, %zero, %p : tensor<2x4x3x1xi1>, tensor<f32>, tensor<2x4x3x3xf32> -> tensor<2x4x3x3xf32>
  %o = fsdp.matmul %p0, %v : tensor<2x4x3x3xf32>, tensor<2x4x3x8xf32> -> tensor<2x4x3x8xf32>
  return %o, %dead : tensor<2x4x3x8xf32>, tensor<2x4x3x1xi1>
}

// -----

// A finite fill (masked_fill(-1e9)) with a mask from the data: a row that
// hides every key averages its values in PyTorch (equal scores) where the
// kernels' -inf gives NaN, and the data may empty a row: the attention
// averages such rows (average_empty_rows).
// CHECK-LABEL: func.func @finite_fill_data_mask
// CHECK-SAME: %[[KEEP:[a-z0-9]+]]: tensor<2x1x3xi1>
// CHECK: fsdp.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[KEEP]] {average_empty_rows, scale = 1.000000e+00 : f32}
// CHECK-NOT: fsdp.softmax
func.func @finite_fill_data_mask(%q: tensor<2x3x8xf32>, %k: tensor<2x3x8xf32>, %v: tensor<2x3x8xf32>, %keep: tensor<2x1x3xi1>) -> tensor<2x3x8xf32> {
  %s = fsdp.matmul %q, %k {transpose_rhs = true} : tensor<2x3x8xf32>, tensor<2x3x8xf32> -> tensor<2x3x3xf32>
  %fill = fsdp.constant dense<-1.0e+09> : tensor<f32>
  %m = fsdp.where %keep, %s, %fill : tensor<2x1x3xi1>, tensor<2x3x3xf32>, tensor<f32> -> tensor<2x3x3xf32>
  %p = fsdp.softmax %m {axis = 2 : i64} : tensor<2x3x3xf32>
  %o = fsdp.matmul %p, %v : tensor<2x3x3xf32>, tensor<2x3x8xf32> -> tensor<2x3x8xf32>
  return %o : tensor<2x3x8xf32>
}

// -----

// The same with a constant mask whose first row hides every key: it
// averages; one keeping a key in every row (not causal) needs not.
// CHECK-LABEL: func.func @finite_fill_constant_masks
// CHECK: fsdp.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {average_empty_rows, scale = 1.000000e+00 : f32}
// CHECK: fsdp.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.000000e+00 : f32}
// CHECK-NOT: fsdp.softmax
func.func @finite_fill_constant_masks(%q: tensor<2x3x8xf32>, %k: tensor<2x3x8xf32>, %v: tensor<2x3x8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>) {
  %s = fsdp.matmul %q, %k {transpose_rhs = true} : tensor<2x3x8xf32>, tensor<2x3x8xf32> -> tensor<2x3x3xf32>
  %fill = fsdp.constant dense<-1.0e+09> : tensor<f32>
  %empty = fsdp.constant dense<[[false, false, false], [true, true, false], [true, true, true]]> : tensor<3x3xi1>
  %m = fsdp.where %empty, %s, %fill : tensor<3x3xi1>, tensor<2x3x3xf32>, tensor<f32> -> tensor<2x3x3xf32>
  %p = fsdp.softmax %m {axis = 2 : i64} : tensor<2x3x3xf32>
  %o = fsdp.matmul %p, %v : tensor<2x3x3xf32>, tensor<2x3x8xf32> -> tensor<2x3x8xf32>
  %s2 = fsdp.matmul %q, %k {transpose_rhs = true} : tensor<2x3x8xf32>, tensor<2x3x8xf32> -> tensor<2x3x3xf32>
  %each = fsdp.constant dense<[[true, false, true], [false, true, false], [true, true, true]]> : tensor<3x3xi1>
  %m2 = fsdp.where %each, %s2, %fill : tensor<3x3xi1>, tensor<2x3x3xf32>, tensor<f32> -> tensor<2x3x3xf32>
  %p2 = fsdp.softmax %m2 {axis = 2 : i64} : tensor<2x3x3xf32>
  %o2 = fsdp.matmul %p2, %v : tensor<2x3x3xf32>, tensor<2x3x8xf32> -> tensor<2x3x8xf32>
  return %o, %o2 : tensor<2x3x8xf32>, tensor<2x3x8xf32>
}

// -----

// where(hide, fill, scores) from the data: the kept mask is its negation;
// a -inf fill needs no averaging (a plain softmax's NaN, as PyTorch's).
// CHECK-LABEL: func.func @finite_fill_inverted_data_mask
// CHECK: %[[KEEP:.*]] = fsdp.not
// CHECK: fsdp.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[KEEP]] {average_empty_rows, scale = 1.000000e+00 : f32}
// CHECK: fsdp.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.000000e+00 : f32}
// CHECK-NOT: fsdp.softmax
func.func @finite_fill_inverted_data_mask(%q: tensor<2x3x8xf32>, %k: tensor<2x3x8xf32>, %v: tensor<2x3x8xf32>, %hide: tensor<2x1x3xi1>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>) {
  %s = fsdp.matmul %q, %k {transpose_rhs = true} : tensor<2x3x8xf32>, tensor<2x3x8xf32> -> tensor<2x3x3xf32>
  %fill = fsdp.constant dense<-3.4028234663852886e+38> : tensor<f32>
  %m = fsdp.where %hide, %fill, %s : tensor<2x1x3xi1>, tensor<f32>, tensor<2x3x3xf32> -> tensor<2x3x3xf32>
  %p = fsdp.softmax %m {axis = 2 : i64} : tensor<2x3x3xf32>
  %o = fsdp.matmul %p, %v : tensor<2x3x3xf32>, tensor<2x3x8xf32> -> tensor<2x3x8xf32>
  %s2 = fsdp.matmul %q, %k {transpose_rhs = true} : tensor<2x3x8xf32>, tensor<2x3x8xf32> -> tensor<2x3x3xf32>
  %ninf = fsdp.constant dense<0xFF800000> : tensor<f32>
  %m2 = fsdp.where %hide, %ninf, %s2 : tensor<2x1x3xi1>, tensor<f32>, tensor<2x3x3xf32> -> tensor<2x3x3xf32>
  %p2 = fsdp.softmax %m2 {axis = 2 : i64} : tensor<2x3x3xf32>
  %o2 = fsdp.matmul %p2, %v : tensor<2x3x3xf32>, tensor<2x3x8xf32> -> tensor<2x3x8xf32>
  return %o, %o2 : tensor<2x3x8xf32>, tensor<2x3x8xf32>
}

// -----

// A causal triangle with more queries than keys hides every key of the
// first rows: with a finite fill it stays a mask, and those rows average.
// CHECK-LABEL: func.func @finite_fill_causal_more_queries
// CHECK: %[[KEEP:.*]] = fsdp.trilu
// CHECK: fsdp.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[KEEP]] {average_empty_rows, scale = 1.000000e+00 : f32}
func.func @finite_fill_causal_more_queries(%q: tensor<2x4x8xf32>, %k: tensor<2x2x8xf32>, %v: tensor<2x2x8xf32>) -> tensor<2x4x8xf32> {
  %ones = fsdp.constant dense<true> : tensor<4x2xi1>
  %fill = fsdp.constant dense<-1.0e+09> : tensor<f32>
  %s = fsdp.matmul %q, %k {transpose_rhs = true} : tensor<2x4x8xf32>, tensor<2x2x8xf32> -> tensor<2x4x2xf32>
  %keep = fsdp.trilu %ones {k = -2 : i64, upper = false} : tensor<4x2xi1>
  %m = fsdp.where %keep, %s, %fill : tensor<4x2xi1>, tensor<2x4x2xf32>, tensor<f32> -> tensor<2x4x2xf32>
  %p = fsdp.softmax %m {axis = 2 : i64} : tensor<2x4x2xf32>
  %o = fsdp.matmul %p, %v : tensor<2x4x2xf32>, tensor<2x2x8xf32> -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}
