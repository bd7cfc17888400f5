//===- FuseGelu.cpp - Recognise GELU written as elementwise ops -----------===//
//
// Before (torch.onnx.export of F.gelu(x, approximate="tanh")):
//   %x2 = fsdp.mul %x, %x
//   %x3 = fsdp.mul %x, %x2
//   %a  = fsdp.mul %c0_044715, %x3
//   %b  = fsdp.add %x, %a
//   %u  = fsdp.mul %c0_79788, %b
//   %t  = fsdp.tanh %u
//   %s  = fsdp.add %c1, %t
//   %p  = fsdp.mul %x, %s
//   %y  = fsdp.mul %c0_5, %p
// After:
//   %y  = fsdp.gelu %x {approximate = "tanh"}
// and likewise 0.5 · x · (1 + erf(x / √2)) → fsdp.gelu %x. A product is
// matched as a multiset of factors times a constant, so the order and
// association of the multiplications (and x³ as pow(x, 3)) do not matter.
// The matched intermediates are left to dead-code elimination; those with
// other users stay, so fusing never changes what else is computed.
//
//===----------------------------------------------------------------------===//
#include "passes/Matchers.h"
#include "passes/Passes.h"

#include "dialect/FsdpOps.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPFUSEGELU
#include "passes/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// `v` as a product: its non-constant factors, and the product of its
/// scalar constant factors in `scale`. Looks through fsdp.mul, division by
/// a scalar constant and small integer powers, at most `depth` deep.
void factorise(Value v, SmallVectorImpl<Value> &factors, double &scale,
               int depth = 6) {
  if (auto c = scalarConstant(v)) {
    scale *= *c;
    return;
  }
  if (depth > 0) {
    if (auto mul = v.getDefiningOp<MulOp>()) {
      factorise(mul.getLhs(), factors, scale, depth - 1);
      factorise(mul.getRhs(), factors, scale, depth - 1);
      return;
    }
    if (auto div = v.getDefiningOp<DivOp>()) {
      if (auto c = scalarConstant(div.getRhs()); c && *c != 0) {
        scale /= *c;
        factorise(div.getLhs(), factors, scale, depth - 1);
        return;
      }
    }
    if (auto pow = v.getDefiningOp<PowOp>()) {
      auto e = scalarConstant(pow.getRhs());
      if (e && (*e == 2 || *e == 3)) {
        for (int i = 0; i < (int)*e; ++i)
          factors.push_back(pow.getLhs());
        return;
      }
    }
  }
  factors.push_back(v);
}

bool near(double have, double want) {
  return std::fabs(have - want) <= 1e-4 * std::fabs(want);
}

/// `v` = want · f1 · f2 ···, the factors returned (empty: no match).
SmallVector<Value> productOf(Value v, double want) {
  SmallVector<Value> factors;
  double scale = 1.0;
  factorise(v, factors, scale);
  if (!near(scale, want))
    factors.clear();
  return factors;
}

/// `s` = 1 + t: returns t.
Value onePlus(Value s) {
  auto add = s.getDefiningOp<AddOp>();
  if (!add)
    return Value();
  for (int side : {0, 1})
    if (auto c = scalarConstant(add->getOperand(side)); c && near(*c, 1.0))
      return add->getOperand(1 - side);
  return Value();
}

/// Whether `u` = √(2/π) · (x + 0.044715 · x³).
bool isTanhArgument(Value u, Value x) {
  SmallVector<Value> f = productOf(u, std::sqrt(2.0 / M_PI));
  if (f.size() != 1)
    return false;
  auto add = f[0].getDefiningOp<AddOp>();
  if (!add)
    return false;
  for (int side : {0, 1}) {
    if (add->getOperand(side) != x)
      continue;
    SmallVector<Value> cube = productOf(add->getOperand(1 - side), 0.044715);
    if (cube.size() == 3 && llvm::all_of(cube, [&](Value v) { return v == x; }))
      return true;
  }
  return false;
}

struct FuseGeluPattern : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp root,
                                PatternRewriter &rewriter) const override {
    // 0.5 · x · (1 + t)
    SmallVector<Value> f = productOf(root.getResult(), 0.5);
    if (f.size() != 2)
      return failure();
    for (int side : {0, 1}) {
      Value x = f[side], t = onePlus(f[1 - side]);
      if (!t || x.getType() != root.getType())
        continue;
      StringRef approximate;
      if (auto tanh = t.getDefiningOp<TanhOp>();
          tanh && isTanhArgument(tanh.getX(), x))
        approximate = "tanh";
      else if (auto erf = t.getDefiningOp<ErfOp>()) {
        SmallVector<Value> g = productOf(erf.getX(), 1.0 / std::sqrt(2.0));
        if (g.size() == 1 && g[0] == x)
          approximate = "none";
      }
      if (approximate.empty())
        continue;
      rewriter.replaceOpWithNewOp<GeluOp>(root, root.getType(), x,
                                          rewriter.getStringAttr(approximate));
      return success();
    }
    return failure();
  }
};

struct FsdpFuseGelu : fsdp::impl::FsdpFuseGeluBase<FsdpFuseGelu> {
  using Base::Base;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseGeluPattern>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
