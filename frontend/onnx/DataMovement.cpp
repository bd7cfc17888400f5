//===- DataMovement.cpp - Data movement (ONNX) ----------------------------===//
//
// Data movement: their lowerings from ONNX and their rows of the importer's
// table (frontend/OnnxOps.cpp gathers the families).
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/OnnxOpsSupport.h"
#include "common/UnaryMath.h"

#include <deque>

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
  // torch.cat skips an empty 1-D tensor beside tensors of another rank (its
  // legacy rule), and the exporter writes such inputs as they are
  // (Emformer's empty memory): skipped here too.
  bool otherRank = llvm::any_of(llvm::seq(0, n.numInputs()), [&](int i) {
    return n.inputType(i).getRank() != 1;
  });
  SmallVector<int> kept; // never empty: a tensor of another rank is kept
  for (int i = 0; i < n.numInputs(); ++i) {
    RankedTensorType t = n.inputType(i);
    if (!(otherRank && t.getRank() == 1 && t.getDimSize(0) == 0))
      kept.push_back(i);
  }
  RankedTensorType first = n.inputType(kept[0]);
  auto axis = axisOf(n, n.attrInt("axis", 0), first.getRank());
  if (failed(axis))
    return failure();
  SmallVector<Type> types;
  for (int i : kept)
    types.push_back(n.inputType(i));
  auto type = shape::concat(n.loc, types, *axis);
  if (failed(type))
    return failure();
  if (llvm::all_of(kept, [&](int i) { return n.constInput(i); }) &&
      isSmall(type->getShape())) {
    SmallVector<const HostTensor *> cs;
    for (int i : kept)
      cs.push_back(n.constInput(i));
    return n.setConst(0, foldConcat(cs, *axis));
  }
  SmallVector<Value> operands;
  for (int i : kept)
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
  // A negative step (x.flip(d), x[::-1] in the exporter's hands) takes
  // its positions with a gather, after a slice of the other axes.
  SmallVector<int64_t> limits(rank), sliceLo(lo), sliceStep(step);
  for (int64_t d = 0; d < rank; ++d) {
    if (step[d] < 0) {
      sliceLo[d] = 0;
      sliceStep[d] = 1;
      limits[d] = t.getDimSize(d);
      continue;
    }
    limits[d] = lo[d] + (count[d] == 0 ? 0 : (count[d] - 1) * step[d] + 1);
  }
  auto type = shape::slice(n.loc, t, sliceLo, limits, sliceStep);
  if (failed(type))
    return failure();
  Value y = *type == t ? n.operand(0)
                       : build<SliceOp>(n, *type, {n.operand(0)},
                                        {arrayAttr(n, "starts", sliceLo),
                                         arrayAttr(n, "limits", limits),
                                         arrayAttr(n, "strides", sliceStep)});
  for (int64_t d = 0; d < rank; ++d) {
    if (step[d] > 0)
      continue;
    SmallVector<int64_t> positions;
    for (int64_t i = 0; i < count[d]; ++i)
      positions.push_back(lo[d] + i * step[d]);
    y = gatherAxis(n, y, d, positions);
  }
  return n.setResult(0, y);
}

/// Tile: each axis repeated `repeats[d]` times whole (torch's repeat):
/// [.., e, ..] viewed as [.., 1, e, ..], broadcast to [.., r, e, ..] and
/// merged.
LogicalResult lowerTile(NodeContext &n) {
  if (failed(expectInputs(n, 2, 2)))
    return failure();
  RankedTensorType t = n.inputType(0);
  auto repeats = shapeInput(n, 1, "repeats");
  if (failed(repeats))
    return failure();
  if ((int64_t)repeats->size() != t.getRank())
    return n.error() << "repeats has " << repeats->size()
                     << " entries for a rank " << t.getRank() << " input";
  SmallVector<int64_t> out(t.getShape());
  for (auto [d, r] : llvm::enumerate(*repeats)) {
    if (r < 0)
      return n.error() << "repeats[" << d << "] is negative (" << r << ")";
    out[d] *= r;
  }
  if (failed(checkedDims(out, n.loc, "repeats")))
    return failure();
  Value y = n.operand(0);
  for (auto [d, r] : llvm::enumerate(*repeats)) {
    if (r == 1)
      continue;
    SmallVector<int64_t> shape = shapeOf(y), split(shape);
    split.insert(split.begin() + d, 1);
    SmallVector<int64_t> wide(split);
    wide[d] = r;
    y = reshapeValue(n, y, split);
    y = build<BroadcastOp>(n, RankedTensorType::get(wide, t.getElementType()),
                           {y});
    shape[d] *= r;
    y = reshapeValue(n, y, shape);
  }
  return n.setResult(0, y);
}

/// The offsets into `data` flattened of each element of an index tensor
/// of shape `indexShape` along `axis`, the index itself left out (0):
/// Σ over the other axes of coordinate × stride.
static std::vector<int64_t> otherAxesOffsets(RankedTensorType data,
                                             ArrayRef<int64_t> indexShape,
                                             int64_t axis,
                                             SmallVectorImpl<int64_t> &strides) {
  strides.assign(data.getRank(), 1);
  for (int64_t d = data.getRank() - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * data.getDimSize(d + 1);
  int64_t count = 1;
  for (int64_t e : indexShape)
    count *= e;
  std::vector<int64_t> base(count);
  SmallVector<int64_t> coord(indexShape.size(), 0);
  for (int64_t i = 0; i < count; ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < indexShape.size(); ++d)
      off += (int64_t)d == axis ? 0 : coord[d] * strides[d];
    base[i] = off;
    for (int64_t d = (int64_t)indexShape.size() - 1; d >= 0; --d) {
      if (++coord[d] < indexShape[d])
        break;
      coord[d] = 0;
    }
  }
  return base;
}

/// The flat offsets into `data` of index tensor `index` (i64, data's
/// rank) along `axis`: takeAlong's, shared by ScatterElements.
static Value flatOffsets(NodeContext &n, RankedTensorType data, Value index,
                         int64_t axis) {
  auto it = cast<RankedTensorType>(index.getType());
  SmallVector<int64_t> strides;
  std::vector<int64_t> base =
      otherAxesOffsets(data, it.getShape(), axis, strides);
  Type i64 = n.b.getI64Type();
  auto bt = RankedTensorType::get(it.getShape(), n.b.getI1Type());
  Value negative =
      build<LessOp>(n, bt, {index, splatConstant(n, i64, it.getShape(), 0)});
  Value k = build<WhereOp>(
      n, it,
      {negative,
       broadcastBinary<AddOp>(n, index,
                              scalarConstant(n, i64, data.getDimSize(axis))),
       index});
  k = broadcastBinary<MulOp>(n, k, scalarConstant(n, i64, strides[axis]));
  return build<AddOp>(
      n, it,
      {k, ConstantOp::create(n.b, n.loc,
                             DenseElementsAttr::get(it, ArrayRef<int64_t>(base)))});
}

/// `data` flattened, gathered at `offsets` (the result has their shape).
static Value gatherFlat(NodeContext &n, Value data, Value offsets) {
  auto dt = cast<RankedTensorType>(data.getType());
  Value flat = reshapeValue(n, data, {dt.getNumElements()});
  return build<GatherOp>(
      n, RankedTensorType::get(shapeOf(offsets), dt.getElementType()),
      {flat, offsets}, {i64Attr(n, "axis", 0)});
}

/// Whether each update of a ScatterElements without reduction is the last
/// writer of its position: `offsets` (flat positions, index's shape) sorted
/// along `axis` (stable, so a position's writers stay in their order), an
/// update last where the next sorted position differs, sent back to its
/// place. Writers of one position share the other axes' coordinates, so
/// each line along the axis is sorted alone: O(n log n), unbounded.
static Value lastWriters(NodeContext &n, Value offsets, int64_t axis,
                         int64_t count) {
  SmallVector<int64_t> shape = shapeOf(offsets);
  int64_t k = shape[axis], total = 1;
  for (int64_t d : shape)
    total *= d;
  auto f32 = RankedTensorType::get(shape, n.b.getF32Type());
  auto bools = RankedTensorType::get(shape, n.b.getI1Type());
  // Positions below 2^24 are exact in float32: one pass, not int64's three.
  Value key =
      count <= (int64_t(1) << 24) ? build<CastOp>(n, f32, {offsets}) : offsets;
  Value perm = sortedPositions(n, key, axis, /*descending=*/false);
  Value sorted = takeAlong(n, offsets, perm, axis);
  SmallVector<int64_t> one = shape;
  one[axis] = 1;
  Value next = concatAxis(n,
                          {sliceAxis(n, sorted, axis, 1, k),
                           splatConstant(n, n.b.getI64Type(), one, -1)},
                          axis);
  Value last = build<CastOp>(
      n, f32,
      {build<NotOp>(n, bools, {build<EqualOp>(n, bools, {sorted, next})})});
  // last[j] belongs to the update at perm[j] of its line.
  auto flatF32 = RankedTensorType::get({total}, n.b.getF32Type());
  Value back = build<ScatterAddOp>(
      n, flatF32,
      {splatConstant(n, n.b.getF32Type(), {total}, 0),
       reshapeValue(n,
                    flatOffsets(n, cast<RankedTensorType>(offsets.getType()),
                                perm, axis),
                    {total}),
       reshapeValue(n, last, {total})},
      {i64Attr(n, "axis", 0)});
  return build<GreaterOp>(n, bools,
                          {reshapeValue(n, back, shape),
                           splatConstant(n, n.b.getF32Type(), {}, 0)});
}

/// The updates `u` where `last` (lastWriters) holds and zeros elsewhere,
/// with every writer's gradient: u behind a gradient stop where it is
/// kept, plus u - stop(u) (zero) everywhere.
static Value lastWritersOnly(NodeContext &n, Value u, Value last) {
  auto ut = cast<RankedTensorType>(u.getType());
  Value zeros = splatConstant(n, ut.getElementType(), {}, 0);
  if (!isa<FloatType>(ut.getElementType()))
    return build<WhereOp>(n, ut, {last, u, zeros});
  Value held = build<StopGradientOp>(n, ut, {u});
  return build<AddOp>(n, ut,
                      {build<WhereOp>(n, ut, {last, held, zeros}),
                       build<SubOp>(n, ut, {u, held})});
}

/// Whether a scatter without reduction is torch.onnx.export's index_add or
/// index_put(accumulate=True): updates written into a constant of zeros
/// whose result only Add nodes read (x + scatter(0, idx, v): 1.13's
/// exporter writes both so, and means the sum where an index repeats,
/// which ONNX leaves undefined). Any other is torch.scatter or
/// x[idx] = v, where the last writer stays.
static bool accumulatesIntoZeros(NodeContext &n) {
  const HostTensor *data = n.constInput(0);
  if (!data)
    return false;
  for (int64_t i = 0; i < data->numel(); ++i)
    if (data->asDouble(i) != 0)
      return false;
  SmallVector<std::string> readers = n.outputReaders(0);
  return !readers.empty() &&
         llvm::all_of(readers, [](const std::string &t) { return t == "Add"; });
}

/// ScatterElements (torch.scatter, scatter_add): data with updates[i..]
/// written (reduction none) or added (add) at index[i..] on `axis`, as one
/// scatter_add into the data flattened. `none` clears each written
/// position first; a position written twice (which ONNX leaves undefined)
/// keeps its last writer, as PyTorch's CPU loop and ONNX Runtime do, and
/// every writer gets the position's gradient, as torch.scatter's backward
/// gives it (lastWriters; the tracer's writes.py does the same), except in
/// the exporter's index_add (accumulatesIntoZeros), where they add. mul,
/// max and min are refused.
LogicalResult lowerScatterElements(NodeContext &n) {
  if (failed(expectInputs(n, 3, 3)))
    return failure();
  RankedTensorType data = n.inputType(0), indices = n.inputType(1),
                   updates = n.inputType(2);
  if (data.getRank() != indices.getRank() || data.getRank() == 0 ||
      indices.getShape() != updates.getShape())
    return n.error() << "expects data, indices and updates of one rank, "
                        "indices and updates of one shape, got "
                     << data << ", " << indices << " and " << updates;
  if (updates.getElementType() != data.getElementType())
    return n.error() << "updates " << updates << " differ from data " << data;
  auto axis = axisOf(n, n.attrInt("axis", 0), data.getRank());
  if (failed(axis))
    return failure();
  std::string reduction = n.attrString("reduction", "none");
  if (reduction != "none" && reduction != "add")
    return n.error() << "reduction '" << reduction
                     << "' is not supported (none and add are)";
  if (reduction == "none" && accumulatesIntoZeros(n))
    reduction = "add";
  for (int64_t d = 0; d < data.getRank(); ++d)
    if (d != *axis && indices.getDimSize(d) > data.getDimSize(d))
      return n.error() << "indices " << indices << " exceed data " << data
                       << " on axis " << d;
  auto it = RankedTensorType::get(indices.getShape(), n.b.getI64Type());
  Value k = n.operand(1);
  if (!indices.getElementType().isInteger(64))
    k = build<CastOp>(n, it, {k});
  int64_t count = data.getNumElements();
  Value offsets = reshapeValue(n, flatOffsets(n, data, k, *axis),
                               {indices.getNumElements()});
  auto flatType = RankedTensorType::get({count}, data.getElementType());
  Value flat = reshapeValue(n, n.operand(0), {count});
  Value u = reshapeValue(n, n.operand(2), {indices.getNumElements()});
  if (reduction == "none" && indices.getDimSize(*axis) > 1) {
    Value offsetsShaped = reshapeValue(n, offsets, indices.getShape());
    Value last = reshapeValue(n, lastWriters(n, offsetsShaped, *axis, count),
                              {indices.getNumElements()});
    u = lastWritersOnly(n, u, last);
  }
  if (reduction == "none") {
    Type e = data.getElementType();
    Value hits = build<ScatterAddOp>(
        n, flatType,
        {splatConstant(n, e, {count}, 0), offsets,
         splatConstant(n, e, {indices.getNumElements()}, 1)},
        {i64Attr(n, "axis", 0)});
    auto bt = RankedTensorType::get({count}, n.b.getI1Type());
    Value written =
        build<GreaterOp>(n, bt, {hits, splatConstant(n, e, {count}, 0)});
    flat = build<WhereOp>(n, flatType,
                          {written, splatConstant(n, e, {count}, 0), flat});
  }
  Value y = build<ScatterAddOp>(n, flatType, {flat, offsets, u},
                                {i64Attr(n, "axis", 0)});
  return n.setResult(0, reshapeValue(n, y, data.getShape()));
}

/// GatherElements (torch.gather): out[i..] = data[i.. with index[i..] on
/// `axis`], one flat gather of the data (takeAlong); constant indices
/// (checked against the extent) make the offsets a constant.
LogicalResult lowerGatherElements(NodeContext &n) {
  if (failed(expectInputs(n, 2, 2)))
    return failure();
  RankedTensorType data = n.inputType(0), indices = n.inputType(1);
  if (data.getRank() != indices.getRank() || data.getRank() == 0)
    return n.error() << "expects data and indices of one rank (at least 1), got "
                     << data << " and " << indices;
  auto axis = axisOf(n, n.attrInt("axis", 0), data.getRank());
  if (failed(axis))
    return failure();
  if (!indices.getElementType().isInteger(64) &&
      !indices.getElementType().isInteger(32))
    return n.error() << "expects int64 or int32 indices, got " << indices;
  for (int64_t d = 0; d < data.getRank(); ++d)
    if (d != *axis && indices.getDimSize(d) > data.getDimSize(d))
      return n.error() << "indices " << indices << " exceed data " << data
                       << " on axis " << d;
  auto it = RankedTensorType::get(indices.getShape(), n.b.getI64Type());
  const HostTensor *c = n.constInput(1);
  if (!c) {
    Value k = n.operand(1);
    if (!indices.getElementType().isInteger(64))
      k = build<CastOp>(n, it, {k});
    return n.setResult(0, takeAlong(n, n.operand(0), k, *axis));
  }
  SmallVector<int64_t> strides;
  std::vector<int64_t> base =
      otherAxesOffsets(data, indices.getShape(), *axis, strides);
  int64_t extent = data.getDimSize(*axis);
  for (int64_t i = 0; i < (int64_t)base.size(); ++i) {
    int64_t k = c->asInt(i);
    if (k < -extent || k >= extent)
      return n.error() << "index " << k << " is out of range for extent "
                       << extent;
    base[i] += (k < 0 ? k + extent : k) * strides[*axis];
  }
  Value offsets = ConstantOp::create(
      n.b, n.loc, DenseElementsAttr::get(it, ArrayRef<int64_t>(base)));
  return n.setResult(0, gatherFlat(n, n.operand(0), offsets));
}

/// OneHot(indices, depth, values = [off, on]; axis): on where the new
/// axis's position equals the index (a negative index counted from the
/// end), off elsewhere: an equality against a constant iota. An index
/// outside [-depth, depth) is off everywhere, as ONNX's reference has it.
LogicalResult lowerOneHot(NodeContext &n) {
  if (failed(expectInputs(n, 3, 3)))
    return failure();
  RankedTensorType it = n.inputType(0), vt = n.inputType(2);
  auto depthConst = n.requireConst(1, "depth");
  auto values = n.requireConst(2, "values");
  if (failed(depthConst) || failed(values))
    return failure();
  if ((*depthConst)->numel() != 1 || (*values)->numel() != 2)
    return n.error() << "depth must be one value and values two";
  int64_t depth = (int64_t)(*depthConst)->asDouble(0);
  if (depth < 1)
    return n.error() << "depth must be positive, got " << depth;
  if (!it.getElementType().isInteger(64) && !it.getElementType().isInteger(32))
    return n.error() << "expects int64 or int32 indices, got " << it;
  int64_t rank = it.getRank() + 1;
  auto axis = axisOf(n, n.attrInt("axis", -1), rank);
  if (failed(axis))
    return failure();
  Type i64 = n.b.getI64Type(), elem = vt.getElementType();
  SmallVector<int64_t> expanded(it.getShape()), out(it.getShape()),
      iotaShape(rank, 1);
  expanded.insert(expanded.begin() + *axis, 1);
  out.insert(out.begin() + *axis, depth);
  iotaShape[*axis] = depth;
  Value idx = n.operand(0);
  if (!it.getElementType().isInteger(64))
    idx = build<CastOp>(n, RankedTensorType::get(it.getShape(), i64), {idx});
  auto bt = RankedTensorType::get(it.getShape(), n.b.getI1Type());
  Value negative =
      build<LessOp>(n, bt, {idx, splatConstant(n, i64, it.getShape(), 0)});
  idx = build<WhereOp>(
      n, idx.getType(),
      {negative, broadcastBinary<AddOp>(n, idx, scalarConstant(n, i64, depth)),
       idx});
  idx = reshapeValue(n, idx, expanded);
  std::vector<int64_t> iota(depth);
  for (int64_t i = 0; i < depth; ++i)
    iota[i] = i;
  Value positions = ConstantOp::create(
      n.b, n.loc,
      DenseElementsAttr::get(RankedTensorType::get(iotaShape, i64),
                             ArrayRef<int64_t>(iota)));
  Value hot = build<EqualOp>(
      n, RankedTensorType::get(out, n.b.getI1Type()), {idx, positions});
  return n.setResult(
      0, build<WhereOp>(n, RankedTensorType::get(out, elem),
                        {hot, scalarConstant(n, elem, (*values)->asDouble(1)),
                         scalarConstant(n, elem, (*values)->asDouble(0))}));
}

/// DepthToSpace (pixel shuffle) and SpaceToDepth (its inverse) on
/// [N, C, H, W]: a reshape, a transpose and a reshape. DepthToSpace's
/// modes: DCR (depth-column-row, the default) and CRD (PyTorch's
/// pixel_shuffle).
LogicalResult lowerDepthToSpace(NodeContext &n, bool toSpace) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  RankedTensorType t = n.inputType(0);
  int64_t b = n.attrInt("blocksize", 0);
  if (t.getRank() != 4)
    return n.error() << "expects a 4-D [N, C, H, W] input, got " << t;
  if (b < 1)
    return n.error() << "blocksize must be positive, got " << b;
  int64_t N = t.getDimSize(0), C = t.getDimSize(1), H = t.getDimSize(2),
          W = t.getDimSize(3);
  Value x = n.operand(0);
  if (!toSpace) {
    std::string mode = n.attrString("mode", "DCR");
    if (mode != "DCR" && mode != "CRD")
      return n.error() << "mode must be DCR or CRD, got '" << mode << "'";
    if (C % (b * b))
      return n.error() << "channels " << C << " are not a multiple of "
                       << b * b;
    int64_t c = C / (b * b);
    bool dcr = mode == "DCR";
    x = reshapeValue(n, x, dcr ? SmallVector<int64_t>{N, b, b, c, H, W}
                               : SmallVector<int64_t>{N, c, b, b, H, W});
    x = transposeValue(n, x, dcr ? SmallVector<int64_t>{0, 3, 4, 1, 5, 2}
                                 : SmallVector<int64_t>{0, 1, 4, 2, 5, 3});
    return n.setResult(0, reshapeValue(n, x, {N, c, H * b, W * b}));
  }
  if (H % b || W % b)
    return n.error() << "spatial size " << H << "x" << W
                     << " is not a multiple of the block " << b;
  x = reshapeValue(n, x, {N, C, H / b, b, W / b, b});
  x = transposeValue(n, x, {0, 3, 5, 1, 2, 4});
  return n.setResult(0, reshapeValue(n, x, {N, C * b * b, H / b, W / b}));
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

/// ScatterND on values from the step: torch.onnx.export's `x[idx] = v`
/// and index_put(accumulate=True) (index_put). data is seen as rows (its
/// first k axes, k the index tuples' length) of slices (the rest); each
/// tuple's row is sum(i_j · stride_j), a negative i_j counted from the
/// end. `add` (and the exporter's accumulate, accumulatesIntoZeros) is one
/// scatter_add of the update slices; `none` clears the written rows, and a
/// row written twice (which ONNX leaves undefined) keeps its last writer,
/// every writer getting the row's gradient, as index_put's backward gives
/// it (lastWriters, as ScatterElements).
static LogicalResult lowerScatterNDValues(NodeContext &n) {
  RankedTensorType data = n.inputType(0), indices = n.inputType(1),
                   updates = n.inputType(2);
  std::string reduction = n.attrString("reduction", "none");
  if (reduction != "none" && reduction != "add")
    return n.error() << "reduction '" << reduction
                     << "' on values from the step is not supported (none and "
                        "add are; all five when data, indices and updates are "
                        "known at import time)";
  if (reduction == "none" && accumulatesIntoZeros(n))
    reduction = "add";
  int64_t r = data.getRank(), q = indices.getRank();
  if (q < 1 || !isa<IntegerType>(indices.getElementType()) ||
      indices.isDynamicDim(q - 1))
    return n.error() << "indices must be an integer tensor of rank >= 1, got "
                     << indices;
  int64_t k = indices.getDimSize(q - 1);
  if (k < 1 || k > r)
    return n.error() << "indices' last dimension " << k
                     << " must be in [1, rank of data = " << r << "]";
  SmallVector<int64_t> expected(indices.getShape().begin(),
                                indices.getShape().end() - 1);
  expected.append(data.getShape().begin() + k, data.getShape().end());
  if (updates.getShape() != ArrayRef<int64_t>(expected) ||
      updates.getElementType() != data.getElementType())
    return n.error() << "updates are " << updates << ", expected "
                     << RankedTensorType::get(expected, data.getElementType());
  int64_t rows = 1, slice = 1, tuples = indices.getNumElements() / k;
  for (int64_t d = 0; d < r; ++d)
    (d < k ? rows : slice) *= data.getDimSize(d);
  Type i64 = n.b.getI64Type(), e = data.getElementType();
  auto it = RankedTensorType::get({tuples, k}, i64);
  Value idx = reshapeValue(n, n.operand(1), {tuples, k});
  if (!indices.getElementType().isInteger(64))
    idx = build<CastOp>(n, it, {idx});
  // Each tuple's row: Σ_j wrap(i_j) · stride_j, as one [tuples, k] x [k]
  // sum of products in int64.
  SmallVector<int64_t> dims(data.getShape().begin(),
                            data.getShape().begin() + k),
      strides(k, 1);
  for (int64_t j = k - 1; j > 0; --j)
    strides[j - 1] = strides[j] * dims[j];
  auto row = [&](ArrayRef<int64_t> v) {
    return ConstantOp::create(
        n.b, n.loc,
        DenseElementsAttr::get(RankedTensorType::get({1, k}, i64), v));
  };
  auto bt = RankedTensorType::get({tuples, k}, n.b.getI1Type());
  Value negative =
      build<LessOp>(n, bt, {idx, splatConstant(n, i64, {tuples, k}, 0)});
  idx = build<WhereOp>(
      n, it, {negative, broadcastBinary<AddOp>(n, idx, row(dims)), idx});
  Value lin = build<ReduceSumOp>(
      n, RankedTensorType::get({tuples}, i64),
      {broadcastBinary<MulOp>(n, idx, row(strides))},
      {n.b.getNamedAttr("axes", n.b.getDenseI64ArrayAttr({1})),
       n.b.getNamedAttr("keepdims", n.b.getBoolAttr(false))});
  auto rowsType = RankedTensorType::get({rows, slice}, e);
  Value x = reshapeValue(n, n.operand(0), {rows, slice});
  Value u = reshapeValue(n, n.operand(2), {tuples, slice});
  if (reduction == "none") {
    if (tuples > 1) {
      u = lastWritersOnly(
          n, u, reshapeValue(n, lastWriters(n, lin, 0, rows), {tuples, 1}));
    }
    Type f32 = n.b.getF32Type();
    Value hits = build<ScatterAddOp>(n, RankedTensorType::get({rows}, f32),
                                     {splatConstant(n, f32, {rows}, 0), lin,
                                      splatConstant(n, f32, {tuples}, 1)},
                                     {i64Attr(n, "axis", 0)});
    Value written =
        build<GreaterOp>(n, RankedTensorType::get({rows}, n.b.getI1Type()),
                         {hits, splatConstant(n, f32, {}, 0)});
    x = build<WhereOp>(
        n, rowsType,
        {reshapeValue(n, written, {rows, 1}), splatConstant(n, e, {}, 0), x});
  }
  Value y =
      build<ScatterAddOp>(n, rowsType, {x, lin, u}, {i64Attr(n, "axis", 0)});
  return n.setResult(0, reshapeValue(n, y, data.getShape()));
}

/// ScatterND, folded when data, indices and updates are constants: the
/// exporter writes it for slice assignment (`mask[a:b, c:d] = k`), which
/// in model code builds constants (Swin's shifted-window attention mask).
/// Reductions none, add, mul, max, min. Otherwise lowerScatterNDValues.
LogicalResult lowerScatterND(NodeContext &n) {
  if (failed(expectInputs(n, 3, 3)))
    return failure();
  const HostTensor *data = n.constInput(0), *indices = n.constInput(1),
                   *updates = n.constInput(2);
  if (!data || !indices || !updates)
    return lowerScatterNDValues(n);
  std::string reduction = n.attrString("reduction", "none");
  if (reduction != "none" && reduction != "add" && reduction != "mul" &&
      reduction != "max" && reduction != "min")
    return n.error() << "reduction '" << reduction
                     << "' is not one of none, add, mul, max, min";
  if (reduction == "none" && accumulatesIntoZeros(n))
    reduction = "add";
  int64_t r = data->shape.size(), q = indices->shape.size();
  if (q < 1 || indices->isFloat())
    return n.error() << "indices must be an integer tensor of rank >= 1";
  int64_t k = indices->shape.back();
  if (k < 1 || k > r)
    return n.error() << "indices' last dimension " << k
                     << " must be in [1, rank of data = " << r << "]";
  SmallVector<int64_t> expected(indices->shape.begin(),
                                indices->shape.end() - 1);
  expected.append(data->shape.begin() + k, data->shape.end());
  if (SmallVector<int64_t>(updates->shape.begin(), updates->shape.end()) !=
      expected)
    return n.error() << "updates are " << updates->type() << ", expected "
                     << RankedTensorType::get(expected, updates->elementType);
  if (!isSmall(data->shape))
    return n.error() << "folds up to " << kMaxFoldElements << " elements";
  if (updates->elementType != data->elementType)
    return n.error() << "updates and data differ in element type";
  int64_t slice = 1;
  for (int64_t d = k; d < r; ++d)
    slice *= data->shape[d];
  HostTensor out = *data;
  int64_t tuples = indices->numel() / k;
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t offset = 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t dim = data->shape[j], i = indices->asInt(t * k + j);
      if (i < -dim || i >= dim)
        return n.error() << "index " << i << " is out of range for axis " << j
                         << " (" << dim << ")";
      offset = offset * dim + (i < 0 ? i + dim : i);
    }
    offset *= slice;
    for (int64_t e = 0; e < slice; ++e) {
      double u = updates->asDouble(t * slice + e),
             v = out.asDouble(offset + e);
      if (reduction == "add")
        u = v + u;
      else if (reduction == "mul")
        u = v * u;
      else if (reduction == "max")
        u = ::fsdp::um::binaryMax(v, u);
      else if (reduction == "min")
        u = ::fsdp::um::binaryMin(v, u);
      out.set(offset + e, u);
    }
  }
  return n.setConst(0, std::move(out));
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

/// Pad's borders, axis by axis, over either values (ops) or constants
/// (the fold): `Pieces` gives shapeOf, slice, splat and concat. Each border
/// is slices of the input (or a splat) concatenated around it, so the
/// gradient is the concat's and the slices'; a negative pad crops.
template <typename Pieces, typename T>
FailureOr<T> padAxes(NodeContext &n, Pieces &p, T x, StringRef mode,
                     ArrayRef<int64_t> axes, ArrayRef<int64_t> pads) {
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t axis = axes[i], before = pads[i], after = pads[i + axes.size()];
    int64_t dim = p.shapeOf(x)[axis];
    if (before < 0 || after < 0) { // a crop first
      int64_t lo = std::max<int64_t>(0, -before),
              hi = dim - std::max<int64_t>(0, -after);
      if (hi < lo)
        return n.error() << "pads crop axis " << axis << " (" << dim
                         << ") below 0";
      x = p.slice(x, axis, lo, hi);
      dim = hi - lo;
      before = std::max<int64_t>(0, before);
      after = std::max<int64_t>(0, after);
    }
    if (before == 0 && after == 0)
      continue;
    if (mode != "constant" && dim == 0)
      return n.error() << "mode '" << mode << "' pads an empty axis " << axis;
    if (mode == "reflect" && (before >= dim || after >= dim))
      return n.error() << "reflect pads of " << before << " and " << after
                       << " need more than that many elements on axis "
                       << axis << " (" << dim << ")";
    if (mode == "wrap" && (before > dim || after > dim))
      return n.error() << "wrap pads of " << before << " and " << after
                       << " exceed axis " << axis << " (" << dim << ")";
    SmallVector<T> parts;
    // The border of `count` elements on one side, in order along the axis.
    auto border = [&](int64_t count, bool front) {
      if (mode == "constant") {
        SmallVector<int64_t> shape = p.shapeOf(x);
        shape[axis] = count;
        parts.push_back(p.splat(shape));
      } else if (mode == "wrap") {
        parts.push_back(front ? p.slice(x, axis, dim - count, dim)
                              : p.slice(x, axis, 0, count));
      } else {
        for (int64_t k = 0; k < count; ++k) {
          int64_t j = mode == "edge" ? (front ? 0 : dim - 1)
                                     : (front ? count - k : dim - 2 - k);
          parts.push_back(p.slice(x, axis, j, j + 1));
        }
      }
    };
    if (before > 0)
      border(before, true);
    parts.push_back(x);
    if (after > 0)
      border(after, false);
    x = p.concat(parts, axis);
  }
  return x;
}

/// Pad (modes constant, edge, reflect, wrap; pads and constant_value as
/// inputs from opset 11, axes from 18; attributes before), folded when the
/// input is known. torch.onnx.export writes it for F.pad and for pooling's
/// count_include_pad borders (Inception, DenseNet).
LogicalResult lowerPad(NodeContext &n) {
  if (n.numInputs() < 1 || n.numInputs() > 4 || !n.hasInput(0))
    return n.error() << "expects 1 to 4 inputs, got " << n.numInputs();
  RankedTensorType t = n.inputType(0);
  int64_t rank = t.getRank();
  Type elem = t.getElementType();
  std::string mode = n.attrString("mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect" &&
      mode != "wrap")
    return n.error() << "mode '" << mode
                     << "' is not one of constant, edge, reflect, wrap";
  SmallVector<int64_t> pads;
  double value = 0.0;
  if (n.opset >= 11) {
    auto given = shapeInput(n, 1, "pads");
    if (failed(given))
      return failure();
    pads = *given;
    if (n.numInputs() > 2 && n.hasInput(2)) {
      auto v = n.requireConst(2, "constant_value");
      if (failed(v))
        return failure();
      if ((*v)->numel() != 1)
        return n.error() << "constant_value must hold one element";
      value = (*v)->asDouble(0);
    }
  } else {
    auto given = n.attrInts("pads");
    if (!given)
      return n.error() << "needs the 'pads' attribute";
    pads = *given;
    value = n.attrFloat("value", 0.0f);
  }
  SmallVector<int64_t> axes;
  if (n.numInputs() > 3 && n.hasInput(3)) {
    auto given = shapeInput(n, 3, "axes");
    if (failed(given))
      return failure();
    for (int64_t a : *given) {
      auto axis = axisOf(n, a, rank);
      if (failed(axis))
        return failure();
      axes.push_back(*axis);
    }
  } else {
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  if (pads.size() != 2 * axes.size())
    return n.error() << "pads has " << pads.size() << " values for "
                     << axes.size() << " axes (2 per axis expected)";
  SmallVector<int64_t> outShape(t.getShape());
  for (size_t i = 0; i < axes.size(); ++i) {
    outShape[axes[i]] += pads[i] + pads[i + axes.size()];
    if (outShape[axes[i]] < 0)
      return n.error() << "pads crop axis " << axes[i] << " below 0";
  }

  if (const HostTensor *c = n.constInput(0); c && isSmall(outShape)) {
    struct Folded {
      Type elem;
      double value;
      std::deque<HostTensor> held; // the pieces the fold makes
      SmallVector<int64_t> shapeOf(const HostTensor *v) { return v->shape; }
      const HostTensor *slice(const HostTensor *v, int64_t axis, int64_t lo,
                              int64_t hi) {
        SmallVector<int64_t> starts(v->shape.size(), 0), steps(starts.size(), 1);
        SmallVector<int64_t> count(v->shape.begin(), v->shape.end());
        starts[axis] = lo;
        count[axis] = hi - lo;
        return &held.emplace_back(foldSlice(*v, starts, steps, count));
      }
      const HostTensor *splat(ArrayRef<int64_t> shape) {
        HostTensor z = HostTensor::zeros(elem, shape);
        for (int64_t i = 0; i < z.numel(); ++i)
          z.set(i, value);
        return &held.emplace_back(std::move(z));
      }
      const HostTensor *concat(ArrayRef<const HostTensor *> parts, int64_t axis) {
        return &held.emplace_back(foldConcat(parts, axis));
      }
    } pieces{elem, value, {}};
    auto folded = padAxes(n, pieces, c, mode, axes, pads);
    if (failed(folded))
      return failure();
    return n.setConst(0, **folded);
  }

  struct Ops {
    NodeContext &n;
    Type elem;
    double value;
    SmallVector<int64_t> shapeOf(Value v) { return onnx_ops::shapeOf(v); }
    Value slice(Value v, int64_t axis, int64_t lo, int64_t hi) {
      return sliceAxis(n, v, axis, lo, hi);
    }
    Value splat(ArrayRef<int64_t> shape) {
      return splatConstant(n, elem, shape, value);
    }
    Value concat(ArrayRef<Value> parts, int64_t axis) {
      return concatAxis(n, parts, axis);
    }
  } ops{n, elem, value};
  auto padded = padAxes(n, ops, n.operand(0), mode, axes, pads);
  if (failed(padded))
    return failure();
  return n.setResult(0, *padded);
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
  if (failed(n.setUnsupported(1, "dropout masks are not imported")))
    return failure();
  double ratio = 0.0; // eval mode (no training_mode input): the identity
  if (n.hasInput(2)) {
    auto training = n.requireConst(2, "training_mode");
    if (failed(training))
      return failure();
    if ((*training)->asInt(0)) {
      ratio = 0.5; // ONNX's default
      if (n.hasInput(1)) {
        auto r = n.requireConst(1, "ratio");
        if (failed(r))
          return failure();
        ratio = (*r)->asDouble(0);
      }
    }
  }
  if (!(ratio >= 0.0 && ratio < 1.0))
    return n.error() << "dropout ratio " << ratio << " is not in [0, 1)";
  if (ratio == 0.0)
    return n.setAlias(0, n.input(0));
  if (!isa<FloatType>(n.inputType(0).getElementType()))
    return n.error() << "dropout of " << n.inputType(0)
                     << " is not supported (a float tensor is)";
  // Training mode (a model exported with TrainingMode.TRAINING): the plan
  // draws the mask (fsdp.dropout, Philox over seed, step and element), each
  // node its own stream, keyed by its position in the graph and the
  // node's `seed` attribute where the exporter gave one.
  uint64_t seed = (uint64_t(n.attrInt("seed", 0)) * 0x9E3779B1u + n.index) %
                  (uint64_t(1) << 62);
  return n.setResult(
      0, build<DropoutOp>(n, n.inputType(0), {n.operand(0)},
                          {n.b.getNamedAttr("p", n.b.getF64FloatAttr(ratio)),
                           n.b.getNamedAttr("seed",
                                            n.b.getI64IntegerAttr(seed))}));
}

} // namespace

Value mlir::fsdp::onnx_ops::takeAlong(NodeContext &n, Value data, Value index,
                                      int64_t axis) {
  return gatherFlat(
      n, data,
      flatOffsets(n, cast<RankedTensorType>(data.getType()), index, axis));
}

void mlir::fsdp::onnx_ops::addDataMovement(llvm::StringMap<LowerFn> &table) {
  addRows(table, {
                     {"Reshape", lowerReshape},
                     {"Flatten", lowerFlatten},
                     {"Unsqueeze", lowerUnsqueeze},
                     {"Squeeze", lowerSqueeze},
                     {"Transpose", lowerTranspose},
                     {"Concat", lowerConcat},
                     {"Pad", lowerPad},
                     {"Split", lowerSplit},
                     {"Slice", lowerSlice},
                     {"Expand", lowerExpand},
                     {"Gather", lowerGather},
                     {"GatherElements", lowerGatherElements},
                     {"ScatterElements", lowerScatterElements},
                     {"Tile", lowerTile},
                     {"OneHot", lowerOneHot},
                     {"DepthToSpace",
                      [](NodeContext &n) {
                        return lowerDepthToSpace(n, false);
                      }},
                     {"SpaceToDepth",
                      [](NodeContext &n) {
                        return lowerDepthToSpace(n, true);
                      }},
                     {"ScatterND", lowerScatterND},
                     {"Trilu", lowerTrilu},
                     {"Identity", lowerIdentity},
                     {"Dropout", lowerDropout},
                 });
}
