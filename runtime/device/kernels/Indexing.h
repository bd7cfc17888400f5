//===- Indexing.h - Indexing, losses, optimizers (device) -------*- C++ -*-===//
//
// Indexing, losses, layout and the optimizers.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_DEVICE_KERNELS_INDEXING_H
#define FSDP_RUNTIME_DEVICE_KERNELS_INDEXING_H

#include "runtime/device/kernels/Reductions.h"

#include "common/SortOrder.h"

namespace fsdp::device {

//===----------------------------------------------------------------------===//
// Indexing, losses, layout, optimizer
//===----------------------------------------------------------------------===//

/// Element e = (o, j, t) of a [outer, count, inner] index space: the
/// offset of (o, idx[j], t) in a [outer, dim, inner] tensor (negative
/// indices count from the end), or -1 (flagged) when idx[j] is out of
/// range.
FSDP_HD inline int64_t indexedOffset(int64_t e, int64_t dim, int64_t inner,
                                     int64_t count, const int64_t *idx,
                                     int *error) {
  int64_t t = e % inner, j = (e / inner) % count, o = e / (inner * count);
  int64_t k = idx[j] < 0 ? idx[j] + dim : idx[j];
  if (k < 0 || k >= dim) {
    flagError(error, kIndexOutOfRange);
    return -1;
  }
  return (o * dim + k) * inner + t;
}

/// fsdp.argsort: input element e = (o, a, t) of a [outer, dim, inner]
/// tensor finds its rank r among its row (common/SortOrder.h, a strict
/// total order) and writes a at (o, r, t): one element a thread, O(dim)
/// each, every output position written once.
struct Argsort {
  int64_t dim, inner;
  bool descending;
  const float *x;
  int64_t *y;
  FSDP_HD void operator()(int64_t e) const {
    int64_t t = e % inner, a = (e / inner) % dim, o = e / (inner * dim);
    const float *row = x + o * dim * inner + t;
    float v = row[a * inner];
    int64_t rank = 0;
    for (int64_t j = 0; j < dim; ++j)
      rank += sortsBefore(row[j * inner], j, v, a, descending) ? 1 : 0;
    y[(o * dim + rank) * inner + t] = a;
  }
};

/// y[o, j, t] = data[o, idx[j], t] (negative indices count from the end),
/// elements of `elemBytes` bytes; one output element per index.
struct Gather {
  int64_t dim, inner, count, elemBytes;
  const uint8_t *data;
  const int64_t *idx;
  uint8_t *y;
  int *error;
  FSDP_HD void operator()(int64_t e) const {
    int64_t at = indexedOffset(e, dim, inner, count, idx, error);
    if (at < 0)
      return;
    copyElem(y + e * elemBytes, data + at * elemBytes, elemBytes);
  }
};

/// y[o, idx[j], t] += upd[o, j, t] (y holds dest already); one update
/// element per index, atomic on the device: repeated indices sum in any
/// order. f32, or int64 exactly (tokens per expert, a histogram).
template <typename T> struct ScatterAddOf {
  int64_t dim, inner, count;
  const T *upd;
  const int64_t *idx;
  T *y;
  int *error;
  FSDP_HD void operator()(int64_t e) const {
    int64_t at = indexedOffset(e, dim, inner, count, idx, error);
    if (at >= 0)
      addTo(y + at, upd[e]);
  }
};
using ScatterAdd = ScatterAddOf<float>;
using ScatterAddInt = ScatterAddOf<int64_t>;

/// Cross-entropy layout: input [n, classes, inner...], targets [n,
/// inner...]; position p is (p / inner, p % inner).
struct LossLayout {
  int64_t classes, inner;
  bool softmax;   // cross-entropy (log-sum-exp) or NLL of log-probs
  bool hasIgnore; // positions whose target is `ignore` count nothing
  int64_t ignore;
  const float *weight; // per-class weight, or null
  /// The logits' (and their gradient's) element type: bf16/f16 logits are
  /// read as they are, no f32 copy of a [tokens, vocabulary] tensor.
  ElemType type = ElemType::F32;
};

/// log(sum_j exp(row_j)) over `classes` elements `inner` apart from
/// element `base` of `x`, in double; every thread of the block gets it.
FSDP_HD inline double logSumExp(const Block &blk, const LossLayout &l,
                                const void *x, int64_t base, double *scratch) {
  double mx = -INFINITY, sum = 0;
  for (int64_t j = blk.thread(); j < l.classes; j += blk.threads()) {
    double v = loadFloat(l.type, x, base + j * l.inner);
    mx = v > mx ? v : mx;
  }
  mx = blk.max(mx, scratch);
  for (int64_t j = blk.thread(); j < l.classes; j += blk.threads())
    sum += exp(loadFloat(l.type, x, base + j * l.inner) - mx);
  return mx + log(blk.sum(sum, scratch));
}

/// Per position (a block each): the loss term and its weight (0 where
/// ignored), in double, for LossReduce to sum.
struct LossTerms {
  static constexpr int kThreads = kRowThreads;
  LossLayout l;
  const void *x;
  const int64_t *target;
  double *term, *weightOut;
  int *error;
  size_t smemBytes() const { return kReduceScratch; }
  FSDP_HD void operator()(const Block &blk, int64_t p,
                          unsigned char *smem) const {
    int64_t cls = target[p];
    bool ignored = l.hasIgnore && cls == l.ignore,
         bad = !ignored && (cls < 0 || cls >= l.classes);
    if (ignored || bad) { // the whole block returns
      if (blk.thread() == 0) {
        term[p] = weightOut[p] = 0;
        if (bad)
          flagError(error, kTargetOutOfRange);
      }
      return;
    }
    int64_t s = p / l.inner, i = p % l.inner;
    int64_t base = s * l.classes * l.inner + i;
    double lse =
        l.softmax ? logSumExp(blk, l, x, base, reinterpret_cast<double *>(smem))
                  : 0.0;
    if (blk.thread() == 0) {
      double w = l.weight ? l.weight[cls] : 1.0;
      weightOut[p] = w;
      term[p] = w * (lse - loadFloat(l.type, x, base + cls * l.inner));
    }
  }
};

enum class LossReduction { None, Mean, Sum };

/// The loss from LossTerms' `count` terms (one block, index 0): their sum,
/// their weighted mean, or (None) each term; `totalOut` keeps the total
/// weight for the gradient.
struct LossReduce {
  static constexpr int kThreads = kRowThreads;
  LossReduction reduction;
  int64_t count;
  const double *term, *weight;
  float *y;
  double *totalOut;
  size_t smemBytes() const { return kReduceScratch; }
  FSDP_HD void operator()(const Block &blk, int64_t,
                          unsigned char *smem) const {
    double *scratch = reinterpret_cast<double *>(smem);
    double sum = 0, total = 0;
    for (int64_t p = blk.thread(); p < count; p += blk.threads()) {
      sum += term[p];
      total += weight[p];
      if (reduction == LossReduction::None)
        y[p] = (float)term[p];
    }
    sum = blk.sum(sum, scratch);
    total = blk.sum(total, scratch);
    if (blk.thread() != 0)
      return;
    if (reduction == LossReduction::Mean)
      y[0] = (float)(sum / total);
    else if (reduction == LossReduction::Sum)
      y[0] = (float)sum;
    if (totalOut)
      *totalOut = total;
  }
};

/// The gradient of the loss for one position's row of classes (a block
/// each): g (the incoming gradient, per position for None, else a scalar)
/// times weight * (softmax - onehot), divided by the total weight for Mean.
struct LossGradRows {
  static constexpr int kThreads = kRowThreads;
  LossLayout l;
  LossReduction reduction;
  const void *x; // and y: of l.type
  const float *g;
  const int64_t *target;
  const double *total; // LossReduce's totalOut
  void *y;
  size_t smemBytes() const { return kReduceScratch; }
  FSDP_HD void operator()(const Block &blk, int64_t p,
                          unsigned char *smem) const {
    int64_t s = p / l.inner, i = p % l.inner, cls = target[p];
    int64_t base = s * l.classes * l.inner + i;
    if ((l.hasIgnore && cls == l.ignore) || cls < 0 || cls >= l.classes) {
      for (int64_t j = blk.thread(); j < l.classes; j += blk.threads())
        storeFloat(l.type, y, base + j * l.inner, 0.0f);
      return;
    }
    double scale = reduction == LossReduction::None   ? (double)g[p]
                   : reduction == LossReduction::Mean ? g[0] / *total
                                                      : (double)g[0];
    double w = l.weight ? l.weight[cls] : 1.0;
    double lse =
        l.softmax ? logSumExp(blk, l, x, base, reinterpret_cast<double *>(smem))
                  : 0;
    for (int64_t j = blk.thread(); j < l.classes; j += blk.threads()) {
      int64_t at = base + j * l.inner;
      double prob = l.softmax ? exp(loadFloat(l.type, x, at) - lse) : 0.0;
      // Through float, as the CPU backend's f32 result cast afterwards.
      storeFloat(l.type, y, at,
                 (float)(w * scale * (prob - (j == cls ? 1.0 : 0.0))));
    }
  }
};

/// im2col of a whole batch into `col`, laid out [groups][rows][N][P]
/// (common/ConvGeometry.h): a group's columns for every image side
/// by side, so one GEMM per group covers the batch. Zeros in the padding.
struct Im2Col {
  ConvGeometry g;
  ElemType t;
  const void *x;
  void *col;
  FSDP_HD void operator()(int64_t i) const {
    int64_t p = g.positions(), q = i % p, rest = i / p;
    int64_t img = rest % g.n;
    rest /= g.n;
    int64_t s = g.source(img, rest / g.rows(), rest % g.rows(), q);
    storeFloat(t, col, i, s < 0 ? 0.0f : loadFloat(t, x, s));
  }
};

/// col2im: each input element of dx the sum of the column entries (`col`
/// as Im2Col lays it out) that read it, in ConvGeometry's order, as the
/// CPU kernel sums.
struct Col2Im {
  ConvGeometry g;
  ElemType tcol, tx;
  const void *col;
  void *dx;
  FSDP_HD void operator()(int64_t i) const {
    int64_t plane = g.h * g.w, pixels = g.c * plane;
    int64_t img = i / pixels, j = i % pixels;
    int64_t rows = g.rows(), p = g.positions();
    float sum = 0.0f;
    g.forEachReader(j / plane, (j / g.w) % g.h, j % g.w,
                    [&](int64_t gi, int64_t r, int64_t q) {
                      sum += loadFloat(tcol, col,
                                       ((gi * rows + r) * g.n + img) * p + q);
                    });
    storeFloat(tx, dx, i, sum);
  }
};

/// Element readers and writers by offset for the shared math of
/// ConvGeometry.h and BatchNormMath.h, whatever the dtype.
struct ReadElems {
  ElemType t;
  const void *p;
  FSDP_HD float operator()(int64_t i) const { return loadFloat(t, p, i); }
};
struct WriteElems {
  ElemType t;
  void *p;
  FSDP_HD void operator()(int64_t i, float v) const { storeFloat(t, p, i, v); }
};
/// Two per-channel results (a channel's statistics or gradients).
struct WriteChannel {
  ElemType t;
  void *first, *second;
  int64_t ch;
  FSDP_HD void operator()(double a, double b) const {
    storeFloat(t, first, ch, (float)a);
    storeFloat(t, second, ch, (float)b);
  }
};

/// Pooling: one output element per index (ConvGeometry.h's poolWindow).
struct PoolForward {
  ConvGeometry g;
  bool max, includePad;
  ElemType t;
  const void *x;
  void *y;
  FSDP_HD void operator()(int64_t i) const {
    int64_t p = g.positions();
    storeFloat(t, y, i,
               poolWindow(g, max, includePad, i / p / g.c, (i / p) % g.c, i % p,
                          ReadElems{t, x}, nullptr));
  }
};

/// Pooling's input gradient: one input element per index (poolInputGrad).
struct PoolBackward {
  ConvGeometry g;
  bool max, includePad;
  ElemType t;
  const void *x, *dy;
  void *dx;
  FSDP_HD void operator()(int64_t i) const {
    int64_t plane = g.h * g.w;
    storeFloat(t, dx, i,
               poolInputGrad(g, max, includePad, i / plane / g.c,
                             (i / plane) % g.c, (i / g.w) % g.h, i % g.w,
                             ReadElems{t, x}, ReadElems{t, dy}));
  }
};

/// Batch norm, one channel per index (BatchNormMath.h): y, and the
/// channel's batch mean and biased variance.
struct BatchNormChannels {
  BatchNormLayout l;
  double eps;
  ElemType t;
  const void *x, *scale, *bias;
  void *y, *mean, *var;
  FSDP_HD void operator()(int64_t ch) const {
    batchNormChannel(l, ch, eps, loadFloat(t, scale, ch),
                     loadFloat(t, bias, ch), ReadElems{t, x}, WriteElems{t, y},
                     WriteChannel{t, mean, var, ch});
  }
};

/// Batch norm's backward, one channel per index: dx, dscale, dbias.
struct BatchNormGradChannels {
  BatchNormLayout l;
  double eps;
  ElemType t;
  const void *x, *scale, *dy;
  void *dx, *dscale, *dbias;
  FSDP_HD void operator()(int64_t ch) const {
    batchNormGradChannel(l, ch, eps, loadFloat(t, scale, ch), ReadElems{t, x},
                         ReadElems{t, dy}, WriteElems{t, dx},
                         WriteChannel{t, dscale, dbias, ch});
  }
};

/// One step of a synchronised batch norm (BatchNormMath.h's
/// batchNormSyncedStep), one channel per index; the lowering all-reduces
/// `red` between the steps. `out`: y (Apply) or dx (GradApply); `first`,
/// `second`: mean and variance (Apply) or dscale and dbias (GradSums).
struct BatchNormSyncedChannels {
  BatchNormStep step;
  BatchNormLayout l;
  double eps;
  int64_t total;
  ElemType t;
  const void *x, *scale, *bias, *dy; // bias forward only, dy backward only
  void *out, *first, *second;
  float *red;
  FSDP_HD void operator()(int64_t ch) const {
    batchNormSyncedStep(step, l, ch, eps, total, loadFloat(t, scale, ch),
                        bias ? loadFloat(t, bias, ch) : 0.0f, ReadElems{t, x},
                        ReadElems{t, dy ? dy : x}, WriteElems{t, out},
                        WriteChannel{t, first, second, ch}, red);
  }
};

/// y[dst] = x[src] over an index space (`index` dims): operand 0 gives
/// the source offset, operand 1 the destination offset (both in elements
/// of `elemBytes` bytes, after a base). Transpose, slice, broadcast,
/// insert-slice, concat and split are each one or a few of these.
struct StridedCopy {
  Strided index;
  int64_t elemBytes, srcBase, dstBase;
  const uint8_t *x;
  uint8_t *y;
  FSDP_HD void operator()(int64_t i) const {
    int64_t off[2];
    index.offsets(i, off, 2);
    copyElem(y + (dstBase + off[1]) * elemBytes,
             x + (srcBase + off[0]) * elemBytes, elemBytes);
  }
};

/// One thread: AdamW's scalars of this step into `out` (lr, lr / (1 -
/// beta1^t), sqrt(1 - beta2^t)), rounded as the CPU backend rounds them.
struct AdamWSchedule {
  double lr, beta1, beta2;
  const double *step;
  float *out;
  FSDP_HD void operator()(int64_t) const {
    float l = (float)(lr * step[kLrScale]);
    double t = step[kStep];
    double bc1 = 1.0 - pow((double)(float)beta1, t);
    double bc2 = 1.0 - pow((double)(float)beta2, t);
    out[0] = l;
    out[1] = (float)(l / bc1);
    out[2] = (float)sqrt(bc2);
  }
};

/// One AdamW step of one element (decoupled weight decay, bias-corrected
/// moments), in the CPU backend's float arithmetic; `sched` is
/// AdamWSchedule's output, `gradScale` (or null: 1) the gradient's factor
/// (clipping); a non-finite factor skips the update (a non-finite gradient
/// norm: the state stays as it was).
struct AdamW {
  float beta1, beta2, eps, weightDecay;
  const float *sched, *gradScale;
  const float *grad;
  float *param, *m, *v;
  /// Offload's fused copy: the updated element also stored as `copyType`
  /// (rounded as Cast rounds), the unchanged one where the update is
  /// skipped; none when null.
  void *copy = nullptr;
  ElemType copyType = ElemType::F32;
  FSDP_HD void operator()(int64_t i) const {
    if (updates(gradScale)) {
      float lr = sched[0], stepSize = sched[1], bc2Sqrt = sched[2];
      float gi = grad[i] * (gradScale ? *gradScale : 1.0f);
      param[i] *= 1.0f - lr * weightDecay;
      m[i] = m[i] * beta1 + (1.0f - beta1) * gi;
      v[i] = v[i] * beta2 + (1.0f - beta2) * gi * gi;
      float denom = sqrtf(v[i]) / bc2Sqrt + eps;
      param[i] -= stepSize * (m[i] / denom);
    }
    if (copy)
      storeElem(copyType, copy, i, param[i]);
  }
};

/// One thread: SGD's scalars of this step (lr, and 1 when the momentum
/// buffer starts now), then marks the buffer started unless the update is
/// skipped (a non-finite gradient scale).
struct SgdSchedule {
  double lr;
  const double *step;
  uint8_t *started;
  float *out;
  const float *gradScale;
  FSDP_HD void operator()(int64_t) const {
    out[0] = (float)(lr * step[kLrScale]);
    out[1] = *started ? 0.0f : 1.0f;
    if (updates(gradScale))
      *started = 1;
  }
};

/// One SGD step of one element (torch.optim.SGD: weight decay, momentum
/// without dampening, Nesterov).
struct Sgd {
  float momentum, weightDecay;
  bool nesterov;
  const float *sched, *gradScale;
  const float *grad;
  float *param, *buf;
  FSDP_HD void operator()(int64_t i) const {
    if (!updates(gradScale))
      return;
    float lr = sched[0];
    float d =
        grad[i] * (gradScale ? *gradScale : 1.0f) + weightDecay * param[i];
    if (momentum != 0) {
      buf[i] = sched[1] != 0 ? d : momentum * buf[i] + d;
      d = nesterov ? d + momentum * buf[i] : buf[i];
    }
    param[i] -= lr * d;
  }
};

} // namespace fsdp::device

#endif // FSDP_RUNTIME_DEVICE_KERNELS_INDEXING_H
