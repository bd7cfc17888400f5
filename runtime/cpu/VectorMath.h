//===- VectorMath.h - glibc's vector math for the CPU kernels ---*- C++ -*-===//
//
// glibc ships vector variants of expf, tanhf, erff, logf and log1pf in libmvec
// (SSE, AVX2 and AVX-512 builds, within 4 ulp), but its <math.h> declares
// them only under -ffast-math, which the kernels must not use (NaN and inf
// must propagate as PyTorch's do). Declaring them here the way glibc does
// lets GCC vectorise `omp simd` loops that call these functions, four to
// sixteen elements a call instead of one; the kernels link libmvec.
//
// Chosen over SLEEF or oneDNN (both Debian packages) because it needs no
// new dependency, keeps each kernel a plain C++ loop the compiler
// vectorises for whatever the build targets, and glibc's accuracy is
// within the kernels' 1e-6 agreement with the GPU backend's functions.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_CPU_VECTORMATH_H
#define FSDP_RUNTIME_CPU_VECTORMATH_H

#include <cmath>

extern "C" {
#pragma omp declare simd notinbranch
float expf(float);
#pragma omp declare simd notinbranch
float tanhf(float);
#pragma omp declare simd notinbranch
float erff(float);
#pragma omp declare simd notinbranch
float logf(float);
#pragma omp declare simd notinbranch
float log1pf(float);
}

/// Compiles a kernel three times, for x86-64 with AVX-512 (v4), with AVX2
/// and FMA (v3) and for the baseline the build targets, and picks the one
/// the CPU runs when the program loads (GCC's function multiversioning):
/// the same binary runs everywhere and vectorises 16 floats wide where it
/// can. Its `omp simd` loops then call libmvec's matching width. Kernels.cpp
/// is built with -ffp-contract=off, so no clone fuses a multiply and an add
/// the others round twice: the clones' arithmetic is the same, and they
/// differ only where libmvec's own widths do (within its 4 ulp).
///
/// The kernel tests build the kernels once a clone as well (FSDP_ONE_CLONE
/// = 4, 3 or 0: the AVX-512, the AVX2 or the baseline version alone), so
/// each version is tested on any CPU that can run it, not only the one the
/// loader would pick there (tests/unit: fsdp-kernel-tests-clone-N).
#if defined(FSDP_ONE_CLONE)
#if FSDP_ONE_CLONE == 4
#define FSDP_VECTOR_CLONES __attribute__((target("arch=x86-64-v4")))
#elif FSDP_ONE_CLONE == 3
#define FSDP_VECTOR_CLONES __attribute__((target("arch=x86-64-v3")))
#else
#define FSDP_VECTOR_CLONES
#endif
#elif defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&       \
    !defined(__CUDACC__)
#define FSDP_VECTOR_CLONES                                                     \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FSDP_VECTOR_CLONES
#endif

#endif // FSDP_RUNTIME_CPU_VECTORMATH_H
