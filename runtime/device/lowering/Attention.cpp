//===- Attention.cpp - Attention (device lowering) ------------------------===//
//
// Attention as device operations (declared in LoweringSupport.h; found
// through common/Ops.def by runtime/device/Lowering.cpp).
//
//===----------------------------------------------------------------------===//
#include "runtime/device/lowering/LoweringSupport.h"

namespace fsdp::device::lowering {

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// q's, k's or v's shape seen in the "bhsd" layout, [..., H, T, D].
Dims bhsdShape(const TensorRef &t, bool bshd) {
  Dims s = t.shape;
  if (bshd && s.size() >= 3)
    std::swap(s[s.size() - 3], s[s.size() - 2]);
  return s;
}

Status attentionLayout(Ctx &c, const TensorRef *mask, AttentionLayout &a,
                       int64_t &batch) {
  std::string layout = c.attrString("layout", "bhsd");
  if (layout != "bhsd" && layout != "bshd")
    return Status::error("layout must be bhsd or bshd, got " + layout);
  bool bshd = layout == "bshd";
  Dims q = bhsdShape(c.in.in[0], bshd), k = bhsdShape(c.in.in[1], bshd),
       v = bhsdShape(c.in.in[2], bshd);
  int64_t r = (int64_t)q.size();
  if (r < (bshd ? 3 : 2) || (int64_t)k.size() != r || (int64_t)v.size() != r)
    return Status::error("q, k, v need one rank >= 2 (3 in the bshd layout)");
  a = AttentionLayout{};
  a.bshd = bshd;
  a.heads = bshd ? q[r - 3] : 1;
  a.kvHeads = bshd ? k[r - 3] : 1;
  a.tq = q[r - 2];
  a.d = q[r - 1];
  a.tk = k[r - 2];
  a.dv = v[r - 1];
  // Grouped-query: k and v may have fewer heads, a divisor of q's.
  bool same = std::equal(q.begin(), q.end() - 2, k.begin());
  bool grouped = r >= 3 && k[r - 3] > 0 && q[r - 3] % k[r - 3] == 0 &&
                 std::equal(q.begin(), q.end() - 3, k.begin());
  if (k[r - 1] != a.d || v[r - 2] != a.tk ||
      !std::equal(k.begin(), k.end() - 2, v.begin()) || !(same || grouped))
    return Status::error("q, k, v shapes do not match");
  a.nrep = same ? 1 : q[r - 3] / k[r - 3];
  a.scale = (float)c.attrFloat("scale", 1.0);
  a.causal = c.attrBool("causal", false);
  a.safe = c.attrBool("safe_softmax", false);
  a.average = c.attrBool("average_empty_rows", false);
  a.q = c.at<float>(c.in.in[0]);
  a.k = c.at<float>(c.in.in[1]);
  a.v = c.at<float>(c.in.in[2]);
  batch = product(q, 0, r - 2);
  if (mask) {
    Dims scores(q.begin(), q.end() - 1);
    scores.push_back(a.tk);
    Strided s;
    if (!broadcastIndex(scores, {&mask->shape}, s) ||
        (mask->dtype != DType::I1 && mask->dtype != DType::F32))
      return Status::error("mask " + shapeString(mask->shape) +
                           " does not broadcast to " + shapeString(scores));
    AttentionMask &m = a.mask;
    (mask->dtype == DType::I1 ? (const void *&)m.keep : (const void *&)m.add) =
        c.at(*mask);
    m.batchRank = (int)(r - 2);
    for (int d = 0; d < m.batchRank; ++d) {
      m.batchDims[d] = q[d];
      m.batchStrides[d] = s.strides[0][d];
    }
    m.rowStride = s.strides[0][r - 2];
    m.colStride = s.strides[0][r - 1];
  }
  return Status::ok();
}

/// The flash kernels' view of an attention nativeNarrow lets through
/// (bf16/f16 throughout, no mask, shapes as flashAttentionShapes).
FlashLayout flashLayout(Ctx &c, const AttentionLayout &a) {
  FlashLayout f;
  f.tq = a.tq;
  f.tk = a.tk;
  f.d = a.d;
  f.scale = a.scale;
  f.causal = a.causal;
  f.f16 = c.in.in[0].dtype == DType::F16;
  f.bshd = a.bshd;
  f.heads = a.heads;
  f.kvHeads = a.kvHeads;
  f.nrep = a.nrep;
  f.q = c.at<uint16_t>(c.in.in[0]);
  f.k = c.at<uint16_t>(c.in.in[1]);
  f.v = c.at<uint16_t>(c.in.in[2]);
  return f;
}

/// The library's view of the same attention: [b, h, rows, d] with the
/// batch dimensions before the heads as b (one head when q is 3-D or 2-D
/// in the bhsd layout), each tensor through its strides: contiguous, or
/// heads after rows (bshd).
SdpaShape sdpaShape(Ctx &c, const FlashLayout &f) {
  Dims q = bhsdShape(c.in.in[0], f.bshd);
  int64_t r = (int64_t)q.size();
  SdpaShape s;
  s.h = r >= 3 ? q[r - 3] : 1;
  s.hk = s.h / f.nrep;
  s.b = product(q, 0, r >= 3 ? r - 3 : r - 2);
  s.tq = f.tq;
  s.tk = f.tk;
  s.d = f.d;
  s.scale = f.scale;
  s.causal = f.causal;
  s.f16 = f.f16;
  auto strides = [&](int64_t rows, int64_t heads, int64_t *st) {
    st[3] = 1;
    st[2] = f.bshd ? heads * s.d : s.d;
    st[1] = f.bshd ? s.d : rows * s.d;
    st[0] = heads * rows * s.d;
  };
  strides(s.tq, s.h, s.qStride);
  strides(s.tk, s.hk, s.kStride);
  strides(s.tk, s.hk, s.vStride);
  strides(s.tq, s.h, s.oStride);
  return s;
}

/// fsdp.attention's `lse` (with_lse), checked; null without it.
Status lseOf(Ctx &c, const TensorRef *t, int64_t rows, float *&lse) {
  lse = nullptr;
  if (!t)
    return Status::ok();
  if (t->dtype != DType::F32 || t->numel() != rows)
    return Status::error("lse must be f32 with one value a query row");
  lse = c.at<float>(*t);
  return Status::ok();
}

Status lowerAttention(Ctx &c) {
  AttentionLayout a;
  int64_t batch;
  FSDP_RETURN_IF_ERROR(attentionLayout(
      c, c.in.in.size() == 4 ? &c.in.in[3] : nullptr, a, batch));
  const TensorRef &y = c.in.out[0];
  if (y.numel() != batch * a.tq * a.dv)
    return Status::error("output does not match q and v");
  float *lse;
  FSDP_RETURN_IF_ERROR(lseOf(c, c.in.out.size() == 2 ? &c.in.out[1] : nullptr,
                             batch * a.tq, lse));
  if (nativeNarrow(c.in)) {
    FlashLayout f = flashLayout(c, a);
    SdpaForward op;
    op.s = sdpaShape(c, f);
    op.q = f.q;
    op.k = f.k;
    op.v = f.v;
    op.o = c.at(y);
    op.lse = lse;
    op.flash = FlashAttention{f, c.at<uint16_t>(y), lse};
    op.flashBlocks = batch * f.tiles(f.tq);
    c.emit(1, op);
    return Status::ok();
  }
  c.emit(batch * a.tq, AttentionRows{a, c.at<float>(y), lse});
  return Status::ok();
}

Status lowerAttentionGrad(Ctx &c) {
  AttentionLayout a;
  int64_t batch;
  size_t n = c.in.in.size();
  FSDP_RETURN_IF_ERROR(attentionLayout(
      c, attentionGradHasMask(n) ? &c.in.in[4] : nullptr, a, batch));
  const TensorRef &dy = c.in.in[3];
  const std::vector<TensorRef> &o = c.in.out;
  if (dy.numel() != batch * a.tq * a.dv || o[0].numel() != c.in.in[0].numel() ||
      o[1].numel() != c.in.in[1].numel() || o[2].numel() != c.in.in[2].numel())
    return Status::error("gradient shapes do not match q, k, v");
  // The forward's output and lse (with_lse), where the plan saved them.
  const TensorRef *out = nullptr;
  float *lse = nullptr;
  if (attentionGradHasSaved(n)) {
    out = &c.in.in[n - 2];
    if (out->numel() != dy.numel() || out->dtype != dy.dtype)
      return Status::error("the saved output does not match the gradient");
    FSDP_RETURN_IF_ERROR(lseOf(c, &c.in.in[n - 1], batch * a.tq, lse));
  }
  // dq and each query row's statistics, then dk and dv by key rows.
  if (nativeNarrow(c.in)) {
    FlashLayout f = flashLayout(c, a);
    float *stats = reinterpret_cast<float *>(c.mem.scratch);
    const uint16_t *g = c.at<uint16_t>(dy);
    FlashAttentionGradQueries queries{f, g, c.at<uint16_t>(o[0]), stats};
    FlashAttentionGradKeys keys{f, g, stats, c.at<uint16_t>(o[1]),
                                c.at<uint16_t>(o[2])};
    if (!out) {
      c.emit(batch * f.tiles(f.tq), queries);
      c.emit(batch / f.nrep * f.tiles(f.tk), keys);
      return Status::ok();
    }
    SdpaBackward op;
    op.s = sdpaShape(c, f);
    op.q = f.q;
    op.k = f.k;
    op.v = f.v;
    op.o = c.at(*out);
    op.dy = g;
    op.lse = lse;
    op.dq = c.at(o[0]);
    op.dk = c.at(o[1]);
    op.dv = c.at(o[2]);
    op.queries = queries;
    op.keys = keys;
    op.queryBlocks = batch * f.tiles(f.tq);
    op.keyBlocks = batch / f.nrep * f.tiles(f.tk);
    c.emit(1, op);
    return Status::ok();
  }
  double *stats = reinterpret_cast<double *>(c.mem.scratch);
  c.emit(batch * a.tq,
         AttentionGradQueryRows{a, c.at<float>(dy), c.at<float>(o[0]), stats});
  c.emit(batch / a.nrep * a.tk,
         AttentionGradKeyRows{a, c.at<float>(dy), stats, c.at<float>(o[1]),
                              c.at<float>(o[2])});
  return Status::ok();
}

} // namespace fsdp::device::lowering
