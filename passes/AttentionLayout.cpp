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
// Before folding, two steps bring Llama's attention to that form. First,
// grouped-query attention's repeat_kv (each key and value head broadcast
// to the query heads it serves, a copy H / Hk times k's and v's size) is
// dropped: attention takes k and v of Hk heads. Then the transposes move
// down through RoPE, which sits between them and the attention
// (elementwise ops, slices, a concat; the cos and sin tables' swap is a
// reshape, their heads dimension being 1).
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "common/ComputeOps.h"
#include "dialect/FsdpOps.h"

#include "llvm/ADT/STLExtras.h"
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

/// The k or v of Hk heads that repeat_kv made `v` from, or null: Llama's
/// grouped-query attention repeats each key head n times for the query
/// heads it serves,
///   reshape(broadcast(reshape(k [..., Hk, T, D] -> [..., Hk, 1, T, D])
///                     -> [..., Hk, n, T, D]) -> [..., Hk * n, T, D]),
/// which attention reads in place instead (query head h, key head h / n).
Value unrepeated(Value v) {
  auto merged = v.getDefiningOp<ReshapeOp>();
  auto repeated = merged ? merged.getX().getDefiningOp<BroadcastOp>()
                         : BroadcastOp();
  auto split = repeated ? repeated.getX().getDefiningOp<ReshapeOp>()
                        : ReshapeOp();
  if (!split)
    return Value();
  auto full = cast<RankedTensorType>(v.getType());
  auto wide = cast<RankedTensorType>(repeated.getType());
  auto one = cast<RankedTensorType>(split.getType());
  auto k = cast<RankedTensorType>(split.getX().getType());
  int64_t r = full.getRank();
  if (r < 3 || k.getRank() != r || one.getRank() != r + 1 ||
      wide.getRank() != r + 1)
    return Value();
  // [..., Hk, T, D] -> [..., Hk, 1, T, D] -> [..., Hk, n, T, D] -> [..., H, T, D]
  ArrayRef<int64_t> ks = k.getShape(), os = one.getShape(),
                    ws = wide.getShape(), fs = full.getShape();
  int64_t hk = ks[r - 3], n = ws[r - 2];
  bool ok = os.take_front(r - 2) == ks.take_front(r - 2) && os[r - 2] == 1 &&
            os.take_back(2) == ks.take_back(2) &&
            ws.take_front(r - 2) == ks.take_front(r - 2) &&
            ws.take_back(2) == ks.take_back(2) &&
            fs.take_front(r - 3) == ks.take_front(r - 3) &&
            fs[r - 3] == hk * n && fs.take_back(2) == ks.take_back(2);
  return ok ? split.getX() : Value();
}

/// The [..., T, H, D] tensor `v` was transposed from, or null.
Value untransposed(Value v) {
  auto t = v.getDefiningOp<TransposeOp>();
  return t && swapsRowsAndHeads(t.getPerm()) ? t.getX() : Value();
}

/// `t` with dimensions r - 3 and r - 2 of a rank-r tensor swapped (right-
/// aligned: a lower-rank operand that broadcasts has 1s before its own).
RankedTensorType swapped(RankedTensorType t, int64_t r) {
  SmallVector<int64_t> s(t.getShape());
  while ((int64_t)s.size() < r)
    s.insert(s.begin(), 1);
  std::swap(s[r - 3], s[r - 2]);
  return RankedTensorType::get(s, t.getElementType());
}

/// Whether swapping rows and heads of `t` (an operand broadcast to rank r)
/// only moves a dimension of 1: a reshape, not a copy (RoPE's cos and sin
/// tables, [1, 1, T, D]).
bool swapIsReshape(RankedTensorType t, int64_t r) {
  if (t.getRank() > r)
    return false;
  RankedTensorType s = swapped(t, r);
  return s.getDimSize(r - 3) == 1 || s.getDimSize(r - 2) == 1;
}

/// Whether a transpose can move from `op`'s operands to its result: an
/// elementwise op (common/Ops.def), a slice or a concat. Not dropout: its
/// mask is drawn by element position (the same mask as PyTorch's).
bool movesTransposes(Operation *op) {
  if (isa<SliceOp, ConcatOp>(op))
    return true;
  if (isa<DropoutOp>(op))
    return false;
  StringRef name = op->getName().stripDialect();
  return op->getDialect() &&
         op->getDialect()->getNamespace() == FsdpDialect::getDialectNamespace() &&
         op->getNumResults() == 1 &&
         ::fsdp::isElementwise(std::string_view(name.data(), name.size()));
}

/// Rewrites op(transpose(x), ...) as transpose(op(x, ...)) where every
/// rank-r operand is such a transpose or one whose swap is a reshape;
/// the transpose so reaches the attention below (RoPE between them).
bool sinkThrough(Operation *op) {
  auto result = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!result || result.getRank() < 3)
    return false;
  int64_t r = result.getRank();
  SmallVector<Value> operands;
  bool any = false;
  OpBuilder b(op);
  for (Value v : op->getOperands()) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t)
      return false;
    if (Value x = untransposed(v); x && t.getRank() == r) {
      operands.push_back(x);
      any = true;
    } else if (t.getRank() < 2 && !isa<SliceOp, ConcatOp>(op)) {
      operands.push_back(v); // a scalar or a row: the swap leaves it
    } else if (!isa<SliceOp, ConcatOp>(op) && swapIsReshape(t, r)) {
      operands.push_back(
          ReshapeOp::create(b, op->getLoc(), swapped(t, r), v).getResult());
    } else {
      return false;
    }
  }
  if (!any)
    return false;
  Operation *moved = b.clone(*op);
  moved->setOperands(operands);
  moved->getResult(0).setType(swapped(result, r));
  auto swapTwo = [&](ArrayRef<int64_t> a) {
    SmallVector<int64_t> s(a);
    std::swap(s[r - 3], s[r - 2]);
    return s;
  };
  if (auto slice = dyn_cast<SliceOp>(moved)) {
    slice.setStarts(swapTwo(slice.getStarts()));
    slice.setLimits(swapTwo(slice.getLimits()));
    slice.setStrides(swapTwo(slice.getStrides()));
  }
  if (auto concat = dyn_cast<ConcatOp>(moved)) {
    int64_t axis = concat.getAxis();
    concat.setAxis(axis == r - 3 ? r - 2 : axis == r - 2 ? r - 3 : axis);
  }
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, r));
  std::swap(perm[r - 3], perm[r - 2]);
  Value back = TransposeOp::create(b, op->getLoc(), result,
                                   moved->getResult(0),
                                   b.getDenseI64ArrayAttr(perm))
                   .getResult();
  SmallVector<Operation *> inputs;
  for (Value v : op->getOperands())
    if (Operation *def = v.getDefiningOp(); def && isa<TransposeOp>(def))
      inputs.push_back(def);
  op->getResult(0).replaceAllUsesWith(back);
  op->erase();
  for (Operation *t : llvm::SetVector<Operation *>(inputs.begin(), inputs.end()))
    if (t->use_empty())
      t->erase();
  return true;
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
      readKeyHeadsOnce(op);
    for (AttentionOp op : candidates)
      sinkTransposes(op);
    for (AttentionOp op : candidates)
      fold(op);
  }

  /// Moves head transposes down to the attention through what lies
  /// between (RoPE: muls by the cos and sin tables, slices, a negation, a
  /// concat, an add), in program order, so each producer moves before its
  /// users.
  void sinkTransposes(AttentionOp op) {
    llvm::SetVector<Operation *> between;
    SmallVector<Value> work{op.getQ(), op.getK(), op.getV()};
    while (!work.empty()) {
      Operation *def = work.pop_back_val().getDefiningOp();
      if (!def || isa<TransposeOp>(def) || !movesTransposes(def) ||
          def->getBlock() != op->getBlock() || !between.insert(def))
        continue;
      for (Value v : def->getOperands())
        work.push_back(v);
    }
    SmallVector<Operation *> ordered(between.begin(), between.end());
    llvm::sort(ordered, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    for (Operation *o : ordered)
      sinkThrough(o);
  }

  /// Grouped-query attention: k and v as they were before repeat_kv (not
  /// with a mask, whose gradient composition expects q's heads).
  void readKeyHeadsOnce(AttentionOp op) {
    Value k = unrepeated(op.getK()), v = unrepeated(op.getV());
    if (!k || !v || op.getMask() ||
        cast<RankedTensorType>(k.getType()).getShape().drop_back(2) !=
            cast<RankedTensorType>(v.getType()).getShape().drop_back(2))
      return;
    llvm::SetVector<Operation *> repeats; // k and v may be one tensor
    repeats.insert(op.getK().getDefiningOp());
    repeats.insert(op.getV().getDefiningOp());
    op->setOperand(1, k);
    op->setOperand(2, v);
    for (Operation *merged : repeats) {
      if (!merged->use_empty())
        continue;
      Operation *broadcast = merged->getOperand(0).getDefiningOp();
      merged->erase();
      if (!broadcast->use_empty())
        continue;
      Operation *split = broadcast->getOperand(0).getDefiningOp();
      broadcast->erase();
      if (split->use_empty())
        split->erase();
    }
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
