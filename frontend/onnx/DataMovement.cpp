//===- DataMovement.cpp - Data movement (ONNX) ----------------------------===//
//
// Data movement: their lowerings from ONNX and their rows of the importer's
// table (frontend/OnnxOps.cpp gathers the families).
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/OnnxOpsSupport.h"

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::onnx_ops;

namespace {

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

} // namespace

void mlir::fsdp::onnx_ops::addDataMovement(llvm::StringMap<LowerFn> &table) {
  addRows(table, {
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
                 });
}
