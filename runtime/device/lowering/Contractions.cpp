//===- Contractions.cpp - Products, convolutions (device lowering) --------===//
//
// Matrix products, convolutions, pools, batch norm as device operations
// (declared in LoweringSupport.h; found through common/Ops.def by
// runtime/device/Lowering.cpp).
//
//===----------------------------------------------------------------------===//
#include "runtime/device/lowering/LoweringSupport.h"

namespace fsdp::device::lowering {

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

/// Products over y's batch dimensions, with a and b broadcast to them: one
/// strided batch where each operand advances by a fixed stride, else one
/// product per batch element.
Status batchedGemm(Ctx &c, Gemm g, const Dims &batch, const Dims &abatch,
                   const Dims &bbatch, int64_t amat, int64_t bmat) {
  Strided sa;
  if (!broadcastIndex(batch, {&abatch, &bbatch}, sa))
    return Status::error("batch dimensions do not broadcast");
  int64_t nb = product(batch);
  std::vector<int64_t> oa(nb), ob(nb);
  for (int64_t i = 0; i < nb; ++i) {
    int64_t off[2];
    sa.offsets(i, off, 2);
    oa[i] = off[0] * amat;
    ob[i] = off[1] * bmat;
  }
  auto linear = [&](const std::vector<int64_t> &o) {
    for (int64_t i = 1; i < nb; ++i)
      if (o[i] - o[i - 1] != o[1] - o[0])
        return false;
    return true;
  };
  if (nb <= 1 || (linear(oa) && linear(ob))) {
    g.batch = std::max<int64_t>(nb, 1);
    g.strideA = nb > 1 ? oa[1] - oa[0] : 0;
    g.strideB = nb > 1 ? ob[1] - ob[0] : 0;
    g.strideC = g.m * g.n;
    c.emit(1, g);
    return Status::ok();
  }
  int64_t size = dtypeSize(static_cast<DType>(g.type));
  for (int64_t i = 0; i < nb; ++i) {
    Gemm one = g;
    one.a = static_cast<const uint8_t *>(g.a) + oa[i] * size;
    one.b = static_cast<const uint8_t *>(g.b) + ob[i] * size;
    one.c = static_cast<uint8_t *>(g.c) + i * g.m * g.n * size;
    one.batch = 1;
    c.emit(1, one);
  }
  return Status::ok();
}

/// A matmul with lhs_sums: one GEMM whose epilogue sums op(lhs)'s rows
/// where the library can (the CUDA device: cuBLASLt's BGRADB), and the
/// reduce_sum the sums replaced, lowered as its own row would be, for the
/// devices that cannot (the host emulation: always).
Status lowerMatmulWithSums(Ctx &c) {
  Instruction product, sums;
  FSDP_RETURN_IF_ERROR(splitLhsSums(c.in, product, sums));
  std::vector<DeviceOp> gemm, fallback;
  FSDP_RETURN_IF_ERROR(lower(product, c.mem, c.comm, gemm));
  FSDP_RETURN_IF_ERROR(lower(sums, c.mem, c.comm, fallback));
  Gemm *g = gemm.size() == 1 ? std::get_if<Gemm>(&gemm[0].kernel) : nullptr;
  if (!g || g->batch != 1) // a product the GEMM library does not take alone
    return Status::error("lhs_sums needs one 2-D product");
  g->sums = c.mem.at(sums.out[0]);
  g->sumsFallback =
      std::make_shared<const std::vector<DeviceOp>>(std::move(fallback));
  c.out.push_back(std::move(gemm[0]));
  return Status::ok();
}

Status lowerMatmul(Ctx &c) {
  if (c.in.out.size() == 2)
    return lowerMatmulWithSums(c);
  const TensorRef &a = c.in.in[0], &b = c.in.in[1], &y = c.in.out[0];
  Gemm g;
  g.ta = c.attrBool("transpose_lhs", false);
  g.tb = c.attrBool("transpose_rhs", false);
  if (a.rank() < 2 || b.rank() < 2 || y.rank() < 2 || !gemmType(y.dtype) ||
      a.dtype != y.dtype || b.dtype != y.dtype)
    return Status::error(
        "expects f32, bf16 or f16 operands of one dtype and rank >= 2");
  g.type = elemOf(y.dtype);
  int64_t ar = a.rank(), br = b.rank(), yr = y.rank();
  g.m = g.ta ? a.shape[ar - 1] : a.shape[ar - 2];
  g.k = g.ta ? a.shape[ar - 2] : a.shape[ar - 1];
  int64_t kb = g.tb ? b.shape[br - 1] : b.shape[br - 2];
  g.n = g.tb ? b.shape[br - 2] : b.shape[br - 1];
  if (g.k != kb || y.shape[yr - 2] != g.m || y.shape[yr - 1] != g.n)
    return Status::error("shapes " + shapeString(a.shape) + " x " +
                         shapeString(b.shape) + " do not give " +
                         shapeString(y.shape));
  if (c.in.in.size() == 3) {
    const TensorRef &bias = c.in.in[2];
    if (bias.dtype != y.dtype || bias.rank() != 1 || bias.shape[0] != g.n)
      return Status::error("bias " + shapeString(bias.shape) +
                           " is not one value per column of " +
                           shapeString(y.shape));
    g.bias = c.mem.at(bias);
  }
  g.a = c.mem.at(a);
  g.b = c.mem.at(b);
  g.c = c.mem.at(y);
  g.lda = a.shape[ar - 1];
  g.ldb = b.shape[br - 1];
  g.ldc = g.n;
  Dims batch(y.shape.begin(), y.shape.end() - 2),
      abatch(a.shape.begin(), a.shape.end() - 2),
      bbatch(b.shape.begin(), b.shape.end() - 2);
  if (!g.ta && product(bbatch) == 1 && abatch == batch) {
    // Rows times one matrix (nn.Linear): a single [rows, k] product.
    g.m *= product(batch);
    c.emit(1, g);
    return Status::ok();
  }
  return batchedGemm(c, g, batch, abatch, bbatch,
                     a.shape[ar - 2] * a.shape[ar - 1],
                     b.shape[br - 2] * b.shape[br - 1]);
}

Status lowerGemm(Ctx &c) {
  const TensorRef &a = c.in.in[0], &b = c.in.in[1], &y = c.in.out[0];
  Gemm g;
  g.ta = c.attrBool("trans_a", false);
  g.tb = c.attrBool("trans_b", false);
  g.alpha = (float)c.attrFloat("alpha", 1.0);
  float beta = (float)c.attrFloat("beta", 1.0);
  if (a.rank() != 2 || b.rank() != 2 || y.rank() != 2 ||
      a.dtype != DType::F32 || b.dtype != DType::F32 || y.dtype != DType::F32)
    return Status::error("expects 2-D f32 operands");
  g.m = g.ta ? a.shape[1] : a.shape[0];
  g.k = g.ta ? a.shape[0] : a.shape[1];
  int64_t kb = g.tb ? b.shape[1] : b.shape[0];
  g.n = g.tb ? b.shape[0] : b.shape[1];
  if (g.k != kb || y.shape != Dims{g.m, g.n})
    return Status::error("shapes " + shapeString(a.shape) + " x " +
                         shapeString(b.shape) + " do not give " +
                         shapeString(y.shape));
  if (c.in.in.size() == 3) {
    const TensorRef &bias = c.in.in[2];
    Strided index;
    if (!broadcastIndex(y.shape, {&bias.shape}, index))
      return Status::error("bias " + shapeString(bias.shape) +
                           " does not broadcast");
    c.emit(y.numel(), Scaled{index, beta, c.at<float>(bias), c.at<float>(y)});
    g.beta = 1.0f;
  }
  g.a = c.mem.at(a);
  g.b = c.mem.at(b);
  g.c = c.mem.at(y);
  g.lda = a.shape[1];
  g.ldb = b.shape[1];
  g.ldc = g.n;
  c.emit(1, g);
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Convolution: im2col of the whole batch into scratch, a GEMM per group
// batched over the images, col2im (common/ConvGeometry.h; scratch
// sized by ComputeOps.h's deviceScratchBytes)
//===----------------------------------------------------------------------===//

/// Checks a convolution's operands (one GEMM dtype) and its geometry.
Status convLayout(Ctx &c, const TensorRef &x, const TensorRef &w,
                  const TensorRef &y, ConvGeometry &g) {
  FSDP_RETURN_IF_ERROR(convGeometryOf(c.in, x, w, y, g));
  if (!gemmType(y.dtype))
    return Status::error("expects f32, bf16 or f16 operands");
  return Status::ok();
}

/// A GEMM of one group (operands and strides set by the caller).
Gemm groupGemm(ElemType type, bool ta, bool tb, int64_t m, int64_t n,
               int64_t k) {
  Gemm gm;
  gm.type = type;
  gm.ta = ta;
  gm.tb = tb;
  gm.m = m;
  gm.n = n;
  gm.k = k;
  return gm;
}

Status lowerConv(Ctx &c) {
  const TensorRef &x = c.in.in[0], &w = c.in.in[1], &y = c.in.out[0];
  ConvGeometry g;
  FSDP_RETURN_IF_ERROR(convLayout(c, x, w, y, g));
  int64_t es = dtypeSize(y.dtype), r = g.rows(), p = g.positions(),
          ocg = g.ocg();
  uint8_t *col = c.mem.scratch;
  c.emit(g.groups * r * g.n * p, Im2Col{g, elemOf(x.dtype), c.at(x), col});
  bool bias = c.in.in.size() == 3;
  if (bias) { // y = bias per channel first; the GEMMs add to it
    const TensorRef &b = c.in.in[2];
    if (b.dtype != y.dtype || b.rank() != 1 || b.shape[0] != g.oc)
      return Status::error("bias " + shapeString(b.shape) +
                           " is not one value per output channel");
    Dims src(y.rank(), 0);
    src[1] = 1;
    gatherCopy(c, b, y, src, 0);
  }
  for (int64_t gi = 0; gi < g.groups; ++gi) {
    Gemm gm = groupGemm(elemOf(y.dtype), false, false, ocg, p, r);
    gm.beta = bias ? 1.0f : 0.0f;
    gm.a = c.at<uint8_t>(w) + gi * ocg * r * es;
    gm.lda = r;
    gm.b = col + gi * r * g.n * p * es;
    gm.ldb = g.n * p;
    gm.strideB = p;
    gm.c = c.at<uint8_t>(y) + gi * ocg * p * es;
    gm.ldc = p;
    gm.strideC = g.oc * p;
    gm.batch = g.n;
    c.emit(1, gm);
  }
  return Status::ok();
}

Status lowerConvGradInput(Ctx &c) {
  const TensorRef &dy = c.in.in[0], &w = c.in.in[1], &dx = c.in.out[0];
  ConvGeometry g;
  FSDP_RETURN_IF_ERROR(convLayout(c, dx, w, dy, g));
  int64_t es = dtypeSize(dy.dtype), r = g.rows(), p = g.positions(),
          ocg = g.ocg();
  uint8_t *col = c.mem.scratch;
  for (int64_t gi = 0; gi < g.groups; ++gi) { // columns = wᵀ · dy
    Gemm gm = groupGemm(elemOf(dy.dtype), true, false, r, p, ocg);
    gm.a = c.at<uint8_t>(w) + gi * ocg * r * es;
    gm.lda = r;
    gm.b = c.at<uint8_t>(dy) + gi * ocg * p * es;
    gm.ldb = p;
    gm.strideB = g.oc * p;
    gm.c = col + gi * r * g.n * p * es;
    gm.ldc = g.n * p;
    gm.strideC = p;
    gm.batch = g.n;
    c.emit(1, gm);
  }
  c.emit(dx.numel(),
         Col2Im{g, elemOf(dy.dtype), elemOf(dx.dtype), col, c.at(dx)});
  return Status::ok();
}

Status lowerConvGradWeight(Ctx &c) {
  const TensorRef &x = c.in.in[0], &dy = c.in.in[1], &dw = c.in.out[0];
  ConvGeometry g;
  FSDP_RETURN_IF_ERROR(convLayout(c, x, dw, dy, g));
  int64_t es = dtypeSize(dy.dtype), r = g.rows(), p = g.positions(),
          ocg = g.ocg(), np = g.n * p;
  uint8_t *col = c.mem.scratch;
  // dy regrouped [OC][N][P] after the columns: per group one GEMM whose
  // inner dimension runs over every image's positions.
  uint8_t *regrouped = col + (g.groups * r * np * es + 15) / 16 * 16;
  c.emit(g.groups * r * np, Im2Col{g, elemOf(x.dtype), c.at(x), col});
  StridedCopy s{};
  s.index.rank = 3;
  int64_t dims[3] = {g.oc, g.n, p}, from[3] = {p, g.oc * p, 1},
          to[3] = {np, p, 1};
  for (int d = 0; d < 3; ++d) {
    s.index.dims[d] = dims[d];
    s.index.strides[0][d] = from[d];
    s.index.strides[1][d] = to[d];
  }
  s.elemBytes = es;
  s.x = c.at<uint8_t>(dy);
  s.y = regrouped;
  emitCopy(c, s, dy.numel());
  for (int64_t gi = 0; gi < g.groups; ++gi) { // dw = dy · columnsᵀ
    Gemm gm = groupGemm(elemOf(dy.dtype), false, true, ocg, r, np);
    gm.a = regrouped + gi * ocg * np * es;
    gm.lda = np;
    gm.b = col + gi * r * np * es;
    gm.ldb = np;
    gm.c = c.at<uint8_t>(dw) + gi * ocg * r * es;
    gm.ldc = r;
    c.emit(1, gm);
  }
  return Status::ok();
}

Status lowerPool(Ctx &c) {
  const TensorRef &x = c.in.in[0], &y = c.in.out[0];
  ConvGeometry g;
  bool max = false, includePad = false;
  FSDP_RETURN_IF_ERROR(poolGeometryOf(c.in, x, y, g, max, includePad));
  if (!floating(x.dtype))
    return Status::error("expects float operands");
  c.emit(y.numel(),
         PoolForward{g, max, includePad, elemOf(x.dtype), c.at(x), c.at(y)});
  return Status::ok();
}

Status lowerPoolGrad(Ctx &c) {
  const TensorRef &x = c.in.in[0], &dy = c.in.in[1], &dx = c.in.out[0];
  ConvGeometry g;
  bool max = false, includePad = false;
  FSDP_RETURN_IF_ERROR(poolGeometryOf(c.in, x, dy, g, max, includePad));
  if (!floating(x.dtype) || dx.shape != x.shape || dx.dtype != x.dtype)
    return Status::error("expects float operands, dx shaped as x");
  c.emit(dx.numel(), PoolBackward{g, max, includePad, elemOf(x.dtype), c.at(x),
                                  c.at(dy), c.at(dx)});
  return Status::ok();
}

// Batch norm: a thread per channel walks the channel's elements (simple;
// a block per channel would be faster on a GPU, as layer_norm's are).

/// SyncBatchNorm (sync_group_size): its steps, each followed by the
/// all-reduce (in place, over the world, by the instruction's slot) of the
/// [8, C] sums in scratch it wrote.
Status lowerBatchNormSynced(Ctx &c, BatchNormSyncedChannels k,
                            std::initializer_list<BatchNormStep> steps) {
  int64_t group = c.attrInt("sync_group_size", 0);
  if (group <= 0 || c.comm.size(Group::World) != group)
    return Status::error(
        "sync_group_size " + std::to_string(group) + " differs from the " +
        std::to_string(c.comm.size(Group::World)) + " ranks of the world");
  k.total = k.l.count() * group;
  k.red = reinterpret_cast<float *>(c.mem.scratch); // deviceScratchBytes
  for (BatchNormStep step : steps) {
    k.step = step;
    c.emit(k.l.c, k);
    int64_t first, count;
    batchNormStepSums(step, k.l.c, &first, &count);
    if (count == 0)
      continue;
    Collective op;
    op.in = op.out = k.red + first;
    op.count = count;
    op.slot = c.in.index;
    c.emit(1, op);
    c.emit(1, Wait{c.in.index});
  }
  return Status::ok();
}

Status lowerBatchNorm(Ctx &c) {
  const TensorRef &x = c.in.in[0], &w = c.in.in[1], &b = c.in.in[2],
                  &y = c.in.out[0], &mean = c.in.out[1], &var = c.in.out[2];
  BatchNormLayout l;
  FSDP_RETURN_IF_ERROR(batchNormLayoutOf(x, {&w, &b, &mean, &var}, l));
  if (!floating(x.dtype) || y.shape != x.shape || y.dtype != x.dtype)
    return Status::error("expects float operands, y shaped as x");
  if (c.attrInt("sync_group_size", 0) != 0)
    return lowerBatchNormSynced(
        c,
        BatchNormSyncedChannels{
            BatchNormStep::Sum, l, c.attrFloat("epsilon", 1e-5), 0,
            elemOf(x.dtype), c.at(x), c.at(w), c.at(b), nullptr, c.at(y),
            c.at(mean), c.at(var), nullptr},
        {BatchNormStep::Sum, BatchNormStep::Squares, BatchNormStep::Apply});
  c.emit(l.c, BatchNormChannels{l, c.attrFloat("epsilon", 1e-5),
                                elemOf(x.dtype), c.at(x), c.at(w), c.at(b),
                                c.at(y), c.at(mean), c.at(var)});
  return Status::ok();
}

Status lowerBatchNormGrad(Ctx &c) {
  const TensorRef &x = c.in.in[0], &w = c.in.in[1], &dy = c.in.in[2],
                  &dx = c.in.out[0], &dw = c.in.out[1], &db = c.in.out[2];
  BatchNormLayout l;
  FSDP_RETURN_IF_ERROR(batchNormLayoutOf(x, {&w, &dw, &db}, l));
  if (!floating(x.dtype) || dy.shape != x.shape || dx.shape != x.shape ||
      dy.dtype != x.dtype || dx.dtype != x.dtype)
    return Status::error("expects float operands, dy and dx shaped as x");
  if (c.attrInt("sync_group_size", 0) != 0)
    return lowerBatchNormSynced(
        c,
        BatchNormSyncedChannels{
            BatchNormStep::Sum, l, c.attrFloat("epsilon", 1e-5), 0,
            elemOf(x.dtype), c.at(x), c.at(w), nullptr, c.at(dy), c.at(dx),
            c.at(dw), c.at(db), nullptr},
        {BatchNormStep::Sum, BatchNormStep::Squares, BatchNormStep::GradSums,
         BatchNormStep::GradApply});
  c.emit(l.c, BatchNormGradChannels{l, c.attrFloat("epsilon", 1e-5),
                                    elemOf(x.dtype), c.at(x), c.at(w), c.at(dy),
                                    c.at(dx), c.at(dw), c.at(db)});
  return Status::ok();
}

/// A buffer overwritten: the value cast into the buffer's f32 storage.
Status lowerAssignBuffer(Ctx &c) {
  const TensorRef &v = c.in.in[0];
  int64_t slot = c.attrInt("param", -1);
  if (slot < 0 || slot >= (int64_t)c.mem.params.size() || !floating(v.dtype))
    return Status::error("names no buffer");
  c.emit(v.numel(),
         Cast{elemOf(v.dtype), ElemType::F32, c.at(v), c.mem.params[slot]});
  return Status::ok();
}

} // namespace fsdp::device::lowering
