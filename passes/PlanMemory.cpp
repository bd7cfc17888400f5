//===- PlanMemory.cpp - Static liveness and arena offsets -----------------===//
//
// Before:  %a = fsdp.matmul ...   %b = fsdp.relu %a   ...
// After:   %a = fsdp.matmul ... {fsdp.offsets = array<i64: 0>}
//          %b = fsdp.relu %a {fsdp.offsets = array<i64: 4096>}
//          module attributes {fsdp.arena_bytes = 8192 : i64}
// Offsets of -1 mark values that live outside the arena (parameters,
// constants). Reshape results take their operand's offset.
//
//===----------------------------------------------------------------------===//
#include "dialect/AttrNames.h"
#include "memory/ArenaPacking.h"
#include "passes/Passes.h"
#include "passes/TrainStep.h"

#include "common/MemoryCategories.h"
#include "dialect/FsdpOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPPLANMEMORY
#include "passes/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

constexpr int64_t kAlign = 64;

/// The value `v` is a view of (itself when it has storage of its own), and
/// the byte offset of the view in it: reshapes alias their source, a wait's
/// result is the buffer its collective wrote, and a parameter view is a
/// slice of its gathered flat buffer.
Value aliasOf(Value v, int64_t *delta = nullptr) {
  if (auto r = v.getDefiningOp<ReshapeOp>())
    return r.getX();
  if (auto w = v.getDefiningOp<WaitOp>())
    return w.getFuture();
  if (auto view = v.getDefiningOp<ParamViewOp>()) {
    if (delta)
      *delta = view.getOffsetAttr().getInt() *
               (bufferBytes(view.getType()) /
                std::max<int64_t>(view.getType().getNumElements(), 1));
    return view.getInput();
  }
  return v;
}

Value storageOf(Value v) {
  for (Value a = aliasOf(v); a != v; a = aliasOf(v))
    v = a;
  return v;
}

bool inArena(Value v) {
  Operation *def = v.getDefiningOp();
  return !def || !(isa<GetParameterOp, GetShardOp, ConstantOp, ReadGradOp,
                       GetDeviceCopyOp, GetHostBufferOp>(def) ||
                   copiesIntoStorage(def));
}

struct FsdpPlanMemory : mlir::fsdp::impl::FsdpPlanMemoryBase<FsdpPlanMemory> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>(function);
    if (!func) {
      module.emitError("no func.func @") << function << " to plan";
      return signalPassFailure();
    }
    // With gradient accumulation the update is a second function; the two
    // run one after the other and share the arena.
    livePeak = 0;
    hostPeak = 0;
    int64_t peak = plan(func);
    if (auto update = module.lookupSymbol<func::FuncOp>("apply_update"))
      peak = std::max(peak, plan(update));
    auto i64 = IntegerType::get(&getContext(), 64);
    module->setAttr(mlir::fsdp::attrs::arenaBytes, IntegerAttr::get(i64, peak));
    if (hostPeak > 0)
      module->setAttr(mlir::fsdp::attrs::hostArenaBytes,
                      IntegerAttr::get(i64, hostPeak));
    else
      module->removeAttr(mlir::fsdp::attrs::hostArenaBytes);
    // The packing's lower bound: the most bytes live at one instruction.
    module->setAttr(mlir::fsdp::attrs::livePeakBytes,
                    IntegerAttr::get(i64, livePeak));
  }

  int64_t livePeak = 0;
  /// Offload: the host arena (host values have offsets into it).
  int64_t hostPeak = 0;

  /// Plans one function; returns its peak arena bytes.
  int64_t plan(func::FuncOp func) {
    Block &body = func.getBody().front();

    // Program order and the last use of every storage value.
    llvm::DenseMap<Operation *, int64_t> index;
    int64_t n = 0;
    for (Operation &op : body)
      index[&op] = n++;
    llvm::DenseMap<Value, int64_t> lastUse;
    auto noteUses = [&](Value storage, Value v) {
      for (Operation *user : v.getUsers()) {
        int64_t at = isa<func::ReturnOp>(user) ? n : index.lookup(user);
        if (WaitOp wait = waitOf(user))
          at = std::max(at, index.lookup(wait));
        int64_t &slot = lastUse[storage];
        slot = std::max(slot, at);
      }
    };
    for (BlockArgument arg : body.getArguments())
      noteUses(arg, arg);
    for (Operation &op : body)
      for (Value r : op.getResults())
        noteUses(storageOf(r), r);

    // Every buffer with storage of its own, and its lifetime: inputs from
    // before the first op, results from their op through their last use
    // (a result nobody reads, just its op). An op's outputs never overlap
    // its inputs: both are live at that op.
    std::vector<Value> values;
    std::vector<Lifetime> lifetimes;
    std::vector<::fsdp::MemoryCategory> categories;
    Operation *loss = lossOp(func);
    int64_t lossAt = loss ? index.lookup(loss) : -1;
    llvm::DenseSet<Value> gradients = gradientStorage(body);
    auto add = [&](Value v, int64_t first) {
      values.push_back(v);
      lifetimes.push_back({bufferBytes(v.getType()), first,
                           std::max(lastUse.lookup(v), first)});
      categories.push_back(category(v, gradients, lossAt, lifetimes.back()));
    };
    for (BlockArgument arg : body.getArguments())
      add(arg, -1);
    // Offload's host values (copies to the host, host ops' results) are
    // packed into a host arena of their own.
    std::vector<Value> hostValues;
    std::vector<Lifetime> hostLifetimes;
    for (Operation &op : body)
      for (Value r : op.getResults())
        if (storageOf(r) == r && inArena(r)) {
          if (!isHostValue(r)) {
            add(r, index[&op]);
            continue;
          }
          int64_t first = index[&op];
          hostValues.push_back(r);
          hostLifetimes.push_back({bufferBytes(r.getType()), first,
                                   std::max(lastUse.lookup(r), first)});
        }
    Packing packing =
        estimate ? liveOnly(lifetimes, kAlign) : packArena(lifetimes, kAlign);
    Packing hostPacking = estimate ? liveOnly(hostLifetimes, kAlign)
                                   : packArena(hostLifetimes, kAlign);
    hostPeak = std::max(hostPeak, hostPacking.arenaBytes);
    // The host arena in use after each op (offload), for the timeline.
    if (!hostLifetimes.empty()) {
      std::vector<int64_t> delta(n + 2, 0);
      for (const Lifetime &l : hostLifetimes) {
        int64_t bytes = (l.bytes + kAlign - 1) / kAlign * kAlign;
        delta[l.first + 1] += bytes;
        delta[l.last + 1] -= bytes;
      }
      SmallVector<int64_t> held(n, 0);
      int64_t h = delta[0];
      for (int64_t i = 0; i < n; ++i)
        held[i] = h += delta[i + 1];
      func->setAttr(mlir::fsdp::attrs::hostLiveBytes,
                    DenseI64ArrayAttr::get(&getContext(), held));
    }
    if (!estimate) {
      llvm::DenseMap<Value, int64_t> offset;
      for (auto [v, at] : llvm::zip(values, packing.offsets))
        offset[v] = at;
      for (auto [v, at] : llvm::zip(hostValues, hostPacking.offsets))
        offset[v] = at;
      assignOffsets(func, body, offset);
    }
    timeline(func, n, lifetimes, categories);
    livePeak = std::max(livePeak, packing.liveBytes);
    return packing.arenaBytes;
  }

  /// Writes the packings' offsets (`offset`: each storage value's, in the
  /// device arena or, for host values, the host arena) onto the function's
  /// values.
  void assignOffsets(func::FuncOp func, Block &body,
                     llvm::DenseMap<Value, int64_t> &offset) {
    for (BlockArgument arg : body.getArguments())
      func.setArgAttr(
          arg.getArgNumber(), mlir::fsdp::attrs::offset,
          IntegerAttr::get(IntegerType::get(&getContext(), 64), offset[arg]));
    for (Operation &op : body) {
      SmallVector<int64_t> offsets;
      for (Value r : op.getResults()) {
        Value storage = storageOf(r);
        if (!inArena(storage)) {
          offsets.push_back(-1);
          continue;
        }
        if (storage != r) {
          int64_t delta = 0;
          Value of = aliasOf(r, &delta);
          offset[r] = offset.lookup(of) + delta;
        }
        offsets.push_back(offset[r]);
      }
      if (!offsets.empty())
        op.setAttr(mlir::fsdp::attrs::offsets,
                   DenseI64ArrayAttr::get(&getContext(), offsets));
    }
  }

  /// Storage the gradients live in: what reduce-scatters, all-reduces,
  /// packs into a flat gradient, accumulates or applies read or write.
  static llvm::DenseSet<Value> gradientStorage(Block &body) {
    llvm::DenseSet<Value> out;
    for (Operation &op : body) {
      if (!isa<ReduceScatterStartOp, AllReduceOp, PackOp, AccumulateGradOp,
               AdamWOp, SgdOp>(op))
        continue;
      for (Value v : op.getOperands())
        out.insert(storageOf(v));
      if (!isa<AdamWOp, SgdOp>(op))
        for (Value v : op.getResults())
          out.insert(storageOf(v));
    }
    return out;
  }

  /// What the buffer `v` holds.
  static ::fsdp::MemoryCategory category(Value v,
                                         const llvm::DenseSet<Value> &gradients,
                                         int64_t lossAt, const Lifetime &life) {
    using ::fsdp::MemoryCategory;
    Operation *def = v.getDefiningOp();
    if (!def)
      return MemoryCategory::Inputs;
    if (isa<AllGatherStartOp>(def))
      return MemoryCategory::Gathered;
    if (gradients.contains(v))
      return MemoryCategory::Gradients;
    if (def->hasAttr(kRecomputeAttr))
      return MemoryCategory::Recomputed;
    if (lossAt >= 0 && life.first <= lossAt)
      return life.last > lossAt ? MemoryCategory::Saved
                                : MemoryCategory::ForwardTemp;
    return MemoryCategory::BackwardTemp;
  }

  /// The memory timeline the simulator and fsdp-inspect draw: bytes held
  /// after each op (its dead inputs and unread outputs released), in all
  /// and by what the buffers hold (common/MemoryCategories.h).
  void timeline(func::FuncOp func, int64_t n,
                const std::vector<Lifetime> &lifetimes,
                const std::vector<::fsdp::MemoryCategory> &categories) {
    using ::fsdp::kMemoryCategories;
    constexpr size_t kinds = ::fsdp::kMemoryCategoryCount;
    std::vector<std::vector<int64_t>> delta(kinds,
                                            std::vector<int64_t>(n + 2, 0));
    for (auto [l, c] : llvm::zip(lifetimes, categories)) {
      int64_t bytes = (l.bytes + kAlign - 1) / kAlign * kAlign;
      delta[(size_t)c][l.first + 1] += bytes;
      delta[(size_t)c][l.last + 1] -= bytes;
    }
    SmallVector<int64_t> live(n, 0);
    SmallVector<NamedAttribute> byCategory;
    for (size_t c = 0; c < kinds; ++c) {
      SmallVector<int64_t> held(n, 0);
      int64_t h = delta[c][0];
      bool any = h != 0;
      for (int64_t i = 0; i < n; ++i) {
        h += delta[c][i + 1];
        held[i] = h;
        live[i] += h;
        any |= h != 0;
      }
      if (any)
        byCategory.push_back(
            NamedAttribute(StringAttr::get(&getContext(), kMemoryCategories[c]),
                           DenseI64ArrayAttr::get(&getContext(), held)));
    }
    func->setAttr(mlir::fsdp::attrs::liveBytes,
                  DenseI64ArrayAttr::get(&getContext(), live));
    func->setAttr(mlir::fsdp::attrs::liveBytesByCategory,
                  DictionaryAttr::get(&getContext(), byCategory));
  }
};

} // namespace
