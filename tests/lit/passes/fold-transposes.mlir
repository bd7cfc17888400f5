// RUN: fsdp-opt %s -split-input-file -fsdp-fold-transposes | FileCheck %s

// nn.Linear as exported: the weight's transpose becomes a flag, no copy.
// CHECK-LABEL: func.func @linear
// CHECK-NOT: fsdp.transpose
// CHECK: fsdp.matmul %arg0, %[[W:.*]] {transpose_rhs = true} : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x3xf32>
fsdp.parameter @w : tensor<3x4xf32> {module_path = "fc"}
func.func @linear(%x: tensor<2x4xf32>) -> tensor<2x3xf32> {
  %w = fsdp.get_parameter @w : tensor<3x4xf32>
  %t = fsdp.transpose %w {perm = array<i64: 1, 0>} : tensor<3x4xf32> -> tensor<4x3xf32>
  %y = fsdp.matmul %x, %t : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

// Batched, on the left, flipping a flag already set; a transpose that is
// also returned stays for that use; one that moves a batch dimension does
// not fold.
// CHECK-LABEL: func.func @batched
// CHECK: %[[T:.*]] = fsdp.transpose %arg0 {perm = array<i64: 0, 2, 1>}
// CHECK: fsdp.matmul %arg0, %arg1 : tensor<2x4x3xf32>, tensor<2x3x5xf32>
// CHECK: %[[P:.*]] = fsdp.transpose %arg2 {perm = array<i64: 1, 0, 2>}
// CHECK: fsdp.matmul %[[P]], %arg1
// CHECK: return {{.*}}, %[[T]]
func.func @batched(%a: tensor<2x4x3xf32>, %b: tensor<2x3x5xf32>, %c: tensor<4x2x3xf32>)
    -> (tensor<2x4x5xf32>, tensor<2x4x5xf32>, tensor<2x3x4xf32>) {
  %t = fsdp.transpose %a {perm = array<i64: 0, 2, 1>} : tensor<2x4x3xf32> -> tensor<2x3x4xf32>
  %y = fsdp.matmul %t, %b {transpose_lhs = true} : tensor<2x3x4xf32>, tensor<2x3x5xf32> -> tensor<2x4x5xf32>
  %p = fsdp.transpose %c {perm = array<i64: 1, 0, 2>} : tensor<4x2x3xf32> -> tensor<2x4x3xf32>
  %z = fsdp.matmul %p, %b : tensor<2x4x3xf32>, tensor<2x3x5xf32> -> tensor<2x4x5xf32>
  return %y, %z, %t : tensor<2x4x5xf32>, tensor<2x4x5xf32>, tensor<2x3x4xf32>
}

// -----

// A transpose of a transpose is one transpose (K exported as [B,H,D,T] and
// turned back to [B,H,T,D] for attention); two that cancel are none, and
// one the chain goes through that is also returned stays for that use.
// CHECK-LABEL: func.func @chains
// CHECK: %[[ONE:.*]] = fsdp.transpose %arg0 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
// CHECK: %[[KEPT:.*]] = fsdp.transpose %arg1 {perm = array<i64: 1, 0>}
// CHECK-NOT: fsdp.transpose
// CHECK: return %[[ONE]], %arg1, %[[KEPT]], %arg1
func.func @chains(%k: tensor<2x5x3x4xf32>, %m: tensor<3x4xf32>)
    -> (tensor<2x3x5x4xf32>, tensor<3x4xf32>, tensor<4x3xf32>, tensor<3x4xf32>) {
  %a = fsdp.transpose %k {perm = array<i64: 0, 2, 3, 1>} : tensor<2x5x3x4xf32> -> tensor<2x3x4x5xf32>
  %b = fsdp.transpose %a {perm = array<i64: 0, 1, 3, 2>} : tensor<2x3x4x5xf32> -> tensor<2x3x5x4xf32>
  %c = fsdp.transpose %m {perm = array<i64: 1, 0>} : tensor<3x4xf32> -> tensor<4x3xf32>
  %d = fsdp.transpose %c {perm = array<i64: 1, 0>} : tensor<4x3xf32> -> tensor<3x4xf32>
  %e = fsdp.transpose %d {perm = array<i64: 1, 0>} : tensor<3x4xf32> -> tensor<4x3xf32>
  %f = fsdp.transpose %e {perm = array<i64: 1, 0>} : tensor<4x3xf32> -> tensor<3x4xf32>
  return %b, %d, %c, %f : tensor<2x3x5x4xf32>, tensor<3x4xf32>, tensor<4x3xf32>, tensor<3x4xf32>
}

// -----

// One transpose read by two matmuls (and on both sides of one): it folds
// into each and is erased once (it was erased once per reader, a
// use-after-free that corrupted the heap on a traced PatchTST).
// CHECK-LABEL: func.func @shared
// CHECK-NOT: fsdp.transpose
// CHECK: fsdp.matmul %arg0, %arg1 {transpose_rhs = true}
// CHECK: fsdp.matmul %arg1, %arg1 {transpose_lhs = true} : tensor<2x5x3xf32>, tensor<2x5x3xf32> -> tensor<2x3x3xf32>
func.func @shared(%a: tensor<2x4x3xf32>, %b: tensor<2x5x3xf32>) -> (tensor<2x4x5xf32>, tensor<2x3x3xf32>) {
  %t = fsdp.transpose %b {perm = array<i64: 0, 2, 1>} : tensor<2x5x3xf32> -> tensor<2x3x5xf32>
  %y = fsdp.matmul %a, %t : tensor<2x4x3xf32>, tensor<2x3x5xf32> -> tensor<2x4x5xf32>
  %z = fsdp.matmul %t, %t {transpose_rhs = true} : tensor<2x3x5xf32>, tensor<2x3x5xf32> -> tensor<2x3x3xf32>
  return %y, %z : tensor<2x4x5xf32>, tensor<2x3x3xf32>
}
