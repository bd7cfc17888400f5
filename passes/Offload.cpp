//===- Offload.cpp - Sharded state in host memory -------------------------===//
//
// Before (a unit offloaded with `optimizer`, bf16 gathers, updated after
// backward):
//   %s = fsdp.get_shard @h.0.flat : tensor<520xf32>
//   %c = fsdp.cast %s : tensor<520xf32> -> tensor<520xbf16>
//   %f = fsdp.all_gather_start %c ...
//   ...
//   %g = fsdp.wait %rs : ... tensor<520xf32>
//   fsdp.adamw @h.0.flat, %g scaled by %k ...
// After:
//   %c = fsdp.get_device_copy @h.0.flat : tensor<520xbf16>
//   %f = fsdp.all_gather_start %c ...
//   ...
//   %g = fsdp.wait %rs : ... tensor<520xf32>
//   %gf = fsdp.copy_start %g {to = "host"}   // moved up by fsdp-schedule
//   %gh = fsdp.wait %gf
//   fsdp.adamw @h.0.flat, %gh scaled by %kh {fsdp.on_host}
//   %m = fsdp.get_shard @h.0.flat               // the host's master shard
//   %mc = fsdp.cast %m {fsdp.on_host} : ... -> tensor<520xbf16>
//   %df = fsdp.copy_start %mc {to = "device", into = @h.0.flat}
//   fsdp.wait %df                               // the device copy, refreshed
// That is `offload-update = after-backward`. The default, `before-use`,
// moves the host's update to the next step, just before that step first
// reads the shard (deferUpdates below): the gradient shard and the scale
// wait in host buffers, and a fused AdamW writes the gather-dtype copy in
// the same pass (copied into the device copy, or for `all` kept in a host
// buffer every gather copies from).
// With `all` there is no device copy: each gather's shard is copied to the
// device right before it (fsdp-schedule prefetches the copy with the
// gather). FSDP2's CPUOffloadPolicy (`offload-shape = fsdp2`) copies the
// f32 shard and casts it on the device, and updates after backward.
//
//===----------------------------------------------------------------------===//
#include "dialect/AttrNames.h"
#include "passes/OffloadSpec.h"
#include "passes/Passes.h"
#include "passes/TrainStep.h"

#include "dialect/FsdpOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPOFFLOAD
#include "passes/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

struct FsdpOffload : fsdp::impl::FsdpOffloadBase<FsdpOffload> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (update != "before-use" && update != "after-backward") {
      module.emitError("--offload-update must be before-use or "
                       "after-backward, got '")
          << update << "'";
      return signalPassFailure();
    }
    if (shape != "fsdp" && shape != "fsdp2") {
      module.emitError("--offload-shape must be fsdp or fsdp2, got '")
          << shape << "'";
      return signalPassFailure();
    }
    // --offload=[GLOBAL][,UNIT=MODE[:FRACTION]...] (passes/OffloadSpec.h)
    llvm::StringSet<> units;
    for (auto unit : module.getOps<UnitOp>())
      units.insert(unit.getSymName());
    if (offload == "auto") {
      module.emitError("--offload=auto is chosen by --autotune (the least "
                       "offload under which a plan fits the budget); "
                       "without it give none, optimizer or all");
      return signalPassFailure();
    }
    OffloadSpec spec;
    std::string error;
    if (!parseOffloadSpec(offload, units, spec, error)) {
      module.emitError(error);
      return signalPassFailure();
    }
    if (!spec.any())
      return;
    Type paramType = Float32Type::get(&getContext());
    if (auto t = module->getAttrOfType<TypeAttr>(attrs::paramDtype))
      paramType = t.getValue();
    bool offloaded = false;
    for (auto flat : module.getOps<FlatParameterOp>()) {
      const OffloadChoice &choice = spec.of(flat.getUnit());
      StringRef mode = choice.mode;
      // A share of a unit: fsdp-shard split it; its marked part goes.
      if (mode == "none" || !flat.getTrainable() ||
          (choice.fraction < 1 && !flat->hasAttr(attrs::offloadPart)))
        continue;
      // FSDP2's CPUOffloadPolicy has no device copy: everything on the host.
      if (shape == "fsdp2")
        mode = "all";
      flat.setOffload(mode);
      if (mode == "optimizer")
        flat.setDeviceCopy(paramType);
      offloaded = true;
    }
    if (!offloaded) {
      module.emitError("--offload=")
          << offload
          << ": no sharded, trained state to offload (offload needs a "
             "sharded strategy: full-shard, shard-grad-op or hybrid-shard)";
      return signalPassFailure();
    }
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal() && func.getName() != "forward")
        if (failed(rewrite(func, paramType)))
          return signalPassFailure();
  }

  static FlatParameterOp flatOf(Operation *op, FlatSymbolRefAttr ref) {
    return SymbolTable::lookupNearestSymbolFrom<FlatParameterOp>(op, ref);
  }

  /// `v` copied to `to` ("host" or "device"), the copy and its wait
  /// inserted at `b`'s point.
  static Value copy(OpBuilder &b, Location loc, Value v, StringRef to,
                    FlatSymbolRefAttr into = {}) {
    auto start = CopyStartOp::create(
        b, loc,
        FutureType::get(b.getContext(), cast<RankedTensorType>(v.getType())), v,
        b.getStringAttr(to), into);
    return WaitOp::create(b, loc, start.getFuture()).getResult();
  }

  /// The host buffer `name` of `type`, declared once in the module.
  FlatSymbolRefAttr hostBuffer(StringRef name, Type type,
                               FlatSymbolRefAttr copyOf = {}) {
    ModuleOp module = getOperation();
    if (!module.lookupSymbol<HostBufferOp>(name)) {
      OpBuilder b(module.getBodyRegion());
      b.setInsertionPoint(&module.getBody()->back());
      // Beside the flat parameters (before the functions).
      for (auto f : module.getOps<func::FuncOp>()) {
        b.setInsertionPoint(f);
        break;
      }
      HostBufferOp::create(b, module.getLoc(), b.getStringAttr(name),
                           TypeAttr::get(type), copyOf);
    }
    return FlatSymbolRefAttr::get(&getContext(), name);
  }

  LogicalResult rewrite(func::FuncOp func, Type paramType) {
    Block &body = func.getBody().front();
    MLIRContext *ctx = &getContext();
    SmallVector<GetShardOp> shards;
    SmallVector<Operation *> updates;
    for (Operation &op : body) {
      if (auto s = dyn_cast<GetShardOp>(op)) {
        if (auto flat = flatOf(&op, s.getFlatAttr()); flat && flat.getOffload())
          shards.push_back(s);
      } else if (isa<AdamWOp, SgdOp>(op)) {
        auto ref = cast<FlatSymbolRefAttr>(op.getAttr("param"));
        if (auto flat = flatOf(&op, ref); flat && flat.getOffload())
          updates.push_back(&op);
      }
    }
    // The gathers' sources.
    for (GetShardOp s : shards) {
      FlatParameterOp flat = flatOf(s, s.getFlatAttr());
      OpBuilder b(s);
      b.setInsertionPointAfter(s);
      if (*flat.getOffload() == "optimizer") {
        auto type =
            RankedTensorType::get(flat.getShardType().getShape(), paramType);
        Value dc =
            GetDeviceCopyOp::create(b, s.getLoc(), type, s.getFlatAttr());
        for (OpOperand &use : llvm::make_early_inc_range(s->getUses())) {
          auto castOp = dyn_cast<CastOp>(use.getOwner());
          if (castOp && castOp.getType() == type) {
            castOp.getResult().replaceAllUsesWith(dc);
            castOp.erase();
          } else if (type == s.getType()) {
            use.set(dc);
          } else {
            return use.getOwner()->emitError("fsdp-offload: the shard of '")
                   << flat.getSymName()
                   << "' is read other than through its cast to the gather "
                      "dtype";
          }
        }
        s.erase();
        continue;
      }
      // "all": cast on the host (ours) or on the device (FSDP2), then one
      // copy to the device.
      Value v = s.getResult();
      if (shape == "fsdp" && s->hasOneUse())
        if (auto castOp = dyn_cast<CastOp>(*s->getUsers().begin())) {
          castOp->setAttr(attrs::onHost, UnitAttr::get(ctx));
          v = castOp.getResult();
          b.setInsertionPointAfter(castOp);
        }
      Value onDevice = copy(b, s.getLoc(), v, "device");
      v.replaceUsesWithIf(onDevice, [&](OpOperand &use) {
        return !isa<CopyStartOp>(use.getOwner());
      });
    }
    // The updates, on the host: before the next step's first use of their
    // shard (the step's one function, without FSDP2's shape), or here.
    bool deferred = update == "before-use" && shape == "fsdp" &&
                    func.getName() == "train_step" &&
                    !getOperation().lookupSymbol<func::FuncOp>("apply_update");
    if (deferred)
      return deferUpdates(func, updates, paramType);
    llvm::DenseMap<Value, Value> onHost; // a device value's host copy
    for (Operation *op : updates) {
      OpBuilder b(op);
      for (OpOperand &operand : op->getOpOperands()) {
        Value v = operand.get();
        Value &h = onHost[v];
        // fsdp-schedule starts the copy as soon as its input is computed
        // (a gradient as its reduce-scatter completes), so it overlaps the
        // rest of backward; its wait stays here.
        if (!h)
          h = copy(b, op->getLoc(), v, "host");
        operand.set(h);
      }
      op->setAttr(attrs::onHost, UnitAttr::get(ctx));
      auto ref = cast<FlatSymbolRefAttr>(op->getAttr("param"));
      FlatParameterOp flat = flatOf(op, ref);
      if (*flat.getOffload() != "optimizer")
        continue;
      b.setInsertionPointAfter(op);
      Value m = GetShardOp::create(b, op->getLoc(), flat.getShardType(), ref);
      if (paramType != flat.getShardType().getElementType()) {
        auto castOp = CastOp::create(
            b, op->getLoc(),
            RankedTensorType::get(flat.getShardType().getShape(), paramType),
            m);
        castOp->setAttr(attrs::onHost, UnitAttr::get(ctx));
        m = castOp.getResult();
      }
      // Into the device copy the next step's gathers read.
      copy(b, op->getLoc(), m, "device", ref);
    }
    return success();
  }

  /// Offloaded updates run before the next step's first use of their shard:
  /// this step's reduced gradient shard and clipping scale are copied into
  /// host buffers kept to the next step, whose first ops (fsdp-schedule
  /// moves each flat's to just before that flat is first read) update the
  /// shard on the host and, for `optimizer`, copy its gather-dtype cast into
  /// the device copy, which the step's gathers then read. The host update
  /// overlaps the next forward instead of waiting at the end of backward;
  /// the arithmetic is the same. Every op of such an update is marked
  /// `fsdp.deferred` with its flat: the runtime skips them in the first step
  /// after a start or a resume (no update is pending) and runs them alone
  /// before anything reads the state (a checkpoint, an export).
  LogicalResult deferUpdates(func::FuncOp func, ArrayRef<Operation *> updates,
                             Type paramType) {
    Block &body = func.getBody().front();
    MLIRContext *ctx = &getContext();
    UnitAttr mark = UnitAttr::get(ctx);
    // A device value's host buffer (each copied there once).
    llvm::DenseMap<Value, FlatSymbolRefAttr> stashed;
    // The blocks go first in the function, in the updates' order (the
    // insertion point is taken anew each time: the op it was before may
    // have been replaced).
    OpBuilder start(ctx);
    Operation *last = nullptr;
    for (Operation *op : updates) {
      if (last)
        start.setInsertionPointAfter(last);
      else
        start.setInsertionPointToStart(&body);
      auto ref = cast<FlatSymbolRefAttr>(op->getAttr("param"));
      FlatParameterOp flat = flatOf(op, ref);
      OpBuilder end(op);
      SmallVector<Value> operands;
      for (auto [i, v] : llvm::enumerate(op->getOperands())) {
        FlatSymbolRefAttr &buffer = stashed[v];
        if (!buffer) {
          // The gradient shard into the flat's buffer, the scale into one
          // shared by every update.
          std::string name = i == 0 ? (flat.getSymName() + ".grad").str()
                                    : std::string("offload.grad_scale");
          buffer = hostBuffer(name, v.getType());
          copy(end, op->getLoc(), v, "host", buffer);
        }
        // Each block reads its own (blocks move apart).
        auto read =
            GetHostBufferOp::create(start, op->getLoc(), v.getType(), buffer);
        read->setAttr(attrs::deferred, ref);
        operands.push_back(read.getResult());
      }
      auto copyType =
          RankedTensorType::get(flat.getShardType().getShape(), paramType);
      bool all = *flat.getOffload() == "all";
      Operation *moved;
      Value fused; // AdamW's gather-dtype copy, written in the same pass
      if (auto adam = dyn_cast<AdamWOp>(op)) {
        // `all`: into a host buffer the step's gathers copy from (filled
        // from the shard where no update ran); `optimizer`: a step buffer
        // copied into the device copy.
        FlatSymbolRefAttr into =
            all ? hostBuffer((flat.getSymName() + ".gather").str(), copyType,
                             ref)
                : FlatSymbolRefAttr();
        auto fusedOp = AdamWOp::create(
            start, op->getLoc(), copyType, ref, operands[0],
            operands.size() > 1 ? operands[1] : Value(), adam.getLrAttr(),
            adam.getBeta1Attr(), adam.getBeta2Attr(), adam.getEpsAttr(),
            adam.getWeightDecayAttr(), into);
        moved = fusedOp;
        fused = fusedOp.getCopy();
      } else {
        moved = start.clone(*op);
        moved->setOperands(operands);
      }
      moved->setAttr(attrs::onHost, mark);
      moved->setAttr(attrs::deferred, ref);
      op->erase();
      last = moved;
      if (all) {
        // The gathers copy the fused copy to the device instead of casting
        // the shard on the host each time.
        if (fused)
          for (auto c : llvm::to_vector(body.getOps<CopyStartOp>())) {
            if (c.getTo() != "device" || c->hasAttr(attrs::deferred))
              continue;
            Value in = c.getInput();
            Operation *castOp = in.getDefiningOp<CastOp>();
            auto shard = (castOp ? castOp->getOperand(0) : in)
                             .getDefiningOp<GetShardOp>();
            if (!shard || shard.getFlatAttr() != ref ||
                in.getType() != copyType)
              continue;
            c.getInputMutable().assign(fused);
            if (castOp && castOp->use_empty())
              castOp->erase();
            if (shard->use_empty())
              shard->erase();
          }
        continue;
      }
      // The device copy: the fused copy (or the shard cast on the host),
      // copied into it.
      Value m = fused;
      if (!m) {
        m = GetShardOp::create(start, moved->getLoc(), flat.getShardType(),
                               ref);
        m.getDefiningOp()->setAttr(attrs::deferred, ref);
        if (copyType != m.getType()) {
          auto castOp = CastOp::create(start, moved->getLoc(), copyType, m);
          castOp->setAttr(attrs::onHost, mark);
          castOp->setAttr(attrs::deferred, ref);
          m = castOp.getResult();
        }
      }
      Value dc = copy(start, moved->getLoc(), m, "device", ref);
      dc.getDefiningOp()->setAttr(attrs::deferred, ref);
      last = dc.getDefiningOp();
      cast<WaitOp>(dc.getDefiningOp())
          .getFuture()
          .getDefiningOp()
          ->setAttr(attrs::deferred, ref);
      // The gathers read it (the device copy's storage, refreshed or, in a
      // step with no update pending, as it was).
      for (auto read : llvm::to_vector(body.getOps<GetDeviceCopyOp>()))
        if (read.getFlatAttr() == ref) {
          read.getResult().replaceAllUsesWith(dc);
          read.erase();
        }
    }
    return success();
  }
};

} // namespace
