// RUN: fsdp-opt %s | fsdp-opt | FileCheck %s
// RUN: fsdp-opt %s --mlir-print-op-generic | fsdp-opt | FileCheck %s

// CHECK: fsdp.parameter @fc.weight : tensor<4x8xf32> {module_path = "fc"}
fsdp.parameter @"fc.weight" : tensor<4x8xf32> {module_path = "fc"}
// CHECK: fsdp.parameter @h.0.w : tensor<16xf32> {length = 64 : i64, location = "m.onnx.data", module_path = "h.0", offset = 128 : i64, source = "external"}
fsdp.parameter @"h.0.w" : tensor<16xf32> {module_path = "h.0", source = "external", location = "m.onnx.data", offset = 128 : i64, length = 64 : i64}
// CHECK: fsdp.unit @u0 {params = [@fc.weight], reshard_after_forward = false}
fsdp.unit @u0 {params = [@"fc.weight"], reshard_after_forward = false}
// CHECK: fsdp.unit @u1 {params = [@h.0.w]}
fsdp.unit @u1 {params = [@"h.0.w"]}

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%x: tensor<2x4xf32>, %y: tensor<4xf32>, %b: tensor<2x4xi1>) {
  // CHECK: fsdp.constant dense<1.250000e-01> : tensor<f32>
  %c = fsdp.constant dense<0.125> : tensor<f32>
  // CHECK: fsdp.neg %{{.*}} : tensor<2x4xf32>
  %0 = fsdp.neg %x : tensor<2x4xf32>
  // CHECK: fsdp.abs
  %1 = fsdp.abs %x : tensor<2x4xf32>
  // CHECK: fsdp.exp
  %2 = fsdp.exp %x : tensor<2x4xf32>
  // CHECK: fsdp.log
  %3 = fsdp.log %x : tensor<2x4xf32>
  // CHECK: fsdp.sqrt
  %4 = fsdp.sqrt %x : tensor<2x4xf32>
  // CHECK: fsdp.rsqrt
  %5 = fsdp.rsqrt %x : tensor<2x4xf32>
  // CHECK: fsdp.reciprocal
  %6 = fsdp.reciprocal %x : tensor<2x4xf32>
  // CHECK: fsdp.tanh
  %7 = fsdp.tanh %x : tensor<2x4xf32>
  // CHECK: fsdp.erf
  %8 = fsdp.erf %x : tensor<2x4xf32>
  // CHECK: fsdp.relu
  %9 = fsdp.relu %x : tensor<2x4xf32>
  // CHECK: fsdp.sigmoid
  %10 = fsdp.sigmoid %x : tensor<2x4xf32>
  // CHECK: fsdp.silu
  %11 = fsdp.silu %x : tensor<2x4xf32>
  // CHECK: fsdp.gelu %{{.*}} {approximate = "tanh"} : tensor<2x4xf32>
  %12 = fsdp.gelu %x {approximate = "tanh"} : tensor<2x4xf32>
  // CHECK: fsdp.not %{{.*}} : tensor<2x4xi1>
  %13 = fsdp.not %b : tensor<2x4xi1>
  // CHECK: fsdp.add %{{.*}}, %{{.*}} : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xf32>
  %20 = fsdp.add %x, %y : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xf32>
  // CHECK: fsdp.sub
  %21 = fsdp.sub %x, %y : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xf32>
  // CHECK: fsdp.mul %{{.*}}, %{{.*}} : tensor<2x4xf32>, tensor<f32> -> tensor<2x4xf32>
  %22 = fsdp.mul %x, %c : tensor<2x4xf32>, tensor<f32> -> tensor<2x4xf32>
  // CHECK: fsdp.div
  %23 = fsdp.div %x, %c : tensor<2x4xf32>, tensor<f32> -> tensor<2x4xf32>
  // CHECK: fsdp.pow
  %24 = fsdp.pow %x, %c : tensor<2x4xf32>, tensor<f32> -> tensor<2x4xf32>
  // CHECK: fsdp.max
  %25 = fsdp.max %x, %y : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xf32>
  // CHECK: fsdp.min
  %26 = fsdp.min %x, %y : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xf32>
  // CHECK: fsdp.equal %{{.*}} -> tensor<2x4xi1>
  %27 = fsdp.equal %x, %y : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xi1>
  // CHECK: fsdp.less
  %28 = fsdp.less %x, %y : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xi1>
  // CHECK: fsdp.greater
  %29 = fsdp.greater %x, %y : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xi1>
  // CHECK: fsdp.and
  %30 = fsdp.and %b, %27 : tensor<2x4xi1>, tensor<2x4xi1> -> tensor<2x4xi1>
  // CHECK: fsdp.or
  %31 = fsdp.or %b, %28 : tensor<2x4xi1>, tensor<2x4xi1> -> tensor<2x4xi1>
  // CHECK: fsdp.where %{{.*}} : tensor<2x4xi1>, tensor<2x4xf32>, tensor<f32> -> tensor<2x4xf32>
  %32 = fsdp.where %b, %x, %c : tensor<2x4xi1>, tensor<2x4xf32>, tensor<f32> -> tensor<2x4xf32>
  // CHECK: fsdp.cast %{{.*}} : tensor<2x4xf32> -> tensor<2x4xbf16>
  %33 = fsdp.cast %x : tensor<2x4xf32> -> tensor<2x4xbf16>
  return
}

// CHECK-LABEL: func.func @compute
func.func @compute(%x: tensor<2x8x16xf32>, %w: tensor<16x32xf32>,
                   %a: tensor<4x8xf32>, %wt: tensor<16x8xf32>,
                   %bias: tensor<16xf32>, %g: tensor<16xf32>,
                   %wsq: tensor<16x16xf32>,
                   %q: tensor<2x4x8x16xf32>, %m: tensor<2x1x1x8xf32>,
                   %ids: tensor<2x8xi64>, %emb: tensor<100x16xf32>,
                   %logits: tensor<8x100xf32>, %t: tensor<8xi64>) {
  // CHECK: fsdp.matmul %{{.*}}, %{{.*}} : tensor<2x8x16xf32>, tensor<16x32xf32> -> tensor<2x8x32xf32>
  %0 = fsdp.matmul %x, %w : tensor<2x8x16xf32>, tensor<16x32xf32> -> tensor<2x8x32xf32>
  // CHECK: fsdp.matmul %{{.*}} {transpose_rhs = true}
  %1 = fsdp.matmul %x, %x {transpose_rhs = true} : tensor<2x8x16xf32>, tensor<2x8x16xf32> -> tensor<2x8x8xf32>
  // CHECK: fsdp.matmul %{{.*}}, %{{.*}} bias %{{.*}} {transpose_rhs = true} : tensor<2x8x16xf32>, tensor<16x16xf32>, tensor<16xf32> -> tensor<2x8x16xf32>
  %b1 = fsdp.matmul %x, %wsq bias %g {transpose_rhs = true} : tensor<2x8x16xf32>, tensor<16x16xf32>, tensor<16xf32> -> tensor<2x8x16xf32>
  // CHECK: fsdp.gemm %{{.*}}, %{{.*}}, %{{.*}} {trans_b = true} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %2 = fsdp.gemm %a, %wt, %bias {trans_b = true} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  // CHECK: fsdp.reduce_sum %{{.*}} {axes = array<i64: 2>} : tensor<2x8x16xf32> -> tensor<2x8x1xf32>
  %3 = fsdp.reduce_sum %x {axes = array<i64: 2>, keepdims = true} : tensor<2x8x16xf32> -> tensor<2x8x1xf32>
  // CHECK: fsdp.reduce_mean %{{.*}} -> tensor<16xf32>
  %4 = fsdp.reduce_mean %x {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x8x16xf32> -> tensor<16xf32>
  // CHECK: fsdp.reduce_max
  %5 = fsdp.reduce_max %x {axes = array<i64: 1>, keepdims = true} : tensor<2x8x16xf32> -> tensor<2x1x16xf32>
  // Integers sum and take maxima in int64 (a mask's count, a position).
  // CHECK: fsdp.reduce_sum %{{.*}} {axes = array<i64: 1>, keepdims = false} : tensor<2x8xi64> -> tensor<2xi64>
  %i5 = fsdp.reduce_sum %ids {axes = array<i64: 1>, keepdims = false} : tensor<2x8xi64> -> tensor<2xi64>
  // CHECK: fsdp.reduce_max %{{.*}} : tensor<2x8xi64> -> tensor<2x1xi64>
  %i6 = fsdp.reduce_max %ids {axes = array<i64: 1>} : tensor<2x8xi64> -> tensor<2x1xi64>
  // CHECK: fsdp.sum_squares %{{.*}} : tensor<2x8x16xf32> -> tensor<f32>
  %sq = fsdp.sum_squares %x : tensor<2x8x16xf32> -> tensor<f32>
  // CHECK: fsdp.softmax %{{.*}} {axis = 2 : i64} : tensor<2x8x16xf32>
  %6 = fsdp.softmax %x {axis = 2 : i64} : tensor<2x8x16xf32>
  // CHECK: fsdp.log_softmax
  %7 = fsdp.log_softmax %x {axis = 2 : i64} : tensor<2x8x16xf32>
  // CHECK: fsdp.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %8 = fsdp.layer_norm %x, %g, %bias {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  // CHECK: fsdp.layer_norm %{{.*}}, %{{.*}} {axis = 2 : i64
  %9 = fsdp.layer_norm %x, %g {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  // CHECK: fsdp.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true, scale = 2.500000e-01 : f32}
  %10 = fsdp.attention %q, %q, %q {causal = true, scale = 0.25 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  // CHECK: fsdp.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {scale
  %11 = fsdp.attention %q, %q, %q, %m {scale = 0.25 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x1x1x8xf32>) -> tensor<2x4x8x16xf32>
  // A training step's forward: the rows' log-sum-exp too ([B, H, T]); in
  // the bshd layout q is [B, T, H, D] (here 2x4x8x16: T 4, H 8).
  // CHECK: fsdp.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true, layout = "bshd", scale = 2.500000e-01 : f32, with_lse} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x8x4xf32>)
  %o11, %lse11 = fsdp.attention %q, %q, %q {causal = true, layout = "bshd", scale = 0.25 : f32, with_lse} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x8x4xf32>)
  // CHECK: fsdp.gather %{{.*}}, %{{.*}} : tensor<100x16xf32>, tensor<2x8xi64> -> tensor<2x8x16xf32>
  %12 = fsdp.gather %emb, %ids {axis = 0 : i64} : tensor<100x16xf32>, tensor<2x8xi64> -> tensor<2x8x16xf32>
  // CHECK: fsdp.cross_entropy %{{.*}}, %{{.*}} {ignore_index = -100 : i64} : (tensor<8x100xf32>, tensor<8xi64>) -> tensor<f32>
  %13 = fsdp.cross_entropy %logits, %t {reduction = "mean", ignore_index = -100 : i64} : (tensor<8x100xf32>, tensor<8xi64>) -> tensor<f32>
  // CHECK: fsdp.nll_loss %{{.*}} {reduction = "none"} : (tensor<8x100xf32>, tensor<8xi64>) -> tensor<8xf32>
  %14 = fsdp.nll_loss %logits, %t {reduction = "none"} : (tensor<8x100xf32>, tensor<8xi64>) -> tensor<8xf32>
  return
}

// CHECK-LABEL: func.func @movement
func.func @movement(%x: tensor<2x6xf32>, %y: tensor<2x3x4xf32>, %r: tensor<1x4xf32>, %s: tensor<4x4xf32>) {
  // CHECK: fsdp.reshape %{{.*}} : tensor<2x6xf32> -> tensor<3x4xf32>
  %0 = fsdp.reshape %x : tensor<2x6xf32> -> tensor<3x4xf32>
  // CHECK: fsdp.transpose %{{.*}} {perm = array<i64: 0, 2, 1>} : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  %1 = fsdp.transpose %y {perm = array<i64: 0, 2, 1>} : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  // CHECK: fsdp.slice %{{.*}} {limits = array<i64: 2, 5>, starts = array<i64: 0, 1>, strides = array<i64: 1, 2>} : tensor<2x6xf32> -> tensor<2x2xf32>
  %2 = fsdp.slice %x {starts = array<i64: 0, 1>, limits = array<i64: 2, 5>, strides = array<i64: 1, 2>} : tensor<2x6xf32> -> tensor<2x2xf32>
  // CHECK: fsdp.concat %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<2x6xf32>, tensor<2x2xf32>) -> tensor<2x8xf32>
  %3 = fsdp.concat %x, %2 {axis = 1 : i64} : (tensor<2x6xf32>, tensor<2x2xf32>) -> tensor<2x8xf32>
  // CHECK: fsdp.split %{{.*}} {axis = 1 : i64, sizes = array<i64: 2, 4>} : (tensor<2x6xf32>) -> (tensor<2x2xf32>, tensor<2x4xf32>)
  %4:2 = fsdp.split %x {axis = 1 : i64, sizes = array<i64: 2, 4>} : (tensor<2x6xf32>) -> (tensor<2x2xf32>, tensor<2x4xf32>)
  // CHECK: fsdp.broadcast %{{.*}} : tensor<1x4xf32> -> tensor<3x4xf32>
  %5 = fsdp.broadcast %r : tensor<1x4xf32> -> tensor<3x4xf32>
  // CHECK: fsdp.trilu %{{.*}} {upper = false} : tensor<4x4xf32>
  %6 = fsdp.trilu %s {upper = false} : tensor<4x4xf32>
  return
}

// CHECK-LABEL: func.func @distribution
func.func @distribution(%shard: tensor<8xf32>, %grad: tensor<32xf32>, %sq: tensor<f32>) -> tensor<32xf32> {
  // CHECK: %[[W:.*]] = fsdp.get_parameter @fc.weight : tensor<4x8xf32>
  %w = fsdp.get_parameter @fc.weight : tensor<4x8xf32>
  // CHECK: %[[F:.*]] = fsdp.all_gather_start %{{.*}} {group_size = 4 : i64, unit = @u0} : tensor<8xf32> -> !fsdp.future<tensor<32xf32>>
  %f = fsdp.all_gather_start %shard {group_size = 4 : i64, unit = @u0} : tensor<8xf32> -> !fsdp.future<tensor<32xf32>>
  // CHECK: %[[FULL:.*]] = fsdp.wait %[[F]] : !fsdp.future<tensor<32xf32>>
  %full = fsdp.wait %f : !fsdp.future<tensor<32xf32>>
  // CHECK: fsdp.reduce_scatter_start %{{.*}} {group_size = 4 : i64, reduction = "avg"} : tensor<32xf32> -> !fsdp.future<tensor<8xf32>>
  %g = fsdp.reduce_scatter_start %grad {group_size = 4 : i64, reduction = "avg"} : tensor<32xf32> -> !fsdp.future<tensor<8xf32>>
  %gs = fsdp.wait %g : !fsdp.future<tensor<8xf32>>
  // CHECK: fsdp.all_reduce %{{.*}} {group_size = 4 : i64} : tensor<f32> -> !fsdp.future<tensor<f32>>
  %n = fsdp.all_reduce %sq {group_size = 4 : i64} : tensor<f32> -> !fsdp.future<tensor<f32>>
  %ns = fsdp.wait %n : !fsdp.future<tensor<f32>>
  %sum = fsdp.add %full, %grad : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
  // CHECK: fsdp.free %[[FULL]] : tensor<32xf32>
  fsdp.free %full : tensor<32xf32>
  return %sum : tensor<32xf32>
}

// CHECK-LABEL: func.func @training
func.func @training(%z: tensor<100x16xf32>, %ids: tensor<2x8xi64>, %dy: tensor<2x8x16xf32>,
                    %d8: tensor<2x8xf32>, %s4: tensor<2x4xf32>, %logits: tensor<8x100xf32>,
                    %t: tensor<8xi64>, %g: tensor<f32>, %gw: tensor<4x8xf32>,
                    %lse: tensor<2x8xf32>, %bm: tensor<2x8x8xi1>) {
  // CHECK: fsdp.scatter_add %{{.*}}, %{{.*}}, %{{.*}} : (tensor<100x16xf32>, tensor<2x8xi64>, tensor<2x8x16xf32>) -> tensor<100x16xf32>
  %0 = fsdp.scatter_add %z, %ids, %dy : (tensor<100x16xf32>, tensor<2x8xi64>, tensor<2x8x16xf32>) -> tensor<100x16xf32>
  // CHECK: fsdp.insert_slice %{{.*}}, %{{.*}} {starts = array<i64: 0, 4>, strides = array<i64: 1, 1>}
  %1 = fsdp.insert_slice %d8, %s4 {starts = array<i64: 0, 4>, strides = array<i64: 1, 1>} : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  // CHECK: fsdp.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} {ignore_index = -100 : i64, kind = "softmax"}
  %2 = fsdp.cross_entropy_grad %logits, %t, %g {kind = "softmax", ignore_index = -100 : i64} : (tensor<8x100xf32>, tensor<8xi64>, tensor<f32>) -> tensor<8x100xf32>
  // CHECK: fsdp.cross_entropy_with_grad %{{.*}}, %{{.*}}, %{{.*}} {ignore_index = -100 : i64, reduction = "sum"} : (tensor<8x100xf32>, tensor<8xi64>, tensor<f32>) -> (tensor<f32>, tensor<8x100xf32>)
  %loss, %dlogits = fsdp.cross_entropy_with_grad %logits, %t, %g {reduction = "sum", ignore_index = -100 : i64} : (tensor<8x100xf32>, tensor<8xi64>, tensor<f32>) -> (tensor<f32>, tensor<8x100xf32>)
  // CHECK: fsdp.adamw @fc.weight, %{{.*}} {beta1 = 0.899999976 : f32, beta2 = 9.990000e-01 : f32, eps = 9.99999993E-9 : f32, lr = 1.000000e-03 : f32, weight_decay = 0.00999999977 : f32} : tensor<4x8xf32>
  fsdp.adamw @fc.weight, %gw {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.999 : f32, eps = 1.0e-8 : f32, weight_decay = 0.01 : f32} : tensor<4x8xf32>
  // CHECK: fsdp.sgd @fc.weight, %{{.*}} {lr = 1.000000e-01 : f32, momentum = 0.899999976 : f32, nesterov = true, weight_decay = 0.000000e+00 : f32} : tensor<4x8xf32>
  fsdp.sgd @fc.weight, %gw {lr = 0.1 : f32, momentum = 0.9 : f32, nesterov = true, weight_decay = 0.0 : f32} : tensor<4x8xf32>
  // CHECK: fsdp.adamw @fc.weight, %{{.*}} scaled by %{{.*}} : tensor<f32> {{{.*}}} : tensor<4x8xf32>
  fsdp.adamw @fc.weight, %gw scaled by %g : tensor<f32> {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.999 : f32, eps = 1.0e-8 : f32, weight_decay = 0.01 : f32} : tensor<4x8xf32>
  // CHECK: fsdp.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {causal = true, scale = 5.000000e-01 : f32} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  %dq, %dk, %dv = fsdp.attention_grad %dy, %dy, %dy, %dy {causal = true, scale = 0.5 : f32} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  // With the forward's output and lse saved, and with a mask too.
  // CHECK: fsdp.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} saved %{{.*}}, %{{.*}} {scale = 5.000000e-01 : f32} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  %dq2, %dk2, %dv2 = fsdp.attention_grad %dy, %dy, %dy, %dy saved %dy, %lse {scale = 0.5 : f32} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  // CHECK: fsdp.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} saved %{{.*}}, %{{.*}} {scale
  %dq3, %dk3, %dv3 = fsdp.attention_grad %dy, %dy, %dy, %dy, %bm saved %dy, %lse {scale = 0.5 : f32} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x8xi1>, tensor<2x8x16xf32>, tensor<2x8xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  // CHECK: fsdp.accumulate_grad @fc.weight, %{{.*}} : tensor<4x8xf32>
  fsdp.accumulate_grad @fc.weight, %gw : tensor<4x8xf32>
  // CHECK: fsdp.read_grad @fc.weight : tensor<4x8xf32>
  %sum = fsdp.read_grad @fc.weight : tensor<4x8xf32>
  return
}

// CHECK-LABEL: func.func @convolutions
// CHECK: fsdp.conv %{{.*}}, %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, groups = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x4x4xf32>
// CHECK: fsdp.conv_grad_input
// CHECK: fsdp.conv_grad_weight
func.func @convolutions(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>, %g: tensor<2x4x4x4xf32>) -> (tensor<2x4x4x4xf32>, tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) {
  %y = fsdp.conv %x, %w, %b {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x4x4xf32>
  %dx = fsdp.conv_grad_input %g, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x4x4x4xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x8x8xf32>
  %dw = fsdp.conv_grad_weight %x, %g {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x3x8x8xf32>, tensor<2x4x4x4xf32>) -> tensor<4x3x3x3xf32>
  return %y, %dx, %dw : tensor<2x4x4x4xf32>, tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>
}
