//===- KernelTestSupport.h - What the kernel tests share --------*- C++ -*-===//
//
// An arena of test tensors, running one instruction on the CPU backend or
// through the device lowering on the host, and the comparison the kernel
// tests use (DeviceKernelsTest.cpp, CpuKernelsTest.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TESTS_UNIT_KERNELTESTSUPPORT_H
#define FSDP_TESTS_UNIT_KERNELTESTSUPPORT_H

#include "runtime/cpu/Gemm.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/device/Device.h"
#include "runtime/device/FlashAttention.h"
#include "runtime/device/KernelShapes.h"
#include "runtime/support/Half.h"
#include <cmath>
#include <gtest/gtest.h>
#include <random>
#include <string>
#include <vector>

namespace kerneltest {

using namespace fsdp;
using namespace fsdp::device;

/// Tensors laid out in an arena, as a plan places them.
struct Arena {
  std::vector<double> storage; // 8-byte aligned
  int64_t used = 0;
  std::mt19937 rng{1234};

  TensorRef add(Dims shape, DType dtype = DType::F32) {
    TensorRef t;
    t.space = Space::Arena;
    t.offset = used;
    t.shape = std::move(shape);
    t.dtype = dtype;
    used += (t.bytes() + 63) / 64 * 64;
    storage.resize(used / 8 + 1);
    return t;
  }
  uint8_t *base() { return reinterpret_cast<uint8_t *>(storage.data()); }
  template <typename T> T *at(const TensorRef &t) {
    return reinterpret_cast<T *>(base() + t.offset);
  }
  void fill(const TensorRef &t, float lo, float hi) {
    std::uniform_real_distribution<float> u(lo, hi);
    for (int64_t i = 0; i < t.numel(); ++i)
      at<float>(t)[i] = u(rng);
  }
  void fillInts(const TensorRef &t, std::vector<int64_t> values) {
    for (int64_t i = 0; i < t.numel(); ++i)
      at<int64_t>(t)[i] = values[i % values.size()];
  }
};

/// Runs the CPU kernel of `in` on `a` (outputs in place).
inline void runCpu(Arena &a, const Instruction &in,
                   cpu::OptimizerState *opt = nullptr,
                   std::vector<float *> params = {}) {
  std::vector<double> scratch(1 << 16);
  cpu::Context c;
  c.arena = a.base();
  c.scratch = reinterpret_cast<float *>(scratch.data());
  c.optimizer = opt;
  c.params = std::move(params);
  std::unique_ptr<Comm> comm = localComm(); // one rank
  comm->reserve(in.index + 1);
  c.comm = comm.get();
  Status s = cpu::kernelFor(in.op)(in, c);
  ASSERT_TRUE(s) << in.op << ": " << s.message();
}

/// Runs a device kernel on the host: over n indices, or n blocks.
template <typename F> inline void runHost(int64_t n, const F &f) {
  std::vector<double> smem;
  runKernelOnHost(n, f, smem);
}

/// Lowers `in` as the device backend does (runtime/device/Lowering.h) and
/// runs the operations on the host emulation, so the lowering's own
/// choices (split reductions, narrow operands) are what is tested.
/// `stepScalars`: device::StepScalar's, for the kernels that read them.
inline void runLowered(Arena &a, const Instruction &in,
                       const double *stepScalars = nullptr) {
  std::unique_ptr<Comm> comm = localComm();
  comm->reserve(in.index + 1);
  std::unique_ptr<Device> device = hostDevice(*comm);
  std::vector<double> scratch(scratchBytes(in) / 8 + 1),
      widened(widenedBytes(in) / 8 + 1);
  int error = 0;
  Memory mem;
  mem.arena = a.base();
  mem.scratch = reinterpret_cast<uint8_t *>(scratch.data());
  mem.widened = reinterpret_cast<uint8_t *>(widened.data());
  mem.error = &error;
  mem.stepScalars = stepScalars;
  std::vector<DeviceOp> ops;
  Status s = lower(in, mem, *comm, ops);
  ASSERT_TRUE(s) << in.op << ": " << s.message();
  s = device->run(ops, 0);
  ASSERT_TRUE(s) << in.op << ": " << s.message();
  ASSERT_EQ(error, 0) << in.op;
}

inline Instruction instr(const std::string &op, std::vector<TensorRef> in,
                         std::vector<TensorRef> out,
                         nlohmann::json attrs = nlohmann::json::object()) {
  Instruction i;
  i.op = op;
  i.in = std::move(in);
  i.out = std::move(out);
  i.attrs = std::move(attrs);
  return i;
}

inline void expectClose(const float *want, const float *got, int64_t n,
                        const std::string &what, float rel = 1e-6f) {
  for (int64_t i = 0; i < n; ++i) {
    float tol = rel * (0.1f + std::fabs(want[i]));
    ASSERT_NEAR(want[i], got[i], tol) << what << " element " << i;
  }
}

/// expectClose for ill-conditioned kernels: element i may also differ by
/// `ulps` float roundings of `scale[i]`, the size of the terms that cancel
/// in it (GELU's x (1 + erf(x / sqrt 2)) on negative x: a few ulp of the
/// erf, between libmvec's vector forms and libm's scalar ones, are a
/// relative 1e-5 of the small result).
inline void expectCloseScaled(const float *want, const float *got, int64_t n,
                              const std::vector<float> &scale,
                              const std::string &what, float ulps = 16) {
  for (int64_t i = 0; i < n; ++i) {
    float tol = 1e-6f * (0.1f + std::fabs(want[i])) +
                ulps * 1.2e-7f * std::fabs(scale[i]);
    ASSERT_NEAR(want[i], got[i], tol) << what << " element " << i;
  }
}

} // namespace kerneltest

#endif // FSDP_TESTS_UNIT_KERNELTESTSUPPORT_H
