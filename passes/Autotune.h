//===- Autotune.h - Choose a plan under a memory budget --------*- C++ -*-===//
#ifndef FSDP_PASSES_AUTOTUNE_H
#define FSDP_PASSES_AUTOTUNE_H

#include "passes/Pipeline.h"

#include <optional>

namespace mlir::fsdp {

/// "80GiB", "512MiB", "64KiB", "80GB" (decimal) or a plain byte count.
std::optional<int64_t> parseByteSize(llvm::StringRef text);

/// Chooses, for the module fsdp-build-train-step made, each unit's
/// reshard_after_forward and activation checkpointing, the prefetch depth
/// and the unit granularity that minimise the simulated step time with the
/// predicted peak within `budget` bytes. Prints the choice, one line per
/// unit with its reasons, to `os`; emits an error naming the smallest peak
/// found and what dominates it when nothing fits.
FailureOr<PlanConfig> autotunePlan(ModuleOp trained, const PlanConfig &base,
                                   int64_t budget, llvm::raw_ostream &os);

} // namespace mlir::fsdp

#endif // FSDP_PASSES_AUTOTUNE_H
