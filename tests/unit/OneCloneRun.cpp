//===- OneCloneRun.cpp - fsdp-run on one forced vector clone --------------===//
//
// Linked into fsdp-run-clone-N (tools/fsdp-run.cpp's main on the CPU
// kernels built with FSDP_ONE_CLONE=N): before main, a CPU that cannot run
// clone N ends the process with 77, which tests/e2e/offload.py counts as
// this clone skipped.
//
//===----------------------------------------------------------------------===//
#include "OneClone.h"

#include <cstdio>
#include <cstdlib>

namespace {

__attribute__((constructor)) void refuseClonesThisCpuCannotRun() {
  if (cpuRunsClone())
    return;
  std::fprintf(stderr, "this CPU cannot run clone %d of the kernels: skipped\n",
               FSDP_ONE_CLONE);
  std::_Exit(77);
}

} // namespace
