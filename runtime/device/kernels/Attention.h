//===- Attention.h - Attention (device) -------------------------*- C++ -*-===//
//
// Attention (the simple kernels; flash attention is FlashAttention.h).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_DEVICE_KERNELS_ATTENTION_H
#define FSDP_RUNTIME_DEVICE_KERNELS_ATTENTION_H

#include "runtime/device/kernels/Indexing.h"

namespace fsdp::device {

//===----------------------------------------------------------------------===//
// Attention (causal, masked or neither): one query row per index
//===----------------------------------------------------------------------===//

/// The attention mask broadcast to the scores [batch..., tq, tk]: boolean
/// (false hides a key) or additive; its stride along each batch dimension,
/// the query and the key.
struct AttentionMask {
  const uint8_t *keep = nullptr;
  const float *add = nullptr;
  int batchRank = 0;
  int64_t batchDims[kMaxDims] = {}, batchStrides[kMaxDims] = {};
  int64_t rowStride = 0, colStride = 0;

  FSDP_HD float apply(float s, int64_t b, int64_t i, int64_t j) const {
    if (!keep && !add)
      return s;
    int64_t off = i * rowStride + j * colStride;
    for (int d = batchRank - 1; d >= 0; --d) {
      off += (b % batchDims[d]) * batchStrides[d];
      b /= batchDims[d];
    }
    if (keep)
      return keep[off] ? s : -INFINITY;
    return s + add[off];
  }
};

/// q [batch, tq, d], k [batch, tk, d], v [batch, tk, dv] (batch: every
/// leading dimension); causal rows see keys up to i + tk - tq. Scores are
/// recomputed in each pass instead of stored: no scratch. `bshd`: each
/// tensor is [samples, rows, heads, columns], batch element b the head
/// b % heads of sample b / heads (the output and the gradients too).
struct AttentionLayout {
  int64_t tq, tk, d, dv;
  float scale;
  bool causal;
  const float *q, *k, *v;
  AttentionMask mask = {};
  bool safe = false;    // safe_softmax: a row with every key hidden gets zeros
  bool average = false; // average_empty_rows: such a row averages its values
  bool bshd = false;
  int64_t heads = 1, kvHeads = 1; // q's and k's, v's, in the bshd layout
  int64_t nrep = 1; // grouped-query: query heads a key head serves

  /// Where row i of batch element b starts in a tensor of `rows` rows of
  /// `cols` columns (q, the output, their gradients).
  FSDP_HD int64_t at(int64_t b, int64_t i, int64_t rows, int64_t cols) const {
    if (!bshd)
      return (b * rows + i) * cols;
    return ((b / heads * rows + i) * heads + b % heads) * cols;
  }
  /// The same in k, v or their gradients, for key batch element kb.
  FSDP_HD int64_t kvRow(int64_t kb, int64_t j, int64_t rows,
                        int64_t cols) const {
    if (!bshd)
      return (kb * rows + j) * cols;
    return ((kb / kvHeads * rows + j) * kvHeads + kb % kvHeads) * cols;
  }
  /// Row j of the keys (or values) query batch element b reads.
  FSDP_HD int64_t kvAt(int64_t b, int64_t j, int64_t rows,
                       int64_t cols) const {
    return kvRow(b / nrep, j, rows, cols);
  }

  FSDP_HD int64_t lastKey(int64_t i) const {
    int64_t last = causal ? i + (tk - tq) : tk - 1;
    return last < tk - 1 ? last : tk - 1;
  }
  FSDP_HD float score(int64_t b, int64_t i, int64_t j) const {
    const float *qi = q + at(b, i, tq, d), *kj = k + kvAt(b, j, tk, d);
    float s = 0;
    for (int64_t t = 0; t < d; ++t)
      s += qi[t] * kj[t];
    return mask.apply(scale * s, b, i, j);
  }
  /// The softmax's maximum and normaliser of row (b, i).
  FSDP_HD void rowStats(int64_t b, int64_t i, double &mx, double &sum) const {
    mx = -INFINITY;
    sum = 0;
    for (int64_t j = 0; j <= lastKey(i); ++j) {
      double s = score(b, i, j);
      mx = s > mx ? s : mx;
    }
    for (int64_t j = 0; j <= lastKey(i); ++j)
      sum += exp(score(b, i, j) - mx);
  }
  /// p_ij from the row's maximum and normaliser (rowStats'). A row with
  /// every key hidden has maximum -inf: NaN, as a softmax gives, zeros
  /// when `safe`, or 1/n when `average` (masked_fill's equal scores).
  FSDP_HD float prob(int64_t b, int64_t i, int64_t j, double mx,
                     double sum) const {
    if (safe && mx == -INFINITY)
      return 0.0f;
    if (average && mx == -INFINITY)
      return 1.0f / (float)(lastKey(i) + 1);
    return (float)(exp(score(b, i, j) - mx) / sum);
  }
  /// Whether row scores take a gradient: not in an averaged empty row
  /// (masked_fill's hidden scores take none).
  FSDP_HD bool scoresTakeGradient(double mx) const {
    return !(average && mx == -INFINITY);
  }
};

/// y[b, i] = softmax(scale * q[b, i] . k[b]^T) . v[b]; with `lse`, the
/// row's log-sum-exp of its masked scores (-inf when every key is hidden).
struct AttentionRows {
  AttentionLayout a;
  float *y;
  float *lse = nullptr;
  FSDP_HD void operator()(int64_t r) const {
    int64_t b = r / a.tq, i = r % a.tq;
    double mx, sum;
    a.rowStats(b, i, mx, sum);
    if (lse)
      lse[r] = mx == -INFINITY ? -INFINITY : (float)(mx + log(sum));
    float *yi = y + a.at(b, i, a.tq, a.dv);
    for (int64_t c = 0; c < a.dv; ++c)
      yi[c] = 0;
    for (int64_t j = 0; j <= a.lastKey(i); ++j) {
      float p = a.prob(b, i, j, mx, sum);
      const float *vj = a.v + a.kvAt(b, j, a.tk, a.dv);
      for (int64_t c = 0; c < a.dv; ++c)
        yi[c] += p * vj[c];
    }
  }
};

/// The gradient of AttentionRows, first pass: one query row (b, i) each.
/// Writes dq's row, and the row's softmax maximum, normaliser and
/// D = sum_j p_ij (dy_i . v_j) to `stats` (3 doubles a row) for
/// AttentionGradKeyRows. ds_ij = p_ij (dy_i . v_j - D).
struct AttentionGradQueryRows {
  AttentionLayout a;
  const float *dy;
  float *dq;
  double *stats;
  FSDP_HD float dp(int64_t b, const float *gi, int64_t j) const {
    const float *vj = a.v + a.kvAt(b, j, a.tk, a.dv);
    float s = 0;
    for (int64_t c = 0; c < a.dv; ++c)
      s += gi[c] * vj[c];
    return s;
  }
  FSDP_HD void operator()(int64_t r) const {
    int64_t b = r / a.tq, i = r % a.tq;
    double mx, sum;
    a.rowStats(b, i, mx, sum);
    const float *gi = dy + a.at(b, i, a.tq, a.dv);
    double dot = 0;
    for (int64_t j = 0; j <= a.lastKey(i); ++j)
      dot += (double)dp(b, gi, j) * a.prob(b, i, j, mx, sum);
    float *dqi = dq + a.at(b, i, a.tq, a.d);
    for (int64_t t = 0; t < a.d; ++t)
      dqi[t] = 0;
    for (int64_t j = 0; j <= a.lastKey(i); ++j) {
      float p = a.prob(b, i, j, mx, sum);
      float ds = a.scoresTakeGradient(mx) ? p * (float)(dp(b, gi, j) - dot)
                                          : 0.0f;
      const float *kj = a.k + a.kvAt(b, j, a.tk, a.d);
      for (int64_t t = 0; t < a.d; ++t)
        dqi[t] += a.scale * ds * kj[t];
    }
    stats[3 * r] = mx;
    stats[3 * r + 1] = sum;
    stats[3 * r + 2] = dot;
  }
};

/// The gradient of AttentionRows, second pass: one key row (kb, j) each
/// (kb a batch element of k and v), summing dk_j and dv_j over the query
/// rows that see key j, of every query head it serves, in row order. Each
/// thread owns its rows of dk and dv: no atomics, and the sums come out
/// the same on every run.
struct AttentionGradKeyRows {
  AttentionLayout a;
  const float *dy;
  const double *stats; // AttentionGradQueryRows'
  float *dk, *dv;
  FSDP_HD void operator()(int64_t r) const {
    int64_t kb = r / a.tk, j = r % a.tk;
    float *dkj = dk + a.kvRow(kb, j, a.tk, a.d),
          *dvj = dv + a.kvRow(kb, j, a.tk, a.dv);
    for (int64_t t = 0; t < a.d; ++t)
      dkj[t] = 0;
    for (int64_t c = 0; c < a.dv; ++c)
      dvj[c] = 0;
    const float *vj = a.v + a.kvRow(kb, j, a.tk, a.dv);
    // Causal: query row i sees key j once i + (tk - tq) >= j.
    int64_t first = a.causal ? j - (a.tk - a.tq) : 0;
    for (int64_t b = kb * a.nrep; b < (kb + 1) * a.nrep; ++b)
      for (int64_t i = first < 0 ? 0 : first; i < a.tq; ++i) {
        const double *st = stats + 3 * (b * a.tq + i);
        float p = a.prob(b, i, j, st[0], st[1]);
        const float *gi = dy + a.at(b, i, a.tq, a.dv),
                    *qi = a.q + a.at(b, i, a.tq, a.d);
        float dpij = 0;
        for (int64_t c = 0; c < a.dv; ++c)
          dpij += gi[c] * vj[c];
        float ds =
            a.scoresTakeGradient(st[0]) ? p * (float)(dpij - st[2]) : 0.0f;
        for (int64_t t = 0; t < a.d; ++t)
          dkj[t] += a.scale * ds * qi[t];
        for (int64_t c = 0; c < a.dv; ++c)
          dvj[c] += p * gi[c];
      }
  }
};

/// Runs `f` for every index on the host, in order (tests; the device
/// launches a grid instead: launchEach in DeviceKernels.cu).
template <typename F> void runOnHost(int64_t n, const F &f) {
  for (int64_t i = 0; i < n; ++i)
    f(i);
}

template <typename F>
void runKernelOnHost(int64_t n, const F &f, std::vector<double> &smem) {
  if constexpr (IsBlockKernel<F>::value)
    runBlocksOnHost(n, f, smem);
  else
    runOnHost(n, f);
}

} // namespace fsdp::device

#endif // FSDP_RUNTIME_DEVICE_KERNELS_ATTENTION_H
