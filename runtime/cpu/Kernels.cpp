//===- Kernels.cpp - The CPU backend's dispatch ---------------------------===//
//
// Every op of a plan (checked by fsdp::checkInstruction,
// runtime/plan/CheckInstruction.cpp) runs one kernel of runtime/cpu/kernels/ (one op family
// a file), found in the table common/Ops.def generates. Kernels check
// the shapes they are given (a malformed plan is an error, not an
// out-of-bounds access), accumulate reductions in double, and run every
// matrix product through Gemm.h (OpenBLAS or oneDNN).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/kernels/KernelSupport.h"

namespace fsdp::cpu {

void *Context::data(const TensorRef &t) const {
  return tensorAddress(t, arena, params, constants, grads, widened, host,
                       &deviceCopies, &hostBuffers);
}

namespace {

using namespace kernels;

const std::map<std::string, Kernel> &table() {
  static const std::map<std::string, Kernel> t = {
#define FSDP_OP(name, cpu, device, minIn, maxIn, outs, rules) {name, cpu},
#include "common/Ops.def"
#undef FSDP_OP
  };
  return t;
}

} // namespace

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
  return it == table().end() ? nullptr : it->second;
}

int64_t scratchFloats(const Instruction &instr) {
  std::vector<std::vector<int64_t>> in, out;
  for (const TensorRef &t : instr.in)
    in.push_back(t.shape);
  for (const TensorRef &t : instr.out)
    out.push_back(t.shape);
  return cpuScratchFloats(instr.op, in, out,
                          attrInt(instr, "sync_group_size", 0), maxThreads(),
                          instr.attrString("layout", "bhsd") == "bshd");
}

} // namespace fsdp::cpu
