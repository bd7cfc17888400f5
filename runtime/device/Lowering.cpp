//===- Lowering.cpp - A plan's instructions as device operations ----------===//
//
// Each op lowers through the function its row of common/Ops.def
// names (runtime/device/lowering/, one op family a file), with the CPU
// kernels' checks and arithmetic (the functors of DeviceKernels.h are the
// CPU kernels' math, one element at a time); ops the device does not take
// narrow are widened around it (runtime/plan/Widen.h).
//
//===----------------------------------------------------------------------===//
#include "runtime/device/lowering/LoweringSupport.h"

namespace fsdp::device {

void *Memory::at(const TensorRef &t) const {
  return tensorAddress(t, arena, params, constants, grads, widened, host,
                       &deviceCopies, &hostBuffers);
}

namespace {

using namespace lowering;

const std::map<std::string, Lowerer> &table() {
  static const std::map<std::string, Lowerer> t = {
#define FSDP_OP(name, cpu, device, minIn, maxIn, outs, rules) {name, device},
#include "common/Ops.def"
#undef FSDP_OP
  };
  return t;
}

} // namespace

/// A product the GEMM library runs on bf16/f16 operands directly (f32
/// accumulation, one rounding of the result, as the widened product): the
/// device's matmuls are not widened.
bool lowering::nativeNarrow(const Instruction &in) {
  // A draw of no operands stores its bits in the result's own type.
  if (in.op == "uniform")
    return in.out.size() == 1 && floating(in.out[0].dtype);
  if (!runsNarrowOnDevice(in.op, operandShapes(in),
                          in.attrBool("causal", false),
                          in.attrString("layout", "bhsd") == "bshd") ||
      in.in.empty() || in.out.empty())
    return false;
  auto narrow = [](DType t) { return t == DType::BF16 || t == DType::F16; };
  auto same = [](const std::vector<TensorRef> &ts, DType t) {
    return std::all_of(ts.begin(), ts.end(),
                       [&](const TensorRef &r) { return r.dtype == t; });
  };
  if (in.op == "attention" || in.op == "attention_grad") {
    // The 16-bit tensors, without the f32 row log-sum-exp (an attention's
    // second result, attention_grad's last operand when it has the saved
    // ones).
    std::vector<TensorRef> ins = in.in, outs = in.out;
    if (in.op == "attention" && outs.size() == 2) {
      if (outs[1].dtype != DType::F32)
        return false;
      outs.pop_back();
    }
    if (in.op == "attention_grad" && attentionGradHasSaved(ins.size())) {
      if (ins.back().dtype != DType::F32)
        return false;
      ins.pop_back();
    }
    return narrow(ins[0].dtype) && same(ins, ins[0].dtype) &&
           same(outs, ins[0].dtype);
  }
  if (in.op == "layer_norm" || in.op == "layer_norm_grad" ||
      in.op == "rms_norm" || in.op == "rms_norm_grad")
    return std::all_of(in.in.begin(), in.in.end(),
                       [&](const TensorRef &r) { return floating(r.dtype); }) &&
           std::all_of(in.out.begin(), in.out.end(),
                       [&](const TensorRef &r) { return floating(r.dtype); });
  if (in.op == "reduce_sum" || in.op == "reduce_mean" ||
      in.op == "reduce_max" || in.op == "sum_squares")
    return floating(in.in[0].dtype) && floating(in.out[0].dtype);
  if (isElementwise(in.op)) // float operands; a comparison's i1 result
    return std::all_of(in.in.begin(), in.in.end(),
                       [&](const TensorRef &r) { return floating(r.dtype); }) &&
           (floating(in.out[0].dtype) || in.out[0].dtype == DType::I1);
  if (in.op == "matmul") { // (lhs_sums: the sums in the product's type)
    DType t = in.out[0].dtype;
    return narrow(t) &&
           std::all_of(in.in.begin(), in.in.end(),
                       [&](const TensorRef &r) { return r.dtype == t; }) &&
           std::all_of(in.out.begin(), in.out.end(),
                       [&](const TensorRef &r) { return r.dtype == t; });
  }
  // Losses: bf16/f16 logits (and their gradient, the last output) read and
  // written as they are; targets, class weights, the loss (the first
  // output) and the loss gradient as they come.
  DType t = in.in[0].dtype;
  bool rest = std::all_of(in.in.begin() + 1, in.in.end(),
                          [&](const TensorRef &r) { return !narrow(r.dtype); });
  bool fused = in.op == "cross_entropy_with_grad",
       gradient = fused || in.op == "cross_entropy_grad",
       loss = in.op != "cross_entropy_grad";
  return in.out.size() == (fused ? 2u : 1u) && narrow(t) && rest &&
         (!gradient || in.out.back().dtype == t) &&
         (!loss || !narrow(in.out[0].dtype));
}

namespace {

std::optional<Widening> deviceWidening(const Instruction &in) {
  return nativeNarrow(in) ? std::nullopt : widen(in);
}

} // namespace

int64_t widenedBytes(const Instruction &in) {
  std::optional<Widening> w = deviceWidening(in);
  return w ? w->bytes : 0;
}

int64_t scratchBytes(const Instruction &in) {
  return deviceScratchBytes(in.op, shapesOf(in.in), shapesOf(in.out));
}

namespace {

Status lowerOne(const Instruction &in, const Memory &mem, const Comm &comm,
                std::vector<DeviceOp> &out) {
  auto it = table().find(in.op);
  if (it == table().end())
    return Status::error("no device lowering for op '" + in.op + "'");
  for (const TensorRef &t : in.in)
    if (t.rank() > kMaxDims)
      return Status::error("rank " + std::to_string(t.rank()) +
                           " is over the device kernels' " +
                           std::to_string(kMaxDims));
  Ctx c{in, mem, comm, out};
  return it->second(c);
}

} // namespace

Status lower(const Instruction &in, const Memory &mem, const Comm &comm,
             std::vector<DeviceOp> &out) {
  std::optional<Widening> w = deviceWidening(in);
  if (!w)
    return lowerOne(in, mem, comm, out);
  for (const Instruction &c : w->before)
    FSDP_RETURN_IF_ERROR(lowerOne(c, mem, comm, out));
  FSDP_RETURN_IF_ERROR(lowerOne(w->twin, mem, comm, out));
  for (const Instruction &c : w->after)
    FSDP_RETURN_IF_ERROR(lowerOne(c, mem, comm, out));
  return Status::ok();
}

} // namespace fsdp::device
