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

} // namespace fsdp

#endif // FSDP_RUNTIME_SUPPORT_ALLOCATIONCOUNTER_H
