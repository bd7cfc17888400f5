//===- DataMovement.cpp - Data movement (device lowering) -----------------===//
//
// Data movement as device operations (declared in LoweringSupport.h; found
// through common/Ops.def by runtime/device/Lowering.cpp).
//
//===----------------------------------------------------------------------===//
#include "runtime/device/lowering/LoweringSupport.h"

namespace fsdp::device::lowering {

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

Status lowerReshape(Ctx &c) {
  if (c.in.in[0].bytes() != c.in.out[0].bytes())
    return Status::error("changes the size");
  copy(c, c.in.in[0], c.in.out[0]);
  return Status::ok();
}

void emitCopy(Ctx &c, StridedCopy s, int64_t n) {
  Strided &ix = s.index;
  coalesce(ix, 2);
  int r = ix.rank;
  // A contiguous innermost run in wider elements, where the pointers, the
  // bases and every outer step are multiples of the width.
  if (r > 0 && ix.strides[0][r - 1] == 1 && ix.strides[1][r - 1] == 1)
    for (int64_t width : {16, 8, 4}) {
      if (width <= s.elemBytes)
        break;
      int64_t f = width / s.elemBytes;
      bool fits = width % s.elemBytes == 0 && ix.dims[r - 1] % f == 0 &&
                  (uintptr_t)s.x % width == 0 && (uintptr_t)s.y % width == 0 &&
                  s.srcBase % f == 0 && s.dstBase % f == 0;
      for (int d = 0; d + 1 < r && fits; ++d)
        fits = ix.strides[0][d] % f == 0 && ix.strides[1][d] % f == 0;
      if (!fits)
        continue;
      ix.dims[r - 1] /= f;
      for (int d = 0; d + 1 < r; ++d)
        for (int o = 0; o < 2; ++o)
          ix.strides[o][d] /= f;
      s.srcBase /= f;
      s.dstBase /= f;
      s.elemBytes = width;
      n /= f;
      break;
    }
  c.emit(n, s);
}

/// y (contiguous) = x read at base + sum(index[d] * srcStrides[d]).
void gatherCopy(Ctx &c, const TensorRef &x, const TensorRef &y,
                const Dims &srcStrides, int64_t base) {
  StridedCopy s{};
  s.index.rank = (int)y.rank();
  Dims dst = contiguousStrides(y.shape);
  for (int64_t d = 0; d < y.rank(); ++d) {
    s.index.dims[d] = y.shape[d];
    s.index.strides[0][d] = srcStrides[d];
    s.index.strides[1][d] = dst[d];
  }
  s.elemBytes = dtypeSize(x.dtype);
  s.srcBase = base;
  s.x = c.at<uint8_t>(x);
  s.y = c.at<uint8_t>(y);
  emitCopy(c, s, y.numel());
}

Status lowerTranspose(Ctx &c) {
  const TensorRef &x = c.in.in[0], &y = c.in.out[0];
  Dims perm = c.attrInts("perm");
  if ((int64_t)perm.size() != x.rank() || y.rank() != x.rank() ||
      x.dtype != y.dtype || x.rank() > kMaxDims)
    return Status::error("bad permutation");
  std::vector<bool> seen(perm.size());
  Dims xs = contiguousStrides(x.shape), src(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) {
    if (perm[d] < 0 || perm[d] >= x.rank() || seen[perm[d]] ||
        y.shape[d] != x.shape[perm[d]])
      return Status::error("bad permutation");
    seen[perm[d]] = true;
    src[d] = xs[perm[d]];
  }
  gatherCopy(c, x, y, src, 0);
  return Status::ok();
}

/// Checks a strided box of `x` with the extents of `box`.
Status checkBox(const TensorRef &x, const Dims &box, const Dims &starts,
                const Dims &steps) {
  if ((int64_t)box.size() != x.rank() || starts.size() != box.size() ||
      steps.size() != box.size() || x.rank() > kMaxDims)
    return Status::error("needs one start and stride per dimension");
  for (int64_t d = 0; d < x.rank(); ++d)
    if (starts[d] < 0 || steps[d] <= 0 ||
        (box[d] > 0 && starts[d] + (box[d] - 1) * steps[d] >= x.shape[d]))
      return Status::error("box outside " + shapeString(x.shape));
  return Status::ok();
}

Status lowerSlice(Ctx &c) {
  const TensorRef &x = c.in.in[0], &y = c.in.out[0];
  Dims starts = c.attrInts("starts"), steps = c.attrInts("strides");
  FSDP_RETURN_IF_ERROR(checkBox(x, y.shape, starts, steps));
  if (x.dtype != y.dtype)
    return Status::error("changes the dtype");
  Dims xs = contiguousStrides(x.shape), src(x.rank());
  int64_t base = 0;
  for (int64_t d = 0; d < x.rank(); ++d) {
    src[d] = xs[d] * steps[d];
    base += starts[d] * xs[d];
  }
  gatherCopy(c, x, y, src, base);
  return Status::ok();
}

Status lowerInsertSlice(Ctx &c) {
  const TensorRef &dest = c.in.in[0], &src = c.in.in[1], &y = c.in.out[0];
  Dims starts = c.attrInts("starts"), steps = c.attrInts("strides");
  if (dest.shape != y.shape || dest.dtype != src.dtype || dest.dtype != y.dtype)
    return Status::error("output does not match the destination");
  FSDP_RETURN_IF_ERROR(checkBox(y, src.shape, starts, steps));
  copy(c, dest, y);
  StridedCopy s{};
  s.index.rank = (int)src.rank();
  Dims ys = contiguousStrides(y.shape), ss = contiguousStrides(src.shape);
  for (int64_t d = 0; d < src.rank(); ++d) {
    s.index.dims[d] = src.shape[d];
    s.index.strides[0][d] = ss[d];
    s.index.strides[1][d] = ys[d] * steps[d];
    s.dstBase += starts[d] * ys[d];
  }
  s.elemBytes = dtypeSize(y.dtype);
  s.x = c.at<uint8_t>(src);
  s.y = c.at<uint8_t>(y);
  emitCopy(c, s, src.numel());
  return Status::ok();
}

/// Rows of `outer` chunks: x's chunk o (`chunk` elements) to y's row o at
/// element `at` (rows of `row` elements), or back (split).
void chunkCopy(Ctx &c, const uint8_t *x, uint8_t *y, int64_t outer,
               int64_t chunk, int64_t row, int64_t at, int64_t elemBytes,
               bool toRows) {
  StridedCopy s{};
  s.index.rank = 2;
  s.index.dims[0] = outer;
  s.index.dims[1] = chunk;
  s.index.strides[toRows ? 0 : 1][0] = chunk;
  s.index.strides[toRows ? 1 : 0][0] = row;
  s.index.strides[0][1] = s.index.strides[1][1] = 1;
  (toRows ? s.dstBase : s.srcBase) = at;
  s.elemBytes = elemBytes;
  s.x = x;
  s.y = y;
  emitCopy(c, s, outer * chunk);
}

/// Concat (parts into the whole) and split (the whole into parts): one
/// chunk copy per part and row.
Status concatOrSplit(Ctx &c, bool split) {
  const std::vector<TensorRef> &parts = split ? c.in.out : c.in.in;
  const TensorRef &whole = split ? c.in.in[0] : c.in.out[0];
  int64_t axis = c.attrInt("axis", 0), outer, inner;
  FSDP_RETURN_IF_ERROR(concatLayout(parts, whole, axis, split, outer, inner));
  int64_t row = whole.shape[axis] * inner, at = 0;
  for (const TensorRef &part : parts) {
    int64_t chunk = part.shape[axis] * inner;
    const TensorRef &x = split ? whole : part, &y = split ? part : whole;
    chunkCopy(c, c.at<uint8_t>(x), c.at<uint8_t>(y), outer, chunk, row, at,
              dtypeSize(whole.dtype), !split);
    at += chunk;
  }
  return Status::ok();
}

Status lowerConcat(Ctx &c) { return concatOrSplit(c, false); }
Status lowerSplit(Ctx &c) { return concatOrSplit(c, true); }

Status lowerBroadcast(Ctx &c) {
  const TensorRef &x = c.in.in[0], &y = c.in.out[0];
  Strided s;
  if (!broadcastIndex(y.shape, {&x.shape}, s) || x.dtype != y.dtype)
    return Status::error(shapeString(x.shape) + " does not broadcast to " +
                         shapeString(y.shape));
  Dims src(s.strides[0], s.strides[0] + y.rank());
  gatherCopy(c, x, y, src, 0);
  return Status::ok();
}

Status lowerTrilu(Ctx &c) {
  const TensorRef &x = c.in.in[0], &y = c.in.out[0];
  if (x.shape != y.shape || x.rank() < 2 || x.dtype != y.dtype)
    return Status::error("needs rank >= 2 and one shape");
  c.emit(y.numel(),
         Trilu{x.shape[x.rank() - 2], x.shape[x.rank() - 1], c.attrInt("k", 0),
               c.attrBool("upper", true), dtypeSize(y.dtype), c.at<uint8_t>(x),
               c.at<uint8_t>(y)});
  return Status::ok();
}

Status lowerArgsort(Ctx &c) {
  const TensorRef &x = c.in.in[0], &y = c.in.out[0];
  int64_t axis = c.attrInt("axis", 0);
  if (x.shape != y.shape || x.dtype != DType::F32 || y.dtype != DType::I64 ||
      axis < 0 || axis >= std::max<int64_t>(x.rank(), 1))
    return Status::error("needs an f32 input, an i64 result of its shape and "
                         "an axis in range");
  int64_t dim = x.rank() ? x.shape[axis] : 1,
          inner = x.rank() ? product(x.shape, axis + 1) : 1;
  c.emit(x.numel(), Argsort{dim, inner, c.attrBool("descending", false),
                            c.at<float>(x), c.at<int64_t>(y)});
  return Status::ok();
}

} // namespace fsdp::device::lowering
