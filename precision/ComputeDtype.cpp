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

/// Whether `v` is computed from random draws (fsdp.uniform) and constants
/// alone, with at least one draw, and the ops computing it (into `ops`):
/// the tracer's randint, lo + floor(n·U), before its cast to integers.
static bool drawnAlone(Value v, llvm::SmallPtrSetImpl<Operation *> &ops) {
  bool drawn = false;
  SmallVector<Value> work{v};
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def)
      return false; // an input of the step
    if (!ops.insert(def).second)
      continue;
    drawn |= isa<UniformOp>(def);
    for (Value operand : def->getOperands())
      work.push_back(operand);
  }
  return drawn;
}

/// Whether `v`, a float value, is computed from a random draw through
/// float ops (an integer path, an argsort of draws or a gather at drawn
/// positions, does no float arithmetic on the draws' values).
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
  // stays in f32: bf16 and f16 hold integers exactly only to 256 and 2048,
  // and a bf16 draw has 8 random bits, so it would draw other integers
  // than PyTorch's, with exit 0. Its ops (draws and constants alone) are
  // left as they are; a constant that other ops use too is copied for
  // them. An integer drawn from a draw mixed with the model's values is
  // refused.
  llvm::SmallPtrSet<Operation *, 16> keep;
  for (auto cast : body.getOps<CastOp>()) {
    Type from = getElementTypeOrSelf(cast.getX().getType());
    Type to = getElementTypeOrSelf(cast.getType());
    if (!isa<FloatType>(from) || !isa<IntegerType>(to) || to.isInteger(1))
      continue;
    llvm::SmallPtrSet<Operation *, 16> ops;
    if (drawnAlone(cast.getX(), ops)) {
      keep.insert(ops.begin(), ops.end());
      keep.insert(cast); // its result is an integer either way
    } else if (drawnFrom(cast.getX())) {
      cast.emitError("an integer computed from a random draw and the model's "
                     "values would be computed in ")
          << dtype
          << ", which holds integers exactly only up to its significand; "
             "use --compute-dtype=f32";
      return {};
    }
  }
  // A kept value other ops use too reaches them as the compute dtype: a
  // constant or a draw copied (a draw's copy draws its values in the
  // compute dtype), anything else cast.
  // (In the block's order: the plan does not depend on pointer values.)
  SmallVector<Operation *> kept;
  for (Operation &op : body)
    if (keep.contains(&op))
      kept.push_back(&op);
  for (Operation *op : kept) {
    auto outside = [&](OpOperand &use) { return !keep.contains(use.getOwner()); };
    if (llvm::none_of(op->getUses(), outside))
      continue;
    OpBuilder after(op->getBlock(), std::next(op->getIterator()));
    if (isa<ConstantOp, UniformOp>(op)) {
      Operation *copy = after.clone(*op);
      op->getResult(0).replaceUsesWithIf(copy->getResult(0), outside);
      continue;
    }
    for (OpResult r : op->getResults())
      if (isF32Tensor(r.getType())) {
        Value c = CastOp::create(after, op->getLoc(),
                                 withElement(r.getType(), dtype), r);
        r.replaceUsesWithIf(c, [&](OpOperand &use) {
          return outside(use) && use.getOwner() != c.getDefiningOp();
        });
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
    if (entryCasts.contains(&op) || keep.contains(&op))
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
