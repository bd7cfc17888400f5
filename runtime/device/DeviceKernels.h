//===- DeviceKernels.h - The CUDA backend's kernels -------------*- C++ -*-===//
//
// Every kernel here is a functor: `__host__ __device__`, so nvcc launches
// it on the GPU (DeviceKernels.cu) and the host compiler runs the very same
// code in a loop. Most compute one output element (or one row) from an
// index, one thread each over a grid-stride loop. Block kernels (layer
// norms and losses: a block per row; flash attention, FlashAttention.h)
// take a `Block`: on the device the CUDA block, with barriers and
// deterministic block sums; on the host one thread that covers every index.
// That is how the kernels are tested on a machine without a GPU: the unit
// test (tests/unit/DeviceKernelsTest.cpp) runs each on the host and
// compares it with the CPU backend's kernel of the same op, so the math and
// the indexing are checked everywhere; only the launch, the barriers and
// the tensor-core loads need a GPU.
//
// The math follows runtime/cpu/Kernels.cpp exactly (float element math,
// double accumulation in reductions, softmax and losses), so the two
// backends agree to rounding. Elementwise ops, layer norms, reductions and
// losses read bf16/f16 operands as they are: a narrow value loads exactly,
// and the result rounds as a cast of the f32 result would.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_DEVICE_DEVICEKERNELS_H
#define FSDP_RUNTIME_DEVICE_DEVICEKERNELS_H

// One op family a header (runtime/device/kernels/), each including the
// ones before it.
#include "runtime/device/kernels/Attention.h"

#endif // FSDP_RUNTIME_DEVICE_DEVICEKERNELS_H
