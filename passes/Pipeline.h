//===- Pipeline.h - The plan pipeline, as one configuration ----*- C++ -*-===//
//
// Everything fsdp-opt decides between a trained module and a plan, in one
// struct, so that the driver and the autotuner build the same pass pipeline
// from it.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_PASSES_PIPELINE_H
#define FSDP_PASSES_PIPELINE_H

#include "passes/Passes.h"

namespace mlir::fsdp {

struct PlanConfig {
  FsdpWrapUnitsOptions wrap;
  FsdpMergeUnitsOptions merge;
  FsdpCheckpointActivationsOptions checkpointing;
  FsdpShardOptions shard;
  FsdpScheduleOptions schedule;
  FsdpPlanMemoryOptions memory;
  FsdpSimulateOptions simulate;
};

/// Units → checkpointing → sharding → collectives → schedule → memory plan
/// (→ verification) → simulation, on a module fsdp-build-train-step made.
void addPlanPasses(PassManager &pm, const PlanConfig &config, bool verify);

} // namespace mlir::fsdp

#endif // FSDP_PASSES_PIPELINE_H
