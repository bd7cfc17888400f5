//===- Autodiff.cpp - Reverse-mode differentiation of a block -------------===//
#include "autodiff/Autodiff.h"

#include "dialect/FsdpOps.h"

#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::fsdp;

FailureOr<SmallVector<Value>>
mlir::fsdp::buildGradients(Block &block, Value loss, ArrayRef<Value> wrt) {
  auto lossType = dyn_cast<RankedTensorType>(loss.getType());
  if (!lossType || lossType.getRank() != 0 ||
      !isa<FloatType>(lossType.getElementType()))
    return emitError(loss.getLoc(),
                     "the loss must be a scalar float tensor, got ")
           << loss.getType();

  // Ops on a path from some `wrt` value to the loss: forward from wrt,
  // backward from the loss, intersected.
  llvm::DenseSet<Operation *> fromWrt, toLoss;
  SmallVector<Value> work(wrt.begin(), wrt.end());
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (Operation *user : v.getUsers())
      if (user->getBlock() == &block && fromWrt.insert(user).second)
        llvm::append_range(work, user->getResults());
  }
  work.push_back(loss);
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || def->getBlock() != &block || !toLoss.insert(def).second)
      continue;
    llvm::append_range(work, def->getOperands());
  }

  OpBuilder b(block.getTerminator());
  llvm::DenseMap<Value, Value> grads;
  auto accumulate = [&](Value v, Value g) {
    Value &slot = grads[v];
    slot = slot ? AddOp::create(b, g.getLoc(), slot, g).getResult() : g;
  };
  auto one = DenseElementsAttr::get(
      lossType, b.getFloatAttr(lossType.getElementType(), 1.0));
  grads[loss] = ConstantOp::create(b, loss.getLoc(), one);

  // Walk the forward ops backwards (the block's forward part ends at the
  // ops that existed before we started appending).
  SmallVector<Operation *> forward;
  for (Operation &op : block.without_terminator())
    if (fromWrt.contains(&op) && toLoss.contains(&op))
      forward.push_back(&op);
  for (Operation *op : llvm::reverse(forward)) {
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value r : op->getResults()) {
      resultGrads.push_back(grads.lookup(r));
      any |= (bool)resultGrads.back();
    }
    if (!any)
      continue;
    auto grad = dyn_cast<GradientOpInterface>(op);
    if (!grad)
      return op->emitError("cannot differentiate '")
             << op->getName() << "': it has no GradientOpInterface";
    SmallVector<Value> operandGrads;
    if (failed(grad.buildVJP(b, resultGrads, operandGrads)))
      return failure();
    assert(operandGrads.size() == op->getNumOperands() &&
           "a VJP returns one gradient per operand");
    for (auto [operand, g] : llvm::zip(op->getOperands(), operandGrads))
      if (g)
        accumulate(operand, g);
  }

  SmallVector<Value> out;
  for (Value v : wrt)
    out.push_back(grads.lookup(v));
  return out;
}

void mlir::fsdp::eraseDeadOps(Block &block) {
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
    if (isOpTriviallyDead(&op))
      op.erase();
}
