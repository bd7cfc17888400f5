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
  return concatAxis(
      n, {splatConstant(n, elem, shape, 0), sliceAxis(n, v, axis, 0, len - k)},
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

/// fsdp.argsort of a float tensor along `axis`: stable, NaN the largest.
Value argsortFloat(NodeContext &n, Value x, int64_t axis, bool descending) {
  auto t = cast<RankedTensorType>(x.getType());
  return build<ArgsortOp>(
      n, RankedTensorType::get(t.getShape(), n.b.getI64Type()), {x},
      {i64Attr(n, "axis", axis), boolAttr(n, "descending", descending)});
}

/// floor(x / 2^22) and x mod 2^22 of an int64 tensor, exactly (fsdp.div of
/// two i64 tensors truncates; a negative remainder moves by one digit).
std::pair<Value, Value> splitDigit(NodeContext &n, Value x) {
  Type i64 = n.b.getI64Type();
  auto t = cast<RankedTensorType>(x.getType());
  auto bools = RankedTensorType::get(t.getShape(), n.b.getI1Type());
  Value base = splatConstant(n, i64, {}, double(1 << 22));
  Value q = build<DivOp>(n, t, {x, base});
  Value r = build<SubOp>(n, t, {x, build<MulOp>(n, t, {q, base})});
  Value negative = build<LessOp>(n, bools, {r, splatConstant(n, i64, {}, 0)});
  q = build<WhereOp>(
      n, t,
      {negative, build<SubOp>(n, t, {q, splatConstant(n, i64, {}, 1)}), q});
  r = build<WhereOp>(n, t, {negative, build<AddOp>(n, t, {r, base}), r});
  return {q, r};
}

/// ArgMax/ArgMin(x; axis, keepdims, select_last_index): the first (last)
/// position of the largest (smallest) value, a NaN counting as the
/// extreme (as PyTorch's): the extreme by fsdp.reduce_max (of -x, or of
/// -1 - x on integers, where -x would wrap at INT64_MIN), then the
/// extreme of the positions that hold it. Linear in the axis and exact
/// on int64.
LogicalResult lowerArgExtreme(NodeContext &n, bool max) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  RankedTensorType t = n.inputType(0);
  if (t.getRank() == 0)
    return n.error() << "expects a tensor of rank 1 or more";
  auto axis = axisOf(n, n.attrInt("axis", 0), t.getRank());
  if (failed(axis))
    return failure();
  int64_t len = t.getDimSize(*axis);
  if (len == 0)
    return n.error() << "reduces an empty axis";
  bool last = n.attrInt("select_last_index", 0) != 0;
  Type i64 = n.b.getI64Type();
  Value x = n.operand(0);
  Type elem = t.getElementType();
  bool isFloat = isa<FloatType>(elem);
  if (!isFloat && !elem.isInteger(64)) {
    t = RankedTensorType::get(
        t.getShape(),
        isa<IntegerType>(elem) && !elem.isInteger(1) ? i64 : n.b.getF32Type());
    x = build<CastOp>(n, t, {x});
    elem = t.getElementType();
    isFloat = isa<FloatType>(elem);
  }
  auto reversed = [&](Value v) -> Value {
    if (isFloat)
      return build<NegOp>(n, v.getType(), {v});
    return build<SubOp>(n, v.getType(), {splatConstant(n, i64, {}, -1), v});
  };
  SmallVector<int64_t> kept(t.getShape());
  kept[*axis] = 1;
  auto keptType = RankedTensorType::get(kept, elem);
  auto axes = n.b.getNamedAttr("axes", n.b.getDenseI64ArrayAttr({*axis}));
  auto keep = n.b.getNamedAttr("keepdims", n.b.getBoolAttr(true));
  Value key = max ? x : reversed(x);
  Value extreme = build<ReduceMaxOp>(n, keptType, {key}, {axes, keep});
  auto bools = RankedTensorType::get(t.getShape(), n.b.getI1Type());
  Value at = build<EqualOp>(n, bools, {key, extreme});
  if (isFloat)
    at = build<OrOp>(
        n, bools,
        {at, build<NotOp>(n, bools, {build<EqualOp>(n, bools, {x, x})})});
  // The first hit: the largest -1 - position; the last: the largest position.
  SmallVector<int64_t> positions, posShape(t.getRank(), 1);
  for (int64_t i = 0; i < len; ++i)
    positions.push_back(last ? i : -1 - i);
  posShape[*axis] = len;
  auto posType = RankedTensorType::get(posShape, i64);
  Value pos = ConstantOp::create(
      n.b, n.loc,
      DenseElementsAttr::get(posType, ArrayRef<int64_t>(positions)));
  auto indexType = RankedTensorType::get(t.getShape(), i64);
  Value hits = build<WhereOp>(n, indexType,
                              {at, pos, splatConstant(n, i64, {}, -1 - len)});
  Value found = build<ReduceMaxOp>(n, RankedTensorType::get(kept, i64), {hits},
                                   {axes, keep});
  if (!last)
    found = build<SubOp>(n, found.getType(),
                         {splatConstant(n, i64, {}, -1), found});
  if (n.attrInt("keepdims", 1))
    return n.setResult(0, found);
  SmallVector<int64_t> shape = shapeOf(found);
  shape.erase(shape.begin() + *axis);
  return n.setResult(0, reshapeValue(n, found, shape));
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

/// The positions that sort `x` along `axis`, descending or ascending:
/// stable, so the first of equal values comes first, NaN as the largest
/// value. fsdp.argsort takes floats: a boolean is cast; an integer is
/// split into three 22-bit digits (each exact in float32) sorted lowest
/// first, each pass stable (a radix sort, exact over all of int64; the
/// tracer's sorting.py `argsort` does the same).
Value mlir::fsdp::onnx_ops::sortedPositions(NodeContext &n, Value x,
                                            int64_t axis, bool descending) {
  auto t = cast<RankedTensorType>(x.getType());
  auto f32 = RankedTensorType::get(t.getShape(), n.b.getF32Type());
  Type elem = t.getElementType();
  if (isa<FloatType>(elem))
    return argsortFloat(n, x, axis, descending);
  if (!elem.isInteger(64))
    return argsortFloat(n, build<CastOp>(n, f32, {x}), axis, descending);
  auto [rest, low] = splitDigit(n, x);
  auto [high, middle] = splitDigit(n, rest);
  Value perm;
  for (Value key : {low, middle, high}) {
    if (perm)
      key = takeAlong(n, key, perm, axis);
    Value step =
        argsortFloat(n, build<CastOp>(n, f32, {key}), axis, descending);
    perm = perm ? takeAlong(n, perm, step, axis) : step;
  }
  return perm;
}

void mlir::fsdp::onnx_ops::addOrdering(llvm::StringMap<LowerFn> &table) {
  addRows(
      table,
      {
          {"CumSum", lowerCumSum},
          {"ArgMax", [](NodeContext &n) { return lowerArgExtreme(n, true); }},
          {"ArgMin", [](NodeContext &n) { return lowerArgExtreme(n, false); }},
          {"TopK", lowerTopK},
      });
}
