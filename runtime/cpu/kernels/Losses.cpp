//===- Losses.cpp - Indexing and losses (CPU) -----------------------------===//
//
// Indexing (gather, scatter-add) and the losses with their gradients.
// (Declared in KernelSupport.h; dispatched by runtime/cpu/Kernels.cpp.)
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/kernels/KernelSupport.h"

namespace fsdp::cpu::kernels {

//===----------------------------------------------------------------------===//
// Indexing and losses
//===----------------------------------------------------------------------===//

Status kGather(const Instruction &in, Context &c) {
  const TensorRef &data = in.in[0], &idx = in.in[1], &y = in.out[0];
  int64_t axis = attrInt(in, "axis", 0);
  if (axis < 0 || axis >= data.rank() || idx.dtype != DType::I64 ||
      data.dtype != y.dtype)
    return Status::error("bad axis or dtypes");
  int64_t outer = product(data.shape, 0, axis), dim = data.shape[axis],
          inner = product(data.shape, axis + 1), count = idx.numel();
  if (y.numel() != outer * count * inner)
    return Status::error("output " + shapeString(y.shape) + " does not match");
  int64_t size = dtypeSize(data.dtype) * inner;
  const uint8_t *pd = c.get<uint8_t>(data);
  const int64_t *pi = c.get<int64_t>(idx);
  uint8_t *py = c.get<uint8_t>(y);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < count; ++j) {
      int64_t k = pi[j] < 0 ? pi[j] + dim : pi[j];
      if (k < 0 || k >= dim)
        return Status::error("index " + std::to_string(pi[j]) +
                             " is out of range for extent " +
                             std::to_string(dim));
      std::memcpy(py + (o * count + j) * size, pd + (o * dim + k) * size, size);
    }
  return Status::ok();
}

Status kScatterAdd(const Instruction &in, Context &c) {
  const TensorRef &dest = in.in[0], &idx = in.in[1], &upd = in.in[2],
                  &y = in.out[0];
  int64_t axis = attrInt(in, "axis", 0);
  if (axis < 0 || axis >= dest.rank() || dest.shape != y.shape ||
      idx.dtype != DType::I64)
    return Status::error("bad axis or shapes");
  // f32, or int64 exactly (tokens per expert, a histogram); the data were
  // read as f32 whatever their type, and an int64 count came out as noise.
  if ((dest.dtype != DType::F32 && dest.dtype != DType::I64) ||
      upd.dtype != dest.dtype || y.dtype != dest.dtype)
    return Status::error("expects f32 or i64 data and updates of one dtype");
  int64_t outer = product(dest.shape, 0, axis), dim = dest.shape[axis],
          inner = product(dest.shape, axis + 1), count = idx.numel();
  if (upd.numel() != outer * count * inner)
    return Status::error("updates " + shapeString(upd.shape) + " do not match");
  auto add = [&](auto *py, const auto *pd, const auto *pu, auto plus) {
    const int64_t *pi = c.get<int64_t>(idx);
    if ((const void *)py != (const void *)pd)
      std::memcpy(py, pd, dest.bytes());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < count; ++j) {
        int64_t k = pi[j] < 0 ? pi[j] + dim : pi[j];
        if (k < 0 || k >= dim)
          return Status::error("index " + std::to_string(pi[j]) +
                               " is out of range");
        auto *row = py + (o * dim + k) * inner;
        const auto *src = pu + (o * count + j) * inner;
        for (int64_t t = 0; t < inner; ++t)
          row[t] = plus(row[t], src[t]);
      }
    return Status::ok();
  };
  if (dest.dtype == DType::I64)
    return add(c.get<int64_t>(y), c.get<int64_t>(dest), c.get<int64_t>(upd),
               [](int64_t a, int64_t b) { return um::wrapAdd(a, b); });
  return add(c.get<float>(y), c.get<float>(dest), c.get<float>(upd),
             [](float a, float b) { return a + b; });
}

/// Shared layout of cross-entropy style ops: input [N, C, d...], target [N,
/// d...].
struct LossLayout {
  int64_t n = 0, classes = 0, inner = 0;
};
Status lossLayout(const TensorRef &x, const TensorRef &t, LossLayout &l) {
  if (x.rank() < 2 || t.dtype != DType::I64 ||
      t.numel() * x.shape[1] != x.numel())
    return Status::error("input " + shapeString(x.shape) + " and target " +
                         shapeString(t.shape) + " do not match");
  l.n = x.shape[0];
  l.classes = x.shape[1];
  l.inner = product(x.shape, 2);
  return Status::ok();
}

/// What a loss reads besides its input: the targets, the optional class
/// weight and the ignored class, checked against the layout.
struct LossTargets {
  LossLayout l;
  const int64_t *target = nullptr;
  const float *weight = nullptr; // null: every class weighs 1
  bool hasIgnore = false;
  int64_t ignore = 0;
  double weightOf(int64_t cls) const { return weight ? weight[cls] : 1.0; }
  bool ignored(int64_t cls) const { return hasIgnore && cls == ignore; }
};
Status lossTargets(const Instruction &in, Context &c, LossTargets &t) {
  FSDP_RETURN_IF_ERROR(lossLayout(in.in[0], in.in[1], t.l));
  // The optional class weight follows the targets (and, for the gradients,
  // the incoming loss gradient).
  size_t wi = in.op == "cross_entropy" || in.op == "nll_loss" ? 2 : 3;
  const TensorRef *weight = in.in.size() > wi ? &in.in[wi] : nullptr;
  if (weight && (weight->numel() != t.l.classes || weight->dtype != DType::F32))
    return Status::error("class weight " + shapeString(weight->shape) +
                         " does not match " + std::to_string(t.l.classes) +
                         " classes");
  t.target = c.get<int64_t>(in.in[1]);
  t.weight = weight ? c.get<float>(*weight) : nullptr;
  t.hasIgnore = in.attrs.contains("ignore_index");
  t.ignore = attrInt(in, "ignore_index", 0);
  return Status::ok();
}

/// Per-position terms f(pos, cls, weight, row, stride) (cls < 0: ignored);
/// returns the total weight of non-ignored positions.
template <typename F>
Status lossTerms(const Instruction &in, Context &c, bool softmax, F f,
                 double &totalWeight) {
  LossTargets t;
  FSDP_RETURN_IF_ERROR(lossTargets(in, c, t));
  const LossLayout &l = t.l;
  const float *px = c.get<float>(in.in[0]);
  totalWeight = 0;
  (void)softmax;
  for (int64_t s = 0; s < l.n; ++s)
    for (int64_t i = 0; i < l.inner; ++i) {
      int64_t pos = s * l.inner + i, cls = t.target[pos];
      if (t.ignored(cls)) {
        f(pos, -1, 0, nullptr, l.inner);
        continue;
      }
      if (cls < 0 || cls >= l.classes)
        return Status::error("target " + std::to_string(cls) +
                             " is out of range for " +
                             std::to_string(l.classes) + " classes");
      double w = t.weightOf(cls);
      totalWeight += w;
      f(pos, cls, w, px + s * l.classes * l.inner + i, l.inner);
    }
  return Status::ok();
}

double logSumExp(const float *row, int64_t classes, int64_t stride) {
  double mx = -std::numeric_limits<double>::infinity(), sum = 0;
  for (int64_t j = 0; j < classes; ++j)
    mx = std::max(mx, (double)row[j * stride]);
  for (int64_t j = 0; j < classes; ++j)
    sum += std::exp(row[j * stride] - mx);
  return mx + std::log(sum);
}

/// log(sum(exp(row))) of a contiguous row, vectorised (libmvec's expf),
/// the sum in float lanes then double.
FSDP_VECTOR_CLONES
float rowMax(const float *row, int64_t classes) {
  float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
  for (int64_t j = 0; j < classes; ++j)
    mx = row[j] > mx ? row[j] : mx;
  return mx;
}

FSDP_VECTOR_CLONES
double rowLogSumExp(const float *row, int64_t classes) {
  float mx = rowMax(row, classes), sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < classes; ++j)
    sum += expf(row[j] - mx);
  // A NaN logit makes the sum NaN (mx may have skipped it).
  return (double)mx + std::log((double)sum);
}

/// out[j] = exp(row[j] - max(row)) for a contiguous row, and its
/// log-sum-exp in `lse` (the sum as rowLogSumExp's); returns the max.
FSDP_VECTOR_CLONES
float rowExpShifted(const float *row, float *out, int64_t classes,
                    double &lse) {
  float mx = rowMax(row, classes), sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < classes; ++j) {
    float e = expf(row[j] - mx);
    out[j] = e;
    sum += e;
  }
  lse = (double)mx + std::log((double)sum);
  return mx;
}

/// A row's log-sum-exp for each of `rows` rows, on the calling thread's
/// buffer (grows once, then reused: no allocation in a step).
double *logSumExpBuffer(int64_t rows) {
  static thread_local std::vector<double> lse;
  if ((int64_t)lse.size() < rows)
    lse.resize(rows);
  return lse.data();
}

/// The log-sum-exp of every row of an [N, C] input (the common layout:
/// rows contiguous), the rows split over the threads.
const double *rowsLogSumExp(const float *x, int64_t rows, int64_t classes) {
  double *out = logSumExpBuffer(rows);
#pragma omp parallel for if (rows * classes > kParallelMin)
  for (int64_t r = 0; r < rows; ++r)
    out[r] = rowLogSumExp(x + r * classes, classes);
  return out;
}

/// Whether a softmax loss over `x` takes the row path: [N, C] f32, rows
/// contiguous (the common layout).
bool softmaxRows(const TensorRef &x, bool softmax) {
  return softmax && x.rank() == 2 && x.dtype == DType::F32;
}

/// The loss (out[0]); `lse`, when given, is every row's log-sum-exp
/// already computed (softmaxRows layouts only).
Status classificationLoss(const Instruction &in, Context &c, bool softmax,
                          const double *lse = nullptr) {
  const TensorRef &y = in.out[0];
  std::string reduction = attrString(in, "reduction", "mean");
  int64_t classes = in.in[0].rank() >= 2 ? in.in[0].shape[1] : 0;
  float *py = c.get<float>(y);
  if (reduction == "none" && y.numel() != in.in[1].numel())
    return Status::error("output does not match the targets");
  if (reduction != "none" && y.numel() != 1)
    return Status::error("a reduced loss is a scalar");
  double sum = 0, total = 0;
  const TensorRef &x = in.in[0];
  if (!lse && softmaxRows(x, softmax))
    lse = rowsLogSumExp(c.get<float>(x), x.shape[0], classes);
  FSDP_RETURN_IF_ERROR(lossTerms(
      in, c, softmax,
      [&](int64_t pos, int64_t cls, double w, const float *row,
          int64_t stride) {
        double term = 0;
        if (cls >= 0)
          term = w * ((lse       ? lse[pos]
                       : softmax ? logSumExp(row, classes, stride)
                                 : 0.0) -
                      row[cls * stride]);
        if (reduction == "none")
          py[pos] = (float)term;
        sum += term;
      },
      total));
  if (reduction == "mean")
    py[0] = (float)(sum / total);
  else if (reduction == "sum")
    py[0] = (float)sum;
  return Status::ok();
}

Status kCrossEntropy(const Instruction &in, Context &c) {
  return classificationLoss(in, c, true);
}
Status kNllLoss(const Instruction &in, Context &c) {
  return classificationLoss(in, c, false);
}

/// The gradient (cross_entropy_grad's output, cross_entropy_with_grad's
/// second). On the row path each row's log-sum-exp is computed and its
/// gradient written in one visit (the row read from memory once, then from
/// cache), and the log-sum-exps are left in logSumExpBuffer for the loss.
FSDP_VECTOR_CLONES
Status kCrossEntropyGrad(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &g = in.in[2], &y = in.out.back();
  bool softmax = attrString(in, "kind", "softmax") == "softmax";
  std::string reduction = attrString(in, "reduction", "mean");
  if (x.shape != y.shape || x.rank() < 2)
    return Status::error("output does not match the input");
  int64_t classes = x.shape[1];
  const float *pg = c.get<float>(g);
  float *py = c.get<float>(y);
  const float *px = c.get<float>(x);
  // First pass: the total weight (for mean); second: the gradient rows.
  double total = 0;
  FSDP_RETURN_IF_ERROR(lossTerms(
      in, c, softmax, [](int64_t, int64_t, double, const float *, int64_t) {},
      total));
  int64_t inner = product(x.shape, 2);
  if (softmaxRows(x, softmax)) {
    // [N, C], rows contiguous (the common case): the rows split over the
    // threads, softmax vectorised; the targets were checked by the pass
    // above.
    LossTargets t;
    FSDP_RETURN_IF_ERROR(lossTargets(in, c, t));
    int64_t rows = x.shape[0];
    double *lse = logSumExpBuffer(rows);
#pragma omp parallel for if (rows * classes > kParallelMin)
    for (int64_t r = 0; r < rows; ++r) {
      const float *row = px + r * classes;
      float *out = py + r * classes;
      int64_t cls = t.target[r];
      if (t.ignored(cls)) {
        lse[r] = 0; // (the loss skips the row)
#pragma omp simd
        for (int64_t j = 0; j < classes; ++j)
          out[j] = 0;
        continue;
      }
      // exp(x - max) into the output while summing it (one exp a logit),
      // then scaled in place by w * scale * exp(max - lse): exp(x - lse)
      // with the float max's rounding in the double factor.
      float mx = rowExpShifted(row, out, classes, lse[r]);
      double w = t.weightOf(cls);
      double scale = reduction == "none"   ? pg[r]
                     : reduction == "mean" ? pg[0] / total
                                           : pg[0];
      float ws = (float)(w * scale * std::exp((double)mx - lse[r]));
#pragma omp simd
      for (int64_t j = 0; j < classes; ++j)
        out[j] *= ws;
      out[cls] =
          (float)(w * scale * (std::exp((double)row[cls] - lse[r]) - 1.0));
    }
    return Status::ok();
  }
  double again = 0; // the second pass recounts; `total` must stay fixed
  return lossTerms(
      in, c, softmax,
      [&](int64_t pos, int64_t cls, double w, const float *, int64_t stride) {
        int64_t s = pos / inner, i = pos % inner;
        const float *row = px + s * classes * inner + i;
        float *out = py + s * classes * inner + i;
        double scale = reduction == "none"   ? pg[pos]
                       : reduction == "mean" ? pg[0] / total
                                             : pg[0];
        if (cls < 0) {
          for (int64_t j = 0; j < classes; ++j)
            out[j * stride] = 0;
          return;
        }
        double lse = softmax ? logSumExp(row, classes, stride) : 0;
        for (int64_t j = 0; j < classes; ++j) {
          double p = softmax ? std::exp(row[j * stride] - lse) : 0.0;
          out[j * stride] = (float)(w * scale * (p - (j == cls ? 1.0 : 0.0)));
        }
      },
      again);
}

/// The gradient first (on the row path it leaves each row's log-sum-exp
/// behind), then the loss from those and the target logits: the logits are
/// read from memory once for both.
Status kCrossEntropyWithGrad(const Instruction &in, Context &c) {
  FSDP_RETURN_IF_ERROR(kCrossEntropyGrad(in, c));
  const TensorRef &x = in.in[0];
  return classificationLoss(in, c, true,
                            softmaxRows(x, true) ? logSumExpBuffer(x.shape[0])
                                                 : nullptr);
}

} // namespace fsdp::cpu::kernels
