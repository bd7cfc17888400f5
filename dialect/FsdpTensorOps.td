//===- FsdpTensorOps.td - Tensor ops (what models lower to) *- tablegen -*-===//
//
// All shapes are static. Ops whose result type follows from their operands
// and attributes implement InferTypeOpInterface through the shape functions
// in ShapeInference.h, which the ONNX importer uses too: one definition of
// every shape rule, checked again by the verifier on any hand-written IR.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TENSOR_OPS_TD
#define FSDP_TENSOR_OPS_TD

include "dialect/FsdpDialect.td"
include "dialect/FsdpInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

defvar Fsdp_StaticTensor = AnyStaticShapeTensor;
defvar Fsdp_FloatTensor = RankedTensorOf<[AnyFloat]>;
defvar Fsdp_IndexTensor = RankedTensorOf<[AnySignlessInteger]>;
defvar Fsdp_BoolTensor = RankedTensorOf<[I1]>;

//===----------------------------------------------------------------------===//
// Sources of values
//===----------------------------------------------------------------------===//

def Fsdp_ConstantOp : Fsdp_Op<"constant",
    [ConstantLike, Pure, InferTypeOpAdaptor]> {
  let summary = "A constant tensor";
  let description = [{
    A small constant: a scale, a mask, a folded shape computation. Weights are
    never constants; they are `fsdp.parameter` symbols.

    ```mlir
    %c = fsdp.constant dense<0.125> : tensor<f32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Fsdp_StaticTensor:$result);
  let assemblyFormat = "$value attr-dict";
  let hasFolder = 1;
}

def Fsdp_GetParameterOp : Fsdp_Op<"get_parameter",
    [Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Reads the full value of a parameter";
  let description = [{
    The full (unsharded) value of an `fsdp.parameter`. The result type is
    the parameter's type, or, for a float parameter, its shape in another
    float type: the parameter read in a mixed-precision step's compute dtype
    (rounded to nearest even). Sharding passes replace these reads with the
    gathered unit buffer (cast where it is not in the read's dtype).

    ```mlir
    fsdp.parameter @"fc.weight" : tensor<4x8xf32> {module_path = "fc"}
    %w = fsdp.get_parameter @"fc.weight" : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$param);
  let results = (outs Fsdp_StaticTensor:$result);
  let assemblyFormat = "$param attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class Fsdp_UnaryOp<string mnemonic, string what, Type type = Fsdp_FloatTensor,
                   list<Trait> traits = []>
    : Fsdp_Op<mnemonic, !listconcat([Pure, SameOperandsAndResultType,
                                     Elementwise, DeclareOpInterfaceMethods<GradientOpInterface>], traits)> {
  let summary = "Elementwise " # what;
  let description = "Elementwise " # what # [{ of a tensor.

```mlir
%y = fsdp.}] # mnemonic # [{ %x : tensor<2x4xf32>
```
  }];
  let arguments = (ins type:$x);
  let results = (outs type:$result);
  let assemblyFormat = "$x attr-dict `:` type($result)";
}

def Fsdp_NegOp : Fsdp_UnaryOp<"neg", "negation", AnyRankedTensor>;
def Fsdp_AbsOp : Fsdp_UnaryOp<"abs", "absolute value", AnyRankedTensor>;
def Fsdp_ExpOp : Fsdp_UnaryOp<"exp", "exponential">;
def Fsdp_LogOp : Fsdp_UnaryOp<"log", "natural logarithm">;
def Fsdp_SqrtOp : Fsdp_UnaryOp<"sqrt", "square root">;
def Fsdp_RsqrtOp : Fsdp_UnaryOp<"rsqrt", "reciprocal square root">;
def Fsdp_ReciprocalOp : Fsdp_UnaryOp<"reciprocal", "reciprocal">;
def Fsdp_TanhOp : Fsdp_UnaryOp<"tanh", "hyperbolic tangent">;
def Fsdp_ErfOp : Fsdp_UnaryOp<"erf", "error function">;
def Fsdp_ErfinvOp : Fsdp_UnaryOp<"erfinv", "inverse error function on (-1, 1): ±inf at ±1, NaN beyond">;
def Fsdp_ReluOp : Fsdp_UnaryOp<"relu", "max(x, 0)">;
def Fsdp_SigmoidOp : Fsdp_UnaryOp<"sigmoid", "logistic sigmoid">;
def Fsdp_SiluOp : Fsdp_UnaryOp<"silu", "x * sigmoid(x)">;
def Fsdp_SoftplusOp : Fsdp_UnaryOp<"softplus", "log(1 + exp(x)), x above 20 (torch's threshold)">;
def Fsdp_MishOp : Fsdp_UnaryOp<"mish", "x * tanh(softplus(x))">;
def Fsdp_HardswishOp : Fsdp_UnaryOp<"hardswish", "x * min(max(x + 3, 0), 6) / 6">;
def Fsdp_SinOp : Fsdp_UnaryOp<"sin", "sine">;
def Fsdp_CosOp : Fsdp_UnaryOp<"cos", "cosine">;
def Fsdp_AsinOp : Fsdp_UnaryOp<"asin", "arcsine">;
def Fsdp_AcosOp : Fsdp_UnaryOp<"acos", "arccosine">;
def Fsdp_AtanOp : Fsdp_UnaryOp<"atan", "arctangent">;
def Fsdp_Log1pOp : Fsdp_UnaryOp<"log1p", "log(1 + x), exact near 0">;
def Fsdp_Expm1Op : Fsdp_UnaryOp<"expm1", "exp(x) - 1, exact near 0">;
def Fsdp_FloorOp : Fsdp_UnaryOp<"floor", "largest integer not above x (zero gradient)">;
def Fsdp_CeilOp : Fsdp_UnaryOp<"ceil", "smallest integer not below x (zero gradient)">;
def Fsdp_RoundOp : Fsdp_UnaryOp<"round", "nearest integer, halves to even (zero gradient)">;
def Fsdp_TruncOp : Fsdp_UnaryOp<"trunc", "integer part, toward zero (zero gradient)">;
def Fsdp_SignOp : Fsdp_UnaryOp<"sign", "-1, 0 or 1 as x is negative, zero or positive (zero gradient)">;
def Fsdp_NotOp : Fsdp_UnaryOp<"not", "logical negation", Fsdp_BoolTensor>;

def Fsdp_GeluOp : Fsdp_Op<"gelu", [Pure, SameOperandsAndResultType,
                                   Elementwise,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "Gaussian error linear unit";
  let description = [{
    `approximate = "none"` is x·Φ(x) with the exact erf; `"tanh"` is the
    tanh approximation of GPT-2, as in `torch.nn.functional.gelu`.

    ```mlir
    %y = fsdp.gelu %x {approximate = "tanh"} : tensor<2x4xf32>
    ```
  }];
  let arguments = (ins Fsdp_FloatTensor:$x,
                   DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let results = (outs Fsdp_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($result)";
  let hasVerifier = 1;
}

class Fsdp_BinaryOp<string mnemonic, string what, Type type = AnyRankedTensor>
    : Fsdp_Op<mnemonic, [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "Elementwise " # what # " with broadcasting";
  let description = "Elementwise " # what # [{ with ONNX (numpy)
multidirectional broadcasting. Operands share their element type.

```mlir
%z = fsdp.}] # mnemonic # [{ %x, %y : tensor<2x4xf32>, tensor<4xf32>
    -> tensor<2x4xf32>
```
  }];
  let arguments = (ins type:$lhs, type:$rhs);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

def Fsdp_AddOp : Fsdp_BinaryOp<"add", "addition">;
def Fsdp_SubOp : Fsdp_BinaryOp<"sub", "subtraction">;
def Fsdp_MulOp : Fsdp_BinaryOp<"mul", "multiplication">;
def Fsdp_DivOp : Fsdp_BinaryOp<"div", "division">;
def Fsdp_PowOp : Fsdp_BinaryOp<"pow", "power">;
def Fsdp_MaxOp : Fsdp_BinaryOp<"max", "maximum">;
def Fsdp_MinOp : Fsdp_BinaryOp<"min", "minimum">;
def Fsdp_EqualOp : Fsdp_BinaryOp<"equal", "equality (i1 result)">;
def Fsdp_LessOp : Fsdp_BinaryOp<"less", "less-than (i1 result)">;
def Fsdp_GreaterOp : Fsdp_BinaryOp<"greater", "greater-than (i1 result)">;
def Fsdp_AndOp : Fsdp_BinaryOp<"and", "logical and", Fsdp_BoolTensor>;
def Fsdp_OrOp : Fsdp_BinaryOp<"or", "logical or", Fsdp_BoolTensor>;

def Fsdp_WhereOp : Fsdp_Op<"where", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "Selects elementwise between two tensors";
  let description = [{
    `result = cond ? x : y`, all three broadcast together.

    ```mlir
    %r = fsdp.where %c, %x, %y : tensor<4x4xi1>, tensor<2x4x4xf32>,
        tensor<f32> -> tensor<2x4x4xf32>
    ```
  }];
  let arguments = (ins Fsdp_BoolTensor:$cond, AnyRankedTensor:$x,
                   AnyRankedTensor:$y);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $cond `,` $x `,` $y attr-dict `:` type($cond) `,` type($x) `,` type($y)
    `->` type($result)
  }];
}

def Fsdp_CastOp : Fsdp_Op<"cast", [Pure, SameOperandsAndResultShape,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "Converts the element type";
  let description = [{
    Converts each element, rounding to nearest even for floats and
    truncating toward zero from float to integer, as ONNX Cast does.

    ```mlir
    %h = fsdp.cast %x : tensor<2x4xf32> -> tensor<2x4xbf16>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$x);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
}

def Fsdp_DropoutOp : Fsdp_Op<"dropout", [Pure, SameOperandsAndResultType,
    Elementwise, DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "Zeroes each element with probability p, scales the rest by 1/(1-p)";
  let description = [{
    torch's dropout in training mode. Element `i` is kept when a
    Philox-4x32-10 draw (common/Philox.h) keyed by `seed`, at the counter
    (the element's index in the global batch: `rank · numel + i`, the
    training step, or with `--grad-accum` the micro-batch's number) is at
    or above `p`. The mask is a function of those
    alone, so the op's gradient is the same op on the result's gradient
    (the same mask, regenerated), activation checkpointing recomputes the
    same mask, and a sample gets the same mask at any world size.

    ```mlir
    %y = fsdp.dropout %x {p = 1.000000e-01 : f64, seed = 7 : i64} : tensor<2x4xf32>
    ```
  }];
  let arguments = (ins Fsdp_FloatTensor:$x, F64Attr:$p, I64Attr:$seed);
  let results = (outs Fsdp_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Fsdp_UniformOp : Fsdp_Op<"uniform", [Pure]> {
  let summary = "Uniform random draws in [0, 1), new at every step";
  let description = [{
    torch's `rand`, and what the tracer builds its other draws from
    (`randn`, `normal_`, `exponential_`, `bernoulli`, `randint`, ...).
    Element `i` is the Philox-4x32-10 draw of dropout (common/Philox.h)
    keyed by `seed`, at the counter (the element's index in the global
    batch: `rank · numel + i`, the training step, or with `--grad-accum`
    the micro-batch's number): as many random bits
    as the result type's significand holds (24 in f32, 11 in f16, 8 in
    bf16), so the value is exact in it and below 1. A function of those alone: recomputation draws the
    same values, the next step new ones, and a tensor whose first axis is
    the batch gets the same values for a sample at any world size. Each
    draw of a model has a seed of its own. Nothing flows back through it.

    ```mlir
    %u = fsdp.uniform {seed = 7 : i64} : tensor<2x4xf32>
    ```
  }];
  let arguments = (ins I64Attr:$seed);
  let results = (outs Fsdp_FloatTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Fsdp_StopGradientOp : Fsdp_Op<"stop_gradient", [Pure,
    SameOperandsAndResultType, DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "The value itself, through which no gradient flows";
  let description = [{
    torch's `detach()`: the forward reads `x`; the reverse pass sends
    nothing back through it. fsdp-build-train-step replaces it by its
    operand once the gradients are built, so it never reaches a plan.

    ```mlir
    %d = fsdp.stop_gradient %x : tensor<2x4xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$x);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

def Fsdp_MatmulOp : Fsdp_Op<"matmul", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<CostOpInterface, ["getFlops"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>], 0> {
  let summary = "Batched matrix product with broadcast batch dimensions";
  let description = [{
    `lhs[..., M, K] · rhs[..., K, N]`, either side optionally transposed in
    its last two dimensions; batch dimensions broadcast. Both operands have
    rank 2 or more. The optional `bias[N]` is added to every row before the
    result is rounded to its type, as a GEMM epilogue does
    (`fsdp-fuse-matmul-bias` folds `nn.Linear`'s separate bias add into it).

    `lhs_sums` (2-D operands, no bias; `fsdp-fuse-bias-grad` sets it on a
    training step's weight gradients) adds a second result, `sums[M]`: the
    sums of `op(lhs)`'s rows over the contracted dimension, what a
    `reduce_sum` of the output gradient gives as `nn.Linear`'s bias
    gradient, computed by the same GEMM (cuBLASLt's BGRAD epilogue).

    ```mlir
    %y = fsdp.matmul %x, %w : tensor<2x8x16xf32>, tensor<16x32xf32>
        -> tensor<2x8x32xf32>
    %z = fsdp.matmul %x, %w bias %b {transpose_rhs = true}
        : tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<32xf32> -> tensor<2x8x32xf32>
    %dw, %db = fsdp.matmul %dy, %a {lhs_sums, transpose_lhs = true}
        : tensor<128x32xf32>, tensor<128x16xf32> -> tensor<32x16xf32>, tensor<32xf32>
    ```
  }];
  let arguments = (ins Fsdp_FloatTensor:$lhs, Fsdp_FloatTensor:$rhs,
                   Optional<Fsdp_FloatTensor>:$bias,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs,
                   UnitAttr:$lhs_sums);
  let results = (outs Fsdp_FloatTensor:$result,
                 Optional<Fsdp_FloatTensor>:$sums);
  let assemblyFormat = [{
    $lhs `,` $rhs (`bias` $bias^)? attr-dict `:` type($lhs) `,` type($rhs)
    (`,` type($bias)^)? `->` type($result) (`,` type($sums)^)?
  }];
  let hasVerifier = 1;
}

def Fsdp_GemmOp : Fsdp_Op<"gemm", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<CostOpInterface, ["getFlops"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>], 0> {
  let summary = "alpha·op(a)·op(b) + beta·c (ONNX Gemm)";
  let description = [{
    Two-dimensional `a` and `b`, optionally transposed; the optional `c`
    broadcasts to `[M, N]`. `nn.Linear` on a 2-D input exports as this with
    `trans_b = true`.

    ```mlir
    %y = fsdp.gemm %x, %w, %b {trans_b = true}
        : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
    ```
  }];
  let arguments = (ins Fsdp_FloatTensor:$a, Fsdp_FloatTensor:$b,
                   Optional<Fsdp_FloatTensor>:$c,
                   DefaultValuedAttr<F32Attr, "1.0f">:$alpha,
                   DefaultValuedAttr<F32Attr, "1.0f">:$beta,
                   DefaultValuedAttr<BoolAttr, "false">:$trans_a,
                   DefaultValuedAttr<BoolAttr, "false">:$trans_b);
  let results = (outs Fsdp_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Reductions and normalisations
//===----------------------------------------------------------------------===//

class Fsdp_ReduceOp<string mnemonic, string what, Type type = Fsdp_FloatTensor>
    : Fsdp_Op<mnemonic, [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = what # " over the given axes";
  let description = what # [{ over `axes` (sorted, unique, non-negative);
`keepdims` keeps the reduced axes with extent 1.

```mlir
%m = fsdp.}] # mnemonic # [{ %x {axes = array<i64: 1>, keepdims = true}
    : tensor<2x4xf32> -> tensor<2x1xf32>
```
  }];
  // Floats reduce in f32 or wider (bf16/f16 widened); i64 (a count of a
  // mask's elements, the largest position) in int64, exactly, wrapping as
  // PyTorch's sum does. A mean of integers is no integer: floats only.
  let arguments = (ins type:$x, DenseI64ArrayAttr:$axes,
                   DefaultValuedAttr<BoolAttr, "true">:$keepdims);
  let results = (outs type:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
}

defvar Fsdp_FloatOrI64Tensor = RankedTensorOf<[AnyFloat, I64]>;
def Fsdp_ReduceSumOp : Fsdp_ReduceOp<"reduce_sum", "Sum", Fsdp_FloatOrI64Tensor>;
def Fsdp_ReduceMeanOp : Fsdp_ReduceOp<"reduce_mean", "Mean">;
def Fsdp_ReduceMaxOp : Fsdp_ReduceOp<"reduce_max", "Maximum", Fsdp_FloatOrI64Tensor>;

def Fsdp_SumSquaresOp : Fsdp_Op<"sum_squares", [Pure]> {
  let summary = "Sum of the squares of every element";
  let description = [{
    The squared L2 norm of `x` as a scalar of its element type: each
    element squared and summed in double, rounded once. The training step's
    global gradient norm adds one per gradient: a single pass over the
    gradient, where `reduce_sum(mul(g, g))` wrote a squared copy as large as
    it. Built after autodiff, it has no gradient of its own.

    ```mlir
    %s = fsdp.sum_squares %g : tensor<4x8xf32> -> tensor<f32>
    ```
  }];
  let arguments = (ins Fsdp_FloatTensor:$x);
  let results = (outs Fsdp_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
}

class Fsdp_SoftmaxLikeOp<string mnemonic, string what>
    : Fsdp_Op<mnemonic, [Pure, SameOperandsAndResultType, DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = what # " along one axis";
  let description = what # [{ along `axis` (non-negative).

```mlir
%p = fsdp.}] # mnemonic # [{ %x {axis = 1 : i64} : tensor<2x4xf32>
```
  }];
  let arguments = (ins Fsdp_FloatTensor:$x, I64Attr:$axis);
  let results = (outs Fsdp_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Fsdp_SoftmaxOp : Fsdp_SoftmaxLikeOp<"softmax", "Softmax">;
def Fsdp_LogSoftmaxOp : Fsdp_SoftmaxLikeOp<"log_softmax", "Log-softmax">;

def Fsdp_LayerNormOp : Fsdp_Op<"layer_norm", [Pure,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "Layer normalisation over the trailing axes";
  let description = [{
    Normalises over axes `axis..rank-1` to zero mean and unit variance (biased
    variance, `epsilon` inside the square root), then multiplies by `scale`
    and adds the optional `bias`, both shaped like the normalised axes.

    ```mlir
    %y = fsdp.layer_norm %x, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f32}
        : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    ```
  }];
  let arguments = (ins Fsdp_FloatTensor:$x, Fsdp_FloatTensor:$scale,
                   Optional<Fsdp_FloatTensor>:$bias, I64Attr:$axis,
                   F32Attr:$epsilon);
  let results = (outs Fsdp_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Fsdp_RmsNormOp : Fsdp_Op<"rms_norm", [Pure,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "Root-mean-square normalisation over the trailing axes";
  let description = [{
    `x · rsqrt(mean(x²) + epsilon) · scale` over axes `axis..rank-1`
    (Zhang and Sennrich's RMSNorm, `torch.nn.RMSNorm`, Llama's norm):
    layer normalisation without the mean subtracted and without a bias.
    `scale` is shaped like the normalised axes. The importer recognises it
    from the elementwise ops a Llama export writes (fsdp-fuse-rms-norm).
    The row statistics are computed in f32 or wider and the result is
    rounded once, as a fused kernel (and an eager `x.float()` norm) does.

    ```mlir
    %y = fsdp.rms_norm %x, %g {axis = 2 : i64, epsilon = 1.0e-05 : f32}
        : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    ```
  }];
  let arguments = (ins Fsdp_FloatTensor:$x, Fsdp_FloatTensor:$scale,
                   I64Attr:$axis, F32Attr:$epsilon);
  let results = (outs Fsdp_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fused attention
//===----------------------------------------------------------------------===//

def Fsdp_AttentionOp : Fsdp_Op<"attention", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<CostOpInterface, ["getFlops"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>], 0> {
  let summary = "softmax(scale · q·kᵀ + mask) · v";
  let description = [{
    Scaled dot-product attention, recognised by the importer from
    matmul → scale → (mask) → softmax → matmul. `q[..., Tq, D]`,
    `k[..., Tk, D]`, `v[..., Tk, Dv]` with equal leading dimensions, but
    k and v may have fewer heads (the dimension before the rows), a
    divisor of q's: grouped-query attention, query head h reading key and
    value head h / (H / Hk) (fsdp-attention-gqa folds repeat_kv so).
    `causal` hides key positions after the query's. The optional `mask`
    broadcasts to `[..., Tq, Tk]`: an i1 mask keeps positions where it is
    true; a float mask is added to the scores. A query whose every key is
    hidden (every score -inf) gets NaN, as a plain softmax gives it, unless
    `safe_softmax` is set: then zeros, as PyTorch's
    `scaled_dot_product_attention` gives it (its safe softmax: a padded
    batch's rows under left padding or a sliding window), or, with
    `average_empty_rows`, the mean of the values: what `masked_fill` of a
    finite fill (-1e9, `finfo.min`) gives, whose hidden scores are all
    equal there. `average_empty_rows` needs a boolean mask and neither
    `causal` nor `safe_softmax`; the scores the mask hides take no gradient.

    `layout = "bshd"` (fsdp-attention-layout sets it): q, k, v and the
    result are `[..., T, H, D]`, heads after rows, as the projections
    write them, instead of `[..., H, T, D]`; the mask and `lse` keep the
    scores' `[..., H, Tq, ...]`. No transpose is needed around it.

    `with_lse` adds a second result, `lse` (f32, `[..., H, Tq]`): each query
    row's log-sum-exp of its scaled, masked scores (natural log; -inf for a
    row whose every key is hidden). A training step keeps it, with the
    output, for `fsdp.attention_grad`, so a fused backward (cuDNN's, as
    FlashAttention-2's) takes the softmax statistics instead of
    recomputing them.

    ```mlir
    %o = fsdp.attention %q, %k, %v {causal = true, scale = 0.125 : f32}
        : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>)
        -> tensor<2x4x16x8xf32>
    %o2, %lse = fsdp.attention %q, %k, %v {causal = true, scale = 0.125 : f32, with_lse}
        : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>)
        -> (tensor<2x4x16x8xf32>, tensor<2x4x16xf32>)
    ```
  }];
  let arguments = (ins Fsdp_FloatTensor:$q, Fsdp_FloatTensor:$k,
                   Fsdp_FloatTensor:$v, Optional<AnyRankedTensor>:$mask,
                   DefaultValuedAttr<BoolAttr, "false">:$causal,
                   F32Attr:$scale,
                   DefaultValuedAttr<BoolAttr, "false">:$safe_softmax,
                   UnitAttr:$average_empty_rows, UnitAttr:$with_lse,
                   DefaultValuedStrAttr<StrAttr, "bhsd">:$layout);
  let results = (outs Fsdp_FloatTensor:$result,
                 Optional<RankedTensorOf<[F32]>>:$lse);
  let hasVerifier = 1;
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let extraClassDeclaration = [{
    /// The gradient of a float (additive) mask, composed; null where the
    /// mask is boolean or a stored tensor read through views (a buffer).
    ::mlir::Value additiveMaskGrad(::mlir::OpBuilder &builder, ::mlir::Value dy);
  }];
}

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

def Fsdp_ConvOp : Fsdp_Op<"conv", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<CostOpInterface, ["getFlops"]>,
    DeclareOpInterfaceMethods<GradientOpInterface>], 0> {
  let summary = "1-D or 2-D convolution (cross-correlation), NCHW";
  let description = [{
    `x[N, C, *S]` convolved with `w[OC, C / groups, *K]` (S and K: one or two
    spatial extents), plus the optional `bias[OC]`, as ONNX Conv and
    `torch.nn.Conv1d`/`Conv2d` compute it. One `strides` and `dilations`
    value per spatial axis; `pads` gives the zeros added before each spatial
    axis, then those after it (ONNX's order). Output extent per axis:
    `(S + pad_begin + pad_end - dilation * (K - 1) - 1) / stride + 1`.
    Kernels lower it to im2col and a GEMM per group.

    ```mlir
    %y = fsdp.conv %x, %w, %b {strides = array<i64: 2, 2>,
                               pads = array<i64: 1, 1, 1, 1>,
                               dilations = array<i64: 1, 1>, groups = 1 : i64}
        : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>)
        -> tensor<2x4x4x4xf32>
    ```
  }];
  let arguments = (ins Fsdp_FloatTensor:$x, Fsdp_FloatTensor:$w,
                   Optional<Fsdp_FloatTensor>:$bias,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$dilations, I64Attr:$groups);
  let results = (outs Fsdp_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Fsdp_PoolOp : Fsdp_Op<"pool", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "1-D or 2-D max or average pooling, NCHW";
  let description = [{
    Over windows of `kernel` positions (with `strides`, `dilations`, and
    `pads` before then after each spatial axis, as ONNX gives them):
    `mode = "max"` takes each window's maximum (padding never wins; the
    first maximum in scan order, a NaN propagating, as PyTorch); `"avg"` its
    mean over the positions inside the input, or inside the padded input
    with `count_include_pad`. `ceil_mode` rounds the window count up,
    dropping a last window that would start in the end padding.

    ```mlir
    %y = fsdp.pool %x {mode = "max", kernel = array<i64: 3, 3>,
                       strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>,
                       dilations = array<i64: 1, 1>}
        : tensor<2x4x8x8xf32> -> tensor<2x4x4x4xf32>
    ```
  }];
  let arguments = (ins Fsdp_FloatTensor:$x, StrAttr:$mode,
                   DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$dilations,
                   DefaultValuedAttr<BoolAttr, "false">:$ceil_mode,
                   DefaultValuedAttr<BoolAttr, "false">:$count_include_pad);
  let results = (outs Fsdp_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
}

def Fsdp_BatchNormOp : Fsdp_Op<"batch_norm", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "Batch normalisation with the batch's statistics (training)";
  let description = [{
    For `x[N, C, ...]`, each channel normalised by the mean and biased
    variance of its elements over the batch and spatial axes (`epsilon`
    inside the square root), then scaled and shifted by `scale[C]` and
    `bias[C]`, as `torch.nn.BatchNorm2d` computes in training mode. Also
    returns the mean and the unbiased variance (the biased one times
    M/(M-1), M the values normalised together), from which the importer
    builds the running statistics' update.

    `sync_group_size` (set by fsdp-shard's `sync-batch-norm`, as
    `torch.nn.SyncBatchNorm`): the statistics are those of the whole
    batch, every one of the group's ranks (the world) contributing its
    slice; the per-channel sums are all-reduced between the kernel's steps.

    ```mlir
    %y, %mean, %var = fsdp.batch_norm %x, %g, %b {epsilon = 1.0e-05 : f32}
        : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>)
        -> (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>)
    ```
  }];
  let arguments = (ins Fsdp_FloatTensor:$x, Fsdp_FloatTensor:$scale,
                   Fsdp_FloatTensor:$bias, F32Attr:$epsilon,
                   OptionalAttr<I64Attr>:$sync_group_size);
  let results = (outs Fsdp_FloatTensor:$result, Fsdp_FloatTensor:$mean,
                 Fsdp_FloatTensor:$var);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Indexing and losses
//===----------------------------------------------------------------------===//

def Fsdp_GatherOp : Fsdp_Op<"gather", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "Gathers slices along an axis (embedding lookup on axis 0)";
  let description = [{
    ONNX Gather: the result is `data.shape[:axis] + indices.shape +
    data.shape[axis+1:]`. Negative indices count from the end.

    ```mlir
    %e = fsdp.gather %wte, %ids {axis = 0 : i64}
        : tensor<100x16xf32>, tensor<2x8xi64> -> tensor<2x8x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$data, Fsdp_IndexTensor:$indices,
                   DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $data `,` $indices attr-dict `:` type($data) `,` type($indices) `->`
    type($result)
  }];
}

class Fsdp_LossOp<string mnemonic, string what, string extra = "">
    : Fsdp_Op<mnemonic, [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = what;
  let description = what # [{. The input is `[N, C]` or `[N, C, d1, ...]`,
the integer target `[N]` or `[N, d1, ...]`; the optional `weight` is
`[C]`. `reduction` is `mean` (over the non-ignored targets, weighted),
`sum` or `none`; targets equal to `ignore_index` contribute nothing. A
reduced loss of a bf16 or f16 input is f32 (accumulated and returned without
rounding); with `none` the losses keep the input's type.}]
# extra # [{

```mlir
%l = fsdp.}] # mnemonic # [{ %x, %t {reduction = "mean"}
    : (tensor<8x100xf32>, tensor<8xi64>) -> tensor<f32>
```
  }];
  let arguments = (ins Fsdp_FloatTensor:$input, Fsdp_IndexTensor:$target,
                   Optional<Fsdp_FloatTensor>:$weight,
                   DefaultValuedStrAttr<StrAttr, "mean">:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Fsdp_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Fsdp_CrossEntropyOp : Fsdp_LossOp<"cross_entropy",
    "Softmax cross-entropy of logits against class indices",
    " The input holds unnormalised logits (ONNX SoftmaxCrossEntropyLoss).">;
def Fsdp_NllLossOp : Fsdp_LossOp<"nll_loss",
    "Negative log-likelihood of log-probabilities against class indices", " The input holds log-probabilities.">;

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Fsdp_ReshapeOp : Fsdp_Op<"reshape", [Pure,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "Reinterprets a tensor with another static shape";
  let description = [{
    Same element type and element count; row-major order is kept.

    ```mlir
    %y = fsdp.reshape %x : tensor<2x6xf32> -> tensor<3x4xf32>
    ```
  }];
  let arguments = (ins Fsdp_StaticTensor:$x);
  let results = (outs Fsdp_StaticTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
}

def Fsdp_TransposeOp : Fsdp_Op<"transpose", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "Permutes dimensions";
  let description = [{
    Result dimension `i` is operand dimension `perm[i]`.

    ```mlir
    %y = fsdp.transpose %x {perm = array<i64: 0, 2, 1>}
        : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$x, DenseI64ArrayAttr:$perm);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
}

def Fsdp_SliceOp : Fsdp_Op<"slice", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "A strided box of a tensor";
  let description = [{
    One `start`, `limit` and positive `stride` per dimension, with
    `0 <= start <= limit <= dim`; the result extent is
    `ceil((limit - start) / stride)`.

    ```mlir
    %y = fsdp.slice %x {starts = array<i64: 0, 2>, limits = array<i64: 4, 6>,
                        strides = array<i64: 1, 2>}
        : tensor<4x8xf32> -> tensor<4x2xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$x, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$limits, DenseI64ArrayAttr:$strides);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
}

def Fsdp_ConcatOp : Fsdp_Op<"concat", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "Concatenates tensors along an axis";
  let description = [{
    All inputs share element type, rank and every extent but `axis`.

    ```mlir
    %y = fsdp.concat %a, %b {axis = 1 : i64}
        : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs, I64Attr:$axis);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, results)";
}

def Fsdp_SplitOp : Fsdp_Op<"split", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "Splits a tensor along an axis into consecutive pieces";
  let description = [{
    `sizes` are the pieces' extents along `axis` and add up to its extent.

    ```mlir
    %q, %k, %v = fsdp.split %x {axis = 2 : i64, sizes = array<i64: 8, 8, 8>}
        : (tensor<2x4x24xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>,
                                   tensor<2x4x8xf32>)
    ```
  }];
  let arguments = (ins AnyRankedTensor:$x, I64Attr:$axis,
                   DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = "$x attr-dict `:` functional-type($x, results)";
}

def Fsdp_BroadcastOp : Fsdp_Op<"broadcast", [Pure,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "Broadcasts a tensor to a larger shape (ONNX Expand)";
  let description = [{
    The operand broadcasts (numpy rules, aligned at the trailing dimension)
    to exactly the result shape.

    ```mlir
    %y = fsdp.broadcast %x : tensor<1x4xf32> -> tensor<3x4xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$x);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
}

def Fsdp_TriluOp : Fsdp_Op<"trilu", [Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "Keeps the upper or lower triangle of the last two dims";
  let description = [{
    Zeroes the elements outside the triangle: `upper` keeps `j - i >= k`,
    otherwise `j - i <= k` is kept.

    ```mlir
    %m = fsdp.trilu %x {k = 0 : i64, upper = false} : tensor<4x4xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$x,
                   DefaultValuedAttr<I64Attr, "0">:$k,
                   DefaultValuedAttr<BoolAttr, "true">:$upper);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Fsdp_ArgsortOp : Fsdp_Op<"argsort", [Pure,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "The indices that sort x along an axis";
  let description = [{
    The positions along `axis` of x's elements in ascending order (or
    descending), as torch.sort's indices: stable (equal elements keep their
    order) and NaN after every number (before, descending). Its values are
    x gathered at these indices, so their gradient is the gather's; the
    indices themselves have none. The tracer writes sort, topk, msort and
    kthvalue with it.

    ```mlir
    %i = fsdp.argsort %x {axis = 1 : i64, descending = true}
        : tensor<2x5xf32> -> tensor<2x5xi64>
    ```
  }];
  let arguments = (ins Fsdp_FloatTensor:$x, I64Attr:$axis,
                   DefaultValuedAttr<BoolAttr, "false">:$descending);
  let results = (outs Fsdp_IndexTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
}

#endif // FSDP_TENSOR_OPS_TD
