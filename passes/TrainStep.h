//===- TrainStep.h - Facts about a built training step ----------*- C++ -*-===//
//
// Shared by the passes after fsdp-build-train-step: where forward ends, what
// a buffer costs in the arena, which ops are collectives and which are only
// views of storage the runtime already has.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_PASSES_TRAINSTEP_H
#define FSDP_PASSES_TRAINSTEP_H

#include "dialect/FsdpOps.h"
#include "dialect/AttrNames.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::fsdp {

/// fsdp-build-train-step marks the op computing the loss with this unit
/// attribute: forward is every op up to it, the reverse pass follows it.
constexpr llvm::StringLiteral kLossAttr = mlir::fsdp::attrs::loss;

/// fsdp-checkpoint-activations marks each op it clones into the reverse
/// pass with the unit whose forward it recomputes (for reports).
constexpr llvm::StringLiteral kRecomputeAttr = mlir::fsdp::attrs::recompute;

/// The op marked as the loss in `func`, or null (e.g. @apply_update).
inline Operation *lossOp(func::FuncOp func) {
  for (Operation &op : func.getBody().front())
    if (op.hasAttr(kLossAttr))
      return &op;
  return nullptr;
}

/// The position of every op of `block`: comparing two positions answers
/// isBeforeInBlock without the whole-block renumbering MLIR does after a
/// move (a pass that moves hundreds of ops and asks after each would
/// renumber a 70B step's 15,000 ops each time).
inline llvm::DenseMap<Operation *, int64_t> positions(Block &block) {
  llvm::DenseMap<Operation *, int64_t> at;
  int64_t i = 0;
  for (Operation &op : block)
    at[&op] = i++;
  return at;
}

/// Bytes a tensor (or a collective's result buffer) takes in the arena: i1
/// as one byte per element, at least one byte.
inline int64_t bufferBytes(Type t) {
  if (auto future = dyn_cast<FutureType>(t))
    t = future.getValueType();
  auto tt = cast<RankedTensorType>(t);
  unsigned bits = tt.getElementTypeBitWidth();
  return std::max<int64_t>(
      tt.getNumElements() * (bits == 1 ? 1 : (bits + 7) / 8), 1);
}

/// An asynchronous collective's start (completed by an fsdp.wait).
inline bool isCollectiveStart(Operation *op) {
  return isa<AllGatherStartOp, ReduceScatterStartOp, AllReduceOp>(op);
}

/// An asynchronous start completed by an fsdp.wait: a collective, or a
/// copy between host and device memory.
inline bool isAsyncStart(Operation *op) {
  return isCollectiveStart(op) || isa<CopyStartOp>(op);
}

/// The wait completing an asynchronous start (null for any other op): the
/// collective or copy reads its input, and writes its result, until then.
inline WaitOp waitOf(Operation *start) {
  if (!isAsyncStart(start))
    return nullptr;
  for (Operation *user : start->getResult(0).getUsers())
    if (auto wait = dyn_cast<WaitOp>(user))
      return wait;
  return nullptr;
}

/// Ops that are not runtime instructions: views of storage the runtime
/// already has (parameters, shards, accumulators, constants, the arena).
inline bool isStorageView(Operation *op) {
  return isa<ReshapeOp, GetParameterOp, GetShardOp, ParamViewOp, ConstantOp,
             ReadGradOp, GetDeviceCopyOp, GetHostBufferOp>(op);
}

/// Offload: a copy into persistent storage (a host buffer, a device copy;
/// or an AdamW's fused copy into a host buffer), whose result is that
/// storage rather than a step's buffer.
inline bool copiesIntoStorage(Operation *op) {
  if (auto copy = dyn_cast_or_null<CopyStartOp>(op))
    return bool(copy.getIntoAttr());
  if (auto adam = dyn_cast_or_null<AdamWOp>(op)) // its fused copy
    return bool(adam.getIntoAttr());
  return false;
}

/// Whether `v` is in host memory (offload): the shard of an offloaded flat
/// parameter, a host op's result, or a copy to the host; views follow
/// their source.
inline bool isHostValue(Value v) {
  while (true) {
    Operation *def = v.getDefiningOp();
    if (!def)
      return false;
    if (def->hasAttr(attrs::onHost) || isa<GetHostBufferOp>(def))
      return true;
    if (auto shard = dyn_cast<GetShardOp>(def)) {
      auto flat = SymbolTable::lookupNearestSymbolFrom<FlatParameterOp>(
          def, shard.getFlatAttr());
      return flat && flat.getOffload();
    }
    if (auto copy = dyn_cast<CopyStartOp>(def))
      return copy.getTo() == "host";
    if (auto wait = dyn_cast<WaitOp>(def)) {
      auto copy = wait.getFuture().getDefiningOp<CopyStartOp>();
      return copy && copy.getTo() == "host";
    }
    if (auto r = dyn_cast<ReshapeOp>(def)) {
      v = r.getX();
      continue;
    }
    if (auto view = dyn_cast<ParamViewOp>(def)) {
      v = view.getInput();
      continue;
    }
    return false;
  }
}

} // namespace mlir::fsdp

#endif // FSDP_PASSES_TRAINSTEP_H
