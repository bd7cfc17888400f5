//===- OneCloneMain.cpp - The kernel tests on one forced vector clone -----===//
//
// fsdp-kernel-tests-clone-N links the CPU kernel sources built with
// FSDP_ONE_CLONE=N (cpu/VectorMath.h): only the AVX-512 (4), AVX2 (3) or
// baseline (0) version of each kernel, whatever this CPU would pick. A CPU
// that cannot run the version skips the binary (exit 77).
//
//===----------------------------------------------------------------------===//
#include <cstdio>
#include <gtest/gtest.h>

namespace {

bool cpuRunsClone() {
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

} // namespace

int main(int argc, char **argv) {
  if (!cpuRunsClone()) {
    std::printf("this CPU cannot run clone %d of the kernels: skipped\n",
                FSDP_ONE_CLONE);
    return 77;
  }
  std::printf("kernels: clone %d only (4 AVX-512, 3 AVX2, 0 baseline)\n",
              FSDP_ONE_CLONE);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
