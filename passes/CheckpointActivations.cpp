//===- CheckpointActivations.cpp - Recompute unit forwards in backward ----===//
//
// --activation-checkpointing=units, as torch's checkpoint_wrapper around each
// FSDP unit (or =UNIT,UNIT... for the named units only). The forward of
// @train_step is split into regions: a region starts at an op that reads a
// unit's parameters and runs until an op reads another unit's (ops that read
// none belong to the region they are in). For every region of a non-root unit,
// the values it computes that only the reverse pass needs are not kept: the ops
// computing them are cloned right before their first use in the reverse pass
// and those uses read the clones. Values the forward reads after the region
// (its output, the next region's input) are kept, as checkpointing keeps each
// block's input.
//
// Before:                         After:
//   %h = fsdp.gelu %a  (region)     %h = fsdp.gelu %a
//   %y = fsdp.matmul %h, %w         %y = fsdp.matmul %h, %w
//   ...                             ...
//   %g = fsdp.mul %dy, %h (bwd)     %h2 = fsdp.gelu %a      // recomputed
//                                   %g = fsdp.mul %dy, %h2
//
// Parameter reads are cloned too, so the unit's backward gather (inserted
// later) serves the recomputation and the gradients at once.
//
// Selective (`ops`, `UNIT:ops`): the outputs of matmuls and attention are
// kept like a block's input, so only the cheap ops between them are cloned
// and the clones read the kept outputs: about 40% of a Llama block's saved
// bytes for a few percent of its forward time, where full recomputation
// repeats the whole forward. `ops-alt` is torchtitan's policy: every second
// matmul of a block (in forward order) is recomputed as well.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/TrainStep.h"

#include "dialect/FsdpOps.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPCHECKPOINTACTIVATIONS
#include "passes/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

struct FsdpCheckpointActivations
    : fsdp::impl::FsdpCheckpointActivationsBase<FsdpCheckpointActivations> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (mode == "none" || mode.empty())
      return;
    auto step = module.lookupSymbol<func::FuncOp>("train_step");
    if (!step) {
      module.emitError("--activation-checkpointing needs @train_step");
      return signalPassFailure();
    }
    Operation *loss = lossOp(step);
    if (!loss) {
      step.emitError("@train_step has no op marked as the loss");
      return signalPassFailure();
    }
    llvm::StringMap<UnitOp> unitOf;
    for (auto unit : module.getOps<UnitOp>())
      for (Attribute a : unit.getParams())
        unitOf[cast<FlatSymbolRefAttr>(a).getValue()] = unit;
    if (unitOf.empty()) {
      module.emitError("--activation-checkpointing=units needs fsdp.unit "
                       "ops: run fsdp-wrap-units first");
      return signalPassFailure();
    }
    // `units` checkpoints every non-root unit; otherwise `mode` names the
    // units to checkpoint (the autotuner's per-unit choice).
    // Per chosen unit: how ("" whole, "ops" or "ops-alt" selective).
    llvm::StringMap<std::string> chosen;
    SymbolTable symbols(module);
    bool every = mode == "units" || mode == "ops" || mode == "ops-alt";
    if (!every) {
      SmallVector<StringRef> names;
      StringRef(mode).split(names, ',', -1, /*KeepEmpty=*/false);
      for (StringRef entry : names) {
        auto [name, how] = entry.split(':');
        if (!symbols.lookup<UnitOp>(name) ||
            (!how.empty() && how != "ops" && how != "ops-alt")) {
          module.emitError("--activation-checkpointing: '")
              << entry << "' is not none, units, ops, ops-alt or the name "
              << "of a unit (optionally with :ops or :ops-alt)";
          return signalPassFailure();
        }
        chosen[name] = how.str();
      }
    }

    // Regions of the forward, in order.
    Block &body = step.getBody().front();
    struct Region {
      UnitOp unit;
      SmallVector<Operation *> ops;
    };
    SmallVector<Region> regions;
    for (Operation &op : body) {
      UnitOp owner;
      for (Value v : op.getOperands())
        if (auto read = v.getDefiningOp<GetParameterOp>())
          owner = unitOf.lookup(read.getParam());
      if (owner && (regions.empty() || regions.back().unit != owner))
        regions.push_back({owner, {}});
      if (!regions.empty() && !isa<GetParameterOp>(op))
        regions.back().ops.push_back(&op);
      if (&op == loss)
        break;
    }

    int64_t recomputed = 0;
    for (Region &region : regions) {
      StringRef name = region.unit.getSymName();
      if (every ? name == "root" : !chosen.contains(name))
        continue;
      std::string how = every ? (mode == "units" ? std::string() : mode.getValue())
                              : chosen.lookup(name);
      recomputed += checkpoint(body, loss, region.ops, how, name);
    }
    if (recomputed == 0)
      step.emitRemark("--activation-checkpointing=units found nothing to "
                      "recompute");
  }

  /// Recomputes, in the reverse pass, what `ops` compute for it alone;
  /// returns how many ops were cloned. `how`: "" everything; "ops" all but
  /// the outputs of matmuls and attention, which are kept; "ops-alt" as
  /// "ops" but every second matmul in forward order is recomputed too
  /// (torchtitan's selective op checkpointing: "saves output of all compute
  /// ops, except every second mm", parallelize_llama.py at 1ea476e9f).
  int64_t checkpoint(Block &body, Operation *loss, ArrayRef<Operation *> ops,
                     StringRef how, StringRef unit) {
    llvm::SmallPtrSet<Operation *, 32> inRegion(ops.begin(), ops.end());
    // The outputs selective checkpointing keeps: the expensive ones.
    llvm::SmallPtrSet<Operation *, 16> saved;
    int64_t products = 0;
    for (Operation *op : how.empty() ? ArrayRef<Operation *>() : ops) {
      if (isa<AttentionOp>(op))
        saved.insert(op);
      else if (isa<MatmulOp, GemmOp>(op) &&
               (how != "ops-alt" || ++products % 2 == 1))
        saved.insert(op);
    }
    auto isBackward = [&](Operation *user) {
      Operation *op = body.findAncestorOpInBlock(*user);
      return op && loss->isBeforeInBlock(op);
    };
    // Values of the region the reverse pass reads and the forward does not
    // read after the region.
    SmallVector<Value> dropped;
    for (Operation *op : ops) {
      if (op == loss || !isMemoryEffectFree(op) || saved.contains(op))
        continue;
      for (Value r : op->getResults()) {
        bool backward = false, keptForward = false;
        for (Operation *user : r.getUsers()) {
          if (isBackward(user))
            backward = true;
          else if (!inRegion.contains(user))
            keptForward = true;
        }
        if (backward && !keptForward)
          dropped.push_back(r);
      }
    }
    if (dropped.empty())
      return 0;

    // The ops to clone: everything in the region that a dropped value
    // depends on, stopping at values the forward keeps anyway.
    llvm::SmallPtrSet<Operation *, 32> needed;
    SmallVector<Operation *> work;
    for (Value v : dropped)
      work.push_back(v.getDefiningOp());
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      if (!needed.insert(op).second)
        continue;
      for (Value operand : op->getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (!def)
          continue;
        if (isa<GetParameterOp, ConstantOp>(def)) {
          needed.insert(def);
          continue;
        }
        bool kept = llvm::any_of(operand.getUsers(), [&](Operation *u) {
          return !inRegion.contains(u) && !isBackward(u);
        });
        if (inRegion.contains(def) && !kept && !saved.contains(def))
          work.push_back(def);
      }
    }

    // Clone in program order right before the first reverse-pass use.
    Operation *first = nullptr;
    for (Value v : dropped)
      for (Operation *user : v.getUsers())
        if (isBackward(user)) {
          Operation *u = body.findAncestorOpInBlock(*user);
          if (!first || u->isBeforeInBlock(first))
            first = u;
        }
    OpBuilder b(first);
    IRMapping map;
    int64_t cloned = 0;
    for (Operation &op : body) {
      if (&op == first)
        break;
      if (!needed.contains(&op))
        continue;
      Operation *copy = b.clone(op, map);
      copy->removeAttr(kLossAttr);
      // For reports: which unit's forward this recomputes.
      copy->setAttr(kRecomputeAttr, b.getStringAttr(unit));
      ++cloned;
    }
    for (Value v : dropped)
      v.replaceUsesWithIf(map.lookup(v), [&](OpOperand &use) {
        return isBackward(use.getOwner()) &&
               use.getOwner() != map.lookup(v).getDefiningOp();
      });
    return cloned;
  }
};

} // namespace
