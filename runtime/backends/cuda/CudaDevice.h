//===- CudaDevice.h - The device backend on an NVIDIA GPU -------*- C++ -*-===//
//
// A Device (runtime/device/Device.h) on one GPU: cudaMalloc'd memory, the
// functors launched over grids on a compute stream, GEMMs through
// cuBLASLt, collectives through NCCL on a communication stream ordered by
// CUDA events (a plan's start/wait pairs), and each program captured as a
// CUDA graph on its second run and replayed after.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_BACKENDS_CUDA_CUDADEVICE_H
#define FSDP_RUNTIME_BACKENDS_CUDA_CUDADEVICE_H

#include "runtime/device/Device.h"

namespace fsdp::cuda {

/// The GPU `localRank` % visible devices. NCCL's communicators are
/// bootstrapped over `hostComm` (rank 0's unique id, all-gathered) and split
/// like it; a collective that does not finish within `timeoutSeconds` aborts
/// the communicator and fails the step instead of hanging.
Status cudaDevice(Comm &hostComm, int64_t localRank, double timeoutSeconds,
                  std::unique_ptr<device::Device> &out);

} // namespace fsdp::cuda

#endif // FSDP_RUNTIME_BACKENDS_CUDA_CUDADEVICE_H
