//===- Convolution.cpp - Convolutions, pools, batch norm (CPU) ------------===//
//
// Convolutions (im2col and a GEMM per group), pools and batch norm
// (SyncBatchNorm too). (Declared in KernelSupport.h; dispatched by
// runtime/cpu/Kernels.cpp.)
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/kernels/KernelSupport.h"

namespace fsdp::cpu::kernels {

//===----------------------------------------------------------------------===//
// Convolution: image by image, im2col into scratch and a GEMM per group
// (common/ConvGeometry.h); the column buffer is [groups][rows][P].
//===----------------------------------------------------------------------===//

Status convCheck(const Instruction &in, const TensorRef &x, const TensorRef &w,
                 const TensorRef &y, ConvGeometry &g) {
  FSDP_RETURN_IF_ERROR(convGeometryOf(in, x, w, y, g));
  if (x.dtype != DType::F32)
    return Status::error("expects f32 operands");
  return Status::ok();
}

void im2col(const ConvGeometry &g, const float *x, int64_t img, float *col) {
  int64_t rows = g.groups * g.rows(), p = g.positions();
#pragma omp parallel for if (rows * p > (1 << 15))
  for (int64_t gr = 0; gr < rows; ++gr) {
    float *row = col + gr * p;
    for (int64_t q = 0; q < p; ++q) {
      int64_t s = g.source(img, gr / g.rows(), gr % g.rows(), q);
      row[q] = s < 0 ? 0.0f : x[s];
    }
  }
}

Status kConv(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &w = in.in[1], &y = in.out[0];
  ConvGeometry g;
  FSDP_RETURN_IF_ERROR(convCheck(in, x, w, y, g));
  const float *bias = nullptr;
  if (in.in.size() == 3) {
    const TensorRef &b = in.in[2];
    if (b.dtype != DType::F32 || b.rank() != 1 || b.shape[0] != g.oc)
      return Status::error("bias " + shapeString(b.shape) +
                           " is not one f32 per output channel");
    bias = c.get<float>(b);
  }
  const float *px = c.get<float>(x), *pw = c.get<float>(w);
  float *py = c.get<float>(y), *col = c.scratch; // scratchFloats
  int64_t r = g.rows(), p = g.positions(), ocg = g.ocg();
  for (int64_t img = 0; img < g.n; ++img) {
    im2col(g, px, img, col);
    for (int64_t gi = 0; gi < g.groups; ++gi) {
      float *out = py + (img * g.oc + gi * ocg) * p;
      // The bias first, then C = W·col + C: one rounding, as matmul's.
      if (bias)
        for (int64_t o = 0; o < ocg; ++o)
          std::fill(out + o * p, out + (o + 1) * p, bias[gi * ocg + o]);
      sgemm(false, false, ocg, p, r, 1.0f, pw + gi * ocg * r, r,
            col + gi * r * p, p, bias ? 1.0f : 0.0f, out);
    }
  }
  return Status::ok();
}

Status kConvGradInput(const Instruction &in, Context &c) {
  const TensorRef &dy = in.in[0], &w = in.in[1], &dx = in.out[0];
  ConvGeometry g;
  FSDP_RETURN_IF_ERROR(convCheck(in, dx, w, dy, g));
  const float *pdy = c.get<float>(dy), *pw = c.get<float>(w);
  float *pdx = c.get<float>(dx), *col = c.scratch; // scratchFloats
  int64_t r = g.rows(), p = g.positions(), ocg = g.ocg();
  for (int64_t img = 0; img < g.n; ++img) {
    for (int64_t gi = 0; gi < g.groups; ++gi)
      sgemm(true, false, r, p, ocg, 1.0f, pw + gi * ocg * r, r,
            pdy + (img * g.oc + gi * ocg) * p, p, 0.0f, col + gi * r * p);
    // col2im: each input element gathers the columns that read it.
    int64_t pixels = g.c * g.h * g.w;
#pragma omp parallel for if (pixels > (1 << 14))
    for (int64_t i = 0; i < pixels; ++i) {
      float sum = 0.0f;
      g.forEachReader(i / (g.h * g.w), (i / g.w) % g.h, i % g.w,
                      [&](int64_t gi, int64_t row, int64_t q) {
                        sum += col[(gi * r + row) * p + q];
                      });
      pdx[img * pixels + i] = sum;
    }
  }
  return Status::ok();
}

Status kConvGradWeight(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &dy = in.in[1], &dw = in.out[0];
  ConvGeometry g;
  FSDP_RETURN_IF_ERROR(convCheck(in, x, dw, dy, g));
  const float *px = c.get<float>(x), *pdy = c.get<float>(dy);
  float *pdw = c.get<float>(dw), *col = c.scratch; // scratchFloats
  int64_t r = g.rows(), p = g.positions(), ocg = g.ocg();
  if (g.n == 0)
    std::fill(pdw, pdw + dw.numel(), 0.0f);
  for (int64_t img = 0; img < g.n; ++img) {
    im2col(g, px, img, col);
    for (int64_t gi = 0; gi < g.groups; ++gi)
      sgemm(false, true, ocg, r, p, 1.0f, pdy + (img * g.oc + gi * ocg) * p, p,
            col + gi * r * p, p, img > 0 ? 1.0f : 0.0f, pdw + gi * ocg * r);
  }
  return Status::ok();
}

Status kPool(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &y = in.out[0];
  ConvGeometry g;
  bool max = false, includePad = false;
  FSDP_RETURN_IF_ERROR(poolGeometryOf(in, x, y, g, max, includePad));
  if (x.dtype != DType::F32)
    return Status::error("expects f32 operands");
  const float *px = c.get<float>(x);
  float *py = c.get<float>(y);
  int64_t p = g.positions(), planes = g.n * g.c;
  auto load = [px](int64_t i) { return px[i]; };
#pragma omp parallel for if (planes * p > (1 << 14))
  for (int64_t i = 0; i < planes * p; ++i)
    py[i] = poolWindow(g, max, includePad, i / p / g.c, (i / p) % g.c, i % p,
                       load, nullptr);
  return Status::ok();
}

Status kPoolGrad(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &dy = in.in[1], &dx = in.out[0];
  ConvGeometry g;
  bool max = false, includePad = false;
  FSDP_RETURN_IF_ERROR(poolGeometryOf(in, x, dy, g, max, includePad));
  if (x.dtype != DType::F32 || dx.shape != x.shape || dx.dtype != x.dtype)
    return Status::error("expects f32 operands, dx shaped as x");
  const float *px = c.get<float>(x), *pdy = c.get<float>(dy);
  float *pdx = c.get<float>(dx);
  int64_t plane = g.h * g.w, total = g.n * g.c * plane;
  auto loadX = [px](int64_t i) { return px[i]; };
  auto loadDy = [pdy](int64_t i) { return pdy[i]; };
#pragma omp parallel for if (total > (1 << 14))
  for (int64_t i = 0; i < total; ++i)
    pdx[i] =
        poolInputGrad(g, max, includePad, i / plane / g.c, (i / plane) % g.c,
                      (i / g.w) % g.h, i % g.w, loadX, loadDy);
  return Status::ok();
}

/// The ranks a synchronised batch norm (sync_group_size) normalises over:
/// 0 for none, else the world, which must have that many ranks.
Status batchNormGroup(const Instruction &in, Context &c, int64_t &group) {
  group = attrInt(in, "sync_group_size", 0);
  if (group == 0)
    return Status::ok();
  if (group < 0 || !c.comm || c.comm->size(Group::World) != group)
    return Status::error(
        "sync_group_size " + std::to_string(group) + " differs from the " +
        std::to_string(c.comm ? c.comm->size(Group::World) : 0) +
        " ranks of the world");
  return Status::ok();
}

/// SyncBatchNorm's steps (BatchNormMath.h) over every channel, `red` [8, C]
/// in scratch, the sums each step writes all-reduced after it (over the
/// world, by this instruction's slot).
template <typename Step>
Status batchNormSynced(const Instruction &in, Context &c,
                       const BatchNormLayout &l,
                       std::initializer_list<BatchNormStep> steps, Step run) {
  float *red = c.scratch; // scratchFloats: 8 C
  for (BatchNormStep step : steps) {
#pragma omp parallel for
    for (int64_t ch = 0; ch < l.c; ++ch)
      run(step, ch, red);
    int64_t first, count;
    batchNormStepSums(step, l.c, &first, &count);
    if (count == 0)
      continue;
    FSDP_RETURN_IF_ERROR(c.comm->allReduceStart(red + first, red + first, count,
                                                Elem::F32, false, in.index,
                                                Group::World));
    FSDP_RETURN_IF_ERROR(c.comm->wait(in.index));
  }
  return Status::ok();
}

Status kBatchNorm(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &w = in.in[1], &b = in.in[2], &y = in.out[0],
                  &mean = in.out[1], &var = in.out[2];
  BatchNormLayout l;
  FSDP_RETURN_IF_ERROR(batchNormLayoutOf(x, {&w, &b, &mean, &var}, l));
  if (x.dtype != DType::F32 || y.shape != x.shape || y.dtype != x.dtype)
    return Status::error("expects f32 operands, y shaped as x");
  const float *px = c.get<float>(x), *pw = c.get<float>(w),
              *pb = c.get<float>(b);
  float *py = c.get<float>(y), *pm = c.get<float>(mean),
        *pv = c.get<float>(var);
  double eps = attrFloat(in, "epsilon", 1e-5);
  auto load = [px](int64_t i) { return (double)px[i]; };
  auto store = [py](int64_t i, float v) { py[i] = v; };
  auto stats = [pm, pv](int64_t ch) {
    return [pm, pv, ch](double m, double v) {
      pm[ch] = (float)m;
      pv[ch] = (float)v;
    };
  };
  int64_t group;
  FSDP_RETURN_IF_ERROR(batchNormGroup(in, c, group));
  if (group > 0)
    return batchNormSynced(
        in, c, l,
        {BatchNormStep::Sum, BatchNormStep::Squares, BatchNormStep::Apply},
        [&](BatchNormStep step, int64_t ch, float *red) {
          batchNormSyncedStep(step, l, ch, eps, l.count() * group, pw[ch],
                              pb[ch], load, load, store, stats(ch), red);
        });
#pragma omp parallel for
  for (int64_t ch = 0; ch < l.c; ++ch)
    batchNormChannel(l, ch, eps, pw[ch], pb[ch], load, store, stats(ch));
  return Status::ok();
}

Status kBatchNormGrad(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &w = in.in[1], &dy = in.in[2], &dx = in.out[0],
                  &dw = in.out[1], &db = in.out[2];
  BatchNormLayout l;
  FSDP_RETURN_IF_ERROR(batchNormLayoutOf(x, {&w, &dw, &db}, l));
  if (x.dtype != DType::F32 || dy.shape != x.shape || dx.shape != x.shape ||
      dy.dtype != x.dtype || dx.dtype != x.dtype)
    return Status::error("expects f32 operands, dy and dx shaped as x");
  const float *px = c.get<float>(x), *pw = c.get<float>(w),
              *pdy = c.get<float>(dy);
  float *pdx = c.get<float>(dx), *pdw = c.get<float>(dw),
        *pdb = c.get<float>(db);
  double eps = attrFloat(in, "epsilon", 1e-5);
  auto loadX = [px](int64_t i) { return (double)px[i]; };
  auto loadDy = [pdy](int64_t i) { return (double)pdy[i]; };
  auto storeDx = [pdx](int64_t i, float v) { pdx[i] = v; };
  auto grads = [pdw, pdb](int64_t ch) {
    return [pdw, pdb, ch](double dscale, double dbias) {
      pdw[ch] = (float)dscale;
      pdb[ch] = (float)dbias;
    };
  };
  int64_t group;
  FSDP_RETURN_IF_ERROR(batchNormGroup(in, c, group));
  if (group > 0)
    return batchNormSynced(in, c, l,
                           {BatchNormStep::Sum, BatchNormStep::Squares,
                            BatchNormStep::GradSums, BatchNormStep::GradApply},
                           [&](BatchNormStep step, int64_t ch, float *red) {
                             batchNormSyncedStep(
                                 step, l, ch, eps, l.count() * group, pw[ch],
                                 0.0f, loadX, loadDy, storeDx, grads(ch), red);
                           });
#pragma omp parallel for
  for (int64_t ch = 0; ch < l.c; ++ch)
    batchNormGradChannel(l, ch, eps, pw[ch], loadX, loadDy, storeDx, grads(ch));
  return Status::ok();
}

/// A buffer overwritten (batch norm's running statistics): the value,
/// converted, into the buffer's f32 storage.
Status kAssignBuffer(const Instruction &in, Context &c) {
  const TensorRef &v = in.in[0];
  int64_t slot = attrInt(in, "param", -1);
  if (slot < 0 || slot >= (int64_t)c.params.size())
    return Status::error("names no buffer");
  float *dst = c.params[slot];
  const void *src = c.data(v);
  for (int64_t i = 0; i < v.numel(); ++i)
    dst[i] = (float)loadAsDouble(v, src, i);
  return Status::ok();
}

} // namespace fsdp::cpu::kernels
