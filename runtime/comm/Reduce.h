//===- Reduce.h - The element arithmetic of every CPU collective -*- C++ -*-===//
//
// Sums and averages as the engines (MPI user ops, Gloo reduce functions)
// apply them: float32 exactly as summed; bf16 and f16 summed pairwise in
// float32 and rounded back after each addition, as a 16-bit reduction on a
// GPU does.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_COMM_REDUCE_H
#define FSDP_RUNTIME_COMM_REDUCE_H

#include "runtime/comm/Comm.h"
#include "runtime/support/Half.h"

#include <cstdint>

namespace fsdp {

/// out[i] = a[i] + b[i] for n elements of type e (out may equal a or b).
inline void sumElements(void *out, const void *a, const void *b, int64_t n,
                        Elem e) {
  if (e == Elem::F32) {
    float *o = static_cast<float *>(out);
    const float *x = static_cast<const float *>(a),
                *y = static_cast<const float *>(b);
    for (int64_t i = 0; i < n; ++i)
      o[i] = x[i] + y[i];
    return;
  }
  uint16_t *o = static_cast<uint16_t *>(out);
  const uint16_t *x = static_cast<const uint16_t *>(a),
                 *y = static_cast<const uint16_t *>(b);
  if (e == Elem::BF16)
    for (int64_t i = 0; i < n; ++i)
      o[i] = bf16FromFloat(floatFromBf16(x[i]) + floatFromBf16(y[i]));
  else
    for (int64_t i = 0; i < n; ++i)
      o[i] = f16FromFloat(floatFromF16(x[i]) + floatFromF16(y[i]));
}

/// out *= factor, in the buffer's element type.
inline void scaleElements(void *out, int64_t count, Elem e, float factor) {
  if (e == Elem::F32) {
    float *f = static_cast<float *>(out);
    for (int64_t i = 0; i < count; ++i)
      f[i] *= factor;
    return;
  }
  uint16_t *h = static_cast<uint16_t *>(out);
  for (int64_t i = 0; i < count; ++i)
    h[i] = e == Elem::BF16 ? bf16FromFloat(floatFromBf16(h[i]) * factor)
                           : f16FromFloat(floatFromF16(h[i]) * factor);
}

} // namespace fsdp

#endif // FSDP_RUNTIME_COMM_REDUCE_H
