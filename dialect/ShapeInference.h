//===- ShapeInference.h - Shape rules of fsdp tensor ops --------*- C++ -*-===//
//
// One definition of every shape rule. Ops' inferReturnTypes and verifiers
// call these, and so does the ONNX importer before it builds an op, so a bad
// model is reported with the node's location instead of failing in a builder.
// Each function reports its error at `loc` (when given) and returns failure.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DIALECT_SHAPEINFERENCE_H
#define FSDP_DIALECT_SHAPEINFERENCE_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"
#include "mlir/Support/LLVM.h"

#include <optional>

namespace mlir::fsdp::shape {

using Loc = std::optional<Location>;

/// Maps `axis` in [-rank, rank) to [0, rank).
FailureOr<int64_t> normalizeAxis(Loc loc, int64_t axis, int64_t rank,
                                 StringRef what = "axis");

/// Numpy multidirectional broadcasting of two shapes.
FailureOr<SmallVector<int64_t>> broadcastShapes(Loc loc, ArrayRef<int64_t> a,
                                                ArrayRef<int64_t> b);

/// An elementwise binary op: equal element types, broadcast shapes. The
/// result element type is `resultElement`, or the operands' when null.
FailureOr<RankedTensorType> binary(Loc loc, RankedTensorType lhs,
                                   RankedTensorType rhs, Type resultElement);

FailureOr<RankedTensorType> where(Loc loc, RankedTensorType cond,
                                  RankedTensorType x, RankedTensorType y);

FailureOr<RankedTensorType> matmul(Loc loc, RankedTensorType lhs,
                                   RankedTensorType rhs, bool transposeLhs,
                                   bool transposeRhs);

FailureOr<RankedTensorType> gemm(Loc loc, RankedTensorType a,
                                 RankedTensorType b, RankedTensorType c,
                                 bool transA, bool transB);

FailureOr<RankedTensorType> reduce(Loc loc, RankedTensorType x,
                                   ArrayRef<int64_t> axes, bool keepdims);

FailureOr<RankedTensorType> transpose(Loc loc, RankedTensorType x,
                                      ArrayRef<int64_t> perm);

FailureOr<RankedTensorType> slice(Loc loc, RankedTensorType x,
                                  ArrayRef<int64_t> starts,
                                  ArrayRef<int64_t> limits,
                                  ArrayRef<int64_t> strides);

FailureOr<RankedTensorType> concat(Loc loc, TypeRange inputs, int64_t axis);

FailureOr<SmallVector<Type>> split(Loc loc, RankedTensorType x, int64_t axis,
                                   ArrayRef<int64_t> sizes);

FailureOr<RankedTensorType> gather(Loc loc, RankedTensorType data,
                                   RankedTensorType indices, int64_t axis);

/// `mask` may be null. `bshd`: q, k, v and the result are [..., S, H, D]
/// (the layout attribute "bshd") instead of [..., H, S, D].
FailureOr<RankedTensorType> attention(Loc loc, RankedTensorType q,
                                      RankedTensorType k, RankedTensorType v,
                                      RankedTensorType mask, bool bshd = false);
/// An attention's row log-sum-exp (fsdp.attention's `lse`): f32,
/// [..., H, Sq] (q's shape without its last dimension, in "bhsd").
RankedTensorType attentionLse(RankedTensorType q, bool bshd = false);

/// A convolution's attributes (fsdp.conv and its gradients).
struct ConvAttrs {
  ArrayRef<int64_t> strides, pads, dilations;
  int64_t group = 1;
};

/// fsdp.conv: x [N, C, *S], w [OC, C / group, *K] (one or two spatial
/// axes), the optional bias [OC] (may be null).
FailureOr<RankedTensorType> conv(Loc loc, RankedTensorType x,
                                 RankedTensorType w, RankedTensorType bias,
                                 const ConvAttrs &attrs);

/// A pooling's attributes (fsdp.pool and its gradient).
struct PoolAttrs {
  StringRef mode;
  ArrayRef<int64_t> kernel, strides, pads, dilations;
  bool ceilMode = false;
};

/// fsdp.pool: x [N, C, *S] (one or two spatial axes).
FailureOr<RankedTensorType> pool(Loc loc, RankedTensorType x,
                                 const PoolAttrs &attrs);

/// fsdp.batch_norm: x [N, C, ...], scale and bias [C]: the statistics'
/// type [C].
FailureOr<RankedTensorType> batchNormStats(Loc loc, RankedTensorType x,
                                           RankedTensorType scale,
                                           RankedTensorType bias);

/// Cross-entropy and NLL: `weight` may be null.
FailureOr<RankedTensorType> classificationLoss(Loc loc, RankedTensorType input,
                                               RankedTensorType target,
                                               RankedTensorType weight,
                                               StringRef reduction);

/// `from` broadcasts to exactly `to`.
LogicalResult checkBroadcastTo(Loc loc, RankedTensorType from,
                               RankedTensorType to);

/// `scale` and the optional `bias` are shaped like x.shape[axis:]; `what`
/// names the op in the message.
LogicalResult checkLayerNorm(Loc loc, RankedTensorType x,
                             RankedTensorType scale, RankedTensorType bias,
                             int64_t axis, StringRef what = "layer_norm");

} // namespace mlir::fsdp::shape

#endif // FSDP_DIALECT_SHAPEINFERENCE_H
