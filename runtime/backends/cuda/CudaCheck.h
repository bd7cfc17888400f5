//===- CudaCheck.h - CUDA error checks that return a Status -----*- C++ -*-===//
#ifndef FSDP_RUNTIME_BACKENDS_CUDA_CUDACHECK_H
#define FSDP_RUNTIME_BACKENDS_CUDA_CUDACHECK_H

#include "runtime/support/Status.h"

#include <cuda_runtime.h>
#include <string>

/// Returns an error Status from the enclosing function when a CUDA call fails.
#define FSDP_CUDA_CHECK(expr)                                                  \
  do {                                                                         \
    cudaError_t fsdpErr_ = (expr);                                             \
    if (fsdpErr_ != cudaSuccess)                                               \
      return ::fsdp::Status::error(                                            \
          std::string(#expr) + " failed: " + cudaGetErrorString(fsdpErr_));    \
  } while (0)

#endif // FSDP_RUNTIME_BACKENDS_CUDA_CUDACHECK_H
