//===- Half.h - 16-bit floats: bfloat16 and IEEE half -----------*- C++ -*-===//
//
// Storage conversions for the 16-bit dtypes a plan may store and
// communicate in (mixed precision). Float to 16 bits rounds to nearest even,
// as PyTorch's .to(torch.bfloat16) does; NaN stays NaN.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_SUPPORT_HALF_H
#define FSDP_RUNTIME_SUPPORT_HALF_H

#include <cstdint>
#include <cstring>

namespace fsdp {

inline uint16_t bf16FromFloat(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN: keep it quiet and a NaN
    return (uint16_t)((bits >> 16) | 0x40);
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)((bits + rounding) >> 16);
}

inline float floatFromBf16(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f16FromFloat(float f) {
  _Float16 h = (_Float16)f; // the compiler rounds to nearest even
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}

inline float floatFromF16(uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, 2);
  return (float)h;
}

} // namespace fsdp

#endif // FSDP_RUNTIME_SUPPORT_HALF_H
