//===- Gemm.cpp - The CPU's matrix products -------------------------------===//
#include "runtime/cpu/Gemm.h"
#include "runtime/support/AllocationCounter.h"
#include "runtime/support/Threads.h"

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cctype>
#include <mutex>
#include <vector>

namespace fsdp::cpu {

namespace {

GemmLibrary current = GemmLibrary::OpenBLAS, requested = GemmLibrary::Auto;
bool chosen = false;

/// Whether OpenBLAS runs AVX-512 kernels here (its core name says which
/// kernels it picked).
bool onednnHasAvx512() {
  return dnnl_get_effective_cpu_isa() >= dnnl_cpu_isa_avx512_core;
}

void ensureChosen() {
  if (!chosen)
    setGemmLibrary(GemmLibrary::Auto);
}

} // namespace

Status parseGemmLibrary(const std::string &name, GemmLibrary &out) {
  if (name == "auto")
    out = GemmLibrary::Auto;
  else if (name == "openblas")
    out = GemmLibrary::OpenBLAS;
  else if (name == "onednn")
    out = GemmLibrary::OneDNN;
  else
    return Status::error("--gemm: '" + name +
                         "' is not one of auto, openblas, onednn");
  return Status::ok();
}

void setGemmLibrary(GemmLibrary library) {
  requested = library;
  if (library == GemmLibrary::Auto)
    library = onednnHasAvx512() ? GemmLibrary::OneDNN : GemmLibrary::OpenBLAS;
  current = library;
  chosen = true;
}

GemmLibrary gemmLibrary() {
  ensureChosen();
  return current;
}

const char *gemmLibraryName(GemmLibrary library) {
  switch (library) {
  case GemmLibrary::Auto:
    return "auto";
  case GemmLibrary::OpenBLAS:
    return "openblas";
  case GemmLibrary::OneDNN:
    return "onednn";
  }
  return "?";
}

bool nativeBf16Gemm() {
  ensureChosen();
  return requested != GemmLibrary::OpenBLAS &&
         dnnl_get_effective_cpu_isa() >= dnnl_cpu_isa_avx512_core_bf16;
}

void sgemmSerial(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                 const float *a, int64_t lda, const float *b, int64_t ldb,
                 float beta, float *out, int64_t ldc) {
  if (ldc == 0)
    ldc = n;
  if (m == 0 || n == 0)
    return;
  if (k == 0) { // C = beta C, as BLAS defines it (oneDNN's sgemm crashed)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        out[i * ldc + j] = beta == 0.0f ? 0.0f : beta * out[i * ldc + j];
    return;
  }
  if (gemmLibrary() == GemmLibrary::OneDNN) {
    // oneDNN's sgemm allocates its packing buffers on each call and frees
    // them before it returns (--check-allocations counts ours, not these).
    AllocationPause packing;
    // Inside the kernels' OpenMP loops oneDNN runs on the calling thread.
    if (dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b,
                   ldb, beta, out, ldc) == dnnl_success)
      return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, (blasint)m, (blasint)n,
              (blasint)k, alpha, a, (blasint)lda, b, (blasint)ldb, beta, out,
              (blasint)ldc);
}

/// OpenBLAS runs single-threaded (the executor sets it): a large product is
/// split by output rows across the OpenMP threads instead, so no BLAS
/// thread pool spins between the many small products of a step. oneDNN
/// splits one product over the OpenMP threads itself (by rows and columns,
/// which suits the step's wide and its tall products alike).
void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
           const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
           float *out) {
  if (gemmLibrary() == GemmLibrary::OneDNN || m * n * k < (int64_t(1) << 21) ||
      m < 16) {
    sgemmSerial(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, out);
    return;
  }
#pragma omp parallel
  {
    int parts = numThreads(), id = threadNum();
    int64_t rows = (m + parts - 1) / parts, r0 = id * rows,
            r1 = std::min(m, r0 + rows);
    if (r0 < r1)
      // Row r of op(A) is A's row r (no transpose) or column r (transposed).
      sgemmSerial(ta, tb, r1 - r0, n, k, alpha, ta ? a + r0 : a + r0 * lda, lda,
                  b, ldb, beta, out + r0 * n);
  }
}

bool preferMatmulPrimitive(bool ta, bool tb, int64_t n, int64_t k) {
  return gemmLibrary() == GemmLibrary::OneDNN && tb && !ta && k > n;
}

namespace {

/// oneDNN's CPU engine and stream, and the matmul primitives made so far
/// with their memory objects (pointed at each call's tensors).
struct Matmuls {
  struct Entry {
    dnnl_primitive_t primitive = nullptr;
    dnnl_memory_t a = nullptr, b = nullptr, bias = nullptr, y = nullptr;
  };
  dnnl_engine_t engine = nullptr;
  dnnl_stream_t stream = nullptr;
  std::vector<std::pair<std::vector<int64_t>, Entry>> made; // a few dozen
  std::mutex lock;
};

Matmuls &matmuls() {
  static Matmuls m;
  return m;
}

std::string dnnlError(const char *what, dnnl_status_t s) {
  return std::string("oneDNN ") + what + " failed (status " +
         std::to_string((int)s) + ")";
}

#define FSDP_DNNL(what, call)                                                  \
  do {                                                                         \
    if (dnnl_status_t s_ = (call); s_ != dnnl_success)                         \
      return Status::error(dnnlError(what, s_));                               \
  } while (0)

Status describe(const MatrixView &v, dnnl_data_type_t type,
                dnnl_memory_desc_t &md) {
  if (v.rank < 2 || v.rank > 8)
    return Status::error("a product of rank " + std::to_string(v.rank));
  dnnl_dims_t dims, strides;
  for (int i = 0; i < v.rank; ++i) {
    dims[i] = v.dims[i];
    strides[i] = v.strides[i];
  }
  FSDP_DNNL("memory descriptor",
            dnnl_memory_desc_init_by_strides(&md, v.rank, dims, type, strides));
  return Status::ok();
}

Status makeMatmul(Matmuls &m, dnnl_data_type_t type, const MatrixView &a,
                  const MatrixView &b, const MatrixView *bias,
                  const MatrixView &y, Matmuls::Entry &e) {
  if (!m.engine) {
    FSDP_DNNL("engine", dnnl_engine_create(&m.engine, dnnl_cpu, 0));
    FSDP_DNNL("stream", dnnl_stream_create(&m.stream, m.engine,
                                           dnnl_stream_default_flags));
  }
  dnnl_memory_desc_t ma, mb, mbias, my;
  FSDP_RETURN_IF_ERROR(describe(a, type, ma));
  FSDP_RETURN_IF_ERROR(describe(b, type, mb));
  FSDP_RETURN_IF_ERROR(describe(y, type, my));
  if (bias)
    FSDP_RETURN_IF_ERROR(describe(*bias, type, mbias));
  dnnl_matmul_desc_t desc;
  FSDP_DNNL(
      "matmul descriptor",
      dnnl_matmul_desc_init(&desc, &ma, &mb, bias ? &mbias : nullptr, &my));
  dnnl_primitive_desc_t pd;
  FSDP_DNNL("matmul primitive descriptor",
            dnnl_primitive_desc_create(&pd, &desc, nullptr, m.engine, nullptr));
  dnnl_status_t made = dnnl_primitive_create(&e.primitive, pd);
  dnnl_primitive_desc_destroy(pd);
  FSDP_DNNL("matmul primitive", made);
  FSDP_DNNL("memory",
            dnnl_memory_create(&e.a, &ma, m.engine, DNNL_MEMORY_NONE));
  FSDP_DNNL("memory",
            dnnl_memory_create(&e.b, &mb, m.engine, DNNL_MEMORY_NONE));
  FSDP_DNNL("memory",
            dnnl_memory_create(&e.y, &my, m.engine, DNNL_MEMORY_NONE));
  if (bias)
    FSDP_DNNL("memory",
              dnnl_memory_create(&e.bias, &mbias, m.engine, DNNL_MEMORY_NONE));
  return Status::ok();
}

} // namespace

Status matmulOneDnn(bool bf16, const MatrixView &a, const MatrixView &b,
                    const MatrixView *bias, const MatrixView &y, const void *pa,
                    const void *pb, const void *pbias, void *py) {
  Matmuls &m = matmuls();
  std::lock_guard<std::mutex> hold(m.lock);
  // The key: the element type, every dimension and stride of every operand
  // (a lookup of a shape seen before allocates nothing).
  int64_t key[1 + 4 * 17];
  int n = 0;
  key[n++] = bf16;
  for (const MatrixView *v : {&a, &b, bias, &y}) {
    key[n++] = v ? v->rank : -1;
    for (int i = 0; v && i < v->rank; ++i) {
      key[n++] = v->dims[i];
      key[n++] = v->strides[i];
    }
  }
  auto it = std::find_if(m.made.begin(), m.made.end(), [&](const auto &p) {
    return (int)p.first.size() == n && std::equal(key, key + n, p.first.data());
  });
  if (it == m.made.end()) {
    Matmuls::Entry e;
    FSDP_RETURN_IF_ERROR(
        makeMatmul(m, bf16 ? dnnl_bf16 : dnnl_f32, a, b, bias, y, e));
    m.made.emplace_back(std::vector<int64_t>(key, key + n), e);
    it = m.made.end() - 1;
  }
  Matmuls::Entry &e = it->second;
  FSDP_DNNL("memory", dnnl_memory_set_data_handle(e.a, const_cast<void *>(pa)));
  FSDP_DNNL("memory", dnnl_memory_set_data_handle(e.b, const_cast<void *>(pb)));
  FSDP_DNNL("memory", dnnl_memory_set_data_handle(e.y, py));
  dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, e.a},
                             {DNNL_ARG_WEIGHTS, e.b},
                             {DNNL_ARG_DST, e.y},
                             {DNNL_ARG_BIAS, e.bias}};
  if (bias)
    FSDP_DNNL("memory",
              dnnl_memory_set_data_handle(e.bias, const_cast<void *>(pbias)));
  AllocationPause bookkeeping; // (AllocationCounter.h)
  FSDP_DNNL("matmul",
            dnnl_primitive_execute(e.primitive, m.stream, bias ? 4 : 3, args));
  FSDP_DNNL("stream", dnnl_stream_wait(m.stream));
  return Status::ok();
}

} // namespace fsdp::cpu
