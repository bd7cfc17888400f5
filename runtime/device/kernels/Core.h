//===- Core.h - What every device kernel shares -----------------*- C++ -*-===//
//
// Element types, loads and stores in any float type, index arithmetic over
// broadcast shapes, and FSDP_HD (runtime/device/DeviceKernels.h explains
// the functors and how they are tested on the host).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_DEVICE_KERNELS_CORE_H
#define FSDP_RUNTIME_DEVICE_KERNELS_CORE_H

#include "common/BatchNormMath.h"
#include "common/HostDevice.h"
#include "common/ConvGeometry.h"
#include "common/UnaryMath.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>


namespace fsdp::device {

/// The per-step scalars, read by the kernels from device memory so that a
/// captured step (CUDA graph) replays with new values: the learning-rate
/// factor of the schedule, the optimizer's 1-based step (AdamW's bias
/// correction; it does not advance over a skipped update), and the step
/// that keys dropout's masks and fsdp.uniform's draws (the micro-batch's
/// number in the run, 1-based: new draws after a skipped update too).
enum StepScalar { kLrScale = 0, kStep = 1, kDrawStep = 2, kStepScalars = 3 };

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

/// *p += v on int64, wrapping (two's complement), atomically on a GPU.
FSDP_HD inline void addTo(int64_t *p, int64_t v) {
#ifdef __CUDA_ARCH__
  atomicAdd(reinterpret_cast<unsigned long long *>(p), (unsigned long long)v);
#else
  *p = (int64_t)((uint64_t)*p + (uint64_t)v);
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

/// 16 bytes, loaded and stored as one (a 128-bit access on a GPU).
struct alignas(16) Bytes16 {
  uint32_t w[4];
};

/// Copies N bytes (W: a type of that size) in one access: on a GPU a load
/// and a store of W, which needs both addresses aligned to N; on the host
/// a memcpy the compiler turns into the same.
template <typename W>
FSDP_HD inline void copyWord(uint8_t *dst, const uint8_t *src) {
#ifdef __CUDA_ARCH__
  *reinterpret_cast<W *>(dst) = *reinterpret_cast<const W *>(src);
#else
  memcpy(dst, src, sizeof(W));
#endif
}

/// Copies one element of `n` bytes: 16, 8, 4 and 2 in one access each
/// (the lowering widens elements only where both addresses are aligned to
/// the width, runtime/device/lowering/DataMovement.cpp's emitCopy).
FSDP_HD inline void copyElem(uint8_t *dst, const uint8_t *src, int64_t n) {
  switch (n) {
  case 16:
    return copyWord<Bytes16>(dst, src);
  case 8:
    return copyWord<uint64_t>(dst, src);
  case 4:
    return copyWord<uint32_t>(dst, src);
  case 2:
    return copyWord<uint16_t>(dst, src);
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
    if (rank <= 1) { // no division (coalesced: every operand in order)
      for (int o = 0; o < operands; ++o)
        off[o] = rank == 0 ? 0 : i * strides[o][0];
      return;
    }
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

} // namespace fsdp::device

#endif // FSDP_RUNTIME_DEVICE_KERNELS_CORE_H
