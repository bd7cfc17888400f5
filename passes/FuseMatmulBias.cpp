//===- FuseMatmulBias.cpp - Fold a bias add into its matmul ---------------===//
//
// Before (nn.Linear on a batch of rows, as torch.onnx.export writes it):
//   %y = fsdp.matmul %x, %w {transpose_rhs = true}
//   %z = fsdp.add %b, %y            // %b: tensor<N>, either operand order
// After:
//   %z = fsdp.matmul %x, %w bias %b {transpose_rhs = true}
// A GEMM adds the bias in its epilogue, before rounding the result: one pass
// over the output instead of two, and one rounding in bf16. The backward is
// unchanged (the bias's gradient is still the sum of the output's over the
// rows). Only a product with no other user is fused.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialect/FsdpOps.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPFUSEMATMULBIAS
#include "passes/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

struct FuseMatmulBiasPattern : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp add,
                                PatternRewriter &rewriter) const override {
    auto result = cast<RankedTensorType>(add.getType());
    for (int side : {0, 1}) {
      auto mm = add->getOperand(side).getDefiningOp<MatmulOp>();
      Value bias = add->getOperand(1 - side);
      auto biasType = dyn_cast<RankedTensorType>(bias.getType());
      if (!mm || mm.getBias() || !mm->hasOneUse() ||
          mm.getResult().getType() != result ||
          !biasType || biasType.getRank() != 1 ||
          biasType.getDimSize(0) != result.getShape().back() ||
          biasType.getElementType() != result.getElementType())
        continue;
      rewriter.replaceOpWithNewOp<MatmulOp>(
          add, result, ValueRange{mm.getLhs(), mm.getRhs(), bias},
          mm->getAttrs());
      rewriter.eraseOp(mm);
      return success();
    }
    return failure();
  }
};

struct FsdpFuseMatmulBias
    : fsdp::impl::FsdpFuseMatmulBiasBase<FsdpFuseMatmulBias> {
  using Base::Base;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseMatmulBiasPattern>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
