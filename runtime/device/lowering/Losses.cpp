//===- Losses.cpp - Indexing and losses (device lowering) -----------------===//
//
// Indexing and losses as device operations (declared in LoweringSupport.h;
// found through common/Ops.def by runtime/device/Lowering.cpp).
//
//===----------------------------------------------------------------------===//
#include "runtime/device/lowering/LoweringSupport.h"

namespace fsdp::device::lowering {

//===----------------------------------------------------------------------===//
// Indexing and losses
//===----------------------------------------------------------------------===//

Status lowerGather(Ctx &c) {
  const TensorRef &data = c.in.in[0], &idx = c.in.in[1], &y = c.in.out[0];
  int64_t axis = c.attrInt("axis", 0);
  if (axis < 0 || axis >= data.rank() || idx.dtype != DType::I64 ||
      data.dtype != y.dtype)
    return Status::error("bad axis or dtypes");
  int64_t outer = product(data.shape, 0, axis), dim = data.shape[axis],
          inner = product(data.shape, axis + 1), count = idx.numel();
  if (y.numel() != outer * count * inner)
    return Status::error("output " + shapeString(y.shape) + " does not match");
  c.emit(y.numel(),
         Gather{dim, inner, count, dtypeSize(data.dtype), c.at<uint8_t>(data),
                c.at<int64_t>(idx), c.at<uint8_t>(y), c.mem.error});
  return Status::ok();
}

Status lowerScatterAdd(Ctx &c) {
  const TensorRef &dest = c.in.in[0], &idx = c.in.in[1], &upd = c.in.in[2],
                  &y = c.in.out[0];
  int64_t axis = c.attrInt("axis", 0);
  bool ints = dest.dtype == DType::I64;
  if (axis < 0 || axis >= dest.rank() || dest.shape != y.shape ||
      idx.dtype != DType::I64 ||
      (dest.dtype != DType::F32 && dest.dtype != DType::I64) ||
      upd.dtype != dest.dtype || y.dtype != dest.dtype)
    return Status::error("bad axis or shapes, or dtypes other than one of f32 "
                         "and i64");
  int64_t outer = product(dest.shape, 0, axis), dim = dest.shape[axis],
          inner = product(dest.shape, axis + 1), count = idx.numel();
  if (upd.numel() != outer * count * inner)
    return Status::error("updates " + shapeString(upd.shape) + " do not match");
  copy(c, dest, y);
  if (ints)
    c.emit(upd.numel(), ScatterAddInt{dim, inner, count, c.at<int64_t>(upd),
                                      c.at<int64_t>(idx), c.at<int64_t>(y),
                                      c.mem.error});
  else
    c.emit(upd.numel(),
           ScatterAdd{dim, inner, count, c.at<float>(upd), c.at<int64_t>(idx),
                      c.at<float>(y), c.mem.error});
  return Status::ok();
}

/// Cross-entropy layout: input [N, C, d...], targets [N, d...], an optional
/// class weight after the targets (and the incoming gradient).
Status lossLayout(Ctx &c, bool softmax, LossLayout &l, int64_t &positions) {
  const TensorRef &x = c.in.in[0], &t = c.in.in[1];
  if (x.rank() < 2 || t.dtype != DType::I64 || !gemmType(x.dtype) ||
      t.numel() * x.shape[1] != x.numel())
    return Status::error("input " + shapeString(x.shape) + " and target " +
                         shapeString(t.shape) + " do not match");
  size_t wi = c.in.op == "cross_entropy" || c.in.op == "nll_loss" ? 2 : 3;
  const TensorRef *weight = c.in.in.size() > wi ? &c.in.in[wi] : nullptr;
  if (weight && (weight->numel() != x.shape[1] || weight->dtype != DType::F32))
    return Status::error("class weight " + shapeString(weight->shape) +
                         " does not match " + std::to_string(x.shape[1]) +
                         " classes");
  l = LossLayout{};
  l.classes = x.shape[1];
  l.inner = product(x.shape, 2);
  l.softmax = softmax;
  l.hasIgnore = c.in.attrs.contains("ignore_index");
  l.ignore = c.attrInt("ignore_index", 0);
  l.weight = weight ? c.at<float>(*weight) : nullptr;
  l.type = elemOf(x.dtype);
  positions = t.numel();
  return Status::ok();
}

LossReduction reductionOf(const std::string &r) {
  return r == "none"  ? LossReduction::None
         : r == "sum" ? LossReduction::Sum
                      : LossReduction::Mean;
}

/// The terms, their weights (doubles) and the total weight, in scratch.
struct LossScratch {
  double *term, *weight, *total;
  float *sink; // LossReduce's output when only the total is wanted
};
LossScratch lossScratch(const Memory &mem, int64_t positions) {
  double *base = reinterpret_cast<double *>(mem.scratch);
  return {base, base + positions, base + 2 * positions,
          reinterpret_cast<float *>(base + 2 * positions + 1)};
}

Status classificationLoss(Ctx &c, bool softmax) {
  const TensorRef &y = c.in.out[0];
  std::string reduction = c.attrString("reduction", "mean");
  LossLayout l;
  int64_t n;
  FSDP_RETURN_IF_ERROR(lossLayout(c, softmax, l, n));
  if (reduction == "none" && y.numel() != n)
    return Status::error("output does not match the targets");
  if (reduction != "none" && y.numel() != 1)
    return Status::error("a reduced loss is a scalar");
  LossScratch s = lossScratch(c.mem, n);
  if (y.dtype != DType::F32)
    return Status::error("the loss is f32");
  c.emit(n, LossTerms{l, c.at(c.in.in[0]), c.at<int64_t>(c.in.in[1]), s.term,
                      s.weight, c.mem.error});
  c.emit(1, LossReduce{reductionOf(reduction), n, s.term, s.weight,
                       c.at<float>(y), s.total});
  return Status::ok();
}

Status lowerCrossEntropy(Ctx &c) { return classificationLoss(c, true); }
Status lowerNllLoss(Ctx &c) { return classificationLoss(c, false); }

/// The gradient: cross_entropy_grad's output, cross_entropy_with_grad's
/// second. `totalKnown`: the loss's LossReduce has left the total weight in
/// the scratch already.
Status crossEntropyGrad(Ctx &c, bool totalKnown) {
  const TensorRef &x = c.in.in[0], &g = c.in.in[2], &y = c.in.out.back();
  bool softmax = c.attrString("kind", "softmax") == "softmax";
  std::string reduction = c.attrString("reduction", "mean");
  if (x.shape != y.shape || x.dtype != y.dtype || x.rank() < 2 ||
      g.dtype != DType::F32)
    return Status::error("output does not match the input");
  LossLayout l;
  int64_t n;
  FSDP_RETURN_IF_ERROR(lossLayout(c, softmax, l, n));
  LossScratch s = lossScratch(c.mem, n);
  // The total weight first (for mean: the terms without their
  // log-sum-exp, which is all LossTerms reads the rows for), then the
  // gradient rows.
  if (!totalKnown) {
    LossLayout weights = l;
    weights.softmax = false;
    c.emit(n, LossTerms{weights, c.at(x), c.at<int64_t>(c.in.in[1]), s.term,
                        s.weight, c.mem.error});
    c.emit(1, LossReduce{LossReduction::Sum, n, s.term, s.weight, s.sink,
                         s.total});
  }
  c.emit(n, LossGradRows{l, reductionOf(reduction), c.at(x), c.at<float>(g),
                         c.at<int64_t>(c.in.in[1]), s.total, c.at(y)});
  return Status::ok();
}

Status lowerCrossEntropyGrad(Ctx &c) { return crossEntropyGrad(c, false); }

/// The loss, then the gradient rows with the loss's total weight: the
/// logits read twice (each kernel computes a row's log-sum-exp as its block
/// reduces it), not the CPU's once, and the targets' weights summed once.
Status lowerCrossEntropyWithGrad(Ctx &c) {
  FSDP_RETURN_IF_ERROR(classificationLoss(c, true));
  return crossEntropyGrad(c, true);
}

} // namespace fsdp::device::lowering
