//===- FoldTransposes.cpp - Transposed matmul operands become flags -------===//
//
// torch.onnx.export writes nn.Linear as MatMul(x, Transpose(W)). A
// transpose is a copy: of a weight, it is a second copy of the parameter
// that autodiff then keeps alive until the reverse pass. Matmul reads
// either operand transposed in its last two dimensions for free, so:
//
// Before:  %t = fsdp.transpose %w {perm = array<i64: 1, 0>}
//          %y = fsdp.matmul %x, %t
// After:   %y = fsdp.matmul %x, %w {transpose_rhs = true}
//
// Any transpose that swaps the last two dimensions and keeps the others in
// place folds, on either side; the transpose goes when nothing else reads it.
//
// First, a transpose of a transpose is one transpose (or none): attention
// written as `q @ k.transpose(-2, -1)` exports K as [B,H,D,T], which
// FuseAttention transposes back to [B,H,T,D]; the two copies of K (and
// their two twins in the backward) become one.
//
// Before:  %a = fsdp.transpose %k {perm = array<i64: 0, 2, 3, 1>}
//          %b = fsdp.transpose %a {perm = array<i64: 0, 1, 3, 2>}
// After:   %b = fsdp.transpose %k {perm = array<i64: 0, 2, 1, 3>}
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialect/FsdpOps.h"

#include "llvm/ADT/SetVector.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPFOLDTRANSPOSES
#include "passes/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// The transpose's input when it only swaps the last two dimensions.
Value swappedLastTwo(Value v) {
  auto t = v.getDefiningOp<TransposeOp>();
  if (!t)
    return {};
  ArrayRef<int64_t> perm = t.getPerm();
  int64_t n = (int64_t)perm.size();
  if (n < 2 || perm[n - 1] != n - 2 || perm[n - 2] != n - 1)
    return {};
  for (int64_t i = 0; i + 2 < n; ++i)
    if (perm[i] != i)
      return {};
  return t.getX();
}

/// Replaces transpose(transpose(x, p1), p2) by transpose(x, p1[p2[d]]),
/// or by x when that keeps every dimension in place. Returns the inner
/// transpose, which may now be dead.
TransposeOp composeTransposes(TransposeOp outer) {
  auto inner = outer.getX().getDefiningOp<TransposeOp>();
  if (!inner)
    return {};
  ArrayRef<int64_t> p1 = inner.getPerm(), p2 = outer.getPerm();
  SmallVector<int64_t> composed;
  bool identity = true;
  for (int64_t d = 0; d < (int64_t)p2.size(); ++d) {
    composed.push_back(p1[p2[d]]);
    identity = identity && composed.back() == d;
  }
  if (identity) {
    outer.getResult().replaceAllUsesWith(inner.getX());
    outer.erase();
  } else {
    outer->setOperand(0, inner.getX());
    outer.setPerm(composed);
  }
  return inner;
}

struct FsdpFoldTransposes
    : fsdp::impl::FsdpFoldTransposesBase<FsdpFoldTransposes> {
  void runOnOperation() override {
    SmallVector<TransposeOp> transposes;
    llvm::SmallSetVector<Operation *, 8> inners;
    getOperation().walk([&](TransposeOp t) { transposes.push_back(t); });
    // In program order (a chain of three folds into one as it goes); only
    // the transpose being visited is ever erased here.
    for (TransposeOp t : transposes)
      if (TransposeOp inner = composeTransposes(t))
        inners.insert(inner);
    for (Operation *t : inners)
      if (t->use_empty())
        t->erase();
    // A transpose two matmuls read (attention's q·kᵀ and its backward's
    // reads of the same kᵀ, PatchTST's) is listed once: erased once.
    llvm::SetVector<Operation *> maybeDead;
    getOperation().walk([&](MatmulOp mm) {
      for (bool rhs : {false, true}) {
        Value operand = rhs ? mm.getRhs() : mm.getLhs();
        Value source = swappedLastTwo(operand);
        if (!source)
          continue;
        maybeDead.insert(operand.getDefiningOp());
        mm->setOperand(rhs ? 1 : 0, source);
        if (rhs)
          mm.setTransposeRhs(!mm.getTransposeRhs());
        else
          mm.setTransposeLhs(!mm.getTransposeLhs());
      }
    });
    for (Operation *t : maybeDead)
      if (t->use_empty())
        t->erase();
  }
};

} // namespace
