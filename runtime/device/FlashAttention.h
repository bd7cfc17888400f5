//===- FlashAttention.h - Tiled attention on tensor cores -------*- C++ -*-===//
//
// Attention and its gradient for bf16/f16 q, k and v, as FlashAttention-2
// computes them: a thread block takes 64 query rows (for dk and dv, 64 key
// rows), walks the other side 64 rows at a time through shared memory and
// never writes the [tq, tk] scores out. The products run on tensor cores
// (WMMA: 16-bit operands, f32 sums); the softmax runs online in f32, a
// running maximum and normaliser per row.
//
// The kernels are written against `Block`, so the host runs the very same
// code: one thread, the tile products as loops, barriers as no-ops. The
// unit test (tests/unit/DeviceKernelsTest.cpp) compares that with the CPU
// backend's attention; only the WMMA loads and the barriers need a GPU (the
// gpu-labelled tests).
//
// Numerics against the CPU kernels (which widen to f32): the probabilities
// and the score gradients are rounded to 16 bits before their products, as
// FlashAttention does; the normalisers sum the f32 values. That moves an
// output by at most 2^-9 of the largest |v| (bf16), about one rounding of
// the result.
//
// The backward pass is two kernels and no atomics, so the sums come out the
// same every run: per query tile, a first walk over the keys gathers each
// row's maximum, normaliser and D = sum_j p_ij dp_ij (kept in scratch), a
// second computes dq; per key tile, dk and dv over the query tiles that see
// it. (The forward's statistics are not an operand of attention_grad, so
// the first walk recomputes them.)
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_DEVICE_FLASHATTENTION_H
#define FSDP_RUNTIME_DEVICE_FLASHATTENTION_H

#include "runtime/device/DeviceKernels.h"

#include <cstddef>
#include <type_traits>

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#endif

namespace fsdp::device {

/// Rows of a tile (queries and keys alike) and threads of a block (four
/// warps: each takes whole 16 x 16 tiles of a product).
constexpr int kFlashTile = 64;
constexpr int kFlashThreads = 128;

FSDP_HD inline float narrowToFloat(bool f16, uint16_t h) {
  return f16 ? fromF16(h) : fromBf16(h);
}
FSDP_HD inline uint16_t floatToNarrow(bool f16, float f) {
  return f16 ? toF16(f) : toBf16(f);
}

/// c[m x n] = a[m x k] b[k x n] (+ c when `accumulate`) on tiles in shared
/// memory: a and b 16-bit (f16 when F16, else bf16), c f32, row-major with
/// leading dimensions lda, ldb, ldc. With AT, a(i, p) is a[p * lda + i]
/// (a column-major: the transpose of a row-major tile); with BT, b(p, j) is
/// b[j * ldb + p]. m, n and k are multiples of 16, the leading dimensions of
/// a and b multiples of 8 and of c of 4, and each tile 32-byte aligned:
/// WMMA's rules. Every thread of the block calls it; each warp computes
/// whole 16 x 16 tiles of c.
template <bool F16, bool AT, bool BT>
FSDP_HD inline void tileMma(const Block &blk, int m, int n, int k,
                            const uint16_t *a, int lda, const uint16_t *b,
                            int ldb, float *c, int ldc, bool accumulate) {
#ifdef __CUDA_ARCH__
  namespace w = nvcuda::wmma;
  using T = typename std::conditional<F16, __half, __nv_bfloat16>::type;
  using LA = typename std::conditional<AT, w::col_major, w::row_major>::type;
  using LB = typename std::conditional<BT, w::col_major, w::row_major>::type;
  const T *ta = reinterpret_cast<const T *>(a),
          *tb = reinterpret_cast<const T *>(b);
  int warp = blk.thread() / 32, warps = blk.threads() / 32, tn = n / 16;
  for (int t = warp; t < (m / 16) * tn; t += warps) {
    int i0 = t / tn * 16, j0 = t % tn * 16;
    w::fragment<w::accumulator, 16, 16, 16, float> acc;
    if (accumulate)
      w::load_matrix_sync(acc, c + i0 * ldc + j0, ldc, w::mem_row_major);
    else
      w::fill_fragment(acc, 0.0f);
    for (int p = 0; p < k; p += 16) {
      w::fragment<w::matrix_a, 16, 16, 16, T, LA> fa;
      w::fragment<w::matrix_b, 16, 16, 16, T, LB> fb;
      w::load_matrix_sync(fa, ta + (AT ? p * lda + i0 : i0 * lda + p), lda);
      w::load_matrix_sync(fb, tb + (BT ? j0 * ldb + p : p * ldb + j0), ldb);
      w::mma_sync(acc, fa, fb, acc);
    }
    w::store_matrix_sync(c + i0 * ldc + j0, acc, ldc, w::mem_row_major);
  }
#else
  (void)blk;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float s = accumulate ? c[i * ldc + j] : 0.0f;
      for (int p = 0; p < k; ++p)
        s += narrowToFloat(F16, a[AT ? p * lda + i : i * lda + p]) *
             narrowToFloat(F16, b[BT ? j * ldb + p : p * ldb + j]);
      c[i * ldc + j] = s;
    }
#endif
}

/// Shared memory handed out in order, each piece 128-byte aligned; with no
/// base it only counts the bytes.
struct SmemCarve {
  uintptr_t base = 0;
  size_t used = 0;
  template <typename T> FSDP_HD T *take(size_t n) {
    used = (used + 127) / 128 * 128;
    T *p = reinterpret_cast<T *>(base + used);
    used += n * sizeof(T);
    return p;
  }
};

/// q [batch, tq, d], k and v [batch, tk, d] (batch: every leading
/// dimension), 16-bit; causal rows see keys up to i + tk - tq (tq <= tk).
/// d is a multiple of 16 up to 128 (common/ComputeOps.h's
/// flashAttentionShapes decides which attentions come here).
struct FlashLayout {
  int64_t tq = 0, tk = 0, d = 0;
  float scale = 1;
  bool causal = false, f16 = false;
  const uint16_t *q = nullptr, *k = nullptr, *v = nullptr;
  /// The "bshd" layout: every tensor [samples, rows, heads, d], batch
  /// element b the head b % heads of sample b / heads.
  bool bshd = false;
  int64_t heads = 1, kvHeads = 1; // q's and k's, v's, in the bshd layout
  int64_t nrep = 1; // grouped-query: query heads a key head serves

  /// Where batch element b's first row starts in a tensor of `rows` rows,
  /// and the stride from row to row (elements); `kv`: of k, v or their
  /// gradients, whose batch element kb is the query's b / nrep.
  FSDP_HD int64_t base(int64_t b, int64_t rows, bool kv = false) const {
    int64_t h = kv ? kvHeads : heads;
    return bshd ? (b / h * rows * h + b % h) * d : b * rows * d;
  }
  FSDP_HD int64_t rowStride(bool kv = false) const {
    return bshd ? (kv ? kvHeads : heads) * d : d;
  }

  /// Row strides in shared memory: 16-bit [64, d] tiles, f32 [64, d]
  /// tiles, f32 and 16-bit [64, 64] tiles (padded against bank conflicts,
  /// within WMMA's rules).
  FSDP_HD int ld16() const { return (int)d + 8; }
  FSDP_HD int ld32() const { return (int)d + 4; }
  static constexpr int kLdS = kFlashTile + 4, kLdP = kFlashTile + 8;

  FSDP_HD int64_t tiles(int64_t rows) const {
    return (rows + kFlashTile - 1) / kFlashTile;
  }
  FSDP_HD bool visible(int64_t i, int64_t j) const {
    return j < tk && (!causal || j <= i + (tk - tq));
  }
  /// out[64 x 64] = x y^T for two 16-bit [64, d] tiles (ld16): query
  /// (or dy) rows against key (or v) rows.
  template <bool F16>
  FSDP_HD void rowProducts(const Block &blk, const uint16_t *x,
                           const uint16_t *y, float *out) const {
    tileMma<F16, false, true>(blk, kFlashTile, kFlashTile, (int)d, x, ld16(), y,
                              ld16(), out, kLdS, false);
  }
  /// The larger of m and the largest visible scaled score of query row i0
  /// + r in the key tile at j0 (`srow`: the row's raw scores). Columns are
  /// read staggered by row, so a warp's threads read different banks.
  FSDP_HD float rowMax(int64_t i0, int r, int64_t j0, const float *srow,
                       float m) const {
    for (int jj = 0; jj < kFlashTile; ++jj) {
      int j = (jj + r) % kFlashTile;
      float s = scale * srow[j];
      if (visible(i0 + r, j0 + j) && s > m)
        m = s;
    }
    return m;
  }
  /// p_ij from raw score s and the row's final maximum m and normaliser l
  /// (0 where key j is hidden, or the row is past the last).
  FSDP_HD float prob(int64_t i, int64_t j, float s, float m, float l) const {
    return i < tq && visible(i, j) && l > 0 ? expf(scale * s - m) / l : 0.0f;
  }
  /// One past the last key a query tile starting at i0 sees.
  FSDP_HD int64_t keyEnd(int64_t i0) const {
    if (!causal)
      return tk;
    int64_t lastRow = i0 + kFlashTile < tq ? i0 + kFlashTile - 1 : tq - 1;
    int64_t end = lastRow + (tk - tq) + 1;
    return end < tk ? end : tk;
  }
  /// The first query tile (its first row) that sees key j0.
  FSDP_HD int64_t firstQueryTile(int64_t j0) const {
    int64_t i = causal ? j0 - (tk - tq) : 0;
    return i <= 0 ? 0 : i / kFlashTile * kFlashTile;
  }
  /// Rows [r0, r0 + 64) of one batch element's rows (rowStride() apart)
  /// into a tile (ld16), zeros past the last row.
  FSDP_HD void load(const Block &blk, const uint16_t *src, int64_t rows,
                    int64_t r0, uint16_t *tile, bool kv = false) const {
    int n = kFlashTile * (int)d, ld = ld16();
    int64_t stride = rowStride(kv);
    for (int e = blk.thread(); e < n; e += blk.threads()) {
      int r = e / (int)d, c = e % (int)d;
      tile[r * ld + c] =
          r0 + r < rows ? src[(r0 + r) * stride + c] : (uint16_t)0;
    }
  }
  /// Rows [r0, r0 + 64) of an f32 tile (ld32), times `mul` (and divided
  /// by `div[r]` where given), rounded into dst's rows below `rows`.
  FSDP_HD void store(const Block &blk, const float *tile, float mul,
                     const float *div, int64_t rows, int64_t r0,
                     uint16_t *dst, bool kv = false) const {
    int n = kFlashTile * (int)d, ld = ld32();
    int64_t stride = rowStride(kv);
    for (int e = blk.thread(); e < n; e += blk.threads()) {
      int r = e / (int)d, c = e % (int)d;
      if (r0 + r >= rows)
        continue;
      float x = tile[r * ld + c] * mul;
      if (div)
        x = div[r] > 0 ? x / div[r] : 0.0f;
      dst[(r0 + r) * stride + c] = floatToNarrow(f16, x);
    }
  }
  FSDP_HD void zero(const Block &blk, float *tile) const {
    int n = kFlashTile * ld32();
    for (int e = blk.thread(); e < n; e += blk.threads())
      tile[e] = 0;
  }
};

/// What the three kernels share: the layout, the block's threads, the
/// shared memory their carve takes, and the choice of run<F16> by the
/// layout's element type. K: the kernel, with carve() and run<F16>().
template <typename K> struct FlashKernel {
  FlashLayout a;
  static constexpr int kThreads = kFlashThreads;
  size_t smemBytes() const {
    SmemCarve sc;
    static_cast<const K *>(this)->carve(sc);
    return sc.used;
  }
  FSDP_HD void operator()(const Block &blk, int64_t index,
                          unsigned char *smem) const {
    const K &k = *static_cast<const K *>(this);
    if (a.f16)
      k.template run<true>(blk, index, smem);
    else
      k.template run<false>(blk, index, smem);
  }
};

/// y = softmax(scale q k^T) v, one 64-row query tile per block (the
/// longest causal tiles first); with `lse`, each row's log-sum-exp too.
struct FlashAttention : FlashKernel<FlashAttention> {
  uint16_t *y;
  float *lse = nullptr; // each row's log-sum-exp of its scaled scores, or none

  struct Smem {
    uint16_t *q, *k, *v, *p;
    float *s, *o, *m, *l, *alpha;
  };
  FSDP_HD Smem carve(SmemCarve &sc) const {
    Smem s;
    s.q = sc.take<uint16_t>(kFlashTile * a.ld16());
    s.k = sc.take<uint16_t>(kFlashTile * a.ld16());
    s.v = sc.take<uint16_t>(kFlashTile * a.ld16());
    s.p = sc.take<uint16_t>(kFlashTile * FlashLayout::kLdP);
    s.s = sc.take<float>(kFlashTile * FlashLayout::kLdS);
    s.o = sc.take<float>(kFlashTile * a.ld32());
    s.m = sc.take<float>(kFlashTile);
    s.l = sc.take<float>(kFlashTile);
    s.alpha = sc.take<float>(kFlashTile);
    return s;
  }

  template <bool F16>
  FSDP_HD void run(const Block &blk, int64_t index, unsigned char *smem) const {
    SmemCarve sc{reinterpret_cast<uintptr_t>(smem)};
    Smem sm = carve(sc);
    int64_t tiles = a.tiles(a.tq), b = index / tiles,
            i0 = (tiles - 1 - index % tiles) * kFlashTile;
    const uint16_t *q = a.q + a.base(b, a.tq),
                   *k = a.k + a.base(b / a.nrep, a.tk, true),
                   *v = a.v + a.base(b / a.nrep, a.tk, true);
    int d = (int)a.d, ld16 = a.ld16(), ld32 = a.ld32();
    a.load(blk, q, a.tq, i0, sm.q);
    a.zero(blk, sm.o);
    for (int r = blk.thread(); r < kFlashTile; r += blk.threads()) {
      sm.m[r] = -INFINITY;
      sm.l[r] = 0;
    }
    for (int64_t j0 = 0; j0 < a.keyEnd(i0); j0 += kFlashTile) {
      blk.sync(); // the previous tile's products are done with k, v, p
      a.load(blk, k, a.tk, j0, sm.k, true);
      a.load(blk, v, a.tk, j0, sm.v, true);
      blk.sync();
      a.rowProducts<F16>(blk, sm.q, sm.k, sm.s);
      blk.sync();
      // One thread a row.
      for (int r = blk.thread(); r < kFlashTile; r += blk.threads()) {
        const float *srow = sm.s + r * FlashLayout::kLdS;
        float mOld = sm.m[r], mx = a.rowMax(i0, r, j0, srow, mOld);
        float alpha = mOld == -INFINITY ? 0.0f : expf(mOld - mx), sum = 0;
        for (int jj = 0; jj < kFlashTile; ++jj) {
          int j = (jj + r) % kFlashTile;
          float p =
              a.visible(i0 + r, j0 + j) ? expf(a.scale * srow[j] - mx) : 0.0f;
          sum += p;
          sm.p[r * FlashLayout::kLdP + j] = floatToNarrow(F16, p);
        }
        sm.l[r] = sm.l[r] * alpha + sum;
        sm.m[r] = mx;
        sm.alpha[r] = alpha;
      }
      blk.sync();
      for (int e = blk.thread(); e < kFlashTile * d; e += blk.threads())
        sm.o[e / d * ld32 + e % d] *= sm.alpha[e / d];
      blk.sync();
      tileMma<F16, false, false>(blk, kFlashTile, d, kFlashTile, sm.p,
                                 FlashLayout::kLdP, sm.v, ld16, sm.o, ld32,
                                 true);
    }
    blk.sync();
    a.store(blk, sm.o, 1.0f, sm.l, a.tq, i0, y + a.base(b, a.tq));
    if (lse)
      for (int r = blk.thread(); r < kFlashTile; r += blk.threads())
        if (i0 + r < a.tq)
          lse[b * a.tq + i0 + r] =
              sm.l[r] > 0 ? sm.m[r] + logf(sm.l[r]) : -INFINITY;
  }
};

/// The gradient, first kernel: one query tile per block. Walks the keys
/// twice: for each row's maximum m, normaliser l and D = sum_j p_ij dp_ij
/// (written to `stats`, 3 floats a row, for FlashAttentionGradKeys), then
/// for dq = scale sum_j ds_ij k_j, ds_ij = p_ij (dp_ij - D_i),
/// dp_ij = dy_i . v_j.
struct FlashAttentionGradQueries : FlashKernel<FlashAttentionGradQueries> {
  const uint16_t *dy;
  uint16_t *dq;
  float *stats;

  struct Smem {
    uint16_t *q, *dy, *k, *v, *ds;
    float *s, *dp, *dq, *m, *l, *dd;
  };
  FSDP_HD Smem carve(SmemCarve &sc) const {
    Smem s;
    s.q = sc.take<uint16_t>(kFlashTile * a.ld16());
    s.dy = sc.take<uint16_t>(kFlashTile * a.ld16());
    s.k = sc.take<uint16_t>(kFlashTile * a.ld16());
    s.v = sc.take<uint16_t>(kFlashTile * a.ld16());
    s.ds = sc.take<uint16_t>(kFlashTile * FlashLayout::kLdP);
    s.s = sc.take<float>(kFlashTile * FlashLayout::kLdS);
    s.dp = sc.take<float>(kFlashTile * FlashLayout::kLdS);
    s.dq = sc.take<float>(kFlashTile * a.ld32());
    s.m = sc.take<float>(kFlashTile);
    s.l = sc.take<float>(kFlashTile);
    s.dd = sc.take<float>(kFlashTile);
    return s;
  }

  /// s = q k^T and dp = dy v^T for the key tile at j0.
  template <bool F16>
  FSDP_HD void scores(const Block &blk, const Smem &sm, const uint16_t *k,
                      const uint16_t *v, int64_t j0) const {
    blk.sync();
    a.load(blk, k, a.tk, j0, sm.k, true);
    a.load(blk, v, a.tk, j0, sm.v, true);
    blk.sync();
    a.rowProducts<F16>(blk, sm.q, sm.k, sm.s);
    a.rowProducts<F16>(blk, sm.dy, sm.v, sm.dp);
    blk.sync();
  }

  template <bool F16>
  FSDP_HD void run(const Block &blk, int64_t index, unsigned char *smem) const {
    SmemCarve sc{reinterpret_cast<uintptr_t>(smem)};
    Smem sm = carve(sc);
    int64_t tiles = a.tiles(a.tq), b = index / tiles,
            i0 = (tiles - 1 - index % tiles) * kFlashTile;
    const uint16_t *k = a.k + a.base(b / a.nrep, a.tk, true),
                   *v = a.v + a.base(b / a.nrep, a.tk, true);
    int d = (int)a.d;
    a.load(blk, a.q + a.base(b, a.tq), a.tq, i0, sm.q);
    a.load(blk, dy + a.base(b, a.tq), a.tq, i0, sm.dy);
    for (int r = blk.thread(); r < kFlashTile; r += blk.threads()) {
      sm.m[r] = -INFINITY;
      sm.l[r] = 0;
      sm.dd[r] = 0;
    }
    // First walk: m, l and D, online.
    for (int64_t j0 = 0; j0 < a.keyEnd(i0); j0 += kFlashTile) {
      scores<F16>(blk, sm, k, v, j0);
      for (int r = blk.thread(); r < kFlashTile; r += blk.threads()) {
        const float *srow = sm.s + r * FlashLayout::kLdS,
                    *dprow = sm.dp + r * FlashLayout::kLdS;
        float mOld = sm.m[r], mx = a.rowMax(i0, r, j0, srow, mOld);
        float alpha = mOld == -INFINITY ? 0.0f : expf(mOld - mx), sum = 0,
              dsum = 0;
        for (int jj = 0; jj < kFlashTile; ++jj) {
          int j = (jj + r) % kFlashTile;
          if (!a.visible(i0 + r, j0 + j))
            continue;
          float p = expf(a.scale * srow[j] - mx);
          sum += p;
          dsum += p * dprow[j];
        }
        sm.l[r] = sm.l[r] * alpha + sum;
        sm.dd[r] = sm.dd[r] * alpha + dsum;
        sm.m[r] = mx;
      }
    }
    blk.sync();
    for (int r = blk.thread(); r < kFlashTile; r += blk.threads()) {
      sm.dd[r] = sm.l[r] > 0 ? sm.dd[r] / sm.l[r] : 0.0f;
      if (i0 + r < a.tq) {
        float *st = stats + 3 * (b * a.tq + i0 + r);
        st[0] = sm.m[r];
        st[1] = sm.l[r];
        st[2] = sm.dd[r];
      }
    }
    a.zero(blk, sm.dq);
    // Second walk: dq.
    for (int64_t j0 = 0; j0 < a.keyEnd(i0); j0 += kFlashTile) {
      scores<F16>(blk, sm, k, v, j0);
      for (int e = blk.thread(); e < kFlashTile * kFlashTile;
           e += blk.threads()) {
        int r = e / kFlashTile, j = e % kFlashTile;
        float p = a.prob(i0 + r, j0 + j, sm.s[r * FlashLayout::kLdS + j],
                         sm.m[r], sm.l[r]);
        sm.ds[r * FlashLayout::kLdP + j] = floatToNarrow(
            F16, p * (sm.dp[r * FlashLayout::kLdS + j] - sm.dd[r]));
      }
      blk.sync();
      tileMma<F16, false, false>(blk, kFlashTile, d, kFlashTile, sm.ds,
                                 FlashLayout::kLdP, sm.k, a.ld16(), sm.dq,
                                 a.ld32(), true);
    }
    blk.sync();
    a.store(blk, sm.dq, a.scale, nullptr, a.tq, i0, dq + a.base(b, a.tq));
  }
};

/// The gradient, second kernel: one key tile per block, over the query
/// tiles that see it (after FlashAttentionGradQueries has written
/// `stats`): dv_j = sum_i p_ij dy_i, dk_j = scale sum_i ds_ij q_i.
struct FlashAttentionGradKeys : FlashKernel<FlashAttentionGradKeys> {
  const uint16_t *dy;
  const float *stats;
  uint16_t *dk, *dv;

  struct Smem {
    uint16_t *k, *v, *q, *dy, *p, *ds;
    float *s, *dp, *dk, *dv, *m, *l, *dd;
  };
  FSDP_HD Smem carve(SmemCarve &sc) const {
    Smem s;
    s.k = sc.take<uint16_t>(kFlashTile * a.ld16());
    s.v = sc.take<uint16_t>(kFlashTile * a.ld16());
    s.q = sc.take<uint16_t>(kFlashTile * a.ld16());
    s.dy = sc.take<uint16_t>(kFlashTile * a.ld16());
    s.p = sc.take<uint16_t>(kFlashTile * FlashLayout::kLdP);
    s.ds = sc.take<uint16_t>(kFlashTile * FlashLayout::kLdP);
    s.s = sc.take<float>(kFlashTile * FlashLayout::kLdS);
    s.dp = sc.take<float>(kFlashTile * FlashLayout::kLdS);
    s.dk = sc.take<float>(kFlashTile * a.ld32());
    s.dv = sc.take<float>(kFlashTile * a.ld32());
    s.m = sc.take<float>(kFlashTile);
    s.l = sc.take<float>(kFlashTile);
    s.dd = sc.take<float>(kFlashTile);
    return s;
  }

  template <bool F16>
  FSDP_HD void run(const Block &blk, int64_t index, unsigned char *smem) const {
    SmemCarve sc{reinterpret_cast<uintptr_t>(smem)};
    Smem sm = carve(sc);
    // kb: a batch element of k and v; the query heads it serves in turn.
    int64_t tiles = a.tiles(a.tk), kb = index / tiles,
            j0 = (index % tiles) * kFlashTile; // the earliest keys have most
    int d = (int)a.d;
    a.load(blk, a.k + a.base(kb, a.tk, true), a.tk, j0, sm.k, true);
    a.load(blk, a.v + a.base(kb, a.tk, true), a.tk, j0, sm.v, true);
    a.zero(blk, sm.dk);
    a.zero(blk, sm.dv);
    for (int64_t b = kb * a.nrep; b < (kb + 1) * a.nrep; ++b) {
    const uint16_t *q = a.q + a.base(b, a.tq), *g = dy + a.base(b, a.tq);
    for (int64_t i0 = a.firstQueryTile(j0); i0 < a.tq; i0 += kFlashTile) {
      blk.sync(); // the previous tile's products are done with q, dy, p, ds
      a.load(blk, q, a.tq, i0, sm.q);
      a.load(blk, g, a.tq, i0, sm.dy);
      for (int r = blk.thread(); r < kFlashTile; r += blk.threads()) {
        const float *st = stats + 3 * (b * a.tq + i0 + r);
        bool row = i0 + r < a.tq;
        sm.m[r] = row ? st[0] : 0.0f;
        sm.l[r] = row ? st[1] : 0.0f;
        sm.dd[r] = row ? st[2] : 0.0f;
      }
      blk.sync();
      a.rowProducts<F16>(blk, sm.q, sm.k, sm.s);
      a.rowProducts<F16>(blk, sm.dy, sm.v, sm.dp);
      blk.sync();
      for (int e = blk.thread(); e < kFlashTile * kFlashTile;
           e += blk.threads()) {
        int r = e / kFlashTile, j = e % kFlashTile; // query r, key j
        float p = a.prob(i0 + r, j0 + j, sm.s[r * FlashLayout::kLdS + j],
                         sm.m[r], sm.l[r]);
        sm.p[r * FlashLayout::kLdP + j] = floatToNarrow(F16, p);
        sm.ds[r * FlashLayout::kLdP + j] = floatToNarrow(
            F16, p * (sm.dp[r * FlashLayout::kLdS + j] - sm.dd[r]));
      }
      blk.sync();
      // dv += p^T dy and dk += ds^T q: p and ds are [query, key], read
      // transposed.
      tileMma<F16, true, false>(blk, kFlashTile, d, kFlashTile, sm.p,
                                FlashLayout::kLdP, sm.dy, a.ld16(), sm.dv,
                                a.ld32(), true);
      tileMma<F16, true, false>(blk, kFlashTile, d, kFlashTile, sm.ds,
                                FlashLayout::kLdP, sm.q, a.ld16(), sm.dk,
                                a.ld32(), true);
    }
    }
    blk.sync();
    a.store(blk, sm.dk, a.scale, nullptr, a.tk, j0,
            dk + a.base(kb, a.tk, true), true);
    a.store(blk, sm.dv, 1.0f, nullptr, a.tk, j0, dv + a.base(kb, a.tk, true),
            true);
  }
};

} // namespace fsdp::device

#endif // FSDP_RUNTIME_DEVICE_FLASHATTENTION_H
