//===- Finite.h - Whether float data holds NaN or inf ------------*- C++ -*-===//
//
// A run stops (or skips the update) on a non-finite loss or gradient norm,
// and nothing non-finite is ever trained or saved: weights, checkpoints and
// exports check their data with this before they are written, and again
// when they are read. Buffers and frozen parameters may hold ±inf (masks),
// never NaN (ValueRule).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_SUPPORT_FINITE_H
#define FSDP_RUNTIME_SUPPORT_FINITE_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace fsdp {

/// Whether every one of `count` floats at `data` is finite.
inline bool allFinite(const float *data, int64_t count) {
  // x * 0 is 0 for every finite x and NaN for NaN and inf; the sum of a
  // block is 0 exactly when all of it is finite (vectorises, no branch per
  // element).
  for (int64_t i = 0; i < count; i += 4096) {
    int64_t end = std::min<int64_t>(count, i + 4096);
    float probe = 0;
    for (int64_t j = i; j < end; ++j)
      probe += data[j] * 0.0f; // 0 for finite values, NaN otherwise
    if (probe != 0)
      return false;
  }
  return true;
}

/// Whether none of `count` floats at `data` is NaN (±inf allowed).
inline bool noNaN(const float *data, int64_t count) {
  int bad = 0;
  for (int64_t j = 0; j < count; ++j)
    bad |= data[j] != data[j]; // true only for NaN; vectorises
  return bad == 0;
}

/// What a tensor of the model's state may hold. Trained state (parameters
/// that are trained, optimizer moments) must be finite: an update cannot
/// move an infinity. Buffers, frozen parameters and constants the model
/// reads may hold ±inf (an additive mask's "never attend here", as
/// llama2.c's is), never NaN.
enum class ValueRule { Finite, NoNaN };

inline bool satisfies(ValueRule rule, const float *data, int64_t count) {
  return rule == ValueRule::Finite ? allFinite(data, count)
                                   : noNaN(data, count);
}

/// How a value that breaks `rule` is named in an error (Finite applies to
/// trained state only).
inline const char *violationName(ValueRule rule) {
  return rule == ValueRule::Finite
             ? "a non-finite value (NaN or inf) (it is trained)"
             : "NaN";
}

/// A double as a log shows it: the number, or "nan", "inf", "-inf".
inline std::string finiteOrName(double v) {
  if (std::isnan(v))
    return "nan";
  if (std::isinf(v))
    return v > 0 ? "inf" : "-inf";
  return std::to_string(v);
}

} // namespace fsdp

#endif // FSDP_RUNTIME_SUPPORT_FINITE_H
