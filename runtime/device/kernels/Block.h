//===- Block.h - Block kernels (device) -------------------------*- C++ -*-===//
//
// Block kernels: a thread block as the row kernels see it.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_DEVICE_KERNELS_BLOCK_H
#define FSDP_RUNTIME_DEVICE_KERNELS_BLOCK_H

#include "runtime/device/kernels/Core.h"

namespace fsdp::device {

//===----------------------------------------------------------------------===//
// Block kernels
//===----------------------------------------------------------------------===//

/// The larger of a running maximum and `v` as PyTorch's amax takes it: a
/// NaN wins and stays (`v > acc` alone kept the running value, so a
/// reduce_max never returned NaN).
FSDP_HD inline double maxNan(double acc, double v) {
  return (v > acc || v != v) ? v : acc;
}

/// A thread block as the block kernels see it: on the device the CUDA
/// block; on the host one thread, so every loop over the block's threads
/// covers all indices, a barrier has nothing to wait for, and a sum over
/// the threads is the one thread's sum.
struct Block {
  FSDP_HD int thread() const {
#ifdef __CUDA_ARCH__
    return (int)threadIdx.x;
#else
    return 0;
#endif
  }
  FSDP_HD int threads() const {
#ifdef __CUDA_ARCH__
    return (int)blockDim.x;
#else
    return 1;
#endif
  }
  FSDP_HD void sync() const {
#ifdef __CUDA_ARCH__
    __syncthreads();
#endif
  }
  /// The sum (or maximum) of every thread's `v`, to every thread: a warp's
  /// butterfly, then the warps' results in warp order, so the same every
  /// run. `scratch`: kReduceScratch bytes of shared memory. Every thread
  /// of the block calls it.
  FSDP_HD double sum(double v, double *scratch) const {
    return combine(v, scratch, false);
  }
  FSDP_HD double max(double v, double *scratch) const {
    return combine(v, scratch, true);
  }
  FSDP_HD double combine(double v, double *scratch, bool isMax) const {
#ifdef __CUDA_ARCH__
    for (int o = 16; o > 0; o >>= 1) {
      double u = __shfl_xor_sync(0xffffffffu, v, o);
      v = isMax ? maxNan(v, u) : v + u;
    }
    __syncthreads(); // the scratch's last readers are done
    if (threadIdx.x % 32 == 0)
      scratch[threadIdx.x / 32] = v;
    __syncthreads();
    double t = scratch[0];
    for (int w = 1; w < (int)blockDim.x / 32; ++w)
      t = isMax ? maxNan(t, scratch[w]) : t + scratch[w];
    return t;
#else
    (void)scratch;
    (void)isMax;
    return v;
#endif
  }
};

/// Shared memory Block::sum and Block::max need (one double a warp).
constexpr size_t kReduceScratch = 32 * sizeof(double);
/// Threads of a block that takes one row (layer norm, a loss's row).
constexpr int kRowThreads = 256;

/// Whether a functor is a block kernel: run as `f(block, index, shared)`
/// over `n` blocks of F::kThreads threads with f.smemBytes() of shared
/// memory, rather than `f(i)` over n indices.
template <typename F, typename = void>
struct IsBlockKernel : std::false_type {};
template <typename F>
struct IsBlockKernel<F, std::void_t<decltype(&F::smemBytes)>> : std::true_type {
};

/// Runs block kernel `f` over `n` blocks on the host, in order (tests and
/// the host emulation; the device launches a grid: launchBlocks), with
/// `smem` as the shared memory (grown to f.smemBytes() where smaller, so
/// the emulation allocates nothing after its first step).
template <typename F>
void runBlocksOnHost(int64_t n, const F &f, std::vector<double> &smem) {
  if (smem.size() < (f.smemBytes() + 7) / 8)
    smem.resize((f.smemBytes() + 7) / 8);
  for (int64_t i = 0; i < n; ++i)
    f(Block{}, i, reinterpret_cast<unsigned char *>(smem.data()));
}

/// Runs any kernel of this header on the host: over n indices, or a block
/// kernel over n blocks (`smem` as runBlocksOnHost's).
template <typename F>
void runKernelOnHost(int64_t n, const F &f, std::vector<double> &smem);

} // namespace fsdp::device

#endif // FSDP_RUNTIME_DEVICE_KERNELS_BLOCK_H
