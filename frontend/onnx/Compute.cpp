//===- Compute.cpp - Compute (ONNX) ---------------------------------------===//
//
// Products, reductions, norms, convolutions, pools, losses: their lowerings
// from ONNX and their rows of the importer's table (frontend/OnnxOps.cpp
// gathers the families).
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/OnnxOpsSupport.h"
#include "common/ConvGeometry.h"

#include "llvm/ADT/StringExtras.h"

#include <map>

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::onnx_ops;

namespace {

//===----------------------------------------------------------------------===//
// Compute
//===----------------------------------------------------------------------===//

template <typename OpTy> LogicalResult softmaxLike(NodeContext &n) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  RankedTensorType t = n.inputType(0);
  if (!isa<FloatType>(t.getElementType()))
    return n.error() << "expects a float tensor, got " << t;
  auto axis = axisOf(n, n.attrInt("axis", -1), t.getRank());
  if (failed(axis))
    return failure();
  return n.setResult(
      0, build<OpTy>(n, t, {n.operand(0)}, {i64Attr(n, "axis", *axis)}));
}

LogicalResult lowerMatMul(NodeContext &n) {
  if (failed(expectInputs(n, 2, 2)))
    return failure();
  RankedTensorType a = n.inputType(0), b = n.inputType(1);
  if (a.getRank() < 2 || b.getRank() < 2)
    return n.error() << "1-D MatMul operands are not supported (" << a << ", "
                     << b << ")";
  auto type = shape::matmul(n.loc, a, b, false, false);
  if (failed(type))
    return failure();
  return n.setResult(0,
                     build<MatmulOp>(n, *type, {n.operand(0), n.operand(1)}));
}

LogicalResult lowerGemm(NodeContext &n) {
  if (failed(expectInputs(n, 2, 3)))
    return failure();
  bool ta = n.attrInt("transA", 0), tb = n.attrInt("transB", 0);
  RankedTensorType c = n.hasInput(2) ? n.inputType(2) : RankedTensorType();
  auto type = shape::gemm(n.loc, n.inputType(0), n.inputType(1), c, ta, tb);
  if (failed(type))
    return failure();
  SmallVector<Value> operands{n.operand(0), n.operand(1)};
  if (c)
    operands.push_back(n.operand(2));
  return n.setResult(
      0,
      build<GemmOp>(n, *type, operands,
                    {n.b.getNamedAttr(
                         "alpha", n.b.getF32FloatAttr(n.attrFloat("alpha", 1))),
                     n.b.getNamedAttr(
                         "beta", n.b.getF32FloatAttr(n.attrFloat("beta", 1))),
                     boolAttr(n, "trans_a", ta), boolAttr(n, "trans_b", tb)}));
}

/// Einsum's equation parsed: each operand's labels (an ellipsis spelled
/// out as labels of its own, '0' upwards, right-aligned), and the output's.
struct EinsumSpec {
  SmallVector<std::string> inputs;
  std::string output;
};

FailureOr<EinsumSpec> parseEinsum(NodeContext &n, StringRef equation,
                                  ArrayRef<RankedTensorType> types) {
  std::string eq;
  for (char ch : equation)
    if (ch != ' ')
      eq += ch;
  StringRef lhs = eq, rhs;
  bool explicitOutput = false;
  if (size_t arrow = StringRef(eq).find("->"); arrow != StringRef::npos) {
    lhs = StringRef(eq).take_front(arrow);
    rhs = StringRef(eq).drop_front(arrow + 2);
    explicitOutput = true;
  }
  SmallVector<StringRef> terms;
  lhs.split(terms, ',');
  if (terms.size() != types.size())
    return n.error() << "equation '" << equation << "' names " << terms.size()
                     << " operand(s), the node has " << types.size();
  EinsumSpec spec;
  int64_t ellipsisRank = -1;
  auto expand = [&](StringRef term, int64_t rank) -> FailureOr<std::string> {
    std::string labels;
    size_t dots = term.find("...");
    int64_t named = (int64_t)term.size() - (dots == StringRef::npos ? 0 : 3);
    for (char ch : term)
      if (ch != '.' && !llvm::isAlpha((unsigned char)ch))
        return n.error() << "equation '" << equation << "': label '" << ch
                         << "' is not a letter";
    if (dots == StringRef::npos) {
      if (rank >= 0 && named != rank)
        return n.error() << "equation '" << equation << "': '" << term
                         << "' has " << named << " labels for rank " << rank;
      return term.str();
    }
    int64_t extra = rank >= 0 ? rank - named : ellipsisRank;
    if (extra < 0)
      return n.error() << "equation '" << equation << "': '" << term
                       << "' has more labels than its operand's rank";
    labels = term.take_front(dots).str();
    for (int64_t i = 0; i < extra; ++i)
      labels += (char)('0' + (ellipsisRank - extra) + i);
    labels += term.drop_front(dots + 3).str();
    return labels;
  };
  // The ellipsis's labels are right-aligned across the operands: its
  // widest use first.
  for (auto [term, t] : llvm::zip(terms, types))
    if (term.contains("..."))
      ellipsisRank = std::max<int64_t>(
          ellipsisRank, t.getRank() - ((int64_t)term.size() - 3));
  ellipsisRank = std::max<int64_t>(ellipsisRank, 0);
  for (auto [term, t] : llvm::zip(terms, types)) {
    auto labels = expand(term, t.getRank());
    if (failed(labels))
      return failure();
    spec.inputs.push_back(*labels);
  }
  if (explicitOutput) {
    auto labels = expand(rhs, -1);
    if (failed(labels))
      return failure();
    spec.output = *labels;
  } else {
    // Implicit: the ellipsis, then each letter used once, alphabetically.
    std::map<char, int> uses;
    for (const std::string &in : spec.inputs)
      for (char ch : in)
        ++uses[ch];
    for (auto [ch, count] : uses)
      if (llvm::isDigit((unsigned char)ch))
        spec.output += ch;
    for (auto [ch, count] : uses)
      if (llvm::isAlpha((unsigned char)ch) && count == 1)
        spec.output += ch;
  }
  for (const std::string &in : spec.inputs)
    for (size_t i = 0; i < in.size(); ++i)
      if (in.find(in[i], i + 1) != std::string::npos)
        return n.error() << "equation '" << equation << "': label '" << in[i]
                         << "' repeats within an operand (a diagonal), which "
                            "is not supported";
  return spec;
}

/// v transposed so its labels read `order` (a permutation of `labels`).
Value permuteLabels(NodeContext &n, Value v, StringRef labels,
                    StringRef order) {
  SmallVector<int64_t> perm;
  for (char ch : order)
    perm.push_back(labels.find(ch));
  bool identity = true;
  for (auto [i, p] : llvm::enumerate(perm))
    identity &= (int64_t)i == p;
  return identity ? v : transposeValue(n, v, perm);
}

/// Einsum of one or two operands: labels found in one operand alone and
/// not in the output summed first; then (two operands) the batch labels
/// (in both and in the output), each operand's own output labels and the
/// contracted ones (in both, not in the output) arranged as [B, M, K] and
/// [B, K, N] for one batched matmul, whose [B, M, N] is transposed to the
/// output's order. A label repeated within an operand (a diagonal) is
/// refused.
LogicalResult lowerEinsum(NodeContext &n) {
  if (failed(allInputs(n, 1)))
    return failure();
  if (n.numInputs() > 2)
    return n.error() << "einsum of " << n.numInputs()
                     << " operands is not supported (one or two are)";
  SmallVector<RankedTensorType> types;
  for (int i = 0; i < n.numInputs(); ++i) {
    types.push_back(n.inputType(i));
    if (!isa<FloatType>(types.back().getElementType()) ||
        types.back().getElementType() != types[0].getElementType())
      return n.error() << "expects float operands of one type";
  }
  auto spec = parseEinsum(n, n.attrString("equation", ""), types);
  if (failed(spec))
    return failure();
  std::map<char, int64_t> size;
  SmallVector<Value> values;
  SmallVector<std::string> labels;
  for (int i = 0; i < n.numInputs(); ++i) {
    for (auto [k, ch] : llvm::enumerate(spec->inputs[i])) {
      int64_t e = types[i].getDimSize(k);
      auto [it, fresh] = size.emplace(ch, e);
      if (!fresh && it->second != e)
        return n.error() << "label '" << ch << "' has extents " << it->second
                         << " and " << e << " (broadcasting is not supported)";
    }
    values.push_back(n.operand(i));
    labels.push_back(spec->inputs[i]);
  }
  const std::string &out = spec->output;
  for (char ch : out)
    if (!size.count(ch))
      return n.error() << "output label '" << ch << "' names no operand axis";
  Type elem = types[0].getElementType();
  // Labels one operand alone has and the output lacks: summed away first.
  for (size_t i = 0; i < values.size(); ++i) {
    SmallVector<int64_t> axes;
    std::string kept;
    for (auto [k, ch] : llvm::enumerate(labels[i])) {
      bool elsewhere = out.find(ch) != std::string::npos ||
                       (values.size() == 2 &&
                        labels[1 - i].find(ch) != std::string::npos);
      if (elsewhere)
        kept += ch;
      else
        axes.push_back(k);
    }
    if (axes.empty())
      continue;
    auto rt = shape::reduce(n.loc, cast<RankedTensorType>(values[i].getType()),
                            axes, false);
    values[i] = build<ReduceSumOp>(n, *rt, {values[i]},
                                   {arrayAttr(n, "axes", axes),
                                    boolAttr(n, "keepdims", false)});
    labels[i] = kept;
  }
  if (values.size() == 1)
    return n.setResult(0, permuteLabels(n, values[0], labels[0], out));
  std::string batch, free0, free1, contracted;
  for (char ch : labels[0]) {
    bool inOther = labels[1].find(ch) != std::string::npos,
         inOut = out.find(ch) != std::string::npos;
    (inOther ? (inOut ? batch : contracted) : free0) += ch;
  }
  for (char ch : labels[1])
    if (labels[0].find(ch) == std::string::npos)
      free1 += ch;
  auto product = [&](StringRef ls) {
    int64_t p = 1;
    for (char ch : ls)
      p *= size[ch];
    return p;
  };
  int64_t B = product(batch), M = product(free0), K = product(contracted),
          N = product(free1);
  Value a = reshapeValue(
      n, permuteLabels(n, values[0], labels[0], batch + free0 + contracted),
      {B, M, K});
  Value b = reshapeValue(
      n, permuteLabels(n, values[1], labels[1], batch + contracted + free1),
      {B, K, N});
  Value y = build<MatmulOp>(n, RankedTensorType::get({B, M, N}, elem), {a, b});
  std::string have = batch + free0 + free1;
  SmallVector<int64_t> dims;
  for (char ch : have)
    dims.push_back(size[ch]);
  y = reshapeValue(n, y, dims);
  return n.setResult(0, permuteLabels(n, y, have, out));
}

/// What a reduction reduces: the input, its square (ReduceSumSquare), or
/// its square with the root of the sum taken (ReduceL2: weight_norm's
/// norm as torch.onnx.export writes it); its magnitude (ReduceL1); its
/// negation, the result negated (ReduceMin as the maximum of -x); the
/// sum's logarithm (ReduceLogSum); exp shifted by the maximum
/// (ReduceLogSumExp); the product (ReduceProd: torch.std's and var's count
/// of elements, a product of the shape).
enum class Of { Input, Square, L2, Abs, Negated, Log, LogSumExp, Product };

/// The product of `x` along each of `axes` (kept with extent 1): halves
/// multiplied pairwise until one element is left (an odd one passes
/// through), so a zero's gradient is the product of the others, as
/// PyTorch's prod has it.
Value productAlong(NodeContext &n, Value x, ArrayRef<int64_t> axes) {
  for (int64_t axis : axes) {
    while (shapeOf(x)[axis] > 1) {
      int64_t len = shapeOf(x)[axis], half = len / 2;
      Value lo = sliceAxis(n, x, axis, 0, half),
            hi = sliceAxis(n, x, axis, half, 2 * half);
      Value pairs = build<MulOp>(n, lo.getType(), {lo, hi});
      x = len % 2 ? concatAxis(n, {pairs, sliceAxis(n, x, axis, len - 1, len)},
                               axis)
                  : pairs;
    }
  }
  return x;
}

template <typename OpTy>
LogicalResult reduction(NodeContext &n, int kind, int64_t axesInputOpset,
                        Of of = Of::Input) {
  if (failed(expectInputs(n, 1, 2)))
    return failure();
  RankedTensorType t = n.inputType(0);
  auto axesOrNone = axesOf(n, 1, n.opset >= axesInputOpset);
  if (failed(axesOrNone))
    return failure();
  SmallVector<int64_t> axes;
  if (*axesOrNone && !(*axesOrNone)->empty()) {
    for (int64_t a : **axesOrNone) {
      auto ax = axisOf(n, a, t.getRank());
      if (failed(ax))
        return failure();
      if (llvm::is_contained(axes, *ax))
        return n.error() << "repeats axis " << a;
      axes.push_back(*ax);
    }
    llvm::sort(axes);
  } else if (n.attrInt("noop_with_empty_axes", 0)) {
    if (of != Of::Input)
      return n.error() << "noop_with_empty_axes is not supported here";
    return n.setAlias(0, n.input(0));
  } else {
    for (int64_t i = 0; i < t.getRank(); ++i)
      axes.push_back(i);
  }
  bool keepdims = n.attrInt("keepdims", 1);
  auto type = shape::reduce(n.loc, t, axes, keepdims);
  if (failed(type))
    return failure();
  bool floatOnly = of != Of::Input && of != Of::Negated && of != Of::Product;
  if (floatOnly && !isa<FloatType>(t.getElementType()))
    return n.error() << "expects a float tensor, got " << t;
  if (const HostTensor *c = n.constInput(0)) {
    if (of == Of::Input || of == Of::Negated || of == Of::Product)
      return n.setConst(0, foldReduce(*c, axes, keepdims,
                                      of == Of::Negated   ? 3
                                      : of == Of::Product ? 4
                                                          : kind));
    if (of == Of::Abs || of == Of::Log || of == Of::LogSumExp) {
      auto pre = [of](double v) {
        return of == Of::Abs ? std::fabs(v) : of == Of::Log ? v : std::exp(v);
      };
      HostTensor sum = foldReduce(
          foldElementwise({c}, c->shape, c->elementType,
                          [&](ArrayRef<double> a) { return pre(a[0]); }),
          axes, keepdims, 0);
      if (of != Of::Abs)
        sum = foldElementwise({&sum}, sum.shape, sum.elementType,
                              [](ArrayRef<double> a) { return std::log(a[0]); });
      return n.setConst(0, sum);
    }
    HostTensor square = foldElementwise(
        {c}, c->shape, c->elementType,
        [](ArrayRef<double> a) { return a[0] * a[0]; });
    HostTensor sum = foldReduce(square, axes, keepdims, kind);
    if (of == Of::L2)
      sum = foldElementwise({&sum}, sum.shape, sum.elementType,
                            [](ArrayRef<double> a) { return std::sqrt(a[0]); });
    return n.setConst(0, sum);
  }
  Value x = n.operand(0);
  auto reduce = [&](auto op, Value v, bool keep) -> Value {
    using Op = decltype(op);
    auto rt = shape::reduce(n.loc, cast<RankedTensorType>(v.getType()), axes,
                            keep);
    return build<Op>(n, *rt, {v},
                     {arrayAttr(n, "axes", axes), boolAttr(n, "keepdims", keep)});
  };
  Value y;
  switch (of) {
  case Of::Square:
  case Of::L2:
    y = reduce(OpTy(), build<MulOp>(n, t, {x, x}), keepdims);
    if (of == Of::L2)
      y = build<SqrtOp>(n, *type, {y});
    break;
  case Of::Abs:
    y = reduce(OpTy(), build<AbsOp>(n, t, {x}), keepdims);
    break;
  case Of::Negated: { // min(x) = -max(-x); 0 - x on integers
    auto negate = [&](Value v) {
      return isa<FloatType>(t.getElementType())
                 ? build<NegOp>(n, v.getType(), {v})
                 : broadcastBinary<SubOp>(
                       n, scalarConstant(n, t.getElementType(), 0), v);
    };
    y = negate(reduce(OpTy(), negate(x), keepdims));
    break;
  }
  case Of::Log:
    y = build<LogOp>(n, *type, {reduce(OpTy(), x, keepdims)});
    break;
  case Of::LogSumExp: {
    // m + log(sum(exp(x - m))), m the maximum with a gradient stop (the
    // gradient is softmax(x) either way) and 0 where it is infinite, as
    // PyTorch's logsumexp shifts.
    Value m = reduce(ReduceMaxOp(), x, true);
    auto mt = cast<RankedTensorType>(m.getType());
    auto bt = RankedTensorType::get(mt.getShape(), n.b.getI1Type());
    Type e = t.getElementType();
    Value infinite = build<EqualOp>(
        n, bt, {build<AbsOp>(n, mt, {m}), splatConstant(n, e, mt.getShape(), INFINITY)});
    m = build<WhereOp>(n, mt, {infinite, splatConstant(n, e, mt.getShape(), 0), m});
    m = build<StopGradientOp>(n, mt, {m});
    Value s = reduce(ReduceSumOp(),
                     build<ExpOp>(n, t, {broadcastBinary<SubOp>(n, x, m)}), true);
    y = broadcastBinary<AddOp>(n, build<LogOp>(n, s.getType(), {s}), m);
    if (!keepdims)
      y = build<ReshapeOp>(n, *type, {y});
    break;
  }
  case Of::Product:
    y = productAlong(n, x, axes);
    if (!keepdims)
      y = build<ReshapeOp>(n, *type, {y});
    break;
  case Of::Input:
    y = reduce(OpTy(), x, keepdims);
    break;
  }
  return n.setResult(0, y);
}

LogicalResult lowerLayerNorm(NodeContext &n) {
  if (failed(expectInputs(n, 2, 3)))
    return failure();
  if (failed(
          n.setUnsupported(1, "LayerNormalization's mean is not imported")) ||
      failed(n.setUnsupported(2, "LayerNormalization's inverse standard "
                                 "deviation is not imported")))
    return failure();
  RankedTensorType x = n.inputType(0);
  auto axis = axisOf(n, n.attrInt("axis", -1), x.getRank());
  if (failed(axis))
    return failure();
  RankedTensorType bias = n.hasInput(2) ? n.inputType(2) : RankedTensorType();
  if (failed(shape::checkLayerNorm(n.loc, x, n.inputType(1), bias, *axis)))
    return failure();
  SmallVector<Value> operands{n.operand(0), n.operand(1)};
  if (bias)
    operands.push_back(n.operand(2));
  return n.setResult(
      0, build<LayerNormOp>(
             n, x, operands,
             {i64Attr(n, "axis", *axis),
              n.b.getNamedAttr("epsilon", n.b.getF32FloatAttr(n.attrFloat(
                                              "epsilon", 1e-5f)))}));
}

/// InstanceNormalization(x [N, C, D...], scale [C], B [C]): each (n, c)
/// normalised over its D... elements, as one layer norm over [N, C, prod D]
/// with unit scale, then the per-channel affine (GroupNorm with one group a
/// channel exports as this; so do wav2vec2's and Conv-TasNet's norms).
LogicalResult lowerInstanceNorm(NodeContext &n) {
  if (failed(expectInputs(n, 3, 3)))
    return failure();
  RankedTensorType x = n.inputType(0);
  Type elem = x.getElementType();
  if (!isa<FloatType>(elem) || x.getRank() < 3)
    return n.error() << "InstanceNormalization of " << x
                     << " is not supported (float [N, C, D...] is)";
  int64_t channels = x.getDimSize(1), spatial = 1;
  for (int64_t d = 2; d < x.getRank(); ++d)
    spatial *= x.getDimSize(d);
  auto perChannel = RankedTensorType::get({channels}, elem);
  for (int i : {1, 2})
    if (n.inputType(i) != perChannel)
      return n.error() << "input " << i << " must be " << perChannel
                       << ", got " << n.inputType(i);
  auto flat = RankedTensorType::get({x.getDimSize(0), channels, spatial}, elem);
  Value y = build<ReshapeOp>(n, flat, {n.operand(0)});
  Value ones = splatConstant(n, elem, {spatial}, 1.0);
  y = build<LayerNormOp>(
      n, flat, {y, ones},
      {i64Attr(n, "axis", 2),
       n.b.getNamedAttr("epsilon",
                        n.b.getF32FloatAttr(n.attrFloat("epsilon", 1e-5f)))});
  y = build<ReshapeOp>(n, x, {y});
  SmallVector<int64_t> channelShape(x.getRank() - 1, 1);
  channelShape[0] = channels;
  auto column = RankedTensorType::get(channelShape, elem);
  y = broadcastBinary<MulOp>(n, y, build<ReshapeOp>(n, column, {n.operand(1)}));
  return n.setResult(
      0, broadcastBinary<AddOp>(n, y, build<ReshapeOp>(n, column, {n.operand(2)})));
}

/// Explicit pads from ONNX's auto_pad (NOTSET: `pads` as given) for
/// windows of `kernel` (dilated) along the spatial axes of `x`.
FailureOr<SmallVector<int64_t>> windowPads(NodeContext &n, StringRef op,
                                           RankedTensorType x,
                                           ArrayRef<int64_t> kernel,
                                           ArrayRef<int64_t> strides,
                                           ArrayRef<int64_t> dilations) {
  int64_t spatial = x.getRank() - 2;
  SmallVector<int64_t> pads =
      n.attrInts("pads").value_or(SmallVector<int64_t>(2 * spatial, 0));
  std::string autoPad = n.attrString("auto_pad", "NOTSET");
  if (autoPad == "VALID")
    return SmallVector<int64_t>(2 * spatial, 0);
  if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    // Output extent ceil(S / stride); the odd pad goes after (SAME_UPPER)
    // or before (SAME_LOWER).
    pads.assign(2 * spatial, 0);
    for (int64_t d = 0; d < spatial; ++d) {
      int64_t in = x.getDimSize(2 + d), st = std::max<int64_t>(strides[d], 1);
      int64_t k = (kernel[d] - 1) * dilations[d] + 1;
      int64_t total =
          std::max<int64_t>(((in + st - 1) / st - 1) * st + k - in, 0);
      int64_t small = total / 2, large = total - small;
      pads[d] = autoPad == "SAME_UPPER" ? small : large;
      pads[d + spatial] = autoPad == "SAME_UPPER" ? large : small;
    }
    return pads;
  }
  if (autoPad != "NOTSET")
    return n.error() << op << " auto_pad '" << autoPad << "' is not supported";
  return pads;
}

FailureOr<Value> convValue(NodeContext &n, Value x, Value w,
                           ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                           ArrayRef<int64_t> dilations, int64_t group);

/// A 3-D convolution as a 2-D one over the depth folded into the batch (as
/// the tracer's, python/fsdp_trace/decompose/nn.py `conv`): the depth
/// padded with zeros; for each of the kernel's kd depth taps, the input's
/// depth slices it reaches at each output depth (a gather at tap·dilation +
/// j·stride), stacked within each group tap by tap into the channels; the
/// kernel's depth taps stacked likewise, [C_out, kd·C_in/g, kh, kw]; one 2-D
/// convolution over N·D_out maps; the depth moved back behind the channels.
FailureOr<Value> conv3d(NodeContext &n, Value x, Value w,
                        ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                        ArrayRef<int64_t> dilations, int64_t group) {
  SmallVector<int64_t> xs = shapeOf(x), ws = shapeOf(w);
  Type elem = cast<RankedTensorType>(x.getType()).getElementType();
  int64_t batch = xs[0], cin = xs[1], h = xs[3], wd = xs[4];
  int64_t cout = ws[0], cinG = ws[1], kd = ws[2];
  if (group < 1 || cin % group || cin / group != cinG)
    return n.error() << "Conv weight " << w.getType() << " does not take "
                     << cin << " input channels in " << group << " group(s)";
  int64_t depth = xs[2] + pads[0] + pads[3];
  int64_t reach = dilations[0] * (kd - 1) + 1;
  if (strides[0] < 1 || dilations[0] < 1 || depth < reach)
    return n.error() << "Conv's kernel depth " << kd << " (dilation "
                     << dilations[0] << ") does not fit the padded depth "
                     << depth;
  int64_t dOut = (depth - reach) / strides[0] + 1;
  auto zeros = [&](int64_t len) {
    SmallVector<int64_t> shape = xs;
    shape[2] = len;
    return splatConstant(n, elem, shape, 0.0);
  };
  SmallVector<Value> padded;
  if (pads[0])
    padded.push_back(zeros(pads[0]));
  padded.push_back(x);
  if (pads[3])
    padded.push_back(zeros(pads[3]));
  Value v = concatAxis(n, padded, 2);
  SmallVector<Value> taps;
  for (int64_t k = 0; k < kd; ++k) {
    SmallVector<int64_t> at;
    for (int64_t j = 0; j < dOut; ++j)
      at.push_back(k * dilations[0] + j * strides[0]);
    taps.push_back(reshapeValue(n, gatherAxis(n, v, 2, at),
                                {batch, group, 1, cinG, dOut, h, wd}));
  }
  Value stacked = transposeValue(n, concatAxis(n, taps, 2), {0, 4, 1, 2, 3, 5, 6});
  stacked = reshapeValue(n, stacked, {batch * dOut, group * kd * cinG, h, wd});
  Value w2 = reshapeValue(n, transposeValue(n, w, {0, 2, 1, 3, 4}),
                          {cout, kd * cinG, ws[3], ws[4]});
  auto y = convValue(n, stacked, w2, strides.drop_front(),
                     {pads[1], pads[2], pads[4], pads[5]},
                     dilations.drop_front(), group);
  if (failed(y))
    return failure();
  SmallVector<int64_t> ys = shapeOf(*y);
  Value r = reshapeValue(n, *y, {batch, dOut, cout, ys[2], ys[3]});
  return transposeValue(n, r, {0, 2, 1, 3, 4});
}

/// fsdp.conv of `x` by `w` (plus the node's input 2 as the bias, where
/// given), its type checked by the dialect's shape function; 3-D through
/// conv3d.
FailureOr<Value> convValue(NodeContext &n, Value x, Value w,
                           ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                           ArrayRef<int64_t> dilations, int64_t group) {
  if (shapeOf(x).size() == 5)
    return conv3d(n, x, w, strides, pads, dilations, group);
  RankedTensorType bias = n.hasInput(2) ? n.inputType(2) : RankedTensorType();
  auto type = shape::conv(n.loc, cast<RankedTensorType>(x.getType()),
                          cast<RankedTensorType>(w.getType()), bias,
                          {strides, pads, dilations, group});
  if (failed(type))
    return failure();
  SmallVector<Value> operands{x, w};
  if (bias)
    operands.push_back(n.operand(2));
  return build<ConvOp>(
      n, *type, operands,
      {n.b.getNamedAttr("strides", n.b.getDenseI64ArrayAttr(strides)),
       n.b.getNamedAttr("pads", n.b.getDenseI64ArrayAttr(pads)),
       n.b.getNamedAttr("dilations", n.b.getDenseI64ArrayAttr(dilations)),
       i64Attr(n, "groups", group)});
}

LogicalResult buildConv(NodeContext &n, Value x, Value w,
                        ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                        ArrayRef<int64_t> dilations, int64_t group) {
  auto y = convValue(n, x, w, strides, pads, dilations, group);
  if (failed(y))
    return failure();
  return n.setResult(0, *y);
}

LogicalResult lowerConv(NodeContext &n) {
  if (failed(expectInputs(n, 2, 3)))
    return failure();
  RankedTensorType x = n.inputType(0), w = n.inputType(1);
  int64_t spatial = x.getRank() - 2;
  if (spatial < 1 || spatial > 3)
    return n.error() << "Conv of " << (spatial < 0 ? 0 : spatial)
                     << " spatial axes is not supported (1-D to 3-D are)";
  if (w.getRank() != x.getRank())
    return n.error() << "Conv weight " << w << " must have the input's rank";
  auto ones = SmallVector<int64_t>(spatial, 1);
  SmallVector<int64_t> strides = n.attrInts("strides").value_or(ones);
  SmallVector<int64_t> dilations = n.attrInts("dilations").value_or(ones);
  if (auto k = n.attrInts("kernel_shape");
      k && ArrayRef<int64_t>(*k) != w.getShape().drop_front(2))
    return n.error() << "Conv kernel_shape does not match the weight " << w;
  if ((int64_t)strides.size() != spatial ||
      (int64_t)dilations.size() != spatial)
    return n.error() << "Conv needs " << spatial << " strides and dilations";
  SmallVector<int64_t> kernel(w.getShape().drop_front(2));
  auto padded = windowPads(n, "Conv", x, kernel, strides, dilations);
  if (failed(padded))
    return failure();
  SmallVector<int64_t> pads = *padded;
  return buildConv(n, n.operand(0), n.operand(1), strides, pads, dilations,
                   n.attrInt("group", 1));
}

/// ConvTranspose as the convolution it is the gradient of (the tracer's
/// conv_transpose composition, decompose/nn.py): the input spread out by
/// the stride (zeros between: a concat with zeros and a reshape per axis),
/// padded by dilation·(k - 1) - pad on each side (+ output_padding after;
/// a negative amount crops), convolved at stride 1 with the kernel flipped
/// and its in/out channels swapped within each group. `output_shape`, where
/// given, sets the pads as ONNX specifies.
LogicalResult lowerConvTranspose(NodeContext &n) {
  if (failed(expectInputs(n, 2, 3)))
    return failure();
  RankedTensorType xt = n.inputType(0), wt = n.inputType(1);
  int64_t spatial = xt.getRank() - 2;
  Type elem = xt.getElementType();
  if (spatial < 1 || spatial > 3)
    return n.error() << "ConvTranspose of " << (spatial < 0 ? 0 : spatial)
                     << " spatial axes is not supported (1-D to 3-D are)";
  if (!isa<FloatType>(elem) || wt.getRank() != xt.getRank() ||
      wt.getElementType() != elem)
    return n.error() << "ConvTranspose of " << xt << " by " << wt
                     << " is not supported (float tensors of one rank are)";
  int64_t group = n.attrInt("group", 1);
  int64_t cin = xt.getDimSize(1), coutG = wt.getDimSize(1);
  if (group < 1 || wt.getDimSize(0) != cin || cin % group)
    return n.error() << "ConvTranspose weight " << wt << " does not take "
                     << cin << " input channels in " << group << " group(s)";
  SmallVector<int64_t> ones(spatial, 1), zeros(spatial, 0);
  SmallVector<int64_t> strides = n.attrInts("strides").value_or(ones);
  SmallVector<int64_t> dilations = n.attrInts("dilations").value_or(ones);
  SmallVector<int64_t> outPad = n.attrInts("output_padding").value_or(zeros);
  SmallVector<int64_t> pads =
      n.attrInts("pads").value_or(SmallVector<int64_t>(2 * spatial, 0));
  SmallVector<int64_t> kernel(wt.getShape().drop_front(2));
  if ((int64_t)strides.size() != spatial ||
      (int64_t)dilations.size() != spatial ||
      (int64_t)outPad.size() != spatial || (int64_t)pads.size() != 2 * spatial)
    return n.error() << "ConvTranspose needs " << spatial
                     << " strides, dilations and output_padding, and "
                     << 2 * spatial << " pads";
  for (int64_t d = 0; d < spatial; ++d)
    if (strides[d] < 1 || dilations[d] < 1 || outPad[d] < 0 ||
        outPad[d] >= std::max(strides[d], dilations[d]))
      return n.error() << "ConvTranspose axis " << d << ": stride "
                       << strides[d] << ", dilation " << dilations[d]
                       << ", output_padding " << outPad[d] << " are invalid";
  std::string autoPad = n.attrString("auto_pad", "NOTSET");
  auto outputShape = n.attrInts("output_shape");
  if (autoPad == "VALID")
    pads.assign(2 * spatial, 0);
  if (outputShape || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    if (outputShape && (int64_t)outputShape->size() != spatial)
      return n.error() << "ConvTranspose output_shape needs " << spatial
                       << " values (the spatial extents)";
    for (int64_t d = 0; d < spatial; ++d) {
      int64_t in = xt.getDimSize(2 + d);
      int64_t out = outputShape ? (*outputShape)[d] : in * strides[d];
      int64_t total = strides[d] * (in - 1) + outPad[d] +
                      (kernel[d] - 1) * dilations[d] + 1 - out;
      bool upper = autoPad == "SAME_UPPER";
      pads[d] = upper ? total / 2 : total - total / 2;
      pads[d + spatial] = upper ? total - total / 2 : total / 2;
    }
  }
  auto typeOf = [&](ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, elem);
  };
  auto slice = [&](Value v, int64_t axis, int64_t lo, int64_t hi) {
    return sliceAxis(n, v, axis, lo, hi);
  };

  Value x = n.operand(0);
  SmallVector<int64_t> convPads(2 * spatial, 0);
  for (int64_t d = 0; d < spatial; ++d) {
    int64_t axis = 2 + d, s = strides[d];
    if (s > 1) { // [.., L, ..] -> [.., L, 1, ..] ++ zeros [.., L, s-1, ..]
      SmallVector<int64_t> shape = shapeOf(x), split = shape;
      int64_t len = shape[axis];
      split.insert(split.begin() + axis + 1, 1);
      Value col = build<ReshapeOp>(n, typeOf(split), {x});
      SmallVector<int64_t> zshape = split;
      zshape[axis + 1] = s - 1;
      SmallVector<int64_t> both = split;
      both[axis + 1] = s;
      Value spread = build<ConcatOp>(
          n, typeOf(both), {col, splatConstant(n, elem, zshape, 0.0)},
          {i64Attr(n, "axis", axis + 1)});
      shape[axis] = len * s;
      x = slice(build<ReshapeOp>(n, typeOf(shape), {spread}), axis, 0,
                (len - 1) * s + 1);
    }
    int64_t reach = dilations[d] * (kernel[d] - 1);
    int64_t before = reach - pads[d], after = reach - pads[d + spatial] + outPad[d];
    int64_t len = shapeOf(x)[axis];
    int64_t lo = std::max<int64_t>(0, -before), hi = len - std::max<int64_t>(0, -after);
    if (hi <= lo)
      return n.error() << "ConvTranspose pads leave axis " << d << " empty";
    x = slice(x, axis, lo, hi);
    convPads[d] = std::max<int64_t>(0, before);
    convPads[d + spatial] = std::max<int64_t>(0, after);
  }
  // [C_in, C_out/g, K..] -> [g, C_in/g, C_out/g, K..] -> [g, C_out/g, C_in/g,
  // K..] -> [C_out, C_in/g, K..], then each spatial axis reversed.
  SmallVector<int64_t> grouped{group, cin / group, coutG};
  grouped.append(kernel.begin(), kernel.end());
  Value w = build<ReshapeOp>(n, typeOf(grouped), {n.operand(1)});
  SmallVector<int64_t> perm{0, 2, 1}, swapped{group, coutG, cin / group};
  for (int64_t d = 0; d < spatial; ++d) {
    perm.push_back(3 + d);
    swapped.push_back(kernel[d]);
  }
  w = build<TransposeOp>(n, typeOf(swapped), {w},
                         {arrayAttr(n, "perm", perm)});
  SmallVector<int64_t> wshape{group * coutG, cin / group};
  wshape.append(kernel.begin(), kernel.end());
  w = build<ReshapeOp>(n, typeOf(wshape), {w});
  for (int64_t d = 0; d < spatial; ++d) {
    if (kernel[d] == 1)
      continue;
    SmallVector<int64_t> reversed;
    for (int64_t i = kernel[d] - 1; i >= 0; --i)
      reversed.push_back(i);
    auto indexType = RankedTensorType::get({kernel[d]}, n.b.getI64Type());
    Value index = ConstantOp::create(
        n.b, n.loc, DenseElementsAttr::get(indexType, ArrayRef<int64_t>(reversed)));
    w = build<GatherOp>(n, w.getType(), {w, index},
                        {i64Attr(n, "axis", 2 + d)});
  }
  return buildConv(n, x, w, ones, convPads, dilations, group);
}

/// PRelu(x, slope): x where x >= 0 (and where it is NaN), slope·x below.
LogicalResult lowerPRelu(NodeContext &n) {
  if (failed(expectInputs(n, 2, 2)))
    return failure();
  RankedTensorType x = n.inputType(0);
  if (!isa<FloatType>(x.getElementType()))
    return n.error() << "expects a float tensor, got " << x;
  auto scaledType = shape::binary(n.loc, x, n.inputType(1), Type());
  if (failed(scaledType))
    return failure();
  if (*scaledType != x)
    return n.error() << "slope " << n.inputType(1)
                     << " must broadcast to the input " << x;
  Value scaled = broadcastBinary<MulOp>(n, n.operand(0), n.operand(1));
  auto condType = RankedTensorType::get(x.getShape(), n.b.getI1Type());
  Value below = build<LessOp>(n, condType,
                              {n.operand(0),
                               scalarConstant(n, x.getElementType(), 0.0)});
  return n.setResult(0, build<WhereOp>(n, x, {below, scaled, n.operand(0)}));
}

/// fsdp.pool of `x` (2-D or 1-D) with the node's window settings.
Value poolValue(NodeContext &n, RankedTensorType type, Value x, StringRef mode,
                ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations, bool ceil,
                bool includePad) {
  return build<PoolOp>(
      n, type, {x},
      {n.b.getNamedAttr("mode", n.b.getStringAttr(mode)),
       n.b.getNamedAttr("kernel", n.b.getDenseI64ArrayAttr(kernel)),
       n.b.getNamedAttr("strides", n.b.getDenseI64ArrayAttr(strides)),
       n.b.getNamedAttr("pads", n.b.getDenseI64ArrayAttr(pads)),
       n.b.getNamedAttr("dilations", n.b.getDenseI64ArrayAttr(dilations)),
       n.b.getNamedAttr("ceil_mode", n.b.getBoolAttr(ceil)),
       n.b.getNamedAttr("count_include_pad", n.b.getBoolAttr(includePad))});
}

/// 3-D pooling, separable (as the tracer's, decompose/nn.py `_pool3d`): the
/// 2-D pool of every depth slice (the depth folded into the channels), then
/// the depth windows as gathers of the depth axis. Max: the depth padded
/// with -inf; a later tap taken only where it is greater (or NaN), so the
/// gradient goes to the first maximum in PyTorch's (depth, row, column)
/// order. Average: without padding and ceil_mode only (every window whole,
/// the mean of the slices' means: s3d's); otherwise refused by name.
FailureOr<Value> pool3d(NodeContext &n, RankedTensorType out, StringRef mode,
                        ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                        ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations,
                        bool ceil, bool includePad) {
  bool isMax = mode == "max";
  if (!isMax && (ceil || llvm::any_of(pads, [](int64_t p) { return p != 0; })))
    return n.error() << "AveragePool of 3 spatial axes is supported without "
                        "pads and ceil_mode";
  Value x = n.operand(0);
  SmallVector<int64_t> xs = shapeOf(x), os(out.getShape());
  Type elem = out.getElementType();
  int64_t batch = xs[0], ch = xs[1], depth = xs[2], dOut = os[2];
  auto flatType = RankedTensorType::get({batch, ch * depth, os[3], os[4]}, elem);
  Value y = poolValue(n, flatType, reshapeValue(n, x, {batch, ch * depth, xs[3], xs[4]}),
                      mode, kernel.drop_front(), strides.drop_front(),
                      {pads[1], pads[2], pads[4], pads[5]},
                      dilations.drop_front(), ceil, includePad);
  y = reshapeValue(n, y, {batch, ch, depth, os[3], os[4]});
  int64_t kd = kernel[0], sd = strides[0], dd = dilations[0], pb = pads[0];
  // The depth padded so that every window's taps are in range.
  int64_t length = std::max(depth + pads[0] + pads[3],
                            (dOut - 1) * sd + dd * (kd - 1) + 1);
  SmallVector<Value> parts;
  auto fill = [&](int64_t len) {
    return splatConstant(n, elem, {batch, ch, len, os[3], os[4]},
                         isMax ? -INFINITY : 0.0);
  };
  if (pb)
    parts.push_back(fill(pb));
  parts.push_back(y);
  if (length - depth - pb > 0)
    parts.push_back(fill(length - depth - pb));
  y = concatAxis(n, parts, 2);
  Value acc;
  for (int64_t k = 0; k < kd; ++k) {
    SmallVector<int64_t> at;
    for (int64_t j = 0; j < dOut; ++j)
      at.push_back(k * dd + j * sd);
    Value tap = gatherAxis(n, y, 2, at);
    if (!acc) {
      acc = tap;
      continue;
    }
    if (!isMax) {
      acc = build<AddOp>(n, out, {acc, tap});
      continue;
    }
    auto bools = RankedTensorType::get(out.getShape(), n.b.getI1Type());
    Value greater = build<GreaterOp>(n, bools, {tap, acc});
    Value nan = build<NotOp>(n, bools, {build<EqualOp>(n, bools, {tap, tap})});
    acc = build<WhereOp>(n, out, {build<OrOp>(n, bools, {greater, nan}), tap, acc});
  }
  if (!isMax)
    acc = build<MulOp>(n, out, {acc, scalarConstant(n, elem, 1.0 / kd)});
  return acc;
}

/// MaxPool and AveragePool: fsdp.pool (3-D through pool3d).
LogicalResult lowerPool(NodeContext &n, StringRef mode) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  if (mode == "max" &&
      failed(n.setUnsupported(1, "MaxPool's indices are not imported")))
    return failure();
  RankedTensorType x = n.inputType(0);
  int64_t spatial = x.getRank() - 2;
  StringRef op = mode == "max" ? "MaxPool" : "AveragePool";
  if (!isa<FloatType>(x.getElementType()))
    return n.error() << op << " of " << x
                     << " is not supported (float tensors are)";
  if (spatial < 1 || spatial > 3)
    return n.error() << op << " of " << (spatial < 0 ? 0 : spatial)
                     << " spatial axes is not supported (1-D to 3-D are)";
  auto kernel = n.attrInts("kernel_shape");
  if (!kernel || (int64_t)kernel->size() != spatial)
    return n.error() << op << " needs kernel_shape with " << spatial
                     << " extents";
  auto ones = SmallVector<int64_t>(spatial, 1);
  SmallVector<int64_t> strides = n.attrInts("strides").value_or(ones);
  SmallVector<int64_t> dilations = n.attrInts("dilations").value_or(ones);
  if ((int64_t)strides.size() != spatial ||
      (int64_t)dilations.size() != spatial)
    return n.error() << op << " needs " << spatial << " strides and dilations";
  if (n.attrInt("storage_order", 0) != 0)
    return n.error() << "MaxPool storage_order 1 (column-major indices) is "
                        "not supported";
  auto pads = windowPads(n, op, x, *kernel, strides, dilations);
  if (failed(pads))
    return failure();
  bool ceil = n.attrInt("ceil_mode", 0),
       includePad = n.attrInt("count_include_pad", 0);
  if (spatial == 3) {
    SmallVector<int64_t> out{x.getDimSize(0), x.getDimSize(1)};
    for (int64_t d = 0; d < 3; ++d) {
      int64_t o = ::fsdp::windowExtent(x.getDimSize(2 + d), (*kernel)[d],
                                       strides[d], (*pads)[d], (*pads)[d + 3],
                                       dilations[d], ceil);
      if (o < 1)
        return n.error() << op << " window does not fit the padded input " << x;
      out.push_back(o);
    }
    auto y = pool3d(n, RankedTensorType::get(out, x.getElementType()), mode,
                    *kernel, strides, *pads, dilations, ceil, includePad);
    if (failed(y))
      return failure();
    return n.setResult(0, *y);
  }
  auto type =
      shape::pool(n.loc, x, {mode, *kernel, strides, *pads, dilations, ceil});
  if (failed(type))
    return failure();
  return n.setResult(0, poolValue(n, *type, n.operand(0), mode, *kernel,
                                  strides, *pads, dilations, ceil, includePad));
}

/// GlobalAveragePool / GlobalMaxPool: a mean or maximum over the spatial
/// axes, keeping them as extents of 1.
template <typename OpTy> LogicalResult lowerGlobalPool(NodeContext &n) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  RankedTensorType x = n.inputType(0);
  if (x.getRank() < 3)
    return n.error() << "global pooling needs [N, C, spatial...], got " << x;
  SmallVector<int64_t> axes;
  for (int64_t d = 2; d < x.getRank(); ++d)
    axes.push_back(d);
  auto type = shape::reduce(n.loc, x, axes, true);
  if (failed(type))
    return failure();
  return n.setResult(
      0, build<OpTy>(n, *type, {n.operand(0)},
                     {n.b.getNamedAttr("axes", n.b.getDenseI64ArrayAttr(axes)),
                      n.b.getNamedAttr("keepdims", n.b.getBoolAttr(true))}));
}

/// BatchNormalization. In training mode (training_mode = 1, what
/// torch.onnx.export writes with TrainingMode.TRAINING): fsdp.batch_norm
/// with the batch's statistics, and the running statistics updated as
/// PyTorch does, `running = momentum·running + (1 - momentum)·batch` with
/// the unbiased variance, stored back into their buffers. Otherwise the
/// running statistics normalise: elementwise ops.
LogicalResult lowerBatchNorm(NodeContext &n) {
  if (failed(expectInputs(n, 5, 5)))
    return failure();
  RankedTensorType x = n.inputType(0);
  if (!isa<FloatType>(x.getElementType()) || x.getRank() < 2)
    return n.error() << "BatchNormalization of " << x
                     << " is not supported (float [N, C, ...] is)";
  auto stats = shape::batchNormStats(n.loc, x, n.inputType(1), n.inputType(2));
  if (failed(stats))
    return failure();
  for (int i : {3, 4})
    if (n.inputType(i) != *stats)
      return n.error() << "BatchNormalization running statistics must be "
                       << *stats << ", got " << n.inputType(i);
  float eps = n.attrFloat("epsilon", 1e-5f);
  Type elem = x.getElementType();
  auto scalar = [&](double v) { return scalarConstant(n, elem, v); };
  auto binaryOp = [&](auto tag, Value a, Value b) -> Value {
    return broadcastBinary<decltype(tag)>(n, a, b);
  };
  // [C] as [C, 1, ...]: broadcast against x's channel axis.
  SmallVector<int64_t> channelShape(x.getRank() - 1, 1);
  channelShape[0] = x.getDimSize(1);
  auto perChannel = [&](Value v) -> Value {
    return build<ReshapeOp>(n, RankedTensorType::get(channelShape, elem), {v});
  };
  if (!n.attrInt("training_mode", 0)) {
    Value rstd = build<SqrtOp>(n, *stats,
                               {binaryOp(AddOp(), n.operand(4), scalar(eps))});
    Value centred = binaryOp(SubOp(), n.operand(0), perChannel(n.operand(3)));
    Value y = binaryOp(DivOp(), centred, perChannel(rstd));
    y = binaryOp(MulOp(), y, perChannel(n.operand(1)));
    y = binaryOp(AddOp(), y, perChannel(n.operand(2)));
    if (failed(n.setUnsupported(1, "BatchNormalization's running mean output "
                                   "exists in training mode only")) ||
        failed(n.setUnsupported(2, "BatchNormalization's running variance "
                                   "output exists in training mode only")))
      return failure();
    return n.setResult(0, y);
  }
  for (int i : {3, 4})
    if (n.input(i).parameter.empty())
      return n.error() << "BatchNormalization in training mode with running "
                          "statistics that are not initializers (buffers the "
                          "step updates) is not supported";
  auto bn = BatchNormOp::create(
      n.b, n.loc, TypeRange{x, *stats, *stats},
      ValueRange{n.operand(0), n.operand(1), n.operand(2)},
      {n.b.getNamedAttr("epsilon", n.b.getF32FloatAttr(eps))});
  double momentum = n.attrFloat("momentum", 0.9f);
  auto update = [&](int input, Value batch, double factor) {
    Value kept = binaryOp(MulOp(), n.operand(input), scalar(momentum));
    Value added = binaryOp(MulOp(), batch, scalar((1 - momentum) * factor));
    Value running = binaryOp(AddOp(), kept, added);
    AssignBufferOp::create(
        n.b, n.loc, FlatSymbolRefAttr::get(n.ctx(), n.input(input).parameter),
        running);
    return running;
  };
  Value mean = update(3, bn.getMean(), 1.0);
  Value var = update(4, bn.getVar(), 1.0); // unbiased already
  if ((n.numOutputs() > 1 && failed(n.setResult(1, mean))) ||
      (n.numOutputs() > 2 && failed(n.setResult(2, var))))
    return failure();
  return n.setResult(0, bn.getResult());
}

template <typename OpTy> LogicalResult classificationLoss(NodeContext &n) {
  if (failed(expectInputs(n, 2, 3)))
    return failure();
  if (failed(n.setUnsupported(1, "log_prob outputs are not imported")))
    return failure();
  std::string reduction = n.attrString("reduction", "mean");
  RankedTensorType weight = n.hasInput(2) ? n.inputType(2) : RankedTensorType();
  auto type = shape::classificationLoss(n.loc, n.inputType(0), n.inputType(1),
                                        weight, reduction);
  if (failed(type))
    return failure();
  SmallVector<Value> operands{n.operand(0), n.operand(1)};
  if (weight)
    operands.push_back(n.operand(2));
  SmallVector<NamedAttribute> attrs{
      n.b.getNamedAttr("reduction", n.b.getStringAttr(reduction))};
  if (n.attr("ignore_index"))
    attrs.push_back(i64Attr(n, "ignore_index", n.attrInt("ignore_index", 0)));
  return n.setResult(0, build<OpTy>(n, *type, operands, attrs));
}

} // namespace

void mlir::fsdp::onnx_ops::addCompute(llvm::StringMap<LowerFn> &table) {
  addRows(
      table,
      {
          {"Softmax", softmaxLike<SoftmaxOp>},
          {"LogSoftmax", softmaxLike<LogSoftmaxOp>},
          {"MatMul", lowerMatMul},
          {"Einsum", lowerEinsum},
          {"Gemm", lowerGemm},
          {"ReduceSum",
           [](NodeContext &n) { return reduction<ReduceSumOp>(n, 0, 13); }},
          {"ReduceMean",
           [](NodeContext &n) { return reduction<ReduceMeanOp>(n, 1, 18); }},
          {"ReduceSumSquare",
           [](NodeContext &n) {
             return reduction<ReduceSumOp>(n, 0, 18, Of::Square);
           }},
          {"ReduceL2",
           [](NodeContext &n) {
             return reduction<ReduceSumOp>(n, 0, 18, Of::L2);
           }},
          {"InstanceNormalization", lowerInstanceNorm},
          {"ReduceMax",
           [](NodeContext &n) { return reduction<ReduceMaxOp>(n, 2, 18); }},
          {"ReduceMin",
           [](NodeContext &n) {
             return reduction<ReduceMaxOp>(n, 2, 18, Of::Negated);
           }},
          {"ReduceL1",
           [](NodeContext &n) {
             return reduction<ReduceSumOp>(n, 0, 18, Of::Abs);
           }},
          {"ReduceLogSum",
           [](NodeContext &n) {
             return reduction<ReduceSumOp>(n, 0, 18, Of::Log);
           }},
          {"ReduceLogSumExp",
           [](NodeContext &n) {
             return reduction<ReduceSumOp>(n, 0, 18, Of::LogSumExp);
           }},
          {"ReduceProd",
           [](NodeContext &n) {
             return reduction<ReduceSumOp>(n, 0, 18, Of::Product);
           }},
          {"LayerNormalization", lowerLayerNorm},
          {"Conv", lowerConv},
          {"ConvTranspose", lowerConvTranspose},
          {"PRelu", lowerPRelu},
          {"BatchNormalization", lowerBatchNorm},
          {"MaxPool", [](NodeContext &n) { return lowerPool(n, "max"); }},
          {"AveragePool", [](NodeContext &n) { return lowerPool(n, "avg"); }},
          {"GlobalAveragePool", lowerGlobalPool<ReduceMeanOp>},
          {"GlobalMaxPool", lowerGlobalPool<ReduceMaxOp>},
          {"SoftmaxCrossEntropyLoss", classificationLoss<CrossEntropyOp>},
          {"NegativeLogLikelihoodLoss", classificationLoss<NllLossOp>},
      });
}
