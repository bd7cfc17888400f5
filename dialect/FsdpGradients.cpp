//===- FsdpGradients.cpp - Vector-Jacobian products of fsdp ops -----------===//
//
// Each op's GradientOpInterface::buildVJP, written with fsdp ops so that
// autodiff (autodiff/Autodiff.cpp) stays generic. VJPs that need the forward
// value recompute nothing they can read: they use the op's own results
// (exp, sqrt, softmax, ...). GELU, layer norm and attention have one fused
// backward op each; layer norm's and attention's recompute their
// statistics from the inputs, as fused kernels do.
//
//===----------------------------------------------------------------------===//
#include "dialect/FsdpOps.h"
#include "dialect/ShapeInference.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::fsdp;

namespace {

RankedTensorType tensorOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Builds fsdp ops with types from the shape functions (valid IR only).
struct G {
  OpBuilder &b;
  Location loc;

  template <typename OpTy>
  Value make(Type type, ValueRange operands,
             ArrayRef<NamedAttribute> attrs = {}) {
    return OpTy::create(b, loc, TypeRange{type}, operands, attrs)->getResult(0);
  }

  Value scalar(Type element, double v) {
    auto t = RankedTensorType::get({}, element);
    Attribute a = isa<FloatType>(element)
                      ? (Attribute)b.getFloatAttr(element, v)
                      : (Attribute)b.getIntegerAttr(element, (int64_t)v);
    return ConstantOp::create(b, loc, DenseElementsAttr::get(t, a));
  }
  Value scalarLike(Value like, double v) {
    return scalar(tensorOf(like).getElementType(), v);
  }
  /// Zeros of type `t`, broadcast from a scalar at the use: a splat
  /// constant would be stored once per use for the whole step (a slice's
  /// gradient base per layer, the embedding's gradient base).
  Value zeros(RankedTensorType t) {
    Value zero = scalar(t.getElementType(), 0.0);
    if (t.getRank() == 0)
      return zero;
    return make<BroadcastOp>(t, {zero});
  }

  template <typename OpTy>
  Value binary(Value x, Value y, Type element = Type()) {
    auto t = shape::binary(std::nullopt, tensorOf(x), tensorOf(y), element);
    assert(succeeded(t) && "binary on incompatible operands");
    return make<OpTy>(*t, {x, y});
  }
  Value add(Value x, Value y) { return binary<AddOp>(x, y); }
  Value sub(Value x, Value y) { return binary<SubOp>(x, y); }
  Value mul(Value x, Value y) { return binary<MulOp>(x, y); }
  Value div(Value x, Value y) { return binary<DivOp>(x, y); }
  Value mul(Value x, double c) { return mul(x, scalarLike(x, c)); }
  Value greater(Value x, Value y) {
    return binary<GreaterOp>(x, y, b.getI1Type());
  }
  Value equal(Value x, Value y) { return binary<EqualOp>(x, y, b.getI1Type()); }
  template <typename OpTy> Value unary(Value x) {
    return make<OpTy>(x.getType(), {x});
  }
  Value where(Value c, Value x, Value y) {
    auto t = shape::where(std::nullopt, tensorOf(c), tensorOf(x), tensorOf(y));
    assert(succeeded(t));
    return make<WhereOp>(*t, {c, x, y});
  }
  Value reshape(Value x, ArrayRef<int64_t> dims) {
    auto t = RankedTensorType::get(dims, tensorOf(x).getElementType());
    return t == x.getType() ? x : make<ReshapeOp>(t, {x});
  }
  Value broadcast(Value x, RankedTensorType to) {
    return x.getType() == to ? x : make<BroadcastOp>(to, {x});
  }
  Value reduceSum(Value x, ArrayRef<int64_t> axes, bool keepdims) {
    if (axes.empty())
      return x;
    auto t = shape::reduce(std::nullopt, tensorOf(x), axes, keepdims);
    return make<ReduceSumOp>(
        *t, {x},
        {b.getNamedAttr("axes", b.getDenseI64ArrayAttr(axes)),
         b.getNamedAttr("keepdims", b.getBoolAttr(keepdims))});
  }
  Value matmul(Value x, Value y, bool tl, bool tr) {
    auto t = shape::matmul(std::nullopt, tensorOf(x), tensorOf(y), tl, tr);
    assert(succeeded(t));
    return make<MatmulOp>(*t, {x, y},
                          {b.getNamedAttr("transpose_lhs", b.getBoolAttr(tl)),
                           b.getNamedAttr("transpose_rhs", b.getBoolAttr(tr))});
  }
  Value transpose(Value x, ArrayRef<int64_t> perm) {
    auto t = shape::transpose(std::nullopt, tensorOf(x), perm);
    return make<TransposeOp>(
        *t, {x}, {b.getNamedAttr("perm", b.getDenseI64ArrayAttr(perm))});
  }
  Value softmax(Value x, int64_t axis) {
    return make<SoftmaxOp>(x.getType(), {x},
                           {b.getNamedAttr("axis", b.getI64IntegerAttr(axis))});
  }

  /// Sums a gradient of a broadcast result back to the operand's shape.
  Value unbroadcast(Value g, RankedTensorType target) {
    if (g.getType() == target)
      return g;
    ArrayRef<int64_t> gs = tensorOf(g).getShape();
    int64_t lead = gs.size() - target.getRank();
    SmallVector<int64_t> axes;
    for (int64_t i = 0; i < (int64_t)gs.size(); ++i)
      if (i < lead || (target.getDimSize(i - lead) == 1 && gs[i] != 1))
        axes.push_back(i);
    return reshape(reduceSum(g, axes, true), target.getShape());
  }
};

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise unary
//===----------------------------------------------------------------------===//

#define FSDP_UNARY_VJP(OP, BODY)                                               \
  LogicalResult OP::buildVJP(OpBuilder &builder, ValueRange resultGrads,       \
                             SmallVectorImpl<Value> &operandGrads) {           \
    G g{builder, getLoc()};                                                    \
    Value dy = resultGrads[0], x = getX(), y = getResult();                    \
    (void)x;                                                                   \
    (void)y;                                                                   \
    operandGrads.push_back(dy ? (BODY) : Value());                             \
    return success();                                                          \
  }

FSDP_UNARY_VJP(NegOp, g.unary<NegOp>(dy))
FSDP_UNARY_VJP(AbsOp, g.where(g.greater(x, g.scalarLike(x, 0)), dy,
                              g.where(g.greater(g.scalarLike(x, 0), x),
                                      g.unary<NegOp>(dy), g.mul(dy, 0.0))))
FSDP_UNARY_VJP(ExpOp, g.mul(dy, y))
FSDP_UNARY_VJP(LogOp, g.div(dy, x))
FSDP_UNARY_VJP(SqrtOp, g.div(g.mul(dy, 0.5), y))
FSDP_UNARY_VJP(RsqrtOp, g.mul(g.mul(dy, -0.5), g.mul(y, g.mul(y, y))))
FSDP_UNARY_VJP(ReciprocalOp, g.mul(g.unary<NegOp>(dy), g.mul(y, y)))
FSDP_UNARY_VJP(TanhOp, g.mul(dy, g.sub(g.scalarLike(y, 1), g.mul(y, y))))
FSDP_UNARY_VJP(ErfOp, g.mul(g.mul(dy, 2.0 / std::sqrt(M_PI)),
                            g.unary<ExpOp>(g.unary<NegOp>(g.mul(x, x)))))
// 1 / erf'(y) = sqrt(pi)/2 exp(y^2), y = erfinv(x).
FSDP_UNARY_VJP(ErfinvOp, g.mul(g.mul(dy, std::sqrt(M_PI) / 2.0),
                               g.unary<ExpOp>(g.mul(y, y))))
FSDP_UNARY_VJP(ReluOp, g.where(g.greater(x, g.scalarLike(x, 0)), dy,
                               g.scalarLike(x, 0)))
FSDP_UNARY_VJP(SigmoidOp, g.mul(dy, g.mul(y, g.sub(g.scalarLike(y, 1), y))))
FSDP_UNARY_VJP(SiluOp, [&] {
  Value s = g.unary<SigmoidOp>(x);
  Value one = g.scalarLike(x, 1);
  return g.mul(dy, g.mul(s, g.add(one, g.mul(x, g.sub(one, s)))));
}())
FSDP_UNARY_VJP(SoftplusOp, g.mul(dy, g.unary<SigmoidOp>(x)))
FSDP_UNARY_VJP(MishOp, [&] { // tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2)
  Value t = g.unary<TanhOp>(g.unary<SoftplusOp>(x));
  Value one = g.scalarLike(x, 1);
  Value dt = g.mul(g.mul(x, g.unary<SigmoidOp>(x)), g.sub(one, g.mul(t, t)));
  return g.mul(dy, g.add(t, dt));
}())
FSDP_UNARY_VJP(HardswishOp, [&] { // 0 below -3, 1 above 3, x/3 + 1/2 between
  Value mid = g.mul(dy, g.add(g.div(x, g.scalarLike(x, 3)), g.scalarLike(x, 0.5)));
  return g.where(g.greater(x, g.scalarLike(x, 3)), dy,
                 g.where(g.greater(g.scalarLike(x, -3), x), g.scalarLike(x, 0),
                         mid));
}())
FSDP_UNARY_VJP(SinOp, g.mul(dy, g.unary<CosOp>(x)))
FSDP_UNARY_VJP(CosOp, g.mul(g.unary<NegOp>(dy), g.unary<SinOp>(x)))
FSDP_UNARY_VJP(AsinOp, g.mul(dy, g.unary<RsqrtOp>(g.sub(g.scalarLike(x, 1), g.mul(x, x)))))
FSDP_UNARY_VJP(AcosOp, g.mul(g.unary<NegOp>(dy),
                             g.unary<RsqrtOp>(g.sub(g.scalarLike(x, 1), g.mul(x, x)))))
FSDP_UNARY_VJP(AtanOp, g.div(dy, g.add(g.scalarLike(x, 1), g.mul(x, x))))
FSDP_UNARY_VJP(Log1pOp, g.div(dy, g.add(x, g.scalarLike(x, 1))))
FSDP_UNARY_VJP(Expm1Op, g.mul(dy, g.add(y, g.scalarLike(y, 1))))
// Piecewise constant: zero almost everywhere, as torch's.
FSDP_UNARY_VJP(FloorOp, g.mul(dy, 0.0))
FSDP_UNARY_VJP(CeilOp, g.mul(dy, 0.0))
FSDP_UNARY_VJP(RoundOp, g.mul(dy, 0.0))
FSDP_UNARY_VJP(TruncOp, g.mul(dy, 0.0))
FSDP_UNARY_VJP(SignOp, g.mul(dy, 0.0))
#undef FSDP_UNARY_VJP

LogicalResult NotOp::buildVJP(OpBuilder &, ValueRange,
                              SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(Value());
  return success();
}

LogicalResult GeluOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  Value dy = resultGrads[0];
  operandGrads.push_back(dy ? GeluGradOp::create(builder, getLoc(), getType(),
                                                 getX(), dy,
                                                 getApproximateAttr())
                                  .getResult()
                            : Value());
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise binary
//===----------------------------------------------------------------------===//

#define FSDP_BINARY_VJP(OP, DA, DB)                                            \
  LogicalResult OP::buildVJP(OpBuilder &builder, ValueRange resultGrads,       \
                             SmallVectorImpl<Value> &operandGrads) {           \
    G g{builder, getLoc()};                                                    \
    Value dy = resultGrads[0], a = getLhs(), b = getRhs(), y = getResult();    \
    (void)y;                                                                   \
    if (!dy) {                                                                 \
      operandGrads.append({Value(), Value()});                                 \
      return success();                                                        \
    }                                                                          \
    operandGrads.push_back(g.unbroadcast((DA), tensorOf(a)));                  \
    operandGrads.push_back(g.unbroadcast((DB), tensorOf(b)));                  \
    return success();                                                          \
  }

FSDP_BINARY_VJP(AddOp, dy, dy)
FSDP_BINARY_VJP(SubOp, dy, g.unary<NegOp>(dy))
FSDP_BINARY_VJP(MulOp, g.mul(dy, b), g.mul(dy, a))
FSDP_BINARY_VJP(DivOp, g.div(dy, b), g.unary<NegOp>(g.div(g.mul(dy, y), b)))
FSDP_BINARY_VJP(PowOp,
                g.mul(g.mul(dy, b),
                      g.binary<PowOp>(a, g.sub(b, g.scalarLike(b, 1)))),
                g.mul(g.mul(dy, y), g.unary<LogOp>(a)))
// Ties send the gradient to the left operand.
FSDP_BINARY_VJP(MaxOp, g.where(g.greater(b, a), g.mul(dy, 0.0), dy),
                g.where(g.greater(b, a), dy, g.mul(dy, 0.0)))
FSDP_BINARY_VJP(MinOp, g.where(g.greater(a, b), g.mul(dy, 0.0), dy),
                g.where(g.greater(a, b), dy, g.mul(dy, 0.0)))
#undef FSDP_BINARY_VJP

#define FSDP_NO_VJP(OP)                                                        \
  LogicalResult OP::buildVJP(OpBuilder &, ValueRange,                          \
                             SmallVectorImpl<Value> &operandGrads) {           \
    operandGrads.append((*this)->getNumOperands(), Value());                   \
    return success();                                                          \
  }
FSDP_NO_VJP(EqualOp)
FSDP_NO_VJP(LessOp)
FSDP_NO_VJP(GreaterOp)
FSDP_NO_VJP(AndOp)
FSDP_NO_VJP(OrOp)
#undef FSDP_NO_VJP

LogicalResult WhereOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                SmallVectorImpl<Value> &operandGrads) {
  G g{builder, getLoc()};
  Value dy = resultGrads[0];
  operandGrads.push_back(Value());
  if (!dy) {
    operandGrads.append({Value(), Value()});
    return success();
  }
  Value zero = g.scalarLike(dy, 0);
  operandGrads.push_back(
      g.unbroadcast(g.where(getCond(), dy, zero), tensorOf(getX())));
  operandGrads.push_back(
      g.unbroadcast(g.where(getCond(), zero, dy), tensorOf(getY())));
  return success();
}

LogicalResult CastOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  G g{builder, getLoc()};
  Value dy = resultGrads[0];
  bool floatIn = isa<FloatType>(tensorOf(getX()).getElementType());
  operandGrads.push_back(dy && floatIn ? g.make<CastOp>(getX().getType(), {dy})
                                       : Value());
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

/// Gradients of op_a(A) @ op_b(B) given dY.
static std::pair<Value, Value> matmulGrads(G &g, Value a, Value b, Value dy,
                                           bool ta, bool tb) {
  Value da = ta ? g.matmul(b, dy, tb, true) : g.matmul(dy, b, false, !tb);
  RankedTensorType at = tensorOf(a);
  // (An empty contraction, k = 0, takes the general path: its gradients
  // are empty products.)
  if (!ta && at.getRank() > 2 && tensorOf(b).getRank() == 2 &&
      at.getShape().back() > 0) {
    // A weight applied to a batch of rows (nn.Linear): its gradient is one
    // GEMM over all B·T rows, not B products summed afterwards (a [B, k, n]
    // temporary, and bf16 partial sums rounded before the sum).
    int64_t k = at.getShape().back(), rows = at.getNumElements() / k;
    Value a2 = g.reshape(a, {rows, k});
    Value dy2 = g.reshape(dy, {rows, tensorOf(dy).getShape().back()});
    Value db =
        tb ? g.matmul(dy2, a2, true, false) : g.matmul(a2, dy2, true, false);
    return {g.unbroadcast(da, at), db};
  }
  Value db = tb ? g.matmul(dy, a, true, ta) : g.matmul(a, dy, !ta, false);
  return {g.unbroadcast(da, tensorOf(a)), g.unbroadcast(db, tensorOf(b))};
}

LogicalResult MatmulOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  G g{builder, getLoc()};
  if (!resultGrads[0]) {
    operandGrads.append((*this)->getNumOperands(), Value());
    return success();
  }
  auto [da, db] = matmulGrads(g, getLhs(), getRhs(), resultGrads[0],
                              getTransposeLhs(), getTransposeRhs());
  operandGrads.append({da, db});
  if (getBias())
    operandGrads.push_back(g.unbroadcast(resultGrads[0], tensorOf(getBias())));
  return success();
}

LogicalResult GemmOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  G g{builder, getLoc()};
  Value dy = resultGrads[0];
  if (!dy) {
    operandGrads.append((*this)->getNumOperands(), Value());
    return success();
  }
  double alpha = getAlpha().convertToDouble(),
         beta = getBeta().convertToDouble();
  Value scaled = alpha == 1.0 ? dy : g.mul(dy, alpha);
  auto [da, db] =
      matmulGrads(g, getA(), getB(), scaled, getTransA(), getTransB());
  operandGrads.append({da, db});
  if (getC()) {
    Value dc = g.unbroadcast(dy, tensorOf(getC()));
    operandGrads.push_back(beta == 1.0 ? dc : g.mul(dc, beta));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions and normalisations
//===----------------------------------------------------------------------===//

/// dy of a reduction, broadcast back to the input's shape.
static Value expandReduced(G &g, Value dy, RankedTensorType in,
                           ArrayRef<int64_t> axes) {
  SmallVector<int64_t> kept(in.getShape());
  for (int64_t a : axes)
    kept[a] = 1;
  return g.broadcast(g.reshape(dy, kept), in);
}

LogicalResult ReduceSumOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  G g{builder, getLoc()};
  Value dy = resultGrads[0];
  operandGrads.push_back(dy ? expandReduced(g, dy, tensorOf(getX()), getAxes())
                            : Value());
  return success();
}

LogicalResult ReduceMeanOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  G g{builder, getLoc()};
  Value dy = resultGrads[0];
  if (!dy) {
    operandGrads.push_back(Value());
    return success();
  }
  int64_t count = 1;
  for (int64_t a : getAxes())
    count *= tensorOf(getX()).getDimSize(a);
  operandGrads.push_back(
      expandReduced(g, g.mul(dy, 1.0 / count), tensorOf(getX()), getAxes()));
  return success();
}

LogicalResult ReduceMaxOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  G g{builder, getLoc()};
  Value dy = resultGrads[0];
  if (!dy) {
    operandGrads.push_back(Value());
    return success();
  }
  RankedTensorType in = tensorOf(getX());
  Value hit = g.equal(getX(), expandReduced(g, getResult(), in, getAxes()));
  operandGrads.push_back(
      g.where(hit, expandReduced(g, dy, in, getAxes()), g.scalarLike(dy, 0)));
  return success();
}

LogicalResult SoftmaxOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  G g{builder, getLoc()};
  Value dy = resultGrads[0], y = getResult();
  if (!dy) {
    operandGrads.push_back(Value());
    return success();
  }
  int64_t axis = getAxisAttr().getInt();
  Value dot = g.reduceSum(g.mul(dy, y), {axis}, true);
  operandGrads.push_back(g.mul(y, g.sub(dy, dot)));
  return success();
}

LogicalResult LogSoftmaxOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  G g{builder, getLoc()};
  Value dy = resultGrads[0], y = getResult();
  if (!dy) {
    operandGrads.push_back(Value());
    return success();
  }
  int64_t axis = getAxisAttr().getInt();
  Value sum = g.reduceSum(dy, {axis}, true);
  operandGrads.push_back(g.sub(dy, g.mul(g.unary<ExpOp>(y), sum)));
  return success();
}

/// A norm's VJP: one fused backward op `GradOp` (it recomputes each row's
/// statistics from x), whose results are dx then the gradients of the
/// norm's remaining operands (scale, and layer_norm's bias when present).
template <typename NormOp, typename GradOp>
static LogicalResult normVJP(NormOp op, OpBuilder &builder,
                             ValueRange resultGrads, unsigned gradResults,
                             SmallVectorImpl<Value> &operandGrads) {
  Value dy = resultGrads[0], x = op.getX(), w = op.getScale();
  if (!dy) {
    operandGrads.append(op->getNumOperands(), Value());
    return success();
  }
  SmallVector<Type> types(gradResults, w.getType());
  types.front() = x.getType();
  auto grad = GradOp::create(
      builder, op.getLoc(), types, ValueRange{x, w, dy},
      {builder.getNamedAttr("axis", op.getAxisAttr()),
       builder.getNamedAttr("epsilon", op.getEpsilonAttr())});
  for (unsigned i = 0; i < op->getNumOperands(); ++i)
    operandGrads.push_back(grad->getResult(i));
  return success();
}

LogicalResult LayerNormOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  return normVJP<LayerNormOp, LayerNormGradOp>(*this, builder, resultGrads, 3,
                                               operandGrads);
}

LogicalResult RmsNormOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  return normVJP<RmsNormOp, RmsNormGradOp>(*this, builder, resultGrads, 2,
                                           operandGrads);
}

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

LogicalResult ConvOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  Value dy = resultGrads[0];
  if (!dy) {
    operandGrads.append((*this)->getNumOperands(), Value());
    return success();
  }
  SmallVector<NamedAttribute> attrs{
      builder.getNamedAttr("strides", getStridesAttr()),
      builder.getNamedAttr("pads", getPadsAttr()),
      builder.getNamedAttr("dilations", getDilationsAttr()),
      builder.getNamedAttr("groups", getGroupsAttr())};
  operandGrads.push_back(ConvGradInputOp::create(builder, getLoc(),
                                                 getX().getType(),
                                                 ValueRange{dy, getW()}, attrs));
  operandGrads.push_back(ConvGradWeightOp::create(
      builder, getLoc(), getW().getType(), ValueRange{getX(), dy}, attrs));
  if (getBias()) {
    // The bias's gradient: dy summed over the batch and spatial axes.
    G g{builder, getLoc()};
    SmallVector<int64_t> axes{0};
    for (int64_t d = 2; d < getType().getRank(); ++d)
      axes.push_back(d);
    operandGrads.push_back(g.reduceSum(dy, axes, false));
  }
  return success();
}

LogicalResult PoolOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  Value dy = resultGrads[0];
  if (!dy) {
    operandGrads.push_back(Value());
    return success();
  }
  // One fused backward op (a max window's winner recomputed from x).
  SmallVector<NamedAttribute> attrs;
  for (NamedAttribute a : (*this)->getAttrs())
    attrs.push_back(a);
  operandGrads.push_back(PoolGradOp::create(builder, getLoc(),
                                            getX().getType(),
                                            ValueRange{getX(), dy}, attrs));
  return success();
}

LogicalResult BatchNormOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  // The statistics feed only the running statistics' update, which the
  // loss never reads.
  if (resultGrads[1] || resultGrads[2])
    return emitOpError("the loss depends on the batch statistics, whose "
                       "gradient is not implemented");
  Value dy = resultGrads[0];
  if (!dy) {
    operandGrads.append(3, Value());
    return success();
  }
  auto grad = BatchNormGradOp::create(
      builder, getLoc(),
      TypeRange{getX().getType(), getScale().getType(), getScale().getType()},
      ValueRange{getX(), getScale(), dy},
      {builder.getNamedAttr("epsilon", getEpsilonAttr())});
  operandGrads.append({grad.getDx(), grad.getDscale(), grad.getDbias()});
  return success();
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  // One fused backward op (recomputes the probabilities per batch element).
  Value dy = resultGrads[0], q = getQ(), k = getK(), v = getV();
  if (!dy) {
    operandGrads.append((*this)->getNumOperands(), Value());
    return success();
  }
  // With the forward's row statistics (with_lse), the backward reads them
  // and the output instead of recomputing them.
  Value out = getLse() ? getResult() : Value();
  auto grad = AttentionGradOp::create(
      builder, getLoc(), q.getType(), k.getType(), v.getType(), q, k, v, dy,
      getMask(), out, getLse(), getCausalAttr(), getScaleAttr(),
      getSafeSoftmaxAttr(),
      getAverageEmptyRows() ? builder.getUnitAttr() : UnitAttr(),
      getLayoutAttr());
  operandGrads.append({grad.getDq(), grad.getDk(), grad.getDv()});
  if (getMask())
    operandGrads.push_back(additiveMaskGrad(builder, dy));
  return success();
}

/// Whether a parameter read as an attention mask is state, not a weight.
/// A traced module says so itself (`buffer`, `frozen`): a learned bias it
/// registers as a parameter and adds as it is (nn.Parameter passed as
/// attn_mask) trains. ONNX initializers carry no such mark, and its
/// exporter writes a registered -inf mask buffer as one like any weight:
/// there every stored tensor read only through views is taken as a buffer.
static bool isStoredNotTrained(GetParameterOp read) {
  auto module = read->getParentOfType<ModuleOp>();
  auto param = module ? dyn_cast_or_null<ParameterOp>(
                            SymbolTable::lookupSymbolIn(module, read.getParamAttr()))
                      : ParameterOp();
  if (!param)
    return true;
  auto frontend = module->getAttrOfType<StringAttr>("fsdp.frontend");
  bool traced = frontend && frontend.getValue().starts_with("torch.");
  return !traced || param.getBuffer() || param.getFrozen();
}

/// Whether `v` is a constant or a parameter read as it is (through views:
/// reshape, slice, transpose, broadcast, cast). An additive mask that is
/// one is read as a buffer (llama2.c's -inf causal mask, which ONNX
/// exports as an initializer like any parameter); one computed from a
/// parameter by a lookup or arithmetic is a learned bias (Swin's and
/// T5's relative-position tables) and gets its gradient.
static bool isViewOfStoredTensor(Value v) {
  while (Operation *op = v.getDefiningOp()) {
    if (isa<ConstantOp>(op))
      return true;
    if (auto read = dyn_cast<GetParameterOp>(op))
      return isStoredNotTrained(read);
    if (!isa<ReshapeOp, SliceOp, TransposeOp, BroadcastOp, CastOp>(op))
      return false;
    v = op->getOperand(0);
  }
  return false; // a step input
}

Value AttentionOp::additiveMaskGrad(OpBuilder &builder, Value dy) {
  // The gradient of a float mask added to the scores is the scores'
  // gradient dS = P ⊙ (dP - rowsum(dP ⊙ P)), P the probabilities and
  // dP = dy·vᵀ, summed back to the mask's shape. The fused backward does
  // not give dS, so it is composed here, recomputing P ([..., Tq, Tk], as
  // an unfused attention stores it); a mask that needs none builds
  // nothing (and what is built for an unused gradient is erased).
  Value mask = getMask();
  auto maskType = tensorOf(mask);
  if (!isa<FloatType>(maskType.getElementType()) || isViewOfStoredTensor(mask))
    return Value();
  G g{builder, getLoc()};
  // In the bshd layout, q, k, v and dy seen as [..., H, T, D] first.
  Value q = getQ(), k = getK(), v = getV();
  if (getLayout() == "bshd") {
    int64_t r = tensorOf(q).getRank();
    SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, r));
    std::swap(perm[r - 3], perm[r - 2]);
    q = g.transpose(q, perm);
    k = g.transpose(k, perm);
    v = g.transpose(v, perm);
    dy = g.transpose(dy, perm);
  }
  Value scores = g.mul(g.matmul(q, k, false, true),
                       getScale().convertToDouble());
  if (maskType.getElementType() != tensorOf(scores).getElementType())
    mask = g.make<CastOp>(RankedTensorType::get(maskType.getShape(),
                                                tensorOf(scores).getElementType()),
                          {mask});
  scores = g.add(scores, mask);
  auto st = tensorOf(scores);
  int64_t tq = st.getDimSize(st.getRank() - 2), tk = st.getDimSize(st.getRank() - 1);
  if (getCausal()) {
    // The keys after i + (tk - tq) hidden, as the kernel does: -inf where
    // j - i >= tk - tq + 1, a trilu of a splat (no [tq, tk] constant).
    auto ht = RankedTensorType::get({tq, tk}, st.getElementType());
    Value ninf = g.broadcast(
        g.scalar(st.getElementType(), -std::numeric_limits<double>::infinity()), ht);
    scores = g.add(scores, g.make<TriluOp>(
                               ht, {ninf},
                               {builder.getNamedAttr(
                                    "k", builder.getI64IntegerAttr(tk - tq + 1)),
                                builder.getNamedAttr("upper", builder.getBoolAttr(true))}));
  }
  int64_t last = st.getRank() - 1;
  Value p;
  if (getSafeSoftmax()) {
    // A row with every key hidden has zero probabilities (the kernels'),
    // not the NaN a softmax of -inf gives.
    Value top = g.make<ReduceMaxOp>(
        *shape::reduce(std::nullopt, st, {last}, true), {scores},
        {builder.getNamedAttr("axes", builder.getDenseI64ArrayAttr({last})),
         builder.getNamedAttr("keepdims", builder.getBoolAttr(true))});
    Value dead = g.equal(
        top, g.scalarLike(top, -std::numeric_limits<double>::infinity()));
    Value zero = g.scalarLike(scores, 0.0);
    p = g.where(dead, zero, g.softmax(g.where(dead, zero, scores), last));
  } else {
    p = g.softmax(scores, last);
  }
  Value dp = g.matmul(dy, v, false, true);
  Value ds = g.mul(p, g.sub(dp, g.reduceSum(g.mul(dp, p), {last}, true)));
  Value dm = g.unbroadcast(ds, RankedTensorType::get(maskType.getShape(),
                                                     st.getElementType()));
  if (maskType.getElementType() != st.getElementType())
    dm = g.make<CastOp>(maskType, {dm});
  return dm;
}

//===----------------------------------------------------------------------===//
// Indexing and losses
//===----------------------------------------------------------------------===//

LogicalResult DropoutOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  // The same mask, regenerated from (seed, step, index): dropout of dy.
  Value dy = resultGrads[0];
  operandGrads.push_back(
      dy ? DropoutOp::create(builder, getLoc(), dy.getType(), dy, getPAttr(),
                             getSeedAttr())
               .getResult()
         : Value());
  return success();
}

LogicalResult StopGradientOp::buildVJP(OpBuilder &, ValueRange,
                                       SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(Value()); // detach(): nothing flows back
  return success();
}

LogicalResult ScatterAddOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  G g{builder, getLoc()};
  Value dy = resultGrads[0];
  operandGrads.push_back(dy); // dest
  operandGrads.push_back(Value()); // indices
  operandGrads.push_back(
      dy ? g.make<GatherOp>(tensorOf(getUpdates()), {dy, getIndices()},
                            {builder.getNamedAttr("axis", getAxisAttr())})
         : Value());
  return success();
}

LogicalResult GatherOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  G g{builder, getLoc()};
  Value dy = resultGrads[0];
  RankedTensorType data = tensorOf(getData());
  if (!dy || !isa<FloatType>(data.getElementType())) {
    operandGrads.push_back(Value());
    operandGrads.push_back(Value());
    return success();
  }
  // A bf16/f16 table's gradient is summed in f32 and rounded once, as
  // PyTorch's embedding backward accumulates: explicitly, so no backend
  // keeps f32 copies of the whole table as kernel scratch for it.
  auto axis = builder.getNamedAttr("axis", getAxisAttr());
  Type element = data.getElementType();
  if (element.getIntOrFloatBitWidth() < 32) {
    auto wide = [&](RankedTensorType t) {
      return RankedTensorType::get(t.getShape(), builder.getF32Type());
    };
    Value dy32 = g.make<CastOp>(wide(tensorOf(dy)), {dy});
    Value sum = g.make<ScatterAddOp>(
        wide(data), {g.zeros(wide(data)), getIndices(), dy32}, {axis});
    operandGrads.push_back(g.make<CastOp>(data, {sum}));
  } else {
    operandGrads.push_back(g.make<ScatterAddOp>(
        data, {g.zeros(data), getIndices(), dy}, {axis}));
  }
  operandGrads.push_back(Value());
  return success();
}

template <typename OpTy>
static LogicalResult
lossVJP(OpTy op, OpBuilder &builder, ValueRange resultGrads,
        SmallVectorImpl<Value> &operandGrads, StringRef kind) {
  G g{builder, op.getLoc()};
  Value dy = resultGrads[0];
  if (!dy) {
    operandGrads.append(op->getNumOperands(), Value());
    return success();
  }
  SmallVector<Value> operands{op.getInput(), op.getTarget(), dy};
  if (op.getWeight())
    operands.push_back(op.getWeight());
  SmallVector<NamedAttribute> attrs{
      builder.getNamedAttr("kind", builder.getStringAttr(kind)),
      builder.getNamedAttr("reduction", op.getReductionAttr())};
  if (op.getIgnoreIndexAttr())
    attrs.push_back(
        builder.getNamedAttr("ignore_index", op.getIgnoreIndexAttr()));
  operandGrads.push_back(
      g.make<CrossEntropyGradOp>(op.getInput().getType(), operands, attrs));
  operandGrads.append(op->getNumOperands() - 1, Value());
  return success();
}

LogicalResult CrossEntropyOp::buildVJP(OpBuilder &builder,
                                       ValueRange resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  return lossVJP(*this, builder, resultGrads, operandGrads, "softmax");
}

LogicalResult NllLossOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  return lossVJP(*this, builder, resultGrads, operandGrads, "nll");
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  G g{builder, getLoc()};
  Value dy = resultGrads[0];
  operandGrads.push_back(dy ? g.reshape(dy, tensorOf(getX()).getShape())
                            : Value());
  return success();
}

LogicalResult TransposeOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  G g{builder, getLoc()};
  Value dy = resultGrads[0];
  SmallVector<int64_t> inverse(getPerm().size());
  for (auto [i, p] : llvm::enumerate(getPerm()))
    inverse[p] = i;
  operandGrads.push_back(dy ? g.transpose(dy, inverse) : Value());
  return success();
}

LogicalResult SliceOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                SmallVectorImpl<Value> &operandGrads) {
  G g{builder, getLoc()};
  Value dy = resultGrads[0];
  RankedTensorType in = tensorOf(getX());
  operandGrads.push_back(
      dy ? g.make<InsertSliceOp>(
               in, {g.zeros(in), dy},
               {builder.getNamedAttr("starts", getStartsAttr()),
                builder.getNamedAttr("strides", getStridesAttr())})
         : Value());
  return success();
}

LogicalResult ConcatOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  G g{builder, getLoc()};
  Value dy = resultGrads[0];
  int64_t axis = getAxisAttr().getInt(), offset = 0;
  RankedTensorType out = getType();
  for (Value in : getInputs()) {
    RankedTensorType t = tensorOf(in);
    if (!dy) {
      operandGrads.push_back(Value());
      continue;
    }
    SmallVector<int64_t> starts(out.getRank(), 0), limits(out.getShape()),
        strides(out.getRank(), 1);
    starts[axis] = offset;
    limits[axis] = offset + t.getDimSize(axis);
    operandGrads.push_back(g.make<SliceOp>(
        t, {dy},
        {builder.getNamedAttr("starts", builder.getDenseI64ArrayAttr(starts)),
         builder.getNamedAttr("limits", builder.getDenseI64ArrayAttr(limits)),
         builder.getNamedAttr("strides",
                              builder.getDenseI64ArrayAttr(strides))}));
    offset += t.getDimSize(axis);
  }
  return success();
}

LogicalResult SplitOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                SmallVectorImpl<Value> &operandGrads) {
  G g{builder, getLoc()};
  if (llvm::all_of(resultGrads, [](Value v) { return !v; })) {
    operandGrads.push_back(Value());
    return success();
  }
  SmallVector<Value> pieces;
  for (auto [r, d] : llvm::zip(getResults(), resultGrads))
    pieces.push_back(d ? d : g.zeros(tensorOf(r)));
  operandGrads.push_back(g.make<ConcatOp>(
      getX().getType(), pieces, {builder.getNamedAttr("axis", getAxisAttr())}));
  return success();
}

LogicalResult BroadcastOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  G g{builder, getLoc()};
  Value dy = resultGrads[0];
  operandGrads.push_back(dy ? g.unbroadcast(dy, tensorOf(getX())) : Value());
  return success();
}

LogicalResult ArgsortOp::buildVJP(OpBuilder &, ValueRange,
                                  SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(Value()); // integer positions: no gradient
  return success();
}

LogicalResult TriluOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                SmallVectorImpl<Value> &operandGrads) {
  G g{builder, getLoc()};
  Value dy = resultGrads[0];
  operandGrads.push_back(
      dy ? g.make<TriluOp>(dy.getType(), {dy},
                           {builder.getNamedAttr("k", getKAttr()),
                            builder.getNamedAttr("upper", getUpperAttr())})
         : Value());
  return success();
}
