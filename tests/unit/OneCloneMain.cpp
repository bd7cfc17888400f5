//===- OneCloneMain.cpp - The kernel tests on one forced vector clone -----===//
//
// fsdp-kernel-tests-clone-N links the CPU kernel sources built with
// FSDP_ONE_CLONE=N (cpu/VectorMath.h): only the AVX-512 (4), AVX2 (3) or
// baseline (0) version of each kernel, whatever this CPU would pick. A CPU
// that cannot run the version skips the binary (exit 77).
//
//===----------------------------------------------------------------------===//
#include "OneClone.h"

#include <cstdio>
#include <gtest/gtest.h>

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
