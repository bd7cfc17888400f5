//===- FsdpOps.td - All ops of the fsdp dialect ------------*- tablegen -*-===//
#ifndef FSDP_OPS_TD
#define FSDP_OPS_TD

include "dialect/FsdpTensorOps.td"
include "dialect/FsdpDistOps.td"
include "dialect/FsdpTrainOps.td"

#endif // FSDP_OPS_TD
