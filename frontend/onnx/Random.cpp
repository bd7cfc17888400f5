//===- Random.cpp - ONNX's random ops, drawn in the plan -----------------===//
//
// RandomUniform(Like), RandomNormal(Like), Bernoulli and Multinomial, as
// torch.onnx.export writes torch.rand(_like), randn(_like), bernoulli and
// multinomial (with replacement) in training mode: each over fsdp.uniform
// (Philox keyed by the node's seed, the step and each element's index:
// common/Philox.h), drawn anew at every step, as the tracer writes them
// (python/fsdp_trace/decompose/draws.py). The normal is Box-Muller over two
// draws: sqrt(-2 ln(1 - u1)) cos(2 pi u2).
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/OnnxOpsSupport.h"

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::onnx_ops;

namespace {

/// The seed of draw `which` of node `n`: its position in the graph and the
/// exporter's `seed` attribute mixed apart from Dropout's seeds.
uint64_t drawSeed(NodeContext &n, uint64_t which) {
  // (A float in ONNX: a NaN or huge one, in a hostile file, keys as 0.)
  float f = n.attrFloat("seed", 0.0f);
  uint64_t attr =
      std::isfinite(f) && std::fabs(f) < 9e18f ? (uint64_t)(int64_t)f : 0;
  uint64_t x =
      (attr * 0x9E3779B1u + (uint64_t)n.index) * 0xBF58476D1CE4E5B9ull + which +
      1;
  return (x ^ (x >> 31)) % (uint64_t(1) << 62);
}

/// The output type: the `dtype` attribute's, else `like`'s element type, of
/// `shape`. A float; f64 too, as torch 1.13's exporter writes
/// torch.normal(0.0, 2.0, size) (DemoteFloat64.cpp computes it in f32).
FailureOr<RankedTensorType> drawType(NodeContext &n, ArrayRef<int64_t> shape,
                                     Type like) {
  Type elem = like;
  if (n.attr("dtype"))
    elem = onnxElementType(n.b.getContext(), (int)n.attrInt("dtype", 1));
  if (!elem || !isa<FloatType>(elem)) {
    n.error() << "draws of " << elem << " are not supported (a float's are)";
    return failure();
  }
  for (int64_t d : shape)
    if (d < 0) {
      n.error() << "a draw's shape has a negative extent " << d;
      return failure();
    }
  return RankedTensorType::get(shape, elem);
}

Value uniform(NodeContext &n, RankedTensorType type, uint64_t which) {
  return build<UniformOp>(
      n, type, {},
      {n.b.getNamedAttr("seed", n.b.getI64IntegerAttr(drawSeed(n, which)))});
}

/// a·x + b, elementwise.
Value affine(NodeContext &n, Value x, double a, double b) {
  Type elem = cast<RankedTensorType>(x.getType()).getElementType();
  if (a != 1.0)
    x = broadcastBinary<MulOp>(n, x, scalarConstant(n, elem, a));
  if (b != 0.0)
    x = broadcastBinary<AddOp>(n, x, scalarConstant(n, elem, b));
  return x;
}

Value standardNormal(NodeContext &n, RankedTensorType type) {
  Value u1 = uniform(n, type, 0), u2 = uniform(n, type, 1);
  Value ln = build<Log1pOp>(n, type, {build<NegOp>(n, type, {u1})});
  Value radius = build<SqrtOp>(n, type, {affine(n, ln, -2.0, 0.0)});
  Value angle = build<CosOp>(n, type, {affine(n, u2, 2 * M_PI, 0.0)});
  return build<MulOp>(n, type, {radius, angle});
}

FailureOr<RankedTensorType> likeType(NodeContext &n) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  return drawType(n, n.inputType(0).getShape(),
                  n.inputType(0).getElementType());
}

FailureOr<RankedTensorType> shapedType(NodeContext &n) {
  if (n.numInputs() != 0) {
    n.error() << "expects no inputs, got " << n.numInputs();
    return failure();
  }
  auto shape = n.attrInts("shape");
  if (!shape) {
    n.error() << "has no shape attribute";
    return failure();
  }
  return drawType(n, *shape, n.b.getF32Type());
}

LogicalResult lowerUniform(NodeContext &n, FailureOr<RankedTensorType> type) {
  if (failed(type))
    return failure();
  double low = n.attrFloat("low", 0.0f), high = n.attrFloat("high", 1.0f);
  if (!(low <= high) || !std::isfinite(high - low))
    return n.error() << "low " << low << " and high " << high
                     << " are no finite range";
  return n.setResult(0, affine(n, uniform(n, *type, 0), high - low, low));
}

LogicalResult lowerNormal(NodeContext &n, FailureOr<RankedTensorType> type) {
  if (failed(type))
    return failure();
  double mean = n.attrFloat("mean", 0.0f), scale = n.attrFloat("scale", 1.0f);
  if (!std::isfinite(mean) || !std::isfinite(scale))
    return n.error() << "mean " << mean << " and scale " << scale
                     << " must be finite";
  return n.setResult(0, affine(n, standardNormal(n, *type), scale, mean));
}

/// Bernoulli(p): 1 where a draw is below p, in the `dtype` attribute's
/// type (p's by default).
LogicalResult lowerBernoulli(NodeContext &n) {
  auto type = likeType(n);
  if (failed(type))
    return failure();
  RankedTensorType p = n.inputType(0);
  if (!isa<FloatType>(p.getElementType()))
    return n.error() << "probabilities of " << p << " (a float tensor's are)";
  Value u =
      uniform(n, RankedTensorType::get(p.getShape(), p.getElementType()), 0);
  auto boolType = RankedTensorType::get(p.getShape(), n.b.getI1Type());
  Value below = build<LessOp>(n, boolType, {u, n.operand(0)});
  return n.setResult(0, build<CastOp>(n, *type, {below}));
}

/// Multinomial(x [batch, classes] of unnormalized log-probabilities;
/// sample_size, dtype): draws with replacement, as torch.multinomial's
/// export (Log, then Multinomial). Each an inverse-CDF lookup, as the
/// tracer's: the number of running sums of exp(x - max) at or below
/// U·total, kept at the last class of nonzero weight. No gradient.
LogicalResult lowerMultinomial(NodeContext &n) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  RankedTensorType t = n.inputType(0);
  // (torch 1.13's exporter passes a 1-D torch.multinomial's weights as
  // they are: one row, and a 1-D result.)
  if ((t.getRank() != 2 && t.getRank() != 1) ||
      !isa<FloatType>(t.getElementType()))
    return n.error() << "expects [batch, classes] floats, got " << t;
  bool row = t.getRank() == 1;
  int64_t b = row ? 1 : t.getDimSize(0), c = t.getDimSize(t.getRank() - 1);
  int64_t samples = n.attrInt("sample_size", 1);
  if (samples < 1 || c < 1)
    return n.error() << "draws " << samples << " of " << c << " classes";
  int dtype = (int)n.attrInt("dtype", 6);
  if (dtype != 6 && dtype != 7)
    return n.error() << "dtype " << dtype << " (int32, 6, or int64, 7)";
  Type f32 = n.b.getF32Type();
  auto ft = RankedTensorType::get({b, c}, f32);
  Value x = reshapeValue(n, n.operand(0), {b, c});
  if (t.getElementType() != f32)
    x = build<CastOp>(n, ft, {x});
  x = build<StopGradientOp>(n, ft, {x});
  auto keep = [&](ArrayRef<int64_t> axes) {
    return SmallVector<NamedAttribute>{
        n.b.getNamedAttr("axes", n.b.getDenseI64ArrayAttr(axes)),
        n.b.getNamedAttr("keepdims", n.b.getBoolAttr(true))};
  };
  auto colType = RankedTensorType::get({b, 1}, f32);
  Value top = build<ReduceMaxOp>(n, colType, {x}, keep({1}));
  // A row of -inf alone (no weight) keeps its maximum finite.
  auto colBools = RankedTensorType::get({b, 1}, n.b.getI1Type());
  Value finite = build<EqualOp>(
      n, colBools,
      {build<SubOp>(n, colType, {top, top}), splatConstant(n, f32, {}, 0)});
  top = build<WhereOp>(n, colType, {finite, top, splatConstant(n, f32, {}, 0)});
  Value w = build<ExpOp>(n, ft, {broadcastBinary<SubOp>(n, x, top)});
  // Running sums along the classes (Hillis-Steele: log2(classes) adds).
  Value cdf = w;
  for (int64_t k = 1; k < c; k *= 2)
    cdf = build<AddOp>(n, ft,
                       {cdf, concatAxis(n,
                                        {splatConstant(n, f32, {b, k}, 0),
                                         sliceAxis(n, cdf, 1, 0, c - k)},
                                        1)});
  Value total = reshapeValue(n, sliceAxis(n, cdf, 1, c - 1, c), {b, 1, 1});
  auto drawn = RankedTensorType::get({b, samples, 1}, f32);
  Value at = broadcastBinary<MulOp>(n, uniform(n, drawn, 0), total);
  auto cube = RankedTensorType::get({b, samples, c}, n.b.getI1Type());
  Value above =
      build<GreaterOp>(n, cube, {reshapeValue(n, cdf, {b, 1, c}), at});
  Value count = build<ReduceSumOp>(
      n, RankedTensorType::get({b, samples}, f32),
      {build<CastOp>(n, RankedTensorType::get({b, samples, c}, f32), {above})},
      {n.b.getNamedAttr("axes", n.b.getDenseI64ArrayAttr({2})),
       n.b.getNamedAttr("keepdims", n.b.getBoolAttr(false))});
  count = broadcastBinary<SubOp>(n, scalarConstant(n, f32, (double)c), count);
  std::vector<float> positions(c);
  for (int64_t i = 0; i < c; ++i)
    positions[i] = (float)i;
  Value position = ConstantOp::create(
      n.b, n.loc,
      DenseElementsAttr::get(RankedTensorType::get({1, c}, f32),
                             ArrayRef<float>(positions)));
  auto bools = RankedTensorType::get({b, c}, n.b.getI1Type());
  Value weighted =
      build<GreaterOp>(n, bools, {w, splatConstant(n, f32, {}, 0)});
  Value last = build<ReduceMaxOp>(
      n, colType,
      {build<WhereOp>(n, ft,
                      {weighted, position, splatConstant(n, f32, {}, 0)})},
      keep({1}));
  Value index = broadcastBinary<MinOp>(n, count, last);
  Type out = dtype == 7 ? n.b.getI64Type() : n.b.getI32Type();
  Value y = build<CastOp>(n, RankedTensorType::get({b, samples}, out), {index});
  return n.setResult(0, row ? reshapeValue(n, y, {samples}) : y);
}

} // namespace

void mlir::fsdp::onnx_ops::addRandom(llvm::StringMap<LowerFn> &table) {
  addRows(table,
          {
              {"RandomUniform",
               [](NodeContext &n) { return lowerUniform(n, shapedType(n)); }},
              {"RandomUniformLike",
               [](NodeContext &n) { return lowerUniform(n, likeType(n)); }},
              {"RandomNormal",
               [](NodeContext &n) { return lowerNormal(n, shapedType(n)); }},
              {"RandomNormalLike",
               [](NodeContext &n) { return lowerNormal(n, likeType(n)); }},
              {"Bernoulli", lowerBernoulli},
              {"Multinomial", lowerMultinomial},
          });
}
