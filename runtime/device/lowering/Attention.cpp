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

Status attentionLayout(Ctx &c, const TensorRef *mask, AttentionLayout &a,
                       int64_t &batch) {
  const TensorRef &q = c.in.in[0], &k = c.in.in[1], &v = c.in.in[2];
  int64_t r = q.rank();
  if (r < 2 || k.rank() != r || v.rank() != r)
    return Status::error("q, k, v need one rank >= 2");
  a = AttentionLayout{};
  a.tq = q.shape[r - 2];
  a.d = q.shape[r - 1];
  a.tk = k.shape[r - 2];
  a.dv = v.shape[r - 1];
  if (k.shape[r - 1] != a.d || v.shape[r - 2] != a.tk ||
      !std::equal(q.shape.begin(), q.shape.end() - 2, k.shape.begin()) ||
      !std::equal(q.shape.begin(), q.shape.end() - 2, v.shape.begin()))
    return Status::error("q, k, v shapes do not match");
  a.scale = (float)c.attrFloat("scale", 1.0);
  a.causal = c.attrBool("causal", false);
  a.safe = c.attrBool("safe_softmax", false);
  a.average = c.attrBool("average_empty_rows", false);
  a.q = c.at<float>(q);
  a.k = c.at<float>(k);
  a.v = c.at<float>(v);
  batch = product(q.shape, 0, r - 2);
  if (mask) {
    Dims scores(q.shape.begin(), q.shape.end() - 1);
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
      m.batchDims[d] = q.shape[d];
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
  f.q = c.at<uint16_t>(c.in.in[0]);
  f.k = c.at<uint16_t>(c.in.in[1]);
  f.v = c.at<uint16_t>(c.in.in[2]);
  return f;
}

Status lowerAttention(Ctx &c) {
  AttentionLayout a;
  int64_t batch;
  FSDP_RETURN_IF_ERROR(attentionLayout(
      c, c.in.in.size() == 4 ? &c.in.in[3] : nullptr, a, batch));
  const TensorRef &y = c.in.out[0];
  if (y.numel() != batch * a.tq * a.dv)
    return Status::error("output does not match q and v");
  if (nativeNarrow(c.in)) {
    FlashLayout f = flashLayout(c, a);
    c.emit(batch * f.tiles(f.tq), FlashAttention{f, c.at<uint16_t>(y)});
    return Status::ok();
  }
  c.emit(batch * a.tq, AttentionRows{a, c.at<float>(y)});
  return Status::ok();
}

Status lowerAttentionGrad(Ctx &c) {
  AttentionLayout a;
  int64_t batch;
  FSDP_RETURN_IF_ERROR(attentionLayout(
      c, c.in.in.size() == 5 ? &c.in.in[4] : nullptr, a, batch));
  const TensorRef &dy = c.in.in[3];
  const std::vector<TensorRef> &o = c.in.out;
  if (dy.numel() != batch * a.tq * a.dv || o[0].numel() != c.in.in[0].numel() ||
      o[1].numel() != c.in.in[1].numel() || o[2].numel() != c.in.in[2].numel())
    return Status::error("gradient shapes do not match q, k, v");
  // dq and each query row's statistics, then dk and dv by key rows.
  if (nativeNarrow(c.in)) {
    FlashLayout f = flashLayout(c, a);
    float *stats = reinterpret_cast<float *>(c.mem.scratch);
    const uint16_t *g = c.at<uint16_t>(dy);
    c.emit(batch * f.tiles(f.tq),
           FlashAttentionGradQueries{f, g, c.at<uint16_t>(o[0]), stats});
    c.emit(batch * f.tiles(f.tk),
           FlashAttentionGradKeys{f, g, stats, c.at<uint16_t>(o[1]),
                                  c.at<uint16_t>(o[2])});
    return Status::ok();
  }
  double *stats = reinterpret_cast<double *>(c.mem.scratch);
  c.emit(batch * a.tq,
         AttentionGradQueryRows{a, c.at<float>(dy), c.at<float>(o[0]), stats});
  c.emit(batch * a.tk,
         AttentionGradKeyRows{a, c.at<float>(dy), stats, c.at<float>(o[1]),
                              c.at<float>(o[2])});
  return Status::ok();
}

} // namespace fsdp::device::lowering
