//===- Plugin.cpp - libfsdp_cuda.so's entry point -------------------------===//
//
// The CUDA backend is a plugin fsdp-run loads (dlopen) for --backend cuda
// only: linking the CUDA runtime, cuBLASLt and NCCL into fsdp-run itself
// would map them into every CPU run too (some 200 MB of resident memory and
// start-up time). runtime/backends/Backends.cpp looks this symbol up.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CudaDevice.h"

extern "C" __attribute__((visibility("default"))) fsdp::Status
fsdp_cuda_device_v1(fsdp::Comm &hostComm, int64_t localRank,
                    double timeoutSeconds,
                    std::unique_ptr<fsdp::device::Device> &out) {
  return fsdp::cuda::cudaDevice(hostComm, localRank, timeoutSeconds, out);
}
