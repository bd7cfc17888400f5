//===- FsdpTrainOps.td - Ops that autodiff and optimizers add -*- tablegen -*-===//
#ifndef FSDP_TRAIN_OPS_TD
#define FSDP_TRAIN_OPS_TD

include "dialect/FsdpDialect.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Fsdp_ScatterAddOp : Fsdp_Op<"scatter_add", [Pure,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "Adds slices into a tensor at indices (gather's gradient)";
  let description = [{
    The transpose of `fsdp.gather`: `result = dest`, then for every index
    position `i`, `result[..., indices[i], ...] += updates[..., i, ...]`
    along `axis`. Repeated indices accumulate, which is what a tied or
    repeated embedding row needs. In a forward (torch's scatter_add and
    index_add) its gradient is `dy` for `dest` and `gather(dy, indices)`
    for `updates`.

```mlir
%g = fsdp.scatter_add %zeros, %ids, %dy {axis = 0 : i64}
    : (tensor<100x16xf32>, tensor<2x8xi64>, tensor<2x8x16xf32>) -> tensor<100x16xf32>
```
  }];
  let arguments = (ins AnyRankedTensor:$dest, RankedTensorOf<[AnySignlessInteger]>:$indices,
                   AnyRankedTensor:$updates, DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Fsdp_InsertSliceOp : Fsdp_Op<"insert_slice", [Pure]> {
  let summary = "Writes a tensor into a strided box of another (slice's gradient)";
  let description = [{
    `result = dest` with the box `starts[d] + i * strides[d]` replaced by
    `source`; the box is what `fsdp.slice` with the same starts and strides
    would read.

```mlir
%g = fsdp.insert_slice %zeros, %dy {starts = array<i64: 0, 4>, strides = array<i64: 1, 1>}
    : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
```
  }];
  let arguments = (ins AnyRankedTensor:$dest, AnyRankedTensor:$source,
                   DenseI64ArrayAttr:$starts, DenseI64ArrayAttr:$strides);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Fsdp_CrossEntropyGradOp : Fsdp_Op<"cross_entropy_grad", [Pure]> {
  let summary = "Gradient of cross_entropy or nll_loss with respect to its input";
  let description = [{
    For `kind = "softmax"` (cross_entropy): `(softmax(input) - onehot(target))`
    per position; for `kind = "nll"`: `-onehot(target)`. Each position is
    multiplied by the loss gradient `grad` (a scalar for `mean` and `sum`,
    per position for `none`), divided by the number of non-ignored targets
    (weighted) for `mean`, and is zero where the target is `ignore_index`.

```mlir
%d = fsdp.cross_entropy_grad %logits, %t, %g {kind = "softmax", reduction = "mean"}
    : (tensor<8x100xf32>, tensor<8xi64>, tensor<f32>) -> tensor<8x100xf32>
```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$input,
                   RankedTensorOf<[AnySignlessInteger]>:$target,
                   RankedTensorOf<[AnyFloat]>:$grad,
                   Optional<RankedTensorOf<[AnyFloat]>>:$weight,
                   StrAttr:$kind,
                   DefaultValuedStrAttr<StrAttr, "mean">:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs RankedTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Fsdp_CrossEntropyWithGradOp : Fsdp_Op<"cross_entropy_with_grad", [Pure]> {
  let summary = "Softmax cross-entropy and its gradient in one pass over the logits";
  let description = [{
    `fsdp.cross_entropy` and `fsdp.cross_entropy_grad` (`kind = "softmax"`)
    of the same input, targets, weight and attributes, as one op: `loss` is
    the cross-entropy, `input_grad` its gradient with respect to `input` for
    the loss gradient `grad`. On the CPU each row's log-sum-exp is computed
    once and the row's gradient written while the row is still in cache, so
    the logits are read from memory once for both, where the separate ops
    read them three times (the loss, then the gradient's log-sum-exp and
    softmax); the device backend runs the two kernels, the targets' total
    weight summed once.
    `fsdp-fuse-loss-grad` makes it from the pair once the training step is
    built; `reduction` is `mean` or `sum` (a scalar loss gradient).

```mlir
%l, %d = fsdp.cross_entropy_with_grad %logits, %t, %g {reduction = "mean"}
    : (tensor<8x100xf32>, tensor<8xi64>, tensor<f32>) -> (tensor<f32>, tensor<8x100xf32>)
```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$input,
                   RankedTensorOf<[AnySignlessInteger]>:$target,
                   RankedTensorOf<[AnyFloat]>:$grad,
                   Optional<RankedTensorOf<[AnyFloat]>>:$weight,
                   DefaultValuedStrAttr<StrAttr, "mean">:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs RankedTensorOf<[AnyFloat]>:$loss,
                      RankedTensorOf<[AnyFloat]>:$input_grad);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Fsdp_AttentionGradOp : Fsdp_Op<"attention_grad", [Pure, AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<CostOpInterface, ["getFlops"]>], 0> {
  let summary = "Gradients of fsdp.attention (fused backward)";
  let description = [{
    Given the attention inputs and the gradient `grad` of its output, returns
    the gradients of q, k and v. Like a flash-attention backward it
    recomputes the probabilities from q and k (with the same `scale`, mask
    and `causal` as the forward) instead of keeping them from the forward
    pass, so no [Tq, Tk] tensor outlives one batch element. The mask takes no
    gradient. `safe_softmax` as the forward's: a query whose every key is
    hidden has zero probabilities, so its q and the keys get nothing from it.
    `average_empty_rows` as the forward's: such a query's probabilities are
    uniform, its values get their share of the gradient, and its q and the
    keys get nothing (masked_fill's hidden scores take no gradient).

    `saved` passes the forward's output `out` and its row log-sum-exp `lse`
    (`fsdp.attention`'s `with_lse`): a fused backward (cuDNN's) reads them
    instead of recomputing the softmax statistics. The CPU kernels may
    ignore them; the gradients are the same. `layout` as the forward's:
    q, k, v, `grad`, `out` and the gradients in it.

```mlir
%dq, %dk, %dv = fsdp.attention_grad %q, %k, %v, %dy {causal = true, scale = 0.125 : f32}
    : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>,
       tensor<2x4x16x8xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>,
                                 tensor<2x4x16x8xf32>)
%dq2, %dk2, %dv2 = fsdp.attention_grad %q, %k, %v, %dy saved %o, %lse {causal = true, scale = 0.125 : f32}
    : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>,
       tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16xf32>)
    -> (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>)
```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$q, RankedTensorOf<[AnyFloat]>:$k,
                   RankedTensorOf<[AnyFloat]>:$v, RankedTensorOf<[AnyFloat]>:$grad,
                   Optional<AnyRankedTensor>:$mask,
                   Optional<RankedTensorOf<[AnyFloat]>>:$out,
                   Optional<RankedTensorOf<[F32]>>:$lse,
                   DefaultValuedAttr<BoolAttr, "false">:$causal, F32Attr:$scale,
                   DefaultValuedAttr<BoolAttr, "false">:$safe_softmax,
                   UnitAttr:$average_empty_rows,
                   DefaultValuedStrAttr<StrAttr, "bhsd">:$layout);
  let results = (outs RankedTensorOf<[AnyFloat]>:$dq, RankedTensorOf<[AnyFloat]>:$dk,
                 RankedTensorOf<[AnyFloat]>:$dv);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $grad (`,` $mask^)? (`saved` $out^ `,` $lse)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Fsdp_GeluGradOp : Fsdp_Op<"gelu_grad", [Pure, AllTypesMatch<["x", "grad", "result"]>,
    DeclareOpInterfaceMethods<CostOpInterface, ["getFlops"]>], 0> {
  let summary = "Gradient of fsdp.gelu (fused backward)";
  let description = [{
    `grad · gelu'(x)` in one pass over `x` and `grad`, with the same
    `approximate` as the forward: for `"tanh"`,
    `0.5·(1 + t) + 0.5·x·(1 - t²)·c·(1 + 3·0.044715·x²)` with
    `t = tanh(c·(x + 0.044715·x³))`, `c = √(2/π)`; for `"none"`,
    `Φ(x) + x·φ(x)`. Only `x` is kept from the forward.

```mlir
%dx = fsdp.gelu_grad %x, %dy {approximate = "tanh"} : tensor<2x4xf32>
```
  }];
  let arguments = (ins Fsdp_FloatTensor:$x, Fsdp_FloatTensor:$grad,
                   DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let results = (outs Fsdp_FloatTensor:$result);
  let assemblyFormat = "$x `,` $grad attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Fsdp_ConvGradInputOp : Fsdp_Op<"conv_grad_input", [Pure,
    DeclareOpInterfaceMethods<CostOpInterface, ["getFlops"]>], 0> {
  let summary = "Gradient of fsdp.conv with respect to its input";
  let description = [{
    Given the gradient `grad` of a convolution's output and its weight `w`,
    returns the gradient of the input, whose type is the result's (the
    transposed convolution: per group `wᵀ · grad` gathered back to the input
    positions it was read from). Attributes as the forward's.

```mlir
%dx = fsdp.conv_grad_input %dy, %w {strides = array<i64: 2, 2>,
        pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64}
    : (tensor<2x4x4x4xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x8x8xf32>
```
  }];
  let arguments = (ins Fsdp_FloatTensor:$grad, Fsdp_FloatTensor:$w,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$dilations, I64Attr:$groups);
  let results = (outs Fsdp_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Fsdp_ConvGradWeightOp : Fsdp_Op<"conv_grad_weight", [Pure,
    DeclareOpInterfaceMethods<CostOpInterface, ["getFlops"]>], 0> {
  let summary = "Gradient of fsdp.conv with respect to its weight";
  let description = [{
    Given the convolution's input `x` and the gradient `grad` of its output,
    returns the gradient of the weight, whose type is the result's: per
    group `grad · im2col(x)ᵀ`, summed over the batch in one GEMM.
    Attributes as the forward's.

```mlir
%dw = fsdp.conv_grad_weight %x, %dy {strides = array<i64: 2, 2>,
        pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64}
    : (tensor<2x3x8x8xf32>, tensor<2x4x4x4xf32>) -> tensor<4x3x3x3xf32>
```
  }];
  let arguments = (ins Fsdp_FloatTensor:$x, Fsdp_FloatTensor:$grad,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$dilations, I64Attr:$groups);
  let results = (outs Fsdp_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Fsdp_PoolGradOp : Fsdp_Op<"pool_grad", [Pure]> {
  let summary = "Gradient of fsdp.pool with respect to its input";
  let description = [{
    Given the pooling's input `x` and the gradient `grad` of its output,
    returns the gradient of `x`: each input element gathers the output
    gradients of the windows that take it (`max`: those whose maximum it
    is, recomputed from `x`; `avg`: divided by each window's divisor).
    Attributes as the forward's.

```mlir
%dx = fsdp.pool_grad %x, %dy {mode = "max", kernel = array<i64: 2, 2>,
        strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>}
    : (tensor<2x4x8x8xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x8x8xf32>
```
  }];
  let arguments = (ins Fsdp_FloatTensor:$x, Fsdp_FloatTensor:$grad,
                   StrAttr:$mode, DenseI64ArrayAttr:$kernel,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$dilations,
                   DefaultValuedAttr<BoolAttr, "false">:$ceil_mode,
                   DefaultValuedAttr<BoolAttr, "false">:$count_include_pad);
  let results = (outs Fsdp_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Fsdp_BatchNormGradOp : Fsdp_Op<"batch_norm_grad", [Pure]> {
  let summary = "Gradients of fsdp.batch_norm (fused backward)";
  let description = [{
    Given the forward's input `x`, its `scale` and the gradient `grad` of its
    output, returns the gradients of `x`, `scale` and `bias`, recomputing
    each channel's statistics from `x`: with `x̂ = (x - μ)·rstd` and M
    elements a channel, `dbias = Σ grad`, `dscale = Σ grad·x̂`,
    `dx = scale·rstd·(grad - dbias/M - x̂·dscale/M)`. With
    `sync_group_size` (SyncBatchNorm): μ, rstd, M and the two sums in dx
    are over every rank's slice (all-reduced); `dscale` and `dbias` stay
    this rank's, to be averaged with the other gradients.

```mlir
%dx, %dg, %db = fsdp.batch_norm_grad %x, %g, %dy {epsilon = 1.0e-05 : f32}
    : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<2x4x8x8xf32>)
    -> (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>)
```
  }];
  let arguments = (ins Fsdp_FloatTensor:$x, Fsdp_FloatTensor:$scale,
                   Fsdp_FloatTensor:$grad, F32Attr:$epsilon,
                   OptionalAttr<I64Attr>:$sync_group_size);
  let results = (outs Fsdp_FloatTensor:$dx, Fsdp_FloatTensor:$dscale,
                 Fsdp_FloatTensor:$dbias);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Fsdp_AssignBufferOp : Fsdp_Op<"assign_buffer",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
     MemoryEffects<[MemWrite]>]> {
  let summary = "Overwrites a buffer (batch norm's running statistics)";
  let description = [{
    Stores `value` (converted to the buffer's element type) into the
    buffer `param`: a parameter that is never trained, kept whole on every
    rank, as PyTorch updates `running_mean` in the forward pass. Each rank
    writes its own (batch norm normalises each rank's batch on its own).

```mlir
fsdp.assign_buffer @bn.running_mean, %m : tensor<4xf32>
```
  }];
  let arguments = (ins FlatSymbolRefAttr:$param,
                   RankedTensorOf<[AnyFloat]>:$value);
  let assemblyFormat = "$param `,` $value attr-dict `:` type($value)";
}

def Fsdp_LayerNormGradOp : Fsdp_Op<"layer_norm_grad", [Pure,
    DeclareOpInterfaceMethods<CostOpInterface, ["getFlops", "getBytesMoved"]>], 0> {
  let summary = "Gradients of fsdp.layer_norm (fused backward)";
  let description = [{
    Given the forward's input `x`, its `scale` and the gradient `grad` of its
    output, returns the gradients of `x`, `scale` and the bias (the bias's is
    the sum of `grad` over the leading axes; unused when the forward has
    none). The mean and inverse standard deviation of each row are
    recomputed from `x` (with the forward's `axis` and `epsilon`), as fused
    layer-norm kernels do, so the forward keeps nothing but its input:
    `x̂ = (x - μ)·rstd`, `g = grad·scale`,
    `dx = rstd·(g - mean(g) - x̂·mean(g·x̂))`,
    `dscale = Σ grad·x̂`, `dbias = Σ grad`, sums over the leading axes.

```mlir
%dx, %dw, %db = fsdp.layer_norm_grad %x, %w, %dy {axis = 2 : i64, epsilon = 1.0e-05 : f32}
    : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>)
    -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
```
  }];
  let arguments = (ins Fsdp_FloatTensor:$x, Fsdp_FloatTensor:$scale,
                   Fsdp_FloatTensor:$grad, I64Attr:$axis, F32Attr:$epsilon);
  let results = (outs Fsdp_FloatTensor:$dx, Fsdp_FloatTensor:$dscale,
                 Fsdp_FloatTensor:$dbias);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Fsdp_RmsNormGradOp : Fsdp_Op<"rms_norm_grad", [Pure,
    DeclareOpInterfaceMethods<CostOpInterface, ["getFlops", "getBytesMoved"]>], 0> {
  let summary = "Gradients of fsdp.rms_norm (fused backward)";
  let description = [{
    Given the forward's input `x`, its `scale` and the gradient `grad` of its
    output, returns the gradients of `x` and `scale`. Each row's inverse
    root mean square is recomputed from `x`, so the forward keeps nothing
    but its input: `x̂ = x·rstd`, `g = grad·scale`,
    `dx = rstd·(g - x̂·mean(g·x̂))`, `dscale = Σ grad·x̂` over the leading
    axes.

```mlir
%dx, %dw = fsdp.rms_norm_grad %x, %w, %dy {axis = 2 : i64, epsilon = 1.0e-05 : f32}
    : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>)
    -> (tensor<2x4x8xf32>, tensor<8xf32>)
```
  }];
  let arguments = (ins Fsdp_FloatTensor:$x, Fsdp_FloatTensor:$scale,
                   Fsdp_FloatTensor:$grad, I64Attr:$axis, F32Attr:$epsilon);
  let results = (outs Fsdp_FloatTensor:$dx, Fsdp_FloatTensor:$dscale);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

class Fsdp_OptimizerOp<string mnemonic> : Fsdp_Op<mnemonic,
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
     DeclareOpInterfaceMethods<CostOpInterface, ["getFlops", "getBytesMoved"]>,
     MemoryEffects<[MemRead, MemWrite]>], 0> {
  let assemblyFormat = [{
    $param `,` $grad (`scaled` `by` $scale^ `:` type($scale))? attr-dict `:` type($grad)
  }];
  let hasVerifier = 1;
}

def Fsdp_AdamWOp : Fsdp_OptimizerOp<"adamw"> {
  let summary = "Updates a parameter in place with AdamW";
  let description = [{
    torch.optim.AdamW: `m = b1·m + (1-b1)·g`, `v = b2·v + (1-b2)·g²`,
    `p -= lr·wd·p` (decoupled decay), `p -= lr·m̂/(√v̂ + eps)` with bias
    corrections `1 - b1^t`, `1 - b2^t`. `m`, `v` and the step `t` are
    optimizer state owned by the runtime; `lr` is the base rate, which the
    module's schedule scales per step. The optional `scale` multiplies the
    gradient first (gradient clipping), fused into the update.

```mlir
fsdp.adamw @fc.weight, %g {lr = 1.0e-03 : f32, beta1 = 0.9 : f32,
    beta2 = 0.999 : f32, eps = 1.0e-08 : f32, weight_decay = 0.01 : f32}
    : tensor<4x8xf32>
```
  }];
  let arguments = (ins FlatSymbolRefAttr:$param, RankedTensorOf<[AnyFloat]>:$grad,
                   Optional<0DTensorOf<[AnyFloat]>>:$scale,
                   F32Attr:$lr, F32Attr:$beta1, F32Attr:$beta2, F32Attr:$eps,
                   F32Attr:$weight_decay,
                   OptionalAttr<FlatSymbolRefAttr>:$into);
  // Offload: the updated parameter, cast to the gather dtype in the same
  // pass (rounded as fsdp.cast rounds), into the host buffer `into`.
  let results = (outs Optional<RankedTensorOf<[AnyFloat]>>:$copy);
  let assemblyFormat = [{
    $param `,` $grad (`scaled` `by` $scale^ `:` type($scale))? attr-dict `:` type($grad) (`->` type($copy)^)?
  }];
}

def Fsdp_SgdOp : Fsdp_OptimizerOp<"sgd"> {
  let summary = "Updates a parameter in place with SGD (momentum, Nesterov)";
  let description = [{
    torch.optim.SGD: `g += wd·p`; with momentum `b = μ·b + g` (`b = g` on the
    first step), `g = g + μ·b` for Nesterov or `g = b`; then `p -= lr·g`.

```mlir
fsdp.sgd @fc.weight, %g {lr = 0.1 : f32, momentum = 0.9 : f32,
    nesterov = false, weight_decay = 0.0 : f32} : tensor<4x8xf32>
```
  }];
  let arguments = (ins FlatSymbolRefAttr:$param, RankedTensorOf<[AnyFloat]>:$grad,
                   Optional<0DTensorOf<[AnyFloat]>>:$scale,
                   F32Attr:$lr, F32Attr:$momentum, BoolAttr:$nesterov,
                   F32Attr:$weight_decay);
}

def Fsdp_AccumulateGradOp : Fsdp_Op<"accumulate_grad",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
     MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "Adds a micro-step's gradient into a parameter's accumulator";
  let description = [{
    With gradient accumulation the training step is two functions: the
    micro-step (run once per micro-batch) adds each parameter's gradient into
    a persistent accumulator owned by the runtime; the update function reads
    the sums with `fsdp.read_grad` and applies the optimizer, after which the
    runtime zeroes the accumulators.

```mlir
fsdp.accumulate_grad @fc.weight, %g : tensor<4x8xf32>
```
  }];
  let arguments = (ins FlatSymbolRefAttr:$param, RankedTensorOf<[AnyFloat]>:$grad);
  let assemblyFormat = "$param `,` $grad attr-dict `:` type($grad)";
}

def Fsdp_ReadGradOp : Fsdp_Op<"read_grad",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
     MemoryEffects<[MemRead]>]> {
  let summary = "Reads a parameter's accumulated gradient";
  let description = [{
    The sum of the gradients `fsdp.accumulate_grad` added since the last
    update.

```mlir
%g = fsdp.read_grad @fc.weight : tensor<4x8xf32>
```
  }];
  let arguments = (ins FlatSymbolRefAttr:$param);
  let results = (outs RankedTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = "$param attr-dict `:` type($result)";
}

#endif // FSDP_TRAIN_OPS_TD
