//===- FuseLossGrad.cpp - The loss and its gradient as one op -------------===//
//
// Before (fsdp-build-train-step: the loss, then autodiff's first gradient):
//   %l = fsdp.cross_entropy %x, %t {reduction = "mean"}
//   ... (the rest of the forward)
//   %g = fsdp.constant dense<1.0>            // the loss gradient
//   %d = fsdp.cross_entropy_grad %x, %t, %g {kind = "softmax", ...}
// After:
//   %g = fsdp.constant dense<1.0>
//   %l, %d = fsdp.cross_entropy_with_grad %x, %t, %g {reduction = "mean"}
// On the CPU the logits are read once for both (each row's log-sum-exp
// computed once, the gradient row written while the row is in cache), where
// the pair reads them three times. The gradient is then held from the loss
// to its first use, the backward's first product: the logits' own lifetime
// usually ends at the fused op, so the peak does not grow. Only a pair
// whose loss gradient is known where the loss is computed (a constant, or a
// value defined before the loss) is fused; per-position losses
// (`reduction = "none"`) and nll_loss stay as they are.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialect/FsdpOps.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPFUSELOSSGRAD
#include "passes/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// The cross_entropy of the gradient's input with the same target, weight
/// and attributes, or null.
CrossEntropyOp lossOf(CrossEntropyGradOp grad) {
  for (Operation *user : grad.getInput().getUsers()) {
    auto loss = dyn_cast<CrossEntropyOp>(user);
    if (loss && loss->getBlock() == grad->getBlock() &&
        loss.getTarget() == grad.getTarget() &&
        loss.getWeight() == grad.getWeight() &&
        loss.getReduction() == grad.getReduction() &&
        loss.getIgnoreIndexAttr() == grad.getIgnoreIndexAttr())
      return loss;
  }
  return {};
}

struct FuseLossGradPass : fsdp::impl::FsdpFuseLossGradBase<FuseLossGradPass> {
  void runOnOperation() override {
    SmallVector<CrossEntropyGradOp> grads;
    getOperation().walk([&](CrossEntropyGradOp g) { grads.push_back(g); });
    for (CrossEntropyGradOp grad : grads) {
      if (grad.getKind() != "softmax" ||
          (grad.getReduction() != "mean" && grad.getReduction() != "sum"))
        continue;
      CrossEntropyOp loss = lossOf(grad);
      if (!loss)
        continue;
      // The loss gradient must exist where the loss is computed: a
      // constant is cloned there, anything else must already be defined.
      Value g = grad.getGrad();
      OpBuilder b(loss);
      auto cst = g.getDefiningOp<ConstantOp>();
      if (cst && cst->getBlock() == loss->getBlock() &&
          !cst->isBeforeInBlock(loss))
        g = b.clone(*cst)->getResult(0);
      else if (Operation *def = g.getDefiningOp();
               def && (def->getBlock() != loss->getBlock() ||
                       !def->isBeforeInBlock(loss)))
        continue;
      SmallVector<Value> operands{grad.getInput(), grad.getTarget(), g};
      if (grad.getWeight())
        operands.push_back(grad.getWeight());
      auto fused = CrossEntropyWithGradOp::create(
          b, loss.getLoc(), TypeRange{loss.getType(), grad.getType()}, operands,
          grad->getAttrs());
      fused->removeAttr("kind");
      // The loss's marks (fsdp.loss: where the forward ends) go with it.
      for (NamedAttribute a : loss->getDiscardableAttrs())
        fused->setAttr(a.getName(), a.getValue());
      loss.getResult().replaceAllUsesWith(fused.getLoss());
      grad.getResult().replaceAllUsesWith(fused.getInputGrad());
      loss.erase();
      grad.erase();
      if (cst && g != cst.getResult() && cst->use_empty())
        cst.erase();
    }
  }
};

} // namespace
