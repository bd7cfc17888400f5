//===- HostDevice.h - Functions both backends compile -----------*- C++ -*-===//
//
// FSDP_HD marks a function the CPU kernels and the CUDA kernels both call:
// __host__ __device__ under nvcc, nothing elsewhere.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_COMMON_HOSTDEVICE_H
#define FSDP_COMMON_HOSTDEVICE_H

#ifndef FSDP_HD
#ifdef __CUDACC__
#define FSDP_HD __host__ __device__
#else
#define FSDP_HD
#endif
#endif

#endif // FSDP_COMMON_HOSTDEVICE_H
