//===- TrainStep.h - Facts about a built training step ----------*- C++ -*-===//
#ifndef FSDP_PASSES_TRAINSTEP_H
#define FSDP_PASSES_TRAINSTEP_H

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

} // namespace mlir::fsdp

#endif // FSDP_PASSES_TRAINSTEP_H
