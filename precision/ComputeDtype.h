//===- ComputeDtype.h - A training step computed in bf16 or f16 -*- C++ -*-===//
//
// Mixed precision as PyTorch FSDP's MixedPrecision(param_dtype=bf16) runs
// it: the forward (and so, through autodiff, the backward) computes in the
// low-precision dtype; parameters stay f32 (the optimizer's master weights)
// and are read in the compute dtype; their gradients are cast back to f32
// before the norm, the reduction and the update.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_PRECISION_COMPUTEDTYPE_H
#define FSDP_PRECISION_COMPUTEDTYPE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::fsdp {

/// The float type named by --compute-dtype (f32, bf16, f16), or null.
FloatType computeDtype(MLIRContext *ctx, StringRef name);

/// Rewrites every f32 tensor of `step` (a clone of @forward, with its loss)
/// to `dtype`: parameter reads and constants change type, float inputs are
/// cast on entry, every op's f32 results follow. `loss` (the returned loss)
/// is cast back to f32, so the step still returns and differentiates an f32
/// scalar; the returned value is the cast (or `loss` when it is already
/// f32, as a reduced cross-entropy is). Null when an op's types cannot be
/// inferred in the new dtype (its error was emitted).
Value castToComputeDtype(func::FuncOp step, FloatType dtype, Value loss);

} // namespace mlir::fsdp

#endif // FSDP_PRECISION_COMPUTEDTYPE_H
