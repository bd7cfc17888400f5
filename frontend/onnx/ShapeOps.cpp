//===- ShapeOps.cpp - Shape-only ops and constant producers (ONNX) --------===//
//
// Shape-only ops and constant producers: their lowerings from ONNX and their
// rows of the importer's table (frontend/OnnxOps.cpp gathers the families).
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/OnnxOpsSupport.h"

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::onnx_ops;

namespace {

//===----------------------------------------------------------------------===//
// Shape-only and constant producers
//===----------------------------------------------------------------------===//

LogicalResult lowerConstant(NodeContext &n) {
  if (const onnx::TensorProto *t = n.attrTensor("value")) {
    auto h = readTensorProto(*t, n.ctx(), n.loc, "value");
    if (failed(h))
      return failure();
    return n.setConst(0, std::move(*h));
  }
  if (const auto *a = n.attr("value_float")) {
    HostTensor h = HostTensor::zeros(n.b.getF32Type(), {});
    h.set(0, a->f());
    return n.setConst(0, h);
  }
  if (const auto *a = n.attr("value_floats")) {
    HostTensor h = HostTensor::zeros(n.b.getF32Type(), {a->floats_size()});
    for (int i = 0; i < a->floats_size(); ++i)
      h.set(i, a->floats(i));
    return n.setConst(0, h);
  }
  if (const auto *a = n.attr("value_int"))
    return n.setConst(0, HostTensor::fromInts(n.ctx(), {a->i()}, {}));
  if (auto ints = n.attrInts("value_ints"))
    return n.setConst(
        0, HostTensor::fromInts(n.ctx(), *ints, {(int64_t)ints->size()}));
  return n.error() << "only tensor, float and int constants are supported";
}

LogicalResult lowerShape(NodeContext &n) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  ArrayRef<int64_t> dims = n.inputType(0).getShape();
  int64_t rank = dims.size();
  int64_t start = n.attrInt("start", 0), end = n.attrInt("end", rank);
  auto clampIndex = [&](int64_t i) {
    if (i < 0)
      i += rank;
    return std::clamp<int64_t>(i, 0, rank);
  };
  start = clampIndex(start);
  end = std::max(start, clampIndex(end));
  SmallVector<int64_t> v(dims.begin() + start, dims.begin() + end);
  return n.setConst(0, HostTensor::fromInts(n.ctx(), v, {(int64_t)v.size()}));
}

LogicalResult lowerSize(NodeContext &n) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  return n.setConst(
      0, HostTensor::fromInts(n.ctx(), {n.inputType(0).getNumElements()}, {}));
}

LogicalResult lowerConstantOfShape(NodeContext &n) {
  if (failed(expectInputs(n, 1, 1)))
    return failure();
  auto dims = shapeInput(n, 0, "shape");
  if (failed(dims) || failed(checkedDims(*dims, n.loc, "shape")))
    return failure();
  HostTensor fill = HostTensor::zeros(n.b.getF32Type(), {1});
  if (const onnx::TensorProto *t = n.attrTensor("value")) {
    auto h = readTensorProto(*t, n.ctx(), n.loc, "value");
    if (failed(h))
      return failure();
    if (h->numel() != 1)
      return n.error() << "value must hold one element";
    fill = std::move(*h);
  }
  auto type = RankedTensorType::get(*dims, fill.elementType);
  if (!isSmall(*dims)) {
    // Too big to fold: a splat constant costs nothing to hold.
    HostTensor one = fill.reshaped({});
    auto splat =
        DenseElementsAttr::get(type, one.toAttr().getSplatValue<Attribute>());
    return n.setResult(0, ConstantOp::create(n.b, n.loc, splat));
  }
  return n.setConst(0,
                    foldElementwise({&fill}, *dims, fill.elementType,
                                    [](ArrayRef<double> a) { return a[0]; }));
}

LogicalResult lowerRange(NodeContext &n) {
  if (failed(expectInputs(n, 3, 3)))
    return failure();
  auto start = n.requireConst(0, "start");
  auto limit = n.requireConst(1, "limit");
  auto delta = n.requireConst(2, "delta");
  if (failed(start) || failed(limit) || failed(delta))
    return failure();
  double s = (*start)->asDouble(0), l = (*limit)->asDouble(0),
         d = (*delta)->asDouble(0);
  if (d == 0 || (*start)->numel() != 1)
    return n.error() << "needs scalar inputs and a non-zero delta";
  double count = std::max(std::ceil((l - s) / d), 0.0);
  if (count > (double)kMaxFoldElements)
    return n.error() << "range of " << count << " elements is too large";
  HostTensor out = HostTensor::zeros((*start)->elementType, {(int64_t)count});
  for (int64_t i = 0; i < (int64_t)count; ++i)
    out.set(i, s + i * d);
  return n.setConst(0, out);
}

} // namespace

void mlir::fsdp::onnx_ops::addShapeOps(llvm::StringMap<LowerFn> &table) {
  addRows(table, {
                     {"Constant", lowerConstant},
                     {"Shape", lowerShape},
                     {"Size", lowerSize},
                     {"ConstantOfShape", lowerConstantOfShape},
                     {"Range", lowerRange},
                 });
}
