//===- Backends.h - Choosing where fsdp-run computes ------------*- C++ -*-===//
#ifndef FSDP_RUNTIME_BACKENDS_BACKENDS_H
#define FSDP_RUNTIME_BACKENDS_BACKENDS_H

#include "runtime/exec/StepBackend.h"

#include <memory>
#include <string>

namespace fsdp {

/// `name`: "cpu" (out stays null: the executor's own kernels), "emulated"
/// (the device backend on the host) or "cuda" (one GPU per process: the
/// launcher's local rank picks it; collectives over NCCL, bootstrapped
/// through `comm`). An error names the backend when this build or machine
/// lacks it.
Status stepBackend(const std::string &name, Comm &comm, int64_t localRank,
                   double commTimeoutSeconds,
                   std::unique_ptr<StepBackend> &out);

} // namespace fsdp

#endif // FSDP_RUNTIME_BACKENDS_BACKENDS_H
