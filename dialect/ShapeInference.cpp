//===- ShapeInference.cpp - Shape rules of fsdp tensor ops ----------------===//
#include "dialect/ShapeInference.h"
#include "common/ConvGeometry.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/TypeRange.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::fsdp;

namespace {
std::string str(ArrayRef<int64_t> dims) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleaveComma(dims, os);
  os << "]";
  return s;
}
} // namespace

FailureOr<int64_t> shape::normalizeAxis(Loc loc, int64_t axis, int64_t rank,
                                        StringRef what) {
  if (axis < -rank || axis >= rank || rank == 0)
    return emitOptionalError(loc, what, " ", axis, " is out of range for rank ",
                             rank);
  return axis < 0 ? axis + rank : axis;
}

FailureOr<SmallVector<int64_t>>
shape::broadcastShapes(Loc loc, ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return emitOptionalError(loc, "shapes ", str(a), " and ", str(b),
                               " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

FailureOr<RankedTensorType> shape::binary(Loc loc, RankedTensorType lhs,
                                          RankedTensorType rhs,
                                          Type resultElement) {
  if (lhs.getElementType() != rhs.getElementType())
    return emitOptionalError(
        loc, "operand element types differ: ", lhs.getElementType(), " and ",
        rhs.getElementType());
  auto dims = broadcastShapes(loc, lhs.getShape(), rhs.getShape());
  if (failed(dims))
    return failure();
  return RankedTensorType::get(*dims, resultElement ? resultElement
                                                    : lhs.getElementType());
}

FailureOr<RankedTensorType> shape::where(Loc loc, RankedTensorType cond,
                                         RankedTensorType x,
                                         RankedTensorType y) {
  if (x.getElementType() != y.getElementType())
    return emitOptionalError(loc, "selected element types differ: ",
                             x.getElementType(), " and ", y.getElementType());
  auto xy = broadcastShapes(loc, x.getShape(), y.getShape());
  if (failed(xy))
    return failure();
  auto all = broadcastShapes(loc, cond.getShape(), *xy);
  if (failed(all))
    return failure();
  return RankedTensorType::get(*all, x.getElementType());
}

FailureOr<RankedTensorType> shape::matmul(Loc loc, RankedTensorType lhs,
                                          RankedTensorType rhs,
                                          bool transposeLhs,
                                          bool transposeRhs) {
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return emitOptionalError(loc, "matmul operands need rank >= 2, got ", lhs,
                             " and ", rhs);
  if (lhs.getElementType() != rhs.getElementType())
    return emitOptionalError(loc, "matmul element types differ: ", lhs, " and ",
                             rhs);
  ArrayRef<int64_t> a = lhs.getShape(), b = rhs.getShape();
  int64_t m = a[a.size() - 2], ka = a.back();
  if (transposeLhs)
    std::swap(m, ka);
  int64_t kb = b[b.size() - 2], n = b.back();
  if (transposeRhs)
    std::swap(kb, n);
  if (ka != kb)
    return emitOptionalError(loc, "matmul contraction dimensions differ: ", lhs,
                             " and ", rhs, " (", ka, " vs ", kb, ")");
  auto batch = broadcastShapes(loc, a.drop_back(2), b.drop_back(2));
  if (failed(batch))
    return failure();
  SmallVector<int64_t> out = *batch;
  out.push_back(m);
  out.push_back(n);
  return RankedTensorType::get(out, lhs.getElementType());
}

FailureOr<RankedTensorType> shape::gemm(Loc loc, RankedTensorType a,
                                        RankedTensorType b, RankedTensorType c,
                                        bool transA, bool transB) {
  if (a.getRank() != 2 || b.getRank() != 2)
    return emitOptionalError(loc, "gemm operands must be 2-D, got ", a, " and ",
                             b);
  auto mm = matmul(loc, a, b, transA, transB);
  if (failed(mm) || !c)
    return mm;
  if (c.getElementType() != a.getElementType())
    return emitOptionalError(loc, "gemm bias element type ", c.getElementType(),
                             " differs from ", a.getElementType());
  if (failed(checkBroadcastTo(loc, c, *mm)))
    return failure();
  return mm;
}

FailureOr<RankedTensorType> shape::reduce(Loc loc, RankedTensorType x,
                                          ArrayRef<int64_t> axes,
                                          bool keepdims) {
  SmallVector<int64_t> out;
  int64_t prev = -1;
  for (int64_t axis : axes) {
    if (axis <= prev || axis >= x.getRank())
      return emitOptionalError(loc, "reduction axes ", str(axes),
                               " must be sorted, unique and in [0, ",
                               x.getRank(), ")");
    prev = axis;
  }
  for (int64_t i = 0; i < x.getRank(); ++i) {
    if (!llvm::is_contained(axes, i))
      out.push_back(x.getDimSize(i));
    else if (keepdims)
      out.push_back(1);
  }
  return RankedTensorType::get(out, x.getElementType());
}

FailureOr<RankedTensorType> shape::transpose(Loc loc, RankedTensorType x,
                                             ArrayRef<int64_t> perm) {
  if ((int64_t)perm.size() != x.getRank())
    return emitOptionalError(loc, "permutation ", str(perm),
                             " does not match rank ", x.getRank());
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> out;
  for (int64_t p : perm) {
    if (p < 0 || p >= x.getRank() || seen[p])
      return emitOptionalError(loc, "invalid permutation ", str(perm));
    seen[p] = true;
    out.push_back(x.getDimSize(p));
  }
  return RankedTensorType::get(out, x.getElementType());
}

FailureOr<RankedTensorType> shape::slice(Loc loc, RankedTensorType x,
                                         ArrayRef<int64_t> starts,
                                         ArrayRef<int64_t> limits,
                                         ArrayRef<int64_t> strides) {
  int64_t rank = x.getRank();
  if ((int64_t)starts.size() != rank || (int64_t)limits.size() != rank ||
      (int64_t)strides.size() != rank)
    return emitOptionalError(loc,
                             "slice needs one start, limit and stride "
                             "per dimension (rank ",
                             rank, ")");
  SmallVector<int64_t> out;
  for (int64_t i = 0; i < rank; ++i) {
    int64_t dim = x.getDimSize(i);
    if (strides[i] <= 0)
      return emitOptionalError(loc, "slice stride ", strides[i],
                               " of dimension ", i, " must be positive");
    if (starts[i] < 0 || starts[i] > limits[i] || limits[i] > dim)
      return emitOptionalError(loc, "slice [", starts[i], ", ", limits[i],
                               ") of dimension ", i, " is outside [0, ", dim,
                               "]");
    out.push_back((limits[i] - starts[i] + strides[i] - 1) / strides[i]);
  }
  return RankedTensorType::get(out, x.getElementType());
}

FailureOr<RankedTensorType> shape::concat(Loc loc, TypeRange inputs,
                                          int64_t axis) {
  if (inputs.empty())
    return emitOptionalError(loc, "concat needs at least one input");
  auto first = cast<RankedTensorType>(inputs[0]);
  if (axis < 0 || axis >= first.getRank())
    return emitOptionalError(loc, "concat axis ", axis,
                             " is out of range for rank ", first.getRank());
  SmallVector<int64_t> out(first.getShape());
  out[axis] = 0;
  for (Type t : inputs) {
    auto tt = cast<RankedTensorType>(t);
    if (tt.getElementType() != first.getElementType() ||
        tt.getRank() != first.getRank())
      return emitOptionalError(loc, "concat inputs ", first, " and ", tt,
                               " differ in element type or rank");
    for (int64_t i = 0; i < tt.getRank(); ++i)
      if (i != axis && tt.getDimSize(i) != first.getDimSize(i))
        return emitOptionalError(loc, "concat inputs ", first, " and ", tt,
                                 " differ outside axis ", axis);
    out[axis] += tt.getDimSize(axis);
  }
  return RankedTensorType::get(out, first.getElementType());
}

FailureOr<SmallVector<Type>> shape::split(Loc loc, RankedTensorType x,
                                          int64_t axis,
                                          ArrayRef<int64_t> sizes) {
  if (axis < 0 || axis >= x.getRank())
    return emitOptionalError(loc, "split axis ", axis,
                             " is out of range for rank ", x.getRank());
  int64_t total = 0;
  SmallVector<Type> out;
  for (int64_t s : sizes) {
    if (s < 0)
      return emitOptionalError(loc, "split size ", s, " is negative");
    total += s;
    SmallVector<int64_t> dims(x.getShape());
    dims[axis] = s;
    out.push_back(RankedTensorType::get(dims, x.getElementType()));
  }
  if (total != x.getDimSize(axis))
    return emitOptionalError(loc, "split sizes ", str(sizes), " add up to ",
                             total, ", not to the extent ", x.getDimSize(axis),
                             " of axis ", axis);
  return out;
}

FailureOr<RankedTensorType> shape::gather(Loc loc, RankedTensorType data,
                                          RankedTensorType indices,
                                          int64_t axis) {
  if (!indices.getElementType().isSignlessInteger())
    return emitOptionalError(loc, "gather indices must be integers, got ",
                             indices);
  if (axis < 0 || axis >= data.getRank())
    return emitOptionalError(loc, "gather axis ", axis,
                             " is out of range for rank ", data.getRank());
  SmallVector<int64_t> out(data.getShape().take_front(axis));
  llvm::append_range(out, indices.getShape());
  llvm::append_range(out, data.getShape().drop_front(axis + 1));
  return RankedTensorType::get(out, data.getElementType());
}

/// A [..., S, H, D] tensor seen as [..., H, S, D] (attention's "bshd"
/// layout as "bhsd"), and back: the same swap.
static RankedTensorType swapRowsAndHeads(RankedTensorType t) {
  SmallVector<int64_t> s(t.getShape());
  std::swap(s[s.size() - 3], s[s.size() - 2]);
  return RankedTensorType::get(s, t.getElementType());
}

RankedTensorType shape::attentionLse(RankedTensorType q, bool bshd) {
  if (bshd && q.getRank() >= 3)
    q = swapRowsAndHeads(q);
  return RankedTensorType::get(q.getShape().drop_back(),
                               Float32Type::get(q.getContext()));
}

FailureOr<RankedTensorType> shape::attention(Loc loc, RankedTensorType q,
                                             RankedTensorType k,
                                             RankedTensorType v,
                                             RankedTensorType mask,
                                             bool bshd) {
  if (bshd) {
    if (q.getRank() < 3 || k.getRank() != q.getRank() ||
        v.getRank() != q.getRank())
      return emitOptionalError(loc, "attention in the bshd layout needs q, "
                                    "k, v of one rank >= 3, got ",
                               q, ", ", k, ", ", v);
    auto out = attention(loc, swapRowsAndHeads(q), swapRowsAndHeads(k),
                         swapRowsAndHeads(v), mask, false);
    if (failed(out))
      return failure();
    return swapRowsAndHeads(*out);
  }
  if (q.getRank() < 2 || q.getRank() != k.getRank() ||
      q.getRank() != v.getRank())
    return emitOptionalError(loc, "attention q, k, v need one rank >= 2, got ",
                             q, ", ", k, ", ", v);
  if (q.getElementType() != k.getElementType() ||
      q.getElementType() != v.getElementType())
    return emitOptionalError(loc, "attention q, k, v element types differ");
  int64_t r = q.getRank();
  // Grouped-query attention: k and v may have fewer heads (the batch
  // dimension just before the rows), a divisor of q's; query head h reads
  // key head h / (H / Hk), as repeat_kv's repeat_interleave gives it.
  auto sameBatch = [&](RankedTensorType t) {
    if (t.getShape().drop_back(2) == q.getShape().drop_back(2))
      return true;
    if (r < 3 || t.getShape().drop_back(3) != q.getShape().drop_back(3))
      return false;
    int64_t hq = q.getDimSize(r - 3), hk = t.getDimSize(r - 3);
    return hk > 0 && hq % hk == 0;
  };
  if (!sameBatch(k) || !sameBatch(v) ||
      k.getShape().drop_back(2) != v.getShape().drop_back(2))
    return emitOptionalError(loc, "attention batch dimensions differ: ", q,
                             ", ", k, ", ", v,
                             " (k and v may have fewer heads, a divisor of q's)");
  if (q.getDimSize(r - 1) != k.getDimSize(r - 1))
    return emitOptionalError(loc, "attention q and k head sizes differ: ", q,
                             " and ", k);
  if (k.getDimSize(r - 2) != v.getDimSize(r - 2))
    return emitOptionalError(loc, "attention k and v lengths differ: ", k,
                             " and ", v);
  SmallVector<int64_t> out(q.getShape());
  out.back() = v.getDimSize(r - 1);
  if (mask) {
    SmallVector<int64_t> scores(q.getShape());
    scores.back() = k.getDimSize(r - 2);
    auto scoresType = RankedTensorType::get(scores, mask.getElementType());
    if (!mask.getElementType().isInteger(1) &&
        mask.getElementType() != q.getElementType())
      return emitOptionalError(loc, "attention mask must be i1 or ",
                               q.getElementType(), ", got ", mask);
    if (failed(checkBroadcastTo(loc, mask, scoresType)))
      return failure();
  }
  return RankedTensorType::get(out, q.getElementType());
}

FailureOr<RankedTensorType> shape::conv(Loc loc, RankedTensorType x,
                                        RankedTensorType w,
                                        RankedTensorType bias,
                                        const ConvAttrs &a) {
  int64_t r = x.getRank();
  if (r != 3 && r != 4)
    return emitOptionalError(loc, "conv input must be [N, C, L] or "
                                  "[N, C, H, W], got ", x);
  if (w.getRank() != r)
    return emitOptionalError(loc, "conv weight ", w,
                             " must have the input's rank ", r);
  if (x.getElementType() != w.getElementType() ||
      (bias && bias.getElementType() != x.getElementType()))
    return emitOptionalError(loc, "conv operand element types differ");
  size_t spatial = r - 2;
  if (a.strides.size() != spatial || a.dilations.size() != spatial ||
      a.pads.size() != 2 * spatial)
    return emitOptionalError(loc, "conv needs ", spatial,
                             " strides and dilations and ", 2 * spatial,
                             " pads, got ", a.strides.size(), ", ",
                             a.dilations.size(), " and ", a.pads.size());
  int64_t c = x.getDimSize(1), oc = w.getDimSize(0);
  if (a.group < 1 || c % a.group != 0 || oc % a.group != 0)
    return emitOptionalError(loc, "conv group ", a.group,
                             " does not divide the channels ", c, " and ", oc);
  if (w.getDimSize(1) * a.group != c)
    return emitOptionalError(loc, "conv weight ", w, " takes ",
                             w.getDimSize(1) * a.group, " input channels, ",
                             "the input ", x, " has ", c);
  if (bias && (bias.getRank() != 1 || bias.getDimSize(0) != oc))
    return emitOptionalError(loc, "conv bias ", bias, " must be [", oc, "]");
  SmallVector<int64_t> out{x.getDimSize(0), oc};
  for (size_t d = 0; d < spatial; ++d) {
    if (a.strides[d] < 1 || a.dilations[d] < 1 || a.pads[d] < 0 ||
        a.pads[d + spatial] < 0 || w.getDimSize(2 + d) < 1)
      return emitOptionalError(loc, "conv strides and dilations must be "
                                    "positive and pads non-negative");
    int64_t o = ::fsdp::windowExtent(x.getDimSize(2 + d), w.getDimSize(2 + d),
                                     a.strides[d], a.pads[d],
                                     a.pads[d + spatial], a.dilations[d]);
    if (o < 1)
      return emitOptionalError(loc, "conv kernel ", str(w.getShape()),
                               " is larger than the padded input ", x);
    out.push_back(o);
  }
  return RankedTensorType::get(out, x.getElementType());
}

FailureOr<RankedTensorType> shape::pool(Loc loc, RankedTensorType x,
                                        const PoolAttrs &a) {
  if (a.mode != "max" && a.mode != "avg")
    return emitOptionalError(loc, "pool mode must be \"max\" or \"avg\", got \"",
                             a.mode, "\"");
  int64_t r = x.getRank();
  if (r != 3 && r != 4)
    return emitOptionalError(loc, "pool input must be [N, C, L] or "
                                  "[N, C, H, W], got ", x);
  size_t spatial = r - 2;
  if (a.kernel.size() != spatial || a.strides.size() != spatial ||
      a.dilations.size() != spatial || a.pads.size() != 2 * spatial)
    return emitOptionalError(loc, "pool needs ", spatial,
                             " kernel extents, strides and dilations and ",
                             2 * spatial, " pads");
  SmallVector<int64_t> out{x.getDimSize(0), x.getDimSize(1)};
  for (size_t d = 0; d < spatial; ++d) {
    if (a.kernel[d] < 1 || a.strides[d] < 1 || a.dilations[d] < 1 ||
        a.pads[d] < 0 || a.pads[d + spatial] < 0)
      return emitOptionalError(loc, "pool kernel, strides and dilations must "
                                    "be positive and pads non-negative");
    int64_t o = ::fsdp::windowExtent(x.getDimSize(2 + d), a.kernel[d],
                                     a.strides[d], a.pads[d],
                                     a.pads[d + spatial], a.dilations[d],
                                     a.ceilMode);
    if (o < 1)
      return emitOptionalError(loc, "pool window ", str(a.kernel),
                               " is larger than the padded input ", x);
    out.push_back(o);
  }
  return RankedTensorType::get(out, x.getElementType());
}

FailureOr<RankedTensorType> shape::batchNormStats(Loc loc, RankedTensorType x,
                                                  RankedTensorType scale,
                                                  RankedTensorType bias) {
  if (x.getRank() < 2)
    return emitOptionalError(loc, "batch norm input must be [N, C, ...], got ",
                             x);
  auto stats = RankedTensorType::get({x.getDimSize(1)}, x.getElementType());
  if (scale != stats || (bias && bias != stats))
    return emitOptionalError(loc, "batch norm scale and bias must be ",
                             stats, ", got ", scale, (bias ? " and " : ""),
                             bias ? Type(bias) : Type());
  return stats;
}

FailureOr<RankedTensorType> shape::classificationLoss(Loc loc,
                                                      RankedTensorType input,
                                                      RankedTensorType target,
                                                      RankedTensorType weight,
                                                      StringRef reduction) {
  if (input.getRank() < 2)
    return emitOptionalError(loc, "loss input must be [N, C, ...], got ",
                             input);
  if (!target.getElementType().isSignlessInteger())
    return emitOptionalError(loc, "loss target must hold integers, got ",
                             target);
  SmallVector<int64_t> expected{input.getDimSize(0)};
  llvm::append_range(expected, input.getShape().drop_front(2));
  if (target.getShape() != ArrayRef<int64_t>(expected))
    return emitOptionalError(loc, "loss target shape ", str(target.getShape()),
                             " does not match input ", input, " (expected ",
                             str(expected), ")");
  if (weight &&
      (weight.getRank() != 1 || weight.getDimSize(0) != input.getDimSize(1)))
    return emitOptionalError(loc, "loss weight must be [", input.getDimSize(1),
                             "], got ", weight);
  if (reduction == "none")
    return RankedTensorType::get(expected, input.getElementType());
  if (reduction != "mean" && reduction != "sum")
    return emitOptionalError(loc,
                             "loss reduction must be mean, sum or none, "
                             "got '",
                             reduction, "'");
  // A reduced loss of bf16/f16 inputs is accumulated and returned in f32:
  // rounding the scalar that is logged and differentiated gains nothing.
  Type element = input.getElementType();
  if (element.getIntOrFloatBitWidth() < 32)
    element = Float32Type::get(input.getContext());
  return RankedTensorType::get({}, element);
}

LogicalResult shape::checkBroadcastTo(Loc loc, RankedTensorType from,
                                      RankedTensorType to) {
  if (from.getElementType() != to.getElementType())
    return emitOptionalError(loc, "cannot broadcast ", from, " to ", to,
                             ": element types differ");
  auto dims = broadcastShapes(std::nullopt, from.getShape(), to.getShape());
  if (failed(dims) || ArrayRef<int64_t>(*dims) != to.getShape())
    return emitOptionalError(loc, "cannot broadcast ", from, " to ", to);
  return success();
}

LogicalResult shape::checkLayerNorm(Loc loc, RankedTensorType x,
                                    RankedTensorType scale,
                                    RankedTensorType bias, int64_t axis,
                                    StringRef what) {
  if (axis < 0 || axis >= x.getRank())
    return emitOptionalError(loc, what, " axis ", axis,
                             " is out of range for rank ", x.getRank());
  ArrayRef<int64_t> normalized = x.getShape().drop_front(axis);
  for (RankedTensorType t : {scale, bias}) {
    if (!t)
      continue;
    if (t.getShape() != normalized || t.getElementType() != x.getElementType())
      return emitOptionalError(loc, what, " scale/bias ", t,
                               " must have shape ", str(normalized),
                               " and element type ", x.getElementType());
  }
  return success();
}
