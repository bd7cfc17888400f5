//===- AttentionLayout.cpp - Head transposes folded into attention --------===//
//
// PyTorch's multi-head attention (and torch.onnx.export's) moves the heads
// in front of the rows for the product and back after it:
//
// Before:  %q = fsdp.transpose %qp {perm = array<i64: 0, 2, 1, 3>}
//              : tensor<BxTxHxD> -> tensor<BxHxTxD>      (and k, v alike)
//          %o = fsdp.attention %q, %k, %v {causal = true, ...}
//          %y = fsdp.transpose %o {perm = array<i64: 0, 2, 1, 3>}
//              : tensor<BxHxTxD> -> tensor<BxTxHxD>
// After:   %y = fsdp.attention %qp, %kp, %vp {causal = true, layout = "bshd", ...}
//              : ... -> tensor<BxTxHxD>
//
// Each transpose is a copy of an activation (and the backward has its
// twins); the kernels read [B, T, H, D] through a row stride of H * D
// instead (cuDNN's attention takes any strides). The fold needs every one
// of q, k and v transposed so, and the output read by such transposes
// only; otherwise nothing changes. The transposes go when nothing else
// reads them.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialect/FsdpOps.h"

#include "llvm/ADT/SetVector.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPATTENTIONLAYOUT
#include "passes/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// Whether `perm` swaps the rows and heads of a [..., X, Y, D] tensor and
/// keeps every other dimension in place.
bool swapsRowsAndHeads(ArrayRef<int64_t> perm) {
  int64_t r = (int64_t)perm.size();
  if (r < 3 || perm[r - 3] != r - 2 || perm[r - 2] != r - 3 ||
      perm[r - 1] != r - 1)
    return false;
  for (int64_t i = 0; i + 3 < r; ++i)
    if (perm[i] != i)
      return false;
  return true;
}

/// The [..., T, H, D] tensor `v` was transposed from, or null.
Value untransposed(Value v) {
  auto t = v.getDefiningOp<TransposeOp>();
  return t && swapsRowsAndHeads(t.getPerm()) ? t.getX() : Value();
}

struct FsdpAttentionLayout
    : mlir::fsdp::impl::FsdpAttentionLayoutBase<FsdpAttentionLayout> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<AttentionOp> candidates;
    getOperation().walk([&](AttentionOp op) {
      if (op.getLayout() == "bhsd" && !op.getWithLse())
        candidates.push_back(op);
    });
    for (AttentionOp op : candidates)
      fold(op);
  }

  void fold(AttentionOp op) {
    Value q = untransposed(op.getQ()), k = untransposed(op.getK()),
          v = untransposed(op.getV());
    if (!q || !k || !v || op.getResult().use_empty())
      return;
    SmallVector<TransposeOp> outs;
    for (Operation *user : op.getResult().getUsers()) {
      auto t = dyn_cast<TransposeOp>(user);
      if (!t || !swapsRowsAndHeads(t.getPerm()))
        return;
      outs.push_back(t);
    }
    OpBuilder b(op);
    auto folded = AttentionOp::create(
        b, op.getLoc(), q, k, v, op.getMask(), op.getCausalAttr(),
        op.getScaleAttr(), op.getSafeSoftmaxAttr(),
        op.getAverageEmptyRowsAttr(), UnitAttr(), b.getStringAttr("bshd"));
    for (NamedAttribute a : op->getDiscardableAttrs())
      folded->setAttr(a.getName(), a.getValue());
    for (TransposeOp t : outs) {
      t.getResult().replaceAllUsesWith(folded.getResult());
      t.erase();
    }
    // q, k and v may be one transpose: each erased once.
    llvm::SetVector<Operation *> inputs;
    for (Value x : {op.getQ(), op.getK(), op.getV()})
      inputs.insert(x.getDefiningOp());
    op.erase();
    for (Operation *t : inputs)
      if (t->use_empty())
        t->erase();
  }
};

} // namespace
