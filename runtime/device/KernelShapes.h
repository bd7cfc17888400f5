//===- KernelShapes.h - Index set-up of the device kernels -------*- C++
//-*-===//
//
// Host-side: from tensor shapes (a plan's TensorRefs) to the index tables
// the functors of DeviceKernels.h carry. Shared by the CUDA executor and
// the host test of the kernels.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_DEVICE_KERNELSHAPES_H
#define FSDP_RUNTIME_DEVICE_KERNELSHAPES_H

#include "runtime/device/DeviceKernels.h"

#include <initializer_list>
#include <vector>

namespace fsdp::device {

using Dims = std::vector<int64_t>;

inline Dims contiguousStrides(const Dims &s) {
  Dims st(s.size(), 1);
  for (int64_t i = (int64_t)s.size() - 2; i >= 0; --i)
    st[i] = st[i + 1] * s[i + 1];
  return st;
}

/// `out`'s index with each operand broadcast to it (numpy rules); false
/// when an operand does not broadcast or the rank is over kMaxDims.
inline bool broadcastIndex(const Dims &out,
                           std::initializer_list<const Dims *> operands,
                           Strided &s) {
  if (out.size() > (size_t)kMaxDims || operands.size() > 3)
    return false;
  s = Strided();
  s.rank = (int)out.size();
  for (size_t d = 0; d < out.size(); ++d)
    s.dims[d] = out[d];
  int o = 0;
  for (const Dims *in : operands) {
    if (in->size() > out.size())
      return false;
    Dims own = contiguousStrides(*in);
    size_t lead = out.size() - in->size();
    for (size_t d = 0; d < in->size(); ++d) {
      if ((*in)[d] != out[lead + d] && (*in)[d] != 1)
        return false;
      s.strides[o][lead + d] = (*in)[d] == 1 ? 0 : own[d];
    }
    ++o;
  }
  return true;
}

/// `s` with its dimensions of 1 dropped and each dimension merged into the
/// one before it where every one of `operands` steps over it whole: the
/// same offsets for every linear index, with fewer divisions (none for a
/// tensor every operand reads in order: Strided::offsets' rank-1 case).
inline void coalesce(Strided &s, int operands) {
  int r = 0;
  for (int d = 0; d < s.rank; ++d) {
    if (s.dims[d] == 1)
      continue;
    bool merges = r > 0;
    for (int o = 0; o < operands && merges; ++o)
      merges = s.strides[o][r - 1] == s.strides[o][d] * s.dims[d];
    if (merges) {
      s.dims[r - 1] *= s.dims[d];
      for (int o = 0; o < operands; ++o)
        s.strides[o][r - 1] = s.strides[o][d];
      continue;
    }
    s.dims[r] = s.dims[d];
    for (int o = 0; o < operands; ++o)
      s.strides[o][r] = s.strides[o][d];
    ++r;
  }
  for (int d = r; d < s.rank; ++d) {
    s.dims[d] = 0;
    for (int o = 0; o < 3; ++o)
      s.strides[o][d] = 0;
  }
  s.rank = r;
}

/// The reduction of `in` over `axes` (each in [0, rank)): one output
/// element per combination of the kept dimensions, in order.
inline bool reduceIndex(const Dims &in, const Dims &axes, ReduceKind kind,
                        Reduce &r) {
  if (in.size() > (size_t)kMaxDims)
    return false;
  r = Reduce();
  r.kind = kind;
  Dims st = contiguousStrides(in);
  std::vector<bool> reduced(in.size(), false);
  for (int64_t a : axes) {
    if (a < 0 || a >= (int64_t)in.size())
      return false;
    reduced[a] = true;
  }
  r.count = 1;
  for (size_t d = 0; d < in.size(); ++d) {
    if (reduced[d]) {
      r.redDims[r.reduced] = in[d];
      r.redStrides[r.reduced++] = st[d];
      r.count *= in[d];
    } else {
      r.keptDims[r.kept] = in[d];
      r.keptStrides[r.kept++] = st[d];
    }
  }
  return true;
}

/// y = transpose(x, perm): y's dimensions, x's stride along each.
inline bool transposeIndex(const Dims &x, const Dims &perm, Strided &s) {
  if (perm.size() != x.size() || x.size() > (size_t)kMaxDims)
    return false;
  Dims st = contiguousStrides(x);
  s = Strided();
  s.rank = (int)x.size();
  for (size_t d = 0; d < perm.size(); ++d) {
    if (perm[d] < 0 || perm[d] >= (int64_t)x.size())
      return false;
    s.dims[d] = x[perm[d]];
    s.strides[0][d] = st[perm[d]];
  }
  return true;
}

} // namespace fsdp::device

#endif // FSDP_RUNTIME_DEVICE_KERNELSHAPES_H
