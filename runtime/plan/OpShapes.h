//===- OpShapes.h - Shape rules shared by the backends ----------*- C++ -*-===//
//
// Checks every backend makes the same way before it moves data: the CPU
// kernels (runtime/cpu/Kernels.cpp) at run time, the device lowering
// (runtime/device/Lowering.cpp) once at start-up.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_PLAN_OPSHAPES_H
#define FSDP_RUNTIME_PLAN_OPSHAPES_H

#include "common/BatchNormMath.h"
#include "common/ConvGeometry.h"
#include "runtime/plan/Plan.h"

#include <algorithm>
#include <string>

namespace fsdp {

/// "[2, 3, 4]", for errors; `S` is any sequence of extents (the CPU
/// kernels' inline Shape, or a vector).
template <typename S> std::string shapeString(const S &s) {
  std::string out = "[";
  bool first = true;
  for (int64_t d : s) {
    out += (first ? "" : ", ") + std::to_string(d);
    first = false;
  }
  return out + "]";
}

/// Product of s[from, to) (to < 0: to the end).
template <typename S>
int64_t product(const S &s, int64_t from = 0, int64_t to = -1) {
  int64_t size = (int64_t)s.size();
  int64_t end = to < 0 ? size : std::min<int64_t>(to, size);
  int64_t n = 1;
  for (int64_t i = from; i < end; ++i)
    n *= s[i];
  return n;
}

/// Concat (`parts` into `whole`) or split (`whole` into `parts`) along
/// `axis`: every part matches `whole` outside the axis, in its dtype, and
/// the parts cover it. `outer` and `inner` are the products of the
/// dimensions before and after the axis.
Status concatLayout(const std::vector<TensorRef> &parts, const TensorRef &whole,
                    int64_t axis, bool split, int64_t &outer, int64_t &inner);

/// layer_norm_grad's operands (x, scale, grad) and results (dx, dscale,
/// dbias; rms_norm_grad's have no dbias) normalising axes `axis..`: `rows`
/// rows of `cols` elements.
Status layerNormGradLayout(const Instruction &in, int64_t axis, int64_t &rows,
                           int64_t &cols);

/// A convolution's geometry from the instruction's attributes and the
/// shapes of the convolution's input `x`, weight `w` and output `y` (for a
/// gradient: the tensors in those roles); allocates nothing.
Status convGeometryOf(const Instruction &in, const TensorRef &x,
                      const TensorRef &w, const TensorRef &y,
                      ConvGeometry &g);

/// A pooling's geometry (poolGeometry) from the instruction's attributes
/// and the shapes of its input `x` and output `y`, and its mode; allocates
/// nothing.
Status poolGeometryOf(const Instruction &in, const TensorRef &x,
                      const TensorRef &y, ConvGeometry &g, bool &max,
                      bool &includePad);

/// batch_norm's or batch_norm_grad's x [N, C, ...] and per-channel
/// tensors `channel` (scale, statistics, their gradients), all of x's
/// dtype; allocates nothing.
Status batchNormLayoutOf(const TensorRef &x,
                         std::initializer_list<const TensorRef *> channel,
                         BatchNormLayout &l);

/// A matmul with `lhs_sums` (two results: the product, then op(lhs)'s
/// row sums over the contracted dimension): its product alone, and its
/// sums as the reduce_sum they replaced (fsdp-fuse-bias-grad), which the
/// backends run where no library computes them with the product.
Status splitLhsSums(const Instruction &matmul, Instruction &product,
                    Instruction &sums);

} // namespace fsdp

#endif // FSDP_RUNTIME_PLAN_OPSHAPES_H
