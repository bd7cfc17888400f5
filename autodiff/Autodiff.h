//===- Autodiff.h - Reverse-mode differentiation of a block -----*- C++ -*-===//
#ifndef FSDP_AUTODIFF_AUTODIFF_H
#define FSDP_AUTODIFF_AUTODIFF_H

#include "mlir/IR/Builders.h"
#include "mlir/Support/LLVM.h"

namespace mlir::fsdp {

/// Appends, before `block`'s terminator, the reverse pass of the ops that
/// compute the scalar `loss` from `wrt`, asking each op for its
/// vector-Jacobian product through GradientOpInterface. Returns one gradient
/// per `wrt` value (null when the loss does not depend on it); a value used
/// several times (a tied weight) accumulates every contribution. An op on
/// the path without the interface is an error at that op.
FailureOr<SmallVector<Value>> buildGradients(Block &block, Value loss,
                                             ArrayRef<Value> wrt);

/// Erases side-effect-free ops whose results are unused (the pieces of VJPs
/// nobody needs, such as the gradient of a constant exponent).
void eraseDeadOps(Block &block);

} // namespace mlir::fsdp

#endif // FSDP_AUTODIFF_AUTODIFF_H
