//===- DeviceKernels.h - The CUDA backend's kernels -------------*- C++ -*-===//
//
// Every kernel here is a functor: `__host__ __device__`, so nvcc launches
// it on the GPU (DeviceKernels.cu) and the host compiler runs the very same
// code in a loop. Most compute one output element (or one row) from an
// index, one thread each over a grid-stride loop. Block kernels (layer
// norms and losses: a block per row; flash attention, FlashAttention.h)
// take a `Block`: on the device the CUDA block, with barriers and
// deterministic block sums; on the host one thread that covers every index.
// That is how the kernels are tested on a machine without a GPU: the unit
// test (tests/unit/DeviceKernelsTest.cpp) runs each on the host and
// compares it with the CPU backend's kernel of the same op, so the math and
// the indexing are checked everywhere; only the launch, the barriers and
// the tensor-core loads need a GPU.
//
// The math follows runtime/cpu/Kernels.cpp exactly (float element math,
// double accumulation in reductions, softmax and losses), so the two
// backends agree to rounding. Elementwise ops, layer norms, reductions and
// losses read bf16/f16 operands as they are: a narrow value loads exactly,
// and the result rounds as a cast of the f32 result would.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_DEVICE_DEVICEKERNELS_H
#define FSDP_RUNTIME_DEVICE_DEVICEKERNELS_H

#include "runtime/plan/BatchNormMath.h"
#include "runtime/plan/ConvGeometry.h"
#include "runtime/plan/UnaryMath.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#ifdef __CUDACC__
#define FSDP_HD __host__ __device__
#else
#define FSDP_HD
#endif

namespace fsdp::device {

/// The largest tensor rank a kernel takes (the CPU backend's limit too).
constexpr int kMaxDims = 8;

/// Adds `v` to `*p`: atomically on the device (threads of a scatter may hit
/// one element), plainly in the host's serial loop.
/// Whether an optimizer's gradient scale lets the update run (a null scale
/// is 1; a non-finite one skips the update).
FSDP_HD inline bool updates(const float *gradScale) {
  if (!gradScale)
    return true;
#ifdef __CUDA_ARCH__
  return isfinite(*gradScale);
#else
  return std::isfinite(*gradScale);
#endif
}

FSDP_HD inline void addTo(float *p, float v) {
#ifdef __CUDA_ARCH__
  atomicAdd(p, v);
#else
  *p += v;
#endif
}

/// Records the first error a kernel meets (an index out of range) where the
/// host reads it after the step: kernels cannot return a Status.
FSDP_HD inline void flagError(int *flag, int code) {
  if (!flag)
    return;
#ifdef __CUDA_ARCH__
  atomicCAS(flag, 0, code);
#else
  if (*flag == 0)
    *flag = code;
#endif
}
enum ErrorCode : int { kIndexOutOfRange = 1, kTargetOutOfRange = 2 };

/// A tensor's element type, numbered as fsdp::DType (runtime/plan/Plan.h).
enum class ElemType { F32, I64, I1, BF16, F16 };

FSDP_HD inline float bitsToFloat(uint32_t bits) {
  float f;
  memcpy(&f, &bits, 4);
  return f;
}
FSDP_HD inline uint32_t floatToBits(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  return bits;
}
/// bfloat16 with round to nearest even, NaN kept quiet (runtime/support/
/// Half.h's conversion, usable on the device).
FSDP_HD inline uint16_t toBf16(float f) {
  uint32_t bits = floatToBits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((bits >> 16) | 0x40);
  return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}
FSDP_HD inline float fromBf16(uint16_t h) {
  return bitsToFloat((uint32_t)h << 16);
}
/// IEEE half with round to nearest even (subnormals, overflow to
/// infinity, NaN kept).
FSDP_HD inline uint16_t toF16(float f) {
  uint32_t x = floatToBits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) // NaN
    return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) // rounds to at least 65520: infinity
    return (uint16_t)(sign | 0x7c00u);
  if (a < 0x38800000u) { // below 2^-14: subnormal or zero
    if (a < 0x33000000u) // below 2^-25: rounds to zero
      return sign;
    uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    int shift = 126 - (int)(a >> 23); // 14..24
    uint32_t half = mant >> shift, rest = mant & ((1u << shift) - 1),
             mid = 1u << (shift - 1);
    if (rest > mid || (rest == mid && (half & 1u)))
      ++half;
    return (uint16_t)(sign | half);
  }
  uint32_t h = ((a >> 13) - (112u << 10)), rest = a & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
    ++h;
  return (uint16_t)(sign | h);
}
FSDP_HD inline float fromF16(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu,
           m = h & 0x3ffu;
  if (e == 0x1f)
    return bitsToFloat(sign | 0x7f800000u | (m << 13));
  if (e == 0) { // zero or subnormal: m * 2^-24
    float v = (float)m * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return bitsToFloat(sign | ((e + 112u) << 23) | (m << 13));
}

/// Element i of an f32, bf16 or f16 tensor as a float (exactly), and a
/// float stored into one (rounded as a Cast rounds): the elementwise
/// kernels compute each element in f32 from narrow operands directly,
/// which is what computing on widened f32 copies gives, element for
/// element.
FSDP_HD inline float loadFloat(ElemType t, const void *p, int64_t i) {
  switch (t) {
  case ElemType::BF16:
    return fromBf16(static_cast<const uint16_t *>(p)[i]);
  case ElemType::F16:
    return fromF16(static_cast<const uint16_t *>(p)[i]);
  default:
    return static_cast<const float *>(p)[i];
  }
}
FSDP_HD inline void storeFloat(ElemType t, void *p, int64_t i, float v) {
  switch (t) {
  case ElemType::BF16:
    static_cast<uint16_t *>(p)[i] = toBf16(v);
    break;
  case ElemType::F16:
    static_cast<uint16_t *>(p)[i] = toF16(v);
    break;
  default:
    static_cast<float *>(p)[i] = v;
  }
}

/// Element i of `p` as a double (the CPU backend's loadAsDouble).
FSDP_HD inline double loadElem(ElemType t, const void *p, int64_t i) {
  switch (t) {
  case ElemType::I64:
    return (double)static_cast<const int64_t *>(p)[i];
  case ElemType::I1:
    return static_cast<const uint8_t *>(p)[i];
  default:
    return loadFloat(t, p, i);
  }
}
FSDP_HD inline void storeElem(ElemType t, void *p, int64_t i, double v) {
  switch (t) {
  case ElemType::I64:
    static_cast<int64_t *>(p)[i] = v - v == 0 ? (int64_t)v : 0; // finite
    break;
  case ElemType::I1:
    static_cast<uint8_t *>(p)[i] = v != 0;
    break;
  default:
    storeFloat(t, p, i, (float)v);
  }
}

/// Copies one element of `n` bytes (4: one word).
FSDP_HD inline void copyElem(uint8_t *dst, const uint8_t *src, int64_t n) {
  if (n == 4) {
    memcpy(dst, src, 4);
    return;
  }
  for (int64_t b = 0; b < n; ++b)
    dst[b] = src[b];
}

/// Output dimensions and, per operand, the stride of each (0 where the
/// operand broadcasts): a linear output index to operand offsets.
struct Strided {
  int rank = 0;
  int64_t dims[kMaxDims] = {};
  int64_t strides[3][kMaxDims] = {};

  FSDP_HD void offsets(int64_t i, int64_t *off, int operands) const {
    for (int o = 0; o < operands; ++o)
      off[o] = 0;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t x = i % dims[d];
      i /= dims[d];
      for (int o = 0; o < operands; ++o)
        off[o] += x * strides[o][d];
    }
  }
};

//===----------------------------------------------------------------------===//
// Block kernels
//===----------------------------------------------------------------------===//

/// A thread block as the block kernels see it: on the device the CUDA
/// block; on the host one thread, so every loop over the block's threads
/// covers all indices, a barrier has nothing to wait for, and a sum over
/// the threads is the one thread's sum.
struct Block {
  FSDP_HD int thread() const {
#ifdef __CUDA_ARCH__
    return (int)threadIdx.x;
#else
    return 0;
#endif
  }
  FSDP_HD int threads() const {
#ifdef __CUDA_ARCH__
    return (int)blockDim.x;
#else
    return 1;
#endif
  }
  FSDP_HD void sync() const {
#ifdef __CUDA_ARCH__
    __syncthreads();
#endif
  }
  /// The sum (or maximum) of every thread's `v`, to every thread: a warp's
  /// butterfly, then the warps' results in warp order, so the same every
  /// run. `scratch`: kReduceScratch bytes of shared memory. Every thread
  /// of the block calls it.
  FSDP_HD double sum(double v, double *scratch) const {
    return combine(v, scratch, false);
  }
  FSDP_HD double max(double v, double *scratch) const {
    return combine(v, scratch, true);
  }
  FSDP_HD double combine(double v, double *scratch, bool isMax) const {
#ifdef __CUDA_ARCH__
    for (int o = 16; o > 0; o >>= 1) {
      double u = __shfl_xor_sync(0xffffffffu, v, o);
      v = isMax ? (u > v ? u : v) : v + u;
    }
    __syncthreads(); // the scratch's last readers are done
    if (threadIdx.x % 32 == 0)
      scratch[threadIdx.x / 32] = v;
    __syncthreads();
    double t = scratch[0];
    for (int w = 1; w < (int)blockDim.x / 32; ++w)
      t = isMax ? (scratch[w] > t ? scratch[w] : t) : t + scratch[w];
    return t;
#else
    (void)scratch;
    (void)isMax;
    return v;
#endif
  }
};

/// Shared memory Block::sum and Block::max need (one double a warp).
constexpr size_t kReduceScratch = 32 * sizeof(double);
/// Threads of a block that takes one row (layer norm, a loss's row).
constexpr int kRowThreads = 256;

/// Whether a functor is a block kernel: run as `f(block, index, shared)`
/// over `n` blocks of F::kThreads threads with f.smemBytes() of shared
/// memory, rather than `f(i)` over n indices.
template <typename F, typename = void>
struct IsBlockKernel : std::false_type {};
template <typename F>
struct IsBlockKernel<F, std::void_t<decltype(&F::smemBytes)>> : std::true_type {
};

/// Runs block kernel `f` over `n` blocks on the host, in order (tests and
/// the host emulation; the device launches a grid: launchBlocks), with
/// `smem` as the shared memory (grown to f.smemBytes() where smaller, so
/// the emulation allocates nothing after its first step).
template <typename F>
void runBlocksOnHost(int64_t n, const F &f, std::vector<double> &smem) {
  if (smem.size() < (f.smemBytes() + 7) / 8)
    smem.resize((f.smemBytes() + 7) / 8);
  for (int64_t i = 0; i < n; ++i)
    f(Block{}, i, reinterpret_cast<unsigned char *>(smem.data()));
}

/// Runs any kernel of this header on the host: over n indices, or a block
/// kernel over n blocks (`smem` as runBlocksOnHost's).
template <typename F>
void runKernelOnHost(int64_t n, const F &f, std::vector<double> &smem);

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// The ops of runtime/plan/UnaryOps.def, and GELU's two forms.
enum class UnaryKind {
#define FSDP_UNARY(Class, name, onnx, aten, floatOnly, scalar) Class,
#include "runtime/plan/UnaryOps.def"
#undef FSDP_UNARY
  Gelu,
  GeluTanh
};

FSDP_HD inline float unaryOp(UnaryKind k, float x) {
  switch (k) {
#define FSDP_UNARY(Class, name, onnx, aten, floatOnly, scalar)                 \
  case UnaryKind::Class:                                                       \
    return um::unary##Class(x);
#include "runtime/plan/UnaryOps.def"
#undef FSDP_UNARY
  case UnaryKind::Gelu:
    return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
  case UnaryKind::GeluTanh: {
    const float k = 0.7978845608028654f; // sqrt(2/pi)
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
  }
  }
  return x;
}

/// dy * gelu'(x) (the CPU backend's geluGrad, step for step).
FSDP_HD inline float geluGrad(bool tanhApprox, float x, float dy) {
  if (tanhApprox) {
    const float k = 0.7978845608028654f, c3 = 0.044715f; // sqrt(2/pi)
    float x2 = x * x;
    float t = tanhf(k * (x + c3 * x2 * x));
    float du = k * (1.0f + 3.0f * c3 * x2);
    return dy * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
  }
  float cdf = 0.5f * (1.0f + erff(x * 0.7071067811865476f));
  float pdf = expf(-0.5f * x * x) * 0.3989422804014327f; // 1/sqrt(2pi)
  return dy * (cdf + x * pdf);
}

/// y = dy * gelu'(x), all of one shape; each f32, bf16 or f16.
struct GeluGrad {
  bool tanhApprox;
  const void *x, *dy;
  void *y;
  ElemType tx = ElemType::F32, tdy = ElemType::F32, ty = ElemType::F32;
  FSDP_HD void operator()(int64_t i) const {
    storeFloat(
        ty, y, i,
        geluGrad(tanhApprox, loadFloat(tx, x, i), loadFloat(tdy, dy, i)));
  }
};

/// y = op(x), one shape; each f32, bf16 or f16.
struct Unary {
  UnaryKind kind;
  const void *x;
  void *y;
  ElemType tx = ElemType::F32, ty = ElemType::F32;
  FSDP_HD void operator()(int64_t i) const {
    storeFloat(ty, y, i, unaryOp(kind, loadFloat(tx, x, i)));
  }
};

enum class BinaryKind {
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Max,
  Min,
  Equal,
  Less,
  Greater,
  And,
  Or
};

/// In float for f32 tensors (pow through double on the host, as the CPU
/// backend's std::pow does), in double for integer, boolean and mixed ones.
template <typename T> FSDP_HD inline T binaryOp(BinaryKind k, T a, T b) {
  switch (k) {
  case BinaryKind::Add:
    return a + b;
  case BinaryKind::Sub:
    return a - b;
  case BinaryKind::Mul:
    return a * b;
  case BinaryKind::Div:
    return a / b;
  case BinaryKind::Pow:
    return (T)pow(a, b);
  case BinaryKind::Max: // NaN propagates, as torch.maximum
    return (a > b || a != a) ? a : b;
  case BinaryKind::Min:
    return (a < b || a != a) ? a : b;
  case BinaryKind::Equal:
    return a == b;
  case BinaryKind::Less:
    return a < b;
  case BinaryKind::Greater:
    return a > b;
  case BinaryKind::And:
    return a != 0 && b != 0;
  case BinaryKind::Or:
    return a != 0 || b != 0;
  }
  return a;
}

/// y = a op b in float, both broadcast to y (`index`: operands 0 and 1);
/// each f32, bf16 or f16.
struct Binary {
  BinaryKind kind;
  Strided index;
  const void *a, *b;
  void *y;
  ElemType ta = ElemType::F32, tb = ElemType::F32, ty = ElemType::F32;
  FSDP_HD void operator()(int64_t i) const {
    int64_t off[2];
    index.offsets(i, off, 2);
    storeFloat(
        ty, y, i,
        binaryOp(kind, loadFloat(ta, a, off[0]), loadFloat(tb, b, off[1])));
  }
};

/// y = a op b on any element types, computed in double (shape arithmetic,
/// masks, comparisons).
struct BinaryMixed {
  BinaryKind kind;
  Strided index;
  ElemType ta, tb, ty;
  const void *a, *b;
  void *y;
  FSDP_HD void operator()(int64_t i) const {
    int64_t off[2];
    index.offsets(i, off, 2);
    storeElem(ty, y, i,
              binaryOp<double>(kind, loadElem(ta, a, off[0]),
                               loadElem(tb, b, off[1])));
  }
};

/// Logical not of an i1 tensor (bytes).
struct LogicalNot {
  const uint8_t *x;
  uint8_t *y;
  FSDP_HD void operator()(int64_t i) const { y[i] = !x[i]; }
};

/// out = cond ? x : y, all broadcast to out (`index`: cond, x, y), elements
/// of `elemBytes` bytes.
struct Select {
  Strided index;
  int64_t elemBytes;
  const uint8_t *cond, *x, *y;
  uint8_t *out;
  FSDP_HD void operator()(int64_t i) const {
    int64_t off[3];
    index.offsets(i, off, 3);
    const uint8_t *src =
        cond[off[0]] ? x + off[1] * elemBytes : y + off[2] * elemBytes;
    copyElem(out + i * elemBytes, src, elemBytes);
  }
};

/// y = x converted element by element (through double, as the CPU does).
struct Cast {
  ElemType from, to;
  const void *x;
  void *y;
  FSDP_HD void operator()(int64_t i) const {
    storeElem(to, y, i, loadElem(from, x, i));
  }
};

/// y = scale * x broadcast to y (`index`: operand 0 is x).
struct Scaled {
  Strided index;
  float scale;
  const float *x;
  float *y;
  FSDP_HD void operator()(int64_t i) const {
    int64_t off;
    index.offsets(i, &off, 1);
    y[i] = scale * x[off];
  }
};

/// Keeps the upper (col - row >= k) or lower (col - row <= k) triangle of
/// each trailing [rows, cols] matrix, zeroes the rest.
struct Trilu {
  int64_t rows, cols, k;
  bool upper;
  ElemType type;
  const void *x;
  void *y;
  FSDP_HD void operator()(int64_t i) const {
    int64_t col = i % cols, row = (i / cols) % rows;
    bool keep = upper ? col - row >= k : col - row <= k;
    storeElem(type, y, i, keep ? loadElem(type, x, i) : 0.0);
  }
};

//===----------------------------------------------------------------------===//
// Reductions and normalisations
//===----------------------------------------------------------------------===//

/// SumSquares: each element squared in double, then summed.
enum class ReduceKind { Sum, Mean, Max, SumSquares };

/// One output element: its kept coordinates give a base offset in x, then
/// `count` elements over the reduced dimensions, accumulated in double.
struct Reduce {
  ReduceKind kind;
  int kept = 0, reduced = 0;
  int64_t keptDims[kMaxDims] = {}, keptStrides[kMaxDims] = {};
  int64_t redDims[kMaxDims] = {}, redStrides[kMaxDims] = {};
  int64_t count = 1;
  const void *x;
  void *y;
  ElemType tx = ElemType::F32, ty = ElemType::F32;
  /// Split (chunks > 1): index i reduces elements [c * chunkLen,
  /// (c + 1) * chunkLen) of output o (i = c * outputs + o) into
  /// partial[i], and ReduceCombine finishes; else one index an output.
  int64_t chunks = 1, chunkLen = 0, outputs = 0;
  double *partial = nullptr;

  FSDP_HD void operator()(int64_t i) const {
    int64_t o = chunks > 1 ? i % outputs : i, c = chunks > 1 ? i / outputs : 0;
    int64_t base = 0, rest = o;
    for (int d = kept - 1; d >= 0; --d) {
      base += (rest % keptDims[d]) * keptStrides[d];
      rest /= keptDims[d];
    }
    double acc = kind == ReduceKind::Max ? -INFINITY : 0.0;
    int64_t first = chunks > 1 ? c * chunkLen : 0,
            end = chunks > 1 && first + chunkLen < count ? first + chunkLen
                                                         : count;
    for (int64_t j = first; j < end; ++j) {
      int64_t off = base, r = j;
      for (int d = reduced - 1; d >= 0; --d) {
        off += (r % redDims[d]) * redStrides[d];
        r /= redDims[d];
      }
      double v = loadFloat(tx, x, off);
      acc = kind == ReduceKind::Max          ? (v > acc ? v : acc)
            : kind == ReduceKind::SumSquares ? acc + v * v
                                             : acc + v;
    }
    if (chunks > 1)
      partial[i] = acc;
    else // (an empty reduction: the identity, as on the CPU)
      storeFloat(ty, y, o,
                 (float)(kind == ReduceKind::Mean && count > 0
                             ? acc / (double)count
                             : acc));
  }
};

/// Finishes a split reduction (Reduce, LayerNormGradCols): output o
/// combines its chunks' partials in chunk order (so the same every run),
/// divided by `count` for a mean.
struct ReduceCombine {
  ReduceKind kind;
  int64_t chunks, outputs, count;
  const double *partial;
  void *y;
  ElemType ty = ElemType::F32;
  FSDP_HD void operator()(int64_t o) const {
    double acc = partial[o];
    for (int64_t c = 1; c < chunks; ++c) {
      double v = partial[c * outputs + o];
      acc = kind == ReduceKind::Max ? (v > acc ? v : acc) : acc + v;
    }
    storeFloat(ty, y, o,
               (float)(kind == ReduceKind::Mean ? acc / (double)count : acc));
  }
};

/// Softmax (or log-softmax) along one axis: row r is [outer, inner]
/// position (r / inner, r % inner), `len` elements `inner` apart.
struct SoftmaxRows {
  int64_t len, inner;
  bool log;
  const float *x;
  float *y;
  FSDP_HD void operator()(int64_t r) const {
    int64_t o = r / inner, i = r % inner;
    const float *row = x + o * len * inner + i;
    float *out = y + o * len * inner + i;
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < len; ++j)
      mx = (double)row[j * inner] > mx ? (double)row[j * inner] : mx;
    for (int64_t j = 0; j < len; ++j)
      sum += exp(row[j * inner] - mx);
    for (int64_t j = 0; j < len; ++j)
      out[j * inner] = log ? (float)(row[j * inner] - mx - ::log(sum))
                           : (float)(exp(row[j * inner] - mx) / sum);
  }
};

/// Mean and 1/sqrt(biased variance + eps) of the `cols` elements of `x`
/// from `base`, in double (two passes, as the CPU backend); every thread
/// of the block gets them. Not `centered` (rms_norm): mean 0, and rstd
/// 1/sqrt(mean(x²) + eps).
FSDP_HD inline void rowStats(const Block &blk, ElemType t, const void *x,
                             int64_t base, int64_t cols, double eps,
                             double *scratch, double &mean, double &rstd,
                             bool centered) {
  mean = 0;
  if (centered) {
    double s = 0;
    for (int64_t j = blk.thread(); j < cols; j += blk.threads())
      s += loadFloat(t, x, base + j);
    mean = blk.sum(s, scratch) / (double)cols;
  }
  double var = 0;
  for (int64_t j = blk.thread(); j < cols; j += blk.threads()) {
    double d = loadFloat(t, x, base + j) - mean;
    var += d * d;
  }
  var = blk.sum(var, scratch) / (double)cols;
  rstd = 1.0 / sqrt(var + eps);
}

/// Layer normalisation of row r (`cols` elements; a block each), scaled by
/// w and shifted by b (optional). x and y of types tx and ty, w and b of tw
/// (f32, bf16 or f16). Not `centered`: rms_norm.
struct LayerNormRows {
  static constexpr int kThreads = kRowThreads;
  int64_t cols;
  double eps;
  const void *x, *w, *b;
  void *y;
  ElemType tx = ElemType::F32, tw = ElemType::F32, ty = ElemType::F32;
  bool centered = true;
  size_t smemBytes() const { return kReduceScratch; }
  FSDP_HD void operator()(const Block &blk, int64_t r,
                          unsigned char *smem) const {
    double mean, rstd;
    rowStats(blk, tx, x, r * cols, cols, eps, reinterpret_cast<double *>(smem),
             mean, rstd, centered);
    for (int64_t j = blk.thread(); j < cols; j += blk.threads())
      storeFloat(ty, y, r * cols + j,
                 (float)((loadFloat(tx, x, r * cols + j) - mean) * rstd *
                             loadFloat(tw, w, j) +
                         (b ? loadFloat(tw, b, j) : 0.0)));
  }
};

/// Layer norm's backward, one row a block: the row's mean and rstd (kept in
/// `stats` for LayerNormGradCols) and
/// dx = rstd (g - mean(g) - x̂ mean(g x̂)), g = dy * w. x, dy and dx of
/// types tx, tdy and tdx; w of tw. Not `centered` (rms_norm_grad): no
/// mean, dx = rstd (g - x̂ mean(g x̂)).
struct LayerNormGradRows {
  static constexpr int kThreads = kRowThreads;
  int64_t cols;
  double eps;
  const void *x, *w, *dy;
  void *dx;
  double *stats; // [rows, 2]: mean, rstd
  ElemType tx = ElemType::F32, tw = ElemType::F32, tdy = ElemType::F32,
           tdx = ElemType::F32;
  bool centered = true;
  size_t smemBytes() const { return kReduceScratch; }
  FSDP_HD void operator()(const Block &blk, int64_t r,
                          unsigned char *smem) const {
    double *scratch = reinterpret_cast<double *>(smem);
    int64_t base = r * cols;
    double mean, rstd;
    rowStats(blk, tx, x, base, cols, eps, scratch, mean, rstd, centered);
    if (blk.thread() == 0) {
      stats[2 * r] = mean;
      stats[2 * r + 1] = rstd;
    }
    double mg = 0, mgx = 0;
    for (int64_t j = blk.thread(); j < cols; j += blk.threads()) {
      double gj = (double)loadFloat(tdy, dy, base + j) * loadFloat(tw, w, j);
      mg += gj;
      mgx += gj * ((loadFloat(tx, x, base + j) - mean) * rstd);
    }
    mg = blk.sum(mg, scratch) / (double)cols;
    mgx = blk.sum(mgx, scratch) / (double)cols;
    if (!centered)
      mg = 0;
    for (int64_t j = blk.thread(); j < cols; j += blk.threads()) {
      double xhat = (loadFloat(tx, x, base + j) - mean) * rstd;
      double gj = (double)loadFloat(tdy, dy, base + j) * loadFloat(tw, w, j);
      storeFloat(tdx, dx, base + j, (float)(rstd * (gj - mg - xhat * mgx)));
    }
  }
};

/// Layer norm's scale and bias gradients, one column each: sums over the
/// rows of dy x̂ and dy (after LayerNormGradRows has written `stats`); no
/// bias gradient where `db` is null (rms_norm_grad).
/// Split over rows as a Reduce is (`chunks` > 1): index i = c * cols + j
/// sums chunk c's rows into partial[i] (dw's) and partial[chunks * cols +
/// i] (db's), and two ReduceCombines finish.
struct LayerNormGradCols {
  int64_t rows, cols;
  const void *x, *dy;
  const double *stats;
  void *dw, *db;
  ElemType tx = ElemType::F32, tdy = ElemType::F32, tdw = ElemType::F32;
  int64_t chunks = 1, chunkLen = 0;
  double *partial = nullptr;
  FSDP_HD void operator()(int64_t i) const {
    int64_t j = i % cols, c = i / cols;
    int64_t first = chunks > 1 ? c * chunkLen : 0,
            end =
                chunks > 1 && first + chunkLen < rows ? first + chunkLen : rows;
    double sw = 0, sb = 0;
    for (int64_t r = first; r < end; ++r) {
      double g = loadFloat(tdy, dy, r * cols + j);
      sw += g * ((loadFloat(tx, x, r * cols + j) - stats[2 * r]) *
                 stats[2 * r + 1]);
      sb += g;
    }
    if (chunks > 1) {
      partial[i] = sw;
      partial[chunks * cols + i] = sb;
      return;
    }
    storeFloat(tdw, dw, j, (float)sw);
    if (db)
      storeFloat(tdw, db, j, (float)sb);
  }
};

//===----------------------------------------------------------------------===//
// Indexing, losses, layout, optimizer
//===----------------------------------------------------------------------===//

/// Element e = (o, j, t) of a [outer, count, inner] index space: the
/// offset of (o, idx[j], t) in a [outer, dim, inner] tensor (negative
/// indices count from the end), or -1 (flagged) when idx[j] is out of
/// range.
FSDP_HD inline int64_t indexedOffset(int64_t e, int64_t dim, int64_t inner,
                                     int64_t count, const int64_t *idx,
                                     int *error) {
  int64_t t = e % inner, j = (e / inner) % count, o = e / (inner * count);
  int64_t k = idx[j] < 0 ? idx[j] + dim : idx[j];
  if (k < 0 || k >= dim) {
    flagError(error, kIndexOutOfRange);
    return -1;
  }
  return (o * dim + k) * inner + t;
}

/// y[o, j, t] = data[o, idx[j], t] (negative indices count from the end),
/// elements of `elemBytes` bytes; one output element per index.
struct Gather {
  int64_t dim, inner, count, elemBytes;
  const uint8_t *data;
  const int64_t *idx;
  uint8_t *y;
  int *error;
  FSDP_HD void operator()(int64_t e) const {
    int64_t at = indexedOffset(e, dim, inner, count, idx, error);
    if (at < 0)
      return;
    copyElem(y + e * elemBytes, data + at * elemBytes, elemBytes);
  }
};

/// y[o, idx[j], t] += upd[o, j, t] (y holds dest already); one update
/// element per index, atomic on the device: repeated indices sum in any
/// order.
struct ScatterAdd {
  int64_t dim, inner, count;
  const float *upd;
  const int64_t *idx;
  float *y;
  int *error;
  FSDP_HD void operator()(int64_t e) const {
    int64_t at = indexedOffset(e, dim, inner, count, idx, error);
    if (at >= 0)
      addTo(y + at, upd[e]);
  }
};

/// Cross-entropy layout: input [n, classes, inner...], targets [n,
/// inner...]; position p is (p / inner, p % inner).
struct LossLayout {
  int64_t classes, inner;
  bool softmax;   // cross-entropy (log-sum-exp) or NLL of log-probs
  bool hasIgnore; // positions whose target is `ignore` count nothing
  int64_t ignore;
  const float *weight; // per-class weight, or null
  /// The logits' (and their gradient's) element type: bf16/f16 logits are
  /// read as they are, no f32 copy of a [tokens, vocabulary] tensor.
  ElemType type = ElemType::F32;
};

/// log(sum_j exp(row_j)) over `classes` elements `inner` apart from
/// element `base` of `x`, in double; every thread of the block gets it.
FSDP_HD inline double logSumExp(const Block &blk, const LossLayout &l,
                                const void *x, int64_t base, double *scratch) {
  double mx = -INFINITY, sum = 0;
  for (int64_t j = blk.thread(); j < l.classes; j += blk.threads()) {
    double v = loadFloat(l.type, x, base + j * l.inner);
    mx = v > mx ? v : mx;
  }
  mx = blk.max(mx, scratch);
  for (int64_t j = blk.thread(); j < l.classes; j += blk.threads())
    sum += exp(loadFloat(l.type, x, base + j * l.inner) - mx);
  return mx + log(blk.sum(sum, scratch));
}

/// Per position (a block each): the loss term and its weight (0 where
/// ignored), in double, for LossReduce to sum.
struct LossTerms {
  static constexpr int kThreads = kRowThreads;
  LossLayout l;
  const void *x;
  const int64_t *target;
  double *term, *weightOut;
  int *error;
  size_t smemBytes() const { return kReduceScratch; }
  FSDP_HD void operator()(const Block &blk, int64_t p,
                          unsigned char *smem) const {
    int64_t cls = target[p];
    bool ignored = l.hasIgnore && cls == l.ignore,
         bad = !ignored && (cls < 0 || cls >= l.classes);
    if (ignored || bad) { // the whole block returns
      if (blk.thread() == 0) {
        term[p] = weightOut[p] = 0;
        if (bad)
          flagError(error, kTargetOutOfRange);
      }
      return;
    }
    int64_t s = p / l.inner, i = p % l.inner;
    int64_t base = s * l.classes * l.inner + i;
    double lse =
        l.softmax ? logSumExp(blk, l, x, base, reinterpret_cast<double *>(smem))
                  : 0.0;
    if (blk.thread() == 0) {
      double w = l.weight ? l.weight[cls] : 1.0;
      weightOut[p] = w;
      term[p] = w * (lse - loadFloat(l.type, x, base + cls * l.inner));
    }
  }
};

enum class LossReduction { None, Mean, Sum };

/// The loss from LossTerms' `count` terms (one block, index 0): their sum,
/// their weighted mean, or (None) each term; `totalOut` keeps the total
/// weight for the gradient.
struct LossReduce {
  static constexpr int kThreads = kRowThreads;
  LossReduction reduction;
  int64_t count;
  const double *term, *weight;
  float *y;
  double *totalOut;
  size_t smemBytes() const { return kReduceScratch; }
  FSDP_HD void operator()(const Block &blk, int64_t,
                          unsigned char *smem) const {
    double *scratch = reinterpret_cast<double *>(smem);
    double sum = 0, total = 0;
    for (int64_t p = blk.thread(); p < count; p += blk.threads()) {
      sum += term[p];
      total += weight[p];
      if (reduction == LossReduction::None)
        y[p] = (float)term[p];
    }
    sum = blk.sum(sum, scratch);
    total = blk.sum(total, scratch);
    if (blk.thread() != 0)
      return;
    if (reduction == LossReduction::Mean)
      y[0] = (float)(sum / total);
    else if (reduction == LossReduction::Sum)
      y[0] = (float)sum;
    if (totalOut)
      *totalOut = total;
  }
};

/// The gradient of the loss for one position's row of classes (a block
/// each): g (the incoming gradient, per position for None, else a scalar)
/// times weight * (softmax - onehot), divided by the total weight for Mean.
struct LossGradRows {
  static constexpr int kThreads = kRowThreads;
  LossLayout l;
  LossReduction reduction;
  const void *x; // and y: of l.type
  const float *g;
  const int64_t *target;
  const double *total; // LossReduce's totalOut
  void *y;
  size_t smemBytes() const { return kReduceScratch; }
  FSDP_HD void operator()(const Block &blk, int64_t p,
                          unsigned char *smem) const {
    int64_t s = p / l.inner, i = p % l.inner, cls = target[p];
    int64_t base = s * l.classes * l.inner + i;
    if ((l.hasIgnore && cls == l.ignore) || cls < 0 || cls >= l.classes) {
      for (int64_t j = blk.thread(); j < l.classes; j += blk.threads())
        storeFloat(l.type, y, base + j * l.inner, 0.0f);
      return;
    }
    double scale = reduction == LossReduction::None   ? (double)g[p]
                   : reduction == LossReduction::Mean ? g[0] / *total
                                                      : (double)g[0];
    double w = l.weight ? l.weight[cls] : 1.0;
    double lse =
        l.softmax ? logSumExp(blk, l, x, base, reinterpret_cast<double *>(smem))
                  : 0;
    for (int64_t j = blk.thread(); j < l.classes; j += blk.threads()) {
      int64_t at = base + j * l.inner;
      double prob = l.softmax ? exp(loadFloat(l.type, x, at) - lse) : 0.0;
      // Through float, as the CPU backend's f32 result cast afterwards.
      storeFloat(l.type, y, at,
                 (float)(w * scale * (prob - (j == cls ? 1.0 : 0.0))));
    }
  }
};

/// im2col of a whole batch into `col`, laid out [groups][rows][N][P]
/// (runtime/plan/ConvGeometry.h): a group's columns for every image side
/// by side, so one GEMM per group covers the batch. Zeros in the padding.
struct Im2Col {
  ConvGeometry g;
  ElemType t;
  const void *x;
  void *col;
  FSDP_HD void operator()(int64_t i) const {
    int64_t p = g.positions(), q = i % p, rest = i / p;
    int64_t img = rest % g.n;
    rest /= g.n;
    int64_t s = g.source(img, rest / g.rows(), rest % g.rows(), q);
    storeFloat(t, col, i, s < 0 ? 0.0f : loadFloat(t, x, s));
  }
};

/// col2im: each input element of dx the sum of the column entries (`col`
/// as Im2Col lays it out) that read it, in ConvGeometry's order, as the
/// CPU kernel sums.
struct Col2Im {
  ConvGeometry g;
  ElemType tcol, tx;
  const void *col;
  void *dx;
  FSDP_HD void operator()(int64_t i) const {
    int64_t plane = g.h * g.w, pixels = g.c * plane;
    int64_t img = i / pixels, j = i % pixels;
    int64_t rows = g.rows(), p = g.positions();
    float sum = 0.0f;
    g.forEachReader(j / plane, (j / g.w) % g.h, j % g.w,
                    [&](int64_t gi, int64_t r, int64_t q) {
                      sum += loadFloat(tcol, col,
                                       ((gi * rows + r) * g.n + img) * p + q);
                    });
    storeFloat(tx, dx, i, sum);
  }
};

/// Element readers and writers by offset for the shared math of
/// ConvGeometry.h and BatchNormMath.h, whatever the dtype.
struct ReadElems {
  ElemType t;
  const void *p;
  FSDP_HD float operator()(int64_t i) const { return loadFloat(t, p, i); }
};
struct WriteElems {
  ElemType t;
  void *p;
  FSDP_HD void operator()(int64_t i, float v) const { storeFloat(t, p, i, v); }
};
/// Two per-channel results (a channel's statistics or gradients).
struct WriteChannel {
  ElemType t;
  void *first, *second;
  int64_t ch;
  FSDP_HD void operator()(double a, double b) const {
    storeFloat(t, first, ch, (float)a);
    storeFloat(t, second, ch, (float)b);
  }
};

/// Pooling: one output element per index (ConvGeometry.h's poolWindow).
struct PoolForward {
  ConvGeometry g;
  bool max, includePad;
  ElemType t;
  const void *x;
  void *y;
  FSDP_HD void operator()(int64_t i) const {
    int64_t p = g.positions();
    storeFloat(t, y, i,
               poolWindow(g, max, includePad, i / p / g.c, (i / p) % g.c,
                          i % p, ReadElems{t, x}, nullptr));
  }
};

/// Pooling's input gradient: one input element per index (poolInputGrad).
struct PoolBackward {
  ConvGeometry g;
  bool max, includePad;
  ElemType t;
  const void *x, *dy;
  void *dx;
  FSDP_HD void operator()(int64_t i) const {
    int64_t plane = g.h * g.w;
    storeFloat(t, dx, i,
               poolInputGrad(g, max, includePad, i / plane / g.c,
                             (i / plane) % g.c, (i / g.w) % g.h, i % g.w,
                             ReadElems{t, x}, ReadElems{t, dy}));
  }
};

/// Batch norm, one channel per index (BatchNormMath.h): y, and the
/// channel's batch mean and biased variance.
struct BatchNormChannels {
  BatchNormLayout l;
  double eps;
  ElemType t;
  const void *x, *scale, *bias;
  void *y, *mean, *var;
  FSDP_HD void operator()(int64_t ch) const {
    batchNormChannel(l, ch, eps, loadFloat(t, scale, ch),
                     loadFloat(t, bias, ch), ReadElems{t, x},
                     WriteElems{t, y}, WriteChannel{t, mean, var, ch});
  }
};

/// Batch norm's backward, one channel per index: dx, dscale, dbias.
struct BatchNormGradChannels {
  BatchNormLayout l;
  double eps;
  ElemType t;
  const void *x, *scale, *dy;
  void *dx, *dscale, *dbias;
  FSDP_HD void operator()(int64_t ch) const {
    batchNormGradChannel(l, ch, eps, loadFloat(t, scale, ch), ReadElems{t, x},
                         ReadElems{t, dy}, WriteElems{t, dx},
                         WriteChannel{t, dscale, dbias, ch});
  }
};

/// One step of a synchronised batch norm (BatchNormMath.h's
/// batchNormSyncedStep), one channel per index; the lowering all-reduces
/// `red` between the steps. `out`: y (Apply) or dx (GradApply); `first`,
/// `second`: mean and variance (Apply) or dscale and dbias (GradSums).
struct BatchNormSyncedChannels {
  BatchNormStep step;
  BatchNormLayout l;
  double eps;
  int64_t total;
  ElemType t;
  const void *x, *scale, *bias, *dy; // bias forward only, dy backward only
  void *out, *first, *second;
  float *red;
  FSDP_HD void operator()(int64_t ch) const {
    batchNormSyncedStep(step, l, ch, eps, total, loadFloat(t, scale, ch),
                        bias ? loadFloat(t, bias, ch) : 0.0f, ReadElems{t, x},
                        ReadElems{t, dy ? dy : x}, WriteElems{t, out},
                        WriteChannel{t, first, second, ch}, red);
  }
};

/// y[dst] = x[src] over an index space (`index` dims): operand 0 gives
/// the source offset, operand 1 the destination offset (both in elements
/// of `elemBytes` bytes, after a base). Transpose, slice, broadcast,
/// insert-slice, concat and split are each one or a few of these.
struct StridedCopy {
  Strided index;
  int64_t elemBytes, srcBase, dstBase;
  const uint8_t *x;
  uint8_t *y;
  FSDP_HD void operator()(int64_t i) const {
    int64_t off[2];
    index.offsets(i, off, 2);
    copyElem(y + (dstBase + off[1]) * elemBytes,
             x + (srcBase + off[0]) * elemBytes, elemBytes);
  }
};

/// The per-step scalars of the optimizers, read by the kernels from device
/// memory so that a captured step (CUDA graph) replays with new values:
/// [0] the learning-rate factor of the schedule, [1] the 1-based step.
enum StepScalar { kLrScale = 0, kStep = 1 };

/// One thread: AdamW's scalars of this step into `out` (lr, lr / (1 -
/// beta1^t), sqrt(1 - beta2^t)), rounded as the CPU backend rounds them.
struct AdamWSchedule {
  double lr, beta1, beta2;
  const double *step;
  float *out;
  FSDP_HD void operator()(int64_t) const {
    float l = (float)(lr * step[kLrScale]);
    double t = step[kStep];
    double bc1 = 1.0 - pow((double)(float)beta1, t);
    double bc2 = 1.0 - pow((double)(float)beta2, t);
    out[0] = l;
    out[1] = (float)(l / bc1);
    out[2] = (float)sqrt(bc2);
  }
};

/// One AdamW step of one element (decoupled weight decay, bias-corrected
/// moments), in the CPU backend's float arithmetic; `sched` is
/// AdamWSchedule's output, `gradScale` (or null: 1) the gradient's factor
/// (clipping); a non-finite factor skips the update (a non-finite gradient
/// norm: the state stays as it was).
struct AdamW {
  float beta1, beta2, eps, weightDecay;
  const float *sched, *gradScale;
  const float *grad;
  float *param, *m, *v;
  FSDP_HD void operator()(int64_t i) const {
    if (!updates(gradScale))
      return;
    float lr = sched[0], stepSize = sched[1], bc2Sqrt = sched[2];
    float gi = grad[i] * (gradScale ? *gradScale : 1.0f);
    param[i] *= 1.0f - lr * weightDecay;
    m[i] = m[i] * beta1 + (1.0f - beta1) * gi;
    v[i] = v[i] * beta2 + (1.0f - beta2) * gi * gi;
    float denom = sqrtf(v[i]) / bc2Sqrt + eps;
    param[i] -= stepSize * (m[i] / denom);
  }
};

/// One thread: SGD's scalars of this step (lr, and 1 when the momentum
/// buffer starts now), then marks the buffer started unless the update is
/// skipped (a non-finite gradient scale).
struct SgdSchedule {
  double lr;
  const double *step;
  uint8_t *started;
  float *out;
  const float *gradScale;
  FSDP_HD void operator()(int64_t) const {
    out[0] = (float)(lr * step[kLrScale]);
    out[1] = *started ? 0.0f : 1.0f;
    if (updates(gradScale))
      *started = 1;
  }
};

/// One SGD step of one element (torch.optim.SGD: weight decay, momentum
/// without dampening, Nesterov).
struct Sgd {
  float momentum, weightDecay;
  bool nesterov;
  const float *sched, *gradScale;
  const float *grad;
  float *param, *buf;
  FSDP_HD void operator()(int64_t i) const {
    if (!updates(gradScale))
      return;
    float lr = sched[0];
    float d =
        grad[i] * (gradScale ? *gradScale : 1.0f) + weightDecay * param[i];
    if (momentum != 0) {
      buf[i] = sched[1] != 0 ? d : momentum * buf[i] + d;
      d = nesterov ? d + momentum * buf[i] : buf[i];
    }
    param[i] -= lr * d;
  }
};

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
/// recomputed in each pass instead of stored: no scratch.
struct AttentionLayout {
  int64_t tq, tk, d, dv;
  float scale;
  bool causal;
  const float *q, *k, *v;
  AttentionMask mask = {};

  FSDP_HD int64_t lastKey(int64_t i) const {
    int64_t last = causal ? i + (tk - tq) : tk - 1;
    return last < tk - 1 ? last : tk - 1;
  }
  FSDP_HD float score(int64_t b, int64_t i, int64_t j) const {
    const float *qi = q + (b * tq + i) * d, *kj = k + (b * tk + j) * d;
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
};

/// y[b, i] = softmax(scale * q[b, i] . k[b]^T) . v[b].
struct AttentionRows {
  AttentionLayout a;
  float *y;
  FSDP_HD void operator()(int64_t r) const {
    int64_t b = r / a.tq, i = r % a.tq;
    double mx, sum;
    a.rowStats(b, i, mx, sum);
    float *yi = y + r * a.dv;
    for (int64_t c = 0; c < a.dv; ++c)
      yi[c] = 0;
    for (int64_t j = 0; j <= a.lastKey(i); ++j) {
      float p = (float)(exp(a.score(b, i, j) - mx) / sum);
      const float *vj = a.v + (b * a.tk + j) * a.dv;
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
    const float *vj = a.v + (b * a.tk + j) * a.dv;
    float s = 0;
    for (int64_t c = 0; c < a.dv; ++c)
      s += gi[c] * vj[c];
    return s;
  }
  FSDP_HD void operator()(int64_t r) const {
    int64_t b = r / a.tq, i = r % a.tq;
    double mx, sum;
    a.rowStats(b, i, mx, sum);
    const float *gi = dy + r * a.dv;
    double dot = 0;
    for (int64_t j = 0; j <= a.lastKey(i); ++j)
      dot += (double)dp(b, gi, j) * (float)(exp(a.score(b, i, j) - mx) / sum);
    float *dqi = dq + r * a.d;
    for (int64_t t = 0; t < a.d; ++t)
      dqi[t] = 0;
    for (int64_t j = 0; j <= a.lastKey(i); ++j) {
      float p = (float)(exp(a.score(b, i, j) - mx) / sum);
      float ds = p * (float)(dp(b, gi, j) - dot);
      const float *kj = a.k + (b * a.tk + j) * a.d;
      for (int64_t t = 0; t < a.d; ++t)
        dqi[t] += a.scale * ds * kj[t];
    }
    stats[3 * r] = mx;
    stats[3 * r + 1] = sum;
    stats[3 * r + 2] = dot;
  }
};

/// The gradient of AttentionRows, second pass: one key row (b, j) each,
/// summing dk_j and dv_j over the query rows that see key j, in row order.
/// Each thread owns its rows of dk and dv: no atomics, and the sums come
/// out the same on every run.
struct AttentionGradKeyRows {
  AttentionLayout a;
  const float *dy;
  const double *stats; // AttentionGradQueryRows'
  float *dk, *dv;
  FSDP_HD void operator()(int64_t r) const {
    int64_t b = r / a.tk, j = r % a.tk;
    float *dkj = dk + r * a.d, *dvj = dv + r * a.dv;
    for (int64_t t = 0; t < a.d; ++t)
      dkj[t] = 0;
    for (int64_t c = 0; c < a.dv; ++c)
      dvj[c] = 0;
    const float *vj = a.v + r * a.dv;
    // Causal: query row i sees key j once i + (tk - tq) >= j.
    int64_t first = a.causal ? j - (a.tk - a.tq) : 0;
    for (int64_t i = first < 0 ? 0 : first; i < a.tq; ++i) {
      const double *st = stats + 3 * (b * a.tq + i);
      float p = (float)(exp(a.score(b, i, j) - st[0]) / st[1]);
      const float *gi = dy + (b * a.tq + i) * a.dv,
                  *qi = a.q + (b * a.tq + i) * a.d;
      float dpij = 0;
      for (int64_t c = 0; c < a.dv; ++c)
        dpij += gi[c] * vj[c];
      float ds = p * (float)(dpij - st[2]);
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

#endif // FSDP_RUNTIME_DEVICE_DEVICEKERNELS_H
