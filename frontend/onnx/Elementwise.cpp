//===- Elementwise.cpp - Elementwise ops (ONNX) ---------------------------===//
//
// Elementwise ops and their constant folds: their lowerings from ONNX and their
// rows of the importer's table (frontend/OnnxOps.cpp gathers the families).
//
//===----------------------------------------------------------------------===//
#include "common/UnaryMath.h"
#include "frontend/onnx/OnnxOpsSupport.h"

#include <functional>
#include <string_view>

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::onnx_ops;

namespace {

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

enum class Kind { Arith, Compare, Logic };

/// The two operand types after casting a constant side to the other's
/// element type (ONNX allows Pow(float, int); PyTorch scalars may differ).
LogicalResult unifyConstants(NodeContext &n,
                             SmallVectorImpl<ImportedValue> &v) {
  Type target;
  for (auto &x : v)
    if (!x.constant)
      target = x.type.getElementType();
  if (!target)
    return success();
  for (auto &x : v) {
    if (!x.constant || x.type.getElementType() == target)
      continue;
    auto c = std::make_shared<const HostTensor>(x.constant->cast(target));
    x = ImportedValue();
    x.type = c->type();
    x.constant = std::move(c);
  }
  (void)n;
  return success();
}

/// Input `input` as a value: the table's own when `unifyConstants` left it
/// alone (so it is materialised once), the converted constant otherwise.
Value operandOf(NodeContext &n, SmallVectorImpl<ImportedValue> &v, int k,
                int input) {
  if (v[k].type == n.inputType(input))
    return n.operand(input);
  return n.materialize(v[k]);
}

template <typename OpTy>
LogicalResult
binary(NodeContext &n, double (*fn)(double, double), Kind kind = Kind::Arith,
       int64_t (*exact)(int64_t, int64_t) = nullptr, bool divides = false) {
  if (failed(expectInputs(n, 2, 2)))
    return failure();
  SmallVector<ImportedValue> v{n.input(0), n.input(1)};
  if (kind == Kind::Arith && failed(unifyConstants(n, v)))
    return failure();
  Type resultElement = kind == Kind::Compare ? (Type)n.b.getI1Type() : Type();
  if (kind == Kind::Logic && (!v[0].type.getElementType().isInteger(1) ||
                              !v[1].type.getElementType().isInteger(1)))
    return n.error() << "expects boolean operands";
  auto type = shape::binary(n.loc, v[0].type, v[1].type, resultElement);
  if (failed(type))
    return failure();
  if (v[0].constant && v[1].constant && isSmall(type->getShape())) {
    const HostTensor *a = v[0].constant.get(), *b = v[1].constant.get();
    if (exact && !a->isFloat() && !b->isFloat()) {
      // Integers in int64, exactly (BinaryOps.def's integer column).
      if (divides && llvm::is_contained(b->ints, 0))
        return n.error() << "divides by zero";
      return n.setConst(0, foldElementwiseInts({a, b}, type->getShape(),
                                               type->getElementType(),
                                               [exact](ArrayRef<int64_t> x) {
                                                 return exact(x[0], x[1]);
                                               }));
    }
    return n.setConst(
        0,
        foldElementwise({a, b}, type->getShape(), type->getElementType(),
                        [fn](ArrayRef<double> a) { return fn(a[0], a[1]); }));
  }
  return n.setResult(
      0, build<OpTy>(n, *type, {operandOf(n, v, 0, 0), operandOf(n, v, 1, 1)}));
}

/// ONNX Pow allows an exponent of another type: a float base takes an
/// integer exponent converted to float (exact for the small integers seen).
LogicalResult lowerPow(NodeContext &n) {
  auto pow = ::fsdp::um::binaryPow<double>;
  if (failed(expectInputs(n, 2, 2)))
    return failure();
  Type base = n.inputType(0).getElementType(),
       exponent = n.inputType(1).getElementType();
  if (base == exponent || n.constInput(1) || n.constInput(0))
    return binary<PowOp>(n, pow);
  if (!isa<FloatType>(base))
    return n.error() << "an integer base with a " << exponent
                     << " exponent is not supported";
  auto type = shape::binary(
      n.loc, n.inputType(0),
      RankedTensorType::get(n.inputType(1).getShape(), base), Type());
  if (failed(type))
    return failure();
  Value e =
      build<CastOp>(n, RankedTensorType::get(n.inputType(1).getShape(), base),
                    {n.operand(1)});
  return n.setResult(0, build<PowOp>(n, *type, {n.operand(0), e}));
}

/// Max/Min take one or more inputs: a left fold of the binary op.
template <typename OpTy>
LogicalResult variadic(NodeContext &n, double (*fn)(double, double)) {
  if (failed(allInputs(n, 1)))
    return failure();
  if (n.numInputs() <= 2)
    return n.numInputs() == 1 ? n.setAlias(0, n.input(0)) : binary<OpTy>(n, fn);
  Value acc = n.operand(0);
  for (int i = 1; i < n.numInputs(); ++i) {
    auto type = shape::binary(n.loc, cast<RankedTensorType>(acc.getType()),
                              n.inputType(i), Type());
    if (failed(type))
      return failure();
    acc = build<OpTy>(n, *type, {acc, n.operand(i)});
  }
  return n.setResult(0, acc);
}

template <typename OpTy>
LogicalResult unary(NodeContext &n, double (*fn)(double),
                    bool needsFloat = true) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  RankedTensorType t = n.inputType(0);
  if (needsFloat && !isa<FloatType>(t.getElementType()))
    return n.error() << "expects a float tensor, got " << t;
  if (const HostTensor *c = n.constInput(0))
    return n.setConst(
        0, foldElementwise({c}, t.getShape(), t.getElementType(),
                           [fn](ArrayRef<double> a) { return fn(a[0]); }));
  return n.setResult(0, build<OpTy>(n, t, {n.operand(0)}));
}

/// A binary node composed of fsdp ops: two inputs, their constants
/// unified, the broadcast result type (element `elem`, or the operands'
/// where null); folded with `fold` on small constants, else `compose`d.
LogicalResult
composedBinary(NodeContext &n, Type elem,
               function_ref<double(double, double)> fold,
               function_ref<Value(Value, Value, RankedTensorType)> compose) {
  if (failed(expectInputs(n, 2, 2)))
    return failure();
  SmallVector<ImportedValue> v{n.input(0), n.input(1)};
  if (failed(unifyConstants(n, v)))
    return failure();
  auto type = shape::binary(n.loc, v[0].type, v[1].type, elem);
  if (failed(type))
    return failure();
  if (v[0].constant && v[1].constant && isSmall(type->getShape()))
    return n.setConst(
        0,
        foldElementwise({v[0].constant.get(), v[1].constant.get()},
                        type->getShape(), type->getElementType(),
                        [&](ArrayRef<double> a) { return fold(a[0], a[1]); }));
  return n.setResult(
      0, compose(operandOf(n, v, 0, 0), operandOf(n, v, 1, 1), *type));
}

/// GreaterOrEqual / LessOrEqual: (a > b) or (a == b), so a NaN operand
/// gives false, as the comparison does (not(a < b) would give true).
LogicalResult lowerOrEqual(NodeContext &n, bool greater) {
  return composedBinary(
      n, n.b.getI1Type(),
      [greater](double a, double b) {
        return double(greater ? a >= b : a <= b);
      },
      [&](Value a, Value b, RankedTensorType type) -> Value {
        Value strict = greater ? build<GreaterOp>(n, type, {a, b})
                               : build<LessOp>(n, type, {a, b});
        Value equal = build<EqualOp>(n, type, {a, b});
        return build<OrOp>(n, type, {strict, equal});
      });
}

LogicalResult lowerWhere(NodeContext &n) {
  if (failed(expectInputs(n, 3, 3)))
    return failure();
  SmallVector<ImportedValue> v{n.input(0), n.input(1), n.input(2)};
  SmallVector<ImportedValue> xy{v[1], v[2]};
  if (failed(unifyConstants(n, xy)))
    return failure();
  v[1] = xy[0];
  v[2] = xy[1];
  if (!v[0].type.getElementType().isInteger(1))
    return n.error() << "condition must be boolean, got " << v[0].type;
  auto type = shape::where(n.loc, v[0].type, v[1].type, v[2].type);
  if (failed(type))
    return failure();
  if (v[0].constant && v[1].constant && v[2].constant &&
      isSmall(type->getShape()))
    return n.setConst(
        0, foldElementwise(
               {v[0].constant.get(), v[1].constant.get(), v[2].constant.get()},
               type->getShape(), type->getElementType(),
               [](ArrayRef<double> a) { return a[0] ? a[1] : a[2]; }));
  return n.setResult(0, build<WhereOp>(n, *type,
                                       {n.operand(0), operandOf(n, v, 1, 1),
                                        operandOf(n, v, 2, 2)}));
}

LogicalResult lowerCast(NodeContext &n) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  Type to = onnxElementType(n.ctx(), n.attrInt("to", 0));
  if (!to)
    return n.error() << "unsupported target type " << n.attrInt("to", 0);
  RankedTensorType t = n.inputType(0);
  if (const HostTensor *c = n.constInput(0))
    return n.setConst(0, c->cast(to));
  if (t.getElementType() == to)
    return n.setAlias(0, n.input(0));
  return n.setResult(0,
                     build<CastOp>(n, RankedTensorType::get(t.getShape(), to),
                                   {n.operand(0)}));
}

/// Clip(x, min?, max?): max(x, min) then min(., max), NaN kept (as
/// torch.clamp, which the exporter writes it from: ReLU6, hardtanh).
/// The bounds are inputs from opset 11, attributes before.
LogicalResult lowerClip(NodeContext &n) {
  if (n.numInputs() < 1 || n.numInputs() > 3 || !n.hasInput(0))
    return n.error() << "expects 1 to 3 inputs, got " << n.numInputs();
  RankedTensorType t = n.inputType(0);
  Type elem = t.getElementType();
  // Each bound: a 0-dim value (an input) or a constant (an attribute), or
  // none; `folded` its value where known at import time, else NaN.
  auto bound = [&](int input, StringRef attr,
                   double &folded) -> FailureOr<std::optional<Value>> {
    if (n.opset >= 11) {
      if (input >= n.numInputs() || !n.hasInput(input))
        return std::optional<Value>();
      if (n.inputType(input).getRank() != 0 ||
          n.inputType(input).getElementType() != elem)
        return n.error() << "bound " << input << " must be a 0-dim " << elem
                         << ", got " << n.inputType(input);
      const HostTensor *c = n.constInput(input);
      folded = c ? c->asDouble(0) : NAN;
      return std::optional<Value>(n.operand(input));
    }
    if (!n.attr(attr))
      return std::optional<Value>();
    folded = n.attrFloat(attr, 0.0f);
    return std::optional<Value>(scalarConstant(n, elem, folded));
  };
  double lo = NAN, hi = NAN;
  auto low = bound(1, "min", lo);
  auto high = bound(2, "max", hi);
  if (failed(low) || failed(high))
    return failure();
  bool hasLo = low->has_value(), hasHi = high->has_value();
  const HostTensor *c = n.constInput(0);
  if (c && isSmall(t.getShape()) && (!hasLo || !std::isnan(lo)) &&
      (!hasHi || !std::isnan(hi)))
    return n.setConst(0, foldElementwise({c}, c->shape, c->elementType,
                                         [=](ArrayRef<double> a) {
                                           double x = a[0];
                                           if (hasLo)
                                             x = ::fsdp::um::binaryMax(x, lo);
                                           if (hasHi)
                                             x = ::fsdp::um::binaryMin(x, hi);
                                           return x;
                                         }));
  Value y = n.operand(0);
  if (hasLo)
    y = broadcastBinary<MaxOp>(n, y, **low);
  if (hasHi)
    y = broadcastBinary<MinOp>(n, y, **high);
  return n.setResult(0, y);
}

/// HardSigmoid: max(0, min(1, alpha * x + beta)) (PyTorch's hardsigmoid is
/// alpha = 1/6, beta = 1/2).
LogicalResult lowerHardSigmoid(NodeContext &n) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  RankedTensorType t = n.inputType(0);
  Type elem = t.getElementType();
  if (!isa<FloatType>(elem))
    return n.error() << "expects a float tensor, got " << t;
  double alpha = n.attrFloat("alpha", 0.2f), beta = n.attrFloat("beta", 0.5f);
  auto scalar = [&](double v) { return scalarConstant(n, elem, v); };
  Value y = broadcastBinary<MulOp>(n, n.operand(0), scalar(alpha));
  y = broadcastBinary<AddOp>(n, y, scalar(beta));
  y = broadcastBinary<MinOp>(n, y, scalar(1.0));
  return n.setResult(0, broadcastBinary<MaxOp>(n, y, scalar(0.0)));
}

/// An activation written from fsdp ops: folded with `fold` (in double)
/// when its input is a small constant, else built by `build` on the input
/// value and its element type. ONNX's float-only activations (LeakyRelu,
/// Elu, ...) check their input here.
LogicalResult activation(NodeContext &n, std::function<double(double)> fold,
                         std::function<Value(Value, Type)> buildOps) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  RankedTensorType t = n.inputType(0);
  if (!isa<FloatType>(t.getElementType()))
    return n.error() << "expects a float tensor, got " << t;
  if (const HostTensor *c = n.constInput(0); c && isSmall(t.getShape()))
    return n.setConst(
        0, foldElementwise({c}, t.getShape(), t.getElementType(),
                           [&](ArrayRef<double> a) { return fold(a[0]); }));
  return n.setResult(0, buildOps(n.operand(0), t.getElementType()));
}

/// x where x > 0, else `negative(x)` (LeakyRelu, Elu, Selu, Celu,
/// ThresholdedRelu's 0): PyTorch's forms, whose gradient at 0 is the
/// negative side's, as torch.where's is.
Value positiveElse(NodeContext &n, Value x, Type elem, double threshold,
                   Value negative) {
  auto t = cast<RankedTensorType>(x.getType());
  auto b = RankedTensorType::get(t.getShape(), n.b.getI1Type());
  Value above = build<GreaterOp>(
      n, b, {x, splatConstant(n, elem, t.getShape(), threshold)});
  return build<WhereOp>(n, t, {above, x, negative});
}

/// alpha * expm1(x / inner): the negative side of Elu (inner 1) and of
/// Celu (inner alpha).
Value scaledExpm1(NodeContext &n, Value x, Type elem, double alpha,
                  double inner) {
  Value v =
      inner == 1.0
          ? x
          : broadcastBinary<MulOp>(n, x, scalarConstant(n, elem, 1.0 / inner));
  v = build<Expm1Op>(n, x.getType(), {v});
  return broadcastBinary<MulOp>(n, v, scalarConstant(n, elem, alpha));
}

LogicalResult lowerLeakyRelu(NodeContext &n) {
  double alpha = n.attrFloat("alpha", 0.01f);
  return activation(
      n, [=](double x) { return x > 0 ? x : alpha * x; },
      [&](Value x, Type e) {
        return positiveElse(
            n, x, e, 0.0,
            broadcastBinary<MulOp>(n, x, scalarConstant(n, e, alpha)));
      });
}

/// Elu (gamma 1), Selu (gamma and alpha its fixed point's), Celu (alpha
/// inside the exponential too).
LogicalResult lowerElu(NodeContext &n, double alpha, double gamma, bool celu) {
  double inner = celu ? alpha : 1.0;
  return activation(
      n,
      [=](double x) {
        return gamma * (x > 0 ? x : alpha * std::expm1(x / inner));
      },
      [&](Value x, Type e) {
        Value y =
            positiveElse(n, x, e, 0.0, scaledExpm1(n, x, e, alpha, inner));
        return gamma == 1.0
                   ? y
                   : broadcastBinary<MulOp>(n, y, scalarConstant(n, e, gamma));
      });
}

/// ThresholdedRelu: x where x > alpha, else 0.
LogicalResult lowerThresholdedRelu(NodeContext &n) {
  double alpha = n.attrFloat("alpha", 1.0f);
  return activation(
      n, [=](double x) { return x > alpha ? x : 0.0; },
      [&](Value x, Type e) {
        return positiveElse(n, x, e, alpha, splatConstant(n, e, shapeOf(x), 0));
      });
}

/// IsNaN: x != x. IsInf: |x| == inf, or one sign of it
/// (detect_negative, detect_positive).
LogicalResult lowerIsNanOrInf(NodeContext &n, bool inf) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  RankedTensorType t = n.inputType(0);
  Type elem = t.getElementType();
  auto b = RankedTensorType::get(t.getShape(), n.b.getI1Type());
  bool neg = n.attrInt("detect_negative", 1),
       pos = n.attrInt("detect_positive", 1);
  auto test = [=](double x) {
    return double(inf ? (std::isinf(x) && (x > 0 ? pos : neg)) : std::isnan(x));
  };
  if (const HostTensor *c = n.constInput(0); c && isSmall(t.getShape()))
    return n.setConst(
        0, foldElementwise({c}, t.getShape(), n.b.getI1Type(),
                           [&](ArrayRef<double> a) { return test(a[0]); }));
  // (torch.onnx.export 1.13 writes isinf(x) as IsInf(Cast(x, double));
  // DemoteFloat64.cpp computes that double in float32, exactly here.)
  Value x = n.operand(0);
  if (!isa<FloatType>(elem)) // an integer is never NaN nor infinite
    return n.setResult(0, splatConstant(n, n.b.getI1Type(), t.getShape(), 0));
  if (!inf)
    return n.setResult(0, build<NotOp>(n, b, {build<EqualOp>(n, b, {x, x})}));
  auto equals = [&](Value v, double c) {
    return build<EqualOp>(n, b, {v, splatConstant(n, elem, t.getShape(), c)});
  };
  if (pos && neg)
    return n.setResult(0, equals(build<AbsOp>(n, t, {x}), INFINITY));
  if (!pos && !neg)
    return n.setResult(0, splatConstant(n, n.b.getI1Type(), t.getShape(), 0));
  return n.setResult(0, equals(x, pos ? INFINITY : -INFINITY));
}

/// Gelu (opset 20): PyTorch's GELU, exact or tanh.
LogicalResult lowerGelu(NodeContext &n) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  std::string approximate = n.attrString("approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    return n.error() << "approximate must be 'none' or 'tanh', got '"
                     << approximate << "'";
  RankedTensorType t = n.inputType(0);
  if (!isa<FloatType>(t.getElementType()))
    return n.error() << "expects a float tensor, got " << t;
  return n.setResult(
      0, build<GeluOp>(n, t, {n.operand(0)},
                       {n.b.getNamedAttr("approximate",
                                         n.b.getStringAttr(approximate))}));
}

/// Xor of two boolean tensors: not (a == b).
LogicalResult lowerXor(NodeContext &n) {
  if (failed(expectInputs(n, 2, 2)))
    return failure();
  if (!n.inputType(0).getElementType().isInteger(1) ||
      !n.inputType(1).getElementType().isInteger(1))
    return n.error() << "expects boolean operands, got " << n.inputType(0)
                     << " and " << n.inputType(1);
  return composedBinary(
      n, Type(),
      [](double a, double b) { return double((a != 0) != (b != 0)); },
      [&](Value a, Value b, RankedTensorType type) -> Value {
        return build<NotOp>(n, type, {build<EqualOp>(n, type, {a, b})});
      });
}

/// Mod of values known only at run time (lowerMod).
LogicalResult lowerModOfValues(NodeContext &n, bool cStyle) {
  SmallVector<ImportedValue> v{n.input(0), n.input(1)};
  if (failed(unifyConstants(n, v)))
    return failure();
  auto type = shape::binary(n.loc, v[0].type, v[1].type, Type());
  if (failed(type))
    return failure();
  Value a = operandOf(n, v, 0, 0), b = operandOf(n, v, 1, 1);
  Value q = build<DivOp>(n, *type, {a, b});
  if (isa<FloatType>(type->getElementType()))
    q = build<TruncOp>(n, *type, {q});
  Value r = build<SubOp>(n, *type, {a, build<MulOp>(n, *type, {q, b})});
  if (cStyle)
    return n.setResult(0, r);
  Type elem = type->getElementType();
  auto bools = RankedTensorType::get(type->getShape(), n.b.getI1Type());
  auto negative = [&](Value x) {
    auto t = cast<RankedTensorType>(x.getType());
    return build<LessOp>(n,
                         RankedTensorType::get(t.getShape(), n.b.getI1Type()),
                         {x, splatConstant(n, elem, {}, 0)});
  };
  Value nonzero = build<NotOp>(
      n, bools, {build<EqualOp>(n, bools, {r, splatConstant(n, elem, {}, 0)})});
  Value signsDiffer = build<NotOp>(
      n, bools, {build<EqualOp>(n, bools, {negative(r), negative(b)})});
  Value moves = build<AndOp>(n, bools, {nonzero, signsDiffer});
  return n.setResult(
      0, build<WhereOp>(n, *type, {moves, build<AddOp>(n, *type, {r, b}), r}));
}

/// Mod: fmod = 0 takes the divisor's sign (as Python's %), fmod = 1 the
/// dividend's (as C's fmod). Folded on constants (the exporter writes it for
/// index arithmetic on them: Swin's shifted-window mask); otherwise
/// a - trunc(a / b)·b, exact on int64 (fsdp.div of two i64 tensors
/// truncates toward zero), with fmod = 0's remainder moved by b where its
/// sign is not b's.
LogicalResult lowerMod(NodeContext &n) {
  if (failed(expectInputs(n, 2, 2)))
    return failure();
  bool cStyle = n.attrInt("fmod", 0) != 0;
  if (!cStyle && isa<FloatType>(n.inputType(0).getElementType()))
    return n.error() << "fmod = 0 on floats is invalid ONNX (fmod = 1 is)";
  const HostTensor *a = n.constInput(0), *b = n.constInput(1);
  if (!a || !b)
    return lowerModOfValues(n, cStyle);
  auto type = shape::binary(n.loc, a->type(), b->type(), Type());
  if (failed(type))
    return failure();
  if (!isSmall(type->getShape()))
    return n.error() << "folds up to " << kMaxFoldElements << " elements";
  if (!b->isFloat())
    for (int64_t i = 0; i < b->numel(); ++i)
      if (b->asInt(i) == 0)
        return n.error() << "divides by zero";
  if (!a->isFloat() && !b->isFloat())
    return n.setConst(0, foldElementwiseInts(
                             {a, b}, type->getShape(), type->getElementType(),
                             [cStyle](ArrayRef<int64_t> v) {
                               int64_t r = ::fsdp::um::wrapSub(
                                   v[0],
                                   ::fsdp::um::wrapMul(
                                       ::fsdp::um::truncDiv(v[0], v[1]), v[1]));
                               if (!cStyle && r != 0 && ((r < 0) != (v[1] < 0)))
                                 r += v[1];
                               return r;
                             }));
  return n.setConst(
      0, foldElementwise({a, b}, type->getShape(), type->getElementType(),
                         [cStyle](ArrayRef<double> v) {
                           double r = std::fmod(v[0], v[1]);
                           if (!cStyle && r != 0 && ((r < 0) != (v[1] < 0)))
                             r += v[1];
                           return r;
                         }));
}

} // namespace

void mlir::fsdp::onnx_ops::addElementwise(llvm::StringMap<LowerFn> &table) {
  addRows(
      table,
      {
  // The elementwise unary ops with an ONNX op (common/UnaryOps.def):
  // folded with the row's scalar in double when the input is constant.
#define FSDP_UNARY(Class, name, onnx, aten, floatOnly, scalar)                 \
  {onnx, [](NodeContext &n) {                                                  \
     return unary<Class##Op>(                                                  \
         n, [](double x) { return ::fsdp::um::unary##Class(x); }, floatOnly);  \
   }},
#include "common/UnaryOps.def"
#undef FSDP_UNARY
  // The elementwise binary ops with an ONNX op (common/BinaryOps.def):
  // folded when both inputs are constant, with the row's scalar in double,
  // or its integer column in int64 where both are integers.
#define FSDP_BINARY(Class, name, onnx, kind, scalar, integer)                  \
  {onnx, [](NodeContext &n) {                                                  \
     return binary<Class##Op>(                                                 \
         n,                                                                    \
         [](double a, double b) { return ::fsdp::um::binary##Class(a, b); },   \
         Kind::kind, ::fsdp::um::exact##Class,                                 \
         std::string_view(name) == "div");                                     \
   }},
#include "common/BinaryOps.def"
#undef FSDP_BINARY
          {"Pow", lowerPow},
          {"Clip", lowerClip},
          {"HardSigmoid", lowerHardSigmoid},
          {"LeakyRelu", lowerLeakyRelu},
          {"Elu",
           [](NodeContext &n) {
             return lowerElu(n, n.attrFloat("alpha", 1.0f), 1.0, false);
           }},
          {"Selu",
           [](NodeContext &n) {
             return lowerElu(
                 n, n.attrFloat("alpha", 1.67326319217681884765625f),
                 n.attrFloat("gamma", 1.05070102214813232421875f), false);
           }},
          {"Celu",
           [](NodeContext &n) {
             return lowerElu(n, n.attrFloat("alpha", 1.0f), 1.0, true);
           }},
          {"ThresholdedRelu", lowerThresholdedRelu},
          {"Tan",
           [](NodeContext &n) {
             return activation(
                 n, [](double x) { return std::tan(x); },
                 [&](Value x, Type) {
                   return build<DivOp>(n, x.getType(),
                                       {build<SinOp>(n, x.getType(), {x}),
                                        build<CosOp>(n, x.getType(), {x})});
                 });
           }},
          {"IsNaN", [](NodeContext &n) { return lowerIsNanOrInf(n, false); }},
          {"IsInf", [](NodeContext &n) { return lowerIsNanOrInf(n, true); }},
          {"Gelu", lowerGelu},
          {"Mod", lowerMod},
          {"Xor", lowerXor},
          {"Max",
           [](NodeContext &n) {
             return variadic<MaxOp>(n, ::fsdp::um::binaryMax<double>);
           }},
          {"Min",
           [](NodeContext &n) {
             return variadic<MinOp>(n, ::fsdp::um::binaryMin<double>);
           }},
          {"Not",
           [](NodeContext &n) {
             if (failed(expectInputs(n, 1, 1)))
               return failure();
             if (!n.inputType(0).getElementType().isInteger(1))
               return LogicalResult(n.error() << "expects a boolean tensor");
             return unary<NotOp>(
                 n, [](double a) { return double(!a); }, false);
           }},
          {"GreaterOrEqual",
           [](NodeContext &n) { return lowerOrEqual(n, /*greater=*/true); }},
          {"LessOrEqual",
           [](NodeContext &n) { return lowerOrEqual(n, /*greater=*/false); }},
          {"Where", lowerWhere},
          {"Cast", lowerCast},
      });
}
