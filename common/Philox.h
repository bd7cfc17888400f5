//===- Philox.h - Counter-based random numbers for dropout ------*- C++ -*-===//
//
// Philox-4x32-10 (Salmon et al., SC'11; the generator PyTorch's CUDA
// backend uses): ten rounds of multiply-xor over a 128-bit counter under a
// 64-bit key. A draw is a pure function of (key, counter): dropout's mask
// is regenerated from (seed, step, the element's index in the global batch)
// in forward, in backward and in recomputation, on the CPU and the device
// alike, and never stored. Header-only; the same code in both backends.
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

/// Whether dropout keeps element `index` (its position in the global batch)
/// at `step`: a uniform draw in [0, 1) of 24 bits at or above p.
FSDP_HD inline bool dropoutKeeps(uint64_t seed, uint64_t step, uint64_t index,
                                 float p) {
  uint32_t word = philox4x32(seed, index, step);
  return (float)(word >> 8) * (1.0f / 16777216.0f) >= p;
}

} // namespace fsdp

#endif // FSDP_COMMON_PHILOX_H
