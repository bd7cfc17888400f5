//===- AttrNames.h - The names of the fsdp attributes on IR ----*- C++ -*-===//
//
// Every discardable attribute the passes, the importers and fsdp-opt put
// on a module or an op, named once: `attrs::worldSize` is
// "fsdp.world_size". (The plan's JSON keys are the runtime's contract:
// passes/EmitPlan.cpp.)
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DIALECT_ATTRNAMES_H
#define FSDP_DIALECT_ATTRNAMES_H

#include "llvm/ADT/StringRef.h"

namespace mlir::fsdp::attrs {

/// What every name below starts with.
inline constexpr llvm::StringLiteral prefix = "fsdp.";
inline constexpr llvm::StringLiteral arenaBytes = "fsdp.arena_bytes";
/// Offload: bytes of host memory a step's host values need.
inline constexpr llvm::StringLiteral hostArenaBytes = "fsdp.host_arena_bytes";
/// Offload: the host arena's bytes held after each op of a function.
inline constexpr llvm::StringLiteral hostLiveBytes = "fsdp.host_live_bytes";
inline constexpr llvm::StringLiteral batchSize = "fsdp.batch_size";
inline constexpr llvm::StringLiteral bufferDtype = "fsdp.buffer_dtype";
/// On a traced module: how many torch.utils.checkpoint calls the model
/// made while traced (fsdp-opt then defaults to per-unit recomputation).
inline constexpr llvm::StringLiteral checkpointedCalls = "fsdp.checkpointed_calls";
inline constexpr llvm::StringLiteral computeDtype = "fsdp.compute_dtype";
inline constexpr llvm::StringLiteral frontend = "fsdp.frontend";
inline constexpr llvm::StringLiteral liveBytes = "fsdp.live_bytes";
inline constexpr llvm::StringLiteral liveBytesByCategory = "fsdp.live_bytes_by_category";
inline constexpr llvm::StringLiteral livePeakBytes = "fsdp.live_peak_bytes";
inline constexpr llvm::StringLiteral loss = "fsdp.loss";
inline constexpr llvm::StringLiteral name = "fsdp.name";
inline constexpr llvm::StringLiteral offset = "fsdp.offset";
/// An op fsdp-offload placed on the host (the optimizer of an offloaded
/// shard, the cast that makes its gather-dtype copy): it reads and writes
/// host memory and runs on the host, not the device's compute stream.
inline constexpr llvm::StringLiteral onHost = "fsdp.on_host";
/// On a flat parameter: the part of a unit that `--offload=MODE:FRACTION`
/// offloads (fsdp-shard split the unit's trained parameters in two;
/// fsdp-offload places this one).
inline constexpr llvm::StringLiteral offloadPart = "fsdp.offload_part";
/// An op of an offloaded update run before the next step's first use of
/// its shard (the flat parameter it updates): skipped where no update is
/// pending, run alone before the state is read (fsdp-offload).
inline constexpr llvm::StringLiteral deferred = "fsdp.deferred";
inline constexpr llvm::StringLiteral offsets = "fsdp.offsets";
inline constexpr llvm::StringLiteral opset = "fsdp.opset";
inline constexpr llvm::StringLiteral paramDtype = "fsdp.param_dtype";
inline constexpr llvm::StringLiteral predicted = "fsdp.predicted";
inline constexpr llvm::StringLiteral recompute = "fsdp.recompute";
inline constexpr llvm::StringLiteral reduceDtype = "fsdp.reduce_dtype";
inline constexpr llvm::StringLiteral replicateGroups = "fsdp.replicate_groups";
inline constexpr llvm::StringLiteral sim = "fsdp.sim";
/// A compute op's [flops, bytes] as fsdp-simulate priced it (what the
/// calibration's fit regresses each op's measured time on).
inline constexpr llvm::StringLiteral cost = "fsdp.cost";
inline constexpr llvm::StringLiteral source = "fsdp.source";
inline constexpr llvm::StringLiteral sourceBase = "fsdp.source_base";
inline constexpr llvm::StringLiteral strategy = "fsdp.strategy";
inline constexpr llvm::StringLiteral stream = "fsdp.stream";
inline constexpr llvm::StringLiteral train = "fsdp.train";
inline constexpr llvm::StringLiteral worldSize = "fsdp.world_size";

} // namespace mlir::fsdp::attrs

#endif // FSDP_DIALECT_ATTRNAMES_H
