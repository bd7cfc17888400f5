//===- Elementwise.cpp - Elementwise kernels (CPU) ------------------------===//
//
// Elementwise ops: unary (UnaryOps.def), GELU, binary with broadcasting, where,
// casts. (Declared in KernelSupport.h; dispatched by runtime/cpu/Kernels.cpp.)
//
//===----------------------------------------------------------------------===//
#include "common/CostRows.h"
#include "common/Philox.h"
#include "runtime/cpu/kernels/KernelSupport.h"

#include <string_view>

namespace fsdp::cpu::kernels {

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
#pragma omp parallel for simd if (parallel : n > kParallelMin)
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

/// y = f(x) on an i64 tensor (neg, abs: UnaryOps.def's rows that take
/// integers), exactly.
Status integerUnary(const Instruction &in, Context &c, int64_t (*f)(int64_t)) {
  const TensorRef &x = in.in[0], &y = in.out[0];
  if (x.shape != y.shape || y.dtype != DType::I64 || !f)
    return Status::error("expects i64 input and output of one shape");
  const int64_t *px = c.get<int64_t>(x);
  int64_t *py = c.get<int64_t>(y);
  for (int64_t i = 0, n = x.numel(); i < n; ++i)
    py[i] = f(px[i]);
  return Status::ok();
}

// The elementwise unary ops of common/UnaryOps.def: k<Class>; the rows
// that take integers compute i64 tensors in int64.
#define FSDP_UNARY(Class, name, onnx, aten, floatOnly, scalar)                 \
  Status k##Class(const Instruction &in, Context &c) {                         \
    if (!(floatOnly) && in.in[0].dtype == DType::I64)                          \
      return integerUnary(in, c, um::integerUnary(name));                      \
    return unary(in, c, [](float x) -> float { return um::unary##Class(x); }); \
  }
#include "common/UnaryOps.def"
#undef FSDP_UNARY

/// torch's dropout: element i of this rank's tensor is element
/// rank·numel + i of the global batch; its mask comes from (seed, step, that
/// index) alone (common/Philox.h), so forward, backward and recomputation
/// draw the same one.
Status kDropout(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &y = in.out[0];
  if (x.shape != y.shape || x.dtype != DType::F32 || y.dtype != DType::F32)
    return Status::error("expects f32 input and output of one shape");
  double p = attrFloat(in, "p", 0.0);
  if (!(p >= 0 && p <= 1))
    return Status::error("p must lie in [0, 1]");
  uint64_t seed = (uint64_t)attrInt(in, "seed", 0);
  uint64_t step = c.optimizer ? (uint64_t)c.optimizer->drawStep : 0;
  int64_t n = x.numel();
  uint64_t offset = (uint64_t)(c.comm ? c.comm->rank() : 0) * (uint64_t)n;
  const float *px = c.get<float>(x);
  float *py = c.get<float>(y);
  float keep = (float)p, scale = p < 1 ? (float)(1.0 / (1.0 - p)) : 0.0f;
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    py[i] = dropoutKeeps(seed, step, offset + (uint64_t)i, keep) ? px[i] * scale
                                                                 : 0.0f;
  return Status::ok();
}

/// torch's rand: element i of this rank's tensor is element rank·numel + i
/// of the global batch, its draw a function of (seed, step, that index)
/// (common/Philox.h), as dropout's mask.
/// A bf16 or f16 result draws as many bits as its significand holds.
Status kUniform(const Instruction &in, Context &c) {
  const TensorRef &y = in.out[0];
  uint64_t seed = (uint64_t)attrInt(in, "seed", 0);
  uint64_t step = c.optimizer ? (uint64_t)c.optimizer->drawStep : 0;
  int64_t n = y.numel();
  uint64_t offset = (uint64_t)(c.comm ? c.comm->rank() : 0) * (uint64_t)n;
  int bits = y.dtype == DType::BF16 ? 8 : y.dtype == DType::F16 ? 11 : 24;
  return withElems(y.dtype, [&](auto e) {
    using E = decltype(e);
    auto *py = c.get<typename E::T>(y);
#pragma omp parallel for if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i)
      py[i] = E::store(uniformDraw(seed, step, offset + (uint64_t)i, bits));
    return Status::ok();
  });
}

Status kGelu(const Instruction &in, Context &c) {
  if (attrString(in, "approximate", "none") == "tanh")
    return unary(in, c, [](float x) -> float { return um::geluTanh(x); });
  return unary(in, c, [](float x) -> float { return um::gelu(x); });
}

template <typename E>
FSDP_VECTOR_CLONES void geluGradLoop(bool tanhApprox, const typename E::T *px,
                                     const typename E::T *pg, typename E::T *py,
                                     int64_t n) {
  // One loop per form, so each vectorises without a branch per element.
  if (tanhApprox) {
#pragma omp parallel for simd if (parallel : n > kParallelMin)
    for (int64_t i = 0; i < n; ++i)
      py[i] = E::store(um::geluGrad(true, E::load(px[i]), E::load(pg[i])));
  } else {
#pragma omp parallel for simd if (parallel : n > kParallelMin)
    for (int64_t i = 0; i < n; ++i)
      py[i] = E::store(um::geluGrad(false, E::load(px[i]), E::load(pg[i])));
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
  // The loop the cost model keys its fit by (common/CostRows.h).
  BinaryPath path = binaryPath(a.shape.data(), a.shape.size(), b.shape.data(),
                               b.shape.size(), y.shape.data(), y.shape.size());
  if (path == BinaryPath::Plain) { // no broadcast
#pragma omp parallel for simd if (parallel : n > kParallelMin)
    for (int64_t i = 0; i < n; ++i)
      fy[i] = op(fa[i], fb[i]);
    return;
  }
  // One operand repeats along leading dimensions (a bias, a scale).
  if (path == BinaryPath::Repeat) {
    bool bRepeats = a.shape == y.shape;
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
  if (path == BinaryPath::Scalar) { // tensor-scalar
    typename E::T sb0 = fb[0];
#pragma omp parallel for simd if (parallel : n > kParallelMin)
    for (int64_t i = 0; i < n; ++i)
      fy[i] = op(fa[i], sb0);
    return;
  }
  forEach(y.shape, {&sa, &sb}, [&](int64_t i, const int64_t *off) {
    fy[i] = op(fa[off[0]], fb[off[1]]);
  });
}

/// Broadcasting binary op: float math on tensors of one float type (bf16
/// and f16 loaded as f32, the result rounded once); int64 math, exact, on
/// two i64 operands (`integer`, BinaryOps.def's integer column; a zero
/// divisor of `divides` is an error, as in PyTorch's CPU kernel); double
/// on the mixed paths. `f` and `integer` are inlined per op.
template <typename F, typename I>
Status binary(const Instruction &in, Context &c, F f, I integer, bool divides) {
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
  if (a.dtype == DType::I64 && b.dtype == DType::I64 &&
      (y.dtype == DType::I64 || y.dtype == DType::I1)) {
    const int64_t *ia = static_cast<const int64_t *>(pa),
                  *ib = static_cast<const int64_t *>(pb);
    if (divides)
      for (int64_t i = 0, n = b.numel(); i < n; ++i)
        if (ib[i] == 0)
          return Status::error("integer division by zero");
    if (y.dtype == DType::I64)
      forEach(y.shape, {&sa, &sb}, [&](int64_t i, const int64_t *off) {
        static_cast<int64_t *>(py)[i] = integer(ia[off[0]], ib[off[1]]);
      });
    else
      forEach(y.shape, {&sa, &sb}, [&](int64_t i, const int64_t *off) {
        static_cast<uint8_t *>(py)[i] = integer(ia[off[0]], ib[off[1]]) != 0;
      });
    return Status::ok();
  }
  forEach(y.shape, {&sa, &sb}, [&](int64_t i, const int64_t *off) {
    storeDouble(
        y, py, i,
        (double)f(loadAsDouble(a, pa, off[0]), loadAsDouble(b, pb, off[1])));
  });
  return Status::ok();
}

// One kernel a row of common/BinaryOps.def: float math on float tensors
// (as ATen does), int64 on integer ones, double on the mixed paths.
#define FSDP_BINARY(Class, name, onnx, kind, scalar, integer)                  \
  Status k##Class(const Instruction &in, Context &c) {                         \
    return binary(                                                             \
        in, c, [](auto a, auto b) { return ::fsdp::um::binary##Class(a, b); }, \
        [](int64_t a, int64_t b) { return ::fsdp::um::exact##Class(a, b); }, \
        std::string_view(name) == "div");                                      \
  }
#include "common/BinaryOps.def"
#undef FSDP_BINARY

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

} // namespace fsdp::cpu::kernels
