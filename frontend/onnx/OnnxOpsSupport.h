//===- OnnxOpsSupport.h - What the ONNX lowering files share ----*- C++ -*-===//
//
// Private to frontend/: the helpers every file of frontend/onnx/ (one op
// family each: its lowerings and its rows of the importer's table) uses,
// and the functions that add each family's rows (frontend/OnnxOps.cpp
// gathers them).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_FRONTEND_ONNX_ONNXOPSSUPPORT_H
#define FSDP_FRONTEND_ONNX_ONNXOPSSUPPORT_H

#include "frontend/NodeContext.h"
#include "frontend/OnnxModel.h"

#include "dialect/FsdpOps.h"
#include "dialect/ShapeInference.h"

#include <onnx/onnx_pb.h>

#include <cassert>
#include <cmath>
#include <cstdio>

namespace mlir::fsdp::onnx_ops {

template <typename OpTy>
Value build(NodeContext &n, Type type, ValueRange operands,
            ArrayRef<NamedAttribute> attrs = {}) {
  return OpTy::create(n.b, n.loc, TypeRange{type}, operands, attrs)
      ->getResult(0);
}

inline NamedAttribute i64Attr(NodeContext &n, StringRef name, int64_t v) {
  return n.b.getNamedAttr(name, n.b.getI64IntegerAttr(v));
}
inline NamedAttribute arrayAttr(NodeContext &n, StringRef name,
                                ArrayRef<int64_t> v) {
  return n.b.getNamedAttr(name, n.b.getDenseI64ArrayAttr(v));
}
inline NamedAttribute boolAttr(NodeContext &n, StringRef name, bool v) {
  return n.b.getNamedAttr(name, n.b.getBoolAttr(v));
}

/// A constant of `shape` and element type `elem`, every element `v`.
inline Value splatConstant(NodeContext &n, Type elem, ArrayRef<int64_t> shape,
                           double v) {
  auto t = RankedTensorType::get(shape, elem);
  Attribute a = isa<FloatType>(elem)
                    ? Attribute(n.b.getFloatAttr(elem, v))
                    : Attribute(n.b.getIntegerAttr(elem, (int64_t)v));
  return ConstantOp::create(n.b, n.loc, DenseElementsAttr::get(t, a));
}

/// A 0-dim constant of element type `elem` holding `v`.
inline Value scalarConstant(NodeContext &n, Type elem, double v) {
  return splatConstant(n, elem, {}, v);
}

/// `a` OpTy `b` with NumPy broadcasting, operands known to agree (a
/// composition's own values: an error would be the importer's bug).
template <typename OpTy>
Value broadcastBinary(NodeContext &n, Value a, Value b) {
  auto t = shape::binary(n.loc, cast<RankedTensorType>(a.getType()),
                         cast<RankedTensorType>(b.getType()), Type());
  assert(succeeded(t) && "a composition's operands must broadcast");
  return build<OpTy>(n, *t, {a, b});
}

/// The static shape of a ranked tensor value.
inline SmallVector<int64_t> shapeOf(Value v) {
  auto s = cast<RankedTensorType>(v.getType()).getShape();
  return SmallVector<int64_t>(s.begin(), s.end());
}

/// `v[.., lo:hi, ..]` along `axis` (v itself when that is all of it).
inline Value sliceAxis(NodeContext &n, Value v, int64_t axis, int64_t lo,
                       int64_t hi) {
  SmallVector<int64_t> shape = shapeOf(v), starts(shape.size(), 0),
                       strides(shape.size(), 1), limits = shape;
  if (lo == 0 && hi == shape[axis])
    return v;
  starts[axis] = lo;
  limits[axis] = hi;
  shape[axis] = hi - lo;
  auto type = RankedTensorType::get(
      shape, cast<RankedTensorType>(v.getType()).getElementType());
  return build<SliceOp>(n, type, {v},
                        {arrayAttr(n, "starts", starts),
                         arrayAttr(n, "limits", limits),
                         arrayAttr(n, "strides", strides)});
}

/// `parts` joined along `axis` (the one part itself when alone).
inline Value concatAxis(NodeContext &n, ArrayRef<Value> parts, int64_t axis) {
  if (parts.size() == 1)
    return parts[0];
  SmallVector<int64_t> shape = shapeOf(parts[0]);
  shape[axis] = 0;
  for (Value p : parts)
    shape[axis] += shapeOf(p)[axis];
  auto type = RankedTensorType::get(
      shape, cast<RankedTensorType>(parts[0].getType()).getElementType());
  return build<ConcatOp>(n, type, parts, {i64Attr(n, "axis", axis)});
}

/// `v` reshaped to `dims` (v itself when it has them).
inline Value reshapeValue(NodeContext &n, Value v, ArrayRef<int64_t> dims) {
  auto t = cast<RankedTensorType>(v.getType());
  if (t.getShape() == dims)
    return v;
  return build<ReshapeOp>(n, RankedTensorType::get(dims, t.getElementType()),
                          {v});
}

/// `v` with its axes permuted (result axis i is v's axis perm[i]).
inline Value transposeValue(NodeContext &n, Value v, ArrayRef<int64_t> perm) {
  auto type =
      shape::transpose(n.loc, cast<RankedTensorType>(v.getType()), perm);
  assert(succeeded(type) && "a composition's permutation must be valid");
  return build<TransposeOp>(n, *type, {v}, {arrayAttr(n, "perm", perm)});
}

/// `v`'s slices along `axis` at the constant positions `index` (each in
/// [0, extent)): a flip, a nearest-neighbour resize.
inline Value gatherAxis(NodeContext &n, Value v, int64_t axis,
                        ArrayRef<int64_t> index) {
  Type i64 = n.b.getI64Type();
  auto it = RankedTensorType::get({(int64_t)index.size()}, i64);
  Value idx = ConstantOp::create(
      n.b, n.loc, DenseElementsAttr::get(it, ArrayRef<int64_t>(index)));
  SmallVector<int64_t> shape = shapeOf(v);
  shape[axis] = (int64_t)index.size();
  auto type = RankedTensorType::get(
      shape, cast<RankedTensorType>(v.getType()).getElementType());
  return build<GatherOp>(n, type, {v, idx}, {i64Attr(n, "axis", axis)});
}

/// All inputs present (no empty names), between `min` and `max` of them.
inline LogicalResult allInputs(NodeContext &n, int min) {
  if (n.numInputs() < min)
    return n.error() << "needs at least " << min << " input(s)";
  for (int i = 0; i < n.numInputs(); ++i)
    if (!n.hasInput(i))
      return n.error() << "input " << i << " is missing";
  return success();
}

inline LogicalResult expectInputs(NodeContext &n, int min, int max) {
  int count = n.numInputs();
  if (count < min || count > max || !n.hasInput(0))
    return n.error() << "expects " << min
                     << (max > min ? " to " + std::to_string(max) : "")
                     << " inputs, got " << count;
  for (int i = 0; i < min; ++i)
    if (!n.hasInput(i))
      return n.error() << "required input " << i << " is missing";
  return success();
}

inline bool isSmall(ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  return count <= kMaxFoldElements;
}

inline FailureOr<int64_t> axisOf(NodeContext &n, int64_t axis, int64_t rank) {
  return shape::normalizeAxis(n.loc, axis, rank);
}

/// Axes from input `i` (newer opsets) or attribute "axes" (older ones).
inline FailureOr<std::optional<SmallVector<int64_t>>>
axesOf(NodeContext &n, int inputIndex, bool fromInput) {
  if (!fromInput)
    return n.attrInts("axes");
  if (!n.hasInput(inputIndex))
    return std::optional<SmallVector<int64_t>>();
  auto axes = n.requireConst(inputIndex, "axes");
  if (failed(axes))
    return failure();
  std::vector<int64_t> v = (*axes)->toInts();
  return std::optional<SmallVector<int64_t>>(
      SmallVector<int64_t>(v.begin(), v.end()));
}

/// A 1-D shape given as constant input `i` (Reshape, Expand,
/// ConstantOfShape).
inline FailureOr<SmallVector<int64_t>> shapeInput(NodeContext &n, int i,
                                                  StringRef what) {
  auto c = n.requireConst(i, what);
  if (failed(c))
    return failure();
  if ((*c)->shape.size() != 1)
    return n.error() << what << " must be a 1-D tensor";
  std::vector<int64_t> v = (*c)->toInts();
  return SmallVector<int64_t>(v.begin(), v.end());
}

/// `data`'s elements at `index` (i64, data's rank; a negative index
/// counted from the end) along `axis`, as torch.gather: one gather of the
/// data flattened (DataMovement.cpp; GatherElements, TopK's values).
Value takeAlong(NodeContext &n, Value data, Value index, int64_t axis);

/// The positions that sort `x` along `axis`: stable, NaN the largest, an
/// int64 exactly (Ordering.cpp; TopK, ScatterElements' last writers).
Value sortedPositions(NodeContext &n, Value x, int64_t axis, bool descending);

/// Adds a family's rows; a row without a name (a UnaryOps.def op ONNX does
/// not have) is left out, and an op type two families claim is a bug.
inline void addRows(llvm::StringMap<LowerFn> &table,
                    std::initializer_list<std::pair<StringRef, LowerFn>> rows) {
  for (const auto &row : rows)
    if (!row.first.empty() && !table.insert(row).second)
      llvm::report_fatal_error("ONNX op type '" + row.first +
                               "' is lowered by two families");
}

/// Each family's rows of the importer's table, by ONNX op type.
void addElementwise(llvm::StringMap<LowerFn> &table);  // Elementwise.cpp
void addShapeOps(llvm::StringMap<LowerFn> &table);     // ShapeOps.cpp
void addDataMovement(llvm::StringMap<LowerFn> &table); // DataMovement.cpp
void addCompute(llvm::StringMap<LowerFn> &table);      // Compute.cpp
void addRecurrent(llvm::StringMap<LowerFn> &table);    // Recurrent.cpp
void addOrdering(llvm::StringMap<LowerFn> &table);     // Ordering.cpp
void addResize(llvm::StringMap<LowerFn> &table);       // Resize.cpp
void addRandom(llvm::StringMap<LowerFn> &table);       // Random.cpp

} // namespace mlir::fsdp::onnx_ops

#endif // FSDP_FRONTEND_ONNX_ONNXOPSSUPPORT_H
