//===- Reductions.cpp - Reductions and norms (device lowering) ------------===//
//
// Reductions and norms as device operations (declared in LoweringSupport.h;
// found through common/Ops.def by runtime/device/Lowering.cpp).
//
//===----------------------------------------------------------------------===//
#include "runtime/device/lowering/LoweringSupport.h"

namespace fsdp::device::lowering {

//===----------------------------------------------------------------------===//
// Reductions and normalisations
//===----------------------------------------------------------------------===//

/// reduce_* over its `axes`; sum_squares over every axis.
Status reduce(Ctx &c, ReduceKind kind) {
  const TensorRef &x = c.in.in[0], &y = c.in.out[0];
  Dims axes;
  if (kind == ReduceKind::SumSquares)
    for (int64_t d = 0; d < x.rank(); ++d)
      axes.push_back(d);
  else
    axes = c.attrInts("axes");
  Reduce r;
  if (!reduceIndex(x.shape, axes, kind, r))
    return Status::error("bad reduction axes");
  int64_t kept = 1;
  for (int d = 0; d < r.kept; ++d)
    kept *= r.keptDims[d];
  bool integer = x.dtype == DType::I64 && y.dtype == DType::I64 &&
                 (kind == ReduceKind::Sum || kind == ReduceKind::Max);
  if (kept != y.numel() ||
      (!integer && (!floating(x.dtype) || !floating(y.dtype))))
    return Status::error("output " + shapeString(y.shape) +
                         " does not match the reduction");
  // bf16/f16 read and written as they are (sums in double, one rounding).
  r.x = c.at(x);
  r.y = c.at(y);
  r.tx = elemOf(x.dtype);
  r.ty = elemOf(y.dtype);
  // Few outputs (a bias gradient): each sum split into chunks whose
  // partial sums (scratch) are combined in chunk order.
  // (Integers are never split: their partial sums would be int64, and
  // the combining kernel's are doubles. Their reductions are a mask's
  // count, not a gradient's.)
  int64_t chunks = integer ? 1 : reduceChunks(r.count, y.numel());
  if (chunks <= 1) {
    c.emit(y.numel(), r);
    return Status::ok();
  }
  r.chunks = chunks;
  r.chunkLen = (r.count + chunks - 1) / chunks;
  r.outputs = y.numel();
  r.partial = reinterpret_cast<double *>(c.mem.scratch);
  c.emit(chunks * y.numel(), r);
  c.emit(y.numel(),
         ReduceCombine{kind, chunks, y.numel(), r.count, r.partial, r.y, r.ty});
  return Status::ok();
}

Status softmaxLike(Ctx &c, bool log) {
  const TensorRef &x = c.in.in[0], &y = c.in.out[0];
  int64_t axis = c.attrInt("axis", -1);
  if (x.shape != y.shape || axis < 0 || axis >= x.rank())
    return Status::error("bad axis or shapes");
  int64_t outer = product(x.shape, 0, axis), len = x.shape[axis],
          inner = product(x.shape, axis + 1);
  c.emit(outer * inner,
         SoftmaxRows{len, inner, log, c.at<float>(x), c.at<float>(y)});
  return Status::ok();
}

Status lowerLayerNorm(Ctx &c) {
  const TensorRef &x = c.in.in[0], &w = c.in.in[1], &y = c.in.out[0];
  int64_t axis = c.attrInt("axis", -1);
  double eps = c.attrFloat("epsilon", 1e-5);
  if (axis < 0 || axis >= x.rank() || x.shape != y.shape)
    return Status::error("bad axis or shapes");
  int64_t cols = product(x.shape, axis),
          rows = x.numel() / std::max<int64_t>(cols, 1);
  bool bias = c.in.in.size() == 3, centered = c.in.op != "rms_norm";
  if (w.numel() != cols || (bias && c.in.in[2].numel() != cols))
    return Status::error("scale/bias do not match the normalised size");
  if (!floating(x.dtype) || !floating(w.dtype) || !floating(y.dtype) ||
      (bias && c.in.in[2].dtype != w.dtype))
    return Status::error("expects float tensors, one type for scale and bias");
  c.emit(rows, LayerNormRows{cols, eps, c.at(x), c.at(w),
                             bias ? c.at(c.in.in[2]) : nullptr, c.at(y),
                             elemOf(x.dtype), elemOf(w.dtype), elemOf(y.dtype),
                             centered});
  return Status::ok();
}

Status lowerLayerNormGrad(Ctx &c) {
  const TensorRef &x = c.in.in[0], &w = c.in.in[1], &g = c.in.in[2];
  const TensorRef &dx = c.in.out[0], &dw = c.in.out[1];
  bool centered = c.in.op != "rms_norm_grad"; // rms_norm_grad: no dbias
  const TensorRef *db = centered ? &c.in.out[2] : nullptr;
  double eps = c.attrFloat("epsilon", 1e-5);
  int64_t rows, cols;
  FSDP_RETURN_IF_ERROR(
      layerNormGradLayout(c.in, c.attrInt("axis", -1), rows, cols));
  for (const TensorRef *t : {&x, &w, &g, &dx, &dw})
    if (!floating(t->dtype))
      return Status::error("expects float tensors");
  if (db && db->dtype != dw.dtype)
    return Status::error("expects one type for the scale's and the bias's "
                         "gradients");
  double *stats = reinterpret_cast<double *>(c.mem.scratch);
  c.emit(rows, LayerNormGradRows{cols, eps, c.at(x), c.at(w), c.at(g), c.at(dx),
                                 stats, elemOf(x.dtype), elemOf(w.dtype),
                                 elemOf(g.dtype), elemOf(dx.dtype), centered});
  LayerNormGradCols lnCols{rows,
                           cols,
                           c.at(x),
                           c.at(g),
                           stats,
                           c.at(dw),
                           db ? c.at(*db) : nullptr,
                           elemOf(x.dtype),
                           elemOf(g.dtype),
                           elemOf(dw.dtype)};
  // The scale's and bias's gradients are sums over every row: split into
  // chunks of rows as a reduction is (one thread a column would leave a
  // GPU idle: 768 threads summing 16384 rows each), the partial sums after
  // the row statistics in scratch, combined in chunk order.
  int64_t chunks = reduceChunks(rows, cols);
  if (chunks <= 1) {
    c.emit(cols, lnCols);
    return Status::ok();
  }
  lnCols.chunks = chunks;
  lnCols.chunkLen = (rows + chunks - 1) / chunks;
  lnCols.partial = stats + 2 * rows;
  c.emit(chunks * cols, lnCols);
  c.emit(cols, ReduceCombine{ReduceKind::Sum, chunks, cols, rows,
                             lnCols.partial, lnCols.dw, lnCols.tdw});
  if (db)
    c.emit(cols, ReduceCombine{ReduceKind::Sum, chunks, cols, rows,
                               lnCols.partial + chunks * cols, lnCols.db,
                               lnCols.tdw});
  return Status::ok();
}

Status lowerSoftmax(Ctx &c) { return softmaxLike(c, false); }
Status lowerLogSoftmax(Ctx &c) { return softmaxLike(c, true); }

} // namespace fsdp::device::lowering
