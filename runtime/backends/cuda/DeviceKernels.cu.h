//===- DeviceKernels.cu.h - Launching a device kernel -----------*- C++ -*-===//
#ifndef FSDP_RUNTIME_BACKENDS_CUDA_DEVICEKERNELS_CU_H
#define FSDP_RUNTIME_BACKENDS_CUDA_DEVICEKERNELS_CU_H

#include "runtime/device/DeviceKernels.h"
#include "runtime/device/FlashAttention.h"

#include <cuda_runtime.h>

namespace fsdp::cuda {

/// Runs `f(i)` for i in [0, n) on `stream` (asynchronously); the launch's
/// error, if any. Instantiated in DeviceKernels.cu for every functor of
/// runtime/device/DeviceKernels.h (the Kernel variant of Lowering.h), so
/// host-compiled code launches them too.
template <typename F>
cudaError_t launchEach(int64_t n, const F &f, cudaStream_t stream);

/// Runs block kernel `f` (IsBlockKernel) over `n` blocks of F::kThreads
/// threads with f.smemBytes() of shared memory on `stream`.
/// Instantiated in DeviceKernels.cu for each block kernel.
template <typename F>
cudaError_t launchBlocks(int64_t n, const F &f, cudaStream_t stream);

} // namespace fsdp::cuda

#endif // FSDP_RUNTIME_BACKENDS_CUDA_DEVICEKERNELS_CU_H
