//===- Attention.cpp - Fused attention (CPU) ------------------------------===//
//
// Fused attention and its gradient (query blocks over the threads).
// (Declared in KernelSupport.h; dispatched by runtime/cpu/Kernels.cpp.)
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/kernels/KernelSupport.h"

namespace fsdp::cpu::kernels {

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// Attention's shape: q [..., tq, d], k [..., tk, d], v [..., tk, dv], an
/// optional mask broadcast to the scores [..., tq, tk]; in the "bshd"
/// layout q [..., tq, H, d] (k, v alike) and the scores [..., H, tq, tk].
/// `batch` counts the [rows, columns] matrices (every head of every
/// sample); batch element b's rows start at rowsOf(b).base.
struct AttentionShape {
  int64_t r, tq, d, tk, dv, batch;
  Shape bshape, ms;
  const TensorRef *mask;
  bool safe;    // safe_softmax: a row with every key hidden gets zeros
  bool average; // average_empty_rows: such a row averages its values
  bool bshd = false;
  int64_t heads = 1, kvHeads = 1; // H and k's, v's, in the bshd layout
  int64_t nrep = 1; // query heads a key head serves (grouped-query)
};

/// Where batch element b's first row of a tensor of `rows` rows of `cols`
/// columns starts, and the stride from one row to the next; `kv`: of k, v
/// or their gradients, whose batch element is b / nrep (query head h reads
/// key head h / nrep).
struct Rows {
  int64_t base, stride;
};
Rows rowsOf(const AttentionShape &a, int64_t b, int64_t rows, int64_t cols,
            bool kv = false) {
  int64_t heads = kv ? a.kvHeads : a.heads;
  if (kv)
    b /= a.nrep;
  if (!a.bshd)
    return {b * rows * cols, cols};
  int64_t sample = b / heads, h = b % heads;
  return {(sample * rows * heads + h) * cols, heads * cols};
}

/// Softmax of a row of scores in place. A row whose every score is -inf
/// (every key hidden) gets NaN, as a softmax gives it; zeros with `safe`;
/// 1/n each with `average` (masked_fill's equal finite scores).
void probsRow(float *row, int64_t n, const AttentionShape &a) {
  const float ninf = -std::numeric_limits<float>::infinity();
  if ((a.safe || a.average) &&
      std::all_of(row, row + n, [&](float s) { return s == ninf; })) {
    std::fill(row, row + n, a.safe ? 0.0f : 1.0f / (float)n);
    return;
  }
  softmaxRow(row, row, n, false);
}

/// Query rows [i0, i1) of batch element `b` attend to keys [0, kmax): with
/// a causal flag and no mask, blocks of kQueryBlock rows stop at the
/// diagonal, so the products above it (half of them) are never computed.
struct QueryBlock {
  int64_t i0, i1, kmax;
};
constexpr int64_t kQueryBlock = 32;

/// How many blocks, and block `n` (no allocation: kernels run in a step).
int64_t queryBlockCount(const AttentionShape &a, bool causal) {
  if (!causal || a.mask || a.tq <= kQueryBlock)
    return 1;
  return (a.tq + kQueryBlock - 1) / kQueryBlock;
}
QueryBlock queryBlock(const AttentionShape &a, bool causal, int64_t n) {
  if (queryBlockCount(a, causal) == 1)
    return {0, a.tq, a.tk};
  int64_t offset = a.tk - a.tq; // row i sees keys j <= i + offset
  int64_t i0 = n * kQueryBlock, i1 = std::min(a.tq, i0 + kQueryBlock);
  return {i0, i1, std::clamp<int64_t>(i1 + offset, 1, a.tk)};
}

/// Where batch element `b`'s mask starts.
int64_t maskBase(const AttentionShape &a, int64_t b) {
  int64_t mbase = 0;
  if (a.mask)
    for (int64_t dd = (int64_t)a.bshape.size() - 1, rest = b; dd >= 0; --dd) {
      mbase += (rest % a.bshape[dd]) * a.ms[dd];
      rest /= a.bshape[dd];
    }
  return mbase;
}

/// Whether a boolean mask hides every key of query row i (from `mbase`).
bool hidesEveryKey(const AttentionShape &a, Context &c, int64_t mbase,
                   int64_t i) {
  if (!a.mask || a.mask->dtype != DType::I1)
    return false;
  const uint8_t *keep = c.get<uint8_t>(*a.mask) + mbase + i * a.ms[a.r - 2];
  for (int64_t j = 0; j < a.tk; ++j)
    if (keep[j * a.ms[a.r - 1]])
      return false;
  return true;
}

/// The natural log of sum_j exp(row[j]) over n scores (-inf when every
/// score is -inf): fsdp.attention's `lse`, before the softmax.
float attentionRowLse(const float *row, int64_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j)
    mx = std::max(mx, row[j]);
  if (mx == -std::numeric_limits<float>::infinity())
    return mx;
  double sum = 0;
  for (int64_t j = 0; j < n; ++j)
    sum += std::exp((double)row[j] - mx);
  return (float)(mx + std::log(sum));
}

/// Scores of batch element `b`'s rows [blk.i0, blk.i1) against keys
/// [0, blk.kmax), masked and softmaxed into `s` (row i0, rows of tk): the
/// forward's probabilities, recomputed by the backward. With `lse`, each
/// row's log-sum-exp of its masked scores goes to lse[b * tq + i].
void attentionProbs(const AttentionShape &a, Context &c, const float *pq,
                    const float *pk, float scale, bool causal, int64_t b,
                    const QueryBlock &blk, float *s, float *lse = nullptr) {
  const float ninf = -std::numeric_limits<float>::infinity();
  Rows rq = rowsOf(a, b, a.tq, a.d), rk = rowsOf(a, b, a.tk, a.d, true);
  sgemmSerial(false, true, blk.i1 - blk.i0, blk.kmax, a.d, scale,
              pq + rq.base + blk.i0 * rq.stride, rq.stride, pk + rk.base,
              rk.stride, 0.0f, s, a.tk);
  int64_t mbase = maskBase(a, b);
  for (int64_t i = blk.i0; i < blk.i1; ++i) {
    float *row = s + (i - blk.i0) * a.tk;
    if (!a.mask) { // causal: the keys after i + (tk - tq) are hidden
      if (causal)
        std::fill(row + std::clamp<int64_t>(i + (a.tk - a.tq) + 1, 0, blk.kmax),
                  row + blk.kmax, ninf);
      if (lse)
        lse[b * a.tq + i] = attentionRowLse(row, blk.kmax);
      probsRow(row, blk.kmax, a);
      continue;
    }
    for (int64_t j = 0; j < blk.kmax; ++j) {
      if (causal && j > i + (a.tk - a.tq))
        row[j] = ninf;
      if (a.mask) {
        int64_t off = mbase + i * a.ms[a.r - 2] + j * a.ms[a.r - 1];
        if (a.mask->dtype == DType::I1) {
          if (!c.get<uint8_t>(*a.mask)[off])
            row[j] = ninf;
        } else {
          row[j] += c.get<float>(*a.mask)[off];
        }
      }
    }
    if (lse)
      lse[b * a.tq + i] = attentionRowLse(row, blk.kmax);
    probsRow(row, blk.kmax, a);
  }
}

Status attentionShape(const Instruction &in, const TensorRef *mask,
                      AttentionShape &a) {
  a.safe = attrBool(in, "safe_softmax", false);
  a.average = attrBool(in, "average_empty_rows", false);
  std::string layout = attrString(in, "layout", "bhsd");
  if (layout != "bhsd" && layout != "bshd")
    return Status::error("layout must be bhsd or bshd, got " + layout);
  a.bshd = layout == "bshd";
  // Every shape seen as bhsd: [..., H, T, D].
  auto seen = [&](const TensorRef &t) {
    Shape s = t.shape;
    if (a.bshd && s.size() >= 3)
      std::swap(s[s.size() - 3], s[s.size() - 2]);
    return s;
  };
  Shape q = seen(in.in[0]), k = seen(in.in[1]), v = seen(in.in[2]);
  a.r = (int64_t)q.size();
  if (a.r < (a.bshd ? 3 : 2) || (int64_t)k.size() != a.r ||
      (int64_t)v.size() != a.r)
    return Status::error("q, k, v need one rank >= 2 (3 in the bshd layout)");
  a.heads = a.bshd ? q[a.r - 3] : 1;
  a.kvHeads = a.bshd ? k[a.r - 3] : 1;
  a.tq = q[a.r - 2];
  a.d = q[a.r - 1];
  a.tk = k[a.r - 2];
  a.dv = v[a.r - 1];
  // Grouped-query: k and v may have fewer heads (the dimension before the
  // rows), a divisor of q's.
  bool grouped = a.r >= 3 && k[a.r - 3] > 0 && q[a.r - 3] % k[a.r - 3] == 0 &&
                 std::equal(q.begin(), q.end() - 3, k.begin());
  if (k[a.r - 1] != a.d || v[a.r - 2] != a.tk ||
      !std::equal(k.begin(), k.end() - 2, v.begin()) ||
      !(std::equal(q.begin(), q.end() - 2, k.begin()) || grouped))
    return Status::error("q, k, v shapes do not match");
  a.nrep = std::equal(q.begin(), q.end() - 2, k.begin()) ? 1
                                                          : q[a.r - 3] / k[a.r - 3];
  Shape scores(q.begin(), q.end() - 1);
  scores.push_back(a.tk);
  a.mask = mask;
  if (mask && !broadcastStrides(mask->shape, scores, a.ms))
    return Status::error("mask " + shapeString(mask->shape) +
                         " does not broadcast to " + shapeString(scores));
  a.batch = product(q, 0, a.r - 2);
  a.bshape = Shape(q.begin(), q.end() - 2);
  return Status::ok();
}

Status kAttention(const Instruction &in, Context &c) {
  const TensorRef &q = in.in[0], &k = in.in[1], &v = in.in[2], &y = in.out[0];
  AttentionShape a;
  FSDP_RETURN_IF_ERROR(
      attentionShape(in, in.in.size() == 4 ? &in.in[3] : nullptr, a));
  if (y.numel() != a.batch * a.tq * a.dv)
    return Status::error("output does not match q and v");
  // with_lse: each row's log-sum-exp, f32 [..., tq].
  float *lse = nullptr;
  if (in.out.size() == 2) {
    if (in.out[1].dtype != DType::F32 || in.out[1].numel() != a.batch * a.tq)
      return Status::error("lse must be f32 with one value a query row");
    lse = c.get<float>(in.out[1]);
  }
  float scale = (float)attrFloat(in, "scale", 1.0);
  bool causal = attrBool(in, "causal", false);
  const float *pq = c.get<float>(q), *pk = c.get<float>(k),
              *pv = c.get<float>(v);
  float *py = c.get<float>(y);
  int64_t tq = a.tq, tk = a.tk, dv = a.dv;
  int64_t blocks = queryBlockCount(a, causal);
#pragma omp parallel for
  for (int64_t b = 0; b < a.batch; ++b) {
    float *p = c.scratch + threadNum() * tq * tk; // per-thread scores
    Rows rv = rowsOf(a, b, tk, dv, true), ry = rowsOf(a, b, tq, dv);
    for (int64_t n = 0; n < blocks; ++n) {
      QueryBlock blk = queryBlock(a, causal, n);
      attentionProbs(a, c, pq, pk, scale, causal, b, blk, p, lse);
      sgemmSerial(false, false, blk.i1 - blk.i0, dv, blk.kmax, 1.0f, p, tk,
                  pv + rv.base, rv.stride, 0.0f,
                  py + ry.base + blk.i0 * ry.stride, ry.stride);
    }
  }
  return Status::ok();
}

FSDP_VECTOR_CLONES
Status kAttentionGrad(const Instruction &in, Context &c) {
  const TensorRef &q = in.in[0], &k = in.in[1], &v = in.in[2], &dy = in.in[3];
  AttentionShape a;
  // The saved output and lse (with_lse), where given, are not read: the
  // probabilities are recomputed exactly as the forward computed them.
  FSDP_RETURN_IF_ERROR(attentionShape(
      in, attentionGradHasMask(in.in.size()) ? &in.in[4] : nullptr, a));
  if (dy.numel() != a.batch * a.tq * a.dv || in.out[0].numel() != q.numel() ||
      in.out[1].numel() != k.numel() || in.out[2].numel() != v.numel())
    return Status::error("gradient shapes do not match q, k, v");
  float scale = (float)attrFloat(in, "scale", 1.0);
  bool causal = attrBool(in, "causal", false);
  const float *pq = c.get<float>(q), *pk = c.get<float>(k),
              *pv = c.get<float>(v), *pdy = c.get<float>(dy);
  float *dq = c.get<float>(in.out[0]), *dk = c.get<float>(in.out[1]),
        *dv = c.get<float>(in.out[2]);
  int64_t tq = a.tq, tk = a.tk, d = a.d, nv = a.dv;
  int64_t blocks = queryBlockCount(a, causal);
  // One key head each (grouped-query: the query heads it serves in turn,
  // so a thread owns its dk and dv).
#pragma omp parallel for
  for (int64_t kb = 0; kb < a.batch / a.nrep; ++kb) {
    float *p = c.scratch + threadNum() * 2 * tq * tk;
    float *dp = p + tq * tk;
    // dk and dv sum over the query heads and their query blocks.
    float beta = 0.0f;
    for (int64_t b = kb * a.nrep; b < (kb + 1) * a.nrep; ++b) {
    // Batch element b's rows of each tensor (dq as q, dk as k, dv as v,
    // dy as the output).
    Rows rq = rowsOf(a, b, tq, d), rk = rowsOf(a, b, tk, d, true),
         rv = rowsOf(a, b, tk, nv, true), ry = rowsOf(a, b, tq, nv);
    for (int64_t n = 0; n < blocks; ++n) {
      QueryBlock blk = queryBlock(a, causal, n);
      int64_t rows = blk.i1 - blk.i0, keys = blk.kmax;
      attentionProbs(a, c, pq, pk, scale, causal, b, blk, p);
      const float *gy = pdy + ry.base + blk.i0 * ry.stride;
      const float *qb = pq + rq.base + blk.i0 * rq.stride;
      // Keys past this block's reach get nothing from it: with beta 0 (the
      // first block) they are zeroed first.
      if (beta == 0.0f && keys < tk)
        for (int64_t j = keys; j < tk; ++j) {
          std::fill_n(dv + rv.base + j * rv.stride, nv, 0.0f);
          std::fill_n(dk + rk.base + j * rk.stride, d, 0.0f);
        }
      // dv = pᵀ·dy ; dp = dy·vᵀ ; ds = p ⊙ (dp - rowsum(dp ⊙ p)) (into dp)
      sgemmSerial(true, false, keys, nv, rows, 1.0f, p, tk, gy, ry.stride,
                  beta, dv + rv.base, rv.stride);
      sgemmSerial(false, true, rows, keys, nv, 1.0f, gy, ry.stride,
                  pv + rv.base, rv.stride, 0.0f, dp, tk);
      int64_t mbase = maskBase(a, b);
      for (int64_t i = 0; i < rows; ++i) {
        float *dpi = dp + i * tk;
        const float *pi = p + i * tk;
        if (a.average && hidesEveryKey(a, c, mbase, blk.i0 + i)) {
          // masked_fill's scores take no gradient where it hid them.
          std::fill(dpi, dpi + keys, 0.0f);
          continue;
        }
        double dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int64_t j = 0; j < keys; ++j)
          dot += (double)dpi[j] * pi[j];
#pragma omp simd
        for (int64_t j = 0; j < keys; ++j)
          dpi[j] = pi[j] * (float)(dpi[j] - dot);
      }
      // dq = scale·ds·k ; dk = scale·dsᵀ·q
      sgemmSerial(false, false, rows, d, keys, scale, dp, tk, pk + rk.base,
                  rk.stride, 0.0f, dq + rq.base + blk.i0 * rq.stride,
                  rq.stride);
      sgemmSerial(true, false, keys, d, rows, scale, dp, tk, qb, rq.stride,
                  beta, dk + rk.base, rk.stride);
      beta = 1.0f;
    }
    }
  }
  return Status::ok();
}

} // namespace fsdp::cpu::kernels
