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
// GemmLibrary::Auto takes oneDNN wherever it has AVX-512 kernels, OpenBLAS
// elsewhere (fsdp-run --gemm overrides it). Where both have AVX-512 (an
// Intel Xeon OpenBLAS knows), oneDNN's step was still 6-12% shorter:
// a GPT-2 124M / Llama-shaped step on 2 ranks x 1 thread, T=128, 2.62 s
// against 2.78 and 2.05 against 2.33 (bench/vs_pytorch_fsdp.py's plans). Both are
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

/// Whether bf16 products run as bf16 here: oneDNN has AVX512-BF16 or AMX
/// kernels, and --gemm did not ask for OpenBLAS (which then gets them
/// widened to f32, as everywhere else).
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

/// One operand of a (batched, broadcast) product as oneDNN's matmul reads
/// it: `rank` dimensions and element strides, the last two [rows, cols] of
/// op(X) (a transpose is swapped strides), leading batch dimensions 1 where
/// the operand repeats.
struct MatrixView {
  int rank = 0;
  int64_t dims[8] = {}, strides[8] = {};
};

/// y = op(a) op(b) (+ bias) on oneDNN's matmul primitive, a, b, bias and y
/// all bf16 (accumulated in f32 and rounded once into y; AVX512-BF16 or
/// AMX: check nativeBf16Gemm first) or all f32. The primitive of each
/// distinct shape is made on its first use and kept.
Status matmulOneDnn(bool bf16, const MatrixView &a, const MatrixView &b,
                    const MatrixView *bias, const MatrixView &y, const void *pa,
                    const void *pb, const void *pbias, void *py);

/// Whether an f32 product C[m,n] = op(A) op(B) runs faster on oneDNN's
/// matmul primitive (its brgemm kernels, the bias in the epilogue) than on
/// oneDNN's sgemm. Measured on AVX-512 (Zen 5, 2 threads, Debian's oneDNN
/// 2.7) at a transformer's shapes, sgemm loses 10-50% where B is
/// transposed and k > n (nn.Linear's forward into a narrower layer, m x k
/// x n = 1024x1024x256: 311 against 357 GFLOP/s alone, 288 against 333 in
/// a GPT-2 step; 512x3072x768: 276 against 350) and is as fast or faster
/// elsewhere (the primitive's NN products at 512x768x3072: 301 against
/// 347; its transposed-B ones with k <= n 5-10% slower; its transposed-A
/// ones faster alone, no faster in a step). Only under the oneDNN
/// library; the rule depends on shapes alone, so a plan's products, and
/// their rounding, are the same from run to run.
bool preferMatmulPrimitive(bool ta, bool tb, int64_t n, int64_t k);

} // namespace fsdp::cpu

#endif // FSDP_RUNTIME_CPU_GEMM_H
