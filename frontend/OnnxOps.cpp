//===- OnnxOps.cpp - One lowering per ONNX op type ------------------------===//
//
// Each lowering folds when every input is known at import time (and the
// result is small), and otherwise builds fsdp ops after checking shapes with
// the dialect's shape functions, so errors name the node. Attribute
// defaults and input-vs-attribute forms follow the ONNX spec for opsets
// 13-21.
//
//===----------------------------------------------------------------------===//
#include "frontend/NodeContext.h"
#include "frontend/OnnxModel.h"

#include "dialect/FsdpOps.h"
#include "dialect/ShapeInference.h"
#include "runtime/plan/UnaryMath.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdio>

using namespace mlir;
using namespace mlir::fsdp;

namespace {

template <typename OpTy>
Value build(NodeContext &n, Type type, ValueRange operands,
            ArrayRef<NamedAttribute> attrs = {}) {
  return OpTy::create(n.b, n.loc, TypeRange{type}, operands, attrs)
      ->getResult(0);
}

NamedAttribute i64Attr(NodeContext &n, StringRef name, int64_t v) {
  return n.b.getNamedAttr(name, n.b.getI64IntegerAttr(v));
}
NamedAttribute arrayAttr(NodeContext &n, StringRef name, ArrayRef<int64_t> v) {
  return n.b.getNamedAttr(name, n.b.getDenseI64ArrayAttr(v));
}
NamedAttribute boolAttr(NodeContext &n, StringRef name, bool v) {
  return n.b.getNamedAttr(name, n.b.getBoolAttr(v));
}

/// All inputs present (no empty names), between `min` and `max` of them.
LogicalResult allInputs(NodeContext &n, int min) {
  if (n.numInputs() < min)
    return n.error() << "needs at least " << min << " input(s)";
  for (int i = 0; i < n.numInputs(); ++i)
    if (!n.hasInput(i))
      return n.error() << "input " << i << " is missing";
  return success();
}

LogicalResult expectInputs(NodeContext &n, int min, int max) {
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

bool isSmall(ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  return count <= kMaxFoldElements;
}

FailureOr<int64_t> axisOf(NodeContext &n, int64_t axis, int64_t rank) {
  return shape::normalizeAxis(n.loc, axis, rank);
}

/// Axes from input `i` (newer opsets) or attribute "axes" (older ones).
FailureOr<std::optional<SmallVector<int64_t>>>
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

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

enum class Kind { Arith, Compare, Logic };

/// The two operand types after casting a constant side to the other's
/// element type (ONNX allows Pow(float, int); PyTorch scalars may differ).
LogicalResult unifyConstants(NodeContext &n,
                             SmallVectorImpl<ImportedValue> &v) {
  Type target;
  for (auto &x : v)
    if (!x.constant)
      target = x.type.getElementType();
  if (!target)
    return success();
  for (auto &x : v) {
    if (!x.constant || x.type.getElementType() == target)
      continue;
    auto c = std::make_shared<const HostTensor>(x.constant->cast(target));
    x = ImportedValue();
    x.type = c->type();
    x.constant = std::move(c);
  }
  (void)n;
  return success();
}

/// Input `input` as a value: the table's own when `unifyConstants` left it
/// alone (so it is materialised once), the converted constant otherwise.
Value operandOf(NodeContext &n, SmallVectorImpl<ImportedValue> &v, int k,
                int input) {
  if (v[k].type == n.inputType(input))
    return n.operand(input);
  return n.materialize(v[k]);
}

template <typename OpTy>
LogicalResult binary(NodeContext &n, double (*fn)(double, double),
                     Kind kind = Kind::Arith) {
  if (failed(expectInputs(n, 2, 2)))
    return failure();
  SmallVector<ImportedValue> v{n.input(0), n.input(1)};
  if (kind == Kind::Arith && failed(unifyConstants(n, v)))
    return failure();
  Type resultElement = kind == Kind::Compare ? (Type)n.b.getI1Type() : Type();
  if (kind == Kind::Logic && (!v[0].type.getElementType().isInteger(1) ||
                              !v[1].type.getElementType().isInteger(1)))
    return n.error() << "expects boolean operands";
  auto type = shape::binary(n.loc, v[0].type, v[1].type, resultElement);
  if (failed(type))
    return failure();
  if (v[0].constant && v[1].constant && isSmall(type->getShape()))
    return n.setConst(
        0,
        foldElementwise({v[0].constant.get(), v[1].constant.get()},
                        type->getShape(), type->getElementType(),
                        [fn](ArrayRef<double> a) { return fn(a[0], a[1]); }));
  return n.setResult(
      0, build<OpTy>(n, *type, {operandOf(n, v, 0, 0), operandOf(n, v, 1, 1)}));
}

/// ONNX Pow allows an exponent of another type: a float base takes an
/// integer exponent converted to float (exact for the small integers seen).
LogicalResult lowerPow(NodeContext &n) {
  auto pow = [](double a, double b) { return std::pow(a, b); };
  if (failed(expectInputs(n, 2, 2)))
    return failure();
  Type base = n.inputType(0).getElementType(),
       exponent = n.inputType(1).getElementType();
  if (base == exponent || n.constInput(1) || n.constInput(0))
    return binary<PowOp>(n, pow);
  if (!isa<FloatType>(base))
    return n.error() << "an integer base with a " << exponent
                     << " exponent is not supported";
  auto type = shape::binary(
      n.loc, n.inputType(0),
      RankedTensorType::get(n.inputType(1).getShape(), base), Type());
  if (failed(type))
    return failure();
  Value e =
      build<CastOp>(n, RankedTensorType::get(n.inputType(1).getShape(), base),
                    {n.operand(1)});
  return n.setResult(0, build<PowOp>(n, *type, {n.operand(0), e}));
}

/// Max/Min take one or more inputs: a left fold of the binary op.
template <typename OpTy>
LogicalResult variadic(NodeContext &n, double (*fn)(double, double)) {
  if (failed(allInputs(n, 1)))
    return failure();
  if (n.numInputs() <= 2)
    return n.numInputs() == 1 ? n.setAlias(0, n.input(0)) : binary<OpTy>(n, fn);
  Value acc = n.operand(0);
  for (int i = 1; i < n.numInputs(); ++i) {
    auto type = shape::binary(n.loc, cast<RankedTensorType>(acc.getType()),
                              n.inputType(i), Type());
    if (failed(type))
      return failure();
    acc = build<OpTy>(n, *type, {acc, n.operand(i)});
  }
  return n.setResult(0, acc);
}

template <typename OpTy>
LogicalResult unary(NodeContext &n, double (*fn)(double),
                    bool needsFloat = true) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  RankedTensorType t = n.inputType(0);
  if (needsFloat && !isa<FloatType>(t.getElementType()))
    return n.error() << "expects a float tensor, got " << t;
  if (const HostTensor *c = n.constInput(0))
    return n.setConst(
        0, foldElementwise({c}, t.getShape(), t.getElementType(),
                           [fn](ArrayRef<double> a) { return fn(a[0]); }));
  return n.setResult(0, build<OpTy>(n, t, {n.operand(0)}));
}

LogicalResult lowerWhere(NodeContext &n) {
  if (failed(expectInputs(n, 3, 3)))
    return failure();
  SmallVector<ImportedValue> v{n.input(0), n.input(1), n.input(2)};
  SmallVector<ImportedValue> xy{v[1], v[2]};
  if (failed(unifyConstants(n, xy)))
    return failure();
  v[1] = xy[0];
  v[2] = xy[1];
  if (!v[0].type.getElementType().isInteger(1))
    return n.error() << "condition must be boolean, got " << v[0].type;
  auto type = shape::where(n.loc, v[0].type, v[1].type, v[2].type);
  if (failed(type))
    return failure();
  if (v[0].constant && v[1].constant && v[2].constant &&
      isSmall(type->getShape()))
    return n.setConst(
        0, foldElementwise(
               {v[0].constant.get(), v[1].constant.get(), v[2].constant.get()},
               type->getShape(), type->getElementType(),
               [](ArrayRef<double> a) { return a[0] ? a[1] : a[2]; }));
  return n.setResult(0, build<WhereOp>(n, *type,
                                       {n.operand(0), operandOf(n, v, 1, 1),
                                        operandOf(n, v, 2, 2)}));
}

LogicalResult lowerCast(NodeContext &n) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  Type to = onnxElementType(n.ctx(), n.attrInt("to", 0));
  if (!to)
    return n.error() << "unsupported target type " << n.attrInt("to", 0);
  RankedTensorType t = n.inputType(0);
  if (const HostTensor *c = n.constInput(0))
    return n.setConst(0, c->cast(to));
  if (t.getElementType() == to)
    return n.setAlias(0, n.input(0));
  return n.setResult(0,
                     build<CastOp>(n, RankedTensorType::get(t.getShape(), to),
                                   {n.operand(0)}));
}

//===----------------------------------------------------------------------===//
// Shape-only and constant producers
//===----------------------------------------------------------------------===//

LogicalResult lowerConstant(NodeContext &n) {
  if (const onnx::TensorProto *t = n.attrTensor("value")) {
    auto h = readTensorProto(*t, n.ctx(), n.loc, "value");
    if (failed(h))
      return failure();
    return n.setConst(0, std::move(*h));
  }
  if (const auto *a = n.attr("value_float")) {
    HostTensor h = HostTensor::zeros(n.b.getF32Type(), {});
    h.set(0, a->f());
    return n.setConst(0, h);
  }
  if (const auto *a = n.attr("value_floats")) {
    HostTensor h = HostTensor::zeros(n.b.getF32Type(), {a->floats_size()});
    for (int i = 0; i < a->floats_size(); ++i)
      h.set(i, a->floats(i));
    return n.setConst(0, h);
  }
  if (const auto *a = n.attr("value_int"))
    return n.setConst(0, HostTensor::fromInts(n.ctx(), {a->i()}, {}));
  if (auto ints = n.attrInts("value_ints"))
    return n.setConst(
        0, HostTensor::fromInts(n.ctx(), *ints, {(int64_t)ints->size()}));
  return n.error() << "only tensor, float and int constants are supported";
}

LogicalResult lowerShape(NodeContext &n) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  ArrayRef<int64_t> dims = n.inputType(0).getShape();
  int64_t rank = dims.size();
  int64_t start = n.attrInt("start", 0), end = n.attrInt("end", rank);
  auto clampIndex = [&](int64_t i) {
    if (i < 0)
      i += rank;
    return std::clamp<int64_t>(i, 0, rank);
  };
  start = clampIndex(start);
  end = std::max(start, clampIndex(end));
  SmallVector<int64_t> v(dims.begin() + start, dims.begin() + end);
  return n.setConst(0, HostTensor::fromInts(n.ctx(), v, {(int64_t)v.size()}));
}

LogicalResult lowerSize(NodeContext &n) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  return n.setConst(
      0, HostTensor::fromInts(n.ctx(), {n.inputType(0).getNumElements()}, {}));
}

FailureOr<SmallVector<int64_t>> shapeInput(NodeContext &n, int i,
                                           StringRef what) {
  auto c = n.requireConst(i, what);
  if (failed(c))
    return failure();
  if ((*c)->shape.size() != 1)
    return n.error() << what << " must be a 1-D tensor";
  std::vector<int64_t> v = (*c)->toInts();
  return SmallVector<int64_t>(v.begin(), v.end());
}

LogicalResult lowerConstantOfShape(NodeContext &n) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  auto dims = shapeInput(n, 0, "shape");
  if (failed(dims) || failed(checkedDims(*dims, n.loc, "shape")))
    return failure();
  HostTensor fill = HostTensor::zeros(n.b.getF32Type(), {1});
  if (const onnx::TensorProto *t = n.attrTensor("value")) {
    auto h = readTensorProto(*t, n.ctx(), n.loc, "value");
    if (failed(h))
      return failure();
    if (h->numel() != 1)
      return n.error() << "value must hold one element";
    fill = std::move(*h);
  }
  auto type = RankedTensorType::get(*dims, fill.elementType);
  if (!isSmall(*dims)) {
    // Too big to fold: a splat constant costs nothing to hold.
    HostTensor one = fill.reshaped({});
    auto splat =
        DenseElementsAttr::get(type, one.toAttr().getSplatValue<Attribute>());
    return n.setResult(0, ConstantOp::create(n.b, n.loc, splat));
  }
  return n.setConst(0,
                    foldElementwise({&fill}, *dims, fill.elementType,
                                    [](ArrayRef<double> a) { return a[0]; }));
}

LogicalResult lowerRange(NodeContext &n) {
  if (failed(expectInputs(n, 3, 3)))
    return failure();
  auto start = n.requireConst(0, "start");
  auto limit = n.requireConst(1, "limit");
  auto delta = n.requireConst(2, "delta");
  if (failed(start) || failed(limit) || failed(delta))
    return failure();
  double s = (*start)->asDouble(0), l = (*limit)->asDouble(0),
         d = (*delta)->asDouble(0);
  if (d == 0 || (*start)->numel() != 1)
    return n.error() << "needs scalar inputs and a non-zero delta";
  double count = std::max(std::ceil((l - s) / d), 0.0);
  if (count > (double)kMaxFoldElements)
    return n.error() << "range of " << count << " elements is too large";
  HostTensor out = HostTensor::zeros((*start)->elementType, {(int64_t)count});
  for (int64_t i = 0; i < (int64_t)count; ++i)
    out.set(i, s + i * d);
  return n.setConst(0, out);
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

/// Reshape-like ops: fold constants, alias when nothing changes.
LogicalResult reshapeTo(NodeContext &n, ArrayRef<int64_t> dims) {
  RankedTensorType t = n.inputType(0);
  auto type = RankedTensorType::get(dims, t.getElementType());
  if (type.getNumElements() != t.getNumElements())
    return n.error() << "cannot reshape " << t << " to " << type;
  if (const HostTensor *c = n.constInput(0))
    return n.setConst(0, c->reshaped(dims));
  if (type == t)
    return n.setAlias(0, n.input(0));
  return n.setResult(0, build<ReshapeOp>(n, type, {n.operand(0)}));
}

LogicalResult lowerReshape(NodeContext &n) {
  if (failed(expectInputs(n, 2, 2)))
    return failure();
  auto target = shapeInput(n, 1, "shape");
  if (failed(target))
    return failure();
  RankedTensorType t = n.inputType(0);
  bool allowZero = n.attrInt("allowzero", 0);
  SmallVector<int64_t> dims;
  int inferred = -1;
  int64_t known = 1;
  for (auto [i, d] : llvm::enumerate(*target)) {
    if (d == 0 && !allowZero) {
      if ((int64_t)i >= t.getRank())
        return n.error() << "shape entry " << i << " copies a dimension " << t
                         << " does not have";
      d = t.getDimSize(i);
    }
    if (d == -1) {
      if (inferred >= 0)
        return n.error() << "shape has more than one -1";
      inferred = i;
      dims.push_back(1);
      continue;
    }
    if (d < 0)
      return n.error() << "shape entry " << d << " is invalid";
    known *= d;
    dims.push_back(d);
  }
  if (failed(checkedDims(dims, n.loc, "shape")))
    return failure();
  if (inferred >= 0) {
    if (known == 0 || t.getNumElements() % known != 0)
      return n.error() << "cannot reshape " << t << " with -1 in the shape";
    dims[inferred] = t.getNumElements() / known;
  }
  return reshapeTo(n, dims);
}

LogicalResult lowerFlatten(NodeContext &n) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  RankedTensorType t = n.inputType(0);
  int64_t axis = n.attrInt("axis", 1);
  if (axis < 0)
    axis += t.getRank();
  if (axis < 0 || axis > t.getRank())
    return n.error() << "axis " << n.attrInt("axis", 1) << " out of range";
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= t.getDimSize(i);
  return reshapeTo(n,
                   {outer, t.getNumElements() / std::max<int64_t>(outer, 1)});
}

LogicalResult lowerUnsqueeze(NodeContext &n) {
  if (failed(expectInputs(n, 1, 2)))
    return failure();
  auto axes = axesOf(n, 1, n.opset >= 13);
  if (failed(axes))
    return failure();
  if (!*axes)
    return n.error() << "needs axes";
  ArrayRef<int64_t> in = n.inputType(0).getShape();
  int64_t rank = in.size() + (*axes)->size();
  SmallVector<bool> isNew(rank, false);
  for (int64_t a : **axes) {
    auto ax = axisOf(n, a, rank);
    if (failed(ax))
      return failure();
    if (isNew[*ax])
      return n.error() << "repeats axis " << a;
    isNew[*ax] = true;
  }
  SmallVector<int64_t> dims;
  size_t next = 0;
  for (int64_t i = 0; i < rank; ++i)
    dims.push_back(isNew[i] ? 1 : in[next++]);
  return reshapeTo(n, dims);
}

LogicalResult lowerSqueeze(NodeContext &n) {
  if (failed(expectInputs(n, 1, 2)))
    return failure();
  auto axes = axesOf(n, 1, n.opset >= 13);
  if (failed(axes))
    return failure();
  ArrayRef<int64_t> in = n.inputType(0).getShape();
  SmallVector<bool> drop(in.size(), false);
  if (*axes) {
    for (int64_t a : **axes) {
      auto ax = axisOf(n, a, in.size());
      if (failed(ax))
        return failure();
      if (in[*ax] != 1)
        return n.error() << "cannot squeeze dimension " << a << " of extent "
                         << in[*ax];
      drop[*ax] = true;
    }
  } else {
    for (size_t i = 0; i < in.size(); ++i)
      drop[i] = in[i] == 1;
  }
  SmallVector<int64_t> dims;
  for (size_t i = 0; i < in.size(); ++i)
    if (!drop[i])
      dims.push_back(in[i]);
  return reshapeTo(n, dims);
}

LogicalResult lowerTranspose(NodeContext &n) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  RankedTensorType t = n.inputType(0);
  SmallVector<int64_t> perm;
  if (auto p = n.attrInts("perm"))
    perm = *p;
  else
    for (int64_t i = t.getRank() - 1; i >= 0; --i)
      perm.push_back(i);
  auto type = shape::transpose(n.loc, t, perm);
  if (failed(type))
    return failure();
  if (const HostTensor *c = n.constInput(0))
    return n.setConst(0, foldTranspose(*c, perm));
  return n.setResult(0, build<TransposeOp>(n, *type, {n.operand(0)},
                                           {arrayAttr(n, "perm", perm)}));
}

LogicalResult lowerConcat(NodeContext &n) {
  if (failed(allInputs(n, 1)))
    return failure();
  RankedTensorType first = n.inputType(0);
  auto axis = axisOf(n, n.attrInt("axis", 0), first.getRank());
  if (failed(axis))
    return failure();
  SmallVector<Type> types;
  for (int i = 0; i < n.numInputs(); ++i)
    types.push_back(n.inputType(i));
  auto type = shape::concat(n.loc, types, *axis);
  if (failed(type))
    return failure();
  if (n.allConst() && isSmall(type->getShape())) {
    SmallVector<const HostTensor *> cs;
    for (int i = 0; i < n.numInputs(); ++i)
      cs.push_back(n.constInput(i));
    return n.setConst(0, foldConcat(cs, *axis));
  }
  SmallVector<Value> operands;
  for (int i = 0; i < n.numInputs(); ++i)
    operands.push_back(n.operand(i));
  return n.setResult(
      0, build<ConcatOp>(n, *type, operands, {i64Attr(n, "axis", *axis)}));
}

LogicalResult lowerSplit(NodeContext &n) {
  if (failed(expectInputs(n, 1, 2)))
    return failure();
  RankedTensorType t = n.inputType(0);
  auto axis = axisOf(n, n.attrInt("axis", 0), t.getRank());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> sizes;
  if (n.opset >= 13 && n.hasInput(1)) {
    auto s = shapeInput(n, 1, "split");
    if (failed(s))
      return failure();
    sizes = *s;
  } else if (auto s = n.attrInts("split"); s && n.opset < 13) {
    sizes = *s;
  } else {
    int64_t parts = n.attrInt("num_outputs", n.numOutputs());
    int64_t dim = t.getDimSize(*axis);
    if (parts <= 0 || parts != n.numOutputs())
      return n.error() << "cannot split into " << parts << " parts for "
                       << n.numOutputs() << " outputs";
    int64_t chunk = (dim + parts - 1) / parts;
    if (n.opset < 18 && dim % parts != 0)
      return n.error() << "extent " << dim << " does not split evenly into "
                       << parts;
    for (int64_t i = 0; i < parts; ++i)
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - i * chunk)));
  }
  if ((int64_t)sizes.size() != n.numOutputs())
    return n.error() << sizes.size() << " split sizes for " << n.numOutputs()
                     << " outputs";
  auto types = shape::split(n.loc, t, *axis, sizes);
  if (failed(types))
    return failure();
  if (const HostTensor *c = n.constInput(0)) {
    SmallVector<int64_t> starts(t.getRank(), 0), steps(t.getRank(), 1);
    for (auto [i, ty] : llvm::enumerate(*types)) {
      auto rt = cast<RankedTensorType>(ty);
      if (failed(n.setConst(i, foldSlice(*c, starts, steps, rt.getShape()))))
        return failure();
      starts[*axis] += sizes[i];
    }
    return success();
  }
  auto op = SplitOp::create(
      n.b, n.loc, TypeRange(*types), ValueRange{n.operand(0)},
      {i64Attr(n, "axis", *axis), arrayAttr(n, "sizes", sizes)});
  for (auto [i, r] : llvm::enumerate(op->getResults()))
    if (failed(n.setResult(i, r)))
      return failure();
  return success();
}

LogicalResult lowerSlice(NodeContext &n) {
  if (failed(expectInputs(n, 3, 5)))
    return failure();
  RankedTensorType t = n.inputType(0);
  int64_t rank = t.getRank();
  auto starts = shapeInput(n, 1, "starts");
  auto ends = shapeInput(n, 2, "ends");
  if (failed(starts) || failed(ends))
    return failure();
  SmallVector<int64_t> axes, steps;
  if (n.hasInput(3)) {
    auto a = shapeInput(n, 3, "axes");
    if (failed(a))
      return failure();
    axes = *a;
  } else {
    for (size_t i = 0; i < starts->size(); ++i)
      axes.push_back(i);
  }
  if (n.hasInput(4)) {
    auto s = shapeInput(n, 4, "steps");
    if (failed(s))
      return failure();
    steps = *s;
  } else {
    steps.assign(starts->size(), 1);
  }
  if (ends->size() != starts->size() || axes.size() != starts->size() ||
      steps.size() != starts->size())
    return n.error() << "starts, ends, axes and steps differ in length";
  SmallVector<int64_t> lo(rank, 0), step(rank, 1), count(t.getShape());
  SmallVector<bool> seen(rank, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    auto ax = axisOf(n, axes[i], rank);
    if (failed(ax))
      return failure();
    if (seen[*ax])
      return n.error() << "repeats axis " << axes[i];
    seen[*ax] = true;
    int64_t dim = t.getDimSize(*ax), s = (*starts)[i], e = (*ends)[i],
            st = steps[i];
    if (st == 0)
      return n.error() << "step 0 on axis " << axes[i];
    if (s < 0)
      s = s < -dim ? 0 : s + dim;
    if (e < 0)
      e = e < -dim ? -1 : e + dim;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      count[*ax] = e > s ? (e - s + st - 1) / st : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      count[*ax] = s > e ? (s - e + (-st) - 1) / (-st) : 0;
    }
    lo[*ax] = s;
    step[*ax] = st;
  }
  if (const HostTensor *c = n.constInput(0))
    return n.setConst(0, foldSlice(*c, lo, step, count));
  SmallVector<int64_t> limits(rank);
  for (int64_t d = 0; d < rank; ++d) {
    if (step[d] < 0)
      return n.error() << "negative steps are only supported on constants";
    limits[d] = lo[d] + (count[d] == 0 ? 0 : (count[d] - 1) * step[d] + 1);
  }
  auto type = shape::slice(n.loc, t, lo, limits, step);
  if (failed(type))
    return failure();
  return n.setResult(0, build<SliceOp>(n, *type, {n.operand(0)},
                                       {arrayAttr(n, "starts", lo),
                                        arrayAttr(n, "limits", limits),
                                        arrayAttr(n, "strides", step)}));
}

LogicalResult lowerExpand(NodeContext &n) {
  if (failed(expectInputs(n, 2, 2)))
    return failure();
  auto target = shapeInput(n, 1, "shape");
  if (failed(target))
    return failure();
  RankedTensorType t = n.inputType(0);
  auto dims = shape::broadcastShapes(n.loc, t.getShape(), *target);
  if (failed(dims) || failed(checkedDims(*dims, n.loc, "shape")))
    return failure();
  auto type = RankedTensorType::get(*dims, t.getElementType());
  if (const HostTensor *c = n.constInput(0); c && isSmall(*dims))
    return n.setConst(0,
                      foldElementwise({c}, *dims, t.getElementType(),
                                      [](ArrayRef<double> a) { return a[0]; }));
  if (type == t)
    return n.setAlias(0, n.input(0));
  return n.setResult(0, build<BroadcastOp>(n, type, {n.operand(0)}));
}

LogicalResult lowerGather(NodeContext &n) {
  if (failed(expectInputs(n, 2, 2)))
    return failure();
  RankedTensorType data = n.inputType(0), indices = n.inputType(1);
  auto axis = axisOf(n, n.attrInt("axis", 0), data.getRank());
  if (failed(axis))
    return failure();
  auto type = shape::gather(n.loc, data, indices, *axis);
  if (failed(type))
    return failure();
  if (const HostTensor *idx = n.constInput(1)) {
    int64_t dim = data.getDimSize(*axis);
    for (int64_t i = 0; i < idx->numel(); ++i)
      if (idx->asInt(i) < -dim || idx->asInt(i) >= dim)
        return n.error() << "index " << idx->asInt(i)
                         << " is out of range for extent " << dim;
    if (const HostTensor *c = n.constInput(0); c && isSmall(type->getShape()))
      return n.setConst(0, foldGather(*c, *idx, *axis));
  }
  return n.setResult(0, build<GatherOp>(n, *type, {n.operand(0), n.operand(1)},
                                        {i64Attr(n, "axis", *axis)}));
}

LogicalResult lowerTrilu(NodeContext &n) {
  if (failed(expectInputs(n, 1, 2)))
    return failure();
  RankedTensorType t = n.inputType(0);
  if (t.getRank() < 2)
    return n.error() << "needs rank >= 2, got " << t;
  int64_t k = 0;
  if (n.hasInput(1)) {
    auto kc = n.requireConst(1, "k");
    if (failed(kc))
      return failure();
    k = (*kc)->asInt(0);
  }
  bool upper = n.attrInt("upper", 1);
  if (const HostTensor *c = n.constInput(0))
    return n.setConst(0, foldTrilu(*c, k, upper));
  return n.setResult(
      0, build<TriluOp>(n, t, {n.operand(0)},
                        {i64Attr(n, "k", k), boolAttr(n, "upper", upper)}));
}

LogicalResult lowerIdentity(NodeContext &n) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  return n.setAlias(0, n.input(0));
}

LogicalResult lowerDropout(NodeContext &n) {
  if (failed(expectInputs(n, 1, 3)))
    return failure();
  if (n.hasInput(2)) {
    auto training = n.requireConst(2, "training_mode");
    if (failed(training))
      return failure();
    // Training mode with ratio 0 (a model exported with TrainingMode.TRAINING,
    // so that equal initializers are not merged, and dropout=0) is the
    // identity; any other ratio would need random masks.
    if ((*training)->asInt(0)) {
      double ratio = 0.5; // ONNX's default
      if (n.hasInput(1)) {
        auto r = n.requireConst(1, "ratio");
        if (failed(r))
          return failure();
        ratio = (*r)->asDouble(0);
      }
      if (ratio != 0.0) {
        char shown[32];
        std::snprintf(shown, sizeof shown, "%g", ratio);
        return n.error() << "training-mode dropout (ratio " << shown
                         << ") is not supported; set dropout to 0, or "
                            "export in eval mode";
      }
    }
  }
  if (failed(n.setUnsupported(1, "dropout masks are not imported")))
    return failure();
  return n.setAlias(0, n.input(0));
}

//===----------------------------------------------------------------------===//
// Compute
//===----------------------------------------------------------------------===//

template <typename OpTy> LogicalResult softmaxLike(NodeContext &n) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  RankedTensorType t = n.inputType(0);
  if (!isa<FloatType>(t.getElementType()))
    return n.error() << "expects a float tensor, got " << t;
  auto axis = axisOf(n, n.attrInt("axis", -1), t.getRank());
  if (failed(axis))
    return failure();
  return n.setResult(
      0, build<OpTy>(n, t, {n.operand(0)}, {i64Attr(n, "axis", *axis)}));
}

LogicalResult lowerMatMul(NodeContext &n) {
  if (failed(expectInputs(n, 2, 2)))
    return failure();
  RankedTensorType a = n.inputType(0), b = n.inputType(1);
  if (a.getRank() < 2 || b.getRank() < 2)
    return n.error() << "1-D MatMul operands are not supported (" << a << ", "
                     << b << ")";
  auto type = shape::matmul(n.loc, a, b, false, false);
  if (failed(type))
    return failure();
  return n.setResult(0,
                     build<MatmulOp>(n, *type, {n.operand(0), n.operand(1)}));
}

LogicalResult lowerGemm(NodeContext &n) {
  if (failed(expectInputs(n, 2, 3)))
    return failure();
  bool ta = n.attrInt("transA", 0), tb = n.attrInt("transB", 0);
  RankedTensorType c = n.hasInput(2) ? n.inputType(2) : RankedTensorType();
  auto type = shape::gemm(n.loc, n.inputType(0), n.inputType(1), c, ta, tb);
  if (failed(type))
    return failure();
  SmallVector<Value> operands{n.operand(0), n.operand(1)};
  if (c)
    operands.push_back(n.operand(2));
  return n.setResult(
      0,
      build<GemmOp>(n, *type, operands,
                    {n.b.getNamedAttr(
                         "alpha", n.b.getF32FloatAttr(n.attrFloat("alpha", 1))),
                     n.b.getNamedAttr(
                         "beta", n.b.getF32FloatAttr(n.attrFloat("beta", 1))),
                     boolAttr(n, "trans_a", ta), boolAttr(n, "trans_b", tb)}));
}

template <typename OpTy>
LogicalResult reduction(NodeContext &n, int kind, int64_t axesInputOpset) {
  if (failed(expectInputs(n, 1, 2)))
    return failure();
  RankedTensorType t = n.inputType(0);
  auto axesOrNone = axesOf(n, 1, n.opset >= axesInputOpset);
  if (failed(axesOrNone))
    return failure();
  SmallVector<int64_t> axes;
  if (*axesOrNone && !(*axesOrNone)->empty()) {
    for (int64_t a : **axesOrNone) {
      auto ax = axisOf(n, a, t.getRank());
      if (failed(ax))
        return failure();
      if (llvm::is_contained(axes, *ax))
        return n.error() << "repeats axis " << a;
      axes.push_back(*ax);
    }
    llvm::sort(axes);
  } else if (n.attrInt("noop_with_empty_axes", 0)) {
    return n.setAlias(0, n.input(0));
  } else {
    for (int64_t i = 0; i < t.getRank(); ++i)
      axes.push_back(i);
  }
  bool keepdims = n.attrInt("keepdims", 1);
  auto type = shape::reduce(n.loc, t, axes, keepdims);
  if (failed(type))
    return failure();
  if (const HostTensor *c = n.constInput(0))
    return n.setConst(0, foldReduce(*c, axes, keepdims, kind));
  return n.setResult(0, build<OpTy>(n, *type, {n.operand(0)},
                                    {arrayAttr(n, "axes", axes),
                                     boolAttr(n, "keepdims", keepdims)}));
}

LogicalResult lowerLayerNorm(NodeContext &n) {
  if (failed(expectInputs(n, 2, 3)))
    return failure();
  if (failed(
          n.setUnsupported(1, "LayerNormalization's mean is not imported")) ||
      failed(n.setUnsupported(2, "LayerNormalization's inverse standard "
                                 "deviation is not imported")))
    return failure();
  RankedTensorType x = n.inputType(0);
  auto axis = axisOf(n, n.attrInt("axis", -1), x.getRank());
  if (failed(axis))
    return failure();
  RankedTensorType bias = n.hasInput(2) ? n.inputType(2) : RankedTensorType();
  if (failed(shape::checkLayerNorm(n.loc, x, n.inputType(1), bias, *axis)))
    return failure();
  SmallVector<Value> operands{n.operand(0), n.operand(1)};
  if (bias)
    operands.push_back(n.operand(2));
  return n.setResult(
      0, build<LayerNormOp>(
             n, x, operands,
             {i64Attr(n, "axis", *axis),
              n.b.getNamedAttr("epsilon", n.b.getF32FloatAttr(n.attrFloat(
                                              "epsilon", 1e-5f)))}));
}

/// Explicit pads from ONNX's auto_pad (NOTSET: `pads` as given) for
/// windows of `kernel` (dilated) along the spatial axes of `x`.
FailureOr<SmallVector<int64_t>> windowPads(NodeContext &n, StringRef op,
                                           RankedTensorType x,
                                           ArrayRef<int64_t> kernel,
                                           ArrayRef<int64_t> strides,
                                           ArrayRef<int64_t> dilations) {
  int64_t spatial = x.getRank() - 2;
  SmallVector<int64_t> pads =
      n.attrInts("pads").value_or(SmallVector<int64_t>(2 * spatial, 0));
  std::string autoPad = n.attrString("auto_pad", "NOTSET");
  if (autoPad == "VALID")
    return SmallVector<int64_t>(2 * spatial, 0);
  if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    // Output extent ceil(S / stride); the odd pad goes after (SAME_UPPER)
    // or before (SAME_LOWER).
    pads.assign(2 * spatial, 0);
    for (int64_t d = 0; d < spatial; ++d) {
      int64_t in = x.getDimSize(2 + d), st = std::max<int64_t>(strides[d], 1);
      int64_t k = (kernel[d] - 1) * dilations[d] + 1;
      int64_t total =
          std::max<int64_t>(((in + st - 1) / st - 1) * st + k - in, 0);
      int64_t small = total / 2, large = total - small;
      pads[d] = autoPad == "SAME_UPPER" ? small : large;
      pads[d + spatial] = autoPad == "SAME_UPPER" ? large : small;
    }
    return pads;
  }
  if (autoPad != "NOTSET")
    return n.error() << op << " auto_pad '" << autoPad << "' is not supported";
  return pads;
}

LogicalResult lowerConv(NodeContext &n) {
  if (failed(expectInputs(n, 2, 3)))
    return failure();
  RankedTensorType x = n.inputType(0), w = n.inputType(1);
  int64_t spatial = x.getRank() - 2;
  if (spatial != 1 && spatial != 2)
    return n.error() << "Conv of " << (spatial < 0 ? 0 : spatial)
                     << " spatial axes is not supported (1-D and 2-D are)";
  if (w.getRank() != x.getRank())
    return n.error() << "Conv weight " << w << " must have the input's rank";
  auto ones = SmallVector<int64_t>(spatial, 1);
  SmallVector<int64_t> strides = n.attrInts("strides").value_or(ones);
  SmallVector<int64_t> dilations = n.attrInts("dilations").value_or(ones);
  if (auto k = n.attrInts("kernel_shape");
      k && ArrayRef<int64_t>(*k) != w.getShape().drop_front(2))
    return n.error() << "Conv kernel_shape does not match the weight " << w;
  if ((int64_t)strides.size() != spatial ||
      (int64_t)dilations.size() != spatial)
    return n.error() << "Conv needs " << spatial << " strides and dilations";
  SmallVector<int64_t> kernel(w.getShape().drop_front(2));
  auto padded = windowPads(n, "Conv", x, kernel, strides, dilations);
  if (failed(padded))
    return failure();
  SmallVector<int64_t> pads = *padded;
  int64_t group = n.attrInt("group", 1);
  RankedTensorType bias = n.hasInput(2) ? n.inputType(2) : RankedTensorType();
  auto type = shape::conv(n.loc, x, w, bias, {strides, pads, dilations, group});
  if (failed(type))
    return failure();
  SmallVector<Value> operands{n.operand(0), n.operand(1)};
  if (bias)
    operands.push_back(n.operand(2));
  return n.setResult(
      0, build<ConvOp>(
             n, *type, operands,
             {n.b.getNamedAttr("strides", n.b.getDenseI64ArrayAttr(strides)),
              n.b.getNamedAttr("pads", n.b.getDenseI64ArrayAttr(pads)),
              n.b.getNamedAttr("dilations",
                               n.b.getDenseI64ArrayAttr(dilations)),
              i64Attr(n, "groups", group)}));
}

/// MaxPool and AveragePool: fsdp.pool.
LogicalResult lowerPool(NodeContext &n, StringRef mode) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  if (mode == "max" &&
      failed(n.setUnsupported(1, "MaxPool's indices are not imported")))
    return failure();
  RankedTensorType x = n.inputType(0);
  int64_t spatial = x.getRank() - 2;
  StringRef op = mode == "max" ? "MaxPool" : "AveragePool";
  if (!isa<FloatType>(x.getElementType()))
    return n.error() << op << " of " << x
                     << " is not supported (float tensors are)";
  if (spatial != 1 && spatial != 2)
    return n.error() << op << " of " << (spatial < 0 ? 0 : spatial)
                     << " spatial axes is not supported (1-D and 2-D are)";
  auto kernel = n.attrInts("kernel_shape");
  if (!kernel || (int64_t)kernel->size() != spatial)
    return n.error() << op << " needs kernel_shape with " << spatial
                     << " extents";
  auto ones = SmallVector<int64_t>(spatial, 1);
  SmallVector<int64_t> strides = n.attrInts("strides").value_or(ones);
  SmallVector<int64_t> dilations = n.attrInts("dilations").value_or(ones);
  if ((int64_t)strides.size() != spatial ||
      (int64_t)dilations.size() != spatial)
    return n.error() << op << " needs " << spatial << " strides and dilations";
  if (n.attrInt("storage_order", 0) != 0)
    return n.error() << "MaxPool storage_order 1 (column-major indices) is "
                        "not supported";
  auto pads = windowPads(n, op, x, *kernel, strides, dilations);
  if (failed(pads))
    return failure();
  bool ceil = n.attrInt("ceil_mode", 0), includePad =
                                             n.attrInt("count_include_pad", 0);
  auto type = shape::pool(n.loc, x,
                          {mode, *kernel, strides, *pads, dilations, ceil});
  if (failed(type))
    return failure();
  return n.setResult(
      0, build<PoolOp>(
             n, *type, {n.operand(0)},
             {n.b.getNamedAttr("mode", n.b.getStringAttr(mode)),
              n.b.getNamedAttr("kernel", n.b.getDenseI64ArrayAttr(*kernel)),
              n.b.getNamedAttr("strides", n.b.getDenseI64ArrayAttr(strides)),
              n.b.getNamedAttr("pads", n.b.getDenseI64ArrayAttr(*pads)),
              n.b.getNamedAttr("dilations",
                               n.b.getDenseI64ArrayAttr(dilations)),
              n.b.getNamedAttr("ceil_mode", n.b.getBoolAttr(ceil)),
              n.b.getNamedAttr("count_include_pad",
                               n.b.getBoolAttr(includePad))}));
}

/// GlobalAveragePool / GlobalMaxPool: a mean or maximum over the spatial
/// axes, keeping them as extents of 1.
template <typename OpTy> LogicalResult lowerGlobalPool(NodeContext &n) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  RankedTensorType x = n.inputType(0);
  if (x.getRank() < 3)
    return n.error() << "global pooling needs [N, C, spatial...], got " << x;
  SmallVector<int64_t> axes;
  for (int64_t d = 2; d < x.getRank(); ++d)
    axes.push_back(d);
  auto type = shape::reduce(n.loc, x, axes, true);
  if (failed(type))
    return failure();
  return n.setResult(
      0, build<OpTy>(n, *type, {n.operand(0)},
                     {n.b.getNamedAttr("axes", n.b.getDenseI64ArrayAttr(axes)),
                      n.b.getNamedAttr("keepdims", n.b.getBoolAttr(true))}));
}

/// BatchNormalization. In training mode (training_mode = 1, what
/// torch.onnx.export writes with TrainingMode.TRAINING): fsdp.batch_norm
/// with the batch's statistics, and the running statistics updated as
/// PyTorch does, `running = momentum·running + (1 - momentum)·batch` with
/// the unbiased variance, stored back into their buffers. Otherwise the
/// running statistics normalise: elementwise ops.
LogicalResult lowerBatchNorm(NodeContext &n) {
  if (failed(expectInputs(n, 5, 5)))
    return failure();
  RankedTensorType x = n.inputType(0);
  if (!isa<FloatType>(x.getElementType()) || x.getRank() < 2)
    return n.error() << "BatchNormalization of " << x
                     << " is not supported (float [N, C, ...] is)";
  auto stats = shape::batchNormStats(n.loc, x, n.inputType(1), n.inputType(2));
  if (failed(stats))
    return failure();
  for (int i : {3, 4})
    if (n.inputType(i) != *stats)
      return n.error() << "BatchNormalization running statistics must be "
                       << *stats << ", got " << n.inputType(i);
  float eps = n.attrFloat("epsilon", 1e-5f);
  Type elem = x.getElementType();
  auto scalar = [&](double v) -> Value {
    auto t = RankedTensorType::get({}, elem);
    return ConstantOp::create(n.b, n.loc,
                              DenseElementsAttr::get(t, n.b.getFloatAttr(elem, v)));
  };
  auto binaryOp = [&](auto tag, Value a, Value b) -> Value {
    using OpTy = decltype(tag);
    auto t = shape::binary(n.loc, cast<RankedTensorType>(a.getType()),
                           cast<RankedTensorType>(b.getType()), Type());
    return build<OpTy>(n, *t, {a, b});
  };
  // [C] as [C, 1, ...]: broadcast against x's channel axis.
  SmallVector<int64_t> channelShape(x.getRank() - 1, 1);
  channelShape[0] = x.getDimSize(1);
  auto perChannel = [&](Value v) -> Value {
    return build<ReshapeOp>(n, RankedTensorType::get(channelShape, elem), {v});
  };
  if (!n.attrInt("training_mode", 0)) {
    Value rstd = build<SqrtOp>(
        n, *stats, {binaryOp(AddOp(), n.operand(4), scalar(eps))});
    Value centred = binaryOp(SubOp(), n.operand(0), perChannel(n.operand(3)));
    Value y = binaryOp(DivOp(), centred, perChannel(rstd));
    y = binaryOp(MulOp(), y, perChannel(n.operand(1)));
    y = binaryOp(AddOp(), y, perChannel(n.operand(2)));
    if (failed(n.setUnsupported(1, "BatchNormalization's running mean output "
                                   "exists in training mode only")) ||
        failed(n.setUnsupported(2, "BatchNormalization's running variance "
                                   "output exists in training mode only")))
      return failure();
    return n.setResult(0, y);
  }
  for (int i : {3, 4})
    if (n.input(i).parameter.empty())
      return n.error() << "BatchNormalization in training mode with running "
                          "statistics that are not initializers (buffers the "
                          "step updates) is not supported";
  auto bn = BatchNormOp::create(
      n.b, n.loc, TypeRange{x, *stats, *stats},
      ValueRange{n.operand(0), n.operand(1), n.operand(2)},
      {n.b.getNamedAttr("epsilon", n.b.getF32FloatAttr(eps))});
  double momentum = n.attrFloat("momentum", 0.9f);
  auto update = [&](int input, Value batch, double factor) {
    Value kept = binaryOp(MulOp(), n.operand(input), scalar(momentum));
    Value added = binaryOp(MulOp(), batch, scalar((1 - momentum) * factor));
    Value running = binaryOp(AddOp(), kept, added);
    AssignBufferOp::create(
        n.b, n.loc, FlatSymbolRefAttr::get(n.ctx(), n.input(input).parameter),
        running);
    return running;
  };
  Value mean = update(3, bn.getMean(), 1.0);
  Value var = update(4, bn.getVar(), 1.0); // unbiased already
  if ((n.numOutputs() > 1 && failed(n.setResult(1, mean))) ||
      (n.numOutputs() > 2 && failed(n.setResult(2, var))))
    return failure();
  return n.setResult(0, bn.getResult());
}

template <typename OpTy> LogicalResult classificationLoss(NodeContext &n) {
  if (failed(expectInputs(n, 2, 3)))
    return failure();
  if (failed(n.setUnsupported(1, "log_prob outputs are not imported")))
    return failure();
  std::string reduction = n.attrString("reduction", "mean");
  RankedTensorType weight = n.hasInput(2) ? n.inputType(2) : RankedTensorType();
  auto type = shape::classificationLoss(n.loc, n.inputType(0), n.inputType(1),
                                        weight, reduction);
  if (failed(type))
    return failure();
  SmallVector<Value> operands{n.operand(0), n.operand(1)};
  if (weight)
    operands.push_back(n.operand(2));
  SmallVector<NamedAttribute> attrs{
      n.b.getNamedAttr("reduction", n.b.getStringAttr(reduction))};
  if (n.attr("ignore_index"))
    attrs.push_back(i64Attr(n, "ignore_index", n.attrInt("ignore_index", 0)));
  return n.setResult(0, build<OpTy>(n, *type, operands, attrs));
}

/// Ops with no fsdp counterpart that still appear in shape/constant
/// subgraphs (RoPE tables built from positions): folded, else an error.
LogicalResult foldOnly(NodeContext &n, double (*fn)(double)) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  const HostTensor *c = n.constInput(0);
  if (!c)
    return n.error() << "is only supported on values known at import time";
  return n.setConst(
      0, foldElementwise({c}, c->shape, c->elementType,
                         [fn](ArrayRef<double> a) { return fn(a[0]); }));
}

} // namespace

const llvm::StringMap<LowerFn> &mlir::fsdp::onnxLowerings() {
  static const llvm::StringMap<LowerFn> table = [] {
    llvm::StringMap<LowerFn> t = {
  // The elementwise unary ops with an ONNX op (runtime/plan/UnaryOps.def):
  // folded with the row's scalar in double when the input is constant.
#define FSDP_UNARY(Class, name, onnx, aten, floatOnly, scalar)                 \
  {onnx,                                                                       \
   [](NodeContext &n) {                                                        \
     return unary<Class##Op>(                                                  \
         n, [](double x) { return ::fsdp::um::unary##Class(x); }, floatOnly);  \
   }},
#include "runtime/plan/UnaryOps.def"
#undef FSDP_UNARY
      {"Add",
       [](NodeContext &n) {
         return binary<AddOp>(n, [](double a, double b) { return a + b; });
       }},
      {"Sub",
       [](NodeContext &n) {
         return binary<SubOp>(n, [](double a, double b) { return a - b; });
       }},
      {"Mul",
       [](NodeContext &n) {
         return binary<MulOp>(n, [](double a, double b) { return a * b; });
       }},
      {"Div",
       [](NodeContext &n) {
         return binary<DivOp>(n, [](double a, double b) {
           // Integer division truncates, as ONNX does for integer types.
           return a / b;
         });
       }},
      {"Pow", lowerPow},
      {"Max",
       [](NodeContext &n) {
         return variadic<MaxOp>(
             n, [](double a, double b) { return std::max(a, b); });
       }},
      {"Min",
       [](NodeContext &n) {
         return variadic<MinOp>(
             n, [](double a, double b) { return std::min(a, b); });
       }},
      {"Equal",
       [](NodeContext &n) {
         return binary<EqualOp>(
             n, [](double a, double b) { return double(a == b); },
             Kind::Compare);
       }},
      {"Less",
       [](NodeContext &n) {
         return binary<LessOp>(
             n, [](double a, double b) { return double(a < b); },
             Kind::Compare);
       }},
      {"Greater",
       [](NodeContext &n) {
         return binary<GreaterOp>(
             n, [](double a, double b) { return double(a > b); },
             Kind::Compare);
       }},
      {"And",
       [](NodeContext &n) {
         return binary<AndOp>(
             n, [](double a, double b) { return double(a && b); }, Kind::Logic);
       }},
      {"Or",
       [](NodeContext &n) {
         return binary<OrOp>(
             n, [](double a, double b) { return double(a || b); }, Kind::Logic);
       }},
      {"Not",
       [](NodeContext &n) {
         if (failed(expectInputs(n, 1, 1)))
           return failure();
         if (!n.inputType(0).getElementType().isInteger(1))
           return LogicalResult(n.error() << "expects a boolean tensor");
         return unary<NotOp>(
             n, [](double a) { return double(!a); }, false);
       }},
      {"Cos",
       [](NodeContext &n) {
         return foldOnly(n, [](double a) { return std::cos(a); });
       }},
      {"Sin",
       [](NodeContext &n) {
         return foldOnly(n, [](double a) { return std::sin(a); });
       }},
      {"Where", lowerWhere},
      {"Cast", lowerCast},
      {"Constant", lowerConstant},
      {"Shape", lowerShape},
      {"Size", lowerSize},
      {"ConstantOfShape", lowerConstantOfShape},
      {"Range", lowerRange},
      {"Reshape", lowerReshape},
      {"Flatten", lowerFlatten},
      {"Unsqueeze", lowerUnsqueeze},
      {"Squeeze", lowerSqueeze},
      {"Transpose", lowerTranspose},
      {"Concat", lowerConcat},
      {"Split", lowerSplit},
      {"Slice", lowerSlice},
      {"Expand", lowerExpand},
      {"Gather", lowerGather},
      {"Trilu", lowerTrilu},
      {"Identity", lowerIdentity},
      {"Dropout", lowerDropout},
      {"Softmax", softmaxLike<SoftmaxOp>},
      {"LogSoftmax", softmaxLike<LogSoftmaxOp>},
      {"MatMul", lowerMatMul},
      {"Gemm", lowerGemm},
      {"ReduceSum",
       [](NodeContext &n) { return reduction<ReduceSumOp>(n, 0, 13); }},
      {"ReduceMean",
       [](NodeContext &n) { return reduction<ReduceMeanOp>(n, 1, 18); }},
      {"ReduceMax",
       [](NodeContext &n) { return reduction<ReduceMaxOp>(n, 2, 18); }},
      {"LayerNormalization", lowerLayerNorm},
      {"Conv", lowerConv},
      {"BatchNormalization", lowerBatchNorm},
      {"MaxPool", [](NodeContext &n) { return lowerPool(n, "max"); }},
      {"AveragePool", [](NodeContext &n) { return lowerPool(n, "avg"); }},
      {"GlobalAveragePool", lowerGlobalPool<ReduceMeanOp>},
      {"GlobalMaxPool", lowerGlobalPool<ReduceMaxOp>},
      {"SoftmaxCrossEntropyLoss", classificationLoss<CrossEntropyOp>},
      {"NegativeLogLikelihoodLoss", classificationLoss<NllLossOp>},
    };
    t.erase(""); // rows of UnaryOps.def without an ONNX op
    return t;
  }();
  return table;
}
