//===- Schedule.cpp - Prefetch, overlap and streams -----------------------===//
//
// fsdp-insert-collectives places every collective right where it is needed
// (start, then wait at once). This pass moves them apart so communication
// overlaps computation, as FSDP's prefetching does:
//   - forward prefetch: the all-gather of the next unit starts as soon as
//     the current unit's gather completes, i.e. while the current unit
//     computes (FSDP2's implicit forward prefetch);
//   - backward prefetch `pre` (BACKWARD_PRE): likewise in the reverse pass,
//     the next unit's gather starts before the current unit's gradients are
//     computed; `post` (BACKWARD_POST): after the current unit's gradient
//     reduce-scatter is issued; `none`;
//   - `prefetch-depth` gathers ahead, capped by `limit-all-gathers` in
//     flight at once (FSDP1's rate limiter);
//   - every wait of a reduce-scatter or all-reduce sinks to right before
//     the first use of its result, so gradient reduction overlaps the rest
//     of the reverse pass;
//   - offload's copies to the host start right after their input is
//     computed, and copies to the device move with the gathers they feed.
// Collectives are tagged with the stream they run on (`fsdp.stream`:
// all_gather, reduce_scatter, all_reduce, and offload's h2d and d2h);
// everything else is compute, or host work (fsdp.on_host).
//
//===----------------------------------------------------------------------===//
#include "dialect/AttrNames.h"
#include "passes/Passes.h"
#include "passes/TrainStep.h"

#include "dialect/FsdpOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPSCHEDULE
#include "passes/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

struct FsdpSchedule : fsdp::impl::FsdpScheduleBase<FsdpSchedule> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (backwardPrefetch != "pre" && backwardPrefetch != "post" &&
        backwardPrefetch != "none") {
      module.emitError("--backward-prefetch must be pre, post or none, got '")
          << backwardPrefetch << "'";
      return signalPassFailure();
    }
    if (prefetchDepth < 0 || limitAllGathers < 1) {
      module.emitError("--prefetch-depth must be >= 0 and "
                       "--limit-all-gathers >= 1");
      return signalPassFailure();
    }
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.getName() == "forward" || func.isExternal())
        continue;
      schedule(func);
    }
  }

  void schedule(func::FuncOp func) {
    Block &body = func.getBody().front();
    MLIRContext *ctx = &getContext();
    // Streams.
    body.walk([&](Operation *op) {
      if (isa<AllGatherStartOp>(op))
        op->setAttr(mlir::fsdp::attrs::stream, StringAttr::get(ctx, "all_gather"));
      else if (isa<ReduceScatterStartOp>(op))
        op->setAttr(mlir::fsdp::attrs::stream, StringAttr::get(ctx, "reduce_scatter"));
      else if (isa<AllReduceOp>(op))
        op->setAttr(mlir::fsdp::attrs::stream, StringAttr::get(ctx, "all_reduce"));
      else if (auto copy = dyn_cast<CopyStartOp>(op))
        op->setAttr(mlir::fsdp::attrs::stream,
                    StringAttr::get(ctx, copy.getTo() == "host" ? "d2h" : "h2d"));
    });

    // Reductions complete late, so they overlap the rest of the reverse
    // pass: at the first use of their result, but a reduce-scatter no later
    // than the next one's start (its packed input stays allocated until it
    // completes, so letting them pile up would hold every unit's full
    // gradient at once; FSDP keeps one in flight the same way).
    SmallVector<Operation *> reductions;
    for (Operation &op : body)
      if (isa<ReduceScatterStartOp, AllReduceOp>(op))
        reductions.push_back(&op);
    // Only waits move here, each once, so positions taken before the loop
    // order every other op and each wait before its own move.
    auto at = positions(body);
    auto before = [&](Operation *a, Operation *b) {
      return at.lookup(a) < at.lookup(b);
    };
    for (auto [i, op] : llvm::enumerate(reductions)) {
      WaitOp wait = waitOf(op);
      if (!wait || wait.getResult().use_empty())
        continue;
      Operation *first = nullptr;
      for (Operation *user : wait.getResult().getUsers()) {
        Operation *u = body.findAncestorOpInBlock(*user);
        if (!first || before(u, first))
          first = u;
      }
      if (isa<ReduceScatterStartOp>(op))
        for (Operation *next : llvm::drop_begin(reductions, i + 1))
          if (isa<ReduceScatterStartOp>(next)) {
            if (!first || before(next, first))
              first = next;
            break;
          }
      if (first && first != wait->getNextNode() && before(wait, first))
        wait->moveBefore(first);
    }

    // Copies to the host (offload) start as soon as their input is
    // computed: a gradient shard's as its reduce-scatter completes, so the
    // copy overlaps the rest of the reverse pass.
    for (auto copy : llvm::to_vector(body.getOps<CopyStartOp>())) {
      if (copy.getTo() != "host")
        continue;
      Operation *def = copy.getInput().getDefiningOp();
      if (def && def->getBlock() == &body && def->getNextNode() != copy)
        copy->moveAfter(def);
    }
    // Gathers, split at the loss into forward and backward.
    Operation *loss = lossOp(func);
    SmallVector<AllGatherStartOp> forward, backward;
    for (auto gather : body.getOps<AllGatherStartOp>()) {
      bool isBackward = loss && loss->isBeforeInBlock(gather);
      (isBackward ? backward : forward).push_back(gather);
    }
    int64_t depth = std::min<int64_t>(prefetchDepth, limitAllGathers);
    if (forwardPrefetch)
      prefetch(forward, depth, /*afterReduce=*/false);
    if (backwardPrefetch != "none")
      prefetch(backward, depth, backwardPrefetch == "post");
    placeDeferred(body);
  }

  /// Offload's updates of the previous step (fsdp.deferred, one block of
  /// ops per flat parameter, first in the function): each block moves to
  /// just before the first op that reads what it writes (its shard, or its
  /// device copy), so the host's update of a unit overlaps the forward of
  /// the units before it and the compute stream waits, if at all, right
  /// before that unit's gather.
  void placeDeferred(Block &body) {
    llvm::MapVector<Attribute, SmallVector<Operation *>> blocks;
    for (Operation &op : body)
      if (auto flat = op.getAttrOfType<FlatSymbolRefAttr>(
              mlir::fsdp::attrs::deferred))
        blocks[flat].push_back(&op);
    for (auto &[flat, ops] : blocks) {
      llvm::SmallPtrSet<Operation *, 8> inBlock(ops.begin(), ops.end());
      Operation *first = nullptr;
      for (Operation &op : body) {
        if (inBlock.contains(&op))
          continue;
        bool reads = false;
        if (auto shard = dyn_cast<GetShardOp>(op))
          reads = shard.getFlatAttr() == flat;
        for (Value v : op.getOperands())
          reads |= inBlock.contains(v.getDefiningOp());
        if (reads) {
          first = &op;
          break;
        }
      }
      if (first)
        for (Operation *op : ops)
          op->moveBefore(first);
    }
  }

  /// Starts gather i right after gather i - depth completes (or, for
  /// `post`, after the reduce-scatter that follows it is issued); never
  /// later than where it is.
  void prefetch(ArrayRef<AllGatherStartOp> gathers, int64_t depth,
                bool afterReduce) {
    if (depth == 0 || gathers.empty())
      return;
    // Each gather (with its chain) moves once, after it is last asked
    // about; anchors never move: positions taken here order them all.
    auto at = positions(*gathers.front()->getBlock());
    auto before = [&](Operation *a, Operation *b) {
      return at.lookup(a) < at.lookup(b);
    };
    for (size_t i = depth; i < gathers.size(); ++i) {
      AllGatherStartOp gather = gathers[i];
      Operation *anchor = waitOf(gathers[i - depth]);
      if (!anchor)
        continue;
      if (afterReduce) {
        // The first reduce-scatter issued after the earlier unit's gather.
        Operation *rs = anchor->getNextNode();
        while (rs && rs != gather && !isa<ReduceScatterStartOp>(rs))
          rs = rs->getNextNode();
        if (!rs || rs == gather)
          continue;
        anchor = rs;
      }
      if (!before(anchor, gather))
        continue;
      // The ops that only feed this gather (the shard read, a cast to the
      // mixed-precision dtype) move with it; anything else it reads must
      // already be computed at the anchor.
      SmallVector<Operation *> chain;
      Value input = gather.getInput();
      while (Operation *def = input.getDefiningOp()) {
        if (!before(anchor, def))
          break; // already available
        if (!def->hasOneUse() ||
            !isa<GetShardOp, GetDeviceCopyOp, CastOp, CopyStartOp, WaitOp>(
                def))
          break;
        chain.push_back(def);
        if (def->getNumOperands() == 0)
          break;
        input = def->getOperand(0);
      }
      Operation *pending = input.getDefiningOp();
      if (pending && before(anchor, pending) &&
          !llvm::is_contained(chain, pending))
        continue; // it reads something computed after the anchor
      Operation *at = anchor;
      for (Operation *op : llvm::reverse(chain)) {
        op->moveAfter(at);
        at = op;
      }
      gather->moveAfter(at);
    }
  }
};

} // namespace
