//===- UnaryMath.h - The math of UnaryOps.def's scalars ---------*- C++ -*-===//
//
// One name per function, overloaded for float (the kernels: glibc's expf,
// which the CPU kernels' loops vectorise through libmvec, and CUDA's device
// functions) and double (the ONNX importer's constant folds), so one
// expression serves both precisions. Header-only, no dependencies.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_COMMON_UNARYMATH_H
#define FSDP_COMMON_UNARYMATH_H

#include <cmath>
#include <cstdint>
#include <string_view>

#include "common/HostDevice.h"

namespace fsdp::um {

FSDP_HD inline float abs(float x) { return fabsf(x); }
FSDP_HD inline float exp(float x) { return expf(x); }
FSDP_HD inline float log(float x) { return logf(x); }
FSDP_HD inline float log1p(float x) { return log1pf(x); }
FSDP_HD inline float sqrt(float x) { return sqrtf(x); }
FSDP_HD inline float tanh(float x) { return tanhf(x); }
FSDP_HD inline float erf(float x) { return erff(x); }
FSDP_HD inline float pow(float a, float b) { return powf(a, b); }
FSDP_HD inline float sin(float x) { return sinf(x); }
FSDP_HD inline float asin(float x) { return asinf(x); }
FSDP_HD inline float acos(float x) { return acosf(x); }
FSDP_HD inline float atan(float x) { return atanf(x); }
FSDP_HD inline float cos(float x) { return cosf(x); }
FSDP_HD inline float expm1(float x) { return expm1f(x); }
FSDP_HD inline float floor(float x) { return floorf(x); }
FSDP_HD inline float ceil(float x) { return ceilf(x); }
FSDP_HD inline float trunc(float x) { return truncf(x); }
FSDP_HD inline float nearbyint(float x) { return nearbyintf(x); }

inline double abs(double x) { return std::fabs(x); }
inline double exp(double x) { return std::exp(x); }
inline double log(double x) { return std::log(x); }
inline double log1p(double x) { return std::log1p(x); }
inline double sqrt(double x) { return std::sqrt(x); }
inline double tanh(double x) { return std::tanh(x); }
inline double erf(double x) { return std::erf(x); }
// On the device too: BinaryMixed computes pow in double.
FSDP_HD inline double pow(double a, double b) { return ::pow(a, b); }
inline double sin(double x) { return std::sin(x); }
inline double asin(double x) { return std::asin(x); }
inline double acos(double x) { return std::acos(x); }
inline double atan(double x) { return std::atan(x); }
inline double cos(double x) { return std::cos(x); }
inline double expm1(double x) { return std::expm1(x); }
inline double floor(double x) { return std::floor(x); }
inline double ceil(double x) { return std::ceil(x); }
inline double trunc(double x) { return std::trunc(x); }
inline double nearbyint(double x) { return std::nearbyint(x); }

/// The inverse error function, on (-1, 1) (±inf at ±1, NaN beyond, as
/// torch.erfinv). No C or CUDA host library has it, so it is written here
/// once for both precisions: the single-precision approximation of M.
/// Giles ("Approximating the erfinv function", GPU Computing Gems Jade,
/// 2011: a polynomial in w = -log(1 - x^2), one for w < 5 and one in
/// sqrt(w) beyond), then Newton steps on erf(y) = x in double: one for
/// the float kernels (within 1.1 ulp of float64 over 200001 evenly spaced
/// floats in [-1, 1] and a few next to ±1, 0.29 on average; PyTorch's
/// float kernel: 110 and 0.41), two for the constant fold (within 5e-11
/// relative, what erf's rounding near 1 allows).
template <typename T> FSDP_HD inline T erfinvOf(T x) {
  T a = x < T(0) ? -x : x;
  if (!(a < T(1)))
    return a == T(1) ? x * T(INFINITY) : T(NAN);
  T w = -log((T(1) - x) * (T(1) + x)), p;
  if (w < T(5)) {
    w = w - T(2.5);
    p = T(2.81022636e-08);
    p = T(3.43273939e-07) + p * w;
    p = T(-3.5233877e-06) + p * w;
    p = T(-4.39150654e-06) + p * w;
    p = T(0.00021858087) + p * w;
    p = T(-0.00125372503) + p * w;
    p = T(-0.00417768164) + p * w;
    p = T(0.246640727) + p * w;
    p = T(1.50140941) + p * w;
  } else {
    w = sqrt(w) - T(3);
    p = T(-0.000200214257);
    p = T(0.000100950558) + p * w;
    p = T(0.00134934322) + p * w;
    p = T(-0.00367342844) + p * w;
    p = T(0.00573950773) + p * w;
    p = T(-0.0076224613) + p * w;
    p = T(0.00943887047) + p * w;
    p = T(1.00167406) + p * w;
    p = T(2.83297682) + p * w;
  }
  // Newton on erf(y) = x in double, whatever T: near |x| = 1, erf's
  // slope is small (0.018 at y = 2), and a float residual erf(y) - x,
  // within a few float ulp of 1 (libmvec's vector erff: 4), moved y by
  // 1e-5 relative and its gradient exp(y^2) by 1.7e-4 (PyTorch float32's:
  // 6.4e-7; the OpInfo samples).
  double y = double(p * x), xd = double(x);
  for (int i = 0; i < (sizeof(T) > 4 ? 2 : 1); ++i)
    y = y - (::erf(y) - xd) / (1.1283791670955126 * ::exp(-y * y));
  return T(y);
}
FSDP_HD inline float erfinv(float x) { return erfinvOf(x); }
inline double erfinv(double x) { return erfinvOf(x); }

/// The scalar of a UnaryOps.def row, in T's precision.
#define FSDP_UNARY(Class, name, onnx, aten, floatOnly, scalar)                 \
  template <typename T> FSDP_HD inline T unary##Class(T x) { return scalar; }
#include "common/UnaryOps.def"
#undef FSDP_UNARY

/// GELU, exact (erf) and tanh-approximated, and dy * gelu'(x): one float
/// expression the CPU and the device kernels share, step for step.
FSDP_HD inline float gelu(float x) {
  return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
}
FSDP_HD inline float geluTanh(float x) {
  const float k = 0.7978845608028654f; // sqrt(2/pi)
  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}
#if defined(_OPENMP) && !defined(__CUDACC__)
#pragma omp declare simd uniform(tanhApprox) notinbranch
#endif
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

/// int64 arithmetic as PyTorch's integer kernels do it: two's-complement
/// wrapping (through uint64_t, where signed overflow is defined).
FSDP_HD inline int64_t wrapAdd(int64_t a, int64_t b) {
  return (int64_t)((uint64_t)a + (uint64_t)b);
}
FSDP_HD inline int64_t wrapSub(int64_t a, int64_t b) {
  return (int64_t)((uint64_t)a - (uint64_t)b);
}
FSDP_HD inline int64_t wrapMul(int64_t a, int64_t b) {
  return (int64_t)((uint64_t)a * (uint64_t)b);
}
/// a / b truncated toward zero. INT64_MIN / -1 wraps to INT64_MIN (C's
/// division traps there). A zero divisor gives 0: PyTorch's CPU kernel
/// raises, and so does the CPU backend, which checks the divisor first
/// (runtime/cpu/kernels/Elementwise.cpp); a device kernel cannot, and
/// CUDA's PyTorch returns garbage there too.
FSDP_HD inline int64_t truncDiv(int64_t a, int64_t b) {
  if (b == 0)
    return 0;
  if (b == -1)
    return wrapSub(0, a);
  return a / b;
}
/// a^b by squaring, wrapping. A negative exponent is 1 / a^|b| truncated
/// (1 for a = 1, ±1 for a = -1, else 0; PyTorch refuses it).
FSDP_HD inline int64_t intPow(int64_t a, int64_t b) {
  if (b < 0)
    return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
  int64_t r = 1;
  for (; b != 0; b >>= 1, a = wrapMul(a, a))
    if (b & 1)
      r = wrapMul(r, a);
  return r;
}

/// The rows of UnaryOps.def that take integers (floatOnly false) on int64,
/// wrapping at INT64_MIN as PyTorch's: `name`'s function, or null.
FSDP_HD inline int64_t exactNeg(int64_t x) { return wrapSub(0, x); }
FSDP_HD inline int64_t exactAbs(int64_t x) {
  return x < 0 ? wrapSub(0, x) : x;
}
inline int64_t (*integerUnary(const char *name))(int64_t) {
  std::string_view n(name);
  return n == "neg" ? exactNeg : n == "abs" ? exactAbs : nullptr;
}

/// The scalar of a BinaryOps.def row, in T's precision, and its integer
/// column, exact on int64.
#define FSDP_BINARY(Class, name, onnx, kind, scalar, integer)                  \
  template <typename T> FSDP_HD inline T binary##Class(T a, T b) {             \
    return scalar;                                                             \
  }                                                                            \
  FSDP_HD inline int64_t exact##Class(int64_t a, int64_t b) {                \
    return integer;                                                            \
  }
#include "common/BinaryOps.def"
#undef FSDP_BINARY

} // namespace fsdp::um

#endif // FSDP_COMMON_UNARYMATH_H
