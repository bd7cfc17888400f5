//===- TrainStep.h - Facts about a built training step ----------*- C++ -*-===//
#ifndef FSDP_PASSES_TRAINSTEP_H
#define FSDP_PASSES_TRAINSTEP_H

#include "dialect/FsdpTypes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::fsdp {

/// fsdp-build-train-step marks the op computing the loss with this unit
/// attribute: forward is every op up to it, the reverse pass follows it.
constexpr llvm::StringLiteral kLossAttr = "fsdp.loss";

/// The op marked as the loss in `func`, or null (e.g. @apply_update).
inline Operation *lossOp(func::FuncOp func) {
  for (Operation &op : func.getBody().front())
    if (op.hasAttr(kLossAttr))
      return &op;
  return nullptr;
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

} // namespace mlir::fsdp

#endif // FSDP_PASSES_TRAINSTEP_H
