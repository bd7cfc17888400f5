//===- Autotune.h - Choose a plan under a memory budget --------*- C++ -*-===//
#ifndef FSDP_AUTOTUNE_AUTOTUNE_H
#define FSDP_AUTOTUNE_AUTOTUNE_H

#include "pipeline/Pipeline.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::fsdp {

/// "80GiB", "512MiB", "64KiB", "80GB" (decimal) or a plain byte count.
std::optional<int64_t> parseByteSize(llvm::StringRef text);

/// Chooses, for the module fsdp-build-train-step made, each unit's
/// reshard_after_forward and activation checkpointing, the prefetch depth
/// and the unit granularity that minimise the simulated step time with the
/// predicted peak within `budget` bytes. Prints the choice, one line per
/// unit with its reasons, to `os`; emits an error naming the smallest peak
/// found and what dominates it when nothing fits.
/// One plan autotune simulated, for reports (fsdp-opt
/// --autotune-candidates, shown by fsdp-inspect --candidates).
struct AutotuneCandidate {
  std::string strategy;   // fsdp-shard's strategy (and replica groups)
  std::string reshard;    // --reshard-after-forward
  std::string recompute;  // --activation-checkpointing's units
  int64_t merge = 1, prefetchDepth = 1, replicateGroups = 1;
  bool ok = false;        // the pipeline built and simulated it
  double stepSeconds = 0;
  int64_t peakBytes = 0;
  bool estimated = false; // the arena taken as the live peak (not packed)
};

/// The candidate `config` is (for marking the chosen one).
AutotuneCandidate describeCandidate(const PlanConfig &config);

FailureOr<PlanConfig>
autotunePlan(ModuleOp trained, const PlanConfig &base, int64_t budget,
             llvm::raw_ostream &os,
             std::vector<AutotuneCandidate> *candidates = nullptr);

} // namespace mlir::fsdp

#endif // FSDP_AUTOTUNE_AUTOTUNE_H
