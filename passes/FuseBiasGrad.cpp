//===- FuseBiasGrad.cpp - nn.Linear's bias gradient in its weight GEMM ----===//
//
// Autodiff gives nn.Linear's weight and bias gradients as two passes over
// the output gradient dy [..., N]: a GEMM over the tokens and a reduction
// over the same tokens.
//
// Before:  %d  = fsdp.reshape %dy : tensor<BxTxN> -> tensor<MxN>
//          %dw = fsdp.matmul %d, %x {transpose_lhs = true}
//              : tensor<MxN>, tensor<MxK> -> tensor<NxK>
//          %s  = fsdp.reduce_sum %dy {axes = array<i64: 0, 1>}
//              : tensor<BxTxN> -> tensor<1x1xN>
// After:   %dw, %db = fsdp.matmul %d, %x {lhs_sums, transpose_lhs = true}
//              : tensor<MxN>, tensor<MxK> -> tensor<NxK>, tensor<N>
//          %s  = fsdp.reshape %db : tensor<N> -> tensor<1x1xN>
//
// On a GPU the sums are cuBLASLt's BGRAD epilogue, computed while the GEMM
// reads dy: no second pass over it, no reduction kernel. The CPU computes
// them as the reduction did. The reduction must sum dy over every
// dimension but the last, and the GEMM contract the same rows (its lhs dy
// or a reshape of it, transposed).
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialect/FsdpOps.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPFUSEBIASGRAD
#include "passes/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// Whether `r` sums its input over every dimension but the last.
bool sumsRows(ReduceSumOp r) {
  auto in = cast<RankedTensorType>(r.getX().getType());
  ArrayRef<int64_t> axes = r.getAxes();
  if (in.getRank() < 2 || (int64_t)axes.size() != in.getRank() - 1)
    return false;
  for (int64_t i = 0; i + 1 < in.getRank(); ++i)
    if (axes[i] != i)
      return false;
  return true;
}

struct FsdpFuseBiasGrad
    : mlir::fsdp::impl::FsdpFuseBiasGradBase<FsdpFuseBiasGrad> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<ReduceSumOp> sums;
    getOperation().walk([&](ReduceSumOp r) {
      if (sumsRows(r))
        sums.push_back(r);
    });
    for (ReduceSumOp r : sums)
      fuse(r);
  }

  void fuse(ReduceSumOp r) {
    Value dy = r.getX();
    auto dyType = cast<RankedTensorType>(dy.getType());
    int64_t n = dyType.getShape().back();
    // The weight-gradient GEMM over the same rows: op(lhs) = dy^T [N, M].
    MatmulOp gemm;
    for (Operation *user : dy.getUsers()) {
      Value flat = dy;
      Operation *reader = user;
      if (auto reshape = dyn_cast<ReshapeOp>(user)) {
        auto t = cast<RankedTensorType>(reshape.getType());
        if (t.getRank() != 2 || t.getDimSize(1) != n ||
            !reshape->hasOneUse())
          continue;
        flat = reshape.getResult();
        reader = *reshape->getUsers().begin();
      }
      auto mm = dyn_cast<MatmulOp>(reader);
      if (!mm || mm.getLhs() != flat || !mm.getTransposeLhs() ||
          mm.getBias() || mm.getLhsSums() ||
          cast<RankedTensorType>(flat.getType()).getRank() != 2 ||
          cast<RankedTensorType>(mm.getRhs().getType()).getRank() != 2 ||
          mm->getBlock() != r->getBlock())
        continue;
      gemm = mm;
      break;
    }
    if (!gemm)
      return;
    // The fused GEMM sits where the earlier of the two was (before the
    // users of both), which its operands must already be defined at.
    Operation *at = gemm->isBeforeInBlock(r) ? gemm.getOperation()
                                             : r.getOperation();
    for (Value v : {gemm.getLhs(), gemm.getRhs()})
      if (Operation *def = v.getDefiningOp();
          def && (def->getBlock() != at->getBlock() ||
                  !def->isBeforeInBlock(at)))
        return;
    OpBuilder b(at);
    auto fused = MatmulOp::create(
        b, gemm.getLoc(), gemm.getLhs(), gemm.getRhs(), Value(),
        gemm.getTransposeLhsAttr(), gemm.getTransposeRhsAttr(),
        b.getUnitAttr());
    for (NamedAttribute a : gemm->getDiscardableAttrs())
      fused->setAttr(a.getName(), a.getValue());
    gemm.getResult().replaceAllUsesWith(fused.getResult());
    Value sums = ReshapeOp::create(b, r.getLoc(), r.getType(), fused.getSums());
    r.getResult().replaceAllUsesWith(sums);
    r.erase();
    gemm.erase();
  }
};

} // namespace
