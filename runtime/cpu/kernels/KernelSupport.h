//===- KernelSupport.h - What the CPU kernel files share --------*- C++ -*-===//
//
// Private to runtime/cpu: the inline shape and stride helpers, attribute
// readers and element loads the kernel files (runtime/cpu/kernels/, one op
// family each) use, and the declaration of every kernel (from
// common/Ops.def), which runtime/cpu/Kernels.cpp dispatches to.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_CPU_KERNELS_KERNELSUPPORT_H
#define FSDP_RUNTIME_CPU_KERNELS_KERNELSUPPORT_H

#include "common/ComputeOps.h"
#include "common/CostRows.h"
#include "common/UnaryMath.h"
#include "runtime/cpu/Gemm.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/VectorMath.h"
#include "runtime/plan/OpShapes.h"
#include "runtime/support/Half.h"
#include "runtime/support/Threads.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>

namespace fsdp::cpu {

/// A tensor shape or stride list held inline: kernels run inside a step,
/// where nothing may allocate. Plans are limited to rank kMaxRank.
class Shape {
public:
  Shape() = default;
  Shape(size_t count, int64_t v) { assign(count, v); }
  Shape(std::initializer_list<int64_t> l) {
    for (int64_t v : l)
      push_back(v);
  }
  template <typename It> Shape(It b, It e) {
    for (; b != e; ++b)
      push_back(*b);
  }
  Shape(const std::vector<int64_t> &v) : Shape(v.begin(), v.end()) {}
  void assign(size_t count, int64_t v) {
    n = 0;
    for (size_t i = 0; i < count; ++i)
      push_back(v);
  }
  void push_back(int64_t v) {
    if (n < kMaxRank)
      d[n++] = v;
  }
  size_t size() const { return n; }
  bool empty() const { return n == 0; }
  int64_t &operator[](size_t i) { return d[i]; }
  int64_t operator[](size_t i) const { return d[i]; }
  int64_t back() const { return d[n - 1]; }
  const int64_t *begin() const { return d; }
  const int64_t *end() const { return d + n; }
  bool operator==(const Shape &o) const {
    return n == o.n && std::equal(begin(), end(), o.begin());
  }
  bool operator!=(const Shape &o) const { return !(*this == o); }

private:
  int64_t d[kMaxRank] = {};
  size_t n = 0;
};

namespace kernels {

/// Loops over more elements than this run on every core (OpenMP); smaller
/// ones stay serial, where a thread hand-off costs more than it saves.
/// On a `parallel for simd` the clause must read `if (parallel : ...)`: a
/// bare `if` applies to the simd construct too (OpenMP 5.0), and a small
/// loop then ran unvectorised, its tanh and exp through scalar libm, 20
/// times slower (a 2-rank GPT-2's gelu: 400 us where 1 rank's took 18).
/// The cost model prices what runs serially apart (common/CostRows.h).
constexpr int64_t kParallelMin = kCpuParallelMin;

inline Shape stridesOf(const Shape &s) {
  Shape st(s.size(), 1);
  for (int64_t i = (int64_t)s.size() - 2; i >= 0; --i)
    st[i] = st[i + 1] * s[i + 1];
  return st;
}

/// Per-output-dimension strides of `in` broadcast to `out` (0 on broadcast
/// dims); empty when `in` does not broadcast to `out`.
inline bool broadcastStrides(const Shape &in, const Shape &out,
                             Shape &strides) {
  if (in.size() > out.size())
    return false;
  Shape own = stridesOf(in);
  strides.assign(out.size(), 0);
  size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] != out[lead + d] && in[d] != 1)
      return false;
    strides[lead + d] = in[d] == 1 ? 0 : own[d];
  }
  return true;
}

/// Visits every output index with the matching offsets of up to three
/// broadcast operands.
template <typename F>
inline void forEach(const Shape &out, std::initializer_list<const Shape *> list,
                    F f) {
  const Shape *const *strides = list.begin();
  size_t rank = out.size(), k = list.size();
  int64_t n = product(out);
  Shape idx(rank, 0);
  int64_t off[3] = {0, 0, 0};
  for (int64_t i = 0; i < n; ++i) {
    f(i, off);
    for (int64_t d = (int64_t)rank - 1; d >= 0; --d) {
      for (size_t o = 0; o < k; ++o)
        off[o] += (*strides[o])[d];
      if (++idx[d] < out[d])
        break;
      for (size_t o = 0; o < k; ++o)
        off[o] -= (*strides[o])[d] * out[d];
      idx[d] = 0;
    }
  }
}

inline int64_t attrInt(const Instruction &in, const char *name, int64_t dflt) {
  return in.attrInt(name, dflt);
}
inline double attrFloat(const Instruction &in, const char *name, double dflt) {
  return in.attrFloat(name, dflt);
}
inline bool attrBool(const Instruction &in, const char *name, bool dflt) {
  return in.attrBool(name, dflt);
}
inline std::string attrString(const Instruction &in, const char *name,
                              const char *dflt) {
  return in.attrString(name, dflt);
}
/// (Into an inline Shape: kernels run inside a step, where nothing may
/// allocate.)
inline Shape attrInts(const Instruction &in, const char *name) {
  Shape out;
  auto it = in.attrs.find(name);
  if (it != in.attrs.end() && it->is_array())
    for (const auto &v : *it)
      if (v.is_number_integer())
        out.push_back(v.get<int64_t>());
  return out;
}

inline double loadAsDouble(const TensorRef &t, const void *p, int64_t i) {
  switch (t.dtype) {
  case DType::F32:
    return static_cast<const float *>(p)[i];
  case DType::I64:
    return (double)static_cast<const int64_t *>(p)[i];
  case DType::I1:
    return static_cast<const uint8_t *>(p)[i];
  case DType::BF16:
    return floatFromBf16(static_cast<const uint16_t *>(p)[i]);
  case DType::F16:
    return floatFromF16(static_cast<const uint16_t *>(p)[i]);
  }
  return 0;
}
inline void storeDouble(const TensorRef &t, void *p, int64_t i, double v) {
  switch (t.dtype) {
  case DType::F32:
    static_cast<float *>(p)[i] = (float)v;
    break;
  case DType::I64:
    static_cast<int64_t *>(p)[i] = std::isfinite(v) ? (int64_t)v : 0;
    break;
  case DType::I1:
    static_cast<uint8_t *>(p)[i] = v != 0;
    break;
  case DType::BF16:
    static_cast<uint16_t *>(p)[i] = bf16FromFloat((float)v);
    break;
  case DType::F16:
    static_cast<uint16_t *>(p)[i] = f16FromFloat((float)v);
    break;
  }
}

/// Every kernel of common/Ops.def's rows (one op family a file).
#define FSDP_OP(name, cpu, device, minIn, maxIn, outs, rules)                  \
  Status cpu(const Instruction &in, Context &c);
#include "common/Ops.def"
#undef FSDP_OP

/// softmax or log_softmax of one row (Reductions.cpp; attention uses it).
void softmaxRow(const float *row, float *out, int64_t n, bool log);

} // namespace kernels
} // namespace fsdp::cpu

#endif // FSDP_RUNTIME_CPU_KERNELS_KERNELSUPPORT_H
