//===- DeviceKernels.cu - Launching the device kernels --------------------===//
//
// One thread per index, grid-stride: every functor of
// runtime/device/DeviceKernels.h is instantiated here, so the build compiles
// each for the device (sm_90) even on a machine without a GPU. Block
// kernels (layer norms, losses, flash attention) run one block per index.
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

template <typename F>
__global__ void __launch_bounds__(F::kThreads) blockKernel(F f) {
  extern __shared__ __align__(128) unsigned char smem[];
  f(device::Block{}, (int64_t)blockIdx.x, smem);
}

/// The shared memory a block of this device may opt in to, and the opt-in
/// for `blockKernel<F>` (once per kernel, on its first launch: the first
/// step runs before any graph capture).
template <typename F> cudaError_t optIn(size_t &limit) {
  int dev = 0, most = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess)
    e = cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                               dev);
  if (e == cudaSuccess)
    e = cudaFuncSetAttribute(blockKernel<F>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, most);
  limit = (size_t)most;
  return e;
}

} // namespace

template <typename F>
cudaError_t launchBlocks(int64_t n, const F &f, cudaStream_t stream) {
  if (n <= 0)
    return cudaSuccess;
  static size_t limit = 0;
  static const cudaError_t opted = optIn<F>(limit);
  size_t bytes = f.smemBytes();
  if (opted != cudaSuccess)
    return opted;
  if (bytes > limit || n > 0x7fffffff)
    return cudaErrorInvalidConfiguration;
  blockKernel<<<(unsigned)n, F::kThreads, bytes, stream>>>(f);
  return cudaGetLastError();
}

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
FSDP_INSTANTIATE(UnaryInt)
FSDP_INSTANTIATE(GeluGrad)
FSDP_INSTANTIATE(Dropout)
FSDP_INSTANTIATE(Uniform)
FSDP_INSTANTIATE(Binary)
FSDP_INSTANTIATE(BinaryMixed)
FSDP_INSTANTIATE(BinaryInt)
FSDP_INSTANTIATE(LogicalNot)
FSDP_INSTANTIATE(Select)
FSDP_INSTANTIATE(Cast)
FSDP_INSTANTIATE(Scaled)
FSDP_INSTANTIATE(Trilu)
FSDP_INSTANTIATE(Argsort)
FSDP_INSTANTIATE(Reduce)
FSDP_INSTANTIATE(SoftmaxRows)
FSDP_INSTANTIATE(LayerNormGradCols)
FSDP_INSTANTIATE(Gather)
FSDP_INSTANTIATE(ScatterAdd)
FSDP_INSTANTIATE(ScatterAddInt)
FSDP_INSTANTIATE(StridedCopy)
FSDP_INSTANTIATE(Im2Col)
FSDP_INSTANTIATE(Col2Im)
FSDP_INSTANTIATE(PoolForward)
FSDP_INSTANTIATE(PoolBackward)
FSDP_INSTANTIATE(BatchNormChannels)
FSDP_INSTANTIATE(BatchNormGradChannels)
FSDP_INSTANTIATE(BatchNormSyncedChannels)
FSDP_INSTANTIATE(AdamWSchedule)
FSDP_INSTANTIATE(AdamW)
FSDP_INSTANTIATE(SgdSchedule)
FSDP_INSTANTIATE(Sgd)
FSDP_INSTANTIATE(AttentionRows)
FSDP_INSTANTIATE(AttentionGradQueryRows)
FSDP_INSTANTIATE(AttentionGradKeyRows)
#undef FSDP_INSTANTIATE

#define FSDP_INSTANTIATE(F)                                                    \
  template cudaError_t launchBlocks<device::F>(int64_t, const device::F &,     \
                                               cudaStream_t);
FSDP_INSTANTIATE(ReduceCombine)
FSDP_INSTANTIATE(LayerNormRows)
FSDP_INSTANTIATE(LayerNormGradRows)
FSDP_INSTANTIATE(LossTerms)
FSDP_INSTANTIATE(LossReduce)
FSDP_INSTANTIATE(LossGradRows)
FSDP_INSTANTIATE(FlashAttention)
FSDP_INSTANTIATE(FlashAttentionGradQueries)
FSDP_INSTANTIATE(FlashAttentionGradKeys)
#undef FSDP_INSTANTIATE

} // namespace fsdp::cuda
