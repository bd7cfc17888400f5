//===- Pipeline.cpp - The plan pipeline, as one configuration -------------===//
#include "pipeline/Pipeline.h"

#include "mlir/Pass/PassManager.h"

using namespace mlir;

void mlir::fsdp::addFrontendPasses(PassManager &pm,
                                   const FrontendFusions &fusions) {
  if (fusions.attention)
    pm.addPass(createFsdpFuseAttention());
  if (fusions.gelu)
    pm.addPass(createFsdpFuseGelu());
  if (fusions.rmsNorm)
    pm.addPass(createFsdpFuseRmsNorm());
  pm.addPass(createFsdpFoldTransposes());
  if (fusions.attentionLayout)
    pm.addPass(createFsdpAttentionLayout());
  pm.addPass(createFsdpFuseMatmulBias());
}

void mlir::fsdp::addPlanPasses(PassManager &pm, const PlanConfig &config,
                               bool verify) {
  pm.addPass(createFsdpWrapUnits(config.wrap));
  pm.addPass(createFsdpMergeUnits(config.merge));
  pm.addPass(createFsdpCheckpointActivations(config.checkpointing));
  // Offload places flat shards, which one rank keeps too when offloading.
  FsdpShardOptions shard = config.shard;
  if (!config.offload.offload.empty() && config.offload.offload != "none")
    shard.keepSharded = true;
  shard.offload = config.offload.offload;
  pm.addPass(createFsdpShard(shard));
  pm.addPass(createFsdpInsertCollectives());
  // FSDP2's CPU offload is priced as FSDP2 runs it.
  FsdpOffloadOptions offload = config.offload;
  if (config.simulate.runtime == "fsdp2-eager")
    offload.shape = "fsdp2";
  pm.addPass(createFsdpOffload(offload));
  pm.addPass(createFsdpSchedule(config.schedule));
  pm.addPass(createFsdpPlanMemory(config.memory));
  if (verify)
    pm.addPass(createFsdpVerifyPlan());
  pm.addPass(createFsdpSimulate(config.simulate));
}
