//===- Reductions.h - Reductions and norms (device) -------------*- C++ -*-===//
//
// Reductions, softmax and the norms.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_DEVICE_KERNELS_REDUCTIONS_H
#define FSDP_RUNTIME_DEVICE_KERNELS_REDUCTIONS_H

#include "runtime/device/kernels/Elementwise.h"

namespace fsdp::device {

//===----------------------------------------------------------------------===//
// Reductions and normalisations
//===----------------------------------------------------------------------===//

/// SumSquares: each element squared in double, then summed.
enum class ReduceKind { Sum, Mean, Max, SumSquares };

/// One output element: its kept coordinates give a base offset in x, then
/// `count` elements over the reduced dimensions, accumulated in double.
struct Reduce {
  ReduceKind kind;
  int kept = 0, reduced = 0;
  int64_t keptDims[kMaxDims] = {}, keptStrides[kMaxDims] = {};
  int64_t redDims[kMaxDims] = {}, redStrides[kMaxDims] = {};
  int64_t count = 1;
  const void *x;
  void *y;
  ElemType tx = ElemType::F32, ty = ElemType::F32;
  /// Split (chunks > 1): index i reduces elements [c * chunkLen,
  /// (c + 1) * chunkLen) of output o (i = c * outputs + o) into
  /// partial[i], and ReduceCombine finishes; else one index an output.
  int64_t chunks = 1, chunkLen = 0, outputs = 0;
  double *partial = nullptr;

  FSDP_HD void operator()(int64_t i) const {
    int64_t o = chunks > 1 ? i % outputs : i, c = chunks > 1 ? i / outputs : 0;
    int64_t base = 0, rest = o;
    for (int d = kept - 1; d >= 0; --d) {
      base += (rest % keptDims[d]) * keptStrides[d];
      rest /= keptDims[d];
    }
    int64_t first = chunks > 1 ? c * chunkLen : 0,
            end = chunks > 1 && first + chunkLen < count ? first + chunkLen
                                                         : count;
    auto offset = [&](int64_t j) {
      int64_t off = base, r = j;
      for (int d = reduced - 1; d >= 0; --d) {
        off += (r % redDims[d]) * redStrides[d];
        r /= redDims[d];
      }
      return off;
    };
    if (tx == ElemType::I64) {
      // int64 exactly, as the CPU backend (a mask's count, the largest
      // position); never split (reduce's lowering), a sum wrapping past
      // 2^63 as PyTorch's does.
      const int64_t *xi = static_cast<const int64_t *>(x);
      uint64_t acc = kind == ReduceKind::Max ? (uint64_t)INT64_MIN : 0;
      for (int64_t j = first; j < end; ++j) {
        int64_t v = xi[offset(j)];
        acc = kind != ReduceKind::Max ? acc + (uint64_t)v
              : v > (int64_t)acc      ? (uint64_t)v
                                      : acc;
      }
      static_cast<int64_t *>(y)[o] = (int64_t)acc;
      return;
    }
    double acc = kind == ReduceKind::Max ? -INFINITY : 0.0;
    for (int64_t j = first; j < end; ++j) {
      double v = loadFloat(tx, x, offset(j));
      acc = kind == ReduceKind::Max          ? maxNan(acc, v)
            : kind == ReduceKind::SumSquares ? acc + v * v
                                             : acc + v;
    }
    if (chunks > 1)
      partial[i] = acc;
    else // (an empty reduction: the identity, as on the CPU)
      storeFloat(ty, y, o,
                 (float)(kind == ReduceKind::Mean && count > 0
                             ? acc / (double)count
                             : acc));
  }
};

/// Finishes a split reduction (Reduce, LayerNormGradCols): output o
/// combines its chunks' partials in chunk order (so the same every run),
/// divided by `count` for a mean.
struct ReduceCombine {
  static constexpr int kThreads = kRowThreads;
  ReduceKind kind;
  int64_t chunks, outputs, count;
  const double *partial;
  void *y;
  ElemType ty = ElemType::F32;
  size_t smemBytes() const { return kReduceScratch; }
  /// Block o combines output o's chunks: each thread a strided share, then
  /// the block's fixed-order sum (on the host, one thread in chunk order).
  /// A block, not a thread, an output: a scalar's 2^18 partial sums in one
  /// thread took 2 ms on an H100.
  FSDP_HD void operator()(const Block &blk, int64_t o,
                          unsigned char *smem) const {
    bool isMax = kind == ReduceKind::Max;
    double acc = isMax ? -INFINITY : 0.0;
    for (int64_t c = blk.thread(); c < chunks; c += blk.threads()) {
      double v = partial[c * outputs + o];
      acc = isMax ? maxNan(acc, v) : acc + v;
    }
    double *scratch = reinterpret_cast<double *>(smem);
    acc = isMax ? blk.max(acc, scratch) : blk.sum(acc, scratch);
    if (blk.thread() == 0)
      storeFloat(ty, y, o,
                 (float)(kind == ReduceKind::Mean ? acc / (double)count : acc));
  }
};

/// Softmax (or log-softmax) along one axis: row r is [outer, inner]
/// position (r / inner, r % inner), `len` elements `inner` apart.
struct SoftmaxRows {
  int64_t len, inner;
  bool log;
  const float *x;
  float *y;
  FSDP_HD void operator()(int64_t r) const {
    int64_t o = r / inner, i = r % inner;
    const float *row = x + o * len * inner + i;
    float *out = y + o * len * inner + i;
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < len; ++j)
      mx = (double)row[j * inner] > mx ? (double)row[j * inner] : mx;
    for (int64_t j = 0; j < len; ++j)
      sum += exp(row[j * inner] - mx);
    for (int64_t j = 0; j < len; ++j)
      out[j * inner] = log ? (float)(row[j * inner] - mx - ::log(sum))
                           : (float)(exp(row[j * inner] - mx) / sum);
  }
};

/// Mean and 1/sqrt(biased variance + eps) of the `cols` elements of `x`
/// from `base`, in double (two passes, as the CPU backend); every thread
/// of the block gets them. Not `centered` (rms_norm): mean 0, and rstd
/// 1/sqrt(mean(x²) + eps).
FSDP_HD inline void rowStats(const Block &blk, ElemType t, const void *x,
                             int64_t base, int64_t cols, double eps,
                             double *scratch, double &mean, double &rstd,
                             bool centered) {
  mean = 0;
  if (centered) {
    double s = 0;
    for (int64_t j = blk.thread(); j < cols; j += blk.threads())
      s += loadFloat(t, x, base + j);
    mean = blk.sum(s, scratch) / (double)cols;
  }
  double var = 0;
  for (int64_t j = blk.thread(); j < cols; j += blk.threads()) {
    double d = loadFloat(t, x, base + j) - mean;
    var += d * d;
  }
  var = blk.sum(var, scratch) / (double)cols;
  rstd = 1.0 / sqrt(var + eps);
}

/// Layer normalisation of row r (`cols` elements; a block each), scaled by
/// w and shifted by b (optional). x and y of types tx and ty, w and b of tw
/// (f32, bf16 or f16). Not `centered`: rms_norm.
struct LayerNormRows {
  static constexpr int kThreads = kRowThreads;
  int64_t cols;
  double eps;
  const void *x, *w, *b;
  void *y;
  ElemType tx = ElemType::F32, tw = ElemType::F32, ty = ElemType::F32;
  bool centered = true;
  size_t smemBytes() const { return kReduceScratch; }
  FSDP_HD void operator()(const Block &blk, int64_t r,
                          unsigned char *smem) const {
    double mean, rstd;
    rowStats(blk, tx, x, r * cols, cols, eps, reinterpret_cast<double *>(smem),
             mean, rstd, centered);
    for (int64_t j = blk.thread(); j < cols; j += blk.threads())
      storeFloat(ty, y, r * cols + j,
                 (float)((loadFloat(tx, x, r * cols + j) - mean) * rstd *
                             loadFloat(tw, w, j) +
                         (b ? loadFloat(tw, b, j) : 0.0)));
  }
};

/// Layer norm's backward, one row a block: the row's mean and rstd (kept in
/// `stats` for LayerNormGradCols) and
/// dx = rstd (g - mean(g) - x̂ mean(g x̂)), g = dy * w. x, dy and dx of
/// types tx, tdy and tdx; w of tw. Not `centered` (rms_norm_grad): no
/// mean, dx = rstd (g - x̂ mean(g x̂)).
struct LayerNormGradRows {
  static constexpr int kThreads = kRowThreads;
  int64_t cols;
  double eps;
  const void *x, *w, *dy;
  void *dx;
  double *stats; // [rows, 2]: mean, rstd
  ElemType tx = ElemType::F32, tw = ElemType::F32, tdy = ElemType::F32,
           tdx = ElemType::F32;
  bool centered = true;
  size_t smemBytes() const { return kReduceScratch; }
  FSDP_HD void operator()(const Block &blk, int64_t r,
                          unsigned char *smem) const {
    double *scratch = reinterpret_cast<double *>(smem);
    int64_t base = r * cols;
    double mean, rstd;
    rowStats(blk, tx, x, base, cols, eps, scratch, mean, rstd, centered);
    if (blk.thread() == 0) {
      stats[2 * r] = mean;
      stats[2 * r + 1] = rstd;
    }
    double mg = 0, mgx = 0;
    for (int64_t j = blk.thread(); j < cols; j += blk.threads()) {
      double gj = (double)loadFloat(tdy, dy, base + j) * loadFloat(tw, w, j);
      mg += gj;
      mgx += gj * ((loadFloat(tx, x, base + j) - mean) * rstd);
    }
    mg = blk.sum(mg, scratch) / (double)cols;
    mgx = blk.sum(mgx, scratch) / (double)cols;
    if (!centered)
      mg = 0;
    for (int64_t j = blk.thread(); j < cols; j += blk.threads()) {
      double xhat = (loadFloat(tx, x, base + j) - mean) * rstd;
      double gj = (double)loadFloat(tdy, dy, base + j) * loadFloat(tw, w, j);
      storeFloat(tdx, dx, base + j, (float)(rstd * (gj - mg - xhat * mgx)));
    }
  }
};

/// Layer norm's scale and bias gradients, one column each: sums over the
/// rows of dy x̂ and dy (after LayerNormGradRows has written `stats`); no
/// bias gradient where `db` is null (rms_norm_grad).
/// Split over rows as a Reduce is (`chunks` > 1): index i = c * cols + j
/// sums chunk c's rows into partial[i] (dw's) and partial[chunks * cols +
/// i] (db's), and two ReduceCombines finish.
struct LayerNormGradCols {
  int64_t rows, cols;
  const void *x, *dy;
  const double *stats;
  void *dw, *db;
  ElemType tx = ElemType::F32, tdy = ElemType::F32, tdw = ElemType::F32;
  int64_t chunks = 1, chunkLen = 0;
  double *partial = nullptr;
  FSDP_HD void operator()(int64_t i) const {
    int64_t j = i % cols, c = i / cols;
    int64_t first = chunks > 1 ? c * chunkLen : 0,
            end =
                chunks > 1 && first + chunkLen < rows ? first + chunkLen : rows;
    double sw = 0, sb = 0;
    for (int64_t r = first; r < end; ++r) {
      double g = loadFloat(tdy, dy, r * cols + j);
      sw += g * ((loadFloat(tx, x, r * cols + j) - stats[2 * r]) *
                 stats[2 * r + 1]);
      sb += g;
    }
    if (chunks > 1) {
      partial[i] = sw;
      partial[chunks * cols + i] = sb;
      return;
    }
    storeFloat(tdw, dw, j, (float)sw);
    if (db)
      storeFloat(tdw, db, j, (float)sb);
  }
};

} // namespace fsdp::device

#endif // FSDP_RUNTIME_DEVICE_KERNELS_REDUCTIONS_H
