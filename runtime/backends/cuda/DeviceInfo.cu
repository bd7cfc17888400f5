#include "runtime/backends/cuda/CudaCheck.h"
#include "runtime/backends/cuda/DeviceInfo.h"

namespace fsdp::cuda {

Status listDevices(std::vector<DeviceInfo> &out) {
  out.clear();
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  // No driver or no device is a normal condition on CI machines.
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) {
    (void)cudaGetLastError();
    return Status::ok();
  }
  FSDP_CUDA_CHECK(err);
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop;
    FSDP_CUDA_CHECK(cudaGetDeviceProperties(&prop, i));
    out.push_back({i, prop.name, prop.major, prop.minor, prop.totalGlobalMem});
  }
  return Status::ok();
}

} // namespace fsdp::cuda
