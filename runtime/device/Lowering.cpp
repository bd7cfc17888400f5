//===- Lowering.cpp - A plan's instructions as device operations ----------===//
//
// One function per op, in the order of runtime/cpu/Kernels.cpp, with the
// same checks and the same arithmetic (the functors of DeviceKernels.h are
// the CPU kernels' math, one element at a time).
//
//===----------------------------------------------------------------------===//
#include "runtime/device/Lowering.h"
#include "runtime/device/KernelShapes.h"
#include "runtime/plan/OpShapes.h"
#include "runtime/plan/Widen.h"

#include <map>
#include <string>

namespace fsdp::device {

void *Memory::at(const TensorRef &t) const {
  return tensorAddress(t, arena, params, constants, grads, widened);
}

namespace {

struct Ctx {
  const Instruction &in;
  const Memory &mem;
  const Comm &comm;
  std::vector<DeviceOp> &out;

  template <typename T = void> T *at(const TensorRef &t) const {
    return static_cast<T *>(mem.at(t));
  }
  template <typename K> void emit(int64_t n, K k) {
    out.push_back({n, Kernel(std::move(k))});
  }
  int64_t attrInt(const char *name, int64_t dflt) const {
    return in.attrInt(name, dflt);
  }
  double attrFloat(const char *name, double dflt) const {
    return in.attrFloat(name, dflt);
  }
  bool attrBool(const char *name, bool dflt) const {
    return in.attrBool(name, dflt);
  }
  std::string attrString(const char *name, const char *dflt) const {
    return in.attrString(name, dflt);
  }
  Dims attrInts(const char *name) const {
    Dims v;
    auto it = in.attrs.find(name);
    if (it != in.attrs.end() && it->is_array())
      for (const auto &x : *it)
        if (x.is_number_integer())
          v.push_back(x.get<int64_t>());
    return v;
  }
};

using Lowerer = Status (*)(Ctx &);

bool nativeNarrow(const Instruction &in);

/// The shapes of `in`'s operands, as runtime/plan/ComputeOps.h takes them.
std::vector<std::vector<int64_t>> shapesOf(const std::vector<TensorRef> &ts) {
  std::vector<std::vector<int64_t>> shapes;
  for (const TensorRef &t : ts)
    shapes.emplace_back(t.shape.begin(), t.shape.end());
  return shapes;
}
std::vector<std::vector<int64_t>> operandShapes(const Instruction &in) {
  return shapesOf(in.in);
}

ElemType elemOf(DType t) { return static_cast<ElemType>(t); }

void copy(Ctx &c, const TensorRef &from, const TensorRef &to) {
  const void *src = c.at(from);
  void *dst = c.at(to);
  if (src != dst && from.bytes() > 0)
    c.emit(1, Copy{src, dst, from.bytes()});
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

bool floating(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::F16;
}

Status unary(Ctx &c, UnaryKind kind) {
  const TensorRef &x = c.in.in[0], &y = c.in.out[0];
  if (x.shape != y.shape || !floating(x.dtype) || !floating(y.dtype))
    return Status::error("expects float input and output of one shape");
  c.emit(y.numel(),
         Unary{kind, c.at(x), c.at(y), elemOf(x.dtype), elemOf(y.dtype)});
  return Status::ok();
}

Status lowerNot(Ctx &c) {
  const TensorRef &x = c.in.in[0], &y = c.in.out[0];
  if (x.shape != y.shape || x.dtype != DType::I1 || y.dtype != DType::I1)
    return Status::error("expects i1 input and output of one shape");
  c.emit(y.numel(), LogicalNot{c.at<uint8_t>(x), c.at<uint8_t>(y)});
  return Status::ok();
}

Status binary(Ctx &c, BinaryKind kind) {
  const TensorRef &a = c.in.in[0], &b = c.in.in[1], &y = c.in.out[0];
  Strided index;
  if (!broadcastIndex(y.shape, {&a.shape, &b.shape}, index))
    return Status::error("operands " + shapeString(a.shape) + " and " +
                         shapeString(b.shape) + " do not broadcast to " +
                         shapeString(y.shape));
  if (floating(a.dtype) && floating(b.dtype) && floating(y.dtype))
    c.emit(y.numel(),
           Binary{kind, index, c.at(a), c.at(b), c.at(y), elemOf(a.dtype),
                  elemOf(b.dtype), elemOf(y.dtype)});
  else
    c.emit(y.numel(), BinaryMixed{kind, index, elemOf(a.dtype), elemOf(b.dtype),
                                  elemOf(y.dtype), c.at(a), c.at(b), c.at(y)});
  return Status::ok();
}

Status lowerWhere(Ctx &c) {
  const TensorRef &cond = c.in.in[0], &x = c.in.in[1], &yv = c.in.in[2],
                  &out = c.in.out[0];
  Strided index;
  if (cond.dtype != DType::I1 || x.dtype != out.dtype ||
      yv.dtype != out.dtype ||
      !broadcastIndex(out.shape, {&cond.shape, &x.shape, &yv.shape}, index))
    return Status::error("operands do not broadcast to " +
                         shapeString(out.shape));
  c.emit(out.numel(),
         Select{index, dtypeSize(out.dtype), c.at<uint8_t>(cond),
                c.at<uint8_t>(x), c.at<uint8_t>(yv), c.at<uint8_t>(out)});
  return Status::ok();
}

Status lowerCast(Ctx &c) {
  const TensorRef &x = c.in.in[0], &y = c.in.out[0];
  if (x.numel() != y.numel())
    return Status::error("changes the element count");
  c.emit(y.numel(), Cast{elemOf(x.dtype), elemOf(y.dtype), c.at(x), c.at(y)});
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

/// Products over y's batch dimensions, with a and b broadcast to them: one
/// strided batch where each operand advances by a fixed stride, else one
/// product per batch element.
bool gemmType(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::F16;
}

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

Status lowerMatmul(Ctx &c) {
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
// batched over the images, col2im (runtime/plan/ConvGeometry.h; scratch
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

void gatherCopy(Ctx &c, const TensorRef &x, const TensorRef &y,
                const Dims &srcStrides, int64_t base);

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
  c.emit(dy.numel(), s);
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
    return Status::error("sync_group_size " + std::to_string(group) +
                         " differs from the " +
                         std::to_string(c.comm.size(Group::World)) +
                         " ranks of the world");
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
        BatchNormSyncedChannels{BatchNormStep::Sum, l, c.attrFloat("epsilon", 1e-5),
                                0, elemOf(x.dtype), c.at(x), c.at(w), c.at(b),
                                nullptr, c.at(y), c.at(mean), c.at(var)},
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
        BatchNormSyncedChannels{BatchNormStep::Sum, l, c.attrFloat("epsilon", 1e-5),
                                0, elemOf(x.dtype), c.at(x), c.at(w), nullptr,
                                c.at(dy), c.at(dx), c.at(dw), c.at(db)},
        {BatchNormStep::Sum, BatchNormStep::Squares, BatchNormStep::GradSums,
         BatchNormStep::GradApply});
  c.emit(l.c, BatchNormGradChannels{l, c.attrFloat("epsilon", 1e-5),
                                    elemOf(x.dtype), c.at(x), c.at(w),
                                    c.at(dy), c.at(dx), c.at(dw), c.at(db)});
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
  if (kept != y.numel() || !floating(x.dtype) || !floating(y.dtype))
    return Status::error("output " + shapeString(y.shape) +
                         " does not match the reduction");
  // bf16/f16 read and written as they are (sums in double, one rounding).
  r.x = c.at(x);
  r.y = c.at(y);
  r.tx = elemOf(x.dtype);
  r.ty = elemOf(y.dtype);
  // Few outputs (a bias gradient): each sum split into chunks whose
  // partial sums (scratch) are combined in chunk order.
  int64_t chunks = reduceChunks(r.count, y.numel());
  if (chunks <= 1) {
    c.emit(y.numel(), r);
    return Status::ok();
  }
  r.chunks = chunks;
  r.chunkLen = (r.count + chunks - 1) / chunks;
  r.outputs = y.numel();
  r.partial = reinterpret_cast<double *>(c.mem.scratch);
  c.emit(chunks * y.numel(), r);
  c.emit(y.numel(), ReduceCombine{kind, chunks, y.numel(), r.count, r.partial,
                                  r.y, r.ty});
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
  c.emit(rows,
         LayerNormRows{cols, eps, c.at(x), c.at(w),
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
  c.emit(cols, LayerNormGradCols{rows, cols, c.at(x), c.at(g), stats, c.at(dw),
                                 db ? c.at(*db) : nullptr, elemOf(x.dtype),
                                 elemOf(g.dtype), elemOf(dw.dtype)});
  return Status::ok();
}

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

//===----------------------------------------------------------------------===//
// Indexing and losses
//===----------------------------------------------------------------------===//

Status lowerGather(Ctx &c) {
  const TensorRef &data = c.in.in[0], &idx = c.in.in[1], &y = c.in.out[0];
  int64_t axis = c.attrInt("axis", 0);
  if (axis < 0 || axis >= data.rank() || idx.dtype != DType::I64 ||
      data.dtype != y.dtype)
    return Status::error("bad axis or dtypes");
  int64_t outer = product(data.shape, 0, axis), dim = data.shape[axis],
          inner = product(data.shape, axis + 1), count = idx.numel();
  if (y.numel() != outer * count * inner)
    return Status::error("output " + shapeString(y.shape) + " does not match");
  c.emit(y.numel(),
         Gather{dim, inner, count, dtypeSize(data.dtype), c.at<uint8_t>(data),
                c.at<int64_t>(idx), c.at<uint8_t>(y), c.mem.error});
  return Status::ok();
}

Status lowerScatterAdd(Ctx &c) {
  const TensorRef &dest = c.in.in[0], &idx = c.in.in[1], &upd = c.in.in[2],
                  &y = c.in.out[0];
  int64_t axis = c.attrInt("axis", 0);
  if (axis < 0 || axis >= dest.rank() || dest.shape != y.shape ||
      idx.dtype != DType::I64 || dest.dtype != DType::F32 ||
      upd.dtype != DType::F32)
    return Status::error("bad axis or shapes");
  int64_t outer = product(dest.shape, 0, axis), dim = dest.shape[axis],
          inner = product(dest.shape, axis + 1), count = idx.numel();
  if (upd.numel() != outer * count * inner)
    return Status::error("updates " + shapeString(upd.shape) + " do not match");
  copy(c, dest, y);
  c.emit(upd.numel(),
         ScatterAdd{dim, inner, count, c.at<float>(upd), c.at<int64_t>(idx),
                    c.at<float>(y), c.mem.error});
  return Status::ok();
}

/// Cross-entropy layout: input [N, C, d...], targets [N, d...], an optional
/// class weight after the targets (and the incoming gradient).
Status lossLayout(Ctx &c, bool softmax, LossLayout &l, int64_t &positions) {
  const TensorRef &x = c.in.in[0], &t = c.in.in[1];
  if (x.rank() < 2 || t.dtype != DType::I64 || !gemmType(x.dtype) ||
      t.numel() * x.shape[1] != x.numel())
    return Status::error("input " + shapeString(x.shape) + " and target " +
                         shapeString(t.shape) + " do not match");
  size_t wi = c.in.op == "cross_entropy" || c.in.op == "nll_loss" ? 2 : 3;
  const TensorRef *weight = c.in.in.size() > wi ? &c.in.in[wi] : nullptr;
  if (weight && (weight->numel() != x.shape[1] || weight->dtype != DType::F32))
    return Status::error("class weight " + shapeString(weight->shape) +
                         " does not match " + std::to_string(x.shape[1]) +
                         " classes");
  l = LossLayout{};
  l.classes = x.shape[1];
  l.inner = product(x.shape, 2);
  l.softmax = softmax;
  l.hasIgnore = c.in.attrs.contains("ignore_index");
  l.ignore = c.attrInt("ignore_index", 0);
  l.weight = weight ? c.at<float>(*weight) : nullptr;
  l.type = elemOf(x.dtype);
  positions = t.numel();
  return Status::ok();
}

LossReduction reductionOf(const std::string &r) {
  return r == "none"  ? LossReduction::None
         : r == "sum" ? LossReduction::Sum
                      : LossReduction::Mean;
}

/// The terms, their weights (doubles) and the total weight, in scratch.
struct LossScratch {
  double *term, *weight, *total;
  float *sink; // LossReduce's output when only the total is wanted
};
LossScratch lossScratch(const Memory &mem, int64_t positions) {
  double *base = reinterpret_cast<double *>(mem.scratch);
  return {base, base + positions, base + 2 * positions,
          reinterpret_cast<float *>(base + 2 * positions + 1)};
}

Status classificationLoss(Ctx &c, bool softmax) {
  const TensorRef &y = c.in.out[0];
  std::string reduction = c.attrString("reduction", "mean");
  LossLayout l;
  int64_t n;
  FSDP_RETURN_IF_ERROR(lossLayout(c, softmax, l, n));
  if (reduction == "none" && y.numel() != n)
    return Status::error("output does not match the targets");
  if (reduction != "none" && y.numel() != 1)
    return Status::error("a reduced loss is a scalar");
  LossScratch s = lossScratch(c.mem, n);
  if (y.dtype != DType::F32)
    return Status::error("the loss is f32");
  c.emit(n, LossTerms{l, c.at(c.in.in[0]), c.at<int64_t>(c.in.in[1]), s.term,
                      s.weight, c.mem.error});
  c.emit(1, LossReduce{reductionOf(reduction), n, s.term, s.weight,
                       c.at<float>(y), s.total});
  return Status::ok();
}

Status lowerCrossEntropy(Ctx &c) { return classificationLoss(c, true); }
Status lowerNllLoss(Ctx &c) { return classificationLoss(c, false); }

/// The gradient: cross_entropy_grad's output, cross_entropy_with_grad's
/// second. `totalKnown`: the loss's LossReduce has left the total weight in
/// the scratch already.
Status crossEntropyGrad(Ctx &c, bool totalKnown) {
  const TensorRef &x = c.in.in[0], &g = c.in.in[2], &y = c.in.out.back();
  bool softmax = c.attrString("kind", "softmax") == "softmax";
  std::string reduction = c.attrString("reduction", "mean");
  if (x.shape != y.shape || x.dtype != y.dtype || x.rank() < 2 ||
      g.dtype != DType::F32)
    return Status::error("output does not match the input");
  LossLayout l;
  int64_t n;
  FSDP_RETURN_IF_ERROR(lossLayout(c, softmax, l, n));
  LossScratch s = lossScratch(c.mem, n);
  // The total weight first (for mean: the terms without their
  // log-sum-exp, which is all LossTerms reads the rows for), then the
  // gradient rows.
  if (!totalKnown) {
    LossLayout weights = l;
    weights.softmax = false;
    c.emit(n, LossTerms{weights, c.at(x), c.at<int64_t>(c.in.in[1]), s.term,
                        s.weight, c.mem.error});
    c.emit(1, LossReduce{LossReduction::Sum, n, s.term, s.weight, s.sink,
                         s.total});
  }
  c.emit(n, LossGradRows{l, reductionOf(reduction), c.at(x), c.at<float>(g),
                         c.at<int64_t>(c.in.in[1]), s.total, c.at(y)});
  return Status::ok();
}

Status lowerCrossEntropyGrad(Ctx &c) { return crossEntropyGrad(c, false); }

/// The loss, then the gradient rows with the loss's total weight: the
/// logits read twice (each kernel computes a row's log-sum-exp as its block
/// reduces it), not the CPU's once, and the targets' weights summed once.
Status lowerCrossEntropyWithGrad(Ctx &c) {
  FSDP_RETURN_IF_ERROR(classificationLoss(c, true));
  return crossEntropyGrad(c, true);
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

Status lowerReshape(Ctx &c) {
  if (c.in.in[0].bytes() != c.in.out[0].bytes())
    return Status::error("changes the size");
  copy(c, c.in.in[0], c.in.out[0]);
  return Status::ok();
}

/// y (contiguous) = x read at base + sum(index[d] * srcStrides[d]).
void gatherCopy(Ctx &c, const TensorRef &x, const TensorRef &y,
                const Dims &srcStrides, int64_t base) {
  StridedCopy s{};
  s.index.rank = (int)y.rank();
  Dims dst = contiguousStrides(y.shape);
  for (int64_t d = 0; d < y.rank(); ++d) {
    s.index.dims[d] = y.shape[d];
    s.index.strides[0][d] = srcStrides[d];
    s.index.strides[1][d] = dst[d];
  }
  s.elemBytes = dtypeSize(x.dtype);
  s.srcBase = base;
  s.x = c.at<uint8_t>(x);
  s.y = c.at<uint8_t>(y);
  c.emit(y.numel(), s);
}

Status lowerTranspose(Ctx &c) {
  const TensorRef &x = c.in.in[0], &y = c.in.out[0];
  Dims perm = c.attrInts("perm");
  if ((int64_t)perm.size() != x.rank() || y.rank() != x.rank() ||
      x.dtype != y.dtype || x.rank() > kMaxDims)
    return Status::error("bad permutation");
  std::vector<bool> seen(perm.size());
  Dims xs = contiguousStrides(x.shape), src(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) {
    if (perm[d] < 0 || perm[d] >= x.rank() || seen[perm[d]] ||
        y.shape[d] != x.shape[perm[d]])
      return Status::error("bad permutation");
    seen[perm[d]] = true;
    src[d] = xs[perm[d]];
  }
  gatherCopy(c, x, y, src, 0);
  return Status::ok();
}

/// Checks a strided box of `x` with the extents of `box`.
Status checkBox(const TensorRef &x, const Dims &box, const Dims &starts,
                const Dims &steps) {
  if ((int64_t)box.size() != x.rank() || starts.size() != box.size() ||
      steps.size() != box.size() || x.rank() > kMaxDims)
    return Status::error("needs one start and stride per dimension");
  for (int64_t d = 0; d < x.rank(); ++d)
    if (starts[d] < 0 || steps[d] <= 0 ||
        (box[d] > 0 && starts[d] + (box[d] - 1) * steps[d] >= x.shape[d]))
      return Status::error("box outside " + shapeString(x.shape));
  return Status::ok();
}

Status lowerSlice(Ctx &c) {
  const TensorRef &x = c.in.in[0], &y = c.in.out[0];
  Dims starts = c.attrInts("starts"), steps = c.attrInts("strides");
  FSDP_RETURN_IF_ERROR(checkBox(x, y.shape, starts, steps));
  if (x.dtype != y.dtype)
    return Status::error("changes the dtype");
  Dims xs = contiguousStrides(x.shape), src(x.rank());
  int64_t base = 0;
  for (int64_t d = 0; d < x.rank(); ++d) {
    src[d] = xs[d] * steps[d];
    base += starts[d] * xs[d];
  }
  gatherCopy(c, x, y, src, base);
  return Status::ok();
}

Status lowerInsertSlice(Ctx &c) {
  const TensorRef &dest = c.in.in[0], &src = c.in.in[1], &y = c.in.out[0];
  Dims starts = c.attrInts("starts"), steps = c.attrInts("strides");
  if (dest.shape != y.shape || dest.dtype != src.dtype || dest.dtype != y.dtype)
    return Status::error("output does not match the destination");
  FSDP_RETURN_IF_ERROR(checkBox(y, src.shape, starts, steps));
  copy(c, dest, y);
  StridedCopy s{};
  s.index.rank = (int)src.rank();
  Dims ys = contiguousStrides(y.shape), ss = contiguousStrides(src.shape);
  for (int64_t d = 0; d < src.rank(); ++d) {
    s.index.dims[d] = src.shape[d];
    s.index.strides[0][d] = ss[d];
    s.index.strides[1][d] = ys[d] * steps[d];
    s.dstBase += starts[d] * ys[d];
  }
  s.elemBytes = dtypeSize(y.dtype);
  s.x = c.at<uint8_t>(src);
  s.y = c.at<uint8_t>(y);
  c.emit(src.numel(), s);
  return Status::ok();
}

/// Rows of `outer` chunks: x's chunk o (`chunk` elements) to y's row o at
/// element `at` (rows of `row` elements), or back (split).
void chunkCopy(Ctx &c, const uint8_t *x, uint8_t *y, int64_t outer,
               int64_t chunk, int64_t row, int64_t at, int64_t elemBytes,
               bool toRows) {
  StridedCopy s{};
  s.index.rank = 2;
  s.index.dims[0] = outer;
  s.index.dims[1] = chunk;
  s.index.strides[toRows ? 0 : 1][0] = chunk;
  s.index.strides[toRows ? 1 : 0][0] = row;
  s.index.strides[0][1] = s.index.strides[1][1] = 1;
  (toRows ? s.dstBase : s.srcBase) = at;
  s.elemBytes = elemBytes;
  s.x = x;
  s.y = y;
  c.emit(outer * chunk, s);
}

/// Concat (parts into the whole) and split (the whole into parts): one
/// chunk copy per part and row.
Status concatOrSplit(Ctx &c, bool split) {
  const std::vector<TensorRef> &parts = split ? c.in.out : c.in.in;
  const TensorRef &whole = split ? c.in.in[0] : c.in.out[0];
  int64_t axis = c.attrInt("axis", 0), outer, inner;
  FSDP_RETURN_IF_ERROR(concatLayout(parts, whole, axis, split, outer, inner));
  int64_t row = whole.shape[axis] * inner, at = 0;
  for (const TensorRef &part : parts) {
    int64_t chunk = part.shape[axis] * inner;
    const TensorRef &x = split ? whole : part, &y = split ? part : whole;
    chunkCopy(c, c.at<uint8_t>(x), c.at<uint8_t>(y), outer, chunk, row, at,
              dtypeSize(whole.dtype), !split);
    at += chunk;
  }
  return Status::ok();
}

Status lowerConcat(Ctx &c) { return concatOrSplit(c, false); }
Status lowerSplit(Ctx &c) { return concatOrSplit(c, true); }

Status lowerBroadcast(Ctx &c) {
  const TensorRef &x = c.in.in[0], &y = c.in.out[0];
  Strided s;
  if (!broadcastIndex(y.shape, {&x.shape}, s) || x.dtype != y.dtype)
    return Status::error(shapeString(x.shape) + " does not broadcast to " +
                         shapeString(y.shape));
  Dims src(s.strides[0], s.strides[0] + y.rank());
  gatherCopy(c, x, y, src, 0);
  return Status::ok();
}

Status lowerTrilu(Ctx &c) {
  const TensorRef &x = c.in.in[0], &y = c.in.out[0];
  if (x.shape != y.shape || x.rank() < 2 || x.dtype != y.dtype)
    return Status::error("needs rank >= 2 and one shape");
  c.emit(y.numel(),
         Trilu{x.shape[x.rank() - 2], x.shape[x.rank() - 1], c.attrInt("k", 0),
               c.attrBool("upper", true), elemOf(y.dtype), c.at(x), c.at(y)});
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Optimizers (torch.optim semantics)
//===----------------------------------------------------------------------===//

Status optimizerArgs(Ctx &c, int64_t &param, const float *&scale) {
  param = c.attrInt("param", -1);
  if (param < 0 || param >= (int64_t)c.mem.params.size() ||
      !c.mem.params[param])
    return Status::error("bad parameter index");
  scale = nullptr;
  if (c.in.in.size() == 2) {
    if (c.in.in[1].numel() != 1 || c.in.in[1].dtype != DType::F32)
      return Status::error("the gradient scale must be an f32 scalar");
    scale = c.at<float>(c.in.in[1]);
  }
  return Status::ok();
}

Status lowerAdamW(Ctx &c) {
  int64_t p;
  const float *scale;
  FSDP_RETURN_IF_ERROR(optimizerArgs(c, p, scale));
  if (!c.mem.first[p] || !c.mem.second[p])
    return Status::error("no optimizer state for this parameter");
  double b1 = c.attrFloat("beta1", 0.9), b2 = c.attrFloat("beta2", 0.999);
  c.emit(1, AdamWSchedule{c.attrFloat("lr", 1e-3), b1, b2, c.mem.stepScalars,
                          c.mem.schedule});
  c.emit(c.in.in[0].numel(),
         AdamW{(float)b1, (float)b2, (float)c.attrFloat("eps", 1e-8),
               (float)c.attrFloat("weight_decay", 0.01), c.mem.schedule, scale,
               c.at<float>(c.in.in[0]), static_cast<float *>(c.mem.params[p]),
               c.mem.first[p], c.mem.second[p]});
  return Status::ok();
}

Status lowerSgd(Ctx &c) {
  int64_t p;
  const float *scale;
  FSDP_RETURN_IF_ERROR(optimizerArgs(c, p, scale));
  if (!c.mem.first[p] || !c.mem.started[p])
    return Status::error("no optimizer state for this parameter");
  c.emit(1, SgdSchedule{c.attrFloat("lr", 1e-3), c.mem.stepScalars,
                        c.mem.started[p], c.mem.schedule, scale});
  c.emit(c.in.in[0].numel(),
         Sgd{(float)c.attrFloat("momentum", 0),
             (float)c.attrFloat("weight_decay", 0),
             c.attrBool("nesterov", false), c.mem.schedule, scale,
             c.at<float>(c.in.in[0]), static_cast<float *>(c.mem.params[p]),
             c.mem.first[p]});
  return Status::ok();
}

Status lowerAccumulateGrad(Ctx &c) {
  int64_t p = c.attrInt("param", -1);
  if (p < 0 || p >= (int64_t)c.mem.grads.size() || !c.mem.grads[p])
    return Status::error("no gradient accumulator for this parameter");
  const TensorRef &g = c.in.in[0];
  float *acc = static_cast<float *>(c.mem.grads[p]);
  Strided index;
  broadcastIndex({g.numel()}, {}, index);
  index.strides[0][0] = index.strides[1][0] = 1;
  c.emit(g.numel(), Binary{BinaryKind::Add, index, acc, c.at<float>(g), acc});
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Collectives (started here, completed by `wait`)
//===----------------------------------------------------------------------===//

Status groupOf(Ctx &c, Group &g) {
  std::string name = c.attrString("group", "world");
  static const std::map<std::string, Group> groups = {
      {"world", Group::World},
      {"shard", Group::Shard},
      {"replicate", Group::Replicate},
      {"block", Group::Block}};
  auto it = groups.find(name);
  if (it == groups.end())
    return Status::error("unknown group '" + name + "'");
  g = it->second;
  if (c.attrInt("group_size", 0) != c.comm.size(g))
    return Status::error("group_size " +
                         std::to_string(c.attrInt("group_size", 0)) +
                         " differs from the " + std::to_string(c.comm.size(g)) +
                         " ranks of its " + name + " group");
  return Status::ok();
}

bool sumElem(DType t, Elem &e) {
  e = t == DType::BF16 ? Elem::BF16 : t == DType::F16 ? Elem::F16 : Elem::F32;
  return t == DType::F32 || t == DType::BF16 || t == DType::F16;
}

Status collective(Ctx &c, CollectiveKind kind) {
  const TensorRef &x = c.in.in[0], &y = c.in.out[0];
  Collective op;
  op.kind = kind;
  FSDP_RETURN_IF_ERROR(groupOf(c, op.group));
  int64_t group = c.comm.size(op.group);
  bool ok = x.dtype == y.dtype && sumElem(x.dtype, op.elem);
  op.count = x.numel();
  if (kind == CollectiveKind::AllReduce)
    ok = ok && x.numel() == y.numel();
  else if (kind == CollectiveKind::AllGather)
    ok = ok && x.numel() * group == y.numel();
  else {
    ok = ok && y.numel() * group == x.numel();
    op.count = y.numel();
  }
  if (!ok)
    return Status::error("expects float tensors of one dtype sized for " +
                         std::to_string(group) + " ranks");
  op.in = c.at(x);
  op.out = c.at(y);
  op.elemBytes = dtypeSize(x.dtype);
  op.average = c.attrString("reduction", "sum") == "avg";
  op.slot = c.in.index;
  c.emit(1, op);
  return Status::ok();
}

Status lowerAllReduce(Ctx &c) {
  return collective(c, CollectiveKind::AllReduce);
}
Status lowerAllGather(Ctx &c) {
  return collective(c, CollectiveKind::AllGather);
}
Status lowerReduceScatter(Ctx &c) {
  return collective(c, CollectiveKind::ReduceScatter);
}

Status lowerWait(Ctx &c) {
  c.emit(1, Wait{c.in.start});
  return Status::ok();
}

/// The flat gradient of a unit: each input at its offset, zeros elsewhere.
Status lowerPack(Ctx &c) {
  const TensorRef &y = c.in.out[0];
  auto found = c.in.attrs.find("offsets");
  auto isFloat = [](DType t) {
    return t == DType::F32 || t == DType::BF16 || t == DType::F16;
  };
  if (found == c.in.attrs.end() || !found->is_array() ||
      found->size() != c.in.in.size() || !isFloat(y.dtype))
    return Status::error("needs one offset per input and a float result");
  c.emit(1, Zero{c.at(y), y.bytes()});
  for (size_t i = 0; i < c.in.in.size(); ++i) {
    const nlohmann::json &o = (*found)[i];
    int64_t off = o.is_number_integer() ? o.get<int64_t>() : -1;
    const TensorRef &x = c.in.in[i];
    if (off < 0 || !isFloat(x.dtype) || off + x.numel() > y.numel())
      return Status::error("input " + std::to_string(i) +
                           " does not fit at its offset");
    void *at = c.at<uint8_t>(y) + off * dtypeSize(y.dtype);
    if (x.numel() == 0)
      continue;
    // Another float dtype converts on the way, as fsdp.cast does.
    if (x.dtype == y.dtype)
      c.emit(1, Copy{c.at(x), at, x.bytes()});
    else
      c.emit(x.numel(), Cast{elemOf(x.dtype), elemOf(y.dtype), c.at(x), at});
  }
  return Status::ok();
}

Status lowerReshard(Ctx &c) {
  const TensorRef &x = c.in.in[0], &y = c.in.out[0];
  int64_t n = c.attrInt("group_size", 0);
  if (n != c.comm.size(Group::Block) || x.dtype != y.dtype ||
      y.numel() * n != x.numel())
    return Status::error("keeps 1/" + std::to_string(n) +
                         " of a buffer, but the block group has " +
                         std::to_string(c.comm.size(Group::Block)) +
                         " ranks or the sizes differ");
  c.emit(1, Copy{c.at<uint8_t>(x) + c.comm.rank(Group::Block) * y.bytes(),
                 c.at(y), y.bytes()});
  return Status::ok();
}

Status lowerFree(Ctx &) { return Status::ok(); }

template <UnaryKind K> Status un(Ctx &c) { return unary(c, K); }
template <BinaryKind K> Status bin(Ctx &c) { return binary(c, K); }
template <ReduceKind K> Status red(Ctx &c) { return reduce(c, K); }
Status lowerGelu(Ctx &c) {
  return unary(c, c.attrString("approximate", "none") == "tanh"
                      ? UnaryKind::GeluTanh
                      : UnaryKind::Gelu);
}
Status lowerGeluGrad(Ctx &c) {
  const TensorRef &x = c.in.in[0], &g = c.in.in[1], &y = c.in.out[0];
  if (x.shape != y.shape || g.shape != y.shape || !floating(x.dtype) ||
      !floating(g.dtype) || !floating(y.dtype))
    return Status::error("expects float x, grad and output of one shape");
  c.emit(y.numel(), GeluGrad{c.attrString("approximate", "none") == "tanh",
                             c.at(x), c.at(g), c.at(y), elemOf(x.dtype),
                             elemOf(g.dtype), elemOf(y.dtype)});
  return Status::ok();
}
Status lowerSoftmax(Ctx &c) { return softmaxLike(c, false); }
Status lowerLogSoftmax(Ctx &c) { return softmaxLike(c, true); }

const std::map<std::string, Lowerer> &table() {
  static const std::map<std::string, Lowerer> t = {
#define FSDP_OP(name, cpu, device, minIn, maxIn, outs, rules) {name, device},
#include "runtime/plan/Ops.def"
#undef FSDP_OP
  };
  return t;
}

/// A product the GEMM library runs on bf16/f16 operands directly (f32
/// accumulation, one rounding of the result, as the widened product): the
/// device's matmuls are not widened.
bool nativeNarrow(const Instruction &in) {
  if (!runsNarrowOnDevice(in.op, operandShapes(in),
                          in.attrBool("causal", false)) ||
      in.in.empty() || in.out.empty())
    return false;
  auto narrow = [](DType t) { return t == DType::BF16 || t == DType::F16; };
  auto same = [](const std::vector<TensorRef> &ts, DType t) {
    return std::all_of(ts.begin(), ts.end(),
                       [&](const TensorRef &r) { return r.dtype == t; });
  };
  if (in.op == "attention" || in.op == "attention_grad")
    return narrow(in.in[0].dtype) && same(in.in, in.in[0].dtype) &&
           same(in.out, in.in[0].dtype);
  if (in.op == "layer_norm" || in.op == "layer_norm_grad" ||
      in.op == "rms_norm" || in.op == "rms_norm_grad")
    return std::all_of(in.in.begin(), in.in.end(),
                       [&](const TensorRef &r) { return floating(r.dtype); }) &&
           std::all_of(in.out.begin(), in.out.end(),
                       [&](const TensorRef &r) { return floating(r.dtype); });
  if (in.op == "reduce_sum" || in.op == "reduce_mean" ||
      in.op == "reduce_max" || in.op == "sum_squares")
    return floating(in.in[0].dtype) && floating(in.out[0].dtype);
  if (isElementwise(in.op)) // float operands; a comparison's i1 result
    return std::all_of(in.in.begin(), in.in.end(),
                       [&](const TensorRef &r) { return floating(r.dtype); }) &&
           (floating(in.out[0].dtype) || in.out[0].dtype == DType::I1);
  if (in.op == "matmul") {
    if (in.out.size() != 1)
      return false;
    DType t = in.out[0].dtype;
    return narrow(t) &&
           std::all_of(in.in.begin(), in.in.end(),
                       [&](const TensorRef &r) { return r.dtype == t; });
  }
  // Losses: bf16/f16 logits (and their gradient, the last output) read and
  // written as they are; targets, class weights, the loss (the first
  // output) and the loss gradient as they come.
  DType t = in.in[0].dtype;
  bool rest = std::all_of(in.in.begin() + 1, in.in.end(),
                          [&](const TensorRef &r) { return !narrow(r.dtype); });
  bool fused = in.op == "cross_entropy_with_grad",
       gradient = fused || in.op == "cross_entropy_grad",
       loss = in.op != "cross_entropy_grad";
  return in.out.size() == (fused ? 2u : 1u) && narrow(t) && rest &&
         (!gradient || in.out.back().dtype == t) &&
         (!loss || !narrow(in.out[0].dtype));
}

std::optional<Widening> deviceWidening(const Instruction &in) {
  return nativeNarrow(in) ? std::nullopt : widen(in);
}

} // namespace

int64_t widenedBytes(const Instruction &in) {
  std::optional<Widening> w = deviceWidening(in);
  return w ? w->bytes : 0;
}

int64_t scratchBytes(const Instruction &in) {
  return deviceScratchBytes(in.op, shapesOf(in.in), shapesOf(in.out));
}

namespace {

Status lowerOne(const Instruction &in, const Memory &mem, const Comm &comm,
                std::vector<DeviceOp> &out) {
  auto it = table().find(in.op);
  if (it == table().end())
    return Status::error("no device lowering for op '" + in.op + "'");
  for (const TensorRef &t : in.in)
    if (t.rank() > kMaxDims)
      return Status::error("rank " + std::to_string(t.rank()) +
                           " is over the device kernels' " +
                           std::to_string(kMaxDims));
  Ctx c{in, mem, comm, out};
  return it->second(c);
}

} // namespace

Status lower(const Instruction &in, const Memory &mem, const Comm &comm,
             std::vector<DeviceOp> &out) {
  std::optional<Widening> w = deviceWidening(in);
  if (!w)
    return lowerOne(in, mem, comm, out);
  for (const Instruction &c : w->before)
    FSDP_RETURN_IF_ERROR(lowerOne(c, mem, comm, out));
  FSDP_RETURN_IF_ERROR(lowerOne(w->twin, mem, comm, out));
  for (const Instruction &c : w->after)
    FSDP_RETURN_IF_ERROR(lowerOne(c, mem, comm, out));
  return Status::ok();
}

} // namespace fsdp::device
