//===- fsdp-opt.cpp - The fsdp compiler driver ----------------------------===//
//
// On .mlir input this is mlir-opt with the fsdp dialect and passes. On .onnx
// input it imports the model first, then runs the same pass pipeline.
//
//===----------------------------------------------------------------------===//
#include "dialect/FsdpDialect.h"
#include "frontend/OnnxImporter.h"
#include "autotune/Autotune.h"
#include "costmodel/DeviceModel.h"
#include "passes/Passes.h"
#include "pipeline/Pipeline.h"
#include "pipeline/UnitTable.h"

#include "mlir/Debug/Counter.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

#include <cmath>
#include <cstdio>

using namespace mlir;

// fsdp-opt --help shows these groups; MLIR's own options are behind
// --help-hidden.
static llvm::cl::OptionCategory modelCategory("Model (import of .onnx, traced .mlir)");
static llvm::cl::OptionCategory trainCategory("Training step");
static llvm::cl::OptionCategory fsdpCategory("FSDP: units, sharding, precision, schedule");
static llvm::cl::OptionCategory deviceCategory("Device model and tuning");
static llvm::cl::OptionCategory outputCategory("Output");
static llvm::cl::opt<int64_t>
    batchSize("batch-size",
              llvm::cl::desc("Fix the leading (batch) dimension of every "
                             "graph input of an .onnx model"),
              llvm::cl::init(0), llvm::cl::cat(modelCategory));
static llvm::cl::opt<bool>
    noFuseAttention("no-fuse-attention",
                    llvm::cl::desc("Import attention subgraphs unfused"),
                    llvm::cl::cat(modelCategory));
static llvm::cl::opt<bool>
    noFuseGelu("no-fuse-gelu",
               llvm::cl::desc("Import GELU written as elementwise ops unfused"),
               llvm::cl::cat(modelCategory));
static llvm::cl::opt<bool> noFuseRmsNorm(
    "no-fuse-rms-norm",
    llvm::cl::desc("Import RMSNorm written as elementwise ops unfused"),
    llvm::cl::cat(modelCategory));
static llvm::cl::opt<bool>
    summary("summary",
            llvm::cl::desc("Print what the model holds (inputs, outputs, "
                           "parameters, blocks, ops) instead of the IR"),
            llvm::cl::cat(modelCategory));

static llvm::cl::opt<bool> listOnnxOps(
    "list-onnx-ops",
    llvm::cl::desc("Print the ONNX op types the importer supports and exit"),
    llvm::cl::cat(modelCategory));

// Training-step options, forwarded to fsdp-build-train-step when the output
// is a plan (-o model.plan).
static llvm::cl::opt<std::string>
    lossOpt("loss", llvm::cl::desc("auto | cross-entropy | mse | bce"),
            llvm::cl::init("auto"), llvm::cl::cat(trainCategory));
static llvm::cl::opt<int64_t>
    ignoreIndexOpt("ignore-index", llvm::cl::desc("cross-entropy ignore index"),
                   llvm::cl::init(-100), llvm::cl::cat(trainCategory));
static llvm::cl::opt<std::string>
    frozenOpt("frozen", llvm::cl::desc("regex of parameters not to train"),
              llvm::cl::cat(trainCategory));
static llvm::cl::opt<std::string> buffersOpt(
    "buffers",
    llvm::cl::desc("regex of initializers that are buffers: never trained, "
                   "kept whole on every rank (ONNX cannot tell a buffer the "
                   "step reads differentiably from a parameter)"),
    llvm::cl::cat(trainCategory));
static llvm::cl::opt<std::string> optimizerOpt("optimizer",
                                               llvm::cl::desc("adamw | sgd"),
                                               llvm::cl::init("adamw"),
                                               llvm::cl::cat(trainCategory));
static llvm::cl::opt<float> lrOpt("lr", llvm::cl::desc("learning rate"), llvm::cl::init(1e-3f),
                                  llvm::cl::cat(trainCategory));
static llvm::cl::opt<float> beta1Opt("beta1", llvm::cl::desc("AdamW beta1"), llvm::cl::init(0.9f),
                                     llvm::cl::cat(trainCategory));
static llvm::cl::opt<float> beta2Opt("beta2", llvm::cl::desc("AdamW beta2"), llvm::cl::init(0.999f),
                                     llvm::cl::cat(trainCategory));
static llvm::cl::opt<float> epsOpt("eps", llvm::cl::desc("AdamW epsilon"), llvm::cl::init(1e-8f),
                                   llvm::cl::cat(trainCategory));
static llvm::cl::opt<float>
    weightDecayOpt("weight-decay",
                   llvm::cl::desc("default 0.01 (AdamW), 0 (SGD)"),
                   llvm::cl::init(-1.0f), llvm::cl::cat(trainCategory));
static llvm::cl::opt<float> momentumOpt("momentum", llvm::cl::desc("SGD momentum"), llvm::cl::init(0.0f),
                                        llvm::cl::cat(trainCategory));
static llvm::cl::opt<bool> nesterovOpt("nesterov",
                                       llvm::cl::desc("SGD Nesterov momentum"),
                                       llvm::cl::cat(trainCategory));
static llvm::cl::opt<float>
    gradClipOpt("grad-clip", llvm::cl::desc("max global gradient norm"),
                llvm::cl::init(0.0f), llvm::cl::cat(trainCategory));
static llvm::cl::opt<std::string>
    lrScheduleOpt("lr-schedule", llvm::cl::desc("constant | cosine"),
                  llvm::cl::init("constant"), llvm::cl::cat(trainCategory));
static llvm::cl::opt<int64_t> warmupOpt("warmup-steps", llvm::cl::desc("linear warm-up steps"), llvm::cl::init(0),
                                        llvm::cl::cat(trainCategory));
static llvm::cl::opt<int64_t> totalStepsOpt("total-steps", llvm::cl::desc("steps of the cosine schedule"), llvm::cl::init(0),
                                            llvm::cl::cat(trainCategory));
static llvm::cl::opt<std::string> wrapOpt(
    "wrap",
    llvm::cl::desc(
        "FSDP units: transformer[:PATTERN] | class:NAME,... | size:MIN_PARAMS "
        "| regex:R1,R2,... | none"),
    llvm::cl::init("transformer"), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<int64_t>
    worldSizeOpt("world-size", llvm::cl::desc("data-parallel ranks"),
                 llvm::cl::init(1), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<std::string> strategyOpt(
    "strategy",
    llvm::cl::desc("full-shard | shard-grad-op | hybrid-shard | no-shard"),
    llvm::cl::init("full-shard"), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<int64_t> replicateGroupsOpt(
    "replicate-groups",
    llvm::cl::desc("hybrid-shard: replica groups (each shards over "
                   "world-size / R ranks)"),
    llvm::cl::init(1), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<std::string> paramDtypeOpt(
    "param-dtype",
    llvm::cl::desc("mixed precision: gather parameters in f32 | bf16 | "
                   "f16 (master weights stay f32)"),
    llvm::cl::init("f32"), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<std::string> computeDtypeOpt(
    "compute-dtype",
    llvm::cl::desc("mixed precision: activations and the forward/backward "
                   "math in f32 | bf16 | f16 (PyTorch FSDP's param_dtype "
                   "computes in it; pair it with --param-dtype)"),
    llvm::cl::init("f32"), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<std::string>
    reduceDtypeOpt("reduce-dtype",
                   llvm::cl::desc("dtype of gradient reduction (f32)"),
                   llvm::cl::init("f32"), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<std::string> bufferDtypeOpt(
    "buffer-dtype",
    llvm::cl::desc("mixed precision: keep buffers (batch norm's running "
                   "statistics, masks) in f32 | bf16 | f16, as "
                   "MixedPrecision.buffer_dtype (default: as stored, f32)"),
    llvm::cl::init(""), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<bool> syncBatchNormOpt(
    "sync-batch-norm",
    llvm::cl::desc("batch norm normalises the whole batch, every rank's "
                   "slice together (torch.nn.SyncBatchNorm; default: each "
                   "rank its own slice, as PyTorch's BatchNorm)"),
    llvm::cl::init(false), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<std::string> reshardOpt(
    "reshard-after-forward",
    llvm::cl::desc("[default|true|false|N][,UNIT=true|false|N...]: default "
                   "every unit but the root; N keeps 1/N gathered (FSDP2's "
                   "integer form); per unit after a comma"),
    llvm::cl::init("default"), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<bool>
    forwardPrefetchOpt("forward-prefetch",
                       llvm::cl::desc("prefetch the next unit in forward"),
                       llvm::cl::init(true), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<std::string>
    backwardPrefetchOpt("backward-prefetch",
                        llvm::cl::desc("pre | post | none"),
                        llvm::cl::init("pre"), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<int64_t>
    prefetchDepthOpt("prefetch-depth", llvm::cl::desc("units gathered ahead"),
                     llvm::cl::init(1), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<int64_t>
    limitAllGathersOpt("limit-all-gathers",
                       llvm::cl::desc("all-gathers in flight at once"),
                       llvm::cl::init(2), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<std::string> checkpointingOpt(
    "activation-checkpointing",
    llvm::cl::desc("none | units: recompute each unit's forward in backward "
                   "| ops: recompute all but its matmuls and attention | "
                   "UNIT[:ops],...: those units"),
    llvm::cl::init("none"), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<std::string> emitOpt(
    "emit",
    llvm::cl::desc("what -o receives: plan | mlir (default: a plan for a "
                   "*.plan output, MLIR text otherwise)"),
    llvm::cl::init(""), llvm::cl::cat(outputCategory));
static llvm::cl::opt<bool>
    unitsOpt("units", llvm::cl::desc("print the FSDP unit table of the plan"),
             llvm::cl::init(false), llvm::cl::cat(outputCategory));
static llvm::cl::opt<std::string> deviceOpt(
    "device",
    llvm::cl::desc("device model the plan is simulated on: h100-sxm | h200 | "
                   "a100-80g | cpu | FILE.json"),
    llvm::cl::init("cpu"), llvm::cl::cat(deviceCategory));
static llvm::cl::opt<std::string> simulateRuntimeOpt(
    "simulate-runtime",
    llvm::cl::desc("runtime the simulation prices: fsdp (fsdp-run's) | "
                   "fsdp2-eager (PyTorch FSDP2's all-gather copy-out and an "
                   "eager f32 RMSNorm, as torchtitan measured)"),
    llvm::cl::init("fsdp"), llvm::cl::cat(deviceCategory));
static llvm::cl::opt<int64_t>
    gpusPerNodeOpt("gpus-per-node",
                   llvm::cl::desc("devices per node (0: the device model's)"),
                   llvm::cl::init(0), llvm::cl::cat(deviceCategory));
static llvm::cl::opt<int64_t> gradAccumOpt("grad-accum", llvm::cl::desc("micro-steps per optimizer step"), llvm::cl::init(1),
                                           llvm::cl::cat(trainCategory));

static llvm::cl::opt<int64_t> mergeUnitsOpt(
    "merge-units",
    llvm::cl::desc("merge every K consecutive units into one (coarser units)"),
    llvm::cl::init(1), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<std::string> memoryBudgetOpt(
    "memory-budget",
    llvm::cl::desc("bytes a rank may use (KiB/MiB/GiB/TiB, KB/MB/GB): with "
                   "--autotune the budget to tune for (default: the "
                   "device's); alone, an error if the plan's peak exceeds it"),
    llvm::cl::cat(deviceCategory));
static llvm::cl::opt<bool> autotuneOpt(
    "autotune",
    llvm::cl::desc("choose per-unit resharding and recomputation, prefetch "
                   "depth and unit granularity for the fastest simulated "
                   "step within the memory budget"),
    llvm::cl::init(false), llvm::cl::cat(deviceCategory));

static llvm::cl::opt<std::string> autotuneCandidatesOpt(
    "autotune-candidates",
    llvm::cl::desc("with --autotune: write every plan it simulated (choices, "
                   "predicted step and peak, the chosen one marked) as JSON, "
                   "for fsdp-inspect --candidates"),
    llvm::cl::cat(deviceCategory));

/// Autotune's candidates as JSON, the chosen configuration marked.
static LogicalResult
writeCandidates(StringRef path, int64_t budget,
                const std::vector<fsdp::AutotuneCandidate> &candidates,
                const fsdp::AutotuneCandidate &chosen) {
  llvm::json::Array list;
  for (const fsdp::AutotuneCandidate &c : candidates) {
    bool isChosen = c.strategy == chosen.strategy &&
                    c.replicateGroups == chosen.replicateGroups &&
                    c.reshard == chosen.reshard &&
                    c.recompute == chosen.recompute && c.merge == chosen.merge &&
                    c.prefetchDepth == chosen.prefetchDepth;
    list.push_back(llvm::json::Object{
        {"strategy", c.strategy},
        {"replicate_groups", c.replicateGroups},
        {"reshard_after_forward", c.reshard},
        {"activation_checkpointing", c.recompute},
        {"merge_units", c.merge},
        {"prefetch_depth", c.prefetchDepth},
        {"ok", c.ok},
        {"step_seconds", c.stepSeconds},
        {"peak_bytes", c.peakBytes},
        {"arena_estimated", c.estimated},
        {"chosen", isChosen}});
  }
  std::string error;
  auto out = openOutputFile(path, &error);
  if (!out) {
    llvm::errs() << "fsdp-opt: " << error << "\n";
    return failure();
  }
  out->os() << llvm::formatv(
      "{0:2}\n", llvm::json::Value(llvm::json::Object{
                     {"format", "fsdp-autotune-candidates"},
                     {"budget_bytes", budget},
                     {"candidates", std::move(list)}}));
  out->keep();
  return success();
}

/// The plan pipeline's options, from the command line.
static fsdp::PlanConfig planConfig() {
  fsdp::PlanConfig c;
  c.wrap.wrap = wrapOpt;
  c.merge.group = mergeUnitsOpt;
  c.checkpointing.mode = checkpointingOpt;
  c.shard.worldSize = worldSizeOpt;
  c.shard.strategy = strategyOpt;
  c.shard.replicateGroups = replicateGroupsOpt;
  c.shard.paramDtype = paramDtypeOpt;
  c.shard.reduceDtype = reduceDtypeOpt;
  c.shard.bufferDtype = bufferDtypeOpt;
  c.shard.syncBatchNorm = syncBatchNormOpt;
  c.shard.reshardAfterForward = reshardOpt;
  c.schedule.forwardPrefetch = forwardPrefetchOpt;
  c.schedule.backwardPrefetch = backwardPrefetchOpt;
  c.schedule.prefetchDepth = prefetchDepthOpt;
  c.schedule.limitAllGathers = limitAllGathersOpt;
  c.simulate.device = deviceOpt;
  c.simulate.devicesPerNode = gpusPerNodeOpt;
  c.simulate.runtime = simulateRuntimeOpt;
  return c;
}

/// Train step → (autotune) → units, sharding, schedule, memory plan,
/// verification, simulation → plan file. `pm` holds the passes the command
/// line asked for before the pipeline.
/// The training flags a plan would carry, refused when they cannot mean
/// anything (a NaN learning rate was written into the plan as a bare
/// `nan` token; a negative weight decay silently became the default).
static LogicalResult checkTrainingFlags() {
  auto bad = [](const char *flag, double v, const char *want) {
    char shown[32];
    std::snprintf(shown, sizeof shown, "%g", v); // nan, inf, -1, 0.001
    llvm::errs() << "fsdp-opt: error: --" << flag << "=" << shown << ": "
                 << want << "\n";
    return failure();
  };
  auto finite = [](double v) { return std::isfinite(v); };
  if (!finite(lrOpt) || lrOpt < 0)
    return bad("lr", lrOpt, "must be a finite number >= 0");
  if (!finite(beta1Opt) || beta1Opt < 0 || beta1Opt >= 1)
    return bad("beta1", beta1Opt, "must lie in [0, 1)");
  if (!finite(beta2Opt) || beta2Opt < 0 || beta2Opt >= 1)
    return bad("beta2", beta2Opt, "must lie in [0, 1)");
  if (!finite(epsOpt) || epsOpt <= 0)
    return bad("eps", epsOpt, "must be a finite number > 0");
  if (weightDecayOpt.getNumOccurrences() &&
      (!finite(weightDecayOpt) || weightDecayOpt < 0))
    return bad("weight-decay", weightDecayOpt, "must be a finite number >= 0");
  if (!finite(momentumOpt) || momentumOpt < 0)
    return bad("momentum", momentumOpt, "must be a finite number >= 0");
  if (!finite(gradClipOpt) || gradClipOpt < 0)
    return bad("grad-clip", gradClipOpt,
               "must be a finite number >= 0 (0: no clipping)");
  if (gpusPerNodeOpt < 0)
    return bad("gpus-per-node", (double)gpusPerNodeOpt,
               "must be a count (0: the device model's)");
  return success();
}

/// Holds the remarks a compile emits (the units chosen, autotune's moves)
/// until it is known to succeed: a failed compile prints its error alone,
/// one line, not the remarks of the passes that ran before it.
class DeferredRemarks {
public:
  explicit DeferredRemarks(MLIRContext *ctx) : ctx(ctx) {
    id = ctx->getDiagEngine().registerHandler([this](Diagnostic &d) {
      if (d.getSeverity() != DiagnosticSeverity::Remark)
        return failure(); // errors and warnings go out now
      held.push_back({d.getLocation(), d.str()});
      return success();
    });
  }
  ~DeferredRemarks() { drop(); }
  /// Emits the held remarks (on success).
  void flush() {
    drop();
    for (auto &[loc, text] : held)
      emitRemark(loc) << text;
  }

private:
  void drop() {
    if (id) {
      ctx->getDiagEngine().eraseHandler(id);
      id = 0;
    }
  }
  MLIRContext *ctx;
  DiagnosticEngine::HandlerID id = 0;
  std::vector<std::pair<Location, std::string>> held;
};

/// An imported module (after `pm`'s passes) compiled into the plan at
/// `planPath`: the training step from the training flags, then the plan
/// pipeline (autotuned under --autotune), checked against
/// --memory-budget, and written only once it is known to be good; the
/// held remarks go out on success.
static LogicalResult compilePlan(PassManager &pm, ModuleOp module,
                                 StringRef planPath) {
  DeferredRemarks remarks(module.getContext());
  if (failed(checkTrainingFlags()))
    return failure();
  fsdp::FsdpBuildTrainStepOptions train;
  train.loss = lossOpt;
  train.ignoreIndex = ignoreIndexOpt;
  train.frozen = frozenOpt;
  train.buffers = buffersOpt;
  train.optimizer = optimizerOpt;
  train.lr = lrOpt;
  train.beta1 = beta1Opt;
  train.beta2 = beta2Opt;
  train.eps = epsOpt;
  train.weightDecay = weightDecayOpt;
  train.momentum = momentumOpt;
  train.nesterov = nesterovOpt;
  train.gradClip = gradClipOpt;
  train.lrSchedule = lrScheduleOpt;
  train.warmupSteps = warmupOpt;
  train.totalSteps = totalStepsOpt;
  train.gradAccum = gradAccumOpt;
  train.computeDtypeName = computeDtypeOpt;
  pm.addPass(fsdp::createFsdpBuildTrainStep(train));
  pm.addPass(fsdp::createFsdpFuseLossGrad());
  if (failed(pm.run(module)))
    return failure();

  fsdp::PlanConfig config = planConfig();
  int64_t budget = 0;
  if (memoryBudgetOpt.getNumOccurrences()) {
    auto bytes = fsdp::parseByteSize(memoryBudgetOpt);
    if (!bytes) {
      llvm::errs() << "fsdp-opt: --memory-budget: '" << memoryBudgetOpt
                   << "' is not a size (e.g. 80GiB, 512MiB, 1000000)\n";
      return failure();
    }
    budget = *bytes;
  }
  if (autotuneOpt) {
    if (!budget) {
      auto model = fsdp::loadDeviceModel(deviceOpt);
      if (model && model->memoryBytes)
        budget = model->memoryBytes;
      else {
        llvm::consumeError(model.takeError());
        llvm::errs() << "fsdp-opt: --autotune needs --memory-budget: device '"
                     << deviceOpt << "' gives no memory size\n";
        return failure();
      }
    }
    std::vector<fsdp::AutotuneCandidate> candidates;
    auto tuned = fsdp::autotunePlan(
        module, config, budget, llvm::outs(),
        autotuneCandidatesOpt.empty() ? nullptr : &candidates);
    if (!autotuneCandidatesOpt.empty() &&
        failed(writeCandidates(
            autotuneCandidatesOpt, budget, candidates,
            succeeded(tuned) ? fsdp::describeCandidate(*tuned)
                             : fsdp::AutotuneCandidate())))
      return failure();
    if (failed(tuned))
      return failure();
    config = *tuned;
  } else if (!autotuneCandidatesOpt.empty()) {
    llvm::errs() << "fsdp-opt: --autotune-candidates needs --autotune\n";
    return failure();
  }

  PassManager plan(module.getContext());
  // --mlir-timing and the IR printing flags reach the plan pipeline too.
  if (failed(applyPassManagerCLOptions(plan)))
    return failure();
  applyDefaultTimingPassManagerCLOptions(plan);
  fsdp::addPlanPasses(plan, config, /*verify=*/true);
  if (failed(plan.run(module)))
    return failure();
  if (budget && !autotuneOpt) {
    auto predicted = module->getAttrOfType<DictionaryAttr>("fsdp.predicted");
    int64_t peak = predicted.getAs<IntegerAttr>("peak_bytes").getInt();
    if (peak > budget) {
      emitError(module.getLoc(), "--memory-budget=")
          << memoryBudgetOpt << ": the plan's predicted peak is " << peak
          << " bytes, over the budget of " << budget << " (try --autotune)";
      return failure();
    }
  }
  // Written only once the plan is known to be good.
  PassManager emitter(module.getContext());
  applyDefaultTimingPassManagerCLOptions(emitter);
  fsdp::FsdpEmitPlanOptions emit;
  emit.output = planPath.str();
  emitter.addPass(fsdp::createFsdpEmitPlan(emit));
  if (failed(emitter.run(module)))
    return failure();
  if (unitsOpt)
    fsdp::printUnitTable(module, llvm::outs());
  remarks.flush();
  return success();
}

/// The --no-fuse-* flags.
static fsdp::FrontendFusions frontendFusions() {
  fsdp::FrontendFusions fusions;
  fusions.attention = !noFuseAttention;
  fusions.gelu = !noFuseGelu;
  fusions.rmsNorm = !noFuseRmsNorm;
  return fusions;
}

static int runOnnx(DialectRegistry &registry, StringRef input, StringRef output,
                   bool plan, const MlirOptMainConfig &config) {
  MLIRContext ctx(registry);
  // An error names the flag, file or op; it is never followed by the whole
  // module (MLIR appends the failing operation, here the module, by default).
  ctx.printOpOnDiagnostic(false);
  fsdp::ImportDiagnosticHandler diagnostics(&ctx, llvm::errs());
  fsdp::ImportOptions options;
  if (batchSize.getNumOccurrences())
    options.batchSize = batchSize;
  options.fusions = frontendFusions();
  OwningOpRef<ModuleOp> module = fsdp::importOnnxFile(&ctx, input, options);
  if (!module)
    return 1;

  PassManager pm(&ctx);
  if (failed(applyPassManagerCLOptions(pm)) ||
      failed(config.setupPassPipeline(pm)))
    return 1;
  applyDefaultTimingPassManagerCLOptions(pm);
  if (plan)
    return failed(compilePlan(pm, *module, output)) ? 1 : 0;
  if (failed(pm.run(*module)))
    return 1;

  std::string error;
  auto out = openOutputFile(output, &error);
  if (!out) {
    llvm::errs() << "fsdp-opt: " << error << "\n";
    return 1;
  }
  if (summary)
    fsdp::printImportSummary(*module, out->os());
  else
    module->print(out->os());
  out->keep();
  return 0;
}

/// A module in the dialect's text (a @forward with fsdp.parameter symbols)
/// compiled into a plan, as for ONNX input.
static int runMlirToPlan(DialectRegistry &registry, StringRef input,
                         StringRef output, const MlirOptMainConfig &config) {
  MLIRContext ctx(registry);
  // An error names the flag, file or op; it is never followed by the whole
  // module (MLIR appends the failing operation, here the module, by default).
  ctx.printOpOnDiagnostic(false);
  llvm::SourceMgr sources;
  SourceMgrDiagnosticHandler diagnostics(sources, &ctx);
  std::string error;
  auto file = openInputFile(input, &error);
  if (!file) {
    llvm::errs() << "fsdp-opt: " << error << "\n";
    return 1;
  }
  sources.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sources, &ctx);
  if (!module)
    return 1;
  // The weights a module names (fsdp.source, relative to the file, as the
  // tracer writes it) are a path a file named: the plan records the
  // directory the user named (this file's) as the base below which no link
  // is followed. Whatever the file says of its own base is replaced.
  {
    SmallString<256> dir(input);
    llvm::sys::fs::make_absolute(dir);
    llvm::sys::path::remove_filename(dir);
    llvm::sys::path::remove_dots(dir, /*remove_dot_dot=*/false);
    if (dir.size() > 1 && dir.back() == '/')
      dir.pop_back();
    (*module)->setAttr("fsdp.source_base",
                       StringAttr::get(&ctx, dir.str()));
  }
  // A traced PyTorch module (python/fsdp_trace) is cleaned as an imported
  // ONNX graph is; a hand-written module is taken as it is.
  if ((*module)->hasAttr("fsdp.frontend")) {
    PassManager frontend(&ctx);
    fsdp::addFrontendPasses(frontend, frontendFusions());
    if (failed(frontend.run(*module)))
      return 1;
  }
  PassManager pm(&ctx);
  if (failed(applyPassManagerCLOptions(pm)) ||
      failed(config.setupPassPipeline(pm)))
    return 1;
  return failed(compilePlan(pm, *module, output)) ? 1 : 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  DialectRegistry registry;
  registry.insert<fsdp::FsdpDialect, func::FuncDialect>();
  fsdp::registerFsdpPasses();
  registerCanonicalizerPass();
  registerCSEPass();
  registerSymbolDCEPass();

  // --help shows fsdp's options, grouped; MLIR's generic ones (the pass
  // pipeline, IR printing, timing: registered here, ahead of the parse)
  // are listed by --help-hidden.
  MlirOptMainConfig::registerCLOptions(registry);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  tracing::DebugCounter::registerCLOptions();
  const llvm::cl::OptionCategory *ours[] = {&modelCategory, &trainCategory,
                                            &fsdpCategory, &deviceCategory,
                                            &outputCategory};
  for (auto &[name, option] : llvm::cl::getRegisteredOptions()) {
    bool shown = name == "help" || name == "version";
    for (const llvm::cl::OptionCategory *c : option->Categories)
      shown |= llvm::is_contained(ours, c);
    if (!shown && option->getOptionHiddenFlag() == llvm::cl::NotHidden)
      option->setHiddenFlag(llvm::cl::Hidden);
  }
  auto [input, output] =
      registerAndParseCLIOptions(argc, argv, "fsdp compiler driver", registry);
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();
  if (listOnnxOps) {
    std::vector<std::string> names;
    for (const auto &entry : fsdp::onnxSupportedOps())
      names.push_back(entry.str());
    llvm::sort(names);
    for (const std::string &name : names)
      llvm::outs() << name << "\n";
    return 0;
  }
  // Only a regular file (or "-", standard input): a FIFO or /dev/zero is
  // an error, not a hang or an endless read (the runtime's own check).
  if (std::string error; input != "-" && !fsdp::isReadableInput(input, error)) {
    llvm::errs() << "fsdp-opt: error: " << error << "\n";
    return 1;
  }
  // The output never replaces the input (`-o model.onnx` destroyed the
  // model it was compiled from).
  if (bool same = false; input != "-" && output != "-" &&
                         !llvm::sys::fs::equivalent(input, output, same) &&
                         same) {
    llvm::errs() << "fsdp-opt: error: " << output
                 << ": is the input; write the output elsewhere\n";
    return 1;
  }
  // What is written follows --emit, else the output's extension: a plan
  // for `*.plan`, MLIR text otherwise. Said when the name does not say it
  // (`-o model.p2` silently wrote MLIR).
  bool plan;
  if (emitOpt == "plan" || emitOpt == "mlir") {
    plan = emitOpt == "plan";
  } else if (emitOpt.empty()) {
    plan = StringRef(output).ends_with(".plan");
  } else {
    llvm::errs() << "fsdp-opt: error: --emit=" << emitOpt
                 << ": expected plan or mlir\n";
    return 1;
  }
  if (unitsOpt && !plan) {
    llvm::errs() << "fsdp-opt: error: --units prints the units of a plan; "
                    "this compile writes MLIR (--emit=plan)\n";
    return 1;
  }
  if (emitOpt.empty() && !plan && output != "-" &&
      !StringRef(output).ends_with(".mlir"))
    llvm::errs() << "fsdp-opt: note: writing MLIR text to " << output
                 << " (a plan is written for a *.plan output or with "
                    "--emit=plan)\n";
  if (StringRef(input).ends_with(".onnx"))
    return runOnnx(registry, input, output, plan, config);
  // (A traced module's batch is its example inputs'.)
  if (batchSize.getNumOccurrences() || summary) {
    llvm::errs() << "fsdp-opt: --batch-size and --summary apply to .onnx "
                    "input only\n";
    return 1;
  }
  if (plan)
    return runMlirToPlan(registry, input, output, config);

  std::string error;
  auto file = openInputFile(input, &error);
  if (!file) {
    llvm::errs() << "fsdp-opt: " << error << "\n";
    return 1;
  }
  auto out = openOutputFile(output, &error);
  if (!out) {
    llvm::errs() << "fsdp-opt: " << error << "\n";
    return 1;
  }
  if (failed(MlirOptMain(out->os(), std::move(file), registry, config)))
    return 1;
  out->keep();
  return 0;
}
