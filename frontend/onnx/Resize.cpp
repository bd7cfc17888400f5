//===- Resize.cpp - Resize: upsampling and downsampling (ONNX) ------------===//
//
// Resize is what torch.onnx.export writes for nn.Upsample and
// F.interpolate (a U-Net's decoder, a feature pyramid's top-down path).
// Every mode ONNX has for it is separable: output position i along an
// axis reads a few input positions with fixed weights, which depend only
// on the sizes and the attributes. So each resized axis becomes a
// constant [out, in] weight matrix built at import time, applied as a
// matmul along that axis (linear: two weights a row; cubic: four), and
// nearest becomes a gather of the chosen positions; the gradient is that
// of the matmul or the gather. Positions outside the input read its edge
// (ONNX's reference pads so; PyTorch clamps the same way).
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/OnnxOpsSupport.h"

#include <algorithm>
#include <array>
#include <optional>

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::onnx_ops;

namespace {

struct ResizeAttrs {
  std::string mode, transform, nearest;
  double cubicA;
  bool excludeOutside;
  bool scalesGiven = false;
};

/// The input coordinate output position `x` maps to along an axis of
/// `in` positions resized to `out` by `scale`. align_corners divides by
/// the resized length less one, which given scales is in × scale, not
/// rounded (ONNX's reference; PyTorch's align_corners uses the rounded
/// size, the same wherever in × scale is whole).
double sourceCoordinate(const ResizeAttrs &a, double x, int64_t in,
                        int64_t out, double scale) {
  if (a.transform == "align_corners") {
    double resized = a.scalesGiven ? in * scale : (double)out;
    return resized <= 1 ? 0.0 : x * (double)(in - 1) / (resized - 1);
  }
  if (a.transform == "asymmetric")
    return x / scale;
  if (a.transform == "pytorch_half_pixel" && out == 1)
    return 0.0;
  return (x + 0.5) / scale - 0.5; // half_pixel, pytorch_half_pixel
}

/// The position nearest_mode picks for coordinate `c`, kept in [0, in).
int64_t nearestPosition(const ResizeAttrs &a, double c, int64_t in) {
  double p;
  if (a.nearest == "floor")
    p = std::floor(c);
  else if (a.nearest == "ceil")
    p = std::ceil(c);
  else if (a.nearest == "round_prefer_ceil")
    p = std::floor(c + 0.5);
  else // round_prefer_floor
    p = c - std::floor(c) == 0.5 ? std::floor(c) : std::round(c);
  return std::clamp<int64_t>((int64_t)p, 0, in - 1);
}

/// Keys' cubic convolution weights of the four positions floor(c) - 1 ..
/// floor(c) + 2 at fraction t, coefficient A (-0.75: PyTorch's bicubic).
std::array<double, 4> cubicWeights(double t, double A) {
  auto near = [A](double x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };
  auto far = [A](double x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };
  return {far(t + 1), near(t), near(1 - t), far(2 - t)};
}

/// The [out, in] weights of a linear or cubic resize of one axis: row i
/// the weights output i gives each input position.
std::vector<double> resizeWeights(const ResizeAttrs &a, int64_t in,
                                  int64_t out, double scale) {
  std::vector<double> w(out * in, 0.0);
  for (int64_t i = 0; i < out; ++i) {
    double c = sourceCoordinate(a, (double)i, in, out, scale);
    double *row = w.data() + i * in;
    if (a.mode == "linear") {
      double lo = std::floor(c), t = c - lo;
      row[std::clamp<int64_t>((int64_t)lo, 0, in - 1)] += 1 - t;
      row[std::clamp<int64_t>((int64_t)lo + 1, 0, in - 1)] += t;
      continue;
    }
    double lo = std::floor(c);
    std::array<double, 4> k = cubicWeights(c - lo, a.cubicA);
    double kept = 0;
    for (int j = 0; j < 4; ++j) {
      int64_t p = (int64_t)lo - 1 + j;
      if (a.excludeOutside && (p < 0 || p >= in))
        continue;
      row[std::clamp<int64_t>(p, 0, in - 1)] += k[j];
      kept += k[j];
    }
    if (a.excludeOutside && kept != 0)
      for (int64_t p = 0; p < in; ++p)
        row[p] /= kept;
  }
  return w;
}

/// `x` resized along `axis` by the [out, in] `weights`: the axis moved
/// last, a matmul with the transposed weights, moved back.
Value applyWeights(NodeContext &n, Value x, int64_t axis, int64_t in,
                   int64_t out, const std::vector<double> &weights) {
  auto t = cast<RankedTensorType>(x.getType());
  int64_t rank = t.getRank();
  Type elem = t.getElementType();
  std::vector<float> wt(in * out); // [in, out]: the weights transposed
  for (int64_t i = 0; i < out; ++i)
    for (int64_t p = 0; p < in; ++p)
      wt[p * out + i] = (float)weights[i * in + p];
  auto f32 = RankedTensorType::get({in, out}, n.b.getF32Type());
  Value w = ConstantOp::create(
      n.b, n.loc, DenseElementsAttr::get(f32, ArrayRef<float>(wt)));
  if (!elem.isF32())
    w = build<CastOp>(n, RankedTensorType::get({in, out}, elem), {w});
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis)
      perm.push_back(d);
  perm.push_back(axis);
  bool moved = axis != rank - 1;
  Value y = moved ? transposeValue(n, x, perm) : x;
  SmallVector<int64_t> shape = shapeOf(y);
  shape.back() = out;
  y = build<MatmulOp>(n, RankedTensorType::get(shape, elem), {y, w});
  if (!moved)
    return y;
  SmallVector<int64_t> back(rank);
  for (int64_t d = 0; d < rank; ++d)
    back[perm[d]] = d;
  return transposeValue(n, y, back);
}

/// `x` (a constant) resized along `axis` by the [out, in] `weights`, in
/// double: Resize folded (the node tests' reference values check every
/// mode's weights this way).
HostTensor foldAxis(const HostTensor &x, int64_t axis, int64_t out,
                    const std::vector<double> &weights) {
  int64_t in = x.shape[axis], outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.shape[d];
  for (int64_t d = axis + 1; d < (int64_t)x.shape.size(); ++d)
    inner *= x.shape[d];
  SmallVector<int64_t> shape(x.shape);
  shape[axis] = out;
  HostTensor y = HostTensor::zeros(x.elementType, shape);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < out; ++i)
      for (int64_t k = 0; k < inner; ++k) {
        double acc = 0;
        for (int64_t p = 0; p < in; ++p)
          acc += weights[i * in + p] * x.asDouble((o * in + p) * inner + k);
        y.set((o * out + i) * inner + k, acc);
      }
  return y;
}

/// Resize(X, roi, scales, sizes): nearest, linear or cubic, with the
/// coordinate transforms half_pixel, pytorch_half_pixel, align_corners
/// and asymmetric. scales or sizes must be known at import time.
LogicalResult lowerResize(NodeContext &n) {
  if (n.numInputs() < 1 || !n.hasInput(0))
    return n.error() << "expects an input";
  RankedTensorType t = n.inputType(0);
  int64_t rank = t.getRank();
  if (!isa<FloatType>(t.getElementType()))
    return n.error() << "expects a float tensor, got " << t;
  ResizeAttrs a{n.attrString("mode", "nearest"),
                n.attrString("coordinate_transformation_mode", "half_pixel"),
                n.attrString("nearest_mode", "round_prefer_floor"),
                n.attrFloat("cubic_coeff_a", -0.75f),
                n.attrInt("exclude_outside", 0) != 0};
  if (a.mode != "nearest" && a.mode != "linear" && a.mode != "cubic")
    return n.error() << "mode '" << a.mode << "' is not nearest, linear or cubic";
  if (a.transform != "half_pixel" && a.transform != "pytorch_half_pixel" &&
      a.transform != "align_corners" && a.transform != "asymmetric")
    return n.error() << "coordinate_transformation_mode '" << a.transform
                     << "' is not supported (half_pixel, pytorch_half_pixel, "
                        "align_corners, asymmetric)";
  if (a.nearest != "round_prefer_floor" && a.nearest != "round_prefer_ceil" &&
      a.nearest != "floor" && a.nearest != "ceil")
    return n.error() << "nearest_mode '" << a.nearest << "' is not supported";
  if (n.attrInt("antialias", 0))
    return n.error() << "antialias = 1 is not supported";
  if (n.attrString("keep_aspect_ratio_policy", "stretch") != "stretch")
    return n.error() << "keep_aspect_ratio_policy other than 'stretch' is "
                        "not supported";
  SmallVector<int64_t> axes;
  if (auto given = n.attrInts("axes")) {
    for (int64_t ax : *given) {
      auto d = axisOf(n, ax, rank);
      if (failed(d))
        return failure();
      axes.push_back(*d);
    }
  } else {
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  // Each axis's output size and the scale its coordinates are mapped by.
  SmallVector<int64_t> out(t.getShape());
  SmallVector<double> scale(rank, 1.0);
  bool hasScales = n.numInputs() > 2 && n.hasInput(2) &&
                   n.inputType(2).getNumElements() > 0;
  bool hasSizes = n.numInputs() > 3 && n.hasInput(3) &&
                  n.inputType(3).getNumElements() > 0;
  if (hasScales == hasSizes)
    return n.error() << "needs exactly one of scales and sizes";
  a.scalesGiven = hasScales;
  auto given = n.requireConst(hasScales ? 2 : 3, hasScales ? "scales" : "sizes");
  if (failed(given))
    return failure();
  if ((*given)->numel() != (int64_t)axes.size())
    return n.error() << (hasScales ? "scales" : "sizes") << " has "
                     << (*given)->numel() << " entries for " << axes.size()
                     << " axes";
  for (auto [i, d] : llvm::enumerate(axes)) {
    int64_t in = t.getDimSize(d);
    if (hasScales) {
      scale[d] = (*given)->asDouble(i);
      if (!(scale[d] > 0))
        return n.error() << "scale " << scale[d] << " on axis " << d
                         << " is not positive";
      out[d] = (int64_t)std::floor(in * scale[d]);
    } else {
      out[d] = (*given)->asInt(i);
      if (out[d] < 0)
        return n.error() << "size " << out[d] << " on axis " << d
                         << " is negative";
      scale[d] = in ? (double)out[d] / (double)in : 1.0;
    }
    if (in == 0 && out[d] > 0)
      return n.error() << "resizes an empty axis " << d << " to " << out[d];
  }
  if (failed(checkedDims(out, n.loc, "the resized shape")))
    return failure();
  const HostTensor *c = n.constInput(0);
  std::optional<HostTensor> folded;
  if (c && isSmall(out))
    folded = *c;
  Value y = folded ? Value() : n.operand(0);
  for (int64_t d : axes) {
    int64_t in = t.getDimSize(d);
    if (out[d] == in && scale[d] == 1.0)
      continue; // every transform maps i to i
    SmallVector<int64_t> positions;
    std::vector<double> weights;
    if (a.mode == "nearest") {
      weights.assign(out[d] * in, 0.0);
      for (int64_t i = 0; i < out[d]; ++i) {
        positions.push_back(nearestPosition(
            a, sourceCoordinate(a, (double)i, in, out[d], scale[d]), in));
        weights[i * in + positions.back()] = 1.0;
      }
    } else {
      weights = resizeWeights(a, in, out[d], scale[d]);
    }
    if (folded)
      folded = foldAxis(*folded, d, out[d], weights);
    else if (a.mode == "nearest")
      y = gatherAxis(n, y, d, positions);
    else
      y = applyWeights(n, y, d, in, out[d], weights);
  }
  if (folded)
    return n.setConst(0, std::move(*folded));
  return n.setResult(0, y);
}

} // namespace

void mlir::fsdp::onnx_ops::addResize(llvm::StringMap<LowerFn> &table) {
  addRows(table, {{"Resize", lowerResize}});
}
