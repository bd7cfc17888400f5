//===- Collectives.cpp - Collectives (device lowering) --------------------===//
//
// Collectives as device operations (declared in LoweringSupport.h; found
// through common/Ops.def by runtime/device/Lowering.cpp).
//
//===----------------------------------------------------------------------===//
#include "runtime/device/lowering/LoweringSupport.h"

namespace fsdp::device::lowering {

//===----------------------------------------------------------------------===//
// Collectives (started here, completed by `wait`)
//===----------------------------------------------------------------------===//

Status groupOf(Ctx &c, Group &g) {
  std::string name = c.attrString("group", "world");
  static const std::map<std::string, Group> groups = {
      {"world", Group::World},
      {"shard", Group::Shard},
      {"replicate", Group::Replicate},
      {"block", Group::Block}};
  auto it = groups.find(name);
  if (it == groups.end())
    return Status::error("unknown group '" + name + "'");
  g = it->second;
  if (c.attrInt("group_size", 0) != c.comm.size(g))
    return Status::error("group_size " +
                         std::to_string(c.attrInt("group_size", 0)) +
                         " differs from the " + std::to_string(c.comm.size(g)) +
                         " ranks of its " + name + " group");
  return Status::ok();
}

bool sumElem(DType t, Elem &e) {
  e = t == DType::BF16 ? Elem::BF16 : t == DType::F16 ? Elem::F16 : Elem::F32;
  return t == DType::F32 || t == DType::BF16 || t == DType::F16;
}

Status collective(Ctx &c, CollectiveKind kind) {
  const TensorRef &x = c.in.in[0], &y = c.in.out[0];
  Collective op;
  op.kind = kind;
  FSDP_RETURN_IF_ERROR(groupOf(c, op.group));
  int64_t group = c.comm.size(op.group);
  bool ok = x.dtype == y.dtype && sumElem(x.dtype, op.elem);
  op.count = x.numel();
  if (kind == CollectiveKind::AllReduce)
    ok = ok && x.numel() == y.numel();
  else if (kind == CollectiveKind::AllGather)
    ok = ok && x.numel() * group == y.numel();
  else {
    ok = ok && y.numel() * group == x.numel();
    op.count = y.numel();
  }
  if (!ok)
    return Status::error("expects float tensors of one dtype sized for " +
                         std::to_string(group) + " ranks");
  op.in = c.at(x);
  op.out = c.at(y);
  op.elemBytes = dtypeSize(x.dtype);
  op.average = c.attrString("reduction", "sum") == "avg";
  op.slot = c.in.index;
  c.emit(1, op);
  return Status::ok();
}

Status lowerAllReduce(Ctx &c) {
  return collective(c, CollectiveKind::AllReduce);
}
Status lowerAllGather(Ctx &c) {
  return collective(c, CollectiveKind::AllGather);
}
Status lowerReduceScatter(Ctx &c) {
  return collective(c, CollectiveKind::ReduceScatter);
}

Status lowerWait(Ctx &c) {
  c.emit(1, Wait{c.in.start, c.in.completesCopy});
  return Status::ok();
}

/// The flat gradient of a unit: each input at its offset, zeros elsewhere.
Status lowerPack(Ctx &c) {
  const TensorRef &y = c.in.out[0];
  auto found = c.in.attrs.find("offsets");
  auto isFloat = [](DType t) {
    return t == DType::F32 || t == DType::BF16 || t == DType::F16;
  };
  if (found == c.in.attrs.end() || !found->is_array() ||
      found->size() != c.in.in.size() || !isFloat(y.dtype))
    return Status::error("needs one offset per input and a float result");
  c.emit(1, Zero{c.at(y), y.bytes()});
  for (size_t i = 0; i < c.in.in.size(); ++i) {
    const nlohmann::json &o = (*found)[i];
    int64_t off = o.is_number_integer() ? o.get<int64_t>() : -1;
    const TensorRef &x = c.in.in[i];
    if (off < 0 || !isFloat(x.dtype) || off + x.numel() > y.numel())
      return Status::error("input " + std::to_string(i) +
                           " does not fit at its offset");
    void *at = c.at<uint8_t>(y) + off * dtypeSize(y.dtype);
    if (x.numel() == 0)
      continue;
    // Another float dtype converts on the way, as fsdp.cast does.
    if (x.dtype == y.dtype)
      c.emit(1, Copy{c.at(x), at, x.bytes()});
    else
      c.emit(x.numel(), Cast{elemOf(x.dtype), elemOf(y.dtype), c.at(x), at});
  }
  return Status::ok();
}

Status lowerReshard(Ctx &c) {
  const TensorRef &x = c.in.in[0], &y = c.in.out[0];
  int64_t n = c.attrInt("group_size", 0);
  if (n != c.comm.size(Group::Block) || x.dtype != y.dtype ||
      y.numel() * n != x.numel())
    return Status::error("keeps 1/" + std::to_string(n) +
                         " of a buffer, but the block group has " +
                         std::to_string(c.comm.size(Group::Block)) +
                         " ranks or the sizes differ");
  c.emit(1, Copy{c.at<uint8_t>(x) + c.comm.rank(Group::Block) * y.bytes(),
                 c.at(y), y.bytes()});
  return Status::ok();
}

Status lowerFree(Ctx &) { return Status::ok(); }

/// Offload's copy between host and device memory (fsdp-verify-plan and
/// the plan reader checked its direction, size and dtype).
Status lowerOffload(Ctx &c) {
  const TensorRef &x = c.in.in[0], &y = c.in.out[0];
  void *from = c.at(x), *to = c.at(y);
  if (!from || !to || x.bytes() != y.bytes())
    return Status::error("copies between buffers of different sizes or "
                         "without storage");
  bool toHost = y.space == Space::Host || y.space == Space::HostBuffer;
  c.emit(1, Transfer{from, to, x.bytes(), toHost, c.in.index});
  return Status::ok();
}

} // namespace fsdp::device::lowering
