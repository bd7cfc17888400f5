//===- Widen.cpp - f32 twins of instructions on bf16/f16 tensors ----------===//
#include "runtime/plan/Widen.h"

#include <algorithm>

namespace fsdp {

namespace {

bool narrow(DType t) { return t == DType::BF16 || t == DType::F16; }

bool sameTensor(const TensorRef &a, const TensorRef &b) {
  return a.space == b.space && a.offset == b.offset && a.index == b.index &&
         a.dtype == b.dtype && a.shape == b.shape;
}

Instruction castOf(const TensorRef &from, const TensorRef &to) {
  Instruction c;
  c.op = "cast";
  c.in = {from};
  c.out = {to};
  c.attrs = nlohmann::json::object();
  return c;
}

} // namespace

std::optional<Widening> widen(const Instruction &in) {
  if (!computesInF32(in.op))
    return std::nullopt;
  bool any = false;
  for (const auto *list : {&in.in, &in.out})
    for (const TensorRef &t : *list)
      any = any || narrow(t.dtype);
  if (!any)
    return std::nullopt;

  Widening w;
  w.twin = in;
  // An f32 copy at the next 16-byte boundary of the buffer.
  auto copyOf = [&](const TensorRef &t) {
    TensorRef wide;
    wide.space = Space::Widened;
    wide.offset = w.bytes;
    wide.shape = t.shape;
    wide.dtype = DType::F32;
    w.bytes += widenedCopyBytes(wide.numel());
    return wide;
  };
  // Each distinct narrow input is widened once (x * x reads one copy).
  std::vector<std::pair<TensorRef, TensorRef>> widened; // original, copy
  for (TensorRef &t : w.twin.in) {
    if (!narrow(t.dtype))
      continue;
    auto it = std::find_if(widened.begin(), widened.end(), [&](const auto &p) {
      return sameTensor(p.first, t);
    });
    if (it == widened.end()) {
      TensorRef wide = copyOf(t);
      w.before.push_back(castOf(t, wide));
      widened.emplace_back(t, wide);
      it = std::prev(widened.end());
    }
    t = it->second;
  }
  for (TensorRef &t : w.twin.out) {
    if (!narrow(t.dtype))
      continue;
    TensorRef wide = copyOf(t);
    w.after.push_back(castOf(wide, t));
    t = wide;
  }
  return w;
}

} // namespace fsdp
