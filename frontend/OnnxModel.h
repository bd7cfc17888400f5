//===- OnnxModel.h - Parse and validate an ONNX model -----------*- C++ -*-===//
//
// The first stage of import, before any op is built: protobuf parsing, then
// the checks protobuf cannot make (IR version, opsets, duplicate or missing
// value names, cycles, outputs nobody produces). Errors go to the MLIR
// diagnostic engine at `loc` and name the node or field at fault.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_FRONTEND_ONNXMODEL_H
#define FSDP_FRONTEND_ONNXMODEL_H

#include "mlir/IR/Location.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringMap.h"

#include <memory>
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
class GraphProto;
class NodeProto;
} // namespace onnx

namespace mlir::fsdp {

struct OnnxGraph {
  std::unique_ptr<onnx::ModelProto> model;
  const onnx::GraphProto *graph = nullptr;
  int64_t opset = 0;
  /// Node indices in a topological order.
  std::vector<int> order;
  /// How many node inputs and graph outputs read each value.
  llvm::StringMap<int> uses;
};

/// Supported ranges, documented in the README.
constexpr int64_t kMinIrVersion = 7, kMaxIrVersion = 10;
constexpr int64_t kMinOpset = 13, kMaxOpset = 21;

/// "node 'NAME' (OpType)", or "node #i (OpType)" for an unnamed node.
std::string describeNode(const onnx::NodeProto &node, int index);

/// Parses `bytes` and validates the graph's structure.
FailureOr<OnnxGraph> parseOnnxModel(StringRef bytes, Location loc);

} // namespace mlir::fsdp

#endif // FSDP_FRONTEND_ONNXMODEL_H
