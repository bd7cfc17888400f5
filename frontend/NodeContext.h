//===- NodeContext.h - What an ONNX op lowering sees ------------*- C++ -*-===//
//
// Internal to the frontend: OnnxImporter.cpp owns the value table and the
// module; OnnxOps.cpp holds one lowering function per ONNX op type, each
// given a NodeContext for the node being imported.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_FRONTEND_NODECONTEXT_H
#define FSDP_FRONTEND_NODECONTEXT_H

#include "frontend/HostTensor.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringMap.h"

#include <memory>
#include <optional>
#include <string>

namespace onnx {
class NodeProto;
class AttributeProto;
class TensorProto;
} // namespace onnx

namespace mlir::fsdp {

/// One ONNX value during import: a constant known at import time, an SSA
/// value, a parameter read lazily, or several of these at once.
struct ImportedValue {
  RankedTensorType type;
  Value value;
  /// Shared: aliases (Identity, operand lists) must not copy large masks.
  std::shared_ptr<const HostTensor> constant;
  std::string parameter;
};

class Importer;

class NodeContext {
public:
  NodeContext(Importer &importer, const onnx::NodeProto &node, int index,
              int64_t opset, OpBuilder &builder, Location loc)
      : importer(importer), node(node), index(index), opset(opset), b(builder),
        loc(loc) {}

  Importer &importer;
  const onnx::NodeProto &node;
  int index;
  int64_t opset;
  OpBuilder &b;
  Location loc;

  MLIRContext *ctx() const { return b.getContext(); }

  /// An error at this node; the location names it (see ImportDiagnostics).
  InFlightDiagnostic error() const;

  int numInputs() const;
  int numOutputs() const;
  bool hasInput(int i) const;
  ImportedValue &input(int i) const;
  RankedTensorType inputType(int i) const { return input(i).type; }
  /// The input's constant value, or null when it is not known at import.
  const HostTensor *constInput(int i) const;
  /// Like constInput but an error when the value is not constant.
  FailureOr<const HostTensor *> requireConst(int i, StringRef what) const;
  /// True when every present input is a constant.
  bool allConst() const;
  /// The input as an SSA value (materialising constants and parameters).
  Value operand(int i) const;
  /// Any imported value as an SSA value.
  Value materialize(ImportedValue &v) const;
  /// Whether any node or graph output reads output `i`.
  bool outputUsed(int i) const;
  /// The op types of the nodes that read output `i` (one per reading
  /// node; a graph output reads as "").
  SmallVector<std::string> outputReaders(int i) const;

  const onnx::AttributeProto *attr(StringRef name) const;
  int64_t attrInt(StringRef name, int64_t dflt) const;
  float attrFloat(StringRef name, float dflt) const;
  std::string attrString(StringRef name, StringRef dflt) const;
  std::optional<SmallVector<int64_t>> attrInts(StringRef name) const;
  const onnx::TensorProto *attrTensor(StringRef name) const;

  LogicalResult setResult(int i, Value v) const;
  LogicalResult setConst(int i, HostTensor t) const;
  LogicalResult setAlias(int i, const ImportedValue &v) const;
  /// An error when output `i` is read: we do not import it.
  LogicalResult setUnsupported(int i, StringRef reason) const;
};

using LowerFn = LogicalResult (*)(NodeContext &);

/// The ONNX op types the importer supports, by name.
const llvm::StringMap<LowerFn> &onnxLowerings();

/// Maps an ONNX TensorProto data type to an MLIR element type; null when
/// unsupported.
Type onnxElementType(MLIRContext *ctx, int dataType);

/// Reads an inline TensorProto (Constant values, non-float initializers).
FailureOr<HostTensor> readTensorProto(const onnx::TensorProto &t,
                                      MLIRContext *ctx, Location loc,
                                      StringRef what);

/// Bytes of one element of `t` (frontend/TensorProto.cpp).
int64_t byteWidth(Type t);

/// Elements a TensorProto holds in its typed fields (not raw_data).
int64_t typedCount(const onnx::TensorProto &t);

/// Validates dims (non-negative, product without overflow) and returns them.
FailureOr<SmallVector<int64_t>> checkedDims(ArrayRef<int64_t> dims,
                                            Location loc, StringRef what);

} // namespace mlir::fsdp

#endif // FSDP_FRONTEND_NODECONTEXT_H
