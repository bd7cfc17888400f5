//===- Contractions.cpp - Matrix products (CPU) ---------------------------===//
//
// Matrix products: matmul (batched, transposed, bf16 where the CPU multiplies
// it) and gemm. (Declared in KernelSupport.h; dispatched by
// runtime/cpu/Kernels.cpp.)
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/kernels/KernelSupport.h"

namespace fsdp::cpu::kernels {

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

/// op(t) as oneDNN's matmul reads it, broadcast to `rank` dimensions.
MatrixView matrixView(const TensorRef &t, bool transposed, int rank) {
  MatrixView v;
  v.rank = rank;
  int r = (int)t.rank();
  int64_t natural[kMaxRank], size = 1;
  for (int i = r - 1; i >= 0; --i) {
    natural[i] = size;
    size *= t.shape[i];
  }
  for (int d = 0; d < rank; ++d) {
    int from = d - (rank - r);
    v.dims[d] = from >= 0 ? t.shape[from] : 1;
    v.strides[d] = from >= 0 ? natural[from] : size;
  }
  if (transposed) {
    std::swap(v.dims[rank - 2], v.dims[rank - 1]);
    std::swap(v.strides[rank - 2], v.strides[rank - 1]);
  }
  return v;
}

/// A matmul on bf16 tensors as they are (runsNarrow): shapes checked as
/// kMatmul checks them.
Status matmulNarrow(const Instruction &in, Context &c, bool ta, bool tb) {
  const TensorRef &a = in.in[0], &b = in.in[1], &y = in.out[0];
  int yr = (int)y.rank();
  if (a.rank() < 2 || b.rank() < 2 || yr < 2 || a.rank() > y.rank() ||
      b.rank() > y.rank())
    return Status::error("expects bf16 operands of rank >= 2");
  MatrixView va = matrixView(a, ta, yr), vb = matrixView(b, tb, yr),
             vy = matrixView(y, false, yr);
  if (va.dims[yr - 1] != vb.dims[yr - 2] ||
      vy.dims[yr - 2] != va.dims[yr - 2] || vy.dims[yr - 1] != vb.dims[yr - 1])
    return Status::error("shapes " + shapeString(a.shape) + " x " +
                         shapeString(b.shape) + " do not give " +
                         shapeString(y.shape));
  for (int d = 0; d < yr - 2; ++d)
    if ((va.dims[d] != vy.dims[d] && va.dims[d] != 1) ||
        (vb.dims[d] != vy.dims[d] && vb.dims[d] != 1))
      return Status::error("batch dimensions do not broadcast");
  MatrixView vbias;
  if (in.in.size() == 3) {
    const TensorRef &t = in.in[2];
    if (t.rank() != 1 || t.shape[0] != vy.dims[yr - 1])
      return Status::error("bias " + shapeString(t.shape) +
                           " is not one per column of " + shapeString(y.shape));
    vbias = matrixView(t, false, yr);
  }
  if (y.numel() == 0 || va.dims[yr - 1] == 0) {
    // An empty product: the bias, or zeros (oneDNN's primitive refuses it).
    int64_t n = vy.dims[yr - 1], width = dtypeSize(y.dtype);
    uint8_t *out = static_cast<uint8_t *>(c.data(y));
    const uint8_t *bias = in.in.size() == 3
                              ? static_cast<const uint8_t *>(c.data(in.in[2]))
                              : nullptr;
    for (int64_t i = 0; n > 0 && i < y.numel(); ++i)
      if (bias)
        std::memcpy(out + i * width, bias + (i % n) * width, width);
      else
        std::memset(out + i * width, 0, width);
    return Status::ok();
  }
  return matmulOneDnn(
      true, va, vb, in.in.size() == 3 ? &vbias : nullptr, vy, c.data(a),
      c.data(b), in.in.size() == 3 ? c.data(in.in[2]) : nullptr, c.data(y));
}

Status kMatmul(const Instruction &in, Context &c) {
  if (in.out.size() == 2) {
    // lhs_sums: the product, then the sums as the reduction computed them.
    Instruction product, sums;
    FSDP_RETURN_IF_ERROR(splitLhsSums(in, product, sums));
    FSDP_RETURN_IF_ERROR(kMatmul(product, c));
    return kReduceSum(sums, c);
  }
  const TensorRef &a = in.in[0], &b = in.in[1], &y = in.out[0];
  bool ta = attrBool(in, "transpose_lhs", false),
       tb = attrBool(in, "transpose_rhs", false);
  if (runsNarrow(in))
    return matmulNarrow(in, c, ta, tb);
  if (a.rank() < 2 || b.rank() < 2 || y.rank() < 2 || a.dtype != DType::F32 ||
      b.dtype != DType::F32 || y.dtype != DType::F32)
    return Status::error("expects f32 operands of rank >= 2");
  int64_t ar = a.rank(), br = b.rank(), yr = y.rank();
  int64_t m = ta ? a.shape[ar - 1] : a.shape[ar - 2];
  int64_t k = ta ? a.shape[ar - 2] : a.shape[ar - 1];
  int64_t kb = tb ? b.shape[br - 1] : b.shape[br - 2];
  int64_t n = tb ? b.shape[br - 2] : b.shape[br - 1];
  if (k != kb || y.shape[yr - 2] != m || y.shape[yr - 1] != n)
    return Status::error("shapes " + shapeString(a.shape) + " x " +
                         shapeString(b.shape) + " do not give " +
                         shapeString(y.shape));
  Shape batch(y.shape.begin(), y.shape.end() - 2);
  Shape abatch(a.shape.begin(), a.shape.end() - 2),
      bbatch(b.shape.begin(), b.shape.end() - 2);
  Shape sa, sb;
  if (!broadcastStrides(abatch, batch, sa) ||
      !broadcastStrides(bbatch, batch, sb))
    return Status::error("batch dimensions do not broadcast");
  const float *bias = nullptr;
  if (in.in.size() == 3) {
    const TensorRef &t = in.in[2];
    if (t.dtype != DType::F32 || t.rank() != 1 || t.shape[0] != n)
      return Status::error("bias " + shapeString(t.shape) +
                           " is not one f32 "
                           "per column of " +
                           shapeString(y.shape));
    bias = c.get<float>(t);
  }
  const float *pa = c.get<float>(a), *pb = c.get<float>(b);
  float *py = c.get<float>(y);
  if (m == 0 || n == 0 || k == 0) {
    // An empty product (OpInfo's [S, 0] x [0, M]): the bias, or zeros.
    // oneDNN's matmul primitive refuses such shapes and its sgemm crashed.
    int64_t rows = y.numel() / std::max<int64_t>(n, 1);
    for (int64_t r = 0; n > 0 && r < rows; ++r)
      for (int64_t j = 0; j < n; ++j)
        py[r * n + j] = bias ? bias[j] : 0.0f;
    return Status::ok();
  }
  int64_t amat = a.shape[ar - 2] * a.shape[ar - 1],
          bmat = b.shape[br - 2] * b.shape[br - 1];
  int64_t nb = product(batch);
  // The bias first, then C = A B + C (beta 1): the GEMM's sum and the bias
  // rounded once, as a GPU's bias epilogue does.
  auto biasRows = [&](float *out, int64_t rows) {
#pragma omp parallel for if (rows * n > kParallelMin)
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(out + r * n, bias, n * sizeof(float));
  };
  float beta = bias ? 1.0f : 0.0f;
  // One product: a single matrix, or a batch of A's (not transposed, not
  // broadcast) against one shared B, whose rows are one [nb * m, k] matrix
  // (nn.Linear on [B, T, d] activations): one product on all the threads,
  // not nb of them split one per thread.
  bool sharedB =
      std::all_of(sb.begin(), sb.end(), [](int64_t s) { return s == 0; }) &&
      !ta && abatch == batch;
  if (nb == 1 || sharedB) {
    int64_t rows = nb * m, lda = a.shape[ar - 1], ldb = b.shape[br - 1];
    if (preferMatmulPrimitive(ta, tb, n, k)) {
      // As 2-D matrices: op(A) [rows, k], op(B) [k, n], the bias a row.
      auto view = [](int64_t r, int64_t c, int64_t ld, bool transposed) {
        MatrixView v;
        v.rank = 2;
        v.dims[0] = r;
        v.dims[1] = c;
        v.strides[0] = transposed ? 1 : ld;
        v.strides[1] = transposed ? ld : 1;
        return v;
      };
      MatrixView vbias = view(1, n, n, false);
      return matmulOneDnn(false, view(rows, k, lda, ta), view(k, n, ldb, tb),
                          bias ? &vbias : nullptr, view(rows, n, n, false), pa,
                          pb, bias, py);
    }
    if (bias)
      biasRows(py, rows);
    sgemm(ta, tb, rows, n, k, 1.0f, pa, lda, pb, ldb, beta, py);
    return Status::ok();
  }
  // Many products: one per thread at a time.
#pragma omp parallel for
  for (int64_t i = 0; i < nb; ++i) {
    int64_t oa = 0, ob = 0, rest = i;
    for (int64_t d = (int64_t)batch.size() - 1; d >= 0; --d) {
      int64_t idx = rest % batch[d];
      rest /= batch[d];
      oa += idx * sa[d];
      ob += idx * sb[d];
    }
    if (bias)
      biasRows(py + i * m * n, m);
    sgemmSerial(ta, tb, m, n, k, 1.0f, pa + oa * amat, a.shape[ar - 1],
                pb + ob * bmat, b.shape[br - 1], beta, py + i * m * n);
  }
  return Status::ok();
}

Status kGemm(const Instruction &in, Context &c) {
  const TensorRef &a = in.in[0], &b = in.in[1], &y = in.out[0];
  bool ta = attrBool(in, "trans_a", false), tb = attrBool(in, "trans_b", false);
  float alpha = (float)attrFloat(in, "alpha", 1.0),
        beta = (float)attrFloat(in, "beta", 1.0);
  if (a.rank() != 2 || b.rank() != 2 || y.rank() != 2)
    return Status::error("expects 2-D operands");
  int64_t m = ta ? a.shape[1] : a.shape[0], k = ta ? a.shape[0] : a.shape[1];
  int64_t kb = tb ? b.shape[1] : b.shape[0], n = tb ? b.shape[0] : b.shape[1];
  if (k != kb || Shape(y.shape) != Shape{m, n})
    return Status::error("shapes " + shapeString(a.shape) + " x " +
                         shapeString(b.shape) + " do not give " +
                         shapeString(y.shape));
  float *py = c.get<float>(y);
  float betaNow = 0.0f;
  if (in.in.size() == 3) {
    const TensorRef &bias = in.in[2];
    Shape sc;
    if (!broadcastStrides(bias.shape, y.shape, sc))
      return Status::error("bias " + shapeString(bias.shape) +
                           " does not broadcast");
    const float *pc = c.get<float>(bias);
    forEach(y.shape, {&sc},
            [&](int64_t i, const int64_t *off) { py[i] = beta * pc[off[0]]; });
    betaNow = 1.0f;
  }
  sgemm(ta, tb, m, n, k, alpha, c.get<float>(a), a.shape[1], c.get<float>(b),
        b.shape[1], betaNow, py);
  return Status::ok();
}

} // namespace fsdp::cpu::kernels
