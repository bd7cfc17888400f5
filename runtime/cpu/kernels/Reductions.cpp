//===- Reductions.cpp - Reductions and norms (CPU) ------------------------===//
//
// Reductions, softmax rows, layer and RMS norms and their gradients.
// (Declared in KernelSupport.h; dispatched by runtime/cpu/Kernels.cpp.)
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/kernels/KernelSupport.h"

namespace fsdp::cpu::kernels {

//===----------------------------------------------------------------------===//
// Reductions and normalisations
//===----------------------------------------------------------------------===//

/// The larger of a running maximum and `v` as PyTorch's amax takes it: a
/// NaN wins and stays. `std::max(acc, v)` kept the running value against a
/// NaN, so a reduce_max never returned NaN (the device kernels' maxNan,
/// runtime/device/kernels/Block.h, is the same test).
template <typename T> inline T maxNan(T acc, T v) {
  return (v > acc || v != v) ? v : acc;
}

FSDP_VECTOR_CLONES
Status reduce(const Instruction &in, Context &c, int kind) {
  const TensorRef &x = in.in[0], &y = in.out[0];
  Shape axes = attrInts(in, "axes");
  bool reduced[kMaxRank] = {};
  for (int64_t a : axes) {
    if (a < 0 || a >= x.rank())
      return Status::error("axis " + std::to_string(a) + " out of range");
    reduced[a] = true;
  }
  Shape kept;
  int64_t count = 1;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (reduced[d])
      count *= x.shape[d];
    else
      kept.push_back(x.shape[d]);
  }
  bool integer = x.dtype == DType::I64 && y.dtype == DType::I64 && kind != 1;
  if (product(kept) != y.numel() ||
      (!integer && (x.dtype != DType::F32 || y.dtype != DType::F32)))
    return Status::error("output " + shapeString(y.shape) +
                         " does not match the reduction");
  // Each input element's output offset: kept dims' strides, 0 on reduced dims.
  Shape ks = stridesOf(kept), outStride(x.rank(), 0);
  for (int64_t d = 0, k = 0; d < x.rank(); ++d)
    if (!reduced[d])
      outStride[d] = ks[k++];
  if (integer) {
    // int64 exactly (a mask's count, the largest position: small tensors,
    // one pass); a sum wraps past 2^63 as PyTorch's does, hence unsigned.
    int64_t *iy = c.get<int64_t>(y);
    const int64_t *ix = c.get<int64_t>(x);
    std::fill(iy, iy + y.numel(),
              kind == 2 ? std::numeric_limits<int64_t>::min() : 0);
    forEach(x.shape, {&outStride}, [&](int64_t i, const int64_t *off) {
      int64_t &o = iy[off[0]];
      o = kind == 2 ? std::max(o, ix[i])
                    : (int64_t)((uint64_t)o + (uint64_t)ix[i]);
    });
    return Status::ok();
  }
  const float *px = c.get<float>(x);
  float *py = c.get<float>(y);
  int64_t n = y.numel();
  if (count == 0 || n == 0) {
    std::fill(py, py + n,
              kind == 2 ? -std::numeric_limits<float>::infinity() : 0.0f);
    return Status::ok();
  }
  // Reducing trailing axes of a contiguous input: one row per output.
  int64_t firstReduced = x.rank();
  while (firstReduced > 0 && reduced[firstReduced - 1])
    --firstReduced;
  int64_t nReduced = std::count(reduced, reduced + x.rank(), true);
  bool trailing = nReduced == x.rank() - firstReduced;
  if (trailing && kind != 2) {
    // Sums in double, vectorised and split over the threads: across the
    // outputs when there are many, along the row when there are few (a
    // gradient norm's sum over a whole tensor).
    bool along = n < 2 * maxThreads();
    for (int64_t i = 0; along && i < n; ++i) {
      const float *row = px + i * count;
      double acc = 0;
#pragma omp parallel for simd reduction(+ : acc) if (parallel : count > kParallelMin)
      for (int64_t j = 0; j < count; ++j)
        acc += row[j];
      py[i] = (float)(kind == 1 ? acc / count : acc);
    }
    if (along)
      return Status::ok();
#pragma omp parallel for if (n * count > kParallelMin)
    for (int64_t i = 0; i < n; ++i) {
      const float *row = px + i * count;
      double acc = 0;
#pragma omp simd reduction(+ : acc)
      for (int64_t j = 0; j < count; ++j)
        acc += row[j];
      py[i] = (float)(kind == 1 ? acc / count : acc);
    }
    return Status::ok();
  }
  if (trailing) {
    for (int64_t i = 0; i < n; ++i) {
      const float *row = px + i * count;
      double acc = kind == 2 ? -std::numeric_limits<double>::infinity() : 0.0;
      for (int64_t j = 0; j < count; ++j)
        acc = kind == 2 ? maxNan(acc, (double)row[j]) : acc + row[j];
      py[i] = (float)(kind == 1 ? acc / count : acc);
    }
    return Status::ok();
  }
  // Reducing one block of adjacent axes that are not the trailing ones
  // (the leading axes: a bias's gradient; middle ones: a grouped-query
  // attention's key gradient summed over its group), as [outer, count,
  // inner]: each output row accumulates its `count` input rows (sums,
  // means and maxima). The
  // element-by-element loop below took 570-670 us on the project's Xeon
  // for a Llama's [4, 2, 3, 128, 64] over axis 2 (3.4 ns an element), this
  // 130 us.
  int64_t first = 0;
  while (first < x.rank() && !reduced[first])
    ++first;
  int64_t last = first;
  while (last < x.rank() && reduced[last])
    ++last;
  bool block = nReduced == last - first;
  if (block) {
    int64_t outer = product(x.shape, 0, first), inner = n / outer;
    double *acc =
        reinterpret_cast<double *>(c.scratch); // sized by scratchFloats
    // Columns in blocks over the threads, each block's rows in order (the
    // same sums, in the same order, as one thread). The maximum straight
    // into the output.
    constexpr int64_t kBlock = 512;
    int64_t blocks = (inner + kBlock - 1) / kBlock;
#pragma omp parallel for if (n * count > kParallelMin)
    for (int64_t t = 0; t < outer * blocks; ++t) {
      int64_t o = t / blocks, b = (t % blocks) * kBlock;
      int64_t e = std::min(inner, b + kBlock);
      if (kind == 2) {
        float *out = py + o * inner;
        std::fill(out + b, out + e, -std::numeric_limits<float>::infinity());
        for (int64_t r = 0; r < count; ++r) {
          const float *row = px + (o * count + r) * inner;
          for (int64_t j = b; j < e; ++j)
            out[j] = maxNan(out[j], row[j]);
        }
        continue;
      }
      double *out = acc + o * inner;
      std::fill(out + b, out + e, 0.0);
      for (int64_t r = 0; r < count; ++r) {
        const float *row = px + (o * count + r) * inner;
#pragma omp simd
        for (int64_t j = b; j < e; ++j)
          out[j] += row[j];
      }
    }
    if (kind != 2)
      for (int64_t j = 0; j < n; ++j)
        py[j] = (float)(kind == 1 ? acc[j] / count : acc[j]);
    return Status::ok();
  }
  std::fill(py, py + n,
            kind == 2 ? -std::numeric_limits<float>::infinity() : 0.0f);
  forEach(x.shape, {&outStride}, [&](int64_t i, const int64_t *off) {
    float &o = py[off[0]];
    o = kind == 2 ? maxNan(o, px[i]) : o + px[i];
  });
  if (kind == 1)
    for (int64_t i = 0; i < n; ++i)
      py[i] /= (float)count;
  return Status::ok();
}

/// The sum of the squares of every element (a gradient's share of the
/// global norm), each square and the sum in double, vectorised and split
/// over the threads.
FSDP_VECTOR_CLONES
Status kSumSquares(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &y = in.out[0];
  if (x.dtype != DType::F32 || y.dtype != DType::F32 || y.numel() != 1)
    return Status::error("expects an f32 input and an f32 scalar");
  const float *px = c.get<float>(x);
  int64_t n = x.numel();
  double acc = 0;
#pragma omp parallel for simd reduction(+ : acc) if (parallel : n > kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    acc += (double)px[i] * px[i];
  *c.get<float>(y) = (float)acc;
  return Status::ok();
}

Status kReduceSum(const Instruction &in, Context &c) {
  return reduce(in, c, 0);
}
Status kReduceMean(const Instruction &in, Context &c) {
  return reduce(in, c, 1);
}
Status kReduceMax(const Instruction &in, Context &c) {
  return reduce(in, c, 2);
}

/// Softmax (or log-softmax) of a contiguous row into `out` (which may be
/// `row`), vectorised: one expf a value (libmvec), sums in float lanes.
/// A NaN in the row makes the whole row NaN, as in PyTorch.
FSDP_VECTOR_CLONES
void softmaxRow(const float *row, float *out, int64_t n, bool log) {
  float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
  for (int64_t j = 0; j < n; ++j)
    mx = row[j] > mx ? row[j] : mx;
  float sum = 0;
  if (log) {
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; ++j)
      sum += expf(row[j] - mx);
    double shift = (double)mx + std::log((double)sum);
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
      out[j] = (float)((double)row[j] - shift);
    return;
  }
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) {
    float e = expf(row[j] - mx);
    out[j] = e;
    sum += e;
  }
#pragma omp simd
  for (int64_t j = 0; j < n; ++j)
    out[j] = out[j] / sum;
}

Status softmaxLike(const Instruction &in, Context &c, bool log) {
  const TensorRef &x = in.in[0], &y = in.out[0];
  int64_t axis = attrInt(in, "axis", -1);
  if (x.shape != y.shape || axis < 0 || axis >= x.rank())
    return Status::error("bad axis or shapes");
  int64_t outer = product(x.shape, 0, axis), len = x.shape[axis],
          inner = product(x.shape, axis + 1);
  const float *px = c.get<float>(x);
  float *py = c.get<float>(y);
  if (inner == 1) { // rows contiguous: vectorised, rows over the threads
#pragma omp parallel for if (outer * len > kParallelMin)
    for (int64_t o = 0; o < outer; ++o)
      softmaxRow(px + o * len, py + o * len, len, log);
    return Status::ok();
  }
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const float *row = px + o * len * inner + i;
      float *out = py + o * len * inner + i;
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < len; ++j)
        mx = std::max(mx, (double)row[j * inner]);
      double sum = 0;
      for (int64_t j = 0; j < len; ++j)
        sum += std::exp(row[j * inner] - mx);
      for (int64_t j = 0; j < len; ++j)
        out[j * inner] = log ? (float)(row[j * inner] - mx - std::log(sum))
                             : (float)(std::exp(row[j * inner] - mx) / sum);
    }
  return Status::ok();
}

Status kSoftmax(const Instruction &in, Context &c) {
  return softmaxLike(in, c, false);
}
Status kLogSoftmax(const Instruction &in, Context &c) {
  return softmaxLike(in, c, true);
}

/// A row's mean (0 for rms_norm) and 1/sqrt(mean((x - mean)²) + eps), in
/// double, two passes (DeviceKernels.h's rowStats), summed in vector lanes.
inline void rowMoments(const float *row, int64_t cols, double eps,
                       bool centered, double &mean, double &rstd) {
  double sum = 0;
  if (centered) {
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < cols; ++j)
      sum += row[j];
  }
  double m = sum / (double)cols, var = 0;
#pragma omp simd reduction(+ : var)
  for (int64_t j = 0; j < cols; ++j)
    var += (row[j] - m) * (row[j] - m);
  var /= (double)cols;
  mean = m;
  rstd = 1.0 / std::sqrt(var + eps);
}

/// layer_norm, and rms_norm: no mean subtracted, no bias. Rows over the
/// threads.
FSDP_VECTOR_CLONES
Status kLayerNorm(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &w = in.in[1], &y = in.out[0];
  bool centered = in.op != "rms_norm";
  int64_t axis = attrInt(in, "axis", -1);
  double eps = attrFloat(in, "epsilon", 1e-5);
  if (axis < 0 || axis >= x.rank() || x.shape != y.shape)
    return Status::error("bad axis or shapes");
  int64_t cols = product(x.shape, axis),
          rows = x.numel() / std::max<int64_t>(cols, 1);
  if (w.numel() != cols || (in.in.size() == 3 && in.in[2].numel() != cols))
    return Status::error("scale/bias do not match the normalised size");
  const float *px = c.get<float>(x), *pw = c.get<float>(w);
  const float *pb = in.in.size() == 3 ? c.get<float>(in.in[2]) : nullptr;
  float *py = c.get<float>(y);
#pragma omp parallel for if (x.numel() > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = px + r * cols;
    float *out = py + r * cols;
    double mean, rstd;
    rowMoments(row, cols, eps, centered, mean, rstd);
    if (pb) {
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j)
        out[j] = (float)((row[j] - mean) * rstd * pw[j] + pb[j]);
    } else {
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j)
        out[j] = (float)((row[j] - mean) * rstd * pw[j] + 0.0);
    }
  }
  return Status::ok();
}

/// Each row's statistics in scratch (mean and rstd, doubles), then dx by
/// rows and dscale/dbias by columns: the steps of DeviceKernels.h's
/// LayerNormGradRows and LayerNormGradCols. rms_norm_grad: no mean, no
/// dbias.
FSDP_VECTOR_CLONES
Status kLayerNormGrad(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &w = in.in[1], &g = in.in[2];
  const TensorRef &dx = in.out[0], &dw = in.out[1];
  bool centered = in.op != "rms_norm_grad";
  double eps = attrFloat(in, "epsilon", 1e-5);
  int64_t rows, cols;
  FSDP_RETURN_IF_ERROR(
      layerNormGradLayout(in, attrInt(in, "axis", -1), rows, cols));
  const float *px = c.get<float>(x), *pw = c.get<float>(w),
              *pg = c.get<float>(g);
  float *pdx = c.get<float>(dx), *pdw = c.get<float>(dw),
        *pdb = centered ? c.get<float>(in.out[2]) : nullptr;
  double *stats = reinterpret_cast<double *>(c.scratch); // scratchFloats
#pragma omp parallel for if (x.numel() > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = px + r * cols, *dy = pg + r * cols;
    double mean, rstd;
    rowMoments(row, cols, eps, centered, mean, rstd);
    stats[2 * r] = mean;
    stats[2 * r + 1] = rstd;
    double mg = 0, mgx = 0;
#pragma omp simd reduction(+ : mg, mgx)
    for (int64_t j = 0; j < cols; ++j) {
      double gj = (double)dy[j] * pw[j];
      mg += gj;
      mgx += gj * ((row[j] - mean) * rstd);
    }
    mg = centered ? mg / (double)cols : 0.0;
    mgx /= (double)cols;
    float *out = pdx + r * cols;
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) {
      double xhat = (row[j] - mean) * rstd;
      out[j] = (float)(rstd * ((double)dy[j] * pw[j] - mg - xhat * mgx));
    }
  }
  // dscale and dbias: column sums in row order, a strip of kStrip columns
  // at a time (rows read contiguously; each column's sum in its own lane).
  constexpr int64_t kStrip = 64;
  int64_t strips = (cols + kStrip - 1) / kStrip;
#pragma omp parallel for if (x.numel() > kParallelMin)
  for (int64_t s = 0; s < strips; ++s) {
    int64_t j0 = s * kStrip, n = std::min(kStrip, cols - j0);
    double sw[kStrip] = {}, sb[kStrip] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const float *dyr = pg + r * cols + j0, *xr = px + r * cols + j0;
      double mean = stats[2 * r], rstd = stats[2 * r + 1];
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) {
        sw[j] += (double)dyr[j] * ((xr[j] - mean) * rstd);
        sb[j] += dyr[j];
      }
    }
    for (int64_t j = 0; j < n; ++j) {
      pdw[j0 + j] = (float)sw[j];
      if (pdb)
        pdb[j0 + j] = (float)sb[j];
    }
  }
  return Status::ok();
}

} // namespace fsdp::cpu::kernels
