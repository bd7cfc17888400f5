//===- InsertCollectives.cpp - Collectives for data parallelism -----------===//
//
// no-shard, before:
//   fsdp.adamw @w, %g {...}
// after:
//   %f = fsdp.all_reduce %g {group_size = 4, reduction = "avg"}
//   %a = fsdp.wait %f
//   fsdp.adamw @w, %a {...}
// The gradient norm (and so clipping) is computed from the averaged
// gradients, i.e. over the global batch, as torch DDP + clip_grad_norm_ do.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialect/FsdpOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPINSERTCOLLECTIVES
#include "passes/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// Replaces every use of `v` after `after` with its average over the ranks.
Value averageOverRanks(OpBuilder &b, Location loc, Value v, int64_t ranks) {
  auto type = cast<RankedTensorType>(v.getType());
  auto start =
      AllReduceOp::create(b, loc, FutureType::get(b.getContext(), type), v,
                          b.getI64IntegerAttr(ranks), b.getStringAttr("avg"));
  return WaitOp::create(b, loc, start.getFuture());
}

struct FsdpInsertCollectives
    : fsdp::impl::FsdpInsertCollectivesBase<FsdpInsertCollectives> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (worldSize < 1) {
      module.emitError("--world-size must be >= 1, got ") << worldSize;
      return signalPassFailure();
    }
    if (strategy != "no-shard") {
      module.emitError("--strategy=")
          << strategy << " is not implemented yet (no-shard is)";
      return signalPassFailure();
    }
    module->setAttr(
        "fsdp.world_size",
        IntegerAttr::get(IntegerType::get(&getContext(), 64), worldSize));
    module->setAttr("fsdp.strategy", StringAttr::get(&getContext(), strategy));
    if (worldSize == 1)
      return;
    auto step = module.lookupSymbol<func::FuncOp>("train_step");
    if (!step) {
      module.emitError("fsdp-insert-collectives needs @train_step");
      return signalPassFailure();
    }
    auto update = module.lookupSymbol<func::FuncOp>("apply_update");
    func::FuncOp updater = update ? update : step;

    // Gradients: where they are read by the optimizer, or summed up for the
    // gradient norm, average them first. They are the values the update
    // reads: accumulator reads, or the operands of the optimizer ops.
    SmallVector<Value> grads;
    updater.walk([&](Operation *op) {
      if (auto read = dyn_cast<ReadGradOp>(op))
        grads.push_back(read.getResult());
      else if (isa<AdamWOp, SgdOp>(op) && !update)
        grads.push_back(op->getOperand(0));
    });
    llvm::SmallPtrSet<Value, 32> done;
    for (Value g : grads) {
      if (!done.insert(g).second)
        continue;
      OpBuilder b(&getContext());
      b.setInsertionPointAfterValue(g);
      Value avg = averageOverRanks(b, g.getLoc(), g, worldSize);
      g.replaceAllUsesExcept(
          avg, avg.getDefiningOp<WaitOp>().getFuture().getDefiningOp());
    }

    // The logged loss: the mean over ranks, i.e. over the global batch.
    auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      auto name = step.getResultAttrOfType<StringAttr>(i, "fsdp.name");
      if (!name || name.getValue() != "loss")
        continue;
      OpBuilder b(ret);
      ret.setOperand(i, averageOverRanks(b, ret.getLoc(), v, worldSize));
    }
  }
};

} // namespace
