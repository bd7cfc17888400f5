//===- HostTensor.cpp - Small constant tensors folded at import -----------===//
#include "frontend/HostTensor.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;
using namespace mlir::fsdp;

static int64_t product(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

/// Row-major strides of `shape`.
static SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s(shape.size(), 1);
  for (int64_t i = (int64_t)shape.size() - 2; i >= 0; --i)
    s[i] = s[i + 1] * shape[i + 1];
  return s;
}

/// Rounds `v` to what the element type can hold.
static double roundTo(Type t, double v) {
  if (t.isF64())
    return v;
  if (t.isF32())
    return (double)(float)v;
  auto ft = dyn_cast<FloatType>(t);
  if (!ft)
    return v;
  llvm::APFloat f(v);
  bool lost;
  f.convert(ft.getFloatSemantics(), llvm::APFloat::rmNearestTiesToEven, &lost);
  f.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven,
            &lost);
  return f.convertToDouble();
}

static int64_t wrapInt(Type t, double v) {
  if (t.isInteger(1))
    return v != 0;
  if (std::isnan(v))
    return 0;
  unsigned width = t.getIntOrFloatBitWidth();
  int64_t x = v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? INT64_MIN : (int64_t)v;
  if (width >= 64)
    return x;
  uint64_t mask = (uint64_t(1) << width) - 1;
  uint64_t u = uint64_t(x) & mask;
  if (t.isUnsignedInteger())
    return (int64_t)u;
  if (u >> (width - 1))
    return (int64_t)(u | ~mask);
  return (int64_t)u;
}

int64_t HostTensor::numel() const { return product(shape); }

HostTensor HostTensor::zeros(Type elementType, ArrayRef<int64_t> shape) {
  HostTensor t;
  t.elementType = elementType;
  t.shape.assign(shape.begin(), shape.end());
  if (t.isFloat())
    t.floats.assign(t.numel(), 0.0);
  else
    t.ints.assign(t.numel(), 0);
  return t;
}

HostTensor HostTensor::fromInts(MLIRContext *ctx, ArrayRef<int64_t> values,
                                ArrayRef<int64_t> shape) {
  HostTensor t = zeros(IntegerType::get(ctx, 64), shape);
  t.ints.assign(values.begin(), values.end());
  return t;
}

void HostTensor::set(int64_t i, double v) {
  if (isFloat())
    floats[i] = roundTo(elementType, v);
  else
    ints[i] = wrapInt(elementType, v);
}

std::vector<int64_t> HostTensor::toInts() const {
  std::vector<int64_t> out(numel());
  for (int64_t i = 0; i < numel(); ++i)
    out[i] = asInt(i);
  return out;
}

DenseElementsAttr HostTensor::toAttr() const {
  RankedTensorType t = type();
  // Direct paths for the common types: masks can hold millions of elements.
  if (elementType.isF32()) {
    std::vector<float> vals(floats.begin(), floats.end());
    return DenseElementsAttr::get(t, ArrayRef<float>(vals));
  }
  if (elementType.isInteger(64) && !elementType.isUnsignedInteger())
    return DenseElementsAttr::get(t, ArrayRef<int64_t>(ints));
  if (auto ft = dyn_cast<FloatType>(elementType)) {
    SmallVector<APFloat> vals;
    vals.reserve(numel());
    for (double v : floats) {
      APFloat f(v);
      bool lost;
      f.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      vals.push_back(f);
    }
    return DenseElementsAttr::get(t, vals);
  }
  if (elementType.isInteger(1)) {
    SmallVector<bool> vals(ints.begin(), ints.end());
    return DenseElementsAttr::get(t, vals);
  }
  unsigned width = elementType.getIntOrFloatBitWidth();
  SmallVector<APInt> vals;
  vals.reserve(numel());
  for (int64_t v : ints)
    vals.push_back(APInt(width, (uint64_t)v, /*isSigned=*/true,
                         /*implicitTrunc=*/true));
  return DenseElementsAttr::get(t, vals);
}

HostTensor HostTensor::cast(Type to) const {
  HostTensor out = zeros(to, shape);
  for (int64_t i = 0; i < numel(); ++i)
    out.set(i, asDouble(i));
  return out;
}

HostTensor HostTensor::reshaped(ArrayRef<int64_t> newShape) const {
  HostTensor out = *this;
  out.shape.assign(newShape.begin(), newShape.end());
  return out;
}

/// An elementwise fold over broadcast operands, each element read by
/// `load(tensor, offset)`, the result's set by `store(out, i, value)`.
template <typename T, typename Load, typename Store>
static HostTensor foldEach(ArrayRef<const HostTensor *> operands,
                           ArrayRef<int64_t> resultShape, Type resultElement,
                           const std::function<T(ArrayRef<T>)> &fn, Load load,
                           Store store) {
  HostTensor out = HostTensor::zeros(resultElement, resultShape);
  size_t rank = resultShape.size();
  // Per operand: its strides aligned to the result, 0 on broadcast dims.
  SmallVector<SmallVector<int64_t>> strides;
  for (const HostTensor *op : operands) {
    SmallVector<int64_t> own = stridesOf(op->shape);
    SmallVector<int64_t> s(rank, 0);
    size_t lead = rank - op->shape.size();
    for (size_t d = 0; d < op->shape.size(); ++d)
      s[lead + d] = op->shape[d] == 1 ? 0 : own[d];
    strides.push_back(s);
  }
  SmallVector<int64_t> index(rank, 0);
  SmallVector<T> args(operands.size());
  for (int64_t i = 0, n = out.numel(); i < n; ++i) {
    for (size_t k = 0; k < operands.size(); ++k) {
      int64_t off = 0;
      for (size_t d = 0; d < rank; ++d)
        off += index[d] * strides[k][d];
      args[k] = load(*operands[k], off);
    }
    store(out, i, fn(args));
    for (int64_t d = (int64_t)rank - 1; d >= 0; --d) {
      if (++index[d] < resultShape[d])
        break;
      index[d] = 0;
    }
  }
  return out;
}

HostTensor
mlir::fsdp::foldElementwise(ArrayRef<const HostTensor *> operands,
                            ArrayRef<int64_t> resultShape, Type resultElement,
                            const std::function<double(ArrayRef<double>)> &fn) {
  return foldEach<double>(
      operands, resultShape, resultElement, fn,
      [](const HostTensor &t, int64_t i) { return t.asDouble(i); },
      [](HostTensor &out, int64_t i, double v) { out.set(i, v); });
}

HostTensor mlir::fsdp::foldElementwiseInts(
    ArrayRef<const HostTensor *> operands, ArrayRef<int64_t> resultShape,
    Type resultElement, const std::function<int64_t(ArrayRef<int64_t>)> &fn) {
  return foldEach<int64_t>(
      operands, resultShape, resultElement, fn,
      [](const HostTensor &t, int64_t i) { return t.asInt(i); },
      [](HostTensor &out, int64_t i, int64_t v) {
        out.ints[i] = out.elementType.isInteger(1) ? v != 0 : v;
      });
}

/// Visits every index of `shape` in row-major order.
static void forEachIndex(ArrayRef<int64_t> shape,
                         const std::function<void(ArrayRef<int64_t>)> &fn) {
  int64_t n = product(shape);
  SmallVector<int64_t> index(shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    fn(index);
    for (int64_t d = (int64_t)shape.size() - 1; d >= 0; --d) {
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
  }
}

/// Copies elements: result element i comes from source offset `src(index)`.
static HostTensor
gatherBy(const HostTensor &x, ArrayRef<int64_t> resultShape,
         const std::function<int64_t(ArrayRef<int64_t>)> &src) {
  HostTensor out = HostTensor::zeros(x.elementType, resultShape);
  int64_t i = 0;
  forEachIndex(resultShape, [&](ArrayRef<int64_t> idx) {
    int64_t from = src(idx);
    if (x.isFloat())
      out.floats[i++] = x.floats[from];
    else
      out.ints[i++] = x.ints[from];
  });
  return out;
}

HostTensor mlir::fsdp::foldTranspose(const HostTensor &x,
                                     ArrayRef<int64_t> perm) {
  SmallVector<int64_t> shape, xs = stridesOf(x.shape);
  for (int64_t p : perm)
    shape.push_back(x.shape[p]);
  return gatherBy(x, shape, [&](ArrayRef<int64_t> idx) {
    int64_t off = 0;
    for (size_t d = 0; d < perm.size(); ++d)
      off += idx[d] * xs[perm[d]];
    return off;
  });
}

HostTensor mlir::fsdp::foldSlice(const HostTensor &x, ArrayRef<int64_t> starts,
                                 ArrayRef<int64_t> steps,
                                 ArrayRef<int64_t> resultShape) {
  SmallVector<int64_t> xs = stridesOf(x.shape);
  return gatherBy(x, resultShape, [&](ArrayRef<int64_t> idx) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d)
      off += (starts[d] + idx[d] * steps[d]) * xs[d];
    return off;
  });
}

HostTensor mlir::fsdp::foldConcat(ArrayRef<const HostTensor *> inputs,
                                  int64_t axis) {
  SmallVector<int64_t> shape(inputs[0]->shape);
  shape[axis] = 0;
  for (const HostTensor *t : inputs)
    shape[axis] += t->shape[axis];
  HostTensor out = HostTensor::zeros(inputs[0]->elementType, shape);
  int64_t outer = product(ArrayRef<int64_t>(shape).take_front(axis));
  int64_t inner = product(ArrayRef<int64_t>(shape).drop_front(axis + 1));
  int64_t pos = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (const HostTensor *t : inputs) {
      int64_t chunk = t->shape[axis] * inner;
      for (int64_t j = 0; j < chunk; ++j)
        out.set(pos++, t->asDouble(o * chunk + j));
    }
  return out;
}

HostTensor mlir::fsdp::foldGather(const HostTensor &data,
                                  const HostTensor &indices, int64_t axis) {
  SmallVector<int64_t> shape(ArrayRef<int64_t>(data.shape).take_front(axis));
  llvm::append_range(shape, indices.shape);
  llvm::append_range(shape, ArrayRef<int64_t>(data.shape).drop_front(axis + 1));
  SmallVector<int64_t> ds = stridesOf(data.shape),
                       is = stridesOf(indices.shape);
  size_t ir = indices.shape.size();
  return gatherBy(data, shape, [&](ArrayRef<int64_t> idx) {
    int64_t ioff = 0;
    for (size_t d = 0; d < ir; ++d)
      ioff += idx[axis + d] * is[d];
    int64_t k = indices.asInt(ioff);
    if (k < 0)
      k += data.shape[axis];
    int64_t off = k * ds[axis];
    for (int64_t d = 0; d < axis; ++d)
      off += idx[d] * ds[d];
    for (size_t d = axis + 1; d < data.shape.size(); ++d)
      off += idx[d - 1 + ir] * ds[d];
    return off;
  });
}

HostTensor mlir::fsdp::foldTrilu(const HostTensor &x, int64_t k, bool upper) {
  HostTensor out = x;
  int64_t rows = x.shape[x.shape.size() - 2], cols = x.shape.back();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) {
    int64_t c = i % cols, r = (i / cols) % rows;
    bool keep = upper ? c - r >= k : c - r <= k;
    if (!keep)
      out.set(i, 0);
  }
  return out;
}

HostTensor mlir::fsdp::foldReduce(const HostTensor &x, ArrayRef<int64_t> axes,
                                  bool keepdims, int kind) {
  SmallVector<int64_t> kept(x.shape);
  int64_t count = 1;
  for (int64_t a : axes) {
    count *= x.shape[a];
    kept[a] = 1;
  }
  HostTensor acc = HostTensor::zeros(x.elementType, kept);
  double identity = kind == 2   ? -INFINITY
                    : kind == 3 ? INFINITY
                    : kind == 4 ? 1.0
                                : 0.0;
  std::vector<double> sums(acc.numel(), identity);
  SmallVector<int64_t> ks = stridesOf(kept);
  int64_t i = 0;
  forEachIndex(x.shape, [&](ArrayRef<int64_t> idx) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d)
      off += (kept[d] == 1 ? 0 : idx[d]) * ks[d];
    double v = x.asDouble(i++);
    double &a = sums[off];
    a = kind == 2   ? std::max(a, v)
        : kind == 3 ? std::min(a, v)
        : kind == 4 ? a * v
                    : a + v;
  });
  for (int64_t j = 0; j < acc.numel(); ++j)
    acc.set(j, kind == 1 ? sums[j] / count : sums[j]);
  if (keepdims)
    return acc;
  SmallVector<int64_t> shape;
  for (size_t d = 0; d < x.shape.size(); ++d)
    if (!llvm::is_contained(axes, (int64_t)d))
      shape.push_back(x.shape[d]);
  return acc.reshaped(shape);
}
