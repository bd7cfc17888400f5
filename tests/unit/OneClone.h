//===- OneClone.h - Whether this CPU runs a forced vector clone -*- C++ -*-===//
//
// The binaries built on one vector clone of the CPU kernels
// (FSDP_ONE_CLONE=4, 3 or 0: cpu/VectorMath.h) ask this first and exit 77
// (skipped) on a CPU that cannot run theirs: fsdp-kernel-tests-clone-N
// (OneCloneMain.cpp) and fsdp-run-clone-N (OneCloneRun.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TESTS_UNIT_ONECLONE_H
#define FSDP_TESTS_UNIT_ONECLONE_H

inline bool cpuRunsClone() {
#if defined(__x86_64__) && FSDP_ONE_CLONE == 4
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx2") &&
         __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2");
#elif defined(__x86_64__) && FSDP_ONE_CLONE == 3
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("bmi2");
#else
  return true;
#endif
}

#endif // FSDP_TESTS_UNIT_ONECLONE_H
