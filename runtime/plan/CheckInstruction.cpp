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
  if ((info.outs >= 0 && m != info.outs) || (info.outs < 0 && m < 1))
    return Status::error("has " + std::to_string(m) + " outputs");
  for (const TensorRef &t : instr.out)
    if (t.space != Space::Arena)
      return Status::error("writes outside the arena");
  if (instr.op == "assign_buffer") {
    int64_t p = instr.attrInt("param", -1);
    if (p < 0 || p >= (int64_t)plan.slotCount() ||
        plan.slotNumel(p) != instr.in[0].numel() || plan.slotTrainable(p))
      return Status::error("does not name a buffer matching its value");
    return Status::ok();
  }
  if (info.outs == 0 && instr.op != "free") {
    int64_t p = instr.attrInt("param", -1);
    if (p < 0 || p >= (int64_t)plan.slotCount() ||
        plan.slotNumel(p) != instr.in[0].numel() ||
        !plan.slotTrainable(p) || instr.in[0].dtype != DType::F32)
      return Status::error("does not name a parameter matching its gradient");
  }
  return Status::ok();
}

} // namespace fsdp
