//===- fsdp-opt.cpp - The fsdp compiler driver ----------------------------===//
//
// On .mlir input this is mlir-opt with the fsdp dialect and passes. On .onnx
// input it imports the model first, then runs the same pass pipeline.
//
//===----------------------------------------------------------------------===//
#include "dialect/AttrNames.h"
#include "dialect/FsdpDialect.h"
#include "frontend/OnnxImporter.h"
#include "autotune/Autotune.h"
#include "costmodel/DeviceModel.h"
#include "costmodel/ThisMachine.h"
#include "passes/Passes.h"
#include "pipeline/DriverFlag.h"
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

// The flags that set a pass option: each is that option of Passes.td (its
// name, type, default and help), generated from pipeline/DriverFlags.td.
#define FSDP_CHOICES(...)                                                      \
  { __VA_ARGS__ }
#define FSDP_FLAG(PASS, FIELD, ARG, TYPE, GROUP, HELP, CHOICES)                \
  static fsdp::Flag<TYPE> PASS##_##FIELD(ARG, HELP, fsdp::PASS##Options().FIELD, \
                                         GROUP##Category, CHOICES);
#include "DriverFlags.inc"
#undef FSDP_FLAG

/// The flags' values, in the options structs of their passes.
struct PassFlags {
  fsdp::FsdpBuildTrainStepOptions train;
  fsdp::PlanConfig plan;
};
static PassFlags passFlags() {
  PassFlags f;
  auto &FsdpBuildTrainStep = f.train;
  auto &FsdpWrapUnits = f.plan.wrap;
  auto &FsdpMergeUnits = f.plan.merge;
  auto &FsdpCheckpointActivations = f.plan.checkpointing;
  auto &FsdpShard = f.plan.shard;
  auto &FsdpOffload = f.plan.offload;
  auto &FsdpSchedule = f.plan.schedule;
  auto &FsdpSimulate = f.plan.simulate;
#define FSDP_FLAG(PASS, FIELD, ...) PASS.FIELD = PASS##_##FIELD;
#include "DriverFlags.inc"
#undef FSDP_FLAG
  return f;
}

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
static llvm::cl::opt<bool> noAttentionLayout(
    "no-attention-layout",
    llvm::cl::desc("Keep the head transposes around attention (no "
                   "fsdp-attention-layout)"),
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

static fsdp::Flag<std::string>
    emitOpt("emit",
            "what -o receives: plan | mlir (default: a plan for a *.plan "
            "output, MLIR text otherwise)",
            "", outputCategory, {"plan", "mlir"});
static llvm::cl::opt<bool>
    unitsOpt("units", llvm::cl::desc("print the FSDP unit table of the plan"),
             llvm::cl::init(false), llvm::cl::cat(outputCategory));

static llvm::cl::opt<std::string> memoryBudgetOpt(
    "memory-budget",
    llvm::cl::desc("bytes a rank may use (KiB/MiB/GiB/TiB, KB/MB/GB): with "
                   "--autotune the budget to tune for (default: the "
                   "device's); alone, an error if the plan's peak exceeds it"),
    llvm::cl::cat(deviceCategory));
static fsdp::Flag<std::string> launcherOpt(
    "launcher",
    "what will launch a plan of several ranks on this machine, for "
    "--device=cpu's collectives: mpirun (MPI, default) | torchrun (Gloo; "
    "also srun without MPI)",
    "mpirun", deviceCategory, {"mpirun", "torchrun"});
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
  const fsdp::FsdpBuildTrainStepOptions t = passFlags().train;
  if (!finite(t.lr) || t.lr < 0)
    return bad("lr", t.lr, "must be a finite number >= 0");
  if (!finite(t.beta1) || t.beta1 < 0 || t.beta1 >= 1)
    return bad("beta1", t.beta1, "must lie in [0, 1)");
  if (!finite(t.beta2) || t.beta2 < 0 || t.beta2 >= 1)
    return bad("beta2", t.beta2, "must lie in [0, 1)");
  if (!finite(t.eps) || t.eps <= 0)
    return bad("eps", t.eps, "must be a finite number > 0");
  if (FsdpBuildTrainStep_weightDecay.getNumOccurrences() &&
      (!finite(t.weightDecay) || t.weightDecay < 0))
    return bad("weight-decay", t.weightDecay, "must be a finite number >= 0");
  if (!finite(t.momentum) || t.momentum < 0)
    return bad("momentum", t.momentum, "must be a finite number >= 0");
  if (!finite(t.gradClip) || t.gradClip < 0)
    return bad("grad-clip", t.gradClip,
               "must be a finite number >= 0 (0: no clipping)");
  if (FsdpSimulate_devicesPerNode < 0)
    return bad("gpus-per-node", (double)FsdpSimulate_devicesPerNode,
               "must be a count (0: the device model's)");
  return success();
}

static const char *argv0 = "fsdp-opt";

/// The device the plan is priced on: --device, else $FSDP_DEVICE, else
/// cpu; and cpu is this machine, as fsdp-run has calibrated it for the
/// engine the plan's ranks will use (costmodel/ThisMachine.h).
static LogicalResult resolveDevice(fsdp::PlanConfig &config) {
  std::string &device = config.simulate.device;
  if (!FsdpSimulate_device.getNumOccurrences())
    if (const char *env = std::getenv("FSDP_DEVICE"); env && *env)
      device = env;
  if (device != "cpu")
    return success();
  auto path = fsdp::thisMachineCalibration(
      argv0, fsdp::collectiveEngine(config.shard.worldSize, launcherOpt));
  if (!path) {
    llvm::errs() << "fsdp-opt: error: " << llvm::toString(path.takeError())
                 << "\n";
    return failure();
  }
  device = *path;
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
  PassFlags flags = passFlags();
  flags.train.worldSize = flags.plan.shard.worldSize;
  fsdp::PlanConfig config = flags.plan;
  if (failed(resolveDevice(config)))
    return failure();
  pm.addPass(fsdp::createFsdpBuildTrainStep(flags.train));
  pm.addPass(fsdp::createFsdpFuseLossGrad());
  // The bias gradients in the weight GEMMs' epilogue: for a GPU, whose
  // GEMM library has one (a CPU would run the same reduction after the
  // product, and its plans stay as they were).
  if (auto model = fsdp::loadDeviceModel(config.simulate.device);
      model && model->cores == 0)
    pm.addPass(fsdp::createFsdpFuseBiasGrad());
  else if (!model)
    llvm::consumeError(model.takeError()); // said where the plan is priced
  if (failed(pm.run(module)))
    return failure();

  // A model traced with its own torch.utils.checkpoint calls asked for
  // per-layer recomputation: planned so, unless the flag says otherwise
  // (--autotune chooses for itself).
  if (auto calls = module->getAttrOfType<IntegerAttr>(
          mlir::fsdp::attrs::checkpointedCalls);
      calls && calls.getInt() > 0 && !autotuneOpt &&
      !FsdpCheckpointActivations_mode.getNumOccurrences()) {
    config.checkpointing.mode = "units";
    emitRemark(module.getLoc())
        << "the model checkpoints its activations (torch.utils.checkpoint, "
        << calls.getInt()
        << " call(s) while traced): --activation-checkpointing=units, each "
           "unit's forward recomputed in backward (pass "
           "--activation-checkpointing=none to keep every activation)";
  }
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
      auto model = fsdp::loadDeviceModel(config.simulate.device);
      if (model && model->memoryBytes)
        budget = model->memoryBytes;
      else {
        llvm::consumeError(model.takeError());
        llvm::errs() << "fsdp-opt: --autotune needs --memory-budget: device '"
                     << config.simulate.device << "' gives no memory size\n";
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
    auto predicted = module->getAttrOfType<DictionaryAttr>(mlir::fsdp::attrs::predicted);
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
  fusions.attentionLayout = !noAttentionLayout;
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
    (*module)->setAttr(mlir::fsdp::attrs::sourceBase,
                       StringAttr::get(&ctx, dir.str()));
  }
  // A traced PyTorch module (python/fsdp_trace) is cleaned as an imported
  // ONNX graph is; a hand-written module is taken as it is.
  if ((*module)->hasAttr(mlir::fsdp::attrs::frontend)) {
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
  argv0 = argv[0];
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
  if (!emitOpt.empty())
    plan = emitOpt == "plan";
  else
    plan = StringRef(output).ends_with(".plan");
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
