//===- Optimizers.cpp - Optimizers (device lowering) ----------------------===//
//
// Optimizers as device operations (declared in LoweringSupport.h; found
// through common/Ops.def by runtime/device/Lowering.cpp).
//
//===----------------------------------------------------------------------===//
#include "runtime/device/lowering/LoweringSupport.h"

namespace fsdp::device::lowering {

//===----------------------------------------------------------------------===//
// Optimizers (torch.optim semantics)
//===----------------------------------------------------------------------===//

Status optimizerArgs(Ctx &c, int64_t &param, const float *&scale) {
  param = c.attrInt("param", -1);
  // (An empty parameter, torch.empty(0) as nn.Parameter, has no storage.)
  if (param < 0 || param >= (int64_t)c.mem.params.size() ||
      (!c.mem.params[param] && c.in.in[0].numel() != 0))
    return Status::error("bad parameter index");
  scale = nullptr;
  if (c.in.in.size() == 2) {
    if (c.in.in[1].numel() != 1 || c.in.in[1].dtype != DType::F32)
      return Status::error("the gradient scale must be an f32 scalar");
    scale = c.at<float>(c.in.in[1]);
  }
  return Status::ok();
}

Status lowerAdamW(Ctx &c) {
  int64_t p;
  const float *scale;
  FSDP_RETURN_IF_ERROR(optimizerArgs(c, p, scale));
  if (c.in.in[0].numel() == 0) // an empty parameter: nothing to update
    return Status::ok();
  if (!c.mem.first[p] || !c.mem.second[p])
    return Status::error("no optimizer state for this parameter");
  double b1 = c.attrFloat("beta1", 0.9), b2 = c.attrFloat("beta2", 0.999);
  c.emit(1, AdamWSchedule{c.attrFloat("lr", 1e-3), b1, b2, c.mem.stepScalars,
                          c.mem.schedule});
  AdamW k{(float)b1,
          (float)b2,
          (float)c.attrFloat("eps", 1e-8),
          (float)c.attrFloat("weight_decay", 0.01),
          c.mem.schedule,
          scale,
          c.at<float>(c.in.in[0]),
          static_cast<float *>(c.mem.params[p]),
          c.mem.first[p],
          c.mem.second[p]};
  // Offload: the updated shard also written in the gather dtype, in the
  // same pass.
  if (!c.in.out.empty()) {
    const TensorRef &y = c.in.out[0];
    if (y.numel() != c.in.in[0].numel() || !floating(y.dtype))
      return Status::error("its copy must be an f32, bf16 or f16 tensor of "
                           "the parameter's size");
    k.copy = c.at(y);
    k.copyType = elemOf(y.dtype);
  }
  c.emit(c.in.in[0].numel(), k);
  return Status::ok();
}

Status lowerSgd(Ctx &c) {
  int64_t p;
  const float *scale;
  FSDP_RETURN_IF_ERROR(optimizerArgs(c, p, scale));
  if (c.in.in[0].numel() == 0) // an empty parameter: nothing to update
    return Status::ok();
  if (!c.mem.first[p] || !c.mem.started[p])
    return Status::error("no optimizer state for this parameter");
  c.emit(1, SgdSchedule{c.attrFloat("lr", 1e-3), c.mem.stepScalars,
                        c.mem.started[p], c.mem.schedule, scale});
  c.emit(c.in.in[0].numel(),
         Sgd{(float)c.attrFloat("momentum", 0),
             (float)c.attrFloat("weight_decay", 0),
             c.attrBool("nesterov", false), c.mem.schedule, scale,
             c.at<float>(c.in.in[0]), static_cast<float *>(c.mem.params[p]),
             c.mem.first[p]});
  return Status::ok();
}

Status lowerAccumulateGrad(Ctx &c) {
  int64_t p = c.attrInt("param", -1);
  if (p < 0 || p >= (int64_t)c.mem.grads.size() || !c.mem.grads[p])
    return Status::error("no gradient accumulator for this parameter");
  const TensorRef &g = c.in.in[0];
  float *acc = static_cast<float *>(c.mem.grads[p]);
  Strided index;
  broadcastIndex({g.numel()}, {}, index);
  index.strides[0][0] = index.strides[1][0] = 1;
  c.emit(g.numel(), Binary{BinaryKind::Add, index, acc, c.at<float>(g), acc});
  return Status::ok();
}

} // namespace fsdp::device::lowering
