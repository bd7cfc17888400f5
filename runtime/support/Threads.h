//===- Threads.h - OpenMP's thread queries, with or without OpenMP -*- C++ -*-//
//
// The CPU kernels are parallelised with OpenMP pragmas, which a compiler
// without OpenMP (clang without libomp: the fuzzing build) ignores; the few
// places that ask how many threads there are call these instead of omp_*,
// so the runtime builds either way (one thread without OpenMP).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_SUPPORT_THREADS_H
#define FSDP_RUNTIME_SUPPORT_THREADS_H

#ifdef _OPENMP
#include <omp.h>
#endif

namespace fsdp {

inline int maxThreads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

/// The calling thread's number in the enclosing parallel region.
inline int threadNum() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

/// Threads in the enclosing parallel region.
inline int numThreads() {
#ifdef _OPENMP
  return omp_get_num_threads();
#else
  return 1;
#endif
}

/// Processors available to this process.
inline int numProcs() {
#ifdef _OPENMP
  return omp_get_num_procs();
#else
  return 1;
#endif
}

inline void setNumThreads(int n) {
#ifdef _OPENMP
  omp_set_num_threads(n);
#else
  (void)n;
#endif
}

} // namespace fsdp

#endif // FSDP_RUNTIME_SUPPORT_THREADS_H
