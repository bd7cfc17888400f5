//===- BuildTrainStep.cpp - Loss, gradients and optimizer updates ---------===//
//
// Before:
//   func.func @forward(%x) -> tensor<f32> { ... %loss ... }
// After:
//   func.func @forward(...)            // unchanged, for evaluation
//   func.func @train_step(%x) -> (tensor<f32> loss, tensor<f32> grad_norm) {
//     ... forward ...
//     ... reverse pass (one VJP per op) ...
//     %norm = sqrt(sum_p sum_squares(g_p))
//     fsdp.adamw @p, %g_p {...}        // one per trained parameter
//     return %loss, %norm
//   }
//
//===----------------------------------------------------------------------===//
#include "dialect/AttrNames.h"
#include "autodiff/Autodiff.h"
#include "precision/ComputeDtype.h"
#include "passes/Passes.h"
#include "passes/TrainStep.h"

#include "dialect/FsdpOps.h"
#include "dialect/ShapeInference.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Regex.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPBUILDTRAINSTEP
#include "passes/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

Value scalar(OpBuilder &b, Location loc, Type element, double v) {
  auto t = RankedTensorType::get({}, element);
  return ConstantOp::create(
      b, loc, DenseElementsAttr::get(t, b.getFloatAttr(element, v)));
}

/// Mean over every element.
Value meanAll(OpBuilder &b, Location loc, Value x) {
  auto t = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> axes;
  for (int64_t i = 0; i < t.getRank(); ++i)
    axes.push_back(i);
  return ReduceMeanOp::create(b, loc, x, axes, /*keepdims=*/false);
}

struct FsdpBuildTrainStep
    : fsdp::impl::FsdpBuildTrainStepBase<FsdpBuildTrainStep> {
  using Base::Base;

  void runOnOperation() override;

private:
  FailureOr<Value> buildLoss(func::FuncOp step);
  /// --loss-average=tokens: rewrites the loss into the mean over every
  /// rank's counted targets; `loss` and `lossDef` follow the rewrite.
  LogicalResult averageOverTokens(Value &loss, Operation *&lossDef);
  /// Global norm, optional clipping and one optimizer update per gradient;
  /// returns the norm.
  Value emitUpdate(OpBuilder &b, Location loc, Type lossType,
                   ArrayRef<ParameterOp> trained,
                   SmallVector<Value> paramGrads);
};

/// Every value the forward computes or reads has an element type a
/// backend runs (runtime/plan/Plan.cpp's five), else a plan fsdp-run
/// refuses: an ONNX graph in float64 (torch 1.13's exporter writes
/// `torch.where(mask, 2.0, 0.5)` in double, and the multiplications after
/// it) or int32 is refused here, at the op that computes it.
static LogicalResult checkRunnableTypes(func::FuncOp forward) {
  auto runnable = [](Type t) {
    auto tt = dyn_cast<RankedTensorType>(t);
    if (!tt)
      return true;
    Type e = tt.getElementType();
    return e.isF32() || e.isBF16() || e.isF16() || e.isInteger(64) ||
           e.isInteger(1);
  };
  auto refuse = [](Location loc, Type t, StringRef what) {
    emitError(loc) << what << " " << t
                   << ": no backend computes its element type (they compute "
                      "f32, bf16, f16, i64 and i1); cast it, or export the "
                      "model in float32";
    return failure();
  };
  for (BlockArgument arg : forward.getArguments())
    if (!arg.use_empty() && !runnable(arg.getType()))
      return refuse(forward.getLoc(), arg.getType(),
                    "input " + std::to_string(arg.getArgNumber()) + " is");
  WalkResult r = forward.walk([&](Operation *op) {
    for (Value v : op->getResults())
      if (!v.use_empty() && !runnable(v.getType()))
        return refuse(op->getLoc(), v.getType(),
                      "'" + op->getName().getStringRef().str() + "' computes")
                       .succeeded()
                   ? WalkResult::advance()
                   : WalkResult::interrupt();
    return WalkResult::advance();
  });
  return failure(r.wasInterrupted());
}

FailureOr<Value> FsdpBuildTrainStep::buildLoss(func::FuncOp step) {
  Block &body = step.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  OpBuilder b(ret);
  Location loc = step.getLoc();

  auto outputs = [&] {
    std::string s;
    llvm::raw_string_ostream os(s);
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      auto name = step.getResultAttrOfType<StringAttr>(i, mlir::fsdp::attrs::name);
      os << (i ? ", " : "") << (name ? name.getValue() : "?") << " : "
         << v.getType();
    }
    return s;
  };
  auto floatOutputs = [&](int64_t minRank) {
    SmallVector<Value> found;
    for (Value v : ret.getOperands()) {
      auto t = cast<RankedTensorType>(v.getType());
      if (isa<FloatType>(t.getElementType()) && t.getRank() >= minRank)
        found.push_back(v);
    }
    return found;
  };

  if (loss == "auto") {
    SmallVector<Value> scalars;
    for (Value v : floatOutputs(0))
      if (cast<RankedTensorType>(v.getType()).getRank() == 0)
        scalars.push_back(v);
    if (scalars.size() != 1)
      return emitError(loc, "--loss=auto needs exactly one scalar float graph "
                            "output, the graph has: ")
             << outputs() << "; choose --loss=cross-entropy, mse or bce";
    return scalars.front();
  }
  if (loss != "cross-entropy" && loss != "mse" && loss != "bce")
    return emitError(loc, "unknown --loss '")
           << loss << "' (auto, cross-entropy, mse or bce)";

  SmallVector<Value> candidates = floatOutputs(loss == "cross-entropy" ? 2 : 1);
  if (candidates.size() != 1)
    return emitError(loc, "--loss=")
           << loss << " needs exactly one float output of rank >= "
           << (loss == "cross-entropy" ? 2 : 1)
           << ", the graph has: " << outputs();
  Value out = candidates.front();
  auto outType = cast<RankedTensorType>(out.getType());
  Type targetType = loss == "cross-entropy"
                        ? RankedTensorType::get(outType.getShape().drop_back(),
                                                b.getI64Type())
                        : (Type)outType;
  unsigned index = step.getNumArguments();
  if (failed(step.insertArgument(index, targetType, {}, loc)))
    return failure();
  step.setArgAttr(index, mlir::fsdp::attrs::name, b.getStringAttr("targets"));
  Value targets = body.getArgument(index);

  if (loss == "cross-entropy") {
    // [N, ..., C] logits against [N, ...] classes, mean over positions.
    int64_t classes = outType.getShape().back();
    int64_t rows = outType.getNumElements() / std::max<int64_t>(classes, 1);
    Value logits = ReshapeOp::create(
        b, loc,
        RankedTensorType::get({rows, classes}, outType.getElementType()), out);
    Value flat = ReshapeOp::create(
        b, loc, RankedTensorType::get({rows}, b.getI64Type()), targets);
    auto ce = CrossEntropyOp::create(
        b, loc, TypeRange{RankedTensorType::get({}, outType.getElementType())},
        ValueRange{logits, flat},
        {b.getNamedAttr("ignore_index", b.getI64IntegerAttr(ignoreIndex))});
    return ce.getResult();
  }
  Type et = outType.getElementType();
  if (loss == "mse") {
    Value d = SubOp::create(b, loc, out, targets);
    return meanAll(b, loc, MulOp::create(b, loc, d, d));
  }
  // BCE with logits, stable form: max(x, 0) - x*t + log(1 + exp(-|x|)).
  Value softplus = LogOp::create(
      b, loc,
      AddOp::create(
          b, loc, scalar(b, loc, et, 1.0),
          ExpOp::create(b, loc,
                        NegOp::create(b, loc, AbsOp::create(b, loc, out)))));
  Value terms =
      AddOp::create(b, loc,
                    SubOp::create(b, loc, ReluOp::create(b, loc, out),
                                  MulOp::create(b, loc, out, targets)),
                    softplus);
  return meanAll(b, loc, terms);
}

Value FsdpBuildTrainStep::emitUpdate(OpBuilder &b, Location loc, Type lossType,
                                     ArrayRef<ParameterOp> trained,
                                     SmallVector<Value> paramGrads) {
  // Global gradient norm (logged, and used by clipping).
  Type et = cast<RankedTensorType>(lossType).getElementType();
  Value sumSq = scalar(b, loc, et, 0.0);
  for (Value g : paramGrads) {
    if (!g)
      continue;
    Value gf = g;
    if (cast<RankedTensorType>(g.getType()).getElementType() != et)
      gf = CastOp::create(
          b, loc,
          RankedTensorType::get(cast<RankedTensorType>(g.getType()).getShape(),
                                et),
          g);
    // One pass over the gradient (no squared copy of it).
    Value s = SumSquaresOp::create(b, loc, RankedTensorType::get({}, et), gf);
    sumSq = AddOp::create(b, loc, sumSq, s);
  }
  Value norm = SqrtOp::create(b, loc, sumSq);
  // clip_grad_norm_: every gradient is scaled by min(max_norm / (norm +
  // 1e-6), 1), fused into the optimizer update.
  Value coef = scalar(b, loc, et, 1.0);
  if (gradClip > 0)
    coef = MinOp::create(
        b, loc,
        DivOp::create(b, loc, scalar(b, loc, et, gradClip),
                      AddOp::create(b, loc, norm, scalar(b, loc, et, 1e-6))),
        coef);
  // Plus norm - norm: 0 when the norm is finite, NaN when it is not. A
  // non-finite gradient anywhere makes every update's scale non-finite,
  // and the update kernels then leave the parameter and its moments as
  // they were (GradScaler's skipped step): a NaN or inf never reaches the
  // state, and fsdp-run stops or skips on the non-finite norm it reports.
  coef = AddOp::create(b, loc, coef, SubOp::create(b, loc, norm, norm));

  float wd =
      weightDecay >= 0 ? weightDecay : (optimizer == "adamw" ? 0.01f : 0.0f);
  for (auto [constParam, g] : llvm::zip(trained, paramGrads)) {
    ParameterOp param = constParam;
    if (!g) {
      // As PyTorch FSDP keeps module buffers: whole on every rank.
      param.setBuffer(true);
      param.emitRemark("parameter '")
          << param.getSymName()
          << "' does not affect the loss: a buffer (no gradient, no update, "
             "kept whole on every rank, never sharded)";
      continue;
    }
    auto ref = FlatSymbolRefAttr::get(param.getSymNameAttr());
    Value scale = coef;
    Type ge = cast<RankedTensorType>(g.getType()).getElementType();
    if (coef && ge != et)
      scale = CastOp::create(b, loc, RankedTensorType::get({}, ge), coef);
    if (optimizer == "adamw")
      AdamWOp::create(b, loc, /*copy=*/Type(), ref, g, scale,
                      b.getF32FloatAttr(lr), b.getF32FloatAttr(beta1),
                      b.getF32FloatAttr(beta2), b.getF32FloatAttr(eps),
                      b.getF32FloatAttr(wd), /*into=*/FlatSymbolRefAttr());
    else
      SgdOp::create(b, loc, ref, g, scale, b.getF32FloatAttr(lr),
                    b.getF32FloatAttr(momentum), b.getBoolAttr(nesterov),
                    b.getF32FloatAttr(wd));
  }

  return norm;
}

/// The op computing `loss` under its casts.
static Operation *lossSource(Value loss) {
  Operation *def = loss.getDefiningOp();
  while (auto cast = dyn_cast_or_null<CastOp>(def))
    def = cast.getX().getDefiningOp();
  return def;
}

/// Whether `def` is a mean over counted targets (a cross-entropy or NLL
/// loss with an ignore_index, unweighted): the loss whose average over
/// ranks --loss-average chooses.
static bool isCountedMean(Operation *def) {
  if (!isa_and_nonnull<CrossEntropyOp, NllLossOp>(def) ||
      def->getNumOperands() > 2 || !def->hasAttr("ignore_index"))
    return false;
  auto reduction = def->getAttrOfType<StringAttr>("reduction");
  return !reduction || reduction.getValue() == "mean";
}

/// A data-parallel step averages the ranks' losses (InsertCollectives) and
/// their gradients (the reduce-scatter's average). With a mean over counted
/// targets (ignore_index at padding) whose count differs by rank, that is
/// the mean of the ranks' means, as PyTorch DDP and FSDP compute it. For
/// `tokens`, rank r's mean loss becomes its sum s_r divided by the ranks'
/// mean count: s_r · W / N, N = Σ n_r, whose average over the W ranks is
/// Σ s_r / N, the mean over every counted target of the global batch. A
/// rank without a counted target adds 0 (where its own mean is 0/0). The
/// count depends on the data alone, so the gradient is that of the sum,
/// scaled. With one rank, or no ignore_index, nothing changes.
LogicalResult FsdpBuildTrainStep::averageOverTokens(Value &loss,
                                                    Operation *&lossDef) {
  Operation *def = lossSource(loss);
  if (!isa_and_nonnull<CrossEntropyOp, NllLossOp>(def)) {
    InFlightDiagnostic d = emitError(
        def ? def->getLoc() : loss.getLoc(),
        "--loss-average=tokens needs the loss to be a mean cross-entropy or "
        "NLL loss over class targets, whose counted targets it averages "
        "over; this loss is ");
    if (def)
      d << "computed by '" << def->getName() << "'";
    else
      d << "a graph input";
    return d;
  }
  auto reduction = def->getAttrOfType<StringAttr>("reduction");
  if (def->getNumOperands() > 2)
    return emitError(def->getLoc(), "--loss-average=tokens needs an unweighted "
                                    "mean loss; this '")
           << def->getName() << "' has class weights";
  if (!reduction || reduction.getValue() != "mean")
    return emitError(def->getLoc(), "--loss-average=tokens needs a mean loss; "
                                    "this '")
           << def->getName() << "' has reduction '"
           << (reduction ? reduction.getValue() : StringRef()) << "'";
  if (gradAccum > 1)
    return emitError(def->getLoc(),
                     "--loss-average=tokens with --grad-accum > 1: the count "
                     "would span the micro-steps (use --grad-accum=1)");
  auto ignore = def->getAttrOfType<IntegerAttr>("ignore_index");
  if (worldSize <= 1 || !ignore)
    return success(); // every rank counts its whole, equal target

  OpBuilder b(def);
  b.setInsertionPointAfter(def);
  Location loc = def->getLoc();
  Value target = def->getOperand(1);
  auto tt = cast<RankedTensorType>(target.getType());
  Type f32 = b.getF32Type();
  Value ignoreValue = ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(RankedTensorType::get({}, tt.getElementType()),
                             b.getIntegerAttr(tt.getElementType(),
                                              ignore.getInt())));
  Value ignored = EqualOp::create(
      b, loc, RankedTensorType::get(tt.getShape(), b.getI1Type()), target,
      ignoreValue);
  Value counted =
      CastOp::create(b, loc, RankedTensorType::get(tt.getShape(), f32),
                     NotOp::create(b, loc, ignored));
  SmallVector<int64_t> axes;
  for (int64_t i = 0; i < tt.getRank(); ++i)
    axes.push_back(i);
  Value n = axes.empty() ? counted
                         : (Value)ReduceSumOp::create(b, loc, counted, axes,
                                                      /*keepdims=*/false);
  auto start = AllReduceOp::create(
      b, loc, FutureType::get(b.getContext(), cast<RankedTensorType>(n.getType())),
      n, b.getI64IntegerAttr(worldSize), b.getStringAttr("avg"), StringAttr());
  Value meanCount = WaitOp::create(b, loc, start.getFuture());
  Operation *sum = b.clone(*def);
  sum->setAttr("reduction", b.getStringAttr("sum"));
  auto scaled = DivOp::create(b, loc, sum->getResult(0), meanCount);
  if (loss == def->getResult(0))
    loss = scaled;
  if (lossDef == def)
    lossDef = scaled;
  def->getResult(0).replaceAllUsesWith(scaled.getResult());
  def->erase();
  return success();
}

/// Every attention of the step keeps its rows' log-sum-exp (with_lse) for
/// its backward, which then reads it and the output (fused backwards take
/// the softmax statistics; FlashAttention-2's and cuDNN's do).
static void keepAttentionStatistics(Block &body) {
  SmallVector<AttentionOp> plain;
  for (auto op : body.getOps<AttentionOp>())
    if (!op.getWithLse())
      plain.push_back(op);
  for (AttentionOp op : plain) {
    OpBuilder b(op);
    auto kept = AttentionOp::create(
        b, op.getLoc(), op.getQ(), op.getK(), op.getV(), op.getMask(),
        op.getCausalAttr(), op.getScaleAttr(), op.getSafeSoftmaxAttr(),
        op.getAverageEmptyRowsAttr(), b.getUnitAttr(), op.getLayoutAttr());
    // Marks the passes before this one set (module paths, units) stay.
    for (NamedAttribute a : op->getDiscardableAttrs())
      kept->setAttr(a.getName(), a.getValue());
    op.getResult().replaceAllUsesWith(kept.getResult());
    op.erase();
  }
}

void FsdpBuildTrainStep::runOnOperation() {
  ModuleOp module = getOperation();
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward) {
    module.emitError("no func.func @forward to build a training step from");
    return signalPassFailure();
  }
  if (module.lookupSymbol("train_step")) {
    module.emitError("the module already has a @train_step");
    return signalPassFailure();
  }
  if (optimizer != "adamw" && optimizer != "sgd") {
    module.emitError("unknown --optimizer '")
        << optimizer << "' (adamw or sgd)";
    return signalPassFailure();
  }
  if (lrSchedule != "constant" && lrSchedule != "cosine") {
    module.emitError("unknown --lr-schedule '")
        << lrSchedule << "' (constant or cosine)";
    return signalPassFailure();
  }
  if (gradAccum < 1 || warmupSteps < 0 || totalSteps < 0 || gradClip < 0) {
    module.emitError("--grad-accum must be >= 1 and --warmup-steps, "
                     "--total-steps, --grad-clip >= 0");
    return signalPassFailure();
  }
  if (failed(checkRunnableTypes(forward)))
    return signalPassFailure();
  FloatType compute = computeDtype(&getContext(), computeDtypeName);
  if (!compute) {
    module.emitError("unknown --compute-dtype '")
        << computeDtypeName << "' (f32, bf16 or f16)";
    return signalPassFailure();
  }
  llvm::Regex frozenRe(frozen), buffersRe(buffers);
  std::string reError;
  if (!frozen.empty() && !frozenRe.isValid(reError)) {
    module.emitError("invalid --frozen regular expression '")
        << frozen << "': " << reError;
    return signalPassFailure();
  }
  if (!buffers.empty() && !buffersRe.isValid(reError)) {
    module.emitError("invalid --buffers regular expression '")
        << buffers << "': " << reError;
    return signalPassFailure();
  }
  // --buffers: what the user knows to be buffers (ONNX exports a module's
  // buffers as initializers, like its parameters).
  if (!buffers.empty())
    for (auto param : module.getOps<ParameterOp>())
      if (buffersRe.match(param.getSymName()))
        param.setBuffer(true);

  OpBuilder mb(module.getBodyRegion());
  mb.setInsertionPointAfter(forward);
  auto step = cast<func::FuncOp>(mb.clone(*forward));
  step.setName("train_step");
  Block &body = step.getBody().front();

  FailureOr<Value> lossValue = buildLoss(step);
  if (failed(lossValue))
    return signalPassFailure();
  Operation *lossDef = lossValue->getDefiningOp();
  module->setAttr(mlir::fsdp::attrs::computeDtype, TypeAttr::get(compute));
  if (!compute.isF32()) {
    lossValue = castToComputeDtype(step, compute, *lossValue);
    if (!*lossValue)
      return signalPassFailure();
  }

  // What the forward overwrites (batch norm's running statistics) is a
  // buffer: state the step updates itself, never trained.
  for (auto assign : body.getOps<AssignBufferOp>())
    if (auto param = dyn_cast_or_null<ParameterOp>(
            SymbolTable::lookupSymbolIn(module, assign.getParamAttr())))
      if (!param.getBuffer()) {
        param.setBuffer(true);
        param.emitRemark("'")
            << param.getSymName()
            << "' is a buffer: the forward overwrites it (never trained, "
               "kept whole on every rank)";
      }

  // Trained parameters and every read of them inside the step.
  SmallVector<ParameterOp> trained;
  SmallVector<Value> wrt;
  SmallVector<unsigned> owner; // wrt index -> trained index
  for (auto param : module.getOps<ParameterOp>()) {
    if (!isa<FloatType>(param.getTensorType().getElementType()) ||
        param.getBuffer() || param.getFrozen() ||
        (!frozen.empty() && frozenRe.match(param.getSymName())))
      continue;
    trained.push_back(param);
    for (auto read : body.getOps<GetParameterOp>())
      if (read.getParam() == param.getSymName()) {
        wrt.push_back(read.getResult());
        owner.push_back(trained.size() - 1);
      }
  }

  // A step that trains nothing is a mistake, not a plan (a --frozen that
  // matches every name; a model without float parameters).
  if (trained.empty()) {
    if (frozen.empty())
      module.emitError("the model has no floating-point parameter to train "
                       "(none that is not frozen or a buffer)");
    else
      module.emitError("--frozen '")
          << frozen << "' matches every parameter: nothing to train";
    return signalPassFailure();
  }

  if (lossAverage == "tokens") {
    if (failed(averageOverTokens(*lossValue, lossDef)))
      return signalPassFailure();
  } else if (lossAverage == "ranks") {
    // Said, since it is the one place where the two conventions a user may
    // come from (PyTorch DDP/FSDP, transformers' Trainer) part.
    if (Operation *def = lossSource(*lossValue);
        worldSize > 1 && isCountedMean(def))
      emitRemark(def->getLoc())
          << "the loss is a mean over counted targets (ignore_index): each "
             "rank averages its own, and the ranks' means are averaged, as "
             "PyTorch DDP and FSDP do; --loss-average=tokens takes the mean "
             "over every rank's targets, as transformers' Trainer does";
  } else {
    module.emitError("unknown --loss-average '")
        << lossAverage << "' (ranks or tokens)";
    return signalPassFailure();
  }
  if (lossDef)
    lossDef->setAttr(kLossAttr, UnitAttr::get(&getContext()));
  Value differentiated = *lossValue;
  if (gradAccum > 1) {
    OpBuilder sb(body.getTerminator());
    differentiated = MulOp::create(
        sb, step.getLoc(), *lossValue,
        scalar(sb, step.getLoc(),
               cast<RankedTensorType>(lossValue->getType()).getElementType(),
               1.0 / gradAccum));
  }
  keepAttentionStatistics(body);
  auto grads = buildGradients(body, differentiated, wrt);
  if (failed(grads))
    return signalPassFailure();
  // A gradient stop has done its work once the gradients are built: the
  // forward reads its operand.
  body.walk([](StopGradientOp stop) {
    stop.getResult().replaceAllUsesWith(stop.getX());
    stop.erase();
  });

  auto ret = cast<func::ReturnOp>(body.getTerminator());
  OpBuilder b(ret);
  Location loc = step.getLoc();
  SmallVector<Value> paramGrads(trained.size());
  // A gradient is final where it is defined: its cast (and the sum of a
  // parameter read more than once) go right there, not before the return,
  // so each unit's reduce-scatter can be issued during the backward and the
  // unsharded compute-dtype gradient freed at once.
  OpBuilder gb(&getContext());
  auto after = [&](Value v, Value w = {}) {
    Operation *d = v.getDefiningOp();
    if (w)
      if (Operation *e = w.getDefiningOp(); e && (!d || d->isBeforeInBlock(e)))
        d = e;
    if (d)
      gb.setInsertionPointAfter(d);
    else
      gb.setInsertionPointToStart(&body);
  };
  for (auto [i, g] : llvm::enumerate(*grads)) {
    if (!g)
      continue;
    // Computed in the compute dtype; summed, reduced and applied in the
    // parameter's (the master weights').
    RankedTensorType paramType = trained[owner[i]].getTensorType();
    if (cast<RankedTensorType>(g.getType()) != paramType) {
      after(g);
      g = CastOp::create(gb, loc, paramType, g);
    }
    Value &slot = paramGrads[owner[i]];
    if (slot) {
      after(slot, g);
      slot = AddOp::create(gb, loc, slot, g).getResult();
    } else {
      slot = g;
    }
  }

  // ONNX exports a module's buffers as initializers, like its parameters;
  // one the step reads differentiably (a position table added to the
  // embeddings) gets a gradient and would be trained, where PyTorch never
  // trains a buffer. Parameters are named `...weight`/`...bias` by
  // torch.nn's modules; any other name of an imported model (one with an
  // ONNX opset) that gets a gradient is said (one that gets none becomes a
  // buffer, and is said so by the update).
  for (auto [constParam, g] : llvm::zip(trained, paramGrads)) {
    ParameterOp param = constParam;
    StringRef leaf = param.getSymName().rsplit('.').second;
    if (leaf.empty())
      leaf = param.getSymName();
    if (g && module->hasAttr(mlir::fsdp::attrs::opset) && !leaf.ends_with("weight") &&
        !leaf.ends_with("bias"))
      param.emitRemark("'")
          << param.getSymName()
          << "' is trained as a parameter; if it is a buffer in PyTorch "
             "(register_buffer), name it with --buffers";
  }

  SmallVector<Type> argTypes(body.getArgumentTypes());
  Type lossType = lossValue->getType();
  if (gradAccum == 1) {
    // One function: forward, backward, update.
    Value norm = emitUpdate(b, loc, lossType, trained, paramGrads);
    func::ReturnOp::create(b, loc, ValueRange{*lossValue, norm});
    ret.erase();
    step.setFunctionType(
        b.getFunctionType(argTypes, {lossType, norm.getType()}));
    step.setAllResultAttrs(ArrayRef<DictionaryAttr>{
        b.getDictionaryAttr(
            b.getNamedAttr(mlir::fsdp::attrs::name, b.getStringAttr("loss"))),
        b.getDictionaryAttr(
            b.getNamedAttr(mlir::fsdp::attrs::name, b.getStringAttr("grad_norm")))});
  } else {
    // Micro-steps accumulate (gradients of loss / K); @apply_update reads
    // the sums and updates, once per K micro-steps.
    for (auto [param, g] : llvm::zip(trained, paramGrads))
      if (g)
        AccumulateGradOp::create(
            b, loc, FlatSymbolRefAttr::get(param.getSymNameAttr()), g);
    func::ReturnOp::create(b, loc, ValueRange{*lossValue});
    ret.erase();
    step.setFunctionType(b.getFunctionType(argTypes, {lossType}));
    step.setAllResultAttrs(ArrayRef<DictionaryAttr>{b.getDictionaryAttr(
        b.getNamedAttr(mlir::fsdp::attrs::name, b.getStringAttr("loss")))});

    OpBuilder ub(module.getBodyRegion());
    ub.setInsertionPointAfter(step);
    auto update = func::FuncOp::create(ub, loc, "apply_update",
                                       ub.getFunctionType({}, {}));
    Block *ubody = update.addEntryBlock();
    ub.setInsertionPointToEnd(ubody);
    SmallVector<Value> sums(trained.size());
    for (auto [i, param] : llvm::enumerate(trained))
      if (paramGrads[i])
        sums[i] =
            ReadGradOp::create(ub, loc, paramGrads[i].getType(),
                               FlatSymbolRefAttr::get(param.getSymNameAttr()));
    Value norm = emitUpdate(ub, loc, lossType, trained, sums);
    func::ReturnOp::create(ub, loc, ValueRange{norm});
    update.setFunctionType(ub.getFunctionType({}, {norm.getType()}));
    update.setResultAttr(0, mlir::fsdp::attrs::name, ub.getStringAttr("grad_norm"));
  }
  eraseDeadOps(body);

  module->setAttr(
      mlir::fsdp::attrs::train,
      b.getDictionaryAttr({
          b.getNamedAttr("loss", b.getStringAttr(loss)),
          b.getNamedAttr("loss_average", b.getStringAttr(lossAverage)),
          b.getNamedAttr("optimizer", b.getStringAttr(optimizer)),
          b.getNamedAttr("lr_schedule", b.getStringAttr(lrSchedule)),
          b.getNamedAttr("warmup_steps", b.getI64IntegerAttr(warmupSteps)),
          b.getNamedAttr("total_steps", b.getI64IntegerAttr(totalSteps)),
          b.getNamedAttr("grad_accum", b.getI64IntegerAttr(gradAccum)),
          b.getNamedAttr("grad_clip", b.getF32FloatAttr(gradClip)),
      }));
}

} // namespace
