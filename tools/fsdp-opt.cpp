//===- fsdp-opt.cpp - The fsdp compiler driver ----------------------------===//
//
// On .mlir input this is mlir-opt with the fsdp dialect and passes. On .onnx
// input it imports the model first, then runs the same pass pipeline.
//
//===----------------------------------------------------------------------===//
#include "dialect/FsdpDialect.h"
#include "frontend/OnnxImporter.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;

static llvm::cl::OptionCategory onnxCategory("ONNX import options");
static llvm::cl::opt<int64_t>
    batchSize("batch-size",
              llvm::cl::desc("Fix the leading (batch) dimension of every "
                             "graph input of an .onnx model"),
              llvm::cl::init(0), llvm::cl::cat(onnxCategory));
static llvm::cl::opt<bool>
    noFuseAttention("no-fuse-attention",
                    llvm::cl::desc("Import attention subgraphs unfused"),
                    llvm::cl::cat(onnxCategory));
static llvm::cl::opt<bool>
    summary("summary",
            llvm::cl::desc("Print what the model holds (inputs, outputs, "
                           "parameters, blocks, ops) instead of the IR"),
            llvm::cl::cat(onnxCategory));

static llvm::cl::opt<bool> listOnnxOps(
    "list-onnx-ops",
    llvm::cl::desc("Print the ONNX op types the importer supports and exit"),
    llvm::cl::cat(onnxCategory));

static int runOnnx(DialectRegistry &registry, StringRef input, StringRef output,
                   const MlirOptMainConfig &config) {
  MLIRContext ctx(registry);
  fsdp::ImportDiagnosticHandler diagnostics(&ctx, llvm::errs());
  fsdp::ImportOptions options;
  if (batchSize.getNumOccurrences())
    options.batchSize = batchSize;
  options.fuseAttention = !noFuseAttention;
  OwningOpRef<ModuleOp> module = fsdp::importOnnxFile(&ctx, input, options);
  if (!module)
    return 1;

  PassManager pm(&ctx);
  if (failed(applyPassManagerCLOptions(pm)) ||
      failed(config.setupPassPipeline(pm)) || failed(pm.run(*module)))
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

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  DialectRegistry registry;
  registry.insert<fsdp::FsdpDialect, func::FuncDialect>();
  fsdp::registerFsdpPasses();
  registerCanonicalizerPass();
  registerCSEPass();
  registerSymbolDCEPass();

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
  if (StringRef(input).ends_with(".onnx"))
    return runOnnx(registry, input, output, config);
  if (batchSize.getNumOccurrences() || summary) {
    llvm::errs() << "fsdp-opt: --batch-size and --summary apply to .onnx "
                    "input only\n";
    return 1;
  }

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
