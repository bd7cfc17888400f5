//===- Kernels.cpp - The CPU backend's dispatch ---------------------------===//
//
// Every op of a plan runs one kernel of runtime/cpu/kernels/ (one op family
// a file), found in the table common/Ops.def generates. Kernels check
// the shapes they are given (a malformed plan is an error, not an
// out-of-bounds access), accumulate reductions in double, and run every
// matrix product through Gemm.h (OpenBLAS or oneDNN).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/kernels/KernelSupport.h"

namespace fsdp::cpu {

void *Context::data(const TensorRef &t) const {
  return tensorAddress(t, arena, params, constants, grads, widened);
}

namespace {

using namespace kernels;

struct OpInfo {
  Kernel kernel;
  int minIn, maxIn, outs; // outs < 0: one or more
};

const std::map<std::string, OpInfo> &table() {
  static const std::map<std::string, OpInfo> t = {
#define FSDP_OP(name, cpu, device, minIn, maxIn, outs, rules)                  \
  {name, {cpu, minIn, maxIn, outs}},
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
  const OpInfo &info = it->second;
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
    int64_t p = attrInt(instr, "param", -1);
    if (p < 0 || p >= (int64_t)plan.slotCount() ||
        plan.slotNumel(p) != instr.in[0].numel() || plan.slotTrainable(p))
      return Status::error("does not name a buffer matching its value");
    return Status::ok();
  }
  if (info.outs == 0 && instr.op != "free") {
    int64_t p = attrInt(instr, "param", -1);
    if (p < 0 || p >= (int64_t)plan.slotCount() ||
        plan.slotNumel(p) != instr.in[0].numel() || plan.slotNumel(p) == 0 ||
        !plan.slotTrainable(p) || instr.in[0].dtype != DType::F32)
      return Status::error("does not name a parameter matching its gradient");
  }
  return Status::ok();
}

bool runsNarrow(const Instruction &instr) {
  if (instr.out.size() != 1 || (instr.op == "matmul" && instr.in.size() < 2))
    return false;
  DType type = instr.out[0].dtype;
  bool one = type == DType::BF16 || type == DType::F16;
  for (const auto *list : {&instr.in, &instr.out})
    for (const TensorRef &t : *list)
      one = one && t.dtype == type && t.rank() <= (int64_t)kMaxRank;
  return fsdp::runsNarrowOnCpu(instr.op, one, type == DType::BF16,
                               nativeBf16Gemm());
}

Kernel kernelFor(const std::string &op) {
  auto it = table().find(op);
  return it == table().end() ? nullptr : it->second.kernel;
}

int64_t scratchFloats(const Instruction &instr) {
  std::vector<std::vector<int64_t>> in, out;
  for (const TensorRef &t : instr.in)
    in.push_back(t.shape);
  for (const TensorRef &t : instr.out)
    out.push_back(t.shape);
  return cpuScratchFloats(instr.op, in, out,
                          attrInt(instr, "sync_group_size", 0), maxThreads());
}

} // namespace fsdp::cpu
