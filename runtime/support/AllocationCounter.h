//===- AllocationCounter.h - Count heap allocations on this thread -*- C++
//-*-===//
//
// The executor promises no allocation inside a step; fsdp-run
// --check-allocations verifies it by counting operator new calls made by
// the calling thread while counting is on. Linking this file replaces the
// global operator new/delete (with malloc/free plus the counter).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_SUPPORT_ALLOCATIONCOUNTER_H
#define FSDP_RUNTIME_SUPPORT_ALLOCATIONCOUNTER_H

#include <cstdint>

namespace fsdp {

void startCountingAllocations();
/// Stops counting; returns the allocations since start.
int64_t stopCountingAllocations();

/// Leaves out, while it lives, what a library allocates for its own
/// bookkeeping on this thread: oneDNN's primitive execute builds a map of
/// its arguments on every call (a few small nodes, freed before it returns;
/// no tensor memory), which no use of its C API avoids.
class AllocationPause {
public:
  AllocationPause();
  ~AllocationPause();
  AllocationPause(const AllocationPause &) = delete;
  AllocationPause &operator=(const AllocationPause &) = delete;

private:
  bool was;
};

} // namespace fsdp

#endif // FSDP_RUNTIME_SUPPORT_ALLOCATIONCOUNTER_H
