//===- SortOrder.h - The order fsdp.argsort sorts in ------------*- C++ -*-===//
//
// One comparison for the CPU kernel and the device kernel of fsdp.argsort:
// a strict total order on (value, position) pairs, so both give the same
// permutation. Numbers ascending (descending), NaN after every number
// (before, descending) as torch.sort places it, and equal values in their
// original order (stable; -0 and 0 are equal).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_COMMON_SORTORDER_H
#define FSDP_COMMON_SORTORDER_H

#include "common/HostDevice.h"

#include <cstdint>

namespace fsdp {

/// Whether `a` at position `ia` comes before `b` at position `ib`.
FSDP_HD inline bool sortsBefore(float a, int64_t ia, float b, int64_t ib,
                                bool descending) {
  bool nanA = a != a, nanB = b != b;
  if (nanA || nanB) {
    if (nanA && nanB)
      return ia < ib;
    return descending ? nanA : nanB;
  }
  if (a != b)
    return descending ? a > b : a < b;
  return ia < ib;
}

} // namespace fsdp

#endif // FSDP_COMMON_SORTORDER_H
