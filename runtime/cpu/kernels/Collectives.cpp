//===- Collectives.cpp - Collectives (CPU) --------------------------------===//
//
// Collectives (started here, completed by `wait`), packing, resharding.
// (Declared in KernelSupport.h; dispatched by runtime/cpu/Kernels.cpp.)
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/kernels/KernelSupport.h"

namespace fsdp::cpu::kernels {

//===----------------------------------------------------------------------===//
// Collectives (started here, completed by `wait`)
//===----------------------------------------------------------------------===//

/// The collective's group (`group`: world, shard or replicate), checked
/// against its group_size.
Status groupOf(const Instruction &in, Context &c, Group &g) {
  std::string name = attrString(in, "group", "world");
  g = name == "shard"       ? Group::Shard
      : name == "replicate" ? Group::Replicate
      : name == "block"     ? Group::Block
                            : Group::World;
  if (name != "world" && name != "shard" && name != "replicate" &&
      name != "block")
    return Status::error("unknown group '" + name + "'");
  if (!c.comm || attrInt(in, "group_size", 0) != c.comm->size(g))
    return Status::error(
        "group_size " + std::to_string(attrInt(in, "group_size", 0)) +
        " differs from the " + std::to_string(c.comm ? c.comm->size(g) : 0) +
        " ranks of its " + name + " group");
  return Status::ok();
}

/// The element type a collective sums in (f32, bf16 or f16).
bool sumElem(DType t, Elem &e) {
  e = t == DType::BF16 ? Elem::BF16 : t == DType::F16 ? Elem::F16 : Elem::F32;
  return t == DType::F32 || t == DType::BF16 || t == DType::F16;
}

Status kAllReduce(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &y = in.out[0];
  Elem e;
  if (x.numel() != y.numel() || x.dtype != y.dtype || !sumElem(x.dtype, e) ||
      !c.comm)
    return Status::error("expects float input and output of one size and "
                         "dtype");
  Group g;
  FSDP_RETURN_IF_ERROR(groupOf(in, c, g));
  std::string reduction = attrString(in, "reduction", "sum");
  return c.comm->allReduceStart(c.data(x), c.data(y), x.numel(), e,
                                reduction == "avg", in.index, g);
}

Status kAllGather(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &y = in.out[0];
  Group g;
  FSDP_RETURN_IF_ERROR(groupOf(in, c, g));
  int64_t group = c.comm->size(g);
  bool floating =
      x.dtype == DType::F32 || x.dtype == DType::BF16 || x.dtype == DType::F16;
  if (!floating || y.dtype != x.dtype || x.numel() * group != y.numel())
    return Status::error("expects float shards gathered over " +
                         std::to_string(group) + " ranks into one dtype");
  return c.comm->allGatherStart(c.data(x), c.data(y), x.numel(),
                                dtypeSize(x.dtype), in.index, g);
}

Status kReduceScatter(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &y = in.out[0];
  Group g;
  FSDP_RETURN_IF_ERROR(groupOf(in, c, g));
  int64_t group = c.comm->size(g);
  Elem e;
  if (x.dtype != y.dtype || !sumElem(x.dtype, e) ||
      y.numel() * group != x.numel())
    return Status::error("expects a float buffer scattered over " +
                         std::to_string(group) + " ranks in one dtype");
  std::string reduction = attrString(in, "reduction", "sum");
  return c.comm->reduceScatterStart(c.data(x), c.data(y), y.numel(), e,
                                    reduction == "avg", in.index, g);
}

bool isFloat(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::F16;
}

/// The flat gradient of a unit: each input at its offset, zeros elsewhere;
/// float inputs of another dtype converted as kCast converts.
Status kPack(const Instruction &in, Context &c) {
  const TensorRef &y = in.out[0];
  auto found = in.attrs.find("offsets");
  const nlohmann::json *offsets = found != in.attrs.end() ? &*found : nullptr;
  if (!offsets || !offsets->is_array() || offsets->size() != in.in.size() ||
      !isFloat(y.dtype))
    return Status::error("needs one offset per input and a float result");
  uint8_t *out = static_cast<uint8_t *>(c.data(y));
  // Only what no input covers is zeroed (the padding, and any gap): a
  // unit's flat gradient is hundreds of MB, and zeroing it all before the
  // copies wrote it twice.
  // [begin, end) elements; kept between calls, so a step after the first
  // allocates nothing (--check-allocations).
  static thread_local std::vector<std::pair<int64_t, int64_t>> spans;
  spans.clear();
  for (size_t i = 0; i < in.in.size(); ++i) {
    const nlohmann::json &o = (*offsets)[i];
    int64_t off = o.is_number_integer() ? o.get<int64_t>() : -1;
    const TensorRef &x = in.in[i];
    if (off < 0 || !isFloat(x.dtype) || off + x.numel() > y.numel())
      return Status::error("input " + std::to_string(i) +
                           " does not fit at its offset");
    spans.push_back({off, off + x.numel()});
  }
  std::sort(spans.begin(), spans.end());
  int64_t at = 0, width = dtypeSize(y.dtype);
  for (auto [begin, end] : spans) {
    if (begin > at)
      std::memset(out + at * width, 0, (begin - at) * width);
    at = std::max(at, end);
  }
  if (at < y.numel())
    std::memset(out + at * width, 0, (y.numel() - at) * width);
  for (size_t i = 0; i < in.in.size(); ++i) {
    int64_t off = (*offsets)[i].get<int64_t>();
    const TensorRef &x = in.in[i];
    const void *px = c.data(x);
    if (x.dtype == y.dtype) {
      std::memcpy(out + off * dtypeSize(y.dtype), px, x.bytes());
      continue;
    }
    for (int64_t j = 0, n = x.numel(); j < n; ++j)
      storeDouble(y, out, off + j, loadAsDouble(x, px, j));
  }
  return Status::ok();
}

/// Partial resharding: keep chunk (rank in the block) of a gathered buffer.
Status kReshard(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &y = in.out[0];
  int64_t n = attrInt(in, "group_size", 0);
  if (!c.comm || n != c.comm->size(Group::Block) || x.dtype != y.dtype ||
      y.numel() * n != x.numel())
    return Status::error(
        "keeps 1/" + std::to_string(n) +
        " of a buffer, but the block group has " +
        std::to_string(c.comm ? c.comm->size(Group::Block) : 0) +
        " ranks or the sizes differ");
  int64_t bytes = y.bytes();
  std::memcpy(c.data(y),
              static_cast<const uint8_t *>(c.data(x)) +
                  c.comm->rank(Group::Block) * bytes,
              bytes);
  return Status::ok();
}

/// The planner already reuses a freed buffer; nothing happens at run time.
Status kFree(const Instruction &, Context &) { return Status::ok(); }

Status kWait(const Instruction &in, Context &c) {
  if (in.completesCopy)
    return Status::ok(); // copy_start copied at once
  if (!c.comm)
    return Status::error("no communicator");
  return c.comm->wait(in.start);
}

//===----------------------------------------------------------------------===//
// Offload: host and device memory are the CPU's both, but distinct buffers
// (the host arena, the arena, the shards, their device copies), so a copy
// is a real copy and the plan's placement is exercised.
//===----------------------------------------------------------------------===//

Status kCopyStart(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &y = in.out[0];
  void *from = c.data(x), *to = c.data(y);
  if (!from || !to || x.bytes() != y.bytes())
    return Status::error("copies between buffers of different sizes or "
                         "without storage");
  std::memcpy(to, from, x.bytes());
  return Status::ok();
}

} // namespace fsdp::cpu::kernels
