// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

func.func @constant_not_tensor() {
  // expected-error @+1 {{constant value must be a tensor}}
  %0 = fsdp.constant dense<1.0> : vector<2xf32>
  return
}

// -----

func.func @get_parameter_missing() {
  // expected-error @+1 {{'nope' is not an fsdp.parameter}}
  %0 = fsdp.get_parameter @nope : tensor<4xf32>
  return
}

// -----

fsdp.parameter @w : tensor<4xf32> {module_path = ""}
func.func @get_parameter_type() {
  // expected-error @+1 {{result type 'tensor<5xf32>' differs from the parameter's 'tensor<4xf32>'}}
  %0 = fsdp.get_parameter @w : tensor<5xf32>
  return
}

// -----

func.func @gelu(%x: tensor<4xf32>) {
  // expected-error @+1 {{approximate must be "none" or "tanh", got "fast"}}
  %0 = fsdp.gelu %x {approximate = "fast"} : tensor<4xf32>
  return
}

// -----

func.func @binary_elements(%x: tensor<4xf32>, %y: tensor<4xf16>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{operand element types differ: 'f32' and 'f16'}}
  %0 = fsdp.add %x, %y : tensor<4xf32>, tensor<4xf16> -> tensor<4xf32>
  return
}

// -----

func.func @binary_broadcast(%x: tensor<4xf32>, %y: tensor<3xf32>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{shapes [4] and [3] do not broadcast}}
  %0 = fsdp.mul %x, %y : tensor<4xf32>, tensor<3xf32> -> tensor<4xf32>
  return
}

// -----

func.func @binary_result(%x: tensor<4xf32>, %y: tensor<1xf32>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<5xf32>'}}
  %0 = fsdp.sub %x, %y : tensor<4xf32>, tensor<1xf32> -> tensor<5xf32>
  return
}

// -----

func.func @where(%c: tensor<4xi1>, %x: tensor<4xf32>, %y: tensor<4xf16>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{selected element types differ}}
  %0 = fsdp.where %c, %x, %y : tensor<4xi1>, tensor<4xf32>, tensor<4xf16> -> tensor<4xf32>
  return
}

// -----

func.func @matmul_rank(%x: tensor<4xf32>, %y: tensor<4x2xf32>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{matmul operands need rank >= 2}}
  %0 = fsdp.matmul %x, %y : tensor<4xf32>, tensor<4x2xf32> -> tensor<2xf32>
  return
}

// -----

func.func @matmul_k(%x: tensor<3x4xf32>, %y: tensor<5x2xf32>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{matmul contraction dimensions differ}}
  %0 = fsdp.matmul %x, %y : tensor<3x4xf32>, tensor<5x2xf32> -> tensor<3x2xf32>
  return
}

// -----

func.func @matmul_bias(%x: tensor<3x4xf32>, %y: tensor<4x2xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{bias 'tensor<3xf32>' must be one 'f32' per column of the result 'tensor<3x2xf32>'}}
  %0 = fsdp.matmul %x, %y bias %b : tensor<3x4xf32>, tensor<4x2xf32>, tensor<3xf32> -> tensor<3x2xf32>
  return
}

// -----

func.func @gemm_rank(%x: tensor<2x3x4xf32>, %y: tensor<4x2xf32>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{gemm operands must be 2-D}}
  %0 = fsdp.gemm %x, %y : (tensor<2x3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @reduce_axes(%x: tensor<2x4xf32>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{reduction axes [1, 0] must be sorted, unique and in [0, 2)}}
  %0 = fsdp.reduce_sum %x {axes = array<i64: 1, 0>} : tensor<2x4xf32> -> tensor<1x1xf32>
  return
}

// -----

// A mean of integers is no integer: reduce_mean takes floats only.
func.func @reduce_mean_integer(%x: tensor<2x4xi64>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of floating-point values}}
  %0 = fsdp.reduce_mean %x {axes = array<i64: 1>} : tensor<2x4xi64> -> tensor<2x1xi64>
  return
}

// -----

func.func @softmax_axis(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = fsdp.softmax %x {axis = 2 : i64} : tensor<2x4xf32>
  return
}

// -----

func.func @layer_norm_scale(%x: tensor<2x4xf32>, %g: tensor<3xf32>) {
  // expected-error @+1 {{layer_norm scale/bias 'tensor<3xf32>' must have shape [4]}}
  %0 = fsdp.layer_norm %x, %g {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x4xf32>, tensor<3xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @layer_norm_epsilon(%x: tensor<2x4xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{epsilon must be finite}}
  %0 = fsdp.layer_norm %x, %g {axis = 1 : i64, epsilon = 0x7FC00000 : f32} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @layer_norm_result(%x: tensor<2x4xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{result type 'tensor<2x4xf16>' differs from the input's 'tensor<2x4xf32>'}}
  %0 = fsdp.layer_norm %x, %g {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf16>
  return
}

// -----

func.func @attention_heads(%q: tensor<2x8x16xf32>, %k: tensor<2x8x8xf32>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{attention q and k head sizes differ}}
  %0 = fsdp.attention %q, %k, %q {scale = 1.0 : f32} : (tensor<2x8x16xf32>, tensor<2x8x8xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_mask(%q: tensor<2x8x16xf32>, %m: tensor<2x3x8xf32>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{cannot broadcast 'tensor<2x3x8xf32>' to 'tensor<2x8x8xf32>'}}
  %0 = fsdp.attention %q, %q, %q, %m {scale = 1.0 : f32} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x3x8xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_average_additive(%q: tensor<2x8x16xf32>, %m: tensor<2x8x8xf32>) {
  // expected-error @+1 {{'fsdp.attention' op average_empty_rows needs a boolean mask, and neither causal nor safe_softmax}}
  %0 = fsdp.attention %q, %q, %q, %m {average_empty_rows, scale = 1.0 : f32} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x8xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_average_causal(%q: tensor<2x8x16xf32>, %m: tensor<2x8x8xi1>) {
  // expected-error @+1 {{average_empty_rows needs a boolean mask, and neither causal nor safe_softmax}}
  %0 = fsdp.attention %q, %q, %q, %m {average_empty_rows, causal = true, scale = 1.0 : f32} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x8xi1>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_grad_average_safe(%q: tensor<2x8x16xf32>, %m: tensor<2x8x8xi1>) {
  // expected-error @+1 {{'fsdp.attention_grad' op average_empty_rows needs a boolean mask, and neither causal nor safe_softmax}}
  %dq, %dk, %dv = fsdp.attention_grad %q, %q, %q, %q, %m {average_empty_rows, safe_softmax = true, scale = 1.0 : f32} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x8xi1>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  return
}

// -----

func.func @attention_layout(%q: tensor<2x4x8x16xf32>) {
  // expected-error @+1 {{'fsdp.attention' op layout must be "bhsd" or "bshd", got "hbsd"}}
  %0 = fsdp.attention %q, %q, %q {layout = "hbsd", scale = 1.0 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_grad_saved_lse(%q: tensor<2x8x16xf32>, %lse: tensor<2x16xf32>) {
  // expected-error @+1 {{'fsdp.attention_grad' op saved lse 'tensor<2x16xf32>' is not 'tensor<2x8xf32>'}}
  %dq, %dk, %dv = fsdp.attention_grad %q, %q, %q, %q saved %q, %lse {scale = 1.0 : f32} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  return
}

// -----

func.func @gather_axis(%d: tensor<4x8xf32>, %i: tensor<3xi64>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{gather axis 2 is out of range for rank 2}}
  %0 = fsdp.gather %d, %i {axis = 2 : i64} : tensor<4x8xf32>, tensor<3xi64> -> tensor<4x3xf32>
  return
}

// -----

func.func @loss_target(%x: tensor<8x10xf32>, %t: tensor<4xi64>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{loss target shape [4] does not match input 'tensor<8x10xf32>' (expected [8])}}
  %0 = fsdp.cross_entropy %x, %t : (tensor<8x10xf32>, tensor<4xi64>) -> tensor<f32>
  return
}

// -----

func.func @loss_reduction(%x: tensor<8x10xf32>, %t: tensor<8xi64>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{loss reduction must be mean, sum or none, got 'max'}}
  %0 = fsdp.nll_loss %x, %t {reduction = "max"} : (tensor<8x10xf32>, tensor<8xi64>) -> tensor<f32>
  return
}

// -----

func.func @loss_weight(%x: tensor<8x10xf32>, %t: tensor<8xi64>, %w: tensor<9xf32>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{loss weight must be [10], got 'tensor<9xf32>'}}
  %0 = fsdp.nll_loss %x, %t, %w : (tensor<8x10xf32>, tensor<8xi64>, tensor<9xf32>) -> tensor<f32>
  return
}

// -----

func.func @reshape(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{element count changes from 12 to 10}}
  %0 = fsdp.reshape %x : tensor<2x6xf32> -> tensor<2x5xf32>
  return
}

// -----

func.func @reshape_element(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{element type changes from 'f32' to 'f16'}}
  %0 = fsdp.reshape %x : tensor<2x6xf32> -> tensor<12xf16>
  return
}

// -----

func.func @transpose(%x: tensor<2x6xf32>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{invalid permutation [0, 0]}}
  %0 = fsdp.transpose %x {perm = array<i64: 0, 0>} : tensor<2x6xf32> -> tensor<2x2xf32>
  return
}

// -----

func.func @slice_bounds(%x: tensor<2x6xf32>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{slice [0, 7) of dimension 1 is outside [0, 6]}}
  %0 = fsdp.slice %x {starts = array<i64: 0, 0>, limits = array<i64: 2, 7>, strides = array<i64: 1, 1>} : tensor<2x6xf32> -> tensor<2x7xf32>
  return
}

// -----

func.func @slice_stride(%x: tensor<2x6xf32>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{slice stride 0 of dimension 1 must be positive}}
  %0 = fsdp.slice %x {starts = array<i64: 0, 0>, limits = array<i64: 2, 6>, strides = array<i64: 1, 0>} : tensor<2x6xf32> -> tensor<2x6xf32>
  return
}

// -----

func.func @concat(%x: tensor<2x6xf32>, %y: tensor<3x6xf32>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{differ outside axis 1}}
  %0 = fsdp.concat %x, %y {axis = 1 : i64} : (tensor<2x6xf32>, tensor<3x6xf32>) -> tensor<2x12xf32>
  return
}

// -----

func.func @split(%x: tensor<2x6xf32>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{split sizes [2, 2] add up to 4, not to the extent 6 of axis 1}}
  %0:2 = fsdp.split %x {axis = 1 : i64, sizes = array<i64: 2, 2>} : (tensor<2x6xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>)
  return
}

// -----

func.func @broadcast(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{cannot broadcast 'tensor<2x4xf32>' to 'tensor<3x4xf32>'}}
  %0 = fsdp.broadcast %x : tensor<2x4xf32> -> tensor<3x4xf32>
  return
}

// -----

func.func @trilu(%x: tensor<4xf32>) {
  // expected-error @+1 {{needs rank >= 2}}
  %0 = fsdp.trilu %x : tensor<4xf32>
  return
}

// -----

// expected-error @+1 {{source must be "initializer" or "external", got "web"}}
fsdp.parameter @w : tensor<4xf32> {module_path = "", source = "web"}

// -----

// expected-error @+1 {{external data needs location, offset and length}}
fsdp.parameter @w : tensor<4xf32> {module_path = "", source = "external", location = "w.bin"}

// -----

// expected-error @+1 {{external data location '/etc/passwd' must be a relative path without '..'}}
fsdp.parameter @w : tensor<4xf32> {module_path = "", source = "external", location = "/etc/passwd", offset = 0 : i64, length = 16 : i64}

// -----

// expected-error @+1 {{external data location 'a/../../b' must be a relative path without '..'}}
fsdp.parameter @w : tensor<4xf32> {module_path = "", source = "external", location = "a/../../b", offset = 0 : i64, length = 16 : i64}

// -----

// expected-error @+1 {{external data length 12 at offset 0 does not hold 'tensor<4xf32>' (16 bytes)}}
fsdp.parameter @w : tensor<4xf32> {module_path = "", source = "external", location = "w.bin", offset = 0 : i64, length = 12 : i64}

// -----

// expected-error @+1 {{location/offset/length only apply to external data}}
fsdp.parameter @w : tensor<4xf32> {module_path = "", location = "w.bin"}

// -----

// expected-error @+1 {{'missing' is not an fsdp.parameter}}
fsdp.unit @u {params = [@missing]}

// -----

fsdp.parameter @w : tensor<4xf32> {module_path = ""}
// expected-error @+1 {{lists 'w' twice}}
fsdp.unit @u {params = [@w, @w]}

// -----

fsdp.parameter @w : tensor<4xf32> {module_path = ""}
fsdp.unit @u0 {params = [@w]}
// expected-error @+1 {{parameter 'w' also belongs to unit 'u0'}}
fsdp.unit @u1 {params = [@w]}

// -----

// expected-error @+1 {{has no parameters}}
fsdp.unit @u {params = []}

// -----

func.func @all_gather_shape(%x: tensor<8xf32>) {
  // expected-error @+1 {{gathers 'tensor<8xf32>' over 4 ranks}}
  %f = fsdp.all_gather_start %x {group_size = 4 : i64} : tensor<8xf32> -> !fsdp.future<tensor<16xf32>>
  %0 = fsdp.wait %f : !fsdp.future<tensor<16xf32>>
  return
}

// -----

func.func @all_gather_unwaited(%x: tensor<8xf32>) {
  // expected-error @+1 {{future must be completed by exactly one fsdp.wait}}
  %f = fsdp.all_gather_start %x {group_size = 2 : i64} : tensor<8xf32> -> !fsdp.future<tensor<16xf32>>
  return
}

// -----

func.func @all_gather_group(%x: tensor<8xf32>) {
  // expected-error @+1 {{attribute 'group_size' failed to satisfy constraint}}
  %f = fsdp.all_gather_start %x {group_size = 0 : i64} : tensor<8xf32> -> !fsdp.future<tensor<8xf32>>
  %0 = fsdp.wait %f : !fsdp.future<tensor<8xf32>>
  return
}

// -----

func.func @reduce_scatter_divisible(%x: tensor<10xf32>) {
  // expected-error @+1 {{dimension 0 of 'tensor<10xf32>' is not divisible by the group size 4}}
  %f = fsdp.reduce_scatter_start %x {group_size = 4 : i64} : tensor<10xf32> -> !fsdp.future<tensor<2xf32>>
  %0 = fsdp.wait %f : !fsdp.future<tensor<2xf32>>
  return
}

// -----

func.func @reduce_scatter_shape(%x: tensor<8xf32>) {
  // expected-error @+1 {{scatters 'tensor<8xf32>' over 4 ranks}}
  %f = fsdp.reduce_scatter_start %x {group_size = 4 : i64} : tensor<8xf32> -> !fsdp.future<tensor<4xf32>>
  %0 = fsdp.wait %f : !fsdp.future<tensor<4xf32>>
  return
}

// -----

func.func @reduce_scatter_reduction(%x: tensor<8xf32>) {
  // expected-error @+1 {{reduction must be "sum" or "avg", got "max"}}
  %f = fsdp.reduce_scatter_start %x {group_size = 4 : i64, reduction = "max"} : tensor<8xf32> -> !fsdp.future<tensor<2xf32>>
  %0 = fsdp.wait %f : !fsdp.future<tensor<2xf32>>
  return
}

// -----

func.func @all_reduce_type(%x: tensor<f32>) {
  // expected-error @+1 {{result 'tensor<f16>' differs from the input 'tensor<f32>'}}
  %f = fsdp.all_reduce %x {group_size = 4 : i64} : tensor<f32> -> !fsdp.future<tensor<f16>>
  %0 = fsdp.wait %f : !fsdp.future<tensor<f16>>
  return
}

// -----

func.func @use_after_free(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{value is used after it is freed}}
  fsdp.free %x : tensor<8xf32>
  // expected-note @+1 {{used here}}
  %y = fsdp.neg %x : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

func.func @double_free(%x: tensor<8xf32>) {
  fsdp.free %x : tensor<8xf32>
  // expected-error @+1 {{value is freed more than once}}
  fsdp.free %x : tensor<8xf32>
  return
}

// -----

func.func @scatter_add(%z: tensor<10x4xf32>, %i: tensor<3xi64>, %u: tensor<3x5xf32>) {
  // expected-error @+1 {{updates 'tensor<3x5xf32>' do not match the gathered shape 'tensor<3x4xf32>'}}
  %0 = fsdp.scatter_add %z, %i, %u : (tensor<10x4xf32>, tensor<3xi64>, tensor<3x5xf32>) -> tensor<10x4xf32>
  return
}

// -----

func.func @insert_slice(%d: tensor<2x8xf32>, %s: tensor<2x4xf32>) {
  // expected-error @+1 {{slice [6, 10) of dimension 1 is outside [0, 8]}}
  %0 = fsdp.insert_slice %d, %s {starts = array<i64: 0, 6>, strides = array<i64: 1, 1>} : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @cross_entropy_grad(%x: tensor<8x10xf32>, %t: tensor<8xi64>, %g: tensor<8xf32>) {
  // expected-error @+1 {{loss gradient 'tensor<8xf32>' does not match the loss type 'tensor<f32>'}}
  %0 = fsdp.cross_entropy_grad %x, %t, %g {kind = "softmax"} : (tensor<8x10xf32>, tensor<8xi64>, tensor<8xf32>) -> tensor<8x10xf32>
  return
}

// -----

func.func @cross_entropy_with_grad_none(%x: tensor<8x10xf32>, %t: tensor<8xi64>, %g: tensor<8xf32>) {
  // expected-error @+1 {{reduction must be "mean" or "sum", got "none"}}
  %0:2 = fsdp.cross_entropy_with_grad %x, %t, %g {reduction = "none"} : (tensor<8x10xf32>, tensor<8xi64>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8x10xf32>)
  return
}

// -----

func.func @cross_entropy_with_grad_type(%x: tensor<8x10xf32>, %t: tensor<8xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{input_grad type 'tensor<8x10xbf16>' differs from the input's 'tensor<8x10xf32>'}}
  %0:2 = fsdp.cross_entropy_with_grad %x, %t, %g : (tensor<8x10xf32>, tensor<8xi64>, tensor<f32>) -> (tensor<f32>, tensor<8x10xbf16>)
  return
}

// -----

func.func @cross_entropy_with_grad_targets(%x: tensor<8x10xf32>, %t: tensor<4xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{loss target shape [4] does not match input 'tensor<8x10xf32>' (expected [8])}}
  %0:2 = fsdp.cross_entropy_with_grad %x, %t, %g : (tensor<8x10xf32>, tensor<4xi64>, tensor<f32>) -> (tensor<f32>, tensor<8x10xf32>)
  return
}

// -----

func.func @cross_entropy_grad_kind(%x: tensor<8x10xf32>, %t: tensor<8xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{kind must be "softmax" or "nll", got "hinge"}}
  %0 = fsdp.cross_entropy_grad %x, %t, %g {kind = "hinge"} : (tensor<8x10xf32>, tensor<8xi64>, tensor<f32>) -> tensor<8x10xf32>
  return
}

// -----

fsdp.parameter @w : tensor<4xf32> {module_path = ""}
func.func @adamw_type(%g: tensor<5xf32>) {
  // expected-error @+1 {{gradient type 'tensor<5xf32>' differs from the parameter's 'tensor<4xf32>'}}
  fsdp.adamw @w, %g {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.999 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<5xf32>
  return
}

// -----

fsdp.parameter @w : tensor<4xf32> {module_path = ""}
func.func @adamw_beta(%g: tensor<4xf32>) {
  // expected-error @+1 {{needs lr >= 0, betas in [0, 1), eps > 0 and weight_decay >= 0}}
  fsdp.adamw @w, %g {lr = 1.0e-3 : f32, beta1 = 1.0 : f32, beta2 = 0.999 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<4xf32>
  return
}

// -----

fsdp.parameter @w : tensor<4xf32> {module_path = ""}
func.func @sgd_nesterov(%g: tensor<4xf32>) {
  // expected-error @+1 {{Nesterov momentum needs momentum > 0}}
  fsdp.sgd @w, %g {lr = 0.1 : f32, momentum = 0.0 : f32, nesterov = true, weight_decay = 0.0 : f32} : tensor<4xf32>
  return
}

// -----

func.func @attention_grad(%q: tensor<2x8x16xf32>, %g: tensor<2x8x8xf32>) {
  // expected-error @+1 {{output gradient 'tensor<2x8x8xf32>' does not match the attention output 'tensor<2x8x16xf32>'}}
  %dq, %dk, %dv = fsdp.attention_grad %q, %q, %q, %g {scale = 1.0 : f32} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x8xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  return
}

// -----

func.func @conv_channels(%x: tensor<2x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{conv weight 'tensor<4x2x3x3xf32>' takes 2 input channels, the input 'tensor<2x3x8x8xf32>' has 3}}
  %0 = fsdp.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x3x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<2x4x6x6xf32>
  return
}

// -----

func.func @conv_groups(%x: tensor<2x3x8x8xf32>, %w: tensor<4x1x3x3xf32>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{conv group 3 does not divide the channels 3 and 4}}
  %0 = fsdp.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 3 : i64} : (tensor<2x3x8x8xf32>, tensor<4x1x3x3xf32>) -> tensor<2x4x6x6xf32>
  return
}

// -----

func.func @conv_pads(%x: tensor<2x3x8xf32>, %w: tensor<4x3x3xf32>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{conv needs 1 strides and dilations and 2 pads, got 1, 1 and 4}}
  %0 = fsdp.conv %x, %w {strides = array<i64: 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1>, groups = 1 : i64} : (tensor<2x3x8xf32>, tensor<4x3x3xf32>) -> tensor<2x4x6xf32>
  return
}

// -----

func.func @conv_kernel(%x: tensor<1x1x2x2xf32>, %w: tensor<1x1x3x3xf32>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{conv kernel [1, 1, 3, 3] is larger than the padded input 'tensor<1x1x2x2xf32>'}}
  %0 = fsdp.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x1x2x2xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x1x1xf32>
  return
}

// -----

func.func @conv_grad_input(%g: tensor<2x4x6x6xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{gradient 'tensor<2x4x6x6xf32>' does not match the convolution's output 'tensor<2x4x3x3xf32>'}}
  %0 = fsdp.conv_grad_input %g, %w {strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x4x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x8x8xf32>
  return
}

// -----

func.func @sum_squares_not_scalar(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{result must be a scalar of the input's element type, not 'tensor<2xf32>'}}
  %0 = fsdp.sum_squares %x : tensor<2x3xf32> -> tensor<2xf32>
  return
}
