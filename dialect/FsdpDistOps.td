//===- FsdpDistOps.td - Parameters, units, collectives -----*- tablegen -*-===//
//
// Vocabulary follows upstream MLIR's `shard` dialect (all_gather,
// reduce_scatter) where it overlaps; fsdp adds time and memory: collectives
// are split into an asynchronous start returning a future and a wait, and
// buffers are released by an explicit free.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DIST_OPS_TD
#define FSDP_DIST_OPS_TD

include "dialect/FsdpDialect.td"
include "dialect/FsdpTypes.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Fsdp_ParameterOp : Fsdp_Op<"parameter",
    [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "A model parameter: name, shape, dtype, module path, source";
  let description = [{
    One trainable or frozen tensor of the model. The symbol is the original
    name (the ONNX initializer's, so checkpoints match PyTorch's state_dict).
    `module_path` is the owning module (`layers.0.self_attn.q_proj`). The
    weight bytes are never held here: `source = "initializer"` means they are
    inline in the model file; `source = "external"` names a `location`
    relative to the model file, with `offset` and `length` in bytes.
    `buffer` marks a tensor the step reads but never trains (a mask, a RoPE
    table, a `--buffers` match, anything that gets no gradient): as PyTorch
    FSDP treats module buffers, it is kept whole on every rank, never
    sharded or gathered, and has no optimizer state. `frozen` marks a
    parameter that is not trained (`requires_grad=False` in a traced module,
    as `--frozen` does by name): sharded like the others, with no gradient
    and no optimizer state. `module_classes` (from
    a traced PyTorch module; ONNX cannot carry it) names the class of every
    module from the root down to the owner, one more than `module_path` has
    components: `--wrap=class:NAME` makes a unit of each module of a class
    it names. The weights of a traced module are in the safetensors file the
    module's `fsdp.source` names.

    ```mlir
    fsdp.parameter @"h.0.mlp.fc.weight" : tensor<64x16xf32>
        {module_path = "h.0.mlp.fc", source = "external",
         location = "model.onnx.data", offset = 0 : i64, length = 4096 : i64}
    fsdp.parameter @"h.0.mlp.fc.bias" : tensor<64xf32>
        {module_path = "h.0.mlp.fc",
         module_classes = ["GPT2", "ModuleList", "Block", "MLP", "Linear"]}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                   TypeAttrOf<AnyStaticShapeTensor>:$type,
                   StrAttr:$module_path,
                   DefaultValuedStrAttr<StrAttr, "initializer">:$source,
                   OptionalAttr<StrAttr>:$location,
                   OptionalAttr<I64Attr>:$offset,
                   OptionalAttr<I64Attr>:$length,
                   UnitAttr:$buffer,
                   OptionalAttr<StrArrayAttr>:$module_classes,
                   UnitAttr:$frozen);
  let assemblyFormat = "$sym_name `:` $type attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
  }];
}

def Fsdp_UnitOp : Fsdp_Op<"unit", [Symbol, HasParent<"::mlir::ModuleOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "An FSDP unit: parameters gathered and freed together";
  let description = [{
    The parameters of one unit are flattened into one buffer that is sharded
    across the group, all-gathered before use and freed after, as one FSDP
    module wraps them. A parameter belongs to at most one unit.

    With `reshard_to = N` (FSDP2's `reshard_after_forward: int`), after
    forward each rank keeps 1/N of the gathered parameters instead of its
    1/world shard, so the backward gather runs among N ranks only.

    ```mlir
    fsdp.unit @"h.0" {params = [@"h.0.attn.weight", @"h.0.mlp.weight"],
                      reshard_after_forward = true}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                   TypedArrayAttrBase<FlatSymbolRefAttr,
                                      "parameter symbols">:$params,
                   DefaultValuedAttr<BoolAttr, "true">:$reshard_after_forward,
                   OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$reshard_to);
  let assemblyFormat = "$sym_name attr-dict";
}

def Fsdp_FlatParameterOp : Fsdp_Op<"flat_parameter",
    [Symbol, HasParent<"::mlir::ModuleOp">,
     DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "A unit's parameters as one flat buffer, sharded over a group";
  let description = [{
    `fsdp-shard` lays the parameters of a unit end to end in one flat buffer
    (FSDP's FlatParameter): parameter `params[i]` occupies elements
    `[offsets[i], offsets[i] + numel(params[i]))`. The buffer is padded with
    zeros to a multiple of `group_size` and split into `group_size` equal
    shards; the op's type is one shard, which is all a rank stores. The
    trainable and the frozen parameters of a unit get separate flat buffers,
    so optimizer updates and gradient reductions cover whole buffers.

    With `offload` (fsdp-offload), the shard and its optimizer state live
    in host memory: `"optimizer"` keeps a copy of the shard in the gather
    dtype on the device (`device_copy`, its element type), refreshed after
    each update; `"all"` keeps nothing on the device between steps.

    ```mlir
    fsdp.flat_parameter @"h.0.flat" : tensor<520xf32> {unit = @"h.0",
        params = [@"h.0.fc.weight", @"h.0.fc.bias"],
        offsets = array<i64: 0, 1024>, numel = 1040, group_size = 4,
        trainable = true}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                   TypeAttrOf<AnyStaticShapeTensor>:$type,
                   FlatSymbolRefAttr:$unit,
                   TypedArrayAttrBase<FlatSymbolRefAttr,
                                      "parameter symbols">:$params,
                   DenseI64ArrayAttr:$offsets,
                   ConfinedAttr<I64Attr, [IntPositive]>:$numel,
                   ConfinedAttr<I64Attr, [IntPositive]>:$group_size,
                   BoolAttr:$trainable,
                   OptionalAttr<StrAttr>:$offload,
                   OptionalAttr<TypeAttr>:$device_copy);
  let assemblyFormat = "$sym_name `:` $type attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getShardType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
    /// The gathered (padded) buffer: one shard times the group size.
    ::mlir::RankedTensorType getFullType() {
      return ::mlir::RankedTensorType::get(
          {getShardType().getDimSize(0) * getGroupSizeAttr().getInt()},
          getShardType().getElementType());
    }
  }];
}

def Fsdp_GetShardOp : Fsdp_Op<"get_shard",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
     MemoryEffects<[MemRead]>]> {
  let summary = "Reads this rank's shard of a flat parameter";
  let description = [{
    The shard is persistent storage owned by the runtime (updated in place
    by the optimizer), so reading it allocates nothing.

    ```mlir
    %s = fsdp.get_shard @"h.0.flat" : tensor<520xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$flat);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$flat attr-dict `:` type($result)";
}

def Fsdp_ParamViewOp : Fsdp_Op<"param_view", [Pure]> {
  let summary = "One parameter inside a gathered flat buffer (no copy)";
  let description = [{
    The `numel(result)` elements of `input` from element `offset`, shaped
    as the result: a view that aliases the gathered buffer, as FSDP's
    unflattened parameter views do.

    ```mlir
    %w = fsdp.param_view %full {offset = 1024 : i64}
        : tensor<2080xf32> -> tensor<16xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyType], [HasAnyRankOfPred<[1]>]>:$input,
                   ConfinedAttr<I64Attr, [IntNonNegative]>:$offset);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Fsdp_PackOp : Fsdp_Op<"pack", [Pure]> {
  let summary = "Lays gradients out as a flat buffer (zero elsewhere)";
  let description = [{
    The transpose of `fsdp.param_view`: operand `i`, flattened, is written at
    element `offsets[i]` of a zero-filled 1-D result. It builds the flat
    gradient of a unit that `fsdp.reduce_scatter_start` then reduces.
    Float operands of another float type are converted on the way, rounded
    as `fsdp.cast` rounds: bf16 gradients pack straight into an f32 flat
    buffer, with no f32 copy of each held until the pack.

    ```mlir
    %g = fsdp.pack %gw, %gb {offsets = array<i64: 0, 1024>}
        : (tensor<64x16xbf16>, tensor<16xf32>) -> tensor<2080xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyStaticShapeTensor>:$inputs,
                   DenseI64ArrayAttr:$offsets);
  let results = (outs RankedTensorOf<[AnyType], [HasAnyRankOfPred<[1]>]>:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, $result)";
  let hasVerifier = 1;
}

// `group` names the ranks taking part: `world` (every rank, the default),
// or with hybrid sharding `shard` (the ranks sharing one copy of the
// parameters: world rank / group_size is the same) or `replicate` (the
// ranks holding the same shard: world rank % shard group size is the same),
// or `block` (blocks of group_size consecutive ranks, for partial
// resharding).
def Fsdp_ReshardOp : Fsdp_Op<"reshard", [Pure]> {
  let summary = "Keeps this rank's 1/N of a gathered buffer";
  let description = [{
    Partial resharding after forward (`reshard_to` on a unit): of the
    gathered flat buffer, the rank keeps chunk `rank % group_size` (its
    place in its block of `group_size` consecutive ranks), so an
    `fsdp.all_gather_start` over that block (`group = "block"`) rebuilds
    the buffer in backward.

    ```mlir
    %keep = fsdp.reshard %full {group_size = 2 : i64}
        : tensor<32xf32> -> tensor<16xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyType], [HasAnyRankOfPred<[1]>]>:$input,
                   ConfinedAttr<I64Attr, [IntPositive]>:$group_size);
  let results = (outs RankedTensorOf<[AnyType], [HasAnyRankOfPred<[1]>]>:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

class Fsdp_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Fsdp_Op<mnemonic, traits> {
  let results = (outs Fsdp_FutureType:$future);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` qualified(type($future))";
  let hasVerifier = 1;
}

def Fsdp_AllGatherStartOp : Fsdp_CollectiveOp<"all_gather_start"> {
  let summary = "Starts gathering every rank's shard along dimension 0";
  let description = [{
    Each of the `group_size` ranks contributes its shard; the future holds
    the concatenation in rank order (dimension 0 multiplied by the group
    size). The future is waited on exactly once.

    ```mlir
    %f = fsdp.all_gather_start %shard {group_size = 4 : i64}
        : tensor<8xf32> -> !fsdp.future<tensor<32xf32>>
    %full = fsdp.wait %f : !fsdp.future<tensor<32xf32>>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input,
                   ConfinedAttr<I64Attr, [IntPositive]>:$group_size,
                   OptionalAttr<FlatSymbolRefAttr>:$unit,
                   OptionalAttr<StrAttr>:$group);
}

def Fsdp_ReduceScatterStartOp : Fsdp_CollectiveOp<"reduce_scatter_start"> {
  let summary = "Starts reducing a full tensor and scattering its shards";
  let description = [{
    Reduces (`sum` or `avg`) the input over the `group_size` ranks and keeps
    this rank's slice of dimension 0, whose extent the group size divides.

    ```mlir
    %f = fsdp.reduce_scatter_start %grad {group_size = 4 : i64,
                                          reduction = "avg"}
        : tensor<32xf32> -> !fsdp.future<tensor<8xf32>>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input,
                   ConfinedAttr<I64Attr, [IntPositive]>:$group_size,
                   DefaultValuedStrAttr<StrAttr, "sum">:$reduction,
                   OptionalAttr<FlatSymbolRefAttr>:$unit,
                   OptionalAttr<StrAttr>:$group);
}

def Fsdp_AllReduceOp : Fsdp_CollectiveOp<"all_reduce"> {
  let summary = "Starts reducing a tensor over a group, every rank keeping it";
  let description = [{
    Used across replica groups in hybrid sharding and for the global
    gradient norm. Asynchronous like the other collectives.

    ```mlir
    %f = fsdp.all_reduce %sq {group_size = 8 : i64, reduction = "sum"}
        : tensor<f32> -> !fsdp.future<tensor<f32>>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input,
                   ConfinedAttr<I64Attr, [IntPositive]>:$group_size,
                   DefaultValuedStrAttr<StrAttr, "sum">:$reduction,
                   OptionalAttr<StrAttr>:$group);
}

def Fsdp_WaitOp : Fsdp_Op<"wait", [InferTypeOpAdaptor]> {
  let summary = "Completes a collective and yields its tensor";
  let description = [{
    Blocks the issuing stream until the collective is done.

    ```mlir
    %full = fsdp.wait %f : !fsdp.future<tensor<32xf32>>
    ```
  }];
  let arguments = (ins Fsdp_FutureType:$future);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$future attr-dict `:` qualified(type($future))";
}

def Fsdp_FreeOp : Fsdp_Op<"free"> {
  let summary = "Releases a tensor's buffer";
  let description = [{
    After a free, the tensor's memory may be reused: nothing later in the
    block may use the value, and a value is freed at most once. FSDP frees a
    unit's gathered parameters after its last use (reshard_after_forward).

    ```mlir
    fsdp.free %full : tensor<32xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def Fsdp_CopyStartOp : Fsdp_Op<"copy_start"> {
  let summary = "Starts copying a tensor between host and device memory";
  let description = [{
    Offload (fsdp-offload): copies `input` to a new buffer in host memory
    (`to = "host"`, device to host) or in device memory (`to = "device"`),
    on the copy stream of that direction. Like a collective, the copy reads
    its input and writes its result until the `fsdp.wait` that completes
    it, which is the first point the result may be read. With `into`, the
    result is persistent storage rather than a step's buffer: a
    `fsdp.host_buffer` (to the host) or an offloaded flat parameter's device
    copy (to the device).

    ```mlir
    %f = fsdp.copy_start %g {to = "host"} : tensor<520xf32>
        -> !fsdp.future<tensor<520xf32>>
    %gh = fsdp.wait %f : !fsdp.future<tensor<520xf32>>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input, StrAttr:$to,
                   OptionalAttr<FlatSymbolRefAttr>:$into);
  let results = (outs Fsdp_FutureType:$future);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` qualified(type($future))";
  let hasVerifier = 1;
}

def Fsdp_GetDeviceCopyOp : Fsdp_Op<"get_device_copy",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
     MemoryEffects<[MemRead]>]> {
  let summary = "Reads the device copy of an offloaded shard";
  let description = [{
    A flat parameter offloaded with `offload = "optimizer"` keeps its
    master shard on the host and a copy in the gather dtype on the device
    (`device_copy`), which the gathers read; a copy to the device `into`
    the flat writes it after the host's update.

    ```mlir
    %c = fsdp.get_device_copy @"h.0.flat" : tensor<520xbf16>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$flat);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$flat attr-dict `:` type($result)";
}

def Fsdp_HostBufferOp : Fsdp_Op<"host_buffer",
    [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "Host memory kept from one step to the next (offload)";
  let description = [{
    With offloaded updates run before the next step's first use of their
    shard (fsdp-offload `update = before-use`), the reduced gradient shard
    of each offloaded flat parameter and the clipping scale wait in host
    memory from one step to the next. A copy to the host with `into` writes
    one; `fsdp.get_host_buffer` reads it. With `copy_of = @flat` it holds
    that shard cast to its own dtype (written by the shard's fused update,
    `fsdp.adamw ... into`), which the runtime fills from the shard where
    the shard changed outside a step.

    ```mlir
    fsdp.host_buffer @"h.0.flat.grad" : tensor<520xf32>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                   TypeAttrOf<AnyStaticShapeTensor>:$type,
                   OptionalAttr<FlatSymbolRefAttr>:$copy_of);
  let assemblyFormat = "$sym_name `:` $type attr-dict";
}

def Fsdp_GetHostBufferOp : Fsdp_Op<"get_host_buffer",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
     MemoryEffects<[MemRead]>]> {
  let summary = "Reads a host buffer";
  let arguments = (ins FlatSymbolRefAttr:$buffer);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$buffer attr-dict `:` type($result)";
}

#endif // FSDP_DIST_OPS_TD
