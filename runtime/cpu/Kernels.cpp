//===- Kernels.cpp - CPU kernels of every op a plan can contain -----------===//
//
// Kernels check the shapes they are given (a malformed plan is an error, not
// an out-of-bounds access), accumulate reductions in double, and run every
// matrix product through Gemm.h (OpenBLAS or oneDNN).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Gemm.h"
#include "runtime/cpu/VectorMath.h"
#include "runtime/plan/ComputeOps.h"
#include "runtime/plan/OpShapes.h"
#include "runtime/plan/UnaryMath.h"
#include "runtime/support/Half.h"
#include "runtime/support/Threads.h"


#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>

namespace fsdp::cpu {

/// A tensor shape or stride list held inline: kernels run inside a step,
/// where nothing may allocate. Plans are limited to rank kMaxRank.
class Shape {
public:
  Shape() = default;
  Shape(size_t count, int64_t v) { assign(count, v); }
  Shape(std::initializer_list<int64_t> l) {
    for (int64_t v : l)
      push_back(v);
  }
  template <typename It> Shape(It b, It e) {
    for (; b != e; ++b)
      push_back(*b);
  }
  Shape(const std::vector<int64_t> &v) : Shape(v.begin(), v.end()) {}
  void assign(size_t count, int64_t v) {
    n = 0;
    for (size_t i = 0; i < count; ++i)
      push_back(v);
  }
  void push_back(int64_t v) {
    if (n < kMaxRank)
      d[n++] = v;
  }
  size_t size() const { return n; }
  bool empty() const { return n == 0; }
  int64_t &operator[](size_t i) { return d[i]; }
  int64_t operator[](size_t i) const { return d[i]; }
  int64_t back() const { return d[n - 1]; }
  const int64_t *begin() const { return d; }
  const int64_t *end() const { return d + n; }
  bool operator==(const Shape &o) const {
    return n == o.n && std::equal(begin(), end(), o.begin());
  }
  bool operator!=(const Shape &o) const { return !(*this == o); }

private:
  int64_t d[kMaxRank] = {};
  size_t n = 0;
};

void *Context::data(const TensorRef &t) const {
  return tensorAddress(t, arena, params, constants, grads, widened);
}

namespace {

/// Loops over more elements than this run on every core (OpenMP); smaller
/// ones stay serial, where a thread hand-off costs more than it saves.
constexpr int64_t kParallelMin = 1 << 15;

Shape stridesOf(const Shape &s) {
  Shape st(s.size(), 1);
  for (int64_t i = (int64_t)s.size() - 2; i >= 0; --i)
    st[i] = st[i + 1] * s[i + 1];
  return st;
}

/// Per-output-dimension strides of `in` broadcast to `out` (0 on broadcast
/// dims); empty when `in` does not broadcast to `out`.
bool broadcastStrides(const Shape &in, const Shape &out, Shape &strides) {
  if (in.size() > out.size())
    return false;
  Shape own = stridesOf(in);
  strides.assign(out.size(), 0);
  size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] != out[lead + d] && in[d] != 1)
      return false;
    strides[lead + d] = in[d] == 1 ? 0 : own[d];
  }
  return true;
}

/// Visits every output index with the matching offsets of up to three
/// broadcast operands.
template <typename F>
void forEach(const Shape &out, std::initializer_list<const Shape *> list, F f) {
  const Shape *const *strides = list.begin();
  size_t rank = out.size(), k = list.size();
  int64_t n = product(out);
  Shape idx(rank, 0);
  int64_t off[3] = {0, 0, 0};
  for (int64_t i = 0; i < n; ++i) {
    f(i, off);
    for (int64_t d = (int64_t)rank - 1; d >= 0; --d) {
      for (size_t o = 0; o < k; ++o)
        off[o] += (*strides[o])[d];
      if (++idx[d] < out[d])
        break;
      for (size_t o = 0; o < k; ++o)
        off[o] -= (*strides[o])[d] * out[d];
      idx[d] = 0;
    }
  }
}

int64_t attrInt(const Instruction &in, const char *name, int64_t dflt) {
  return in.attrInt(name, dflt);
}
double attrFloat(const Instruction &in, const char *name, double dflt) {
  return in.attrFloat(name, dflt);
}
bool attrBool(const Instruction &in, const char *name, bool dflt) {
  return in.attrBool(name, dflt);
}
std::string attrString(const Instruction &in, const char *name,
                       const char *dflt) {
  return in.attrString(name, dflt);
}
/// (Into an inline Shape: kernels run inside a step, where nothing may
/// allocate.)
Shape attrInts(const Instruction &in, const char *name) {
  Shape out;
  auto it = in.attrs.find(name);
  if (it != in.attrs.end() && it->is_array())
    for (const auto &v : *it)
      if (v.is_number_integer())
        out.push_back(v.get<int64_t>());
  return out;
}

double loadAsDouble(const TensorRef &t, const void *p, int64_t i) {
  switch (t.dtype) {
  case DType::F32:
    return static_cast<const float *>(p)[i];
  case DType::I64:
    return (double)static_cast<const int64_t *>(p)[i];
  case DType::I1:
    return static_cast<const uint8_t *>(p)[i];
  case DType::BF16:
    return floatFromBf16(static_cast<const uint16_t *>(p)[i]);
  case DType::F16:
    return floatFromF16(static_cast<const uint16_t *>(p)[i]);
  }
  return 0;
}
void storeDouble(const TensorRef &t, void *p, int64_t i, double v) {
  switch (t.dtype) {
  case DType::F32:
    static_cast<float *>(p)[i] = (float)v;
    break;
  case DType::I64:
    static_cast<int64_t *>(p)[i] = std::isfinite(v) ? (int64_t)v : 0;
    break;
  case DType::I1:
    static_cast<uint8_t *>(p)[i] = v != 0;
    break;
  case DType::BF16:
    static_cast<uint16_t *>(p)[i] = bf16FromFloat((float)v);
    break;
  case DType::F16:
    static_cast<uint16_t *>(p)[i] = f16FromFloat((float)v);
    break;
  }
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// How an elementwise kernel reads and writes an element type: f32 as it
/// is; bf16 and f16 widened to f32 as loaded and rounded once as stored
/// (runsNarrow: the numerics of widened copies, without the copies).
struct F32Elems {
  using T = float;
  static float load(float v) { return v; }
  static float store(float v) { return v; }
};
struct Bf16Elems {
  using T = uint16_t;
  static float load(uint16_t v) { return floatFromBf16(v); }
  static uint16_t store(float v) { return bf16FromFloat(v); }
};
struct F16Elems {
  using T = uint16_t;
  static float load(uint16_t v) { return floatFromF16(v); }
  static uint16_t store(float v) { return f16FromFloat(v); }
};

/// Calls body(E{}) with the element traits of `t` (f32, bf16 or f16).
template <typename Body> Status withElems(DType t, Body body) {
  switch (t) {
  case DType::F32:
    return body(F32Elems{});
  case DType::BF16:
    return body(Bf16Elems{});
  case DType::F16:
    return body(F16Elems{});
  default:
    return Status::error("expects f32, bf16 or f16 tensors");
  }
}

/// o[i] = f(a[i]) from element type In to Out, vectorised and over the
/// threads (a cast is f = identity).
template <typename In, typename Out, typename F>
FSDP_VECTOR_CLONES void mapLoop(const typename In::T *a, typename Out::T *o,
                                int64_t n, F f) {
#pragma omp parallel for simd if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    o[i] = Out::store(f(In::load(a[i])));
}

template <typename F> Status unary(const Instruction &in, Context &c, F f) {
  const TensorRef &x = in.in[0], &y = in.out[0];
  if (x.shape != y.shape || x.dtype != y.dtype)
    return Status::error("expects input and output of one shape and dtype");
  return withElems(x.dtype, [&](auto e) {
    using E = decltype(e);
    mapLoop<E, E>(c.get<typename E::T>(x), c.get<typename E::T>(y), x.numel(),
                  f);
    return Status::ok();
  });
}

// The elementwise unary ops of runtime/plan/UnaryOps.def: k<Class>.
#define FSDP_UNARY(Class, name, onnx, aten, floatOnly, scalar)                 \
  Status k##Class(const Instruction &in, Context &c) {                         \
    return unary(in, c, [](float x) -> float { return um::unary##Class(x); }); \
  }
#include "runtime/plan/UnaryOps.def"
#undef FSDP_UNARY

Status kGelu(const Instruction &in, Context &c) {
  if (attrString(in, "approximate", "none") == "tanh")
    return unary(in, c, [](float x) -> float {
      const float k = 0.7978845608028654f; // sqrt(2/pi)
      return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
    });
  return unary(in, c, [](float x) -> float {
    return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
  });
}

/// dy * gelu'(x), as DeviceKernels.h's geluGrad (the same float steps).
#pragma omp declare simd uniform(tanhApprox) notinbranch
inline float geluGrad(bool tanhApprox, float x, float dy) {
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

template <typename E>
FSDP_VECTOR_CLONES void geluGradLoop(bool tanhApprox, const typename E::T *px,
                                     const typename E::T *pg, typename E::T *py,
                                     int64_t n) {
  // One loop per form, so each vectorises without a branch per element.
  if (tanhApprox) {
#pragma omp parallel for simd if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i)
      py[i] = E::store(geluGrad(true, E::load(px[i]), E::load(pg[i])));
  } else {
#pragma omp parallel for simd if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i)
      py[i] = E::store(geluGrad(false, E::load(px[i]), E::load(pg[i])));
  }
}

/// On f32 tensors, or bf16/f16 ones as they are (runsNarrow).
Status kGeluGrad(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &g = in.in[1], &y = in.out[0];
  if (x.shape != y.shape || g.shape != y.shape || x.dtype != y.dtype ||
      g.dtype != y.dtype)
    return Status::error("expects x, grad and output of one shape and dtype");
  bool tanhApprox = attrString(in, "approximate", "none") == "tanh";
  return withElems(y.dtype, [&](auto e) {
    using E = decltype(e);
    geluGradLoop<E>(tanhApprox, c.get<typename E::T>(x),
                    c.get<typename E::T>(g), c.get<typename E::T>(y),
                    y.numel());
    return Status::ok();
  });
}

Status kNot(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &y = in.out[0];
  if (x.shape != y.shape || x.dtype != DType::I1 || y.dtype != DType::I1)
    return Status::error("expects i1 input and output of one shape");
  const uint8_t *a = c.get<uint8_t>(x);
  uint8_t *o = c.get<uint8_t>(y);
  for (int64_t i = 0, n = x.numel(); i < n; ++i)
    o[i] = !a[i];
  return Status::ok();
}

/// y = f(a, b) on tensors of one float type E (f32 math on loaded values):
/// no broadcast, one operand repeated along leading dimensions (a bias, a
/// scale), a scalar operand, or any broadcast (strides `sa`, `sb`).
template <typename E, typename F>
FSDP_VECTOR_CLONES void
binaryLoops(const TensorRef &a, const TensorRef &b, const TensorRef &y,
            const Shape &sa, const Shape &sb, const typename E::T *fa,
            const typename E::T *fb, typename E::T *fy, F f) {
  auto op = [&](typename E::T u, typename E::T v) {
    return E::store((float)f(E::load(u), E::load(v)));
  };
  int64_t n = y.numel();
  if (a.shape == y.shape && b.shape == y.shape) { // no broadcast
#pragma omp parallel for simd if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i)
      fy[i] = op(fa[i], fb[i]);
    return;
  }
  auto trailing = [&](const Shape &s) {
    size_t lead = y.shape.size() - s.size();
    for (size_t d = 0; d < s.size(); ++d)
      if (s[d] != y.shape[lead + d])
        return false;
    return true;
  };
  // One operand repeats along leading dimensions (a bias, a scale).
  bool bRepeats = a.shape == y.shape && trailing(b.shape);
  if (bRepeats || (b.shape == y.shape && trailing(a.shape))) {
    const typename E::T *big = bRepeats ? fa : fb, *small = bRepeats ? fb : fa;
    int64_t m = std::max<int64_t>((bRepeats ? b : a).numel(), 1);
#pragma omp parallel for if (n > kParallelMin)
    for (int64_t i = 0; i < n; i += m)
#pragma omp simd
      for (int64_t j = 0; j < m; ++j)
        fy[i + j] =
            bRepeats ? op(big[i + j], small[j]) : op(small[j], big[i + j]);
    return;
  }
  if (a.shape == y.shape && b.numel() == 1) { // tensor-scalar
    typename E::T sb0 = fb[0];
#pragma omp parallel for simd if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i)
      fy[i] = op(fa[i], sb0);
    return;
  }
  forEach(y.shape, {&sa, &sb}, [&](int64_t i, const int64_t *off) {
    fy[i] = op(fa[off[0]], fb[off[1]]);
  });
}

/// Broadcasting binary op: float math on tensors of one float type (bf16
/// and f16 loaded as f32, the result rounded once), double on the mixed
/// and integer paths (exact for the small integers shape arithmetic
/// produces). `f` is inlined per op.
template <typename F> Status binary(const Instruction &in, Context &c, F f) {
  const TensorRef &a = in.in[0], &b = in.in[1], &y = in.out[0];
  Shape sa, sb;
  if (!broadcastStrides(a.shape, y.shape, sa) ||
      !broadcastStrides(b.shape, y.shape, sb))
    return Status::error("operands " + shapeString(a.shape) + " and " +
                         shapeString(b.shape) + " do not broadcast to " +
                         shapeString(y.shape));
  const void *pa = c.data(a), *pb = c.data(b);
  void *py = c.data(y);
  bool oneFloatType = a.dtype == y.dtype && b.dtype == y.dtype &&
                      (y.dtype == DType::F32 || y.dtype == DType::BF16 ||
                       y.dtype == DType::F16);
  if (oneFloatType)
    return withElems(y.dtype, [&](auto e) {
      using E = decltype(e);
      binaryLoops<E>(a, b, y, sa, sb, static_cast<const typename E::T *>(pa),
                     static_cast<const typename E::T *>(pb),
                     static_cast<typename E::T *>(py), f);
      return Status::ok();
    });
  forEach(y.shape, {&sa, &sb}, [&](int64_t i, const int64_t *off) {
    storeDouble(
        y, py, i,
        (double)f(loadAsDouble(a, pa, off[0]), loadAsDouble(b, pb, off[1])));
  });
  return Status::ok();
}

// Generic lambdas: float math on float tensors (as ATen does), double on
// the mixed and integer paths.
#define BINARY(NAME, EXPR)                                                     \
  Status NAME(const Instruction &in, Context &c) {                             \
    return binary(in, c, [](auto a, auto b) { return EXPR; });                 \
  }
BINARY(kAdd, a + b)
BINARY(kSub, a - b)
BINARY(kMul, a *b)
BINARY(kDiv, a / b)
BINARY(kPow, std::pow(a, b))
BINARY(kMax, (a > b || a != a) ? a : b)
BINARY(kMin, (a < b || a != a) ? a : b)
BINARY(kEqual, decltype(a)(a == b))
BINARY(kLess, decltype(a)(a < b))
BINARY(kGreater, decltype(a)(a > b))
BINARY(kAnd, decltype(a)(a != 0 && b != 0))
BINARY(kOr, decltype(a)(a != 0 || b != 0))
#undef BINARY

Status kWhere(const Instruction &in, Context &c) {
  const TensorRef &cond = in.in[0], &x = in.in[1], &yv = in.in[2],
                  &out = in.out[0];
  Shape sc, sx, sy;
  if (cond.dtype != DType::I1 || x.dtype != out.dtype ||
      yv.dtype != out.dtype || !broadcastStrides(cond.shape, out.shape, sc) ||
      !broadcastStrides(x.shape, out.shape, sx) ||
      !broadcastStrides(yv.shape, out.shape, sy))
    return Status::error("operands do not broadcast to " +
                         shapeString(out.shape));
  const uint8_t *pc = c.get<uint8_t>(cond);
  int64_t size = dtypeSize(out.dtype);
  const uint8_t *px = c.get<uint8_t>(x), *py = c.get<uint8_t>(yv);
  uint8_t *po = c.get<uint8_t>(out);
  forEach(out.shape, {&sc, &sx, &sy}, [&](int64_t i, const int64_t *off) {
    std::memcpy(po + i * size,
                pc[off[0]] ? px + off[1] * size : py + off[2] * size, size);
  });
  return Status::ok();
}

Status kCast(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &y = in.out[0];
  if (x.numel() != y.numel())
    return Status::error("changes the element count");
  const void *px = c.data(x);
  void *py = c.data(y);
  int64_t n = x.numel();
  auto isFloat = [](DType t) {
    return t == DType::F32 || t == DType::BF16 || t == DType::F16;
  };
  if (x.dtype == y.dtype) {
    std::memmove(py, px, x.bytes());
    return Status::ok();
  }
  // Between float types (a bf16/f16 plan's casts, every step): one vector
  // loop, widened exactly and rounded to nearest even as storeDouble does.
  if (isFloat(x.dtype) && isFloat(y.dtype))
    return withElems(x.dtype, [&](auto in) {
      return withElems(y.dtype, [&](auto out) {
        using In = decltype(in);
        using Out = decltype(out);
        mapLoop<In, Out>(static_cast<const typename In::T *>(px),
                         static_cast<typename Out::T *>(py), n,
                         [](float v) { return v; });
        return Status::ok();
      });
    });
  for (int64_t i = 0; i < n; ++i)
    storeDouble(y, py, i, loadAsDouble(x, px, i));
  return Status::ok();
}

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
  if (va.dims[yr - 1] != vb.dims[yr - 2] || vy.dims[yr - 2] != va.dims[yr - 2] ||
      vy.dims[yr - 1] != vb.dims[yr - 1])
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
  return matmulOneDnn(
      true, va, vb, in.in.size() == 3 ? &vbias : nullptr, vy, c.data(a),
      c.data(b), in.in.size() == 3 ? c.data(in.in[2]) : nullptr, c.data(y));
}

Status kMatmul(const Instruction &in, Context &c) {
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

//===----------------------------------------------------------------------===//
// Convolution: image by image, im2col into scratch and a GEMM per group
// (runtime/plan/ConvGeometry.h); the column buffer is [groups][rows][P].
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
    pdx[i] = poolInputGrad(g, max, includePad, i / plane / g.c,
                           (i / plane) % g.c, (i / g.w) % g.h, i % g.w, loadX,
                           loadDy);
  return Status::ok();
}

/// The ranks a synchronised batch norm (sync_group_size) normalises over:
/// 0 for none, else the world, which must have that many ranks.
Status batchNormGroup(const Instruction &in, Context &c, int64_t &group) {
  group = attrInt(in, "sync_group_size", 0);
  if (group == 0)
    return Status::ok();
  if (group < 0 || !c.comm || c.comm->size(Group::World) != group)
    return Status::error("sync_group_size " + std::to_string(group) +
                         " differs from the " +
                         std::to_string(c.comm ? c.comm->size(Group::World)
                                               : 0) +
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
    FSDP_RETURN_IF_ERROR(c.comm->allReduceStart(red + first, red + first,
                                                count, Elem::F32, false,
                                                in.index, Group::World));
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
  const TensorRef &x = in.in[0], &w = in.in[1], &dy = in.in[2],
                  &dx = in.out[0], &dw = in.out[1], &db = in.out[2];
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
    return batchNormSynced(
        in, c, l,
        {BatchNormStep::Sum, BatchNormStep::Squares, BatchNormStep::GradSums,
         BatchNormStep::GradApply},
        [&](BatchNormStep step, int64_t ch, float *red) {
          batchNormSyncedStep(step, l, ch, eps, l.count() * group, pw[ch],
                              0.0f, loadX, loadDy, storeDx, grads(ch), red);
        });
#pragma omp parallel for
  for (int64_t ch = 0; ch < l.c; ++ch)
    batchNormGradChannel(l, ch, eps, pw[ch], loadX, loadDy, storeDx,
                         grads(ch));
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

//===----------------------------------------------------------------------===//
// Reductions and normalisations
//===----------------------------------------------------------------------===//

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
  if (product(kept) != y.numel() || x.dtype != DType::F32 ||
      y.dtype != DType::F32)
    return Status::error("output " + shapeString(y.shape) +
                         " does not match the reduction");
  // Each input element's output offset: kept dims' strides, 0 on reduced dims.
  Shape ks = stridesOf(kept), outStride(x.rank(), 0);
  for (int64_t d = 0, k = 0; d < x.rank(); ++d)
    if (!reduced[d])
      outStride[d] = ks[k++];
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
#pragma omp parallel for simd reduction(+ : acc) if (count > kParallelMin)
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
        acc = kind == 2 ? std::max(acc, (double)row[j]) : acc + row[j];
      py[i] = (float)(kind == 1 ? acc / count : acc);
    }
    return Status::ok();
  }
  // Reducing leading axes: output rows accumulate input rows.
  int64_t lastReduced = 0;
  while (lastReduced < x.rank() && reduced[lastReduced])
    ++lastReduced;
  bool leading = nReduced == lastReduced;
  if (leading && kind != 2) {
    double *acc =
        reinterpret_cast<double *>(c.scratch); // sized by scratchFloats
    // Columns in blocks over the threads, each block's rows in order (the
    // same sums, in the same order, as one thread).
    constexpr int64_t kBlock = 512;
#pragma omp parallel for if (n * count > kParallelMin)
    for (int64_t b = 0; b < n; b += kBlock) {
      int64_t e = std::min(n, b + kBlock);
      std::fill(acc + b, acc + e, 0.0);
      for (int64_t r = 0; r < count; ++r) {
        const float *row = px + r * n;
#pragma omp simd
        for (int64_t j = b; j < e; ++j)
          acc[j] += row[j];
      }
    }
    for (int64_t j = 0; j < n; ++j)
      py[j] = (float)(kind == 1 ? acc[j] / count : acc[j]);
    return Status::ok();
  }
  std::fill(py, py + n,
            kind == 2 ? -std::numeric_limits<float>::infinity() : 0.0f);
  forEach(x.shape, {&outStride}, [&](int64_t i, const int64_t *off) {
    float &o = py[off[0]];
    o = kind == 2 ? std::max(o, px[i]) : o + px[i];
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
#pragma omp parallel for simd reduction(+ : acc) if (n > kParallelMin)
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

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// Attention's shape: q [..., tq, d], k [..., tk, d], v [..., tk, dv], an
/// optional mask broadcast to the scores [..., tq, tk].
struct AttentionShape {
  int64_t r, tq, d, tk, dv, batch;
  Shape bshape, ms;
  const TensorRef *mask;
};

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

/// Scores of batch element `b`'s rows [blk.i0, blk.i1) against keys
/// [0, blk.kmax), masked and softmaxed into `s` (row i0, rows of tk): the
/// forward's probabilities, recomputed by the backward.
void attentionProbs(const AttentionShape &a, Context &c, const float *pq,
                    const float *pk, float scale, bool causal, int64_t b,
                    const QueryBlock &blk, float *s) {
  const float ninf = -std::numeric_limits<float>::infinity();
  sgemmSerial(false, true, blk.i1 - blk.i0, blk.kmax, a.d, scale,
              pq + (b * a.tq + blk.i0) * a.d, a.d, pk + b * a.tk * a.d, a.d,
              0.0f, s, a.tk);
  int64_t mbase = 0;
  if (a.mask)
    for (int64_t dd = (int64_t)a.bshape.size() - 1, rest = b; dd >= 0; --dd) {
      mbase += (rest % a.bshape[dd]) * a.ms[dd];
      rest /= a.bshape[dd];
    }
  for (int64_t i = blk.i0; i < blk.i1; ++i) {
    float *row = s + (i - blk.i0) * a.tk;
    if (!a.mask) { // causal: the keys after i + (tk - tq) are hidden
      if (causal)
        std::fill(row + std::clamp<int64_t>(i + (a.tk - a.tq) + 1, 0, blk.kmax),
                  row + blk.kmax, ninf);
      softmaxRow(row, row, blk.kmax, false);
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
    softmaxRow(row, row, blk.kmax, false);
  }
}

Status attentionShape(const TensorRef &q, const TensorRef &k,
                      const TensorRef &v, const TensorRef *mask,
                      AttentionShape &a) {
  a.r = q.rank();
  if (a.r < 2 || k.rank() != a.r || v.rank() != a.r)
    return Status::error("q, k, v need one rank >= 2");
  a.tq = q.shape[a.r - 2];
  a.d = q.shape[a.r - 1];
  a.tk = k.shape[a.r - 2];
  a.dv = v.shape[a.r - 1];
  if (k.shape[a.r - 1] != a.d || v.shape[a.r - 2] != a.tk ||
      !std::equal(q.shape.begin(), q.shape.end() - 2, k.shape.begin()) ||
      !std::equal(q.shape.begin(), q.shape.end() - 2, v.shape.begin()))
    return Status::error("q, k, v shapes do not match");
  Shape scores(q.shape.begin(), q.shape.end() - 1);
  scores.push_back(a.tk);
  a.mask = mask;
  if (mask && !broadcastStrides(mask->shape, scores, a.ms))
    return Status::error("mask " + shapeString(mask->shape) +
                         " does not broadcast to " + shapeString(scores));
  a.batch = product(q.shape, 0, a.r - 2);
  a.bshape = Shape(q.shape.begin(), q.shape.end() - 2);
  return Status::ok();
}

Status kAttention(const Instruction &in, Context &c) {
  const TensorRef &q = in.in[0], &k = in.in[1], &v = in.in[2], &y = in.out[0];
  AttentionShape a;
  FSDP_RETURN_IF_ERROR(
      attentionShape(q, k, v, in.in.size() == 4 ? &in.in[3] : nullptr, a));
  if (y.numel() != a.batch * a.tq * a.dv)
    return Status::error("output does not match q and v");
  float scale = (float)attrFloat(in, "scale", 1.0);
  bool causal = attrBool(in, "causal", false);
  const float *pq = c.get<float>(q), *pk = c.get<float>(k),
              *pv = c.get<float>(v);
  float *py = c.get<float>(y);
  int64_t tq = a.tq, tk = a.tk, dv = a.dv;
  int64_t blocks = queryBlockCount(a, causal);
#pragma omp parallel for
  for (int64_t b = 0; b < a.batch; ++b) {
#ifdef _OPENMP
    float *p = c.scratch + threadNum() * tq * tk; // per-thread scores
#else
    float *p = c.scratch;
#endif
    for (int64_t n = 0; n < blocks; ++n) {
      QueryBlock blk = queryBlock(a, causal, n);
      attentionProbs(a, c, pq, pk, scale, causal, b, blk, p);
      sgemmSerial(false, false, blk.i1 - blk.i0, dv, blk.kmax, 1.0f, p, tk,
                  pv + b * tk * dv, dv, 0.0f, py + (b * tq + blk.i0) * dv);
    }
  }
  return Status::ok();
}

FSDP_VECTOR_CLONES
Status kAttentionGrad(const Instruction &in, Context &c) {
  const TensorRef &q = in.in[0], &k = in.in[1], &v = in.in[2], &dy = in.in[3];
  AttentionShape a;
  FSDP_RETURN_IF_ERROR(
      attentionShape(q, k, v, in.in.size() == 5 ? &in.in[4] : nullptr, a));
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
#pragma omp parallel for
  for (int64_t b = 0; b < a.batch; ++b) {
#ifdef _OPENMP
    float *p = c.scratch + threadNum() * 2 * tq * tk;
#else
    float *p = c.scratch;
#endif
    float *dp = p + tq * tk;
    // dk and dv sum over the query blocks.
    float beta = 0.0f;
    for (int64_t n = 0; n < blocks; ++n) {
      QueryBlock blk = queryBlock(a, causal, n);
      int64_t rows = blk.i1 - blk.i0, keys = blk.kmax;
      attentionProbs(a, c, pq, pk, scale, causal, b, blk, p);
      const float *gy = pdy + (b * tq + blk.i0) * nv;
      const float *qb = pq + (b * tq + blk.i0) * d;
      // Keys past this block's reach get nothing from it: with beta 0 (the
      // first block) they are zeroed first.
      if (beta == 0.0f && keys < tk) {
        std::fill(dv + (b * tk + keys) * nv, dv + (b + 1) * tk * nv, 0.0f);
        std::fill(dk + (b * tk + keys) * d, dk + (b + 1) * tk * d, 0.0f);
      }
      // dv = pᵀ·dy ; dp = dy·vᵀ ; ds = p ⊙ (dp - rowsum(dp ⊙ p)) (into dp)
      sgemmSerial(true, false, keys, nv, rows, 1.0f, p, tk, gy, nv, beta,
                  dv + b * tk * nv);
      sgemmSerial(false, true, rows, keys, nv, 1.0f, gy, nv, pv + b * tk * nv,
                  nv, 0.0f, dp, tk);
      for (int64_t i = 0; i < rows; ++i) {
        float *dpi = dp + i * tk;
        const float *pi = p + i * tk;
        double dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int64_t j = 0; j < keys; ++j)
          dot += (double)dpi[j] * pi[j];
#pragma omp simd
        for (int64_t j = 0; j < keys; ++j)
          dpi[j] = pi[j] * (float)(dpi[j] - dot);
      }
      // dq = scale·ds·k ; dk = scale·dsᵀ·q
      sgemmSerial(false, false, rows, d, keys, scale, dp, tk, pk + b * tk * d,
                  d, 0.0f, dq + (b * tq + blk.i0) * d);
      sgemmSerial(true, false, keys, d, rows, scale, dp, tk, qb, d, beta,
                  dk + b * tk * d);
      beta = 1.0f;
    }
  }
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Indexing and losses
//===----------------------------------------------------------------------===//

Status kGather(const Instruction &in, Context &c) {
  const TensorRef &data = in.in[0], &idx = in.in[1], &y = in.out[0];
  int64_t axis = attrInt(in, "axis", 0);
  if (axis < 0 || axis >= data.rank() || idx.dtype != DType::I64 ||
      data.dtype != y.dtype)
    return Status::error("bad axis or dtypes");
  int64_t outer = product(data.shape, 0, axis), dim = data.shape[axis],
          inner = product(data.shape, axis + 1), count = idx.numel();
  if (y.numel() != outer * count * inner)
    return Status::error("output " + shapeString(y.shape) + " does not match");
  int64_t size = dtypeSize(data.dtype) * inner;
  const uint8_t *pd = c.get<uint8_t>(data);
  const int64_t *pi = c.get<int64_t>(idx);
  uint8_t *py = c.get<uint8_t>(y);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < count; ++j) {
      int64_t k = pi[j] < 0 ? pi[j] + dim : pi[j];
      if (k < 0 || k >= dim)
        return Status::error("index " + std::to_string(pi[j]) +
                             " is out of range for extent " +
                             std::to_string(dim));
      std::memcpy(py + (o * count + j) * size, pd + (o * dim + k) * size, size);
    }
  return Status::ok();
}

Status kScatterAdd(const Instruction &in, Context &c) {
  const TensorRef &dest = in.in[0], &idx = in.in[1], &upd = in.in[2],
                  &y = in.out[0];
  int64_t axis = attrInt(in, "axis", 0);
  if (axis < 0 || axis >= dest.rank() || dest.shape != y.shape ||
      idx.dtype != DType::I64)
    return Status::error("bad axis or shapes");
  int64_t outer = product(dest.shape, 0, axis), dim = dest.shape[axis],
          inner = product(dest.shape, axis + 1), count = idx.numel();
  if (upd.numel() != outer * count * inner)
    return Status::error("updates " + shapeString(upd.shape) + " do not match");
  float *py = c.get<float>(y);
  const float *pd = c.get<float>(dest), *pu = c.get<float>(upd);
  const int64_t *pi = c.get<int64_t>(idx);
  if (py != pd)
    std::memcpy(py, pd, dest.bytes());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < count; ++j) {
      int64_t k = pi[j] < 0 ? pi[j] + dim : pi[j];
      if (k < 0 || k >= dim)
        return Status::error("index " + std::to_string(pi[j]) +
                             " is out of range");
      float *row = py + (o * dim + k) * inner;
      const float *src = pu + (o * count + j) * inner;
      for (int64_t t = 0; t < inner; ++t)
        row[t] += src[t];
    }
  return Status::ok();
}

/// Shared layout of cross-entropy style ops: input [N, C, d...], target [N,
/// d...].
struct LossLayout {
  int64_t n = 0, classes = 0, inner = 0;
};
Status lossLayout(const TensorRef &x, const TensorRef &t, LossLayout &l) {
  if (x.rank() < 2 || t.dtype != DType::I64 ||
      t.numel() * x.shape[1] != x.numel())
    return Status::error("input " + shapeString(x.shape) + " and target " +
                         shapeString(t.shape) + " do not match");
  l.n = x.shape[0];
  l.classes = x.shape[1];
  l.inner = product(x.shape, 2);
  return Status::ok();
}

/// What a loss reads besides its input: the targets, the optional class
/// weight and the ignored class, checked against the layout.
struct LossTargets {
  LossLayout l;
  const int64_t *target = nullptr;
  const float *weight = nullptr; // null: every class weighs 1
  bool hasIgnore = false;
  int64_t ignore = 0;
  double weightOf(int64_t cls) const { return weight ? weight[cls] : 1.0; }
  bool ignored(int64_t cls) const { return hasIgnore && cls == ignore; }
};
Status lossTargets(const Instruction &in, Context &c, LossTargets &t) {
  FSDP_RETURN_IF_ERROR(lossLayout(in.in[0], in.in[1], t.l));
  // The optional class weight follows the targets (and, for the gradients,
  // the incoming loss gradient).
  size_t wi = in.op == "cross_entropy" || in.op == "nll_loss" ? 2 : 3;
  const TensorRef *weight = in.in.size() > wi ? &in.in[wi] : nullptr;
  if (weight && (weight->numel() != t.l.classes || weight->dtype != DType::F32))
    return Status::error("class weight " + shapeString(weight->shape) +
                         " does not match " + std::to_string(t.l.classes) +
                         " classes");
  t.target = c.get<int64_t>(in.in[1]);
  t.weight = weight ? c.get<float>(*weight) : nullptr;
  t.hasIgnore = in.attrs.contains("ignore_index");
  t.ignore = attrInt(in, "ignore_index", 0);
  return Status::ok();
}

/// Per-position terms f(pos, cls, weight, row, stride) (cls < 0: ignored);
/// returns the total weight of non-ignored positions.
template <typename F>
Status lossTerms(const Instruction &in, Context &c, bool softmax, F f,
                 double &totalWeight) {
  LossTargets t;
  FSDP_RETURN_IF_ERROR(lossTargets(in, c, t));
  const LossLayout &l = t.l;
  const float *px = c.get<float>(in.in[0]);
  totalWeight = 0;
  (void)softmax;
  for (int64_t s = 0; s < l.n; ++s)
    for (int64_t i = 0; i < l.inner; ++i) {
      int64_t pos = s * l.inner + i, cls = t.target[pos];
      if (t.ignored(cls)) {
        f(pos, -1, 0, nullptr, l.inner);
        continue;
      }
      if (cls < 0 || cls >= l.classes)
        return Status::error("target " + std::to_string(cls) +
                             " is out of range for " +
                             std::to_string(l.classes) + " classes");
      double w = t.weightOf(cls);
      totalWeight += w;
      f(pos, cls, w, px + s * l.classes * l.inner + i, l.inner);
    }
  return Status::ok();
}

double logSumExp(const float *row, int64_t classes, int64_t stride) {
  double mx = -std::numeric_limits<double>::infinity(), sum = 0;
  for (int64_t j = 0; j < classes; ++j)
    mx = std::max(mx, (double)row[j * stride]);
  for (int64_t j = 0; j < classes; ++j)
    sum += std::exp(row[j * stride] - mx);
  return mx + std::log(sum);
}

/// log(sum(exp(row))) of a contiguous row, vectorised (libmvec's expf),
/// the sum in float lanes then double.
FSDP_VECTOR_CLONES
float rowMax(const float *row, int64_t classes) {
  float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
  for (int64_t j = 0; j < classes; ++j)
    mx = row[j] > mx ? row[j] : mx;
  return mx;
}

FSDP_VECTOR_CLONES
double rowLogSumExp(const float *row, int64_t classes) {
  float mx = rowMax(row, classes), sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < classes; ++j)
    sum += expf(row[j] - mx);
  // A NaN logit makes the sum NaN (mx may have skipped it).
  return (double)mx + std::log((double)sum);
}

/// out[j] = exp(row[j] - max(row)) for a contiguous row, and its
/// log-sum-exp in `lse` (the sum as rowLogSumExp's); returns the max.
FSDP_VECTOR_CLONES
float rowExpShifted(const float *row, float *out, int64_t classes,
                    double &lse) {
  float mx = rowMax(row, classes), sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < classes; ++j) {
    float e = expf(row[j] - mx);
    out[j] = e;
    sum += e;
  }
  lse = (double)mx + std::log((double)sum);
  return mx;
}

/// A row's log-sum-exp for each of `rows` rows, on the calling thread's
/// buffer (grows once, then reused: no allocation in a step).
double *logSumExpBuffer(int64_t rows) {
  static thread_local std::vector<double> lse;
  if ((int64_t)lse.size() < rows)
    lse.resize(rows);
  return lse.data();
}

/// The log-sum-exp of every row of an [N, C] input (the common layout:
/// rows contiguous), the rows split over the threads.
const double *rowsLogSumExp(const float *x, int64_t rows, int64_t classes) {
  double *out = logSumExpBuffer(rows);
#pragma omp parallel for if (rows * classes > kParallelMin)
  for (int64_t r = 0; r < rows; ++r)
    out[r] = rowLogSumExp(x + r * classes, classes);
  return out;
}

/// Whether a softmax loss over `x` takes the row path: [N, C] f32, rows
/// contiguous (the common layout).
bool softmaxRows(const TensorRef &x, bool softmax) {
  return softmax && x.rank() == 2 && x.dtype == DType::F32;
}

/// The loss (out[0]); `lse`, when given, is every row's log-sum-exp
/// already computed (softmaxRows layouts only).
Status classificationLoss(const Instruction &in, Context &c, bool softmax,
                          const double *lse = nullptr) {
  const TensorRef &y = in.out[0];
  std::string reduction = attrString(in, "reduction", "mean");
  int64_t classes = in.in[0].rank() >= 2 ? in.in[0].shape[1] : 0;
  float *py = c.get<float>(y);
  if (reduction == "none" && y.numel() != in.in[1].numel())
    return Status::error("output does not match the targets");
  if (reduction != "none" && y.numel() != 1)
    return Status::error("a reduced loss is a scalar");
  double sum = 0, total = 0;
  const TensorRef &x = in.in[0];
  if (!lse && softmaxRows(x, softmax))
    lse = rowsLogSumExp(c.get<float>(x), x.shape[0], classes);
  FSDP_RETURN_IF_ERROR(lossTerms(
      in, c, softmax,
      [&](int64_t pos, int64_t cls, double w, const float *row,
          int64_t stride) {
        double term = 0;
        if (cls >= 0)
          term = w * ((lse       ? lse[pos]
                       : softmax ? logSumExp(row, classes, stride)
                                 : 0.0) -
                      row[cls * stride]);
        if (reduction == "none")
          py[pos] = (float)term;
        sum += term;
      },
      total));
  if (reduction == "mean")
    py[0] = (float)(sum / total);
  else if (reduction == "sum")
    py[0] = (float)sum;
  return Status::ok();
}

Status kCrossEntropy(const Instruction &in, Context &c) {
  return classificationLoss(in, c, true);
}
Status kNllLoss(const Instruction &in, Context &c) {
  return classificationLoss(in, c, false);
}

/// The gradient (cross_entropy_grad's output, cross_entropy_with_grad's
/// second). On the row path each row's log-sum-exp is computed and its
/// gradient written in one visit (the row read from memory once, then from
/// cache), and the log-sum-exps are left in logSumExpBuffer for the loss.
FSDP_VECTOR_CLONES
Status kCrossEntropyGrad(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &g = in.in[2], &y = in.out.back();
  bool softmax = attrString(in, "kind", "softmax") == "softmax";
  std::string reduction = attrString(in, "reduction", "mean");
  if (x.shape != y.shape || x.rank() < 2)
    return Status::error("output does not match the input");
  int64_t classes = x.shape[1];
  const float *pg = c.get<float>(g);
  float *py = c.get<float>(y);
  const float *px = c.get<float>(x);
  // First pass: the total weight (for mean); second: the gradient rows.
  double total = 0;
  FSDP_RETURN_IF_ERROR(lossTerms(
      in, c, softmax, [](int64_t, int64_t, double, const float *, int64_t) {},
      total));
  int64_t inner = product(x.shape, 2);
  if (softmaxRows(x, softmax)) {
    // [N, C], rows contiguous (the common case): the rows split over the
    // threads, softmax vectorised; the targets were checked by the pass
    // above.
    LossTargets t;
    FSDP_RETURN_IF_ERROR(lossTargets(in, c, t));
    int64_t rows = x.shape[0];
    double *lse = logSumExpBuffer(rows);
#pragma omp parallel for if (rows * classes > kParallelMin)
    for (int64_t r = 0; r < rows; ++r) {
      const float *row = px + r * classes;
      float *out = py + r * classes;
      int64_t cls = t.target[r];
      if (t.ignored(cls)) {
        lse[r] = 0; // (the loss skips the row)
#pragma omp simd
        for (int64_t j = 0; j < classes; ++j)
          out[j] = 0;
        continue;
      }
      // exp(x - max) into the output while summing it (one exp a logit),
      // then scaled in place by w * scale * exp(max - lse): exp(x - lse)
      // with the float max's rounding in the double factor.
      float mx = rowExpShifted(row, out, classes, lse[r]);
      double w = t.weightOf(cls);
      double scale = reduction == "none"   ? pg[r]
                     : reduction == "mean" ? pg[0] / total
                                           : pg[0];
      float ws = (float)(w * scale * std::exp((double)mx - lse[r]));
#pragma omp simd
      for (int64_t j = 0; j < classes; ++j)
        out[j] *= ws;
      out[cls] = (float)(w * scale * (std::exp((double)row[cls] - lse[r]) - 1.0));
    }
    return Status::ok();
  }
  double again = 0; // the second pass recounts; `total` must stay fixed
  return lossTerms(
      in, c, softmax,
      [&](int64_t pos, int64_t cls, double w, const float *, int64_t stride) {
        int64_t s = pos / inner, i = pos % inner;
        const float *row = px + s * classes * inner + i;
        float *out = py + s * classes * inner + i;
        double scale = reduction == "none"   ? pg[pos]
                       : reduction == "mean" ? pg[0] / total
                                             : pg[0];
        if (cls < 0) {
          for (int64_t j = 0; j < classes; ++j)
            out[j * stride] = 0;
          return;
        }
        double lse = softmax ? logSumExp(row, classes, stride) : 0;
        for (int64_t j = 0; j < classes; ++j) {
          double p = softmax ? std::exp(row[j * stride] - lse) : 0.0;
          out[j * stride] = (float)(w * scale * (p - (j == cls ? 1.0 : 0.0)));
        }
      },
      again);
}

/// The gradient first (on the row path it leaves each row's log-sum-exp
/// behind), then the loss from those and the target logits: the logits are
/// read from memory once for both.
Status kCrossEntropyWithGrad(const Instruction &in, Context &c) {
  FSDP_RETURN_IF_ERROR(kCrossEntropyGrad(in, c));
  const TensorRef &x = in.in[0];
  return classificationLoss(in, c, true,
                            softmaxRows(x, true) ? logSumExpBuffer(x.shape[0])
                                                 : nullptr);
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

Status kReshape(const Instruction &in, Context &c) {
  if (in.in[0].bytes() != in.out[0].bytes())
    return Status::error("changes the size");
  void *dst = c.data(in.out[0]);
  const void *src = c.data(in.in[0]);
  if (dst != src)
    std::memmove(dst, src, in.in[0].bytes());
  return Status::ok();
}

/// Copies the elements of a strided view of `px` (element size `size`,
/// view extents `shape`, source strides `s`, first element `base`) into
/// `py` in row-major order. Output dimensions that are contiguous in the
/// source merge first, so a head split ([B,T,H,D] -> [B,H,T,D]) copies
/// rows of D elements with memcpy; the rows are split over the threads.
/// A view whose last dimension is strided in the source (a matrix
/// transpose) copies in square tiles, so both sides stay in cache.
void stridedCopy(const uint8_t *px, uint8_t *py, int64_t size, Shape shape,
                 Shape s, int64_t base) {
  // Drop unit dimensions and merge runs contiguous in the source.
  Shape ms, mst;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    if (!ms.empty() && mst.back() == s[d] * shape[d]) {
      ms[ms.size() - 1] *= shape[d];
      mst[mst.size() - 1] = s[d];
      continue;
    }
    ms.push_back(shape[d]);
    mst.push_back(s[d]);
  }
  if (ms.empty()) {
    std::memcpy(py, px + base * size, size);
    return;
  }
  int64_t rank = (int64_t)ms.size(), inner = ms.back(), total = product(ms);
  if (total == 0)
    return;
  // The source offset of index r over the first `dims` dimensions.
  auto rowOffset = [&](int64_t r, int64_t dims) {
    int64_t off = base;
    for (int64_t d = dims - 1; d >= 0; --d) {
      off += (r % ms[d]) * mst[d];
      r /= ms[d];
    }
    return off;
  };
  if (mst.back() == 1) { // contiguous rows
    int64_t rows = total / inner, bytes = inner * size;
#pragma omp parallel for if (total > kParallelMin)
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(py + r * bytes, px + rowOffset(r, rank - 1) * size, bytes);
    return;
  }
  // The last dimension is strided. When the one before it is contiguous
  // in the source (a transpose of the last two), copy [rows x cols] tiles
  // of each plane; anything else element by element.
  if (rank < 2 || mst[rank - 2] != 1 ||
      (size != 1 && size != 2 && size != 4 && size != 8)) {
    forEach(ms, {&mst}, [&](int64_t i, const int64_t *off) {
      std::memcpy(py + i * size, px + (base + off[0]) * size, size);
    });
    return;
  }
  constexpr int64_t kTile = 32;
  int64_t rowsK = ms[rank - 2], cols = inner, colStride = mst.back();
  int64_t planes = total / (rowsK * cols);
  int64_t tilesR = (rowsK + kTile - 1) / kTile,
          tilesC = (cols + kTile - 1) / kTile;
  // One tile of elements of `size` bytes (moved as T when T has that size).
  auto tile = [&](auto element, int64_t src, uint8_t *dst, int64_t r0,
                  int64_t r1, int64_t c0, int64_t c1) {
    using T = decltype(element);
    for (int64_t cc = c0; cc < c1; ++cc)
      for (int64_t r = r0; r < r1; ++r)
        std::memcpy(dst + (r * cols + cc) * sizeof(T),
                    px + (src + r + cc * colStride) * sizeof(T), sizeof(T));
  };
  struct Bytes8 {
    uint8_t b[8];
  };
#pragma omp parallel for collapse(2) if (total > kParallelMin)
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t t = 0; t < tilesR * tilesC; ++t) {
      int64_t src = rowOffset(p, rank - 2);
      uint8_t *dst = py + p * rowsK * cols * size;
      int64_t r0 = (t / tilesC) * kTile, c0 = (t % tilesC) * kTile;
      int64_t r1 = std::min(rowsK, r0 + kTile), c1 = std::min(cols, c0 + kTile);
      switch (size) {
      case 1:
        tile(uint8_t(), src, dst, r0, r1, c0, c1);
        break;
      case 2:
        tile(uint16_t(), src, dst, r0, r1, c0, c1);
        break;
      case 4:
        tile(float(), src, dst, r0, r1, c0, c1);
        break;
      default: // 8
        tile(Bytes8(), src, dst, r0, r1, c0, c1);
      }
    }
}

/// out[index] = in[sum(start[d] + index[d] * step[d]) * inStride[d]]
Status strided(Context &c, const TensorRef &x, const TensorRef &y,
               const Shape &starts, const Shape &steps, const Shape &perm) {
  Shape xs = stridesOf(x.shape), s((size_t)y.rank(), 0);
  int64_t base = 0;
  for (int64_t d = 0; d < y.rank(); ++d) {
    int64_t src = perm.empty() ? d : perm[d];
    s[d] = xs[src] * (steps.empty() ? 1 : steps[d]);
    base += (starts.empty() ? 0 : starts[d]) * xs[src];
  }
  stridedCopy(c.get<uint8_t>(x), c.get<uint8_t>(y), dtypeSize(x.dtype), y.shape,
              s, base);
  return Status::ok();
}

Status kTranspose(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &y = in.out[0];
  Shape perm = attrInts(in, "perm");
  if ((int64_t)perm.size() != x.rank() || y.rank() != x.rank())
    return Status::error("bad permutation");
  bool seen[kMaxRank] = {};
  for (size_t d = 0; d < perm.size(); ++d) {
    if (perm[d] < 0 || perm[d] >= x.rank() || seen[perm[d]] ||
        y.shape[d] != x.shape[perm[d]])
      return Status::error("bad permutation");
    seen[perm[d]] = true;
  }
  return strided(c, x, y, {}, {}, perm);
}

/// Checks a strided box of `x` with the extents of `box`.
Status checkBox(const TensorRef &x, const Shape &box, const Shape &starts,
                const Shape &steps) {
  if ((int64_t)box.size() != x.rank() || starts.size() != box.size() ||
      steps.size() != box.size())
    return Status::error("needs one start and stride per dimension");
  for (int64_t d = 0; d < x.rank(); ++d)
    if (starts[d] < 0 || steps[d] <= 0 ||
        (box[d] > 0 && starts[d] + (box[d] - 1) * steps[d] >= x.shape[d]))
      return Status::error("box outside " + shapeString(x.shape));
  return Status::ok();
}

Status kSlice(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &y = in.out[0];
  Shape starts = attrInts(in, "starts"), steps = attrInts(in, "strides");
  FSDP_RETURN_IF_ERROR(checkBox(x, y.shape, starts, steps));
  return strided(c, x, y, starts, steps, {});
}

Status kInsertSlice(const Instruction &in, Context &c) {
  const TensorRef &dest = in.in[0], &src = in.in[1], &y = in.out[0];
  Shape starts = attrInts(in, "starts"), steps = attrInts(in, "strides");
  if (dest.shape != y.shape || dest.dtype != src.dtype)
    return Status::error("output does not match the destination");
  FSDP_RETURN_IF_ERROR(checkBox(y, src.shape, starts, steps));
  uint8_t *py = c.get<uint8_t>(y);
  if (py != c.get<uint8_t>(dest))
    std::memcpy(py, c.get<uint8_t>(dest), dest.bytes());
  Shape ys = stridesOf(y.shape), s((size_t)y.rank(), 0);
  int64_t base = 0;
  for (int64_t d = 0; d < y.rank(); ++d) {
    s[d] = ys[d] * steps[d];
    base += starts[d] * ys[d];
  }
  int64_t size = dtypeSize(y.dtype);
  const uint8_t *ps = c.get<uint8_t>(src);
  forEach(src.shape, {&s}, [&](int64_t i, const int64_t *off) {
    std::memcpy(py + (base + off[0]) * size, ps + i * size, size);
  });
  return Status::ok();
}

Status kConcat(const Instruction &in, Context &c) {
  const TensorRef &y = in.out[0];
  int64_t axis = attrInt(in, "axis", 0), outer, inner;
  FSDP_RETURN_IF_ERROR(concatLayout(in.in, y, axis, false, outer, inner));
  int64_t size = dtypeSize(y.dtype);
  uint8_t *py = c.get<uint8_t>(y);
  int64_t row = y.shape[axis] * inner * size, at = 0;
  for (const TensorRef &x : in.in) {
    int64_t chunk = x.shape[axis] * inner * size;
    const uint8_t *px = c.get<uint8_t>(x);
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(py + o * row + at, px + o * chunk, chunk);
    at += chunk;
  }
  return Status::ok();
}

Status kSplit(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0];
  int64_t axis = attrInt(in, "axis", 0), outer, inner;
  FSDP_RETURN_IF_ERROR(concatLayout(in.out, x, axis, true, outer, inner));
  int64_t size = dtypeSize(x.dtype);
  const uint8_t *px = c.get<uint8_t>(x);
  int64_t row = x.shape[axis] * inner * size, at = 0;
  for (const TensorRef &y : in.out) {
    int64_t chunk = y.shape[axis] * inner * size;
    uint8_t *py = c.get<uint8_t>(y);
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(py + o * chunk, px + o * row + at, chunk);
    at += chunk;
  }
  return Status::ok();
}

Status kBroadcast(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &y = in.out[0];
  Shape s;
  if (!broadcastStrides(x.shape, y.shape, s) || x.dtype != y.dtype)
    return Status::error(shapeString(x.shape) + " does not broadcast to " +
                         shapeString(y.shape));
  int64_t size = dtypeSize(x.dtype);
  int64_t n = y.numel(), block = x.numel();
  // x repeated whole: a scalar (a gradient's zeros), or a tensor whose shape
  // is y's trailing extents (a bias over rows). Copies at memory speed.
  bool repeated = block > 0 && n % block == 0 && x.rank() <= y.rank() &&
                  std::equal(x.shape.begin(), x.shape.end(),
                             y.shape.end() - x.rank());
  if (repeated && size == 4) {
    const float *px = c.get<float>(x);
    float *py = c.get<float>(y);
    if (block == 1) {
      float v = px[0];
#pragma omp parallel for simd if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i)
        py[i] = v;
    } else {
#pragma omp parallel for if (n > kParallelMin)
      for (int64_t r = 0; r < n / block; ++r)
        std::memcpy(py + r * block, px, block * sizeof(float));
    }
    return Status::ok();
  }
  if (size == 4) {
    const float *px = c.get<float>(x);
    float *py = c.get<float>(y);
    forEach(y.shape, {&s},
            [&](int64_t i, const int64_t *off) { py[i] = px[off[0]]; });
    return Status::ok();
  }
  const uint8_t *px = c.get<uint8_t>(x);
  uint8_t *py = c.get<uint8_t>(y);
  forEach(y.shape, {&s}, [&](int64_t i, const int64_t *off) {
    std::memcpy(py + i * size, px + off[0] * size, size);
  });
  return Status::ok();
}

Status kTrilu(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &y = in.out[0];
  if (x.shape != y.shape || x.rank() < 2)
    return Status::error("needs rank >= 2 and one shape");
  int64_t k = attrInt(in, "k", 0);
  bool upper = attrBool(in, "upper", true);
  int64_t rows = x.shape[x.rank() - 2], cols = x.shape[x.rank() - 1];
  const void *px = c.data(x);
  void *py = c.data(y);
  for (int64_t i = 0, n = x.numel(); i < n; ++i) {
    int64_t col = i % cols, row = (i / cols) % rows;
    bool keep = upper ? col - row >= k : col - row <= k;
    storeDouble(y, py, i, keep ? loadAsDouble(x, px, i) : 0.0);
  }
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Optimizers (torch.optim semantics)
//===----------------------------------------------------------------------===//

/// The parameter index and the gradient scale (clipping) of an update. A
/// non-finite scale (the plan makes it so when the gradient norm is not
/// finite) skips the update: parameter and moments stay as they were.
Status optimizerArgs(const Instruction &in, Context &c, int64_t &param,
                     float &scale) {
  param = attrInt(in, "param", -1);
  if (param < 0 || param >= (int64_t)c.params.size() || !c.params[param] ||
      !c.optimizer)
    return Status::error("bad parameter index");
  scale = 1.0f;
  if (in.in.size() == 2) {
    if (in.in[1].numel() != 1 || in.in[1].dtype != DType::F32)
      return Status::error("the gradient scale must be an f32 scalar");
    scale = *c.get<float>(in.in[1]);
  }
  if (c.captureGrads) {
    const float *g = c.get<float>(in.in[0]);
    (*c.captureGrads)[param].assign(g, g + in.in[0].numel());
  }
  return Status::ok();
}

FSDP_VECTOR_CLONES
Status kAdamW(const Instruction &in, Context &c) {
  int64_t param;
  float scale;
  FSDP_RETURN_IF_ERROR(optimizerArgs(in, c, param, scale));
  if (!std::isfinite(scale))
    return Status::ok();
  OptimizerState &s = *c.optimizer;
  float lr = (float)(attrFloat(in, "lr", 1e-3) * s.lrScale);
  float b1 = (float)attrFloat(in, "beta1", 0.9),
        b2 = (float)attrFloat(in, "beta2", 0.999);
  float eps = (float)attrFloat(in, "eps", 1e-8),
        wd = (float)attrFloat(in, "weight_decay", 0.01);
  int64_t n = in.in[0].numel();
  std::vector<float> &m = s.first[param], &v = s.second[param];
  if ((int64_t)m.size() != n || (int64_t)v.size() != n)
    return Status::error("optimizer state does not match the gradient");
  // One pass over the four arrays, split over the threads and vectorised
  // (each element's arithmetic is the same in any order: the results do
  // not depend on the thread count).
  const float *__restrict g = c.get<float>(in.in[0]);
  float *__restrict p = c.params[param];
  float *__restrict pm = m.data();
  float *__restrict pv = v.data();
  double bc1 = 1.0 - std::pow((double)b1, (double)s.step);
  double bc2 = 1.0 - std::pow((double)b2, (double)s.step);
  float stepSize = (float)(lr / bc1), bc2Sqrt = (float)std::sqrt(bc2);
  float decay = 1.0f - lr * wd;
#pragma omp parallel for simd if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    float gi = g[i] * scale;
    float mi = pm[i] * b1 + (1.0f - b1) * gi;
    float vi = pv[i] * b2 + (1.0f - b2) * gi * gi;
    pm[i] = mi;
    pv[i] = vi;
    float denom = std::sqrt(vi) / bc2Sqrt + eps;
    p[i] = p[i] * decay - stepSize * (mi / denom);
  }
  return Status::ok();
}

FSDP_VECTOR_CLONES
Status kSgd(const Instruction &in, Context &c) {
  int64_t param;
  float scale;
  FSDP_RETURN_IF_ERROR(optimizerArgs(in, c, param, scale));
  if (!std::isfinite(scale))
    return Status::ok();
  OptimizerState &s = *c.optimizer;
  float lr = (float)(attrFloat(in, "lr", 1e-3) * s.lrScale);
  float mu = (float)attrFloat(in, "momentum", 0),
        wd = (float)attrFloat(in, "weight_decay", 0);
  bool nesterov = attrBool(in, "nesterov", false);
  int64_t n = in.in[0].numel();
  const float *__restrict g = c.get<float>(in.in[0]);
  float *__restrict p = c.params[param];
  std::vector<float> &state = s.first[param];
  if ((int64_t)state.size() != n)
    return Status::error("optimizer state does not match the gradient");
  float *__restrict buf = state.data();
  bool first = !s.started[param];
#pragma omp parallel for simd if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    float d = g[i] * scale + wd * p[i];
    if (mu != 0) {
      buf[i] = first ? d : mu * buf[i] + d;
      d = nesterov ? d + mu * buf[i] : buf[i];
    }
    p[i] -= lr * d;
  }
  s.started[param] = 1;
  return Status::ok();
}

Status kAccumulateGrad(const Instruction &in, Context &c) {
  int64_t param = attrInt(in, "param", -1);
  if (param < 0 || param >= (int64_t)c.grads.size() || !c.grads[param])
    return Status::error("no gradient accumulator for this parameter");
  const float *g = c.get<float>(in.in[0]);
  float *acc = c.grads[param];
  for (int64_t i = 0, n = in.in[0].numel(); i < n; ++i)
    acc[i] += g[i];
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Collectives (started here, completed by `wait`)
//===----------------------------------------------------------------------===//

/// The collective's group (`group`: world, shard or replicate), checked
/// against its group_size.
Status groupOf(const Instruction &in, Context &c, Group &g) {
  std::string name = attrString(in, "group", "world");
  g = name == "shard"       ? Group::Shard
      : name == "replicate" ? Group::Replicate
      : name == "block"     ? Group::Block
                            : Group::World;
  if (name != "world" && name != "shard" && name != "replicate" &&
      name != "block")
    return Status::error("unknown group '" + name + "'");
  if (!c.comm || attrInt(in, "group_size", 0) != c.comm->size(g))
    return Status::error(
        "group_size " + std::to_string(attrInt(in, "group_size", 0)) +
        " differs from the " + std::to_string(c.comm ? c.comm->size(g) : 0) +
        " ranks of its " + name + " group");
  return Status::ok();
}

/// The element type a collective sums in (f32, bf16 or f16).
bool sumElem(DType t, Elem &e) {
  e = t == DType::BF16 ? Elem::BF16 : t == DType::F16 ? Elem::F16 : Elem::F32;
  return t == DType::F32 || t == DType::BF16 || t == DType::F16;
}

Status kAllReduce(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &y = in.out[0];
  Elem e;
  if (x.numel() != y.numel() || x.dtype != y.dtype || !sumElem(x.dtype, e) ||
      !c.comm)
    return Status::error("expects float input and output of one size and "
                         "dtype");
  Group g;
  FSDP_RETURN_IF_ERROR(groupOf(in, c, g));
  std::string reduction = attrString(in, "reduction", "sum");
  return c.comm->allReduceStart(c.data(x), c.data(y), x.numel(), e,
                                reduction == "avg", in.index, g);
}

Status kAllGather(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &y = in.out[0];
  Group g;
  FSDP_RETURN_IF_ERROR(groupOf(in, c, g));
  int64_t group = c.comm->size(g);
  bool floating =
      x.dtype == DType::F32 || x.dtype == DType::BF16 || x.dtype == DType::F16;
  if (!floating || y.dtype != x.dtype || x.numel() * group != y.numel())
    return Status::error("expects float shards gathered over " +
                         std::to_string(group) + " ranks into one dtype");
  return c.comm->allGatherStart(c.data(x), c.data(y), x.numel(),
                                dtypeSize(x.dtype), in.index, g);
}

Status kReduceScatter(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &y = in.out[0];
  Group g;
  FSDP_RETURN_IF_ERROR(groupOf(in, c, g));
  int64_t group = c.comm->size(g);
  Elem e;
  if (x.dtype != y.dtype || !sumElem(x.dtype, e) ||
      y.numel() * group != x.numel())
    return Status::error("expects a float buffer scattered over " +
                         std::to_string(group) + " ranks in one dtype");
  std::string reduction = attrString(in, "reduction", "sum");
  return c.comm->reduceScatterStart(c.data(x), c.data(y), y.numel(), e,
                                    reduction == "avg", in.index, g);
}

bool isFloat(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::F16;
}

/// The flat gradient of a unit: each input at its offset, zeros elsewhere;
/// float inputs of another dtype converted as kCast converts.
Status kPack(const Instruction &in, Context &c) {
  const TensorRef &y = in.out[0];
  auto found = in.attrs.find("offsets");
  const nlohmann::json *offsets = found != in.attrs.end() ? &*found : nullptr;
  if (!offsets || !offsets->is_array() || offsets->size() != in.in.size() ||
      !isFloat(y.dtype))
    return Status::error("needs one offset per input and a float result");
  uint8_t *out = static_cast<uint8_t *>(c.data(y));
  std::memset(out, 0, y.bytes());
  for (size_t i = 0; i < in.in.size(); ++i) {
    const nlohmann::json &o = (*offsets)[i];
    int64_t off = o.is_number_integer() ? o.get<int64_t>() : -1;
    const TensorRef &x = in.in[i];
    if (off < 0 || !isFloat(x.dtype) || off + x.numel() > y.numel())
      return Status::error("input " + std::to_string(i) +
                           " does not fit at its offset");
    const void *px = c.data(x);
    if (x.dtype == y.dtype) {
      std::memcpy(out + off * dtypeSize(y.dtype), px, x.bytes());
      continue;
    }
    for (int64_t j = 0, n = x.numel(); j < n; ++j)
      storeDouble(y, out, off + j, loadAsDouble(x, px, j));
  }
  return Status::ok();
}

/// Partial resharding: keep chunk (rank in the block) of a gathered buffer.
Status kReshard(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &y = in.out[0];
  int64_t n = attrInt(in, "group_size", 0);
  if (!c.comm || n != c.comm->size(Group::Block) || x.dtype != y.dtype ||
      y.numel() * n != x.numel())
    return Status::error(
        "keeps 1/" + std::to_string(n) +
        " of a buffer, but the block group has " +
        std::to_string(c.comm ? c.comm->size(Group::Block) : 0) +
        " ranks or the sizes differ");
  int64_t bytes = y.bytes();
  std::memcpy(c.data(y),
              static_cast<const uint8_t *>(c.data(x)) +
                  c.comm->rank(Group::Block) * bytes,
              bytes);
  return Status::ok();
}

/// The planner already reuses a freed buffer; nothing happens at run time.
Status kFree(const Instruction &, Context &) { return Status::ok(); }

Status kWait(const Instruction &in, Context &c) {
  if (!c.comm)
    return Status::error("no communicator");
  return c.comm->wait(in.start);
}

struct OpInfo {
  Kernel kernel;
  int minIn, maxIn, outs; // outs < 0: one or more
};

const std::map<std::string, OpInfo> &table() {
  static const std::map<std::string, OpInfo> t = {
#define FSDP_OP(name, cpu, device, minIn, maxIn, outs, rules)                  \
  {name, {cpu, minIn, maxIn, outs}},
#include "runtime/plan/Ops.def"
#undef FSDP_OP
  };
  return t;
}

/// Attributes that name one of a few choices: each must be a string and
/// one of them (a kernel reading another value would fall back to a
/// default and train differently with exit 0: `reduction: "bogus"` gave
/// the mean).
Status checkChoices(const Instruction &instr) {
  bool collective =
      instr.op == "all_reduce" || instr.op == "reduce_scatter_start";
  struct Rule {
    const char *attr;
    std::vector<const char *> values;
  };
  static const std::vector<Rule> collectiveRules = {
      {"reduction", {"sum", "avg"}},
      {"group", {"world", "shard", "replicate", "block"}}};
  static const std::vector<Rule> computeRules = {
      {"reduction", {"mean", "sum", "none"}},
      {"approximate", {"none", "tanh"}},
      {"kind", {"softmax", "nll"}},
      {"group", {"world", "shard", "replicate", "block"}}};
  for (const Rule &rule : collective ? collectiveRules : computeRules) {
    auto a = instr.attrs.find(rule.attr);
    if (a != instr.attrs.end())
      FSDP_RETURN_IF_ERROR(
          checkChoice(std::string("attribute '") + rule.attr + "'",
                      a->is_string() ? a->get<std::string>() : a->dump(),
                      rule.values));
  }
  return Status::ok();
}

} // namespace

Status checkInstruction(const Plan &plan, const Instruction &instr) {
  auto it = table().find(instr.op);
  if (it == table().end())
    return Status::error("unknown op '" + instr.op + "'");
  FSDP_RETURN_IF_ERROR(checkChoices(instr));
  const OpInfo &info = it->second;
  int n = (int)instr.in.size(), m = (int)instr.out.size();
  if (n < info.minIn || n > info.maxIn)
    return Status::error("expects " + std::to_string(info.minIn) + " to " +
                         std::to_string(info.maxIn) + " inputs, got " +
                         std::to_string(n));
  if ((info.outs >= 0 && m != info.outs) || (info.outs < 0 && m < 1))
    return Status::error("has " + std::to_string(m) + " outputs");
  for (const TensorRef &t : instr.out)
    if (t.space != Space::Arena)
      return Status::error("writes outside the arena");
  if (instr.op == "assign_buffer") {
    int64_t p = attrInt(instr, "param", -1);
    if (p < 0 || p >= (int64_t)plan.slotCount() ||
        plan.slotNumel(p) != instr.in[0].numel() || plan.slotTrainable(p))
      return Status::error("does not name a buffer matching its value");
    return Status::ok();
  }
  if (info.outs == 0 && instr.op != "free") {
    int64_t p = attrInt(instr, "param", -1);
    if (p < 0 || p >= (int64_t)plan.slotCount() ||
        plan.slotNumel(p) != instr.in[0].numel() || plan.slotNumel(p) == 0 ||
        !plan.slotTrainable(p) || instr.in[0].dtype != DType::F32)
      return Status::error("does not name a parameter matching its gradient");
  }
  return Status::ok();
}

bool runsNarrow(const Instruction &instr) {
  if (instr.out.size() != 1 || (instr.op == "matmul" && instr.in.size() < 2))
    return false;
  DType type = instr.out[0].dtype;
  bool one = type == DType::BF16 || type == DType::F16;
  for (const auto *list : {&instr.in, &instr.out})
    for (const TensorRef &t : *list)
      one = one && t.dtype == type && t.rank() <= (int64_t)kMaxRank;
  return fsdp::runsNarrowOnCpu(instr.op, one, type == DType::BF16,
                               nativeBf16Gemm());
}

Kernel kernelFor(const std::string &op) {
  auto it = table().find(op);
  return it == table().end() ? nullptr : it->second.kernel;
}

int64_t scratchFloats(const Instruction &instr) {
  std::vector<std::vector<int64_t>> in, out;
  for (const TensorRef &t : instr.in)
    in.push_back(t.shape);
  for (const TensorRef &t : instr.out)
    out.push_back(t.shape);
  return cpuScratchFloats(instr.op, in, out,
                          attrInt(instr, "sync_group_size", 0), maxThreads());
}

} // namespace fsdp::cpu
