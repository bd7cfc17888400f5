//===- LoweringSupport.h - What the lowering files share --------*- C++ -*-===//
//
// Private to runtime/device: the lowering context, the helpers every op
// family's file (runtime/device/lowering/) uses, and the declaration of
// every lowering function that common/Ops.def's rows name (the
// table in runtime/device/Lowering.cpp; a row naming an undeclared one
// does not compile).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_DEVICE_LOWERING_LOWERINGSUPPORT_H
#define FSDP_RUNTIME_DEVICE_LOWERING_LOWERINGSUPPORT_H

#include "runtime/device/KernelShapes.h"
#include "runtime/device/Lowering.h"
#include "runtime/plan/OpShapes.h"
#include "runtime/plan/Widen.h"

#include <map>
#include <string>

namespace fsdp::device::lowering {

struct Ctx {
  const Instruction &in;
  const Memory &mem;
  const Comm &comm;
  std::vector<DeviceOp> &out;

  template <typename T = void> T *at(const TensorRef &t) const {
    return static_cast<T *>(mem.at(t));
  }
  template <typename K> void emit(int64_t n, K k) {
    out.push_back({n, Kernel(std::move(k))});
  }
  int64_t attrInt(const char *name, int64_t dflt) const {
    return in.attrInt(name, dflt);
  }
  double attrFloat(const char *name, double dflt) const {
    return in.attrFloat(name, dflt);
  }
  bool attrBool(const char *name, bool dflt) const {
    return in.attrBool(name, dflt);
  }
  std::string attrString(const char *name, const char *dflt) const {
    return in.attrString(name, dflt);
  }
  Dims attrInts(const char *name) const {
    Dims v;
    auto it = in.attrs.find(name);
    if (it != in.attrs.end() && it->is_array())
      for (const auto &x : *it)
        if (x.is_number_integer())
          v.push_back(x.get<int64_t>());
    return v;
  }
};

using Lowerer = Status (*)(Ctx &);

/// The shapes of `in`'s operands, as common/ComputeOps.h takes them.
inline std::vector<std::vector<int64_t>>
shapesOf(const std::vector<TensorRef> &ts) {
  std::vector<std::vector<int64_t>> shapes;
  for (const TensorRef &t : ts)
    shapes.emplace_back(t.shape.begin(), t.shape.end());
  return shapes;
}
inline std::vector<std::vector<int64_t>> operandShapes(const Instruction &in) {
  return shapesOf(in.in);
}

inline ElemType elemOf(DType t) { return static_cast<ElemType>(t); }

inline void copy(Ctx &c, const TensorRef &from, const TensorRef &to) {
  const void *src = c.at(from);
  void *dst = c.at(to);
  if (src != dst && from.bytes() > 0)
    c.emit(1, Copy{src, dst, from.bytes()});
}

inline bool floating(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::F16;
}

/// The dtypes the GEMM library multiplies.
inline bool gemmType(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::F16;
}

/// A product the GEMM library runs on bf16/f16 operands directly
/// (Lowering.cpp).
bool nativeNarrow(const Instruction &in);

/// Copies x's elements, read at `srcStrides` from `base`, into y in order
/// (DataMovement.cpp).
/// Emits `s` over its `n` elements, in fewer, wider ones where it can
/// (dimensions contiguous in both tensors merged, then the innermost run
/// moved 16, 8 or 4 bytes at a time where every offset allows it): one
/// index computation and one 128-bit load and store for eight bf16
/// elements, not one each.
void emitCopy(Ctx &c, StridedCopy s, int64_t n);

void gatherCopy(Ctx &c, const TensorRef &x, const TensorRef &y,
                const Dims &srcStrides, int64_t base);

Status unary(Ctx &c, UnaryKind kind);   // Elementwise.cpp
Status binary(Ctx &c, BinaryKind kind); // Elementwise.cpp
Status reduce(Ctx &c, ReduceKind kind); // Reductions.cpp
Status softmaxLike(Ctx &c, bool log);   // Reductions.cpp

template <UnaryKind K> Status un(Ctx &c) { return unary(c, K); }
template <BinaryKind K> Status bin(Ctx &c) { return binary(c, K); }
template <ReduceKind K> Status red(Ctx &c) { return reduce(c, K); }

/// The lowering functions Ops.def's rows name (one op family a file).
Status lowerAccumulateGrad(Ctx &c);
Status lowerAdamW(Ctx &c);
Status lowerAllGather(Ctx &c);
Status lowerAllReduce(Ctx &c);
Status lowerAssignBuffer(Ctx &c);
Status lowerAttention(Ctx &c);
Status lowerAttentionGrad(Ctx &c);
Status lowerBatchNorm(Ctx &c);
Status lowerBatchNormGrad(Ctx &c);
Status lowerBatchNormSynced(Ctx &c);
Status lowerBroadcast(Ctx &c);
Status lowerCast(Ctx &c);
Status lowerConcat(Ctx &c);
Status lowerConv(Ctx &c);
Status lowerConvGradInput(Ctx &c);
Status lowerConvGradWeight(Ctx &c);
Status lowerCrossEntropy(Ctx &c);
Status lowerCrossEntropyGrad(Ctx &c);
Status lowerCrossEntropyWithGrad(Ctx &c);
Status lowerFree(Ctx &c);
Status lowerGather(Ctx &c);
Status lowerDropout(Ctx &c);
Status lowerUniform(Ctx &c);
Status lowerGelu(Ctx &c);
Status lowerGeluGrad(Ctx &c);
Status lowerGemm(Ctx &c);
Status lowerInsertSlice(Ctx &c);
Status lowerLayerNorm(Ctx &c);
Status lowerLayerNormGrad(Ctx &c);
Status lowerLogSoftmax(Ctx &c);
Status lowerMatmul(Ctx &c);
Status lowerNllLoss(Ctx &c);
Status lowerNot(Ctx &c);
Status lowerOffload(Ctx &c);
Status lowerPack(Ctx &c);
Status lowerPool(Ctx &c);
Status lowerPoolGrad(Ctx &c);
Status lowerReduceScatter(Ctx &c);
Status lowerReshape(Ctx &c);
Status lowerReshard(Ctx &c);
Status lowerScatterAdd(Ctx &c);
Status lowerSgd(Ctx &c);
Status lowerSlice(Ctx &c);
Status lowerSoftmax(Ctx &c);
Status lowerSplit(Ctx &c);
Status lowerTranspose(Ctx &c);
Status lowerTrilu(Ctx &c);
Status lowerArgsort(Ctx &c);
Status lowerWait(Ctx &c);
Status lowerWhere(Ctx &c);

} // namespace fsdp::device::lowering

#endif // FSDP_RUNTIME_DEVICE_LOWERING_LOWERINGSUPPORT_H
