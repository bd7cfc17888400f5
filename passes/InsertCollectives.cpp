//===- InsertCollectives.cpp - Collectives for data parallelism -----------===//
//
// The strategy and world size come from the module (fsdp-shard records them).
//
// no-shard (DDP), before:          after:
//   fsdp.adamw @w, %g {...}          %f = fsdp.all_reduce %g {group_size = 4,
//                                                             reduction =
//                                                             "avg"}
//                                    %a = fsdp.wait %f
//                                    fsdp.adamw @w, %a {...}
//
// full-shard / shard-grad-op, for every flat parameter @u.flat:
//   %s = fsdp.get_shard @u.flat              // before the unit's first use
//   %f = fsdp.all_gather_start %s {group_size = 4, unit = @u}
//   %full = fsdp.wait %f
//   %w = fsdp.param_view %full {offset = 0}  // replaces get_parameter @w
//   ... forward uses of %w ...
//   fsdp.free %full                          // reshard_after_forward
//   ... gathered again before the unit's first backward use, freed after ...
//   %g = fsdp.pack %gw, %gb {offsets = ...}  // after the last gradient
//                                            // (bf16 ones converted)
//   %r = fsdp.reduce_scatter_start %g {group_size = 4, reduction = "avg"}
//   %gs = fsdp.wait %r
//   fsdp.adamw @u.flat, %gs {...}            // the optimizer on the shard
//
// Averaging over ranks happens inside the collectives (`avg`: the runtime
// sums, then divides by the group size). The gradient norm is the square
// root of the all-reduced (sum) squared norms of the gradient shards, i.e.
// the norm of the globally averaged gradient, as torch's clip_grad_norm_ on
// FSDP computes it. The logged loss is averaged over ranks in every strategy.
// Collectives are placed right where they are needed (start and wait
// adjacent); fsdp-schedule moves them apart for overlap.
//
//===----------------------------------------------------------------------===//
#include "dialect/AttrNames.h"
#include "autodiff/Autodiff.h"
#include "passes/Passes.h"
#include "passes/TrainStep.h"

#include "dialect/FsdpOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPINSERTCOLLECTIVES
#include "passes/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// all_reduce + wait of `v` over `ranks` (of `group`, when set).
Value allReduce(OpBuilder &b, Location loc, Value v, int64_t ranks,
                StringRef reduction, StringAttr group = {}) {
  auto start = AllReduceOp::create(
      b, loc, FutureType::get(b.getContext(), tensorType(v)), v,
      b.getI64IntegerAttr(ranks), b.getStringAttr(reduction), group);
  return WaitOp::create(b, loc, start.getFuture());
}

/// Moves each fsdp.sum_squares under the norm `sqrt` reads (and the cast
/// that widens its gradient) to just after the gradient's definition: the
/// sums are scalars, and the gradients need not live until the norm.
void hoistSumSquares(SqrtOp sqrt) {
  SmallVector<Operation *> work{sqrt->getOperand(0).getDefiningOp()};
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!op)
      continue;
    if (isa<AddOp>(op)) {
      for (Value v : op->getOperands())
        work.push_back(v.getDefiningOp());
      continue;
    }
    auto sum = dyn_cast<SumSquaresOp>(op);
    if (!sum)
      continue;
    Operation *cast = sum->getOperand(0).getDefiningOp<CastOp>();
    Value g = cast ? cast->getOperand(0) : sum->getOperand(0);
    Block *block = sum->getBlock();
    Operation *def = g.getDefiningOp();
    auto moveAfter = [&](Operation *moved, Operation *anchor) {
      if (anchor)
        moved->moveAfter(anchor);
      else
        moved->moveBefore(block, block->begin());
    };
    if (def && def->getBlock() != block)
      continue;
    if (cast) {
      moveAfter(cast, def);
      sum->moveAfter(cast);
    } else {
      moveAfter(sum, def);
    }
  }
}

/// Sum over every element of `x` (a scalar stays as it is).
Value sumAll(OpBuilder &b, Location loc, Value x) {
  SmallVector<int64_t> axes;
  for (int64_t i = 0; i < tensorType(x).getRank(); ++i)
    axes.push_back(i);
  return axes.empty() ? x : ReduceSumOp::create(b, loc, x, axes, false);
}

struct FsdpInsertCollectives
    : fsdp::impl::FsdpInsertCollectivesBase<FsdpInsertCollectives> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    int64_t worldSize = 1;
    if (auto w = module->getAttrOfType<IntegerAttr>(mlir::fsdp::attrs::worldSize))
      worldSize = w.getInt();
    // Unsharded parameters (all of them without flat buffers; buffers
    // always) are read where they are stored.
    castParameterReads(module,
                       /*buffersOnly=*/!module.getOps<FlatParameterOp>().empty());
    if (worldSize == 1 && module.getOps<FlatParameterOp>().empty())
      return;
    auto step = module.lookupSymbol<func::FuncOp>("train_step");
    if (!step) {
      module.emitError("fsdp-insert-collectives needs @train_step");
      return signalPassFailure();
    }
    auto update = module.lookupSymbol<func::FuncOp>("apply_update");
    if (module.getOps<FlatParameterOp>().empty())
      averageGradients(step, update, worldSize);
    else if (failed(shard(module, step, update, worldSize)))
      return signalPassFailure();
    if (worldSize > 1)
      averageLoss(step, worldSize);
  }

  /// Unsharded parameters are read where they are stored (the runtime's
  /// f32 copy): a read in a mixed-precision compute dtype becomes a read
  /// in the parameter's type and a cast. With `fsdp.buffer_dtype`
  /// (MixedPrecision.buffer_dtype) buffers are kept in that dtype: rounded
  /// to it where read, and where the forward stores them (their f32
  /// storage then holds exactly the narrow values).
  void castParameterReads(ModuleOp module, bool buffersOnly) {
    SymbolTable symbols(module);
    Type bufferElem;
    if (auto t = module->getAttrOfType<TypeAttr>(mlir::fsdp::attrs::bufferDtype))
      bufferElem = t.getValue();
    auto withElem = [](Type t, Type elem) {
      return RankedTensorType::get(cast<RankedTensorType>(t).getShape(), elem);
    };
    for (auto func : module.getOps<func::FuncOp>()) {
      for (auto read :
           llvm::make_early_inc_range(func.getOps<GetParameterOp>())) {
        auto param = symbols.lookup<ParameterOp>(read.getParam());
        if (!param || (buffersOnly && !param.getBuffer()))
          continue;
        Type kept = param.getBuffer() && bufferElem
                        ? withElem(param.getTensorType(), bufferElem)
                        : param.getTensorType();
        if (param.getTensorType() == read.getType() &&
            kept == param.getTensorType())
          continue;
        OpBuilder b(read);
        Value v = GetParameterOp::create(b, read.getLoc(),
                                         param.getTensorType(),
                                         read.getParamAttr());
        for (Type t : {kept, (Type)read.getType()})
          if (v.getType() != t)
            v = CastOp::create(b, read.getLoc(), t, v);
        read.replaceAllUsesWith(v);
        read.erase();
      }
      if (!bufferElem)
        continue;
      for (auto assign : func.getOps<AssignBufferOp>()) {
        Value v = assign.getValue();
        if (cast<RankedTensorType>(v.getType()).getElementType() == bufferElem)
          continue;
        OpBuilder b(assign);
        assign.getValueMutable().assign(CastOp::create(
            b, assign.getLoc(), withElem(v.getType(), bufferElem), v));
      }
    }
  }

  /// no-shard: gradients are averaged where the update reads them.
  void averageGradients(func::FuncOp step, func::FuncOp update,
                        int64_t worldSize) {
    func::FuncOp updater = update ? update : step;
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
      Value avg = allReduce(b, g.getLoc(), g, worldSize, "avg");
      g.replaceAllUsesExcept(
          avg, avg.getDefiningOp<WaitOp>().getFuture().getDefiningOp());
    }
  }

  /// The logged loss: the mean over ranks. That is the global batch's mean
  /// where every rank's loss averages as many elements; a mean over
  /// counted targets (ignore_index) averages the ranks' means, as PyTorch
  /// DDP and FSDP do (docs/Rationale.md).
  void averageLoss(func::FuncOp step, int64_t worldSize) {
    auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      auto name = step.getResultAttrOfType<StringAttr>(i, mlir::fsdp::attrs::name);
      if (!name || name.getValue() != "loss")
        continue;
      OpBuilder b(ret);
      ret.setOperand(i, allReduce(b, ret.getLoc(), v, worldSize, "avg"));
    }
  }

  LogicalResult shard(ModuleOp module, func::FuncOp step, func::FuncOp update,
                      int64_t worldSize);
  /// Hybrid sharding: the replica count, and the group attribute of
  /// collectives within a shard group (unset when the group is the world).
  int64_t replicas = 1;
  StringAttr shardGroup() {
    return replicas > 1 ? StringAttr::get(&getContext(), "shard")
                        : StringAttr();
  }
  LogicalResult gatherParameters(ModuleOp module, func::FuncOp step);
  /// Replaces the per-parameter gradient consumers (optimizer updates,
  /// accumulation, reads of accumulators) by ones on flat shards.
  LogicalResult reduceGradients(ModuleOp module, func::FuncOp func,
                                int64_t worldSize);
};

/// Where a parameter lives: its flat buffer and element offset there.
struct Placement {
  FlatParameterOp flat;
  int64_t offset = 0;
};

llvm::StringMap<Placement> placements(ModuleOp module) {
  llvm::StringMap<Placement> out;
  for (auto flat : module.getOps<FlatParameterOp>())
    for (auto [a, offset] : llvm::zip(flat.getParams(), flat.getOffsets()))
      out[cast<FlatSymbolRefAttr>(a).getValue()] = {flat, offset};
  return out;
}

LogicalResult FsdpInsertCollectives::shard(ModuleOp module, func::FuncOp step,
                                           func::FuncOp update,
                                           int64_t worldSize) {
  replicas = 1;
  if (auto r = module->getAttrOfType<IntegerAttr>(mlir::fsdp::attrs::replicateGroups))
    replicas = r.getInt();
  if (replicas < 1 || worldSize % replicas != 0)
    return module.emitError("fsdp.replicate_groups = ")
           << replicas << " does not divide the world size " << worldSize;
  for (auto flat : module.getOps<FlatParameterOp>())
    if (flat.getGroupSizeAttr().getInt() != worldSize / replicas)
      return flat.emitError("flat parameter '")
             << flat.getSymName() << "' is sharded over "
             << flat.getGroupSizeAttr().getInt() << " ranks but the module's "
             << worldSize << " ranks in " << replicas
             << " replica groups give groups of " << worldSize / replicas;
  if (failed(gatherParameters(module, step)) ||
      failed(reduceGradients(module, step, worldSize)))
    return failure();
  if (update && failed(reduceGradients(module, update, worldSize)))
    return failure();
  return success();
}

/// The last op reading what `op` reads: `op`, or where `op` is a reshape (a
/// view of the same bytes, no instruction of its own), the last reader of
/// its result.
template <typename Positions>
static Operation *lastReader(Operation *op, const Positions &at) {
  Operation *last = op;
  if (isa<ReshapeOp>(op))
    for (Operation *user : op->getUsers())
      if (Operation *r = lastReader(user, at); at.lookup(r) > at.lookup(last))
        last = r;
  return last;
}

LogicalResult FsdpInsertCollectives::gatherParameters(ModuleOp module,
                                                      func::FuncOp step) {
  Block &body = step.getBody().front();
  // Forward is every op up to the loss; the reverse pass follows it.
  Operation *loss = lossOp(step);
  auto at = positions(body);
  int64_t forwardEnd = loss ? at.lookup(loss) : (int64_t)at.size();
  Type paramDtype;
  if (auto t = module->getAttrOfType<TypeAttr>(mlir::fsdp::attrs::paramDtype))
    paramDtype = t.getValue();

  llvm::StringMap<Placement> where = placements(module);
  SymbolTable symbols(module);
  // Every use of every parameter read, by flat buffer.
  llvm::MapVector<Operation *, SmallVector<OpOperand *>> uses;
  SmallVector<GetParameterOp> reads;
  for (auto read : body.getOps<GetParameterOp>()) {
    auto it = where.find(read.getParam());
    if (it == where.end()) {
      auto param = symbols.lookup<ParameterOp>(read.getParam());
      if (param && param.getBuffer())
        continue; // a buffer: read where it is stored, on every rank
      return read.emitError("parameter '")
             << read.getParam() << "' belongs to no flat parameter";
    }
    reads.push_back(read);
    for (OpOperand &use : read.getResult().getUses())
      uses[it->second.flat].push_back(&use);
  }

  OpBuilder b(&getContext());
  for (auto &[flatOp, flatUses] : uses) {
    auto flat = cast<FlatParameterOp>(flatOp);
    auto unit = symbols.lookup<UnitOp>(flat.getUnit());
    bool reshard = unit.getReshardAfterForward();
    // Phases: forward and backward when resharding, else one.
    SmallVector<SmallVector<OpOperand *>, 2> phases(reshard ? 2 : 1);
    for (OpOperand *use : flatUses) {
      bool backward = at.lookup(use->getOwner()) > forwardEnd;
      phases[reshard && backward ? 1 : 0].push_back(use);
    }
    // Partial resharding keeps 1/N of the forward's gathered buffer for the
    // backward gather among N ranks.
    int64_t reshardTo = unit.getReshardTo() ? (int64_t)*unit.getReshardTo() : 0;
    Value kept;
    for (auto &phase : phases) {
      if (phase.empty())
        continue;
      Operation *first = phase.front()->getOwner(),
                *last = phase.front()->getOwner();
      for (OpOperand *use : phase) {
        if (at.lookup(use->getOwner()) < at.lookup(first))
          first = use->getOwner();
        Operation *reader = lastReader(use->getOwner(), at);
        if (at.lookup(reader) > at.lookup(last))
          last = reader;
      }
      Location loc = unit.getLoc();
      b.setInsertionPoint(first);
      Value full;
      if (kept) {
        auto keptType = cast<RankedTensorType>(kept.getType());
        auto start = AllGatherStartOp::create(
            b, loc,
            FutureType::get(
                b.getContext(),
                RankedTensorType::get({keptType.getDimSize(0) * reshardTo},
                                      keptType.getElementType())),
            kept, b.getI64IntegerAttr(reshardTo),
            FlatSymbolRefAttr::get(unit.getSymNameAttr()),
            StringAttr::get(&getContext(), "block"));
        full = WaitOp::create(b, loc, start.getFuture());
      } else {
        Value shard =
            GetShardOp::create(b, loc, flat.getShardType(),
                               FlatSymbolRefAttr::get(flat.getSymNameAttr()));
        // Mixed precision: the f32 shard is cast before the gather, so the
        // wire and the gathered buffer hold the parameter dtype.
        RankedTensorType fullType = flat.getFullType();
        if (paramDtype && paramDtype != fullType.getElementType()) {
          shard = CastOp::create(
              b, loc,
              RankedTensorType::get(flat.getShardType().getShape(), paramDtype),
              shard);
          fullType = RankedTensorType::get(fullType.getShape(), paramDtype);
        }
        auto start = AllGatherStartOp::create(
            b, loc, FutureType::get(b.getContext(), fullType), shard,
            b.getI64IntegerAttr(flat.getGroupSizeAttr().getInt()),
            FlatSymbolRefAttr::get(unit.getSymNameAttr()), shardGroup());
        full = WaitOp::create(b, loc, start.getFuture());
      }
      llvm::StringMap<Value> views;
      for (OpOperand *use : phase) {
        auto read = cast<GetParameterOp>(use->get().getDefiningOp());
        Value &view = views[read.getParam()];
        if (!view) {
          RankedTensorType type = read.getType();
          Type element =
              cast<RankedTensorType>(full.getType()).getElementType();
          view = ParamViewOp::create(
              b, loc, RankedTensorType::get(type.getShape(), element), full,
              b.getI64IntegerAttr(where[read.getParam()].offset));
          // The CPU backend computes in f32 on the rounded values.
          if (element != type.getElementType())
            view = CastOp::create(b, loc, type, view);
        }
        use->set(view);
      }
      if (!isa<func::ReturnOp>(last)) {
        b.setInsertionPointAfter(last);
        if (reshardTo && &phase == &phases.front() && phases.size() == 2 &&
            !phases.back().empty()) {
          auto fullType = cast<RankedTensorType>(full.getType());
          kept = ReshardOp::create(
              b, loc,
              RankedTensorType::get({fullType.getDimSize(0) / reshardTo},
                                    fullType.getElementType()),
              full, b.getI64IntegerAttr(reshardTo));
        }
        FreeOp::create(b, loc, full);
      }
    }
  }
  for (GetParameterOp read : reads)
    read.erase();
  return success();
}

LogicalResult FsdpInsertCollectives::reduceGradients(ModuleOp module,
                                                     func::FuncOp func,
                                                     int64_t worldSize) {
  Block &body = func.getBody().front();
  llvm::StringMap<Placement> where = placements(module);
  SymbolTable symbols(module);
  auto ref = [](FlatParameterOp flat) {
    return FlatSymbolRefAttr::get(flat.getSymNameAttr());
  };
  auto flatOf = [&](Operation *op) -> FailureOr<Placement> {
    auto name = cast<FlatSymbolRefAttr>(op->getAttr("param")).getValue();
    auto it = where.find(name);
    if (it == where.end())
      return op->emitError("parameter '")
             << name << "' belongs to no flat parameter";
    return it->second;
  };

  // The per-parameter consumers, by flat buffer, in program order.
  llvm::MapVector<Operation *, SmallVector<Operation *>> updates, accumulates,
      readGrads;
  for (Operation &op : body) {
    if (!isa<AdamWOp, SgdOp, AccumulateGradOp, ReadGradOp>(op))
      continue;
    if (op.getAttrOfType<FlatSymbolRefAttr>("param") &&
        symbols.lookup<FlatParameterOp>(
            op.getAttrOfType<FlatSymbolRefAttr>("param").getValue()))
      continue; // already on a shard
    FailureOr<Placement> p = flatOf(&op);
    if (failed(p))
      return failure();
    if (isa<AdamWOp, SgdOp>(op))
      updates[p->flat].push_back(&op);
    else if (isa<AccumulateGradOp>(op))
      accumulates[p->flat].push_back(&op);
    else
      readGrads[p->flat].push_back(&op);
  }
  auto at = positions(body);
  OpBuilder b(&getContext());
  Type reduceDtype;
  if (auto t = module->getAttrOfType<TypeAttr>(mlir::fsdp::attrs::reduceDtype))
    reduceDtype = t.getValue();

  // Gradient shards: from accumulators (in @apply_update), or packed and
  // reduce-scattered after the last contribution.
  llvm::MapVector<Operation *, Value> shards;
  for (auto &[flatOp, reads] : readGrads) {
    auto flat = cast<FlatParameterOp>(flatOp);
    b.setInsertionPointToStart(&body);
    shards[flat] =
        ReadGradOp::create(b, flat.getLoc(), flat.getShardType(), ref(flat));
  }
  auto reduceScatter = [&](FlatParameterOp flat, ArrayRef<Operation *> ops) {
    SmallVector<Value> grads;
    SmallVector<int64_t> offsets;
    Operation *lastDef = nullptr;
    for (Operation *op : ops) {
      Value g = op->getOperand(0);
      // A compute-dtype gradient widened only for this pack is packed as it
      // is (the pack converts): no f32 copy held until the unit's last
      // gradient.
      if (auto widen = g.getDefiningOp<CastOp>())
        if (isa<FloatType>(tensorType(widen.getX()).getElementType()) &&
            tensorType(widen.getX()).getElementTypeBitWidth() <
                tensorType(g).getElementTypeBitWidth())
          g = widen.getX();
      grads.push_back(g);
      offsets.push_back(
          where[cast<FlatSymbolRefAttr>(op->getAttr("param")).getValue()]
              .offset);
      Operation *def = g.getDefiningOp();
      if (def && (!lastDef || at.lookup(def) > at.lookup(lastDef)))
        lastDef = def;
    }
    if (lastDef)
      b.setInsertionPointAfter(lastDef);
    else
      b.setInsertionPointToStart(&body);
    Location loc = flat.getLoc();
    // Mixed precision: packed (converted) and reduced in the reduce dtype,
    // applied in f32.
    RankedTensorType shardType = flat.getShardType(),
                     fullType = flat.getFullType();
    Type master = shardType.getElementType();
    if (reduceDtype && reduceDtype != master) {
      fullType = RankedTensorType::get(fullType.getShape(), reduceDtype);
      shardType = RankedTensorType::get(shardType.getShape(), reduceDtype);
    }
    Value packed = PackOp::create(b, loc, fullType, grads,
                                  b.getDenseI64ArrayAttr(offsets));
    int64_t group = flat.getGroupSizeAttr().getInt();
    auto start = ReduceScatterStartOp::create(
        b, loc, FutureType::get(b.getContext(), shardType), packed,
        b.getI64IntegerAttr(group), b.getStringAttr("avg"), flat.getUnitAttr(),
        shardGroup());
    Value shard = WaitOp::create(b, loc, start.getFuture()).getResult();
    // Hybrid: average the shard over the replicas holding the same one.
    if (replicas > 1)
      shard = allReduce(b, loc, shard, replicas, "avg",
                        StringAttr::get(&getContext(), "replicate"));
    if (shardType.getElementType() != master)
      shard = CastOp::create(b, loc, flat.getShardType(), shard);
    return shard;
  };
  for (auto &[flatOp, ops] : updates)
    if (!shards.count(flatOp))
      shards[flatOp] = reduceScatter(cast<FlatParameterOp>(flatOp), ops);

  // Micro-steps: one accumulation per flat shard.
  for (auto &[flatOp, ops] : accumulates) {
    auto flat = cast<FlatParameterOp>(flatOp);
    Value g = reduceScatter(flat, ops);
    b.setInsertionPoint(ops.back());
    AccumulateGradOp::create(b, flat.getLoc(), ref(flat), g);
    for (Operation *op : ops)
      op->erase();
  }

  if (!updates.empty()) {
    // The norm: rebuild sqrt's operand from the shards, summed over ranks.
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    SqrtOp sqrt;
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      auto name = func.getResultAttrOfType<StringAttr>(i, mlir::fsdp::attrs::name);
      if (name && name.getValue() == "grad_norm")
        sqrt = v.getDefiningOp<SqrtOp>();
    }
    if (!sqrt)
      return func.emitError("@")
             << func.getName() << " returns no grad_norm computed by fsdp.sqrt";
    b.setInsertionPoint(sqrt);
    Location loc = sqrt.getLoc();
    Type et = tensorType(sqrt.getResult()).getElementType();
    // One rank: each shard is its unit's parameters whole, and the norm
    // stays the one the plan without shards computes (a sum of squares per
    // gradient, added in parameter order), so keeping the shards (--offload
    // at one rank) rounds the norm, and with it clipping's scale, as the
    // plan without them does. Each sum moves next to its gradient, which
    // is then free once packed.
    if (worldSize == 1 && accumulates.empty()) {
      hoistSumSquares(sqrt);
    } else {
      Value sumSq = ConstantOp::create(
          b, loc, DenseElementsAttr::get(RankedTensorType::get({}, et),
                                         b.getFloatAttr(et, 0.0)));
      for (auto &[flatOp, g] : shards) {
        Value gf = g;
        if (tensorType(g).getElementType() != et)
          gf = CastOp::create(
              b, loc, RankedTensorType::get(tensorType(g).getShape(), et), g);
        sumSq = AddOp::create(b, loc, sumSq,
                              sumAll(b, loc, MulOp::create(b, loc, gf, gf)));
      }
      // The shards of one group hold the whole gradient once.
      int64_t group = worldSize / replicas;
      if (group > 1)
        sumSq = allReduce(b, loc, sumSq, group, "sum", shardGroup());
      sqrt->setOperand(0, sumSq);
    }

    for (auto &[flatOp, ops] : updates) {
      auto flat = cast<FlatParameterOp>(flatOp);
      Operation *old = ops.front();
      b.setInsertionPoint(old);
      Value scale = old->getNumOperands() > 1 ? old->getOperand(1) : Value();
      Value g = shards[flatOp];
      if (auto adam = dyn_cast<AdamWOp>(old))
        AdamWOp::create(b, old->getLoc(), /*copy=*/Type(), ref(flat), g, scale,
                        adam.getLrAttr(), adam.getBeta1Attr(),
                        adam.getBeta2Attr(), adam.getEpsAttr(),
                        adam.getWeightDecayAttr(), /*into=*/FlatSymbolRefAttr());
      else {
        auto sgd = cast<SgdOp>(old);
        SgdOp::create(b, old->getLoc(), ref(flat), g, scale, sgd.getLrAttr(),
                      sgd.getMomentumAttr(), sgd.getNesterovAttr(),
                      sgd.getWeightDecayAttr());
      }
      for (Operation *op : ops)
        op->erase();
    }
  }
  // The per-parameter gradient reads nothing uses now, before the sweep of
  // dead ops: the sweep erases them too, and reading one it freed was a
  // use after free (AddressSanitizer, make sanitize: the grad-accum update).
  for (auto &[flatOp, reads] : readGrads)
    for (Operation *op : reads)
      if (op->use_empty())
        op->erase();
  eraseDeadOps(body);
  return success();
}

} // namespace
