//===- Gemm.h - The CPU's matrix products -----------------------*- C++ -*-===//
//
// Every matrix product of the CPU kernels and of --calibrate goes through
// here, on one of two libraries (both Debian packages):
//
//  - OpenBLAS's sgemm, the default. Debian's OpenBLAS 0.3.21 picks its
//    kernels by CPU model, and on a CPU it does not know (AMD Zen 4) it
//    falls back to its AVX2 kernels: about 100 GFLOP/s a core where the
//    core does 180 with AVX-512.
//  - oneDNN (libdnnl), which picks its kernels by the instruction sets the
//    CPU reports: its sgemm uses AVX-512 wherever the CPU has it, and its
//    matmul primitive multiplies bf16 on AVX512-BF16 and AMX (Debian's
//    OpenBLAS is built without sbgemm).
//
// GemmLibrary::Auto takes oneDNN where it has AVX-512 kernels and OpenBLAS
// does not, OpenBLAS elsewhere (fsdp-run --gemm overrides it). Both are
// called on the calling thread inside the kernels' OpenMP loops, and on all
// the process's OpenMP threads for one large product.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_CPU_GEMM_H
#define FSDP_RUNTIME_CPU_GEMM_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <string>

namespace fsdp::cpu {

enum class GemmLibrary { Auto, OpenBLAS, OneDNN };

/// Parses "auto", "openblas" or "onednn".
Status parseGemmLibrary(const std::string &name, GemmLibrary &out);

/// Chooses the library every later product runs on (Auto resolves here).
/// Call before the first step; not thread-safe against running products.
void setGemmLibrary(GemmLibrary library);

/// The library products run on now (never Auto).
GemmLibrary gemmLibrary();
const char *gemmLibraryName(GemmLibrary library);

/// Whether oneDNN multiplies bf16 natively here (AVX512-BF16 or AMX).
bool nativeBf16Gemm();

/// C[M,N] = alpha * op(A) op(B) + beta * C on row-major matrices, on the
/// calling thread. ldc 0 means n.
void sgemmSerial(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                 const float *a, int64_t lda, const float *b, int64_t ldb,
                 float beta, float *out, int64_t ldc = 0);

/// The same product on all the process's OpenMP threads (or the calling
/// thread alone when it is small).
void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
           const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
           float *out);

} // namespace fsdp::cpu

#endif // FSDP_RUNTIME_CPU_GEMM_H
