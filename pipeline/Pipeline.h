//===- Pipeline.h - The plan pipeline, as one configuration ----*- C++ -*-===//
//
// Everything fsdp-opt decides between a trained module and a plan, in one
// struct, so that the driver and the autotuner build the same pass pipeline
// from it.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_PIPELINE_PIPELINE_H
#define FSDP_PIPELINE_PIPELINE_H

#include "passes/Passes.h"

namespace mlir::fsdp {

struct PlanConfig {
  FsdpWrapUnitsOptions wrap;
  FsdpMergeUnitsOptions merge;
  FsdpCheckpointActivationsOptions checkpointing;
  FsdpShardOptions shard;
  FsdpOffloadOptions offload;
  FsdpScheduleOptions schedule;
  FsdpPlanMemoryOptions memory;
  FsdpSimulateOptions simulate;
};

/// Units → checkpointing → sharding → collectives → schedule → memory plan
/// (→ verification) → simulation, on a module fsdp-build-train-step made.
/// Which patterns a front end's graph is cleaned of (all by default).
struct FrontendFusions {
  bool attention = true;
  bool gelu = true;
  bool rmsNorm = true;
  bool attentionLayout = true;
};

/// The passes every imported graph goes through before the training step
/// is built (ONNX and traced PyTorch alike): attention, GELU and RMSNorm
/// recognised from the ops they were written as, transposes folded into
/// their matmuls and attentions, bias adds into the matmul before them.
void addFrontendPasses(PassManager &pm, const FrontendFusions &fusions);

/// The passes from a training step to a plan (`config`): units (wrap,
/// merge), activation checkpointing, sharding, collectives, schedule,
/// memory, fsdp-verify-plan (with `verify`) and the simulation.
void addPlanPasses(PassManager &pm, const PlanConfig &config, bool verify);

} // namespace mlir::fsdp

#endif // FSDP_PIPELINE_PIPELINE_H
