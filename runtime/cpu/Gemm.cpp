//===- Gemm.cpp - The CPU's matrix products -------------------------------===//
#include "runtime/cpu/Gemm.h"

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <cctype>

namespace fsdp::cpu {

namespace {

GemmLibrary current = GemmLibrary::OpenBLAS;
bool chosen = false;

/// Whether OpenBLAS runs AVX-512 kernels here (its core name says which
/// kernels it picked).
bool openblasHasAvx512() {
  std::string core = openblas_get_corename();
  std::transform(core.begin(), core.end(), core.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  for (const char *name : {"skylakex", "cooperlake", "sapphire"})
    if (core.find(name) != std::string::npos)
      return true;
  return false;
}

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
  if (library == GemmLibrary::Auto)
    library = onednnHasAvx512() && !openblasHasAvx512() ? GemmLibrary::OneDNN
                                                        : GemmLibrary::OpenBLAS;
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
  return dnnl_get_effective_cpu_isa() >= dnnl_cpu_isa_avx512_core_bf16;
}

void sgemmSerial(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                 const float *a, int64_t lda, const float *b, int64_t ldb,
                 float beta, float *out, int64_t ldc) {
  if (ldc == 0)
    ldc = n;
  if (gemmLibrary() == GemmLibrary::OneDNN &&
      // Inside the kernels' OpenMP loops oneDNN runs on the calling thread.
      dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b,
                 ldb, beta, out, ldc) == dnnl_success)
    return;
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
  if (gemmLibrary() == GemmLibrary::OneDNN ||
      m * n * k < (int64_t(1) << 21) || m < 16) {
    sgemmSerial(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, out);
    return;
  }
#pragma omp parallel
  {
#ifdef _OPENMP
    int parts = omp_get_num_threads(), id = omp_get_thread_num();
#else
    int parts = 1, id = 0;
#endif
    int64_t rows = (m + parts - 1) / parts, r0 = id * rows,
            r1 = std::min(m, r0 + rows);
    if (r0 < r1)
      // Row r of op(A) is A's row r (no transpose) or column r (transposed).
      sgemmSerial(ta, tb, r1 - r0, n, k, alpha, ta ? a + r0 : a + r0 * lda, lda,
                  b, ldb, beta, out + r0 * n);
  }
}

} // namespace fsdp::cpu
