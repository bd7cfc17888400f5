//===- VerifyPlan.cpp - Checks a sharded, scheduled, planned step ---------===//
//
// The last line of defence before a plan runs on many ranks, where a
// mistake is a hang or silent corruption rather than an error. Checks every
// function of the module:
//   - no parameter that lives in a flat buffer is read whole (a use before
//     its gather);
//   - every fsdp.param_view reads a gathered flat buffer, inside the
//     parameters' part of it, with the flat parameter's group and types;
//   - collectives match the module's world size and their flat buffers;
//   - nothing reads a gathered buffer, or a view of it, after its free;
//   - no collective is left in flight at the end of a function;
//   - offload: host memory is read only by host ops and device memory only
//     by device ops (a copy in between), and an offloaded shard is never
//     updated while a copy still reads it;
//   - planned arena offsets never overlap while both tensors are live.
//
//===----------------------------------------------------------------------===//
#include "dialect/AttrNames.h"
#include "passes/Passes.h"
#include "passes/TrainStep.h"

#include "dialect/FsdpOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <map>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPVERIFYPLAN
#include "passes/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// The flat parameter whose shard a gather sends: a get_shard, possibly
/// cast to the mixed-precision dtype first, or with offload the shard's
/// device copy, or the shard copied from the host (cast before the copy or
/// after it).
FlatSymbolRefAttr shardRead(Value v) {
  for (int hops = 0; hops < 4; ++hops) {
    if (auto cast = v.getDefiningOp<CastOp>()) {
      v = cast.getX();
      continue;
    }
    if (auto wait = v.getDefiningOp<WaitOp>())
      if (auto copy = wait.getFuture().getDefiningOp<CopyStartOp>()) {
        v = copy.getInput();
        continue;
      }
    break;
  }
  if (auto s = v.getDefiningOp<GetShardOp>())
    return s.getFlatAttr();
  if (auto d = v.getDefiningOp<GetDeviceCopyOp>())
    return d.getFlatAttr();
  if (auto adam = v.getDefiningOp<AdamWOp>()) // its fused copy
    return adam.getParamAttr();
  return nullptr;
}

/// The flat parameter whose shard an op writes (an update), or null.
FlatSymbolRefAttr writtenFlat(Operation *op) {
  if (isa<AdamWOp, SgdOp>(op))
    return cast<FlatSymbolRefAttr>(op->getAttr("param"));
  return nullptr;
}

/// The flat parameter a gathered buffer holds: gathered from its shard,
/// or (partial resharding) from the part of an earlier gather kept by
/// fsdp.reshard.
FlatSymbolRefAttr gatheredShard(Value buffer) {
  auto wait = buffer.getDefiningOp<WaitOp>();
  auto gather =
      wait ? wait.getFuture().getDefiningOp<AllGatherStartOp>() : nullptr;
  if (!gather)
    return nullptr;
  if (auto keep = gather.getInput().getDefiningOp<ReshardOp>())
    return gatheredShard(keep.getInput());
  return shardRead(gather.getInput());
}

/// Values that share `v`'s storage and are derived from it (views,
/// reshapes, waits), `v` included.
void aliases(Value v, SmallVectorImpl<Value> &out) {
  out.push_back(v);
  for (Operation *user : v.getUsers())
    if (isa<ParamViewOp, ReshapeOp, WaitOp>(user))
      aliases(user->getResult(0), out);
}

struct FsdpVerifyPlan : fsdp::impl::FsdpVerifyPlanBase<FsdpVerifyPlan> {
  int64_t replicas = 1;

  /// The ranks a collective's group has: the world, a shard group of
  /// world / replicas, or a replica group.
  int64_t groupRanks(Operation *op, int64_t world) {
    auto group = op->getAttrOfType<StringAttr>("group");
    if (group && group.getValue() == "shard")
      return world / replicas;
    if (group && group.getValue() == "replicate")
      return replicas;
    return world;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    int64_t world = 1;
    if (auto w =
            module->getAttrOfType<IntegerAttr>(mlir::fsdp::attrs::worldSize))
      world = w.getInt();
    if (auto r = module->getAttrOfType<IntegerAttr>(
            mlir::fsdp::attrs::replicateGroups))
      replicas = std::max<int64_t>(r.getInt(), 1);
    llvm::StringMap<FlatParameterOp> flatOf; // parameter -> its flat buffer
    for (auto flat : module.getOps<FlatParameterOp>())
      for (Attribute a : flat.getParams())
        flatOf[cast<FlatSymbolRefAttr>(a).getValue()] = flat;

    bool ok = true;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.getName() == "forward" || func.isExternal())
        continue;
      ok &= succeeded(verifyFunction(module, func, world, flatOf));
    }
    if (!ok)
      signalPassFailure();
  }

  LogicalResult verifyFunction(ModuleOp module, func::FuncOp func,
                               int64_t world,
                               llvm::StringMap<FlatParameterOp> &flatOf) {
    Block &body = func.getBody().front();
    SymbolTable symbols(module);
    auto at = positions(body);
    bool ok = true;
    auto fail = [&](Operation *op) {
      ok = false;
      return op->emitError();
    };

    for (Operation &op : body) {
      verifyResidency(op, at, fail);
      if (auto read = dyn_cast<GetParameterOp>(op)) {
        auto it = flatOf.find(read.getParam());
        if (it != flatOf.end())
          fail(&op) << "reads parameter '" << read.getParam()
                    << "' whole, but it lives sharded in '"
                    << it->second.getSymName()
                    << "': it must be gathered first";
        continue;
      }
      if (auto gather = dyn_cast<AllGatherStartOp>(op)) {
        if (auto keep = gather.getInput().getDefiningOp<ReshardOp>()) {
          auto group = gather->getAttrOfType<StringAttr>("group");
          if (!group || group.getValue() != "block" ||
              gather.getGroupSizeAttr().getInt() !=
                  keep.getGroupSizeAttr().getInt() ||
              !gatheredShard(keep.getInput()))
            fail(&op) << "gathers what fsdp.reshard kept from a gathered "
                         "buffer, but not over its block of "
                      << keep.getGroupSizeAttr().getInt() << " ranks";
          continue;
        }
        auto shard = shardRead(gather.getInput());
        if (!shard) {
          if (!module.getOps<FlatParameterOp>().empty())
            fail(&op) << "gathers a value that is not a flat parameter shard";
          continue;
        }
        auto flat = symbols.lookup<FlatParameterOp>(shard.getValue());
        if (gather.getGroupSizeAttr().getInt() !=
                flat.getGroupSizeAttr().getInt() ||
            flat.getGroupSizeAttr().getInt() != groupRanks(&op, world))
          fail(&op) << "gathers '" << flat.getSymName() << "' over "
                    << gather.getGroupSizeAttr().getInt()
                    << " ranks; it is sharded over "
                    << flat.getGroupSizeAttr().getInt() << " and its group has "
                    << groupRanks(&op, world);
        continue;
      }
      if (auto view = dyn_cast<ParamViewOp>(op)) {
        auto shard = gatheredShard(view.getInput());
        if (!shard) {
          fail(&op) << "views a buffer that is not a gathered flat parameter";
          continue;
        }
        auto flat = symbols.lookup<FlatParameterOp>(shard.getValue());
        int64_t begin = view.getOffsetAttr().getInt(),
                end = begin + view.getType().getNumElements();
        bool matches = false;
        for (auto [a, offset] :
             llvm::zip(flat.getParams(), flat.getOffsets())) {
          auto param = symbols.lookup<ParameterOp>(
              cast<FlatSymbolRefAttr>(a).getValue());
          // The view may be in the gathered (mixed-precision) dtype.
          matches |= offset == begin && param.getTensorType().getShape() ==
                                            view.getType().getShape();
        }
        if (!matches)
          fail(&op) << "views elements [" << begin << ", " << end << ") of '"
                    << flat.getSymName() << "' as " << view.getType()
                    << ", which is no parameter of it";
        continue;
      }
      if (auto rs = dyn_cast<ReduceScatterStartOp>(op)) {
        if (rs.getGroupSizeAttr().getInt() != groupRanks(&op, world))
          fail(&op) << "reduce-scatters over " << rs.getGroupSizeAttr().getInt()
                    << " ranks but its group has " << groupRanks(&op, world);
        continue;
      }
      if (auto ar = dyn_cast<AllReduceOp>(op)) {
        if (ar.getGroupSizeAttr().getInt() != groupRanks(&op, world))
          fail(&op) << "all-reduces over " << ar.getGroupSizeAttr().getInt()
                    << " ranks but its group has " << groupRanks(&op, world);
        continue;
      }
      if (auto free = dyn_cast<FreeOp>(op)) {
        SmallVector<Value> derived;
        aliases(free.getValue(), derived);
        for (Value v : derived)
          for (Operation *user : v.getUsers()) {
            Operation *inBlock = body.findAncestorOpInBlock(*user);
            if (inBlock && inBlock != &op && !isa<FreeOp>(inBlock) &&
                at.lookup(inBlock) > at.lookup(&op)) {
              fail(inBlock) << "reads a buffer after it is freed";
              op.emitRemark("freed here");
            }
          }
      }
    }
    if (failed(verifyArena(func, body, at)))
      ok = false;
    return success(ok);
  }

  /// Offload: host memory is read on the host and device memory on the
  /// device, a copy goes from one to the other, and no stored state is
  /// written while a copy still reads it.
  template <typename Fail>
  void verifyResidency(Operation &op, llvm::DenseMap<Operation *, int64_t> &at,
                       Fail &fail) {
    if (isa<WaitOp, FreeOp, ReshapeOp, ParamViewOp, func::ReturnOp>(op))
      return;
    if (auto copy = dyn_cast<CopyStartOp>(op)) {
      bool toDevice = copy.getTo() == "device";
      if (isHostValue(copy.getInput()) != toDevice)
        fail(&op) << "copies to the " << copy.getTo() << " a value already in "
                  << (toDevice ? "device" : "host") << " memory";
      WaitOp wait = waitOf(&op);
      FlatSymbolRefAttr source = shardRead(copy.getInput());
      if (!wait || !source)
        return;
      for (Operation *x = op.getNextNode(); x && x != wait;
           x = x->getNextNode())
        if (writtenFlat(x) == source) {
          fail(x) << "writes '" << source.getValue()
                  << "' while a copy of it is still reading it";
          op.emitRemark("the copy starts here");
        }
      return;
    }
    bool host = op.hasAttr(attrs::onHost);
    for (Value v : op.getOperands())
      if (isa<RankedTensorType>(v.getType()) && isHostValue(v) != host) {
        if (host)
          fail(&op) << "runs on the host but reads device memory: it needs "
                       "an fsdp.copy_start to the host first";
        else
          fail(&op) << "reads host memory on the device: it needs an "
                       "fsdp.copy_start to the device first";
        return;
      }
    if (auto flat = writtenFlat(&op)) {
      auto f = SymbolTable::lookupNearestSymbolFrom<FlatParameterOp>(&op, flat);
      if (f && isa<AdamWOp, SgdOp>(op) && bool(f.getOffload()) != host)
        fail(&op) << "updates '" << flat.getValue() << "' on the "
                  << (host ? "host" : "device") << ", but its state is in "
                  << (f.getOffload() ? "host" : "device") << " memory";
    }
  }

  /// Live tensors planned into the arena never overlap.
  LogicalResult verifyArena(func::FuncOp func, Block &body,
                            llvm::DenseMap<Operation *, int64_t> &at) {
    // Storage values (not aliases) with their offset and live range.
    struct Interval {
      int64_t offset, bytes, begin, end;
      Operation *op;
      bool host = false; // offload: in the host arena
    };
    SmallVector<Interval> intervals;
    int64_t n = (int64_t)at.size();
    auto lastUse = [&](Value v) {
      SmallVector<Value> derived;
      aliases(v, derived);
      int64_t last = -1;
      for (Value d : derived)
        for (Operation *user : d.getUsers()) {
          Operation *inBlock = body.findAncestorOpInBlock(*user);
          int64_t u = isa<func::ReturnOp>(inBlock) ? n : at.lookup(inBlock);
          // A collective reads its input until its wait.
          if (WaitOp wait = waitOf(inBlock))
            u = std::max(u, at.lookup(wait));
          last = std::max(last, u);
        }
      return last;
    };
    for (Operation &op : body) {
      auto offsets =
          op.getAttrOfType<DenseI64ArrayAttr>(mlir::fsdp::attrs::offsets);
      if (!offsets || isa<ParamViewOp, ReshapeOp, WaitOp>(op))
        continue;
      for (auto [r, off] : llvm::zip(op.getResults(), offsets.asArrayRef()))
        if (off >= 0)
          intervals.push_back({off, bufferBytes(r.getType()), at.lookup(&op),
                               std::max(lastUse(r), at.lookup(&op)), &op,
                               isHostValue(r)});
    }
    for (BlockArgument arg : body.getArguments())
      if (auto off = func.getArgAttrOfType<IntegerAttr>(
              arg.getArgNumber(), mlir::fsdp::attrs::offset))
        intervals.push_back({off.getInt(), bufferBytes(arg.getType()), -1,
                             lastUse(arg), nullptr});
    // Sweep in program order; a live map keyed by offset finds neighbours.
    // The device arena and the host arena are swept apart.
    llvm::sort(intervals, [](const Interval &a, const Interval &b) {
      return a.begin < b.begin;
    });
    for (bool host : {false, true}) {
      std::multimap<int64_t, const Interval *> byEnd; // end -> interval
      std::map<int64_t, const Interval *> live;       // offset -> interval
      for (const Interval &iv : intervals) {
        if (iv.host != host)
          continue;
        // Release everything whose last use is before this definition.
        while (!byEnd.empty() && byEnd.begin()->first < iv.begin) {
          live.erase(byEnd.begin()->second->offset);
          byEnd.erase(byEnd.begin());
        }
        auto next = live.lower_bound(iv.offset);
        const Interval *clash = nullptr;
        if (next != live.end() && next->first < iv.offset + iv.bytes)
          clash = next->second;
        if (!clash && next != live.begin()) {
          auto prev = std::prev(next);
          if (prev->first + prev->second->bytes > iv.offset)
            clash = prev->second;
        }
        if (clash) {
          Operation *where = iv.op ? iv.op : func.getOperation();
          where->emitError("arena bytes [")
              << iv.offset << ", " << iv.offset + iv.bytes
              << ") overlap a tensor still live at [" << clash->offset << ", "
              << clash->offset + clash->bytes << ")";
          return failure();
        }
        live[iv.offset] = &iv;
        byEnd.emplace(iv.end, &iv);
      }
    }
    return success();
  }
};

} // namespace
