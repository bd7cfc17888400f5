//===- ComputeDtype.cpp - A training step computed in bf16 or f16 ---------===//
//
// Before (compute dtype bf16):            After:
//   %w = fsdp.get_parameter @w : f32        %w = fsdp.get_parameter @w : bf16
//   %c = fsdp.constant 0.5 : f32            %c = fsdp.constant 0.5 : bf16
//   %y = fsdp.matmul %x, %w : f32           %x1 = fsdp.cast %x : f32 -> bf16
//   %l = fsdp.cross_entropy %y, %t : f32    %y = fsdp.matmul %x1, %w : bf16
//   return %l                               %l = fsdp.cross_entropy ... : bf16
//                                           %l32 = fsdp.cast %l : bf16 -> f32
//                                           return %l32
// Run on the step before autodiff, so the backward is built in bf16 too.
// Every kernel rounds its result to the compute dtype and accumulates in
// f32 (the runtime's contract), as PyTorch's bf16 CPU and CUDA kernels do.
//
//===----------------------------------------------------------------------===//
#include "precision/ComputeDtype.h"

#include "dialect/FsdpOps.h"

#include "mlir/Interfaces/InferTypeOpInterface.h"

using namespace mlir;
using namespace mlir::fsdp;

FloatType mlir::fsdp::computeDtype(MLIRContext *ctx, StringRef name) {
  if (name == "f32")
    return Float32Type::get(ctx);
  if (name == "bf16")
    return BFloat16Type::get(ctx);
  if (name == "f16")
    return Float16Type::get(ctx);
  return {};
}

static bool isF32Tensor(Type t) {
  auto tt = dyn_cast<RankedTensorType>(t);
  return tt && tt.getElementType().isF32();
}

static RankedTensorType withElement(Type t, Type element) {
  return RankedTensorType::get(cast<RankedTensorType>(t).getShape(), element);
}

/// Whether `v`, a float value, is computed from a random draw
/// (fsdp.uniform) through float ops.
static bool drawnFrom(Value v) {
  SmallVector<Value> work{v};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || !seen.insert(def).second)
      continue;
    if (isa<UniformOp>(def))
      return true;
    for (Value operand : def->getOperands())
      if (isa<FloatType>(getElementTypeOrSelf(operand.getType())))
        work.push_back(operand);
  }
  return false;
}

Value mlir::fsdp::castToComputeDtype(func::FuncOp step, FloatType dtype,
                                     Value loss) {
  Block &body = step.getBody().front();
  // An integer drawn in floats (the tracer's randint: lo + floor(n·U))
  // would be computed in bf16 or f16 here, which hold integers exactly
  // only to 256 or 2048: other integers than PyTorch's, with exit 0.
  for (auto cast : body.getOps<CastOp>()) {
    Type from = getElementTypeOrSelf(cast.getX().getType());
    Type to = getElementTypeOrSelf(cast.getType());
    if (isa<FloatType>(from) && isa<IntegerType>(to) && !to.isInteger(1) &&
        drawnFrom(cast.getX())) {
      cast.emitError("an integer drawn at random (randint) would be computed "
                     "in ")
          << dtype
          << ", which holds integers exactly only up to its significand; "
             "use --compute-dtype=f32";
      return {};
    }
  }
  OpBuilder b(&body, body.begin());
  llvm::SmallPtrSet<Operation *, 8> entryCasts;
  for (BlockArgument arg : body.getArguments()) {
    if (!isF32Tensor(arg.getType()) || arg.use_empty())
      continue;
    auto cast =
        CastOp::create(b, arg.getLoc(), withElement(arg.getType(), dtype), arg);
    arg.replaceAllUsesExcept(cast, cast);
    entryCasts.insert(cast);
  }
  for (Operation &op : body.without_terminator()) {
    if (entryCasts.contains(&op))
      continue;
    if (auto c = dyn_cast<ConstantOp>(op)) {
      auto fp = dyn_cast<DenseFPElementsAttr>(c.getValue());
      if (!fp || !fp.getElementType().isF32())
        continue;
      auto value = fp.mapValues(dtype, [&](const APFloat &v) {
        APFloat x = v;
        bool lost;
        x.convert(dtype.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                  &lost);
        return x.bitcastToAPInt();
      });
      c.setValueAttr(value);
      c.getResult().setType(cast<RankedTensorType>(value.getType()));
      continue;
    }
    // Ops with a shape function say their own result types (a reduced loss
    // stays f32); every other f32 result follows its operands.
    SmallVector<Type> inferred;
    if (auto infer = dyn_cast<InferTypeOpInterface>(op)) {
      if (failed(infer.inferReturnTypes(
              op.getContext(), op.getLoc(), op.getOperands(),
              op.getRawDictionaryAttrs(), op.getPropertiesStorage(),
              op.getRegions(), inferred)))
        return {};
      for (auto [r, t] : llvm::zip(op.getResults(), inferred))
        r.setType(t);
      continue;
    }
    for (OpResult r : op.getResults())
      if (isF32Tensor(r.getType()))
        r.setType(withElement(r.getType(), dtype));
  }
  if (isF32Tensor(loss.getType()) || !loss.getDefiningOp())
    return loss; // f32 already (a reduced loss), or an input
  b.setInsertionPointAfterValue(loss);
  auto cast = CastOp::create(b, loss.getLoc(),
                             withElement(loss.getType(), b.getF32Type()), loss);
  loss.replaceAllUsesExcept(cast, cast);
  return cast;
}
