//===- DeviceInfo.h - Which CUDA devices this process sees ------*- C++ -*-===//
#ifndef FSDP_RUNTIME_BACKENDS_CUDA_DEVICEINFO_H
#define FSDP_RUNTIME_BACKENDS_CUDA_DEVICEINFO_H

#include "runtime/support/Status.h"

#include <cstddef>
#include <string>
#include <vector>

namespace fsdp::cuda {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int computeMajor = 0, computeMinor = 0;
  size_t totalBytes = 0;
};

/// Lists the visible devices; an empty list (not an error) when there are none.
Status listDevices(std::vector<DeviceInfo> &out);

} // namespace fsdp::cuda

#endif // FSDP_RUNTIME_BACKENDS_CUDA_DEVICEINFO_H
