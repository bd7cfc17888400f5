//===- Calibrate.cpp - Measure this machine for the cost model ------------===//
#include "runtime/cpu/Calibrate.h"
#include "runtime/cpu/Gemm.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/support/Resident.h"
#include "runtime/support/Threads.h"

#include <malloc.h>
#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

namespace fsdp::cpu {

namespace {

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// The best of `reps` timings of f (seconds).
template <typename F> double best(int reps, F f) {
  double t = 1e30;
  for (int i = 0; i < reps; ++i) {
    double s = now();
    f();
    t = std::min(t, now() - s);
  }
  return t;
}

/// The median of `reps` timings of f (seconds).
template <typename F> double median(int reps, F f) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    double s = now();
    f();
    t.push_back(now() - s);
  }
  std::nth_element(t.begin(), t.begin() + reps / 2, t.end());
  return t[reps / 2];
}

/// Causal attention as a GPT-2 block runs it (12 heads of 64, T=256): the
/// model FLOP/s of the forward kernel (AttentionOp::getFlops' count, the
/// hidden half skipped), and the backward's time over the forward's times
/// its 2.5x flops (AttentionGradOp::getFlops), both through the kernels
/// the executor runs.
Status measureAttention(double &forwardFlops, double &gradRatio) {
  const int64_t heads = 12, t = 256, d = 64;
  int64_t n = heads * t * d;
  std::vector<float> memory(8 * n + 64);
  for (size_t i = 0; i < memory.size(); ++i)
    memory[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
  auto tensor = [&](int k) {
    TensorRef r;
    r.offset = k * n * (int64_t)sizeof(float);
    r.shape = {heads, t, d};
    return r;
  };
  Instruction fwd, grad;
  fwd.op = "attention";
  fwd.in = {tensor(0), tensor(1), tensor(2)};
  fwd.out = {tensor(3)};
  fwd.attrs = {{"scale", 0.125}, {"causal", true}};
  grad.op = "attention_grad";
  grad.in = {tensor(0), tensor(1), tensor(2), tensor(4)};
  grad.out = {tensor(5), tensor(6), tensor(7)};
  grad.attrs = fwd.attrs;
  std::vector<double> scratch( // (per thread, counted in floats)
      (size_t)std::max(scratchFloats(fwd), scratchFloats(grad)) / 2 + 16);
  Context c;
  c.arena = reinterpret_cast<uint8_t *>(memory.data());
  c.scratch = reinterpret_cast<float *>(scratch.data());
  Status failed = Status::ok();
  auto run = [&](const Instruction &in) {
    if (Status s = kernelFor(in.op)(in, c); !s)
      failed = s;
  };
  // Warm (0.2 s of it, as the GEMM's: a few cold calls measured 30% slow
  // now and then), then the best of several.
  for (double start = now(); now() - start < 0.2;)
    run(fwd);
  double tf = best(10, [&] { run(fwd); });
  run(grad);
  double tg = best(5, [&] { run(grad); });
  FSDP_RETURN_IF_ERROR(failed);
  double flops = (2.0 * n * t + 2.0 * n * t + 5.0 * heads * t * t) / 2;
  forwardFlops = flops / tf;
  gradRatio = tg / (tf * (5.0 * 2 * n * t / 2) / flops);
  return Status::ok();
}

/// The GEMM rate a transformer's step sees: one MLP's four products as the
/// matmul kernel runs them (1024 tokens, d = 768, 4d = 3072): the forward's
/// two (B transposed, with a bias; the second into a narrower layer), the
/// input gradient's (plain) and the weight gradient's (A transposed), each
/// on the path and library a plan's instruction takes, one product's output
/// the next one's input as in a step. The best of three rounds after 0.2 s
/// of warming. A 1024^2 product alone ran 5-15% faster than a step's
/// products do (no bias, no transpose), and the predicted step came out
/// that much short.
Status measureBlockProducts(bool bf16, double &rate) {
  const int64_t t = 1024, d = 768, h = 3072;
  DType type = bf16 ? DType::BF16 : DType::F32;
  int64_t offset = 0;
  auto tensor = [&](std::vector<int64_t> shape) {
    TensorRef r;
    r.offset = offset;
    r.shape = std::move(shape);
    r.dtype = type;
    offset += (r.bytes() + 63) / 64 * 64;
    return r;
  };
  TensorRef x = tensor({t, d}), w1 = tensor({h, d}), b1 = tensor({h}),
            y1 = tensor({t, h}), w2 = tensor({d, h}), b2 = tensor({d}),
            y2 = tensor({t, d}), dx = tensor({t, h}), dw = tensor({d, h});
  auto product = [](const TensorRef &a, const TensorRef &b,
                    const TensorRef *bias, const TensorRef &y, bool ta,
                    bool tb) {
    Instruction in;
    in.op = "matmul";
    in.in = {a, b};
    if (bias)
      in.in.push_back(*bias);
    in.out = {y};
    in.attrs = {{"transpose_lhs", ta}, {"transpose_rhs", tb}};
    return in;
  };
  const Instruction products[] = {
      product(x, w1, &b1, y1, false, true),     // up: k < n
      product(y1, w2, &b2, y2, false, true),    // down: k > n
      product(y2, w2, nullptr, dx, false, false), // input gradient
      product(y2, y1, nullptr, dw, true, false),  // weight gradient
  };
  // Small values either way: bf16 1/128 and up; f32 (halves in pairs,
  // little-endian) 1/64 and up. No denormals, no overflow.
  std::vector<uint16_t> memory((size_t)offset / 2 + 32);
  for (size_t i = 0; i < memory.size(); ++i)
    memory[i] = bf16 ? 0x3c00 + (uint16_t)(i % 64)
                : i % 2 ? 0x3c80 + (uint16_t)(i % 128)
                        : (uint16_t)(i % 4096);
  Context c;
  c.arena = reinterpret_cast<uint8_t *>(memory.data());
  Status failed = Status::ok();
  auto block = [&] {
    for (const Instruction &in : products)
      if (Status s = kernelFor(in.op)(in, c); !s)
        failed = s;
  };
  for (double start = now(); now() - start < 0.2;)
    block();
  double seconds = best(3, block);
  FSDP_RETURN_IF_ERROR(failed);
  rate = 4 * 2.0 * t * d * h / seconds;
  return Status::ok();
}

} // namespace

Status calibrate(Comm &comm, nlohmann::json &device) {
  // Products as a step's matmuls run them (measureBlockProducts: on the
  // rank's threads, the library this process chose), after 0.2 s of the
  // same work: a few milliseconds measured cold came out 3x slow now and
  // then (thread start, clock ramp, a shared machine's neighbours).
  openblas_set_num_threads(1);
  int threads = maxThreads(), cores = numProcs();
  double flops = 0;
  FSDP_RETURN_IF_ERROR(measureBlockProducts(false, flops));
  // The machine's sgemm peak as benchmarks quote it (one 1024^2 product,
  // operands in cache, the best of 10): reported, not used by the model.
  const int n = 1024;
  std::vector<float> a(n * n, 1.0f), b(n * n, 0.5f), c(n * n, 0.0f);
  double peak = 2.0 * n * n * n / best(10, [&] {
                  sgemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n,
                        0.0f, c.data());
                });
  // bf16 products where they run as bf16 (cpu/Gemm.h); elsewhere they are
  // widened to f32 and run as fast as f32's.
  double flopsBf16 = flops;
  if (nativeBf16Gemm())
    FSDP_RETURN_IF_ERROR(measureBlockProducts(true, flopsBf16));

  // Copy bandwidth (bytes read plus written), on the rank's threads as the
  // memory-bound kernels run: one thread's memcpy reached half of what two
  // threads' kernels did (12 against 21 GB/s on a 2-core Xeon), and every
  // memory-bound op was predicted twice as slow as it ran.
  const size_t bytes = 64 << 20;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  auto copyAll = [&] {
    const int64_t chunks = 64, chunk = (int64_t)bytes / chunks;
#pragma omp parallel for num_threads(threads)
    for (int64_t c = 0; c < chunks; ++c)
      std::memcpy(dst.data() + c * chunk, src.data() + c * chunk,
                  (size_t)chunk);
  };
  copyAll();
  double copy = best(5, copyAll);
  double bandwidth = 2.0 * bytes / copy;
  // The same within the rank's caches: its threads' L2, each copying a
  // quarter of its own (source and destination in half of it), repeated
  // so the data stays there. Small ops run at this rate, two to three
  // times the memory's.
  long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  double cacheBytes = 0, cacheBandwidth = 0;
  if (l2 > 0) {
    const int64_t each = l2 / 4;
    std::vector<char> a((size_t)each * threads, 1), b((size_t)each * threads);
    auto copyCached = [&] {
      for (int rep = 0; rep < 8; ++rep) {
#pragma omp parallel for num_threads(threads)
        for (int64_t t = 0; t < threads; ++t)
          std::memcpy(b.data() + t * each, a.data() + t * each, (size_t)each);
      }
    };
    copyCached();
    cacheBandwidth = 2.0 * 8 * each * threads / best(20, copyCached);
    cacheBytes = (double)l2 * threads;
  }

  // Parallel efficiency of the kernels' loops: an element-wise mix (a
  // transcendental and a streaming add) on one thread and on all of them.
  // A rank of a multi-rank job runs on fewer threads than this calibration
  // (fsdp-run splits the cores), and fsdp-simulate scales by the speedup
  // this gives.
  double efficiency = 1.0;
#ifdef _OPENMP
  if (threads > 1) {
    std::vector<float> x(1 << 21, 0.5f), y(1 << 21, 0.0f);
    auto mix = [&](int t) {
      return best(3, [&] {
        int64_t n = (int64_t)x.size();
#pragma omp parallel for num_threads(t)
        for (int64_t i = 0; i < n; ++i)
          y[i] = std::tanh(x[i]);
#pragma omp parallel for num_threads(t)
        for (int64_t i = 0; i < n; ++i)
          y[i] += x[i];
      });
    };
    // The median of paired trials: a shared machine's noise moves single
    // timings by tens of percent.
    std::vector<double> speedups;
    for (int trial = 0; trial < 9; ++trial)
      speedups.push_back(mix(1) / mix(threads));
    std::nth_element(speedups.begin(), speedups.begin() + 4, speedups.end());
    efficiency = std::clamp((speedups[4] - 1.0) / (threads - 1), 0.0, 1.0);
  }
#endif

  double attentionFlops = flops, attentionGrad = 1.0;
  FSDP_RETURN_IF_ERROR(measureAttention(attentionFlops, attentionGrad));

  // Between ranks: a tiny all-reduce's latency, a large one's bandwidth.
  double latency = 2e-6, link = bandwidth / 4;
  int64_t p = comm.size();
  if (p > 1) {
    comm.reserve(1);
    std::vector<float> small(1), big(4 << 20, 1.0f); // 16 MB
    auto allReduce = [&](std::vector<float> &v) {
      Status s = comm.allReduceStart(v.data(), v.data(), (int64_t)v.size(),
                                     Elem::F32, false, 0, Group::World);
      if (s)
        s = comm.wait(0);
      return s;
    };
    Status failed = Status::ok();
    // As a step meets them: the median, not the best (a collective's time
    // varies with the scheduling of its ranks). Measured with the ranks
    // idle: a busy thread beside them (as a step's kernels are when Gloo's
    // transfers overlap them) made the median jump between 40 us and
    // milliseconds from one calibration to the next.
    double tSmall = median(21, [&] {
      if (Status s = allReduce(small); !s)
        failed = s;
    });
    double tBig = median(5, [&] {
      if (Status s = allReduce(big); !s)
        failed = s;
    });
    FSDP_RETURN_IF_ERROR(failed);
    // Ring all-reduce: 2(p-1) steps of latency, 2(p-1)/p of the bytes.
    latency = tSmall / (2.0 * (p - 1));
    double moved = 2.0 * (p - 1) / p * big.size() * sizeof(float);
    link = moved / std::max(tBig - 2.0 * (p - 1) * latency, 1e-9);
  }
  // What this process holds besides a plan's memory: measured with the
  // buffers above freed and the heap's free pages given back (glibc keeps
  // the 4 MiB ones in its heap), so the figure is the libraries', MPI's and
  // the GEMM library's own, not this calibration's operands.
  std::vector<float>().swap(a);
  std::vector<float>().swap(b);
  std::vector<float>().swap(c);
  std::vector<char>().swap(src);
  std::vector<char>().swap(dst);
#ifdef __GLIBC__
  malloc_trim(0);
#endif
  int64_t runtimeBytes = std::max<int64_t>(residentBytes(), 0);
  device = {{"name", std::string("cpu (calibrated, ") +
                        gemmLibraryName(gemmLibrary()) + " GEMMs)"},
            {"flops_f32", flops},
            {"sgemm_peak_f32", peak},
            {"flops_bf16", flopsBf16},
            {"mem_bandwidth", bandwidth},
            {"cache_bytes", cacheBytes},
            {"cache_bandwidth", cacheBandwidth},
            // Attention's kernels against the GEMM's rate; the backward's
            // own factor on top.
            {"attention_efficiency",
             std::clamp(attentionFlops / flops, 0.01, 1.0)},
            {"op_scale", {{"attention_grad", attentionGrad}}},
            // MPI's collectives move inside waits only (DeviceModel.h);
            // Gloo's on threads of their own.
            {"async_progress", comm.progressesAlone()},
            // bf16 products run as bf16: no f32 copies of their operands.
            {"native_bf16_products", nativeBf16Gemm()},
            {"intra_bandwidth", link},
            {"inter_bandwidth", link},
            {"intra_latency", latency},
            {"inter_latency", latency},
            {"launch_overhead", 1e-6},
            {"devices_per_node", 1 << 20},
            {"threads", threads},
            // The ranks of a node share its cores and memory.
            {"cores", cores},
            {"parallel_efficiency", efficiency},
            // What this process holds besides a plan's memory once its
            // GEMMs and collectives have run: libraries, MPI, the BLAS
            // buffers of its threads (a plan's process_peak_bytes).
            {"runtime_bytes", runtimeBytes}};
  return Status::ok();
}

} // namespace fsdp::cpu
