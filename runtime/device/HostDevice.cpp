//===- HostDevice.cpp - The device backend emulated on the host -----------===//
//
// Runs lowered programs exactly as a GPU would, only serially: each functor
// over its index range in a loop (DeviceKernels.h's host path, where the
// atomics are plain adds), GEMMs through OpenBLAS, collectives on the
// host's communicator; offload's host memory is blocks of its own, its
// copies and host work run in order. `fsdp-run --backend emulated` uses it, so
// the lowering, the backend's memory and its state transfers are tested against
// the CPU backend on any machine.
//
//===----------------------------------------------------------------------===//
#include "runtime/device/Device.h"

#include <cblas.h>

#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

namespace fsdp::device {

namespace {

class HostDevice final : public Device {
public:
  explicit HostDevice(Comm &c) : communicator(c) {}
  ~HostDevice() override {
    for (void *p : blocks)
      std::free(p);
  }

  std::string describe() const override {
    return "emulated (the device backend's kernels run on the host)";
  }
  Status allocate(int64_t bytes, bool host, void **out) override {
    size_t n = (size_t)(bytes + 63) / 64 * 64;
    *out = std::aligned_alloc(64, n);
    if (!*out)
      return Status::error("cannot allocate " + std::to_string(bytes) +
                           " bytes");
    std::memset(*out, 0, n);
    blocks.push_back(*out);
    // Host memory (the inputs, offload's pool) is not the device's.
    if (!host)
      held += (int64_t)n;
    return Status::ok();
  }
  Status upload(void *dst, const void *src, int64_t bytes) override {
    std::memcpy(dst, src, bytes);
    return Status::ok();
  }
  Status download(void *dst, const void *src, int64_t bytes) override {
    std::memcpy(dst, src, bytes);
    return Status::ok();
  }
  Status fill(void *dst, uint8_t byte, int64_t bytes) override {
    std::memset(dst, byte, bytes);
    return Status::ok();
  }
  Status run(const std::vector<DeviceOp> &ops, int) override {
    for (const DeviceOp &op : ops) {
      Status s =
          std::visit([&](const auto &k) { return one(op.n, k); }, op.kernel);
      if (!s)
        return s;
    }
    return Status::ok();
  }
  Status synchronize() override { return Status::ok(); }
  int64_t memoryInUse() override { return held; }
  const Comm &comm() const override { return communicator; }

private:
  Comm &communicator;
  std::vector<void *> blocks;
  int64_t held = 0;           // device memory
  std::vector<double> shared; // the block kernels' shared memory

  template <typename F> Status one(int64_t n, const F &f) {
    runKernelOnHost(n, f, shared);
    return Status::ok();
  }
  // Fused attention: the flash kernels the GPU falls back to.
  Status one(int64_t, const SdpaForward &a) {
    runKernelOnHost(a.flashBlocks, a.flash, shared);
    return Status::ok();
  }
  Status one(int64_t, const SdpaBackward &a) {
    runKernelOnHost(a.queryBlocks, a.queries, shared);
    runKernelOnHost(a.keyBlocks, a.keys, shared);
    return Status::ok();
  }
  Status one(int64_t, const Gemm &g) {
    FSDP_RETURN_IF_ERROR(product(g));
    // lhs_sums: the reduction's own operations (no epilogue here).
    return g.sumsFallback ? run(*g.sumsFallback, -1) : Status::ok();
  }
  Status product(const Gemm &g) {
    if (g.type == ElemType::F32) {
      sgemm(g, static_cast<const float *>(g.a), static_cast<const float *>(g.b),
            static_cast<float *>(g.c));
      return Status::ok();
    }
    // bf16/f16, as a GPU's tensor cores compute them: exact products of
    // the narrow values summed in f32, C rounded once (C is read first
    // when beta is not zero). The f32 copies grow on the first run only.
    // Each operand's extent: one past the last element any product reads
    // (a matrix whose leading dimension is longer than its rows, as a
    // convolution's batched column blocks, ends with its last row).
    auto extent = [&](int64_t rows, int64_t cols, int64_t ld, int64_t stride) {
      return (g.batch - 1) * stride + (rows - 1) * ld + cols;
    };
    int64_t na = extent(g.ta ? g.k : g.m, g.ta ? g.m : g.k, g.lda, g.strideA),
            nb = extent(g.tb ? g.n : g.k, g.tb ? g.k : g.n, g.ldb, g.strideB),
            nc = extent(g.m, g.n, g.ldc, g.strideC);
    auto widen = [&](const void *p, int64_t n, std::vector<float> &out) {
      if ((int64_t)out.size() < n)
        out.resize(n);
      for (int64_t i = 0; i < n; ++i)
        out[i] = (float)loadElem(g.type, p, i);
    };
    widen(g.a, na, wideA);
    widen(g.b, nb, wideB);
    widen(g.c, nc, wideC);
    sgemm(g, wideA.data(), wideB.data(), wideC.data());
    for (int64_t i = 0; i < nc; ++i)
      storeElem(g.type, g.c, i, wideC[i]);
    return Status::ok();
  }
  void sgemm(const Gemm &g, const float *a, const float *b, float *c) {
    for (int64_t i = 0; i < g.batch; ++i) {
      // The bias epilogue: C = beta C + bias first, then C += alpha A B in
      // one f32 sum (as the CPU backend adds the bias).
      float beta = g.beta;
      if (g.bias) {
        for (int64_t r = 0; r < g.m; ++r)
          for (int64_t j = 0; j < g.n; ++j) {
            float &cij = c[i * g.strideC + r * g.ldc + j];
            cij = (beta == 0 ? 0.0f : beta * cij) +
                  (float)loadElem(g.type, g.bias, j);
          }
        beta = 1.0f;
      }
      cblas_sgemm(CblasRowMajor, g.ta ? CblasTrans : CblasNoTrans,
                  g.tb ? CblasTrans : CblasNoTrans, (blasint)g.m, (blasint)g.n,
                  (blasint)g.k, g.alpha, a + i * g.strideA, (blasint)g.lda,
                  b + i * g.strideB, (blasint)g.ldb, beta, c + i * g.strideC,
                  (blasint)g.ldc);
    }
  }
  std::vector<float> wideA, wideB, wideC;
  Status one(int64_t, const Copy &c) {
    std::memmove(c.dst, c.src, c.bytes);
    return Status::ok();
  }
  Status one(int64_t, const Zero &z) {
    std::memset(z.dst, 0, z.bytes);
    return Status::ok();
  }
  Status one(int64_t, const Collective &c) {
    switch (c.kind) {
    case CollectiveKind::AllReduce:
      return communicator.allReduceStart(c.in, c.out, c.count, c.elem,
                                         c.average, c.slot, c.group);
    case CollectiveKind::AllGather:
      return communicator.allGatherStart(c.in, c.out, c.count, c.elemBytes,
                                         c.slot, c.group);
    case CollectiveKind::ReduceScatter:
      return communicator.reduceScatterStart(c.in, c.out, c.count, c.elem,
                                             c.average, c.slot, c.group);
    }
    return Status::error("unknown collective");
  }
  Status one(int64_t, const Wait &w) {
    return w.copy ? Status::ok() // a Transfer is done when it returns
                  : communicator.wait(w.slot);
  }
  // Offload: host and device memory are this process's both, but distinct
  // blocks (allocate's `host`), so a copy is a real copy.
  Status one(int64_t, const Transfer &t) {
    std::memmove(t.dst, t.src, t.bytes);
    return Status::ok();
  }
  Status one(int64_t, const HostWork &w) { return run(*w.ops, -1); }
};

} // namespace

std::unique_ptr<Device> hostDevice(Comm &comm) {
  return std::make_unique<HostDevice>(comm);
}

} // namespace fsdp::device
