//===- Ordering.cpp - Scans, sorting and selection (ONNX) -----------------===//
//
// The ops torch.onnx.export writes for cumsum (position ids from a mask),
// argmax/argmin, topk and sort (TopK over the whole axis: a mixture of
// experts' routing), composed from fsdp ops: a scan as log2(n) shifted
// additions; the selections from `fsdp.argsort` (stable, NaN ordered as
// PyTorch orders it), their values gathered along the axis, so the
// gradient reaches the selected elements.
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/OnnxOpsSupport.h"

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::onnx_ops;

namespace {

/// The positions [0, n) along `axis` reversed (for a reverse scan).
Value flipAxis(NodeContext &n, Value v, int64_t axis) {
  int64_t len = shapeOf(v)[axis];
  SmallVector<int64_t> positions;
  for (int64_t i = len - 1; i >= 0; --i)
    positions.push_back(i);
  return gatherAxis(n, v, axis, positions);
}

/// v moved `k` places along `axis`, zeros filling the first k (Hillis and
/// Steele's shift).
Value shiftAxis(NodeContext &n, Value v, int64_t axis, int64_t k) {
  SmallVector<int64_t> shape = shapeOf(v);
  int64_t len = shape[axis];
  shape[axis] = k;
  Type elem = cast<RankedTensorType>(v.getType()).getElementType();
  return concatAxis(n, {splatConstant(n, elem, shape, 0),
                        sliceAxis(n, v, axis, 0, len - k)},
                    axis);
}

/// CumSum(x, axis; exclusive, reverse): Hillis and Steele's scan, each of
/// its log2(n) steps one shifted addition (integers exactly: position
/// ids; floats within log2(n) roundings of the sequential sum).
LogicalResult lowerCumSum(NodeContext &n) {
  if (failed(expectInputs(n, 2, 2)))
    return failure();
  RankedTensorType t = n.inputType(0);
  auto axisConst = n.requireConst(1, "axis");
  if (failed(axisConst))
    return failure();
  if ((*axisConst)->numel() != 1)
    return n.error() << "axis must be one value";
  auto axis = axisOf(n, (*axisConst)->asInt(0), t.getRank());
  if (failed(axis))
    return failure();
  Type elem = t.getElementType();
  if (!isa<FloatType>(elem) && !elem.isInteger(64))
    return n.error() << "expects a float or int64 tensor, got " << t;
  bool exclusive = n.attrInt("exclusive", 0), reverse = n.attrInt("reverse", 0);
  int64_t len = t.getDimSize(*axis);
  Value y = n.operand(0);
  if (len == 0)
    return n.setResult(0, y);
  if (reverse)
    y = flipAxis(n, y, *axis);
  for (int64_t k = 1; k < len; k *= 2)
    y = build<AddOp>(n, y.getType(), {y, shiftAxis(n, y, *axis, k)});
  if (exclusive)
    y = shiftAxis(n, y, *axis, 1);
  if (reverse)
    y = flipAxis(n, y, *axis);
  return n.setResult(0, y);
}

/// The positions that sort `x` (a float; an integer through f32, exact to
/// 2^24) along `axis`, descending or ascending: stable, so the first of
/// equal values comes first, NaN as the largest value.
Value sortedPositions(NodeContext &n, Value x, int64_t axis, bool descending) {
  auto t = cast<RankedTensorType>(x.getType());
  if (!isa<FloatType>(t.getElementType()))
    x = build<CastOp>(n, RankedTensorType::get(t.getShape(), n.b.getF32Type()),
                      {x});
  return build<ArgsortOp>(
      n, RankedTensorType::get(t.getShape(), n.b.getI64Type()), {x},
      {i64Attr(n, "axis", axis), boolAttr(n, "descending", descending)});
}

/// ArgMax/ArgMin(x; axis, keepdims): the first position of the largest
/// (smallest) value, a NaN counting as the largest (as PyTorch's).
LogicalResult lowerArgExtreme(NodeContext &n, bool max) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  RankedTensorType t = n.inputType(0);
  if (t.getRank() == 0)
    return n.error() << "expects a tensor of rank 1 or more";
  auto axis = axisOf(n, n.attrInt("axis", 0), t.getRank());
  if (failed(axis))
    return failure();
  if (n.attrInt("select_last_index", 0))
    return n.error() << "select_last_index = 1 is not supported (PyTorch's "
                        "argmax and argmin take the first position)";
  if (t.getDimSize(*axis) == 0)
    return n.error() << "reduces an empty axis";
  Value first =
      sliceAxis(n, sortedPositions(n, n.operand(0), *axis, max), *axis, 0, 1);
  if (n.attrInt("keepdims", 1))
    return n.setResult(0, first);
  SmallVector<int64_t> shape = shapeOf(first);
  shape.erase(shape.begin() + *axis);
  return n.setResult(0, reshapeValue(n, first, shape));
}

/// TopK(x, k; axis, largest, sorted): the first k positions of the stable
/// sort (largest: descending), and the values there. Always sorted (which
/// sorted = 0 allows).
LogicalResult lowerTopK(NodeContext &n) {
  if (failed(expectInputs(n, 2, 2)))
    return failure();
  RankedTensorType t = n.inputType(0);
  if (t.getRank() == 0)
    return n.error() << "expects a tensor of rank 1 or more";
  auto axis = axisOf(n, n.attrInt("axis", -1), t.getRank());
  auto kConst = n.requireConst(1, "k");
  if (failed(axis) || failed(kConst))
    return failure();
  if ((*kConst)->numel() != 1)
    return n.error() << "k must be one value";
  int64_t k = (*kConst)->asInt(0), len = t.getDimSize(*axis);
  if (k < 0 || k > len)
    return n.error() << "k = " << k << " is out of range for extent " << len;
  Value positions = sliceAxis(
      n, sortedPositions(n, n.operand(0), *axis, n.attrInt("largest", 1)),
      *axis, 0, k);
  if (failed(n.setResult(0, takeAlong(n, n.operand(0), positions, *axis))))
    return failure();
  return n.setResult(1, positions);
}

} // namespace

void mlir::fsdp::onnx_ops::addOrdering(llvm::StringMap<LowerFn> &table) {
  addRows(table,
          {
              {"CumSum", lowerCumSum},
              {"ArgMax",
               [](NodeContext &n) { return lowerArgExtreme(n, true); }},
              {"ArgMin",
               [](NodeContext &n) { return lowerArgExtreme(n, false); }},
              {"TopK", lowerTopK},
          });
}
