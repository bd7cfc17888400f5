//===- EmitPlan.cpp - The runtime plan, as JSON ---------------------------===//
//
// The compiler → runtime contract (docs/Plan.md; the runtime reads it with
// runtime/plan/Plan.h). Each instruction names its op, its tensors (space,
// offset or index, shape, dtype) and its attributes; reshapes, parameter reads
// and constants are not instructions (they are views of storage the runtime
// already has).
//
//===----------------------------------------------------------------------===//
#include "dialect/AttrNames.h"
#include "passes/Passes.h"
#include "passes/TrainStep.h"

#include "common/MemoryCategories.h"
#include "dialect/FsdpOps.h"
#include "runtime/support/Digest.h"
#include "runtime/support/File.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Base64.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPEMITPLAN
#include "passes/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;
namespace json = llvm::json;

namespace {

constexpr int64_t kPlanVersion = 1;
/// Constants up to this size are written as readable JSON arrays.
constexpr int64_t kInlineElements = 64;

std::string dtypeName(Type t) {
  if (t.isF32())
    return "f32";
  if (t.isF64())
    return "f64";
  if (t.isF16())
    return "f16";
  if (t.isBF16())
    return "bf16";
  if (t.isInteger(1))
    return "i1";
  if (auto it = dyn_cast<IntegerType>(t))
    return (it.isUnsigned() ? "ui" : "i") + std::to_string(it.getWidth());
  return "unknown";
}

json::Array shapeOf(RankedTensorType t) {
  json::Array a;
  for (int64_t d : t.getShape())
    a.push_back(d);
  return a;
}

struct Emitter {
  ModuleOp module;
  llvm::StringMap<int64_t> paramIndex;
  /// One entry per distinct value: attributes are uniqued, so the RoPE
  /// table every layer casts to bf16 is written (and loaded) once.
  llvm::DenseMap<Attribute, int64_t> constIndex;
  json::Array constants;

  json::Object tensor(Value v, int64_t offset) {
    Type type = v.getType();
    if (auto future = dyn_cast<FutureType>(type))
      type = future.getValueType(); // the buffer the collective writes
    auto t = cast<RankedTensorType>(type);
    json::Object o{{"shape", shapeOf(t)},
                   {"dtype", dtypeName(t.getElementType())}};
    while (auto r = v.getDefiningOp<ReshapeOp>())
      v = r.getX();
    if (auto read = v.getDefiningOp<GetParameterOp>()) {
      o["space"] = "param";
      o["index"] = paramIndex.lookup(read.getParam());
    } else if (auto shard = v.getDefiningOp<GetShardOp>()) {
      o["space"] = "param";
      o["index"] = paramIndex.lookup(shard.getFlat());
    } else if (auto copy = v.getDefiningOp<GetDeviceCopyOp>()) {
      o["space"] = "device_copy";
      o["index"] = paramIndex.lookup(copy.getFlat());
    } else if (auto read = v.getDefiningOp<GetHostBufferOp>()) {
      o["space"] = "host_buffer";
      o["index"] = hostBufferIndex.lookup(read.getBuffer());
    } else if (auto into = intoOf(v)) {
      // A copy into persistent storage, and the wait that completes it.
      if (hostBufferIndex.count(into.getValue())) {
        o["space"] = "host_buffer";
        o["index"] = hostBufferIndex.lookup(into.getValue());
      } else {
        o["space"] = "device_copy";
        o["index"] = paramIndex.lookup(into.getValue());
      }
    } else if (auto grad = v.getDefiningOp<ReadGradOp>()) {
      o["space"] = "grad";
      o["index"] = paramIndex.lookup(grad.getParam());
    } else if (auto c = v.getDefiningOp<ConstantOp>()) {
      o["space"] = "const";
      o["index"] = constant(c);
    } else {
      // Offload's host values have offsets into the host arena.
      o["space"] = isHostValue(v) ? "host" : "arena";
      o["offset"] = offset;
    }
    return o;
  }

  /// Offload's host buffers, by name: their index in the plan.
  llvm::StringMap<int64_t> hostBufferIndex;

  /// The storage a copy `into` writes, for the copy's result and its wait's.
  static FlatSymbolRefAttr intoOf(Value v) {
    if (auto adam = v.getDefiningOp<AdamWOp>())
      return adam.getIntoAttr();
    if (auto wait = v.getDefiningOp<WaitOp>())
      v = wait.getFuture();
    auto copy = v.getDefiningOp<CopyStartOp>();
    return copy ? copy.getIntoAttr() : FlatSymbolRefAttr();
  }

  int64_t constant(ConstantOp c) {
    auto attr = cast<DenseElementsAttr>(c.getValue());
    auto [it, inserted] = constIndex.try_emplace(attr, constants.size());
    if (!inserted)
      return it->second;
    auto t = cast<RankedTensorType>(attr.getType());
    json::Object o{{"shape", shapeOf(t)},
                   {"dtype", dtypeName(t.getElementType())}};
    auto number = [&](int64_t i) -> json::Value {
      if (isa<FloatType>(t.getElementType())) {
        double v = attr.getValues<APFloat>()[i].convertToDouble();
        // JSON has no infinities: masks use them, so spell them out.
        if (std::isinf(v))
          return v > 0 ? "inf" : "-inf";
        if (std::isnan(v))
          return "nan";
        return v;
      }
      if (t.getElementType().isInteger(1))
        return (int64_t)attr.getValues<bool>()[i];
      return attr.getValues<APInt>()[i].getSExtValue();
    };
    if (attr.isSplat()) {
      o["splat"] = number(0);
    } else if (attr.getNumElements() <= kInlineElements ||
               t.getElementType().isF64()) {
      json::Array data;
      for (int64_t i = 0, e = attr.getNumElements(); i < e; ++i)
        data.push_back(number(i));
      o["data"] = std::move(data);
    } else {
      // Large constants (RoPE tables, masks) as base64 of their
      // little-endian bytes (f32, bf16/f16 bits, i64, or one byte per i1),
      // not one JSON number per line.
      std::string bytes;
      Type et = t.getElementType();
      for (int64_t i = 0, e = attr.getNumElements(); i < e; ++i) {
        if (et.isF32()) {
          float f = attr.getValues<APFloat>()[i].convertToFloat();
          bytes.append(reinterpret_cast<const char *>(&f), 4);
        } else if (isa<FloatType>(et)) { // bf16, f16: their 16 bits
          uint16_t bits = (uint16_t)attr.getValues<APFloat>()[i]
                              .bitcastToAPInt()
                              .getZExtValue();
          bytes.append(reinterpret_cast<const char *>(&bits), 2);
        } else if (et.isInteger(1)) {
          bytes.push_back(attr.getValues<bool>()[i] ? 1 : 0);
        } else {
          int64_t v = attr.getValues<APInt>()[i].getSExtValue();
          bytes.append(reinterpret_cast<const char *>(&v), 8);
        }
      }
      o["base64"] = llvm::encodeBase64(bytes);
    }
    constants.push_back(std::move(o));
    return constants.size() - 1;
  }

  json::Value attribute(Attribute a) {
    if (auto b = dyn_cast<BoolAttr>(a))
      return b.getValue();
    if (isa<UnitAttr>(a))
      return true; // a mark (on_host)
    if (auto i = dyn_cast<IntegerAttr>(a))
      return i.getInt();
    if (auto f = dyn_cast<FloatAttr>(a))
      return f.getValueAsDouble();
    if (auto s = dyn_cast<StringAttr>(a))
      return s.getValue();
    if (auto arr = dyn_cast<DenseI64ArrayAttr>(a)) {
      json::Array out;
      for (int64_t v : arr.asArrayRef())
        out.push_back(v);
      return out;
    }
    if (auto ref = dyn_cast<FlatSymbolRefAttr>(a)) {
      auto it = paramIndex.find(ref.getValue());
      if (it != paramIndex.end())
        return it->second;   // a storage slot
      return ref.getValue(); // a unit, by name
    }
    return nullptr;
  }
};

struct FsdpEmitPlan : mlir::fsdp::impl::FsdpEmitPlanBase<FsdpEmitPlan> {
  using Base::Base;

  /// Appends `func`'s instructions and named results.
  LogicalResult emitProgram(Emitter &e, func::FuncOp func, json::Array &program,
                            json::Array &outputs) {
    Block &body = func.getBody().front();
    llvm::DenseMap<Value, int64_t> offsets;
    for (BlockArgument arg : body.getArguments())
      if (auto off = func.getArgAttrOfType<IntegerAttr>(
              arg.getArgNumber(), mlir::fsdp::attrs::offset))
        offsets[arg] = off.getInt();
    for (Operation &op : body) {
      if (auto offs =
              op.getAttrOfType<DenseI64ArrayAttr>(mlir::fsdp::attrs::offsets))
        for (auto [r, o] : llvm::zip(op.getResults(), offs.asArrayRef()))
          offsets[r] = o;
      if (isStorageView(&op))
        continue;
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
          auto name =
              func.getResultAttrOfType<StringAttr>(i, mlir::fsdp::attrs::name);
          json::Object t = e.tensor(v, offsets.lookup(v));
          t["name"] = name ? name.getValue() : "";
          outputs.push_back(std::move(t));
        }
        continue;
      }
      if (!isa<FsdpDialect>(op.getDialect())) {
        op.emitError("cannot emit '") << op.getName() << "' into a plan";
        return failure();
      }
      json::Array in, out;
      for (Value v : op.getOperands())
        in.push_back(e.tensor(v, offsets.lookup(v)));
      for (Value v : op.getResults())
        out.push_back(e.tensor(v, offsets.lookup(v)));
      json::Object attrs;
      for (NamedAttribute a : op.getAttrs()) {
        StringRef name = a.getName().getValue();
        // Planning marks stay in the IR; the stream goes to the runtime.
        if (name.consume_front(mlir::fsdp::attrs::prefix) && name != "stream" &&
            name != "on_host" && name != "deferred")
          continue;
        // Which optional operands are there: the runtime counts them.
        if (name == "operandSegmentSizes")
          continue;
        attrs[name] = e.attribute(a.getValue());
      }
      json::Object instr{{"op", op.getName().stripDialect()},
                         {"in", std::move(in)},
                         {"out", std::move(out)},
                         {"attrs", std::move(attrs)}};
      // fsdp-simulate's predicted start and end, in seconds.
      if (auto sim =
              op.getAttrOfType<DenseF64ArrayAttr>(mlir::fsdp::attrs::sim))
        instr["predicted"] = json::Array{sim[0], sim[1]};
      if (auto cost =
              op.getAttrOfType<DenseI64ArrayAttr>(mlir::fsdp::attrs::cost))
        instr["cost"] = json::Array{cost[0], cost[1]};
      program.push_back(std::move(instr));
    }

    return success();
  }

  /// Forward (through the loss), backward (to the first optimizer update)
  /// and optimizer, as [name, start, end] in predicted seconds.
  static json::Array phases(Block &body) {
    double lossEnd = -1, updateStart = -1, end = 0;
    for (Operation &op : body) {
      auto sim = op.getAttrOfType<DenseF64ArrayAttr>(mlir::fsdp::attrs::sim);
      if (!sim)
        continue;
      end = std::max(end, sim[1]);
      if (op.hasAttr(kLossAttr))
        lossEnd = sim[1];
      if (isa<AdamWOp, SgdOp>(op) && updateStart < 0)
        updateStart = sim[0];
    }
    json::Array out;
    if (lossEnd < 0)
      return out;
    if (updateStart < 0)
      updateStart = end;
    out.push_back(json::Array{"forward", 0.0, lossEnd});
    out.push_back(json::Array{"backward", lossEnd, updateStart});
    if (updateStart < end)
      out.push_back(json::Array{"optimizer", updateStart, end});
    return out;
  }

  /// Per unit, the predicted seconds its recomputed forward takes.
  static json::Object recomputeSeconds(Block &body) {
    std::map<std::string, double> seconds;
    for (Operation &op : body)
      if (auto unit = op.getAttrOfType<StringAttr>(kRecomputeAttr))
        if (auto sim =
                op.getAttrOfType<DenseF64ArrayAttr>(mlir::fsdp::attrs::sim))
          seconds[unit.str()] += sim[1] - sim[0];
    json::Object out;
    for (auto &[unit, s] : seconds)
      out[unit] = s;
    return out;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>(function);
    auto arena =
        module->getAttrOfType<IntegerAttr>(mlir::fsdp::attrs::arenaBytes);
    if (!func || !arena) {
      module.emitError("fsdp-emit-plan needs @")
          << function << " planned by fsdp-plan-memory";
      return signalPassFailure();
    }
    Emitter e;
    e.module = module;
    Block &body = func.getBody().front();

    llvm::StringSet<llvm::MallocAllocator> trained;
    module.walk([&](Operation *op) {
      if (isa<AdamWOp, SgdOp>(op))
        trained.insert(
            cast<FlatSymbolRefAttr>(op->getAttr("param")).getValue());
    });
    // The weights: a path the user typed (ONNX input), or one the module's
    // file named (fsdp.source_base: that file's directory, set by fsdp-opt;
    // a relative source is below it, an absolute one below "/"), which
    // fsdp-run opens following no link below the base.
    std::string source, sourceBase;
    if (auto s = module->getAttrOfType<StringAttr>(mlir::fsdp::attrs::source)) {
      SmallString<256> abs(s.getValue());
      auto base =
          module->getAttrOfType<StringAttr>(mlir::fsdp::attrs::sourceBase);
      if (base && !abs.empty()) {
        if (llvm::sys::path::is_absolute(abs)) {
          sourceBase = "/";
        } else {
          sourceBase = base.getValue().str();
          abs = base.getValue();
          llvm::sys::path::append(abs, s.getValue());
        }
      } else {
        llvm::sys::fs::make_absolute(abs);
      }
      source = abs.str().str();
    }
    json::Array params;
    for (auto p : module.getOps<ParameterOp>()) {
      e.paramIndex[p.getSymName()] = params.size();
      json::Object o;
      o["name"] = p.getSymName().str();
      o["shape"] = shapeOf(p.getTensorType());
      o["dtype"] = dtypeName(p.getTensorType().getElementType());
      o["module_path"] = p.getModulePath().str();
      o["trainable"] = trained.contains(p.getSymName());
      o["source"] = p.getSource().str();
      if (p.getLocation()) {
        o["location"] = p.getLocation()->str();
        o["offset"] = p.getOffsetAttr().getInt();
        o["length"] = p.getLengthAttr().getInt();
      }
      params.push_back(std::move(o));
    }

    // Storage slots: the parameters, then the flat parameters' shards.
    json::Array flats;
    llvm::StringMap<int64_t> flatOf;
    for (auto f : module.getOps<FlatParameterOp>()) {
      e.paramIndex[f.getSymName()] = params.size() + flats.size();
      json::Array members, offsets;
      for (auto [a, off] : llvm::zip(f.getParams(), f.getOffsets())) {
        int64_t p = e.paramIndex.lookup(cast<FlatSymbolRefAttr>(a).getValue());
        members.push_back(p);
        offsets.push_back(off);
        (*params[p].getAsObject())["flat"] = (int64_t)flats.size();
        (*params[p].getAsObject())["flat_offset"] = off;
        (*params[p].getAsObject())["trainable"] = f.getTrainable();
      }
      flats.push_back(
          json::Object{{"name", f.getSymName()},
                       {"unit", f.getUnit()},
                       {"dtype", dtypeName(f.getShardType().getElementType())},
                       {"shard_numel", f.getShardType().getDimSize(0)},
                       {"numel", f.getNumelAttr().getInt()},
                       {"group_size", f.getGroupSizeAttr().getInt()},
                       {"trainable", f.getTrainable()},
                       {"params", std::move(members)},
                       {"offsets", std::move(offsets)}});
      // Offload: where the shard and its optimizer state live, and the
      // dtype of the copy kept on the device ("optimizer").
      if (auto offload = f.getOffload()) {
        auto &o = *flats.back().getAsObject();
        o["offload"] = *offload;
        if (auto dc = f.getDeviceCopy())
          o["device_copy"] = dtypeName(*dc);
      }
    }

    // Offload's host buffers, kept from one step to the next.
    json::Array hostBuffers;
    for (auto b : module.getOps<HostBufferOp>()) {
      e.hostBufferIndex[b.getSymName()] = hostBuffers.size();
      auto t = cast<RankedTensorType>(b.getType());
      hostBuffers.push_back(
          json::Object{{"name", b.getSymName()},
                       {"shape", shapeOf(t)},
                       {"dtype", dtypeName(t.getElementType())}});
      // The shard it is a cast of (filled from it where no update ran).
      if (auto of = b.getCopyOfAttr())
        (*hostBuffers.back().getAsObject())["copy_of"] =
            e.paramIndex.lookup(of.getValue());
    }

    json::Array units;
    for (auto unit : module.getOps<UnitOp>()) {
      json::Array members;
      for (Attribute a : unit.getParams())
        members.push_back(
            e.paramIndex.lookup(cast<FlatSymbolRefAttr>(a).getValue()));
      json::Object o{{"name", unit.getSymName()},
                     {"params", std::move(members)},
                     {"reshard_after_forward", unit.getReshardAfterForward()}};
      if (auto to = unit.getReshardTo())
        o["reshard_to"] = (int64_t)*to;
      units.push_back(std::move(o));
    }

    json::Array inputs;
    for (BlockArgument arg : body.getArguments()) {
      auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                    mlir::fsdp::attrs::name);
      auto off = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                    mlir::fsdp::attrs::offset);
      json::Object t = e.tensor(arg, off ? off.getInt() : 0);
      t["name"] = name ? name.getValue() : "";
      inputs.push_back(std::move(t));
    }

    json::Array program, outputs, update, updateOutputs;
    if (failed(emitProgram(e, func, program, outputs)))
      return signalPassFailure();
    if (auto u = module.lookupSymbol<func::FuncOp>("apply_update"))
      if (failed(emitProgram(e, u, update, updateOutputs)))
        return signalPassFailure();

    json::Object train;
    if (auto t =
            module->getAttrOfType<DictionaryAttr>(mlir::fsdp::attrs::train))
      for (NamedAttribute a : t)
        train[a.getName().getValue()] = e.attribute(a.getValue());
    int64_t worldSize = 1;
    if (auto w =
            module->getAttrOfType<IntegerAttr>(mlir::fsdp::attrs::worldSize))
      worldSize = w.getInt();
    json::Object meta{{"source", source}, {"world_size", worldSize}};
    if (!sourceBase.empty())
      meta["source_base"] = sourceBase;
    if (auto r = module->getAttrOfType<IntegerAttr>(
            mlir::fsdp::attrs::replicateGroups))
      meta["replicate_groups"] = r.getInt();
    if (auto st =
            module->getAttrOfType<StringAttr>(mlir::fsdp::attrs::strategy))
      meta["strategy"] = st.getValue();
    if (auto b =
            module->getAttrOfType<IntegerAttr>(mlir::fsdp::attrs::batchSize))
      meta["batch_size"] = b.getInt();
    // Mixed precision: gathered, reduced and computed in.
    for (auto [key, attr] :
         {std::pair{"param_dtype", mlir::fsdp::attrs::paramDtype},
          {"reduce_dtype", mlir::fsdp::attrs::reduceDtype},
          {"compute_dtype", mlir::fsdp::attrs::computeDtype}})
      if (auto t = module->getAttrOfType<TypeAttr>(attr))
        meta[key] = dtypeName(t.getValue());
    json::Object plan{{"format", "fsdp-plan"},
                      {"version", kPlanVersion},
                      {"meta", std::move(meta)},
                      {"train", std::move(train)},
                      {"arena_bytes", arena.getInt()},
                      {"params", std::move(params)},
                      {"units", std::move(units)},
                      {"flats", std::move(flats)},
                      {"constants", std::move(e.constants)},
                      {"inputs", std::move(inputs)},
                      {"outputs", std::move(outputs)},
                      {"program", std::move(program)}};
    if (!hostBuffers.empty())
      plan["host_buffers"] = std::move(hostBuffers);
    // Offload: the host arena (absent without offload).
    if (auto host = module->getAttrOfType<IntegerAttr>(
            mlir::fsdp::attrs::hostArenaBytes))
      plan["host_arena_bytes"] = host.getInt();
    if (!update.empty()) {
      plan["update"] = std::move(update);
      plan["update_outputs"] = std::move(updateOutputs);
    }
    if (auto p = module->getAttrOfType<DictionaryAttr>(
            mlir::fsdp::attrs::predicted)) {
      json::Object predicted;
      for (NamedAttribute a : p)
        predicted[a.getName().getValue()] = e.attribute(a.getValue());
      // The arena in use over the step: (predicted time, bytes) after each
      // instruction of @train_step; memory moves with the compute stream
      // (collectives and copies end on theirs, later).
      auto series = [&](DenseI64ArrayAttr held) {
        json::Array points;
        size_t i = 0;
        double at = 0;
        for (Operation &op : body) {
          if (!held || (int64_t)i >= held.size())
            break;
          auto sim =
              op.getAttrOfType<DenseF64ArrayAttr>(mlir::fsdp::attrs::sim);
          if (sim && !isAsyncStart(&op))
            at = std::max(at, sim[1]);
          points.push_back(json::Array{at, held[i++]});
        }
        return points;
      };
      predicted["memory"] = series(
          func->getAttrOfType<DenseI64ArrayAttr>(mlir::fsdp::attrs::liveBytes));
      // Offload: the host arena in use at the same points.
      if (auto host = func->getAttrOfType<DenseI64ArrayAttr>(
              mlir::fsdp::attrs::hostLiveBytes))
        predicted["host_memory"] = series(host);
      // The same by what the buffers hold (fsdp-plan-memory's categories,
      // which add up to the arena in use at every point).
      json::Object byCategory;
      if (auto cats = func->getAttrOfType<DictionaryAttr>(
              mlir::fsdp::attrs::liveBytesByCategory))
        for (const char *name : ::fsdp::kMemoryCategories)
          if (auto held = cats.getAs<DenseI64ArrayAttr>(name)) {
            json::Array points;
            for (int64_t b : held.asArrayRef())
              points.push_back(b);
            byCategory[name] = std::move(points);
          }
      predicted["memory_by_category"] = std::move(byCategory);
      predicted["phases"] = phases(body);
      predicted["recompute_seconds"] = recomputeSeconds(body);
      plan["predicted"] = std::move(predicted);
    }

    // Sealed with a digest of its own text (runtime/support/Digest.h): the
    // runtime refuses the plan if a byte of it changes.
    plan["digest"] = std::string(::fsdp::kDigestPlaceholder);
    std::string text;
    llvm::raw_string_ostream os(text);
    os << llvm::formatv("{0:1}", json::Value(std::move(plan))) << "\n";
    os.flush();
    if (!::fsdp::sealDigest(text)) {
      module.emitError("cannot seal the plan with its digest");
      return signalPassFailure();
    }
    if (output == "-") {
      llvm::outs() << text;
      return;
    }
    // Whole or not at all (the runtime's AtomicFile): a full disk or a
    // crash leaves the previous plan as it was, and a link or device
    // planted at the name is refused, never written through.
    if (::fsdp::Status s = ::fsdp::writeFileAtomically(output, text); !s) {
      module.emitError("cannot write the plan: ") << s.message();
      return signalPassFailure();
    }
  }
};

} // namespace
