//===- OnnxImporter.h - ONNX model → fsdp dialect ---------------*- C++ -*-===//
#ifndef FSDP_FRONTEND_ONNXIMPORTER_H
#define FSDP_FRONTEND_ONNXIMPORTER_H

#include "pipeline/Pipeline.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OwningOpRef.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::fsdp {

struct ImportOptions {
  /// Replaces the leading dimension of every graph input, symbolic or not.
  std::optional<int64_t> batchSize;
  /// Attention, GELU and RMSNorm recognised from the ops they are written
  /// as (fsdp.attention, fsdp.gelu, fsdp.rms_norm).
  FrontendFusions fusions;
};

/// Imports the model at `path`. External data is resolved relative to the
/// model's directory. Errors are emitted as diagnostics; returns null then.
OwningOpRef<ModuleOp> importOnnxFile(MLIRContext *ctx, StringRef path,
                                     const ImportOptions &options);

/// Imports a model held in memory (the fuzzing entry point). `displayName`
/// names the model in diagnostics; external data is resolved relative to
/// `baseDir`, and an empty `baseDir` makes any external data an error.
OwningOpRef<ModuleOp> importOnnxBytes(MLIRContext *ctx, StringRef bytes,
                                      StringRef displayName, StringRef baseDir,
                                      const ImportOptions &options);

/// The ONNX op types (default domain) the importer supports.
std::vector<StringRef> onnxSupportedOps();

/// An imported graph's float64 values computed in float32, with a warning
/// (frontend/DemoteFloat64.cpp); a float64 parameter is an error.
LogicalResult demoteFloat64(ModuleOp module);

/// Prints import diagnostics as "model.onnx: error: node 'n' (Op): message"
/// (the importer's locations are NameLoc(node) inside FileLineColLoc(file)).
class ImportDiagnosticHandler : public ScopedDiagnosticHandler {
public:
  ImportDiagnosticHandler(MLIRContext *ctx, llvm::raw_ostream &os);
};

/// Prints what a model holds: inputs, outputs, parameters grouped by
/// repeated block, op counts.
void printImportSummary(ModuleOp module, llvm::raw_ostream &os);

/// Whether `path` is a file the compiler may read: a regular file (the
/// runtime's InputFile check; a FIFO or /dev/zero would hang the reader or
/// feed it forever). `error` says why not. A path that does not exist
/// passes: the reader then names it as it always has.
bool isReadableInput(const std::string &path, std::string &error);

} // namespace mlir::fsdp

#endif // FSDP_FRONTEND_ONNXIMPORTER_H
