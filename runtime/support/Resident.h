//===- Resident.h - This process's resident memory ------------*- C++ -*-===//
//
// What the kernel says this process holds in RAM (/proc/self/status): the
// figure a plan's process_peak_bytes predicts, and what --calibrate
// measures as the runtime's own share (libraries, MPI, BLAS buffers).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_SUPPORT_RESIDENT_H
#define FSDP_RUNTIME_SUPPORT_RESIDENT_H

#include <cstdint>

namespace fsdp {

/// Resident bytes now (VmRSS), or -1 where unknown.
int64_t residentBytes();
/// The most resident bytes so far (VmHWM), or -1 where unknown.
int64_t peakResidentBytes();

} // namespace fsdp

#endif // FSDP_RUNTIME_SUPPORT_RESIDENT_H
