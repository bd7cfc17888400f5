//===- Philox.h - Counter-based random numbers ------------------*- C++ -*-===//
//
// Philox-4x32-10 (Salmon et al., SC'11; the generator PyTorch's CUDA
// backend uses): ten rounds of multiply-xor over a 128-bit counter under a
// 64-bit key. A draw is a pure function of (key, counter): dropout's mask
// and fsdp.uniform's values are regenerated from (seed, step, the element's
// index in the global batch) in forward, in backward and in recomputation,
// on the CPU and the device alike, and never stored. Header-only; the
// same code in both backends.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_COMMON_PHILOX_H
#define FSDP_COMMON_PHILOX_H

#include <cstdint>

#include "common/HostDevice.h"

namespace fsdp {

/// The first 32-bit word of Philox-4x32-10 at `counter` under `key`.
FSDP_HD inline uint32_t philox4x32(uint64_t key, uint64_t counterLo,
                                   uint64_t counterHi) {
  uint32_t c0 = (uint32_t)counterLo, c1 = (uint32_t)(counterLo >> 32),
           c2 = (uint32_t)counterHi, c3 = (uint32_t)(counterHi >> 32);
  uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    uint64_t p0 = (uint64_t)0xD2511F53u * c0;
    uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
    uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c1 = (uint32_t)p1;
    c3 = (uint32_t)p0;
    c0 = n0;
    c2 = n2;
  }
  return c0;
}

/// The uniform draw in [0, 1) of element `index` (its position in the
/// global batch) at `step` under `seed` (fsdp.uniform; dropout's mask):
/// `bits` random bits (at most 24), a multiple of 2^-bits. With the
/// significand's bits of the type it is stored in (24 for f32, 11 for f16,
/// 8 for bf16) it is exact there, and so below 1: a draw rounded to bf16
/// could be 1, and ln(1 - u) infinite.
FSDP_HD inline float uniformDraw(uint64_t seed, uint64_t step, uint64_t index,
                                 int bits = 24) {
  uint32_t word = philox4x32(seed, index, step);
  return (float)(word >> (32 - bits)) * (1.0f / (float)(1u << bits));
}

/// Whether dropout keeps element `index` at `step`: its uniform draw is at
/// or above p.
FSDP_HD inline bool dropoutKeeps(uint64_t seed, uint64_t step, uint64_t index,
                                 float p) {
  return uniformDraw(seed, step, index) >= p;
}

} // namespace fsdp

#endif // FSDP_COMMON_PHILOX_H
