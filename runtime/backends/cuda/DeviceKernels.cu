//===- DeviceKernels.cu - Launching the device kernels --------------------===//
//
// One thread per index, grid-stride: every functor of
// runtime/device/DeviceKernels.h is instantiated here, so the build compiles
// each for the device (sm_90) even on a machine without a GPU.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/DeviceKernels.cu.h"

namespace fsdp::cuda {

namespace {

template <typename F> __global__ void eachKernel(int64_t n, F f) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    f(i);
}

} // namespace

template <typename F>
cudaError_t launchEach(int64_t n, const F &f, cudaStream_t stream) {
  if (n <= 0)
    return cudaSuccess;
  constexpr int threads = 256;
  // Enough blocks to fill an H100 several times over; the grid stride
  // covers the rest.
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks > 65536)
    blocks = 65536;
  eachKernel<<<(unsigned)blocks, threads, 0, stream>>>(n, f);
  return cudaGetLastError();
}

#define FSDP_INSTANTIATE(F)                                                    \
  template cudaError_t launchEach<device::F>(int64_t, const device::F &,       \
                                             cudaStream_t);
FSDP_INSTANTIATE(Unary)
FSDP_INSTANTIATE(GeluGrad)
FSDP_INSTANTIATE(Binary)
FSDP_INSTANTIATE(BinaryMixed)
FSDP_INSTANTIATE(LogicalNot)
FSDP_INSTANTIATE(Select)
FSDP_INSTANTIATE(Cast)
FSDP_INSTANTIATE(Scaled)
FSDP_INSTANTIATE(Trilu)
FSDP_INSTANTIATE(Reduce)
FSDP_INSTANTIATE(SoftmaxRows)
FSDP_INSTANTIATE(LayerNormRows)
FSDP_INSTANTIATE(LayerNormGradRows)
FSDP_INSTANTIATE(LayerNormGradCols)
FSDP_INSTANTIATE(Gather)
FSDP_INSTANTIATE(ScatterAdd)
FSDP_INSTANTIATE(LossTerms)
FSDP_INSTANTIATE(LossReduce)
FSDP_INSTANTIATE(LossGradRows)
FSDP_INSTANTIATE(StridedCopy)
FSDP_INSTANTIATE(AdamWSchedule)
FSDP_INSTANTIATE(AdamW)
FSDP_INSTANTIATE(SgdSchedule)
FSDP_INSTANTIATE(Sgd)
FSDP_INSTANTIATE(AttentionRows)
FSDP_INSTANTIATE(AttentionGradQueryRows)
FSDP_INSTANTIATE(AttentionGradKeyRows)
#undef FSDP_INSTANTIATE

} // namespace fsdp::cuda
