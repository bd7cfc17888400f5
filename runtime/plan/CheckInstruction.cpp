//===- CheckInstruction.cpp - What a valid instruction of a plan is ------===//
//
// Every instruction of a loaded plan is checked here before any backend
// sees it: its op is one of common/Ops.def's rows, its operand and result
// counts are the row's, its attributes that name a choice name a valid
// one, and what it writes lies in the arena. Backends add their own shape
// checks on top (a malformed plan is an error, never an out-of-bounds
// access).
//
//===----------------------------------------------------------------------===//
#include "runtime/plan/Plan.h"

#include <map>

namespace fsdp {
namespace {

struct OpArity {
  int minIn, maxIn, outs; // outs < 0: one or more
};

const std::map<std::string, OpArity> &table() {
  static const std::map<std::string, OpArity> t = {
#define FSDP_OP(name, cpu, device, minIn, maxIn, outs, rules)                  \
  {name, {minIn, maxIn, outs}},
#include "common/Ops.def"
#undef FSDP_OP
  };
  return t;
}

/// Attributes that name one of a few choices: each must be a string and
/// one of them (a kernel reading another value would fall back to a
/// default and train differently with exit 0: `reduction: "bogus"` gave
/// the mean).
Status checkChoices(const Instruction &instr) {
  bool collective =
      instr.op == "all_reduce" || instr.op == "reduce_scatter_start";
  struct Rule {
    const char *attr;
    std::vector<const char *> values;
  };
  static const std::vector<Rule> collectiveRules = {
      {"reduction", {"sum", "avg"}},
      {"group", {"world", "shard", "replicate", "block"}}};
  static const std::vector<Rule> computeRules = {
      {"reduction", {"mean", "sum", "none"}},
      {"approximate", {"none", "tanh"}},
      {"kind", {"softmax", "nll"}},
      {"group", {"world", "shard", "replicate", "block"}}};
  for (const Rule &rule : collective ? collectiveRules : computeRules) {
    auto a = instr.attrs.find(rule.attr);
    if (a != instr.attrs.end())
      FSDP_RETURN_IF_ERROR(checkChoice(
          std::string("attribute '") + rule.attr + "'",
          a->is_string() ? a->get<std::string>() : a->dump(), rule.values));
  }
  return Status::ok();
}

} // namespace

Status checkInstruction(const Plan &plan, const Instruction &instr) {
  auto it = table().find(instr.op);
  if (it == table().end())
    return Status::error("unknown op '" + instr.op + "'");
  FSDP_RETURN_IF_ERROR(checkChoices(instr));
  const OpArity &info = it->second;
  int n = (int)instr.in.size(), m = (int)instr.out.size();
  if (n < info.minIn || n > info.maxIn)
    return Status::error("expects " + std::to_string(info.minIn) + " to " +
                         std::to_string(info.maxIn) + " inputs, got " +
                         std::to_string(n));
  if ((info.outs >= 0 && m != info.outs) || (info.outs == -1 && m < 1) ||
      (info.outs == -2 && m > 1))
    return Status::error("has " + std::to_string(m) + " outputs");
  // Offload: a copy writes a buffer of the other memory (the host arena
  // or a host buffer; the arena or a shard's device copy), of its shape
  // and dtype.
  auto inHost = [](Space s) {
    return s == Space::Host || s == Space::HostBuffer;
  };
  if (instr.op == "copy_start") {
    const TensorRef &x = instr.in[0], &y = instr.out[0];
    bool toHost = inHost(y.space);
    bool toDevice = y.space == Space::Arena || y.space == Space::DeviceCopy;
    if (!(toHost || toDevice) || x.dtype != y.dtype || x.numel() != y.numel() ||
        (toHost && (inHost(x.space) || x.space == Space::DeviceCopy)) ||
        (toDevice && !inHost(x.space) && x.space != Space::Param))
      return Status::error("does not copy a tensor between host and device "
                           "memory, to a buffer of its size and dtype");
    return Status::ok();
  }
  bool onHost = instr.attrBool("on_host", false);
  // A wait yields its copy's or collective's buffer, where that is.
  if (instr.op == "wait") {
    const TensorRef &x = instr.in[0], &y = instr.out[0];
    if (x.space != y.space || x.offset != y.offset || x.index != y.index ||
        (x.space != Space::Arena && !inHost(x.space) &&
         x.space != Space::DeviceCopy))
      return Status::error("does not yield the buffer it waits for");
    return Status::ok();
  }
  // (AdamW's fused copy is checked with its parameter below.)
  for (const TensorRef &t : instr.out)
    if (instr.op != "adamw" &&
        (onHost ? !inHost(t.space) : t.space != Space::Arena))
      return Status::error(onHost ? "runs on the host but writes outside the "
                                    "host arena"
                                  : "writes outside the arena");
  if (instr.op == "assign_buffer") {
    int64_t p = instr.attrInt("param", -1);
    if (p < 0 || p >= (int64_t)plan.slotCount() ||
        plan.slotNumel(p) != instr.in[0].numel() || plan.slotTrainable(p))
      return Status::error("does not name a buffer matching its value");
    return Status::ok();
  }
  if ((info.outs == 0 || instr.op == "adamw") && instr.op != "free") {
    int64_t p = instr.attrInt("param", -1);
    if (p < 0 || p >= (int64_t)plan.slotCount() ||
        plan.slotNumel(p) != instr.in[0].numel() || !plan.slotTrainable(p) ||
        instr.in[0].dtype != DType::F32)
      return Status::error("does not name a parameter matching its gradient");
    // An offloaded shard is updated on the host from host buffers, any
    // other on the device.
    size_t first = plan.params.size();
    bool offloaded =
        (size_t)p >= first && !plan.flats[p - first].offload.empty();
    bool update = instr.op == "adamw" || instr.op == "sgd";
    if (update && offloaded != onHost)
      return Status::error(offloaded ? "updates an offloaded shard off the host"
                                     : "updates a device shard on the host");
    // AdamW's fused copy: the updated shard in a float dtype, on the host.
    if (!instr.out.empty() && (!onHost || !inHost(instr.out[0].space) ||
                               instr.out[0].numel() != instr.in[0].numel() ||
                               (instr.out[0].dtype != DType::F32 &&
                                instr.out[0].dtype != DType::BF16 &&
                                instr.out[0].dtype != DType::F16)))
      return Status::error("writes a copy of the updated shard that is not "
                           "a float tensor of its size on the host");
  }
  for (const TensorRef &t : instr.in) {
    if (onHost && (t.space == Space::Arena || t.space == Space::DeviceCopy))
      return Status::error("runs on the host but reads device memory");
    if (!onHost && inHost(t.space))
      return Status::error("reads host memory on the device");
  }
  return Status::ok();
}

} // namespace fsdp
