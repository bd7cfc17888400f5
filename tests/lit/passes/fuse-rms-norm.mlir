// RUN: fsdp-opt %s -split-input-file -fsdp-fuse-rms-norm | FileCheck %s

// Llama's RMSNorm as torch.onnx.export writes x / sqrt(mean(x²) + eps) · w.
// CHECK-LABEL: func.func @divided
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[W:.*]]: tensor<8xf32>)
// CHECK-NEXT: %[[Y:.*]] = fsdp.rms_norm %[[X]], %[[W]] {axis = 2 : i64, epsilon = 9.99999997E-7 : f32}
// CHECK-NEXT: return %[[Y]]
func.func @divided(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %two = fsdp.constant dense<2.0> : tensor<f32>
  %eps = fsdp.constant dense<1.0e-6> : tensor<f32>
  %sq = fsdp.pow %x, %two : tensor<2x4x8xf32>, tensor<f32> -> tensor<2x4x8xf32>
  %m = fsdp.reduce_mean %sq {axes = array<i64: 2>} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %a = fsdp.add %m, %eps : tensor<2x4x1xf32>, tensor<f32> -> tensor<2x4x1xf32>
  %s = fsdp.sqrt %a : tensor<2x4x1xf32>
  %n = fsdp.div %x, %s : tensor<2x4x8xf32>, tensor<2x4x1xf32> -> tensor<2x4x8xf32>
  %y = fsdp.mul %n, %w : tensor<2x4x8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// torchtitan's and HuggingFace's form: w · (x · rsqrt(eps + mean(x · x))),
// with x itself a product (it must stay whole).
// CHECK-LABEL: func.func @rsqrt_weight_first
// CHECK: %[[X:.*]] = fsdp.mul %arg0, %arg1
// CHECK-NEXT: %[[Y:.*]] = fsdp.rms_norm %[[X]], %arg2 {axis = 1 : i64, epsilon = 9.99999974E-6 : f32}
// CHECK-NEXT: return %[[Y]]
func.func @rsqrt_weight_first(%p: tensor<3x16xf32>, %q: tensor<3x16xf32>, %w: tensor<16xf32>) -> tensor<3x16xf32> {
  %eps = fsdp.constant dense<1.0e-5> : tensor<f32>
  %x = fsdp.mul %p, %q : tensor<3x16xf32>, tensor<3x16xf32> -> tensor<3x16xf32>
  %sq = fsdp.mul %x, %x : tensor<3x16xf32>, tensor<3x16xf32> -> tensor<3x16xf32>
  %m = fsdp.reduce_mean %sq {axes = array<i64: 1>} : tensor<3x16xf32> -> tensor<3x1xf32>
  %a = fsdp.add %eps, %m : tensor<f32>, tensor<3x1xf32> -> tensor<3x1xf32>
  %r = fsdp.rsqrt %a : tensor<3x1xf32>
  %n = fsdp.mul %x, %r : tensor<3x16xf32>, tensor<3x1xf32> -> tensor<3x16xf32>
  %y = fsdp.mul %w, %n : tensor<16xf32>, tensor<3x16xf32> -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}

// -----

// x · (1 / sqrt(…)) · w, over the two trailing axes; an intermediate with
// another user stays.
// CHECK-LABEL: func.func @reciprocal_two_axes
// CHECK: %[[M:.*]] = fsdp.reduce_mean
// CHECK: %[[Y:.*]] = fsdp.rms_norm %arg0, %arg1 {axis = 1 : i64, epsilon = 9.99999997E-7 : f32} : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: return %[[Y]], %[[M]]
func.func @reciprocal_two_axes(%x: tensor<2x3x4xf32>, %w: tensor<3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x1x1xf32>) {
  %two = fsdp.constant dense<2.0> : tensor<f32>
  %one = fsdp.constant dense<1.0> : tensor<f32>
  %eps = fsdp.constant dense<1.0e-6> : tensor<f32>
  %sq = fsdp.pow %x, %two : tensor<2x3x4xf32>, tensor<f32> -> tensor<2x3x4xf32>
  %m = fsdp.reduce_mean %sq {axes = array<i64: 1, 2>} : tensor<2x3x4xf32> -> tensor<2x1x1xf32>
  %a = fsdp.add %m, %eps : tensor<2x1x1xf32>, tensor<f32> -> tensor<2x1x1xf32>
  %s = fsdp.sqrt %a : tensor<2x1x1xf32>
  %r = fsdp.div %one, %s : tensor<f32>, tensor<2x1x1xf32> -> tensor<2x1x1xf32>
  %n = fsdp.mul %x, %r : tensor<2x3x4xf32>, tensor<2x1x1xf32> -> tensor<2x3x4xf32>
  %y = fsdp.mul %n, %w : tensor<2x3x4xf32>, tensor<3x4xf32> -> tensor<2x3x4xf32>
  return %y, %m : tensor<2x3x4xf32>, tensor<2x1x1xf32>
}

// -----

// Not an RMSNorm: the mean over a leading axis, a scale of the wrong
// shape, a mean of something other than x², an extra factor.
// CHECK-LABEL: func.func @not_rms
// CHECK-NOT: fsdp.rms_norm
func.func @not_rms(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %v: tensor<2x8xf32>, %u: tensor<2x1xf32>)
    -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %two = fsdp.constant dense<2.0> : tensor<f32>
  %eps = fsdp.constant dense<1.0e-6> : tensor<f32>
  %sq = fsdp.pow %x, %two : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %m0 = fsdp.reduce_mean %sq {axes = array<i64: 0>} : tensor<2x8xf32> -> tensor<1x8xf32>
  %a0 = fsdp.add %m0, %eps : tensor<1x8xf32>, tensor<f32> -> tensor<1x8xf32>
  %r0 = fsdp.rsqrt %a0 : tensor<1x8xf32>
  %n0 = fsdp.mul %x, %r0 : tensor<2x8xf32>, tensor<1x8xf32> -> tensor<2x8xf32>
  %y0 = fsdp.mul %n0, %w : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  %m = fsdp.reduce_mean %sq {axes = array<i64: 1>} : tensor<2x8xf32> -> tensor<2x1xf32>
  %a = fsdp.add %m, %eps : tensor<2x1xf32>, tensor<f32> -> tensor<2x1xf32>
  %r = fsdp.rsqrt %a : tensor<2x1xf32>
  %n = fsdp.mul %x, %r : tensor<2x8xf32>, tensor<2x1xf32> -> tensor<2x8xf32>
  %y1 = fsdp.mul %n, %u : tensor<2x8xf32>, tensor<2x1xf32> -> tensor<2x8xf32>
  %sv = fsdp.pow %v, %two : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %mv = fsdp.reduce_mean %sv {axes = array<i64: 1>} : tensor<2x8xf32> -> tensor<2x1xf32>
  %av = fsdp.add %mv, %eps : tensor<2x1xf32>, tensor<f32> -> tensor<2x1xf32>
  %rv = fsdp.rsqrt %av : tensor<2x1xf32>
  %nv = fsdp.mul %x, %rv : tensor<2x8xf32>, tensor<2x1xf32> -> tensor<2x8xf32>
  %y2 = fsdp.mul %nv, %w : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  %nv2 = fsdp.mul %n, %v : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %y3 = fsdp.mul %nv2, %w : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  return %y0, %y1, %y2, %y3 : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}
