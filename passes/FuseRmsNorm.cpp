//===- FuseRmsNorm.cpp - Recognise RMSNorm written as elementwise ops -----===//
//
// Before (torch.onnx.export of Llama's RMSNorm):
//   %sq = fsdp.pow %x, %c2
//   %m  = fsdp.reduce_mean %sq {axes = array<i64: 2>}   (size-1 axis kept)
//   %a  = fsdp.add %m, %eps
//   %s  = fsdp.sqrt %a
//   %n  = fsdp.div %x, %s                 (or x · rsqrt(a), x · (1 / s))
//   %y  = fsdp.mul %n, %w
// After:
//   %y  = fsdp.rms_norm %x, %w {axis = 2, epsilon = eps}
// The product is taken apart into numerator and denominator factors, so
// the order and association of the multiplications do not matter. The
// matched intermediates are left to dead-code elimination; those with
// other users stay, so fusing never changes what else is computed.
//
//===----------------------------------------------------------------------===//
#include "passes/Matchers.h"
#include "passes/Passes.h"

#include "dialect/FsdpOps.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPFUSERMSNORM
#include "passes/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// `v` as numerator / denominator: non-constant factors through fsdp.mul,
/// fsdp.div and fsdp.reciprocal (but not into `leaf`), at most `depth`
/// deep; `rsqrts` holds the
/// arguments of fsdp.rsqrt factors (each a denominator's square root), and
/// `scale` the product of scalar constants.
struct Product {
  SmallVector<Value> num, den, rsqrts;
  double scale = 1.0;
};

void factorise(Value v, Product &p, bool inverted, Value leaf,
               int depth = 4) {
  if (auto c = scalarConstant(v)) {
    p.scale = inverted ? p.scale / *c : p.scale * *c;
    return;
  }
  if (depth > 0 && v != leaf) {
    if (auto mul = v.getDefiningOp<MulOp>()) {
      factorise(mul.getLhs(), p, inverted, leaf, depth - 1);
      factorise(mul.getRhs(), p, inverted, leaf, depth - 1);
      return;
    }
    if (auto div = v.getDefiningOp<DivOp>()) {
      factorise(div.getLhs(), p, inverted, leaf, depth - 1);
      factorise(div.getRhs(), p, !inverted, leaf, depth - 1);
      return;
    }
    if (auto rec = v.getDefiningOp<ReciprocalOp>()) {
      factorise(rec.getX(), p, !inverted, leaf, depth - 1);
      return;
    }
    if (auto rsqrt = v.getDefiningOp<RsqrtOp>(); rsqrt && !inverted) {
      p.rsqrts.push_back(rsqrt.getX());
      return;
    }
  }
  (inverted ? p.den : p.num).push_back(v);
}

/// `sq` = x², returns x.
Value squared(Value sq) {
  if (auto pow = sq.getDefiningOp<PowOp>()) {
    auto e = scalarConstant(pow.getRhs());
    return e && *e == 2 ? pow.getLhs() : Value();
  }
  if (auto mul = sq.getDefiningOp<MulOp>())
    return mul.getLhs() == mul.getRhs() ? mul.getLhs() : Value();
  return Value();
}

/// `a` = mean(x², axes axis..rank-1, kept) + eps: returns x, sets axis and
/// eps.
Value meanSquarePlusEps(Value a, int64_t &axis, double &eps) {
  auto add = a.getDefiningOp<AddOp>();
  if (!add)
    return Value();
  for (int side : {0, 1}) {
    auto c = scalarConstant(add->getOperand(1 - side));
    auto mean = add->getOperand(side).getDefiningOp<ReduceMeanOp>();
    if (!c || *c < 0 || !mean)
      continue;
    Value x = squared(mean.getX());
    if (!x)
      return Value();
    auto xt = cast<RankedTensorType>(x.getType());
    auto mt = cast<RankedTensorType>(mean.getType());
    ArrayRef<int64_t> axes = mean.getAxes();
    // The trailing axes, in order, kept as size-1 dimensions.
    if (axes.empty() || mt.getRank() != xt.getRank())
      return Value();
    int64_t first = axes.front();
    for (auto [i, ax] : llvm::enumerate(axes))
      if (ax != first + (int64_t)i)
        return Value();
    if (axes.back() != xt.getRank() - 1)
      return Value();
    for (int64_t d = first; d < xt.getRank(); ++d)
      if (mt.getDimSize(d) != 1)
        return Value();
    axis = first;
    eps = *c;
    return x;
  }
  return Value();
}

struct FuseRmsNormPattern : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp root,
                                PatternRewriter &rewriter) const override {
    // One 1/sqrt(mean(x²) + eps) factor, x and the scale, nothing else.
    // The first look finds x; the second stops there (x may itself be a
    // product, SwiGLU's output, say).
    int64_t axis = 0;
    double eps = 0;
    Product p;
    auto look = [&](Value leaf) -> Value {
      p = Product();
      factorise(root.getResult(), p, false, leaf);
      Value meanArg;
      if (p.rsqrts.size() == 1 && p.den.empty())
        meanArg = p.rsqrts.front();
      else if (p.rsqrts.empty() && p.den.size() == 1)
        if (auto sqrt = p.den.front().getDefiningOp<SqrtOp>())
          meanArg = sqrt.getX();
      return meanArg ? meanSquarePlusEps(meanArg, axis, eps) : Value();
    };
    Value x = look(Value());
    if (!x || x.getType() != root.getType() || look(x) != x)
      return failure();
    if (p.num.size() != 2 || std::abs(p.scale - 1.0) > 1e-6)
      return failure();
    Value w;
    if (p.num[0] == x)
      w = p.num[1];
    else if (p.num[1] == x)
      w = p.num[0];
    auto xt = cast<RankedTensorType>(x.getType());
    auto wt = w ? dyn_cast<RankedTensorType>(w.getType()) : nullptr;
    if (!wt || wt.getElementType() != xt.getElementType() ||
        wt.getShape() != xt.getShape().drop_front(axis))
      return failure();
    rewriter.replaceOpWithNewOp<RmsNormOp>(
        root, root.getType(), x, w, rewriter.getI64IntegerAttr(axis),
        rewriter.getF32FloatAttr((float)eps));
    return success();
  }
};

struct FsdpFuseRmsNorm : fsdp::impl::FsdpFuseRmsNormBase<FsdpFuseRmsNorm> {
  using Base::Base;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseRmsNormPattern>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
