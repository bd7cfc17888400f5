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
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialect/FsdpOps.h"

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

struct FsdpFoldTransposes
    : fsdp::impl::FsdpFoldTransposesBase<FsdpFoldTransposes> {
  void runOnOperation() override {
    SmallVector<TransposeOp> maybeDead;
    getOperation().walk([&](MatmulOp mm) {
      for (bool rhs : {false, true}) {
        Value operand = rhs ? mm.getRhs() : mm.getLhs();
        Value source = swappedLastTwo(operand);
        if (!source)
          continue;
        maybeDead.push_back(operand.getDefiningOp<TransposeOp>());
        mm->setOperand(rhs ? 1 : 0, source);
        if (rhs)
          mm.setTransposeRhs(!mm.getTransposeRhs());
        else
          mm.setTransposeLhs(!mm.getTransposeLhs());
      }
    });
    for (TransposeOp t : maybeDead)
      if (t && t->use_empty())
        t.erase();
  }
};

} // namespace
