//===- HostTensor.h - Small constant tensors folded at import ---*- C++ -*-===//
//
// Shape subgraphs (Shape → Gather → Concat → Reshape, masks built with
// Trilu/Where, ...) are evaluated while importing, so a model exported with a
// dynamic batch axis becomes fully static once the batch is fixed. Values are
// held as double or int64 whatever their element type; float results are
// rounded to their element type after every step, as the model would.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_FRONTEND_HOSTTENSOR_H
#define FSDP_FRONTEND_HOSTTENSOR_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include <functional>
#include <string>
#include <vector>

namespace mlir::fsdp {

struct HostTensor {
  Type elementType;
  SmallVector<int64_t> shape;
  std::vector<double> floats; // when elementType is a float type
  std::vector<int64_t> ints;  // otherwise (integers and i1)

  static HostTensor zeros(Type elementType, ArrayRef<int64_t> shape);
  static HostTensor fromInts(MLIRContext *ctx, ArrayRef<int64_t> values,
                             ArrayRef<int64_t> shape);

  bool isFloat() const { return isa<FloatType>(elementType); }
  int64_t numel() const;
  double asDouble(int64_t i) const { return isFloat() ? floats[i] : ints[i]; }
  int64_t asInt(int64_t i) const {
    return isFloat() ? (int64_t)floats[i] : ints[i];
  }
  void set(int64_t i, double v);
  std::vector<int64_t> toInts() const;
  RankedTensorType type() const {
    return RankedTensorType::get(shape, elementType);
  }
  DenseElementsAttr toAttr() const;
  /// Same data, converted to `to` (ONNX Cast semantics).
  HostTensor cast(Type to) const;
  /// Same data, another shape with as many elements.
  HostTensor reshaped(ArrayRef<int64_t> newShape) const;
};

/// Largest constant the importer folds; bigger results stay ops.
constexpr int64_t kMaxFoldElements = int64_t(1) << 24;

/// Elementwise op over broadcast operands; `fn` maps operand values (as
/// double) to the result value.
HostTensor foldElementwise(ArrayRef<const HostTensor *> operands,
                           ArrayRef<int64_t> resultShape, Type resultElement,
                           const std::function<double(ArrayRef<double>)> &fn);

/// The same over integer operands and an integer (or i1) result, in int64
/// exactly (a double holds integers to 2^53 only).
HostTensor
foldElementwiseInts(ArrayRef<const HostTensor *> operands,
                    ArrayRef<int64_t> resultShape, Type resultElement,
                    const std::function<int64_t(ArrayRef<int64_t>)> &fn);

HostTensor foldTranspose(const HostTensor &x, ArrayRef<int64_t> perm);
HostTensor foldSlice(const HostTensor &x, ArrayRef<int64_t> starts,
                     ArrayRef<int64_t> steps, ArrayRef<int64_t> resultShape);
HostTensor foldConcat(ArrayRef<const HostTensor *> inputs, int64_t axis);
HostTensor foldGather(const HostTensor &data, const HostTensor &indices,
                      int64_t axis);
HostTensor foldTrilu(const HostTensor &x, int64_t k, bool upper);
/// kind: 0 sum, 1 mean, 2 max, 3 min, 4 product.
HostTensor foldReduce(const HostTensor &x, ArrayRef<int64_t> axes,
                      bool keepdims, int kind);

} // namespace mlir::fsdp

#endif // FSDP_FRONTEND_HOSTTENSOR_H
