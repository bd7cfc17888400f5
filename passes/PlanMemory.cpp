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
#include "passes/Passes.h"
#include "passes/TrainStep.h"

#include "dialect/FsdpOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <map>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPPLANMEMORY
#include "passes/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

constexpr int64_t kAlign = 64;

int64_t align(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

/// First-fit allocator over [0, inf) that tracks its high-water mark.
class Arena {
public:
  int64_t allocate(int64_t bytes) {
    bytes = align(bytes);
    for (auto it = free.begin(); it != free.end(); ++it) {
      if (it->second < bytes)
        continue;
      int64_t offset = it->first, size = it->second;
      free.erase(it);
      used += bytes;
      if (size > bytes)
        free[offset + bytes] = size - bytes;
      return offset;
    }
    // Grow: reuse a free block that ends at the top.
    int64_t offset = top;
    if (!free.empty()) {
      auto last = std::prev(free.end());
      if (last->first + last->second == top) {
        offset = last->first;
        free.erase(last);
      }
    }
    top = offset + bytes;
    peak = std::max(peak, top);
    used += bytes;
    return offset;
  }
  void release(int64_t offset, int64_t bytes) {
    bytes = align(bytes);
    used -= bytes;
    auto [it, inserted] = free.emplace(offset, bytes);
    assert(inserted && "double release");
    // Coalesce with neighbours.
    auto next = std::next(it);
    if (next != free.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free.erase(next);
    }
    if (it != free.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free.erase(it);
      }
    }
  }
  int64_t peakBytes() const { return peak; }
  int64_t usedBytes() const { return used; }

private:
  std::map<int64_t, int64_t> free; // offset -> size
  int64_t top = 0, peak = 0, used = 0;
};

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
  return !def || !isa<GetParameterOp, GetShardOp, ConstantOp, ReadGradOp>(def);
}

struct FsdpPlanMemory : fsdp::impl::FsdpPlanMemoryBase<FsdpPlanMemory> {
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
    int64_t peak = plan(func);
    if (auto update = module.lookupSymbol<func::FuncOp>("apply_update"))
      peak = std::max(peak, plan(update));
    module->setAttr(
        "fsdp.arena_bytes",
        IntegerAttr::get(IntegerType::get(&getContext(), 64), peak));
  }

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

    Arena arena;
    llvm::DenseMap<Value, int64_t> offset;
    // Inputs are written before the step starts.
    for (BlockArgument arg : body.getArguments()) {
      offset[arg] = arena.allocate(bufferBytes(arg.getType()));
      func.setArgAttr(
          arg.getArgNumber(), "fsdp.offset",
          IntegerAttr::get(IntegerType::get(&getContext(), 64), offset[arg]));
    }
    std::map<int64_t, SmallVector<Value>> releaseAt;
    for (BlockArgument arg : body.getArguments())
      releaseAt[lastUse.lookup(arg)].push_back(arg);

    SmallVector<int64_t> live; // bytes allocated after each op
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
          offsets.push_back(offset[r]);
          continue;
        }
        offset[r] = arena.allocate(bufferBytes(r.getType()));
        offsets.push_back(offset[r]);
        // A result nobody reads is released right after its op.
        releaseAt[std::max(lastUse.lookup(r), index[&op])].push_back(r);
      }
      if (!offsets.empty())
        op.setAttr("fsdp.offsets",
                   DenseI64ArrayAttr::get(&getContext(), offsets));
      // Release what this op was the last user of (after its outputs are
      // placed, so an output never overlaps one of its inputs).
      auto it = releaseAt.find(index[&op]);
      if (it != releaseAt.end()) {
        for (Value v : it->second)
          arena.release(offset[v], bufferBytes(v.getType()));
        releaseAt.erase(it);
      }
      live.push_back(arena.usedBytes());
    }
    // The memory timeline the simulator and fsdp-inspect draw.
    func->setAttr("fsdp.live_bytes",
                  DenseI64ArrayAttr::get(&getContext(), live));
    return arena.peakBytes();
  }
};

} // namespace
