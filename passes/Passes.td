//===- Passes.td - fsdp passes -----------------------------*- tablegen -*-===//
#ifndef FSDP_PASSES_TD
#define FSDP_PASSES_TD

include "mlir/Pass/PassBase.td"

def FsdpFuseAttention : Pass<"fsdp-fuse-attention", "::mlir::ModuleOp"> {
  let summary = "Fuses matmul-scale-mask-softmax-matmul into fsdp.attention";
  let description = [{
    Recognises scaled dot-product attention as PyTorch exports it:
    `matmul(q, kᵀ)`, an optional multiplication or division by a scalar
    constant, an optional mask (an added float tensor, or an `fsdp.where`
    filling masked scores with a large negative constant), `softmax` over the
    last axis and `matmul` with `v`. A constant lower-triangular mask becomes
    `causal = true`. Unmatched subgraphs are left as they are.
  }];
  let dependentDialects = ["::mlir::fsdp::FsdpDialect"];
}

#endif // FSDP_PASSES_TD
