//===- Passes.td - fsdp passes -----------------------------*- tablegen -*-===//
#ifndef FSDP_PASSES_TD
#define FSDP_PASSES_TD

include "mlir/Pass/PassBase.td"

def FsdpFuseAttention : Pass<"fsdp-fuse-attention", "::mlir::ModuleOp"> {
  let summary = "Fuses matmul-scale-mask-softmax-matmul into fsdp.attention";
  let description = [{
    Recognises scaled dot-product attention as PyTorch exports it:
    `matmul(q, kᵀ)`, an optional multiplication or division by a scalar
    constant, an optional mask (an added float tensor, or an `fsdp.where`
    filling masked scores with a large negative constant), `softmax` over the
    last axis and `matmul` with `v`. A constant lower-triangular mask becomes
    `causal = true`. Unmatched subgraphs are left as they are.
  }];
  let dependentDialects = ["::mlir::fsdp::FsdpDialect"];
}

def FsdpFuseGelu : Pass<"fsdp-fuse-gelu", "::mlir::ModuleOp"> {
  let summary = "Fuses the elementwise ops of an exported GELU into fsdp.gelu";
  let description = [{
    `torch.onnx.export` writes `F.gelu(x, approximate="tanh")` (and GPT-2's
    `NewGELU`) as nine elementwise ops,
    `0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))`, and the exact GELU
    below opset 20 as `0.5 · x · (1 + erf(x / √2))`. Both become one
    `fsdp.gelu`, whose gradient is one `fsdp.gelu_grad`: two passes over
    the activation instead of about twenty-five. Products are matched in
    any order and association (`x³` as `x · x · x` or `pow(x, 3)`), scalar
    constants within 1e-4 relative; anything else is left as it is.
  }];
  let dependentDialects = ["::mlir::fsdp::FsdpDialect"];
}

def FsdpFuseRmsNorm : Pass<"fsdp-fuse-rms-norm", "::mlir::ModuleOp"> {
  let summary = "Fuses the elementwise ops of an exported RMSNorm into fsdp.rms_norm";
  let description = [{
    `torch.onnx.export` writes Llama's RMSNorm,
    `x · rsqrt(mean(x², -1) + ε) · w` (or `x / sqrt(…) · w`), as six
    elementwise ops and a mean; under AC each is recomputed, and each keeps
    its own activation for the backward. They become one `fsdp.rms_norm`
    whose gradient is one `fsdp.rms_norm_grad`: one read and one write of
    the activation forward instead of about seven, and only `x` saved.
    Matched: the square as `pow(x, 2)` or `x · x`; a mean over the
    trailing axes kept as size-1 dimensions; `rsqrt`, `1 / sqrt` or a
    division by the `sqrt`; products in any order and association; `w`
    shaped like the normalised axes. Anything else is left as it is.
  }];
  let dependentDialects = ["::mlir::fsdp::FsdpDialect"];
}

def FsdpFuseMatmulBias : Pass<"fsdp-fuse-matmul-bias", "::mlir::ModuleOp"> {
  let summary = "Folds a bias added to a matmul's result into the matmul";
  let description = [{
    `add(matmul(x, w), b)` with `b` one value per output column (nn.Linear's
    bias on a batch of rows) becomes `matmul(x, w) bias b`, which the CUDA
    backend runs as one cuBLASLt GEMM with a bias epilogue. The product must
    have no other user.
  }];
  let dependentDialects = ["::mlir::fsdp::FsdpDialect"];
}

def FsdpFuseBiasGrad : Pass<"fsdp-fuse-bias-grad", "::mlir::ModuleOp"> {
  let summary = "Computes nn.Linear's bias gradient in its weight-gradient GEMM";
  let description = [{
    After the training step is built: a `reduce_sum` of an output gradient
    over every dimension but the last, beside the GEMM that contracts the
    same rows for the weight gradient (`matmul(reshape(dy), x)
    {transpose_lhs}`), becomes that GEMM's second result (`lhs_sums`): on a
    GPU, cuBLASLt's BGRAD epilogue sums dy while the GEMM reads it.
    fsdp-opt runs it for GPU devices only (a CPU would run the same
    reduction after the product).
  }];
  let dependentDialects = ["::mlir::fsdp::FsdpDialect"];
}

def FsdpFoldTransposes : Pass<"fsdp-fold-transposes", "::mlir::ModuleOp"> {
  let summary = "Folds last-two-dimension transposes into matmul flags";
  let description = [{
    A transpose of a transpose becomes one transpose (none when the two
    cancel). Then
    `matmul(x, transpose(w))` as torch.onnx.export writes nn.Linear becomes
    `matmul(x, w) {transpose_rhs = true}` (and likewise on the left), so no
    transposed copy of a weight is made, gathered or kept for backward.
  }];
  let dependentDialects = ["::mlir::fsdp::FsdpDialect"];
}

def FsdpAttentionLayout : Pass<"fsdp-attention-layout", "::mlir::ModuleOp"> {
  let summary = "Folds the head transposes around attention into its layout";
  let description = [{
    Multi-head attention as PyTorch writes it transposes q, k and v from
    the projections' `[B, T, H, D]` to `[B, H, T, D]` and the output back:
    four copies a layer, and four more in the backward. An attention whose
    q, k and v are each such a transpose and whose output only such
    transposes read becomes `fsdp.attention {layout = "bshd"}` on the
    untransposed tensors, and its output replaces the transposes'; the
    kernels (cuDNN's through strides) read the heads where they are.
    Before that, grouped-query attention's repeat_kv (reshape, broadcast,
    reshape of k and v to q's heads) is dropped: attention reads k and v
    of fewer heads itself, query head h reading key head h / (H / Hk).
  }];
  let dependentDialects = ["::mlir::fsdp::FsdpDialect"];
}

def FsdpBuildTrainStep : Pass<"fsdp-build-train-step", "::mlir::ModuleOp"> {
  let summary = "Builds @train_step: loss, reverse-mode gradients, optimizer";
  let description = [{
    Clones `@forward` into `@train_step`, which returns the loss and the
    global gradient norm. The loss is the graph's single scalar float output
    (`loss=auto`), or is added on the logits output: `cross-entropy` (a new
    int64 `targets` input, mean over tokens, `ignore-index`), `mse` or `bce`
    (BCE with logits; both add a float `targets` input shaped like the
    output). Every float parameter not matching `frozen` is trained: its
    gradient comes from reverse-mode autodiff through GradientOpInterface
    (tied weights accumulate), is optionally clipped by the global norm
    (`grad-clip`, torch's clip_grad_norm_), and feeds one `fsdp.adamw` or
    `fsdp.sgd` update. The schedule and accumulation options are recorded
    in the module's `fsdp.train` attribute for the runtime. `compute-dtype`
    (bf16 or f16: PyTorch FSDP's MixedPrecision param_dtype, as it computes)
    makes the step compute in that dtype before autodiff: parameters are
    read in it, float inputs and constants are cast to it, every
    activation and activation gradient is stored in it; the loss is cast
    to f32, and each parameter's gradient is cast to f32 (the master
    weights' dtype) before it is summed, clipped, reduced and applied.
  }];
  let dependentDialects = ["::mlir::fsdp::FsdpDialect",
                           "::mlir::func::FuncDialect"];
  let options = [
    Option<"loss", "loss", "std::string", "\"auto\"",
           "auto | cross-entropy | mse | bce">,
    Option<"ignoreIndex", "ignore-index", "int64_t", "-100",
           "cross-entropy targets with this value are ignored">,
    Option<"frozen", "frozen", "std::string", "\"\"",
           "regex of parameters not to train">,
    Option<"buffers", "buffers", "std::string", "\"\"",
           "regex of initializers that are buffers: never trained, kept "
           "whole on every rank (ONNX cannot tell a buffer the step reads "
           "differentiably from a parameter)">,
    Option<"optimizer", "optimizer", "std::string", "\"adamw\"",
           "adamw | sgd">,
    Option<"lr", "lr", "float", "1e-3f", "learning rate">,
    Option<"beta1", "beta1", "float", "0.9f", "AdamW beta1">,
    Option<"beta2", "beta2", "float", "0.999f", "AdamW beta2">,
    Option<"eps", "eps", "float", "1e-8f", "AdamW epsilon">,
    Option<"weightDecay", "weight-decay", "float", "-1.0f",
           "weight decay (default 0.01 for AdamW, 0 for SGD)">,
    Option<"momentum", "momentum", "float", "0.0f", "SGD momentum">,
    Option<"nesterov", "nesterov", "bool", "false", "SGD Nesterov momentum">,
    Option<"gradClip", "grad-clip", "float", "0.0f",
           "max global gradient norm (0: no clipping)">,
    Option<"lrSchedule", "lr-schedule", "std::string", "\"constant\"",
           "constant | cosine">,
    Option<"warmupSteps", "warmup-steps", "int64_t", "0",
           "linear warm-up steps">,
    Option<"totalSteps", "total-steps", "int64_t", "0",
           "steps of the cosine schedule">,
    Option<"gradAccum", "grad-accum", "int64_t", "1",
           "micro-steps per optimizer step">,
    Option<"lossAverage", "loss-average", "std::string", "\"ranks\"",
           "ranks: each rank's loss is the mean over its own counted "
           "targets and the ranks' means are averaged (PyTorch DDP and "
           "FSDP) | tokens: the mean over every rank's counted targets "
           "(Hugging Face Trainer's average_tokens_across_devices, "
           "torchtitan's global token count)">,
    Option<"worldSize", "world-size", "int64_t", "1",
           "data-parallel ranks the loss is averaged over (set by fsdp-opt "
           "from fsdp-shard's)">,
    Option<"computeDtypeName", "compute-dtype", "std::string", "\"f32\"",
           "mixed precision: activations and the forward/backward math in "
           "f32 | bf16 | f16 (PyTorch FSDP's param_dtype computes in it; "
           "pair it with --param-dtype)">,
  ];
}

def FsdpFuseLossGrad : Pass<"fsdp-fuse-loss-grad", "::mlir::ModuleOp"> {
  let summary = "Computes the cross-entropy and its gradient in one op";
  let description = [{
    A training step's `fsdp.cross_entropy` and the `fsdp.cross_entropy_grad`
    of the same logits become one `fsdp.cross_entropy_with_grad` at the
    loss: on the CPU the logits are read once for both instead of three
    times (each row's log-sum-exp once, its gradient written while it is in
    cache).
    Only where the loss gradient is known at the loss (the step's constant
    seed) and the loss is reduced (`mean`, `sum`).
  }];
  let dependentDialects = ["::mlir::fsdp::FsdpDialect"];
}

def FsdpWrapUnits : Pass<"fsdp-wrap-units", "::mlir::ModuleOp"> {
  let summary = "Groups parameters into FSDP units by a wrap policy";
  let description = [{
    Creates one `fsdp.unit` per group of parameters that will be gathered,
    freed and reduced together (one FSDP module). Policies (`wrap`):
    - `transformer` (default): one unit per repeated block, found as the
      largest family of modules `<prefix>.<index>` whose parameters have the
      same structure (relative names and shapes) — `layers.N`, `h.N`,
      `encoder.layer.N`; `transformer:PATTERN` names the prefix (or a regular
      expression matching it) explicitly. When the parameters carry their
      modules' classes (a traced PyTorch module), the units are the modules
      of the classes those blocks are (so an instance outside the numbered
      family, `block_a`/`block_b`, is a unit too);
    - `class:NAME[,NAME...]`: transformer_auto_wrap_policy / FSDP2's
      `fully_shard` on each module of those classes (traced modules only:
      ONNX keeps no classes); a module nested in another of the classes is
      its own unit, the outer one keeping the rest;
    - `size:MIN_PARAMS`: size_based_auto_wrap_policy — walk the module tree
      bottom-up and close a unit once it holds MIN_PARAMS elements;
    - `regex:R1,R2,...`: a unit per module whose path matches one of them;
    - `none`: a single unit.
    Leftover parameters form the `root` unit, which (as in FSDP2) keeps its
    parameters gathered after forward (`reshard_after_forward = false`).
    Each unit is reported in a remark.
  }];
  let dependentDialects = ["::mlir::fsdp::FsdpDialect"];
  let options = [
    Option<"wrap", "wrap", "std::string", "\"transformer\"",
           "transformer[:PATTERN] | class:NAME,... | size:MIN_PARAMS | "
           "regex:R1,R2,... | none">,
  ];
}

def FsdpMergeUnits : Pass<"fsdp-merge-units", "::mlir::ModuleOp"> {
  let summary = "Merges every K consecutive FSDP units into one";
  let description = [{
    `merge-units=K`: every K consecutive non-root units (in the wrap policy's
    order) become one unit named `first+...+last`; the root unit stays
    alone. Fewer units mean fewer, larger collectives: less latency paid per
    step, more bytes gathered at a time. The wrap-granularity choice of
    `fsdp-opt --autotune`.
  }];
  let dependentDialects = ["::mlir::fsdp::FsdpDialect"];
  let options = [
    Option<"group", "merge-units", "int64_t", "1",
           "merge every K consecutive units into one (coarser units)">,
  ];
}

def FsdpCheckpointActivations : Pass<"fsdp-checkpoint-activations", "::mlir::ModuleOp"> {
  let summary = "Recomputes each unit's forward in the reverse pass";
  let description = [{
    `activation-checkpointing=units`: activation checkpointing per FSDP unit (torch's
    checkpoint_wrapper on each block); `UNIT,UNIT,...` checkpoints only
    the named units (what `--autotune` chooses). Values a non-root unit's forward
    computes only for the reverse pass are not kept; the ops computing them
    are cloned right before their first reverse-pass use. Each block's input
    is kept. The clones read the unit's parameters in the reverse pass, so
    one backward all-gather serves both recomputation and gradients.
    `ops` (or `UNIT:ops` in the list) is selective: the outputs of
    matmuls and attention are kept too, and only the cheap ops between them
    (norms, activations, RoPE, casts) are recomputed from them, as
    torchtitan's selective op checkpointing saves matmul and attention
    outputs. `ops-alt` (or `UNIT:ops-alt`) is torchtitan's exact policy
    (parallelize_llama.py: "saves output of all compute ops, except every
    second mm"): as `ops`, but every second matmul of a unit, in forward
    order, is recomputed too.
  }];
  let dependentDialects = ["::mlir::fsdp::FsdpDialect"];
  let options = [
    Option<"mode", "activation-checkpointing", "std::string", "\"none\"",
           "none | units: recompute each unit's forward in backward | ops: "
           "recompute all but its matmuls and attention | ops-alt: as ops, "
           "every second matmul recomputed too (torchtitan's selective op) | "
           "UNIT[:ops|:ops-alt],...: those units">,
  ];
}

def FsdpShard : Pass<"fsdp-shard", "::mlir::ModuleOp"> {
  let summary = "Lays each unit out as a flat, padded buffer sharded over ranks";
  let description = [{
    For the sharded strategies (`full-shard`: FSDP's FULL_SHARD / ZeRO-3;
    `shard-grad-op`: SHARD_GRAD_OP / ZeRO-2), every unit's trained
    parameters become one `fsdp.flat_parameter` (its frozen ones a second):
    laid end to end in the unit's order, padded with zeros to a multiple of
    `world-size`, of which each rank stores one equal shard. Uneven sizes
    need nothing more than the padding. `reshard-after-forward` overrides the
    units' choice: `true` (every unit but the root, as FSDP2), `false` (keep
    every unit gathered from forward to backward), or `N` (keep 1/N of it:
    the backward gather runs among N ranks, FSDP2's integer form), globally
    and per unit (`default,h.0=false,h.1=2`); `shard-grad-op` implies
    `false`. `hybrid-shard` (HYBRID_SHARD) shards within groups of
    `world-size / replicate-groups` consecutive ranks and replicates across
    the groups. `no-shard` creates nothing. Mixed precision
    (`param-dtype`, as FSDP's MixedPrecision.param_dtype): the shards stay
    f32 (the optimizer's master weights); they are cast to the parameter
    dtype before the all-gather, so the gathered buffer and the wire are in
    that dtype. `reduce-dtype` (MixedPrecision.reduce_dtype): the packed f32
    gradient is cast before the reduce-scatter (and the hybrid replica
    all-reduce), and the reduced shard cast back to f32 for the optimizer.
    `buffer-dtype` (MixedPrecision.buffer_dtype): buffers are kept in that
    dtype (fsdp-insert-collectives rounds them where they are read and
    where the forward stores them). `sync-batch-norm`
    (torch.nn.SyncBatchNorm): every batch norm and its gradient get
    `sync_group_size` = the world size, so they normalise the whole batch;
    an error for a model without batch norm.
    The strategy, world size,
    replica count and dtypes are recorded on the module for the passes that
    follow.
  }];
  let dependentDialects = ["::mlir::fsdp::FsdpDialect"];
  let options = [
    Option<"worldSize", "world-size", "int64_t", "1", "data-parallel ranks">,
    Option<"strategy", "strategy", "std::string", "\"full-shard\"",
           "full-shard | shard-grad-op | hybrid-shard | no-shard">,
    Option<"replicateGroups", "replicate-groups", "int64_t", "1",
           "hybrid-shard: replica groups (each shards over world-size / R "
           "ranks)">,
    Option<"reshardAfterForward", "reshard-after-forward", "std::string",
           "\"default\"",
           "[default|true|false|N][,UNIT=true|false|N...]: default every "
           "unit but the root; N keeps 1/N gathered (FSDP2's integer "
           "form); per unit after a comma">,
    Option<"paramDtype", "param-dtype", "std::string", "\"f32\"",
           "mixed precision: gather parameters in f32 | bf16 | f16 (master "
           "weights stay f32)">,
    Option<"reduceDtype", "reduce-dtype", "std::string", "\"f32\"",
           "dtype of gradient reduction: f32 | bf16 | f16">,
    Option<"bufferDtype", "buffer-dtype", "std::string", "\"\"",
           "mixed precision: keep buffers (batch norm's running statistics, "
           "masks) in f32 | bf16 | f16, as MixedPrecision.buffer_dtype "
           "(default: as stored, f32)">,
    Option<"offload", "offload", "std::string", "\"none\"",
           "fsdp-offload's --offload: a unit given MODE:FRACTION has its "
           "trained parameters split in two flat buffers, the last ones "
           "(that share of its elements) marked for offload">,
    Option<"keepSharded", "keep-sharded", "bool", "false",
           "keep the sharded schedule on one rank (offload needs its flat "
           "shards there too)">,
    Option<"syncBatchNorm", "sync-batch-norm", "bool", "false",
           "batch norm normalises the whole batch, every rank's slice together "
           "(torch.nn.SyncBatchNorm; default: each rank its own slice, as "
           "PyTorch's BatchNorm)">,
  ];
}

def FsdpInsertCollectives : Pass<"fsdp-insert-collectives", "::mlir::ModuleOp"> {
  let summary = "Inserts the collectives data parallelism needs";
  let description = [{
    Reads the strategy and world size fsdp-shard recorded on the module.
    `no-shard` (DDP): every gradient is averaged over the ranks with
    `fsdp.all_reduce` right before the update reads it. Sharded strategies
    (the module has `fsdp.flat_parameter` ops): each flat buffer is
    all-gathered before its unit's first use in forward and read through
    `fsdp.param_view`s; when the unit reshards after forward it is freed
    after its last forward use and gathered again before its first backward
    use; it is freed after its last use. The unit's gradients are packed into
    a flat buffer after the last contribution and reduce-scattered (`avg`),
    and the optimizer (or the accumulation of gradient accumulation) runs on
    the shard; the gradient norm sums the shards' squares over the ranks
    with one all-reduce. The logged loss is averaged over the ranks. In
    every case the division by the world size happens inside the collective.
  }];
  let dependentDialects = ["::mlir::fsdp::FsdpDialect"];
}

def FsdpOffload : Pass<"fsdp-offload", "::mlir::ModuleOp"> {
  let summary = "Places sharded state in host memory, with the copies it needs";
  let description = [{
    Offload, as FSDP's CPU offload and ZeRO-Offload: for each unit offloaded
    (`offload`: `none`, `optimizer` or `all`, globally and per unit after a
    comma, `optimizer,h.0=all,h.1=none`), its trained flat parameter keeps
    its f32 master shard, the optimizer's moments and the reduced gradient
    shard in host memory, and the update runs on the host (`fsdp.on_host`):
    each reduced gradient shard is copied to the host as it arrives
    (`fsdp.copy_start {to = "host"}`), so the copies overlap the rest of
    backward. `optimizer` (ZeRO-Offload) keeps a copy of the shard in the
    gather dtype on the device (`device_copy`), which the gathers read and
    the host refreshes after each update (the cast to the gather dtype on
    the host, then one copy to the device); `all` keeps nothing on the
    device between steps: each gather's shard is cast on the host and copied
    to the device before it (twice a step where the unit reshards after
    forward). `offload-update = before-use` (the default, with one
    function a step) moves the host update to the next step, just before
    that step first reads the shard: the gradient shard and the clipping
    scale wait in host buffers (`fsdp.host_buffer`), and the update
    overlaps the next forward instead of following backward; the runtime
    skips it where none is pending and runs it alone before the state is
    read. `shape = fsdp2` builds FSDP2's CPUOffloadPolicy instead: the
    f32 shard is copied before each gather and cast on the device. Frozen
    flat buffers stay on the device. Needs a sharded strategy.
  }];
  let dependentDialects = ["::mlir::fsdp::FsdpDialect"];
  let options = [
    Option<"offload", "offload", "std::string", "\"none\"",
           "[none|optimizer|all|auto][,UNIT=none|optimizer|all...]: keep "
           "optimizer state and master weights (optimizer) or every shard "
           "(all) in host memory, the update on the host; MODE:FRACTION "
           "offloads that share of a unit (its last parameters, whole); "
           "auto (with --autotune): the least offload under which a plan "
           "fits">,
    Option<"update", "offload-update", "std::string", "\"before-use\"",
           "before-use | after-backward: an offloaded shard's update runs "
           "on the host before the next step first reads the shard "
           "(overlapping its forward; the same arithmetic), or at the end "
           "of backward">,
    Option<"shape", "offload-shape", "std::string", "\"fsdp\"",
           "fsdp | fsdp2: FSDP2's CPUOffloadPolicy (f32 copied before "
           "every gather, cast on the device)">,
  ];
}

def FsdpSchedule : Pass<"fsdp-schedule", "::mlir::ModuleOp"> {
  let summary = "Moves collectives apart for overlap: prefetch, late waits, streams";
  let description = [{
    Forward prefetch starts the next unit's all-gather as soon as the
    current one completes, so it overlaps the current unit's compute;
    `backward-prefetch` does the same in the reverse pass (`pre`, FSDP's
    BACKWARD_PRE), or after the current unit's reduce-scatter is issued
    (`post`), or not at all (`none`). `prefetch-depth` units ahead, at most
    `limit-all-gathers` gathers in flight. Reduce-scatter and all-reduce
    waits sink to the first use of their result. Collectives are tagged
    with their stream (`fsdp.stream`).
  }];
  let dependentDialects = ["::mlir::fsdp::FsdpDialect"];
  let options = [
    Option<"forwardPrefetch", "forward-prefetch", "bool", "true",
           "prefetch the next unit in forward">,
    Option<"backwardPrefetch", "backward-prefetch", "std::string", "\"pre\"",
           "pre | post | none">,
    Option<"prefetchDepth", "prefetch-depth", "int64_t", "1",
           "units gathered ahead">,
    Option<"limitAllGathers", "limit-all-gathers", "int64_t", "2",
           "all-gathers in flight at once">,
  ];
}

def FsdpPlanMemory : Pass<"fsdp-plan-memory", "::mlir::ModuleOp"> {
  let summary = "Assigns every tensor of @train_step an offset in one arena";
  let description = [{
    Static liveness over the step in program order: a result is live from
    its op (while the op's inputs are still live) through its last use.
    Parameter reads live in parameter storage, constants in the plan, and
    reshapes alias their operand (their uses extend its life). Offsets,
    64-byte aligned, come from offline packing (memory/ArenaPacking.h:
    largest buffer first into the smallest gap among those alive at the
    same time). Results get `fsdp.offsets`, arguments `fsdp.offset`,
    functions `fsdp.live_bytes` (bytes held after each op), and the module
    `fsdp.arena_bytes` (the arena the runtime allocates) and
    `fsdp.live_peak_bytes` (the most bytes live at once, packing's lower
    bound).

    `estimate`: liveness only, no offsets; `fsdp.arena_bytes` is the live
    peak. The autotuner's trials use it (packing is most of a trial's time)
    and pack the plan they choose.
  }];
  let dependentDialects = ["::mlir::fsdp::FsdpDialect"];
  let options = [
    Option<"function", "function", "std::string", "\"train_step\"",
           "the function to plan">,
    Option<"estimate", "estimate", "bool", "false",
           "liveness only: the arena is the live peak, no offsets assigned">,
  ];
}

def FsdpVerifyPlan : Pass<"fsdp-verify-plan", "::mlir::ModuleOp"> {
  let summary = "Checks the sharded, planned step before it is emitted";
  let description = [{
    Errors (at the offending op) for: a parameter that lives in a flat
    buffer read whole (a use before its gather); a parameter view that does
    not read a gathered flat buffer at one of its parameters; collectives
    whose group differs from the world size or their flat buffer; a read of
    a gathered buffer or of a view of it after its `fsdp.free`; and, once
    memory is planned, two live tensors whose arena bytes overlap.
  }];
}

def FsdpSimulate : Pass<"fsdp-simulate", "::mlir::ModuleOp"> {
  let summary = "Predicts the step's timeline and memory on a device model";
  let description = [{
    A discrete-event simulation of the planned step: compute in program
    order on one stream (a roofline per op from CostOpInterface),
    collectives on their streams by a ring α-β model over the device's
    links, waits blocking compute. Every instruction gets its predicted
    `fsdp.sim` start and end; the module gets `fsdp.predicted` (step time,
    compute, communication, exposed communication, peak bytes). `device`:
    h100-sxm, h200, a100-80g, cpu, or a JSON description.

    `runtime=fsdp2-eager` prices the same plan as PyTorch's eager FSDP2
    would run it, for comparing against measurements of it (bench/scale.py's
    FSDP2 cases): each all-gather's copy-out into per-parameter tensors on
    the compute stream after its wait, the in-place pre-divide of each
    reduce-scatter's input before it (the compute stream waits for it),
    `rms_norm` and its gradient as the
    unfused f32 kernels of torchtitan's `_norm(x.float()).type_as(x)`, and
    AdamW as `torch.optim.AdamW(foreach=True)`'s eight passes.
  }];
  let dependentDialects = ["::mlir::fsdp::FsdpDialect"];
  let options = [
    Option<"device", "device", "std::string", "\"cpu\"",
           "device model the plan is simulated on: h100-sxm | h200 | "
           "a100-80g | cpu | FILE.json">,
    Option<"devicesPerNode", "gpus-per-node", "int64_t", "0",
           "devices per node (0: the device model's)">,
    Option<"annotate", "annotate", "bool", "true",
           "write fsdp.sim on every instruction (false: only the module's "
           "fsdp.predicted, all the autotuner's trials read)">,
    Option<"runtime", "simulate-runtime", "std::string", "\"fsdp\"",
           "runtime the simulation prices: fsdp (fsdp-run's) | fsdp2-eager "
           "(PyTorch FSDP2's all-gather copy-out and an eager f32 RMSNorm, "
           "as torchtitan measured)">,
  ];
}

def FsdpEmitPlan : Pass<"fsdp-emit-plan", "::mlir::ModuleOp"> {
  let summary = "Writes the runtime plan (JSON) of a memory-planned step";
  let description = [{
    Serialises the planned @train_step into the versioned JSON plan that
    fsdp-run executes: meta, training options, parameters (original names
    and where their initial values are), constants, inputs, outputs, the
    arena size and the program, one instruction per op with its tensors'
    locations and its attributes.
  }];
  let options = [
    Option<"output", "output", "std::string", "\"-\"",
           "file to write the plan to ('-': standard output)">,
    Option<"function", "function", "std::string", "\"train_step\"",
           "the function to emit">,
  ];
}

#endif // FSDP_PASSES_TD
