//===- Shard.cpp - Flat, padded, sharded unit buffers ---------------------===//
//
// Before (world-size = 4):
//   fsdp.parameter @h.0.fc.weight : tensor<16x64xf32>
//   fsdp.parameter @h.0.fc.bias : tensor<16xf32>
//   fsdp.unit @h.0 {params = [@h.0.fc.weight, @h.0.fc.bias]}
// After:
//   fsdp.flat_parameter @h.0.flat : tensor<260xf32> {unit = @h.0,
//       params = [@h.0.fc.weight, @h.0.fc.bias], offsets = array<i64: 0, 1024>,
//       numel = 1040, group_size = 4, trainable = true}
// Each unit's trained parameters are laid end to end (in the unit's order)
// and padded to a multiple of the group size; its frozen parameters get a
// second flat buffer of their own, so that optimizer updates and gradient
// reductions always cover whole buffers. The collectives themselves are
// inserted by fsdp-insert-collectives.
//
//===----------------------------------------------------------------------===//
#include "dialect/AttrNames.h"
#include "passes/OffloadSpec.h"
#include "passes/Passes.h"

#include "dialect/FsdpOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPSHARD
#include "passes/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

bool isSharded(StringRef strategy) {
  return strategy == "full-shard" || strategy == "shard-grad-op" ||
         strategy == "hybrid-shard";
}

struct FsdpShard : fsdp::impl::FsdpShardBase<FsdpShard> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    if (worldSize < 1) {
      module.emitError("--world-size must be >= 1, got ") << (int64_t)worldSize;
      return signalPassFailure();
    }
    if (!isSharded(strategy) && strategy != "no-shard") {
      module.emitError("unknown --strategy '")
          << strategy
          << "' (full-shard, shard-grad-op, no-shard or hybrid-shard)";
      return signalPassFailure();
    }
    if (replicateGroups < 1 || worldSize % replicateGroups != 0 ||
        (replicateGroups > 1 && strategy != "hybrid-shard")) {
      module.emitError("--replicate-groups=")
          << (int64_t)replicateGroups
          << " must divide --world-size=" << (int64_t)worldSize
          << " and needs --strategy=hybrid-shard";
      return signalPassFailure();
    }
    // Hybrid: shard within groups of world / R ranks, replicate across R.
    int64_t groupSize = worldSize / replicateGroups;
    module->setAttr(mlir::fsdp::attrs::worldSize,
                    IntegerAttr::get(IntegerType::get(ctx, 64), worldSize));
    module->setAttr(
        mlir::fsdp::attrs::replicateGroups,
        IntegerAttr::get(IntegerType::get(ctx, 64), replicateGroups));
    module->setAttr(mlir::fsdp::attrs::strategy,
                    StringAttr::get(ctx, strategy));
    auto dtype = [&](StringRef name) -> Type {
      return name == "f32"    ? (Type)Float32Type::get(ctx)
             : name == "bf16" ? (Type)BFloat16Type::get(ctx)
             : name == "f16"  ? (Type)Float16Type::get(ctx)
                              : Type();
    };
    Type paramType = dtype(paramDtype), reduceType = dtype(reduceDtype);
    if (!paramType || !reduceType) {
      module.emitError("--param-dtype and --reduce-dtype must be f32, bf16 "
                       "or f16, got '")
          << paramDtype << "' and '" << reduceDtype << "'";
      return signalPassFailure();
    }
    if (!reduceType.isF32() && !isSharded(strategy)) {
      module.emitError("--reduce-dtype=")
          << reduceDtype << " needs a sharded strategy (full-shard, "
          << "shard-grad-op or hybrid-shard): it is applied at the "
             "reduce-scatter";
      return signalPassFailure();
    }
    if (!paramType.isF32() && !isSharded(strategy)) {
      module.emitError("--param-dtype=")
          << paramDtype << " needs a sharded strategy (full-shard, "
          << "shard-grad-op or hybrid-shard): it is applied at the all-gather";
      return signalPassFailure();
    }
    if (worldSize == 1 && isSharded(strategy) && paramType.isF32() &&
        reduceType.isF32() && reshardAfterForward == "default" &&
        !keepSharded) {
      // One rank holds every shard whole: gathering and reduce-scattering
      // would copy the model twice a step for nothing. Parameters are used
      // where they live, as no-shard does (with a 16-bit parameter or
      // reduce dtype the gather and reduce-scatter are where the casts
      // happen, and an explicit --reshard-after-forward asks for the
      // sharded schedule itself, so those plans keep them).
      emitRemark(module.getLoc())
          << "--strategy=" << strategy
          << " on one rank: parameters used in place, no gathers or "
             "reduce-scatters (as no-shard; --offload keeps the shards)";
      strategy = "no-shard";
      module->setAttr(mlir::fsdp::attrs::strategy,
                      StringAttr::get(ctx, strategy));
    }
    module->setAttr(mlir::fsdp::attrs::paramDtype, TypeAttr::get(paramType));
    module->setAttr(mlir::fsdp::attrs::reduceDtype, TypeAttr::get(reduceType));
    if (!bufferDtype.empty()) {
      Type bufferType = dtype(bufferDtype);
      if (!bufferType) {
        module.emitError("--buffer-dtype must be f32, bf16 or f16, got '")
            << bufferDtype << "'";
        return signalPassFailure();
      }
      module->setAttr(mlir::fsdp::attrs::bufferDtype,
                      TypeAttr::get(bufferType));
    }
    if (syncBatchNorm) {
      // SyncBatchNorm: the kernels all-reduce their per-channel sums over
      // the world (every rank holds a slice of the one batch).
      bool any = false;
      auto size = IntegerAttr::get(IntegerType::get(ctx, 64), worldSize);
      module.walk([&](Operation *op) {
        if (isa<BatchNormOp, BatchNormGradOp>(op)) {
          any = true;
          if (worldSize > 1)
            op->setAttr("sync_group_size", size);
        }
      });
      if (!any) {
        module.emitError("--sync-batch-norm: the model has no batch "
                         "normalisation in training mode to synchronise");
        return signalPassFailure();
      }
    }
    if (!isSharded(strategy))
      return;

    auto units = llvm::to_vector(module.getOps<UnitOp>());
    SymbolTable symbols(module);
    if (units.empty()) {
      module.emitError("--strategy=")
          << strategy << " needs fsdp.unit ops: run fsdp-wrap-units first";
      return signalPassFailure();
    }
    // A parameter is trained when some function updates or accumulates it.
    llvm::StringSet<> trained;
    module.walk([&](Operation *op) {
      if (isa<AdamWOp, SgdOp, AccumulateGradOp>(op))
        trained.insert(
            cast<FlatSymbolRefAttr>(op->getAttr("param")).getValue());
    });

    // --reshard-after-forward=[GLOBAL][,UNIT=VALUE...]; VALUE is true,
    // false or N (keep 1/N of the unit gathered: FSDP2's int).
    llvm::StringMap<std::string> perUnit;
    std::string global = "default";
    SmallVector<StringRef> items;
    StringRef(reshardAfterForward).split(items, ',', -1, false);
    for (StringRef item : items) {
      auto [key, value] = item.split('=');
      if (value.empty())
        global = key.str();
      else if (!symbols.lookup<UnitOp>(key)) {
        module.emitError("--reshard-after-forward names unit '")
            << key << "', which does not exist";
        return signalPassFailure();
      } else {
        perUnit[key] = value.str();
      }
    }
    if (strategy == "shard-grad-op" &&
        (global != "default" || !perUnit.empty())) {
      module.emitError("--reshard-after-forward does not apply to "
                       "shard-grad-op, which keeps parameters gathered until "
                       "backward");
      return signalPassFailure();
    }

    // --offload's shares of units (MODE:FRACTION): split below.
    OffloadSpec offloads;
    if (offload != "none" && offload != "auto" && !offload.empty()) {
      llvm::StringSet<> names;
      for (UnitOp unit : units)
        names.insert(unit.getSymName());
      std::string error;
      if (!parseOffloadSpec(offload, names, offloads, error)) {
        module.emitError(error);
        return signalPassFailure();
      }
    }

    OpBuilder b(ctx);
    int64_t blockSize = 0;
    for (UnitOp unit : units) {
      // SHARD_GRAD_OP (ZeRO-2) keeps parameters gathered from forward to
      // backward; full-shard follows the unit (the root stays gathered).
      bool reshard = unit.getReshardAfterForward();
      int64_t to = 0;
      StringRef choice = perUnit.count(unit.getSymName())
                             ? StringRef(perUnit[unit.getSymName()])
                             : StringRef(global);
      int64_t n = 0;
      if (strategy == "shard-grad-op" || choice == "false")
        reshard = false;
      else if (choice == "true")
        reshard =
            perUnit.count(unit.getSymName()) || unit.getSymName() != "root";
      else if (!choice.getAsInteger(10, n) && n >= 1 && groupSize % n == 0) {
        // N = 1 keeps everything (false); N = the group is a full reshard.
        reshard = n > 1;
        if (n > 1 && n < groupSize)
          to = n;
      } else if (choice != "default") {
        module.emitError("--reshard-after-forward: '")
            << choice << "' for unit '" << unit.getSymName()
            << "' must be default, true, false or a number of ranks that "
               "divides the shard group of "
            << groupSize;
        return signalPassFailure();
      }
      unit.setReshardAfterForward(reshard);
      if (to) {
        // The runtime keeps one block communicator: one N per plan.
        if (blockSize && blockSize != to) {
          module.emitError("--reshard-after-forward: units reshard to ")
              << blockSize << " and " << to
              << " ranks; one partial size per plan is supported";
          return signalPassFailure();
        }
        blockSize = to;
        unit.setReshardToAttr(b.getI64IntegerAttr(to));
      }

      Operation *after = unit;
      for (bool trainable : {true, false}) {
        SmallVector<Attribute> members;
        SmallVector<int64_t> sizes;
        Type element;
        Location loc = unit.getLoc();
        for (Attribute a : unit.getParams()) {
          auto ref = cast<FlatSymbolRefAttr>(a);
          if (trained.contains(ref.getValue()) != trainable)
            continue;
          auto param = symbols.lookup<ParameterOp>(ref.getValue());
          if (param.getBuffer())
            continue; // kept whole on every rank, read where it is stored
          Type et = param.getTensorType().getElementType();
          if (element && et != element) {
            param.emitError("parameter '")
                << param.getSymName() << "' is " << et << " but unit '"
                << unit.getSymName() << "' already holds " << element
                << ": a flat buffer has one element type";
            return signalPassFailure();
          }
          element = et;
          if (members.empty())
            loc = param.getLoc(); // where the unit's remarks point
          members.push_back(ref);
          sizes.push_back(param.getTensorType().getNumElements());
        }
        if (members.empty())
          continue;
        // A share of the unit offloaded: its last parameters, whole, until
        // the share is reached, in a flat buffer of their own.
        size_t split = members.size();
        const OffloadChoice &share = offloads.of(unit.getSymName());
        if (trainable && isSharded(strategy) && share.mode != "none" &&
            share.fraction < 1) {
          int64_t total = 0, moved = 0;
          for (int64_t n : sizes)
            total += n;
          while (split > 0 && (split == members.size() ||
                               (double)moved < share.fraction * total)) {
            --split;
            moved += sizes[split];
          }
          emitRemark(loc, "unit '")
              << unit.getSymName() << "': --offload " << share.mode << ":"
              << llvm::formatv("{0}", share.fraction).str()
              << " offloads its last " << members.size() - split << " of "
              << members.size() << " trained parameters, " << moved << " of "
              << total << " elements";
        }
        for (bool part : {false, true}) {
          size_t begin = part ? split : 0, end = part ? members.size() : split;
          if (begin == end)
            continue;
          SmallVector<int64_t> offsets;
          int64_t numel = 0;
          for (size_t k = begin; k < end; ++k) {
            offsets.push_back(numel);
            numel += sizes[k];
          }
          int64_t shard = (numel + groupSize - 1) / groupSize;
          b.setInsertionPointAfter(after);
          std::string name = (unit.getSymName() + (!trainable ? ".frozen_flat"
                                                   : part     ? ".offload_flat"
                                                              : ".flat"))
                                 .str();
          auto flat = FlatParameterOp::create(
              b, loc, b.getStringAttr(name),
              TypeAttr::get(RankedTensorType::get({shard}, element)),
              FlatSymbolRefAttr::get(unit.getSymNameAttr()),
              b.getArrayAttr(
                  ArrayRef<Attribute>(members).slice(begin, end - begin)),
              b.getDenseI64ArrayAttr(offsets), b.getI64IntegerAttr(numel),
              b.getI64IntegerAttr(groupSize), b.getBoolAttr(trainable),
              /*offload=*/StringAttr(), /*device_copy=*/TypeAttr());
          if (part)
            flat->setAttr(mlir::fsdp::attrs::offloadPart, b.getUnitAttr());
          after = flat;
          if (numel % groupSize)
            emitRemark(loc, "unit '")
                << unit.getSymName() << "': " << numel << " "
                << (trainable ? "trained" : "frozen") << " elements padded to "
                << shard * groupSize << " (" << shard << " per rank)";
        }
      }
    }
  }
};

} // namespace
