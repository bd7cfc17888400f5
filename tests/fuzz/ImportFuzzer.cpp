//===- ImportFuzzer.cpp - libFuzzer target on the ONNX importer -----------===//
//
// Feeds arbitrary bytes to importOnnxBytes, the importer's entry point. Any
// input must end in a module or in diagnostics, never in a crash, a hang or
// an unbounded allocation.
//
//===----------------------------------------------------------------------===//
#include "frontend/OnnxImporter.h"

#include "dialect/FsdpDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"

#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::fsdp::FsdpDialect, mlir::func::FuncDialect>();
  mlir::MLIRContext ctx(registry, mlir::MLIRContext::Threading::DISABLED);
  mlir::ScopedDiagnosticHandler quiet(
      &ctx, [](mlir::Diagnostic &) { return mlir::success(); });
  mlir::fsdp::ImportOptions options;
  options.batchSize = 2;
  (void)mlir::fsdp::importOnnxBytes(
      &ctx, llvm::StringRef(reinterpret_cast<const char *>(data), size),
      "fuzz.onnx", /*baseDir=*/"", options);
  return 0;
}
