//===- FuseAttention.cpp - Recognise scaled dot-product attention ---------===//
//
// Before:
//   %kt = fsdp.transpose %k {perm = array<i64: 0, 1, 3, 2>}
//   %s  = fsdp.matmul %q, %kt
//   %ss = fsdp.mul %s, %c            // or fsdp.div %s, %c; %c a scalar
//   %m  = fsdp.where %keep, %ss, %neg_inf   // or fsdp.add %ss, %bias
//   %p  = fsdp.softmax %m {axis = 3}
//   %o  = fsdp.matmul %p, %v
// After:
//   %o  = fsdp.attention %q, %k, %v {causal = true, scale = ...}
// A constant lower-triangular mask becomes `causal`, and so does a mask too
// long to fold at import (T > 4096: 16M elements), recognised by how it is
// built: `fsdp.trilu` of a splat. Any other mask stays an operand.
// Intermediate values with other users block the match, so the unfused form
// is kept whenever fusing would change what else is computed.
//
// PyTorch's scaled_dot_product_attention gives a query whose every key is
// masked zeros (its safe softmax), and the importer writes that around the
// softmax of a masked product:
//   %top  = fsdp.reduce_max %m {axes = [last], keepdims}
//   %dead = fsdp.equal %top, %neg_inf
//   %p    = fsdp.softmax (fsdp.where %dead, %zero, %m)
//   %p0   = fsdp.where %dead, %zero, %p
// That form fuses too, into fsdp.attention {safe_softmax = true}.
//
//===----------------------------------------------------------------------===//
#include "passes/Matchers.h"
#include "passes/Passes.h"

#include "dialect/FsdpOps.h"
#include "dialect/ShapeInference.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPFUSEATTENTION
#include "passes/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// A fill value that makes softmax weights exactly zero in float32.
bool isMaskFill(Value v) {
  auto c = scalarConstant(v);
  return c && *c <= -1e4;
}

bool oneUse(Value v) { return v.hasOneUse(); }

/// Peels an optional scalar scale off `s`; returns the q·kᵀ matmul.
MatmulOp peelScale(Value s, double &scale) {
  scale = 1.0;
  if (auto mul = s.getDefiningOp<MulOp>(); mul && oneUse(s)) {
    for (int side : {0, 1})
      if (auto c = scalarConstant(mul->getOperand(1 - side))) {
        scale = *c;
        s = mul->getOperand(side);
        break;
      }
  } else if (auto div = s.getDefiningOp<DivOp>(); div && oneUse(s)) {
    if (auto c = scalarConstant(div.getRhs()); c && *c != 0) {
      scale = 1.0 / *c;
      s = div.getLhs();
    }
  }
  auto qk = s.getDefiningOp<MatmulOp>();
  if (!qk || !oneUse(s) || qk.getTransposeLhs())
    return MatmulOp();
  return qk;
}

/// Whether a constant mask over the last two dims [Tq, Tk] (leading dims of
/// extent 1) keeps exactly key positions j <= i + (Tk - Tq).
bool isCausalMask(DenseElementsAttr attr, bool additive) {
  auto type = cast<RankedTensorType>(attr.getType());
  if (type.getRank() < 2)
    return false;
  for (int64_t d : type.getShape().drop_back(2))
    if (d != 1)
      return false;
  int64_t rows = type.getDimSize(type.getRank() - 2),
          cols = type.getShape().back();
  int64_t offset = cols - rows;
  // Decode once: masks of long sequences hold millions of elements.
  std::vector<signed char> keep; // 1 keep, 0 hide, -1 neither
  keep.reserve(attr.getNumElements());
  if (!additive) {
    for (bool b : attr.getValues<bool>())
      keep.push_back(b);
  } else {
    auto classify = [](double v) -> signed char {
      return v == 0 ? 1 : v <= -1e4 ? 0 : -1;
    };
    if (attr.getElementType().isF32())
      for (float v : attr.getValues<float>())
        keep.push_back(classify(v));
    else
      for (const APFloat &v : attr.getValues<APFloat>())
        keep.push_back(classify(v.convertToDouble()));
  }
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      if (keep[i * cols + j] != (j <= i + offset ? 1 : 0))
        return false;
  return true;
}

/// Whether `mask` is built as trilu(splat) and hides exactly the key
/// positions j > i + (Tk - Tq): an additive fill (<= -1e4) kept in the
/// upper triangle from k = offset + 1, or a boolean `true` kept in the lower
/// triangle through k = offset (`inverted`: the keep-mask is its negation,
/// so `true` in the upper triangle from offset + 1).
bool isCausalTrilu(Value mask, bool additive, bool inverted) {
  auto trilu = mask.getDefiningOp<TriluOp>();
  DenseElementsAttr fill;
  if (!trilu || !matchPattern(trilu.getX(), m_Constant(&fill)) ||
      !fill.isSplat())
    return false;
  auto type = trilu.getType();
  if (type.getRank() < 2)
    return false;
  for (int64_t d : type.getShape().drop_back(2))
    if (d != 1)
      return false;
  int64_t offset = type.getShape().back() - type.getDimSize(type.getRank() - 2);
  int64_t k = trilu.getK();
  if (additive)
    return isa<FloatType>(fill.getElementType()) && trilu.getUpper() &&
           k == offset + 1 &&
           fill.getSplatValue<APFloat>().convertToDouble() <= -1e4;
  if (!fill.getElementType().isInteger(1) || !fill.getSplatValue<bool>())
    return false;
  return inverted ? trilu.getUpper() && k == offset + 1
                  : !trilu.getUpper() && k == offset;
}

/// Whether `mask`, a constant i1 keep-mask over [..., Tq, Tk] (`inverted`:
/// true hides), keeps at least one key in every query's row.
bool keepsEveryRow(Value mask, bool inverted) {
  DenseElementsAttr attr;
  if (!matchPattern(mask, m_Constant(&attr)) ||
      !attr.getElementType().isInteger(1))
    return false;
  auto type = cast<RankedTensorType>(attr.getType());
  int64_t cols = type.getRank() ? type.getShape().back() : 1;
  if (attr.isSplat())
    return attr.getSplatValue<bool>() != inverted;
  int64_t j = 0;
  bool kept = false;
  for (bool b : attr.getValues<bool>()) {
    kept |= b != inverted;
    if (++j == cols) {
      if (!kept)
        return false;
      j = 0;
      kept = false;
    }
  }
  return true;
}

bool isScalar(Value v, double want) {
  auto c = scalarConstant(v);
  return c && *c == want;
}

/// The safe softmax around a masked product, as the header writes it: given
/// %p0, the softmax, with `scores` set to %m; null where `probs` is not
/// that form or any of its values has another user.
SoftmaxOp peelSafeSoftmax(Value probs, Value &scores) {
  auto after = probs.getDefiningOp<WhereOp>();
  if (!after || !isScalar(after.getX(), 0.0))
    return SoftmaxOp();
  Value dead = after.getCond();
  auto softmax = after.getY().getDefiningOp<SoftmaxOp>();
  if (!softmax || !oneUse(softmax))
    return SoftmaxOp();
  auto before = softmax.getX().getDefiningOp<WhereOp>();
  if (!before || !oneUse(before) || before.getCond() != dead ||
      !isScalar(before.getX(), 0.0))
    return SoftmaxOp();
  auto equal = dead.getDefiningOp<EqualOp>();
  if (!equal || !llvm::hasNItems(dead.getUses(), 2))
    return SoftmaxOp();
  Value top;
  for (int side : {0, 1})
    if (isScalar(equal->getOperand(side),
                 -std::numeric_limits<double>::infinity()))
      top = equal->getOperand(1 - side);
  auto max = top ? top.getDefiningOp<ReduceMaxOp>() : ReduceMaxOp();
  int64_t last = softmax.getType().getRank() - 1;
  if (!max || !oneUse(top) || !max.getKeepdims() ||
      max.getAxes() != ArrayRef<int64_t>{last} || max.getX() != before.getY() ||
      !llvm::hasNItems(before.getY().getUses(), 2))
    return SoftmaxOp();
  scores = before.getY();
  return softmax;
}

struct FuseAttentionPattern : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  /// Every layer of a model shares one mask constant: decide it once.
  bool isCausal(Value mask, bool additive) const {
    DenseElementsAttr attr;
    if (!matchPattern(mask, m_Constant(&attr)))
      return false;
    auto [it, inserted] = causalCache.try_emplace(attr, false);
    if (inserted)
      it->second = isCausalMask(attr, additive);
    return it->second;
  }
  mutable llvm::DenseMap<Attribute, bool> causalCache;

  LogicalResult matchAndRewrite(MatmulOp pv,
                                PatternRewriter &rewriter) const override {
    if (pv.getTransposeLhs() || pv.getTransposeRhs())
      return failure();
    Value scores, mask;
    auto softmax = peelSafeSoftmax(pv.getLhs(), scores);
    bool safe = (bool)softmax;
    if (!safe) {
      softmax = pv.getLhs().getDefiningOp<SoftmaxOp>();
      if (softmax)
        scores = softmax.getX();
    }
    if (!softmax || !oneUse(softmax) ||
        (int64_t)softmax.getAxis() != softmax.getType().getRank() - 1)
      return failure();
    // The masked scores' users: the softmax, and in the safe form also the
    // row maximum that finds the empty rows.
    bool scoresOwned = safe || oneUse(scores);

    bool additive = false, invert = false, finiteFill = false;
    double scale = 1.0;
    MatmulOp qk;
    if (auto add = scores.getDefiningOp<AddOp>(); add && scoresOwned) {
      for (int side : {0, 1})
        if ((qk = peelScale(add->getOperand(side), scale))) {
          mask = add->getOperand(1 - side);
          additive = true;
          break;
        }
    } else if (auto where = scores.getDefiningOp<WhereOp>();
               where && scoresOwned) {
      Value fill;
      if (isMaskFill(where.getY()) && (qk = peelScale(where.getX(), scale))) {
        mask = where.getCond();
        fill = where.getY();
      } else if (isMaskFill(where.getX()) &&
                 (qk = peelScale(where.getY(), scale))) {
        mask = where.getCond();
        fill = where.getX();
        invert = true;
      }
      // The kernels hide a key with -inf. A finite fill (masked_fill with
      // -1e9, finfo.min) differs only in a row whose every key is hidden:
      // PyTorch averages the row's values there (equal scores) and sends
      // no gradient to its scores, where a -inf row is NaN. The attention
      // says so (average_empty_rows) unless no row can be empty.
      finiteFill = qk && fill && *scalarConstant(fill) > -INFINITY;
    } else if (!safe) { // unmasked: no row can be empty
      qk = peelScale(scores, scale);
    }
    if (!qk)
      return rewriter.notifyMatchFailure(pv, "no q·kᵀ → softmax → ·v chain");

    Value q = qk.getLhs(), k = qk.getRhs(), v = pv.getRhs();
    auto kType = cast<RankedTensorType>(k.getType());
    int64_t rank = kType.getRank();
    SmallVector<int64_t> swap;
    for (int64_t i = 0; i < rank; ++i)
      swap.push_back(i);
    std::swap(swap[rank - 1], swap[rank - 2]);
    bool transposeK = false;
    if (!qk.getTransposeRhs()) {
      auto t = k.getDefiningOp<TransposeOp>();
      if (t && t.getPerm() == ArrayRef<int64_t>(swap)) {
        k = t.getX();
        kType = cast<RankedTensorType>(k.getType());
      } else {
        auto kt = shape::transpose(std::nullopt, kType, swap);
        if (failed(kt))
          return failure();
        kType = *kt;
        transposeK = true;
      }
    }

    // Check everything before creating anything: a pattern that fails must
    // leave the IR untouched.
    auto mType =
        mask ? cast<RankedTensorType>(mask.getType()) : RankedTensorType();
    auto type =
        shape::attention(std::nullopt, cast<RankedTensorType>(q.getType()),
                         kType, cast<RankedTensorType>(v.getType()), mType);
    if (failed(type) || *type != pv.getResult().getType())
      return rewriter.notifyMatchFailure(pv, "shapes are not attention's");

    if (transposeK)
      k = TransposeOp::create(rewriter, qk.getLoc(), kType, k, swap);
    bool causalTrilu = mask && isCausalTrilu(mask, additive, invert);
    // A causal mask hides every key of the first Tq - Tk queries when
    // Tq > Tk; a finite fill averages those rows, which only the mask does.
    int64_t tq = type->getDimSize(type->getRank() - 2),
            tk = kType.getDimSize(kType.getRank() - 2);
    bool average = finiteFill && !keepsEveryRow(mask, invert) &&
                   !(causalTrilu && tq <= tk);
    if (average)
      causalTrilu = false;
    if (mask && invert && !causalTrilu) {
      // where(cond, fill, scores) keeps positions where cond is false.
      DenseElementsAttr attr;
      if (matchPattern(mask, m_Constant(&attr)))
        mask = ConstantOp::create(
            rewriter, pv.getLoc(),
            attr.mapValues(attr.getElementType(),
                           [](const APInt &b) { return ~b; }));
      else
        mask = NotOp::create(rewriter, pv.getLoc(), mask);
    }
    bool causal =
        causalTrilu || (mask && !average && isCausal(mask, additive));
    if (causal)
      mask = Value();
    SmallVector<Value> operands{q, k, v};
    if (mask)
      operands.push_back(mask);
    SmallVector<NamedAttribute> attrs{
        rewriter.getNamedAttr("causal", rewriter.getBoolAttr(causal)),
        rewriter.getNamedAttr("scale", rewriter.getF32FloatAttr(scale)),
        rewriter.getNamedAttr("safe_softmax", rewriter.getBoolAttr(safe))};
    if (average)
      attrs.push_back(
          rewriter.getNamedAttr("average_empty_rows", rewriter.getUnitAttr()));
    auto attention = AttentionOp::create(rewriter, pv.getLoc(),
                                         TypeRange{*type}, operands, attrs);
    rewriter.replaceOp(pv, attention->getResults());
    return success();
  }
};

struct FsdpFuseAttention
    : fsdp::impl::FsdpFuseAttentionBase<FsdpFuseAttention> {
  using Base::Base;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseAttentionPattern>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
