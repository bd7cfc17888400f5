//===- Optimizers.cpp - Optimizers (CPU) ----------------------------------===//
//
// Optimizers (torch.optim semantics): AdamW, SGD, gradient accumulation.
// (Declared in KernelSupport.h; dispatched by runtime/cpu/Kernels.cpp.)
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/kernels/KernelSupport.h"

namespace fsdp::cpu::kernels {

//===----------------------------------------------------------------------===//
// Optimizers (torch.optim semantics)
//===----------------------------------------------------------------------===//

/// The parameter index and the gradient scale (clipping) of an update. A
/// non-finite scale (the plan makes it so when the gradient norm is not
/// finite) skips the update: parameter and moments stay as they were.
Status optimizerArgs(const Instruction &in, Context &c, int64_t &param,
                     float &scale) {
  param = attrInt(in, "param", -1);
  // (An empty parameter, torch.empty(0) as nn.Parameter, has no storage.)
  if (param < 0 || param >= (int64_t)c.params.size() ||
      (!c.params[param] && in.in[0].numel() != 0) || !c.optimizer)
    return Status::error("bad parameter index");
  scale = 1.0f;
  if (in.in.size() == 2) {
    if (in.in[1].numel() != 1 || in.in[1].dtype != DType::F32)
      return Status::error("the gradient scale must be an f32 scalar");
    scale = *c.get<float>(in.in[1]);
  }
  if (c.captureGrads) {
    const float *g = c.get<float>(in.in[0]);
    (*c.captureGrads)[param].assign(g, g + in.in[0].numel());
  }
  return Status::ok();
}

FSDP_VECTOR_CLONES
Status kAdamW(const Instruction &in, Context &c) {
  int64_t param;
  float scale;
  FSDP_RETURN_IF_ERROR(optimizerArgs(in, c, param, scale));
  // A skipped update still writes its fused copy (of the unchanged shard):
  // the plan copies it into the device copy whether or not the update ran.
  bool skip = !std::isfinite(scale);
  OptimizerState &s = *c.optimizer;
  float lr = (float)(attrFloat(in, "lr", 1e-3) * s.lrScale);
  float b1 = (float)attrFloat(in, "beta1", 0.9),
        b2 = (float)attrFloat(in, "beta2", 0.999);
  float eps = (float)attrFloat(in, "eps", 1e-8),
        wd = (float)attrFloat(in, "weight_decay", 0.01);
  int64_t n = in.in[0].numel();
  std::vector<float> &m = s.first[param], &v = s.second[param];
  if ((int64_t)m.size() != n || (int64_t)v.size() != n)
    return Status::error("optimizer state does not match the gradient");
  // One pass over the four arrays, split over the threads and vectorised
  // (each element's arithmetic is the same in any order: the results do
  // not depend on the thread count).
  const float *__restrict g = c.get<float>(in.in[0]);
  float *__restrict p = c.params[param];
  float *__restrict pm = m.data();
  float *__restrict pv = v.data();
  double bc1 = 1.0 - std::pow((double)b1, (double)s.step);
  double bc2 = 1.0 - std::pow((double)b2, (double)s.step);
  float stepSize = (float)(lr / bc1), bc2Sqrt = (float)std::sqrt(bc2);
  float decay = 1.0f - lr * wd;
  auto update = [&](auto store) {
    if (skip) {
#pragma omp parallel for simd if (parallel : n > kCpuParallelMinAdamW)
      for (int64_t i = 0; i < n; ++i)
        store(i, p[i]);
      return;
    }
#pragma omp parallel for simd if (parallel : n > kCpuParallelMinAdamW)
    for (int64_t i = 0; i < n; ++i) {
      float gi = g[i] * scale;
      float mi = pm[i] * b1 + (1.0f - b1) * gi;
      float vi = pv[i] * b2 + (1.0f - b2) * gi * gi;
      pm[i] = mi;
      pv[i] = vi;
      float denom = std::sqrt(vi) / bc2Sqrt + eps;
      float pi = p[i] * decay - stepSize * (mi / denom);
      p[i] = pi;
      store(i, pi);
    }
  };
  // Offload: the updated shard also written in the gather dtype, in the
  // same pass (rounded as fsdp.cast rounds).
  if (in.out.empty()) {
    update([](int64_t, float) {});
    return Status::ok();
  }
  const TensorRef &y = in.out[0];
  if (y.numel() != n)
    return Status::error("its copy does not match the parameter");
  if (y.dtype == DType::F32) {
    float *__restrict out = c.get<float>(y);
    update([out](int64_t i, float v) { out[i] = v; });
  } else if (y.dtype == DType::BF16) {
    uint16_t *__restrict out = c.get<uint16_t>(y);
    update([out](int64_t i, float v) { out[i] = bf16FromFloat(v); });
  } else if (y.dtype == DType::F16) {
    uint16_t *__restrict out = c.get<uint16_t>(y);
    update([out](int64_t i, float v) { out[i] = f16FromFloat(v); });
  } else {
    return Status::error("its copy must be f32, bf16 or f16");
  }
  return Status::ok();
}

FSDP_VECTOR_CLONES
Status kSgd(const Instruction &in, Context &c) {
  int64_t param;
  float scale;
  FSDP_RETURN_IF_ERROR(optimizerArgs(in, c, param, scale));
  if (!std::isfinite(scale))
    return Status::ok();
  OptimizerState &s = *c.optimizer;
  float lr = (float)(attrFloat(in, "lr", 1e-3) * s.lrScale);
  float mu = (float)attrFloat(in, "momentum", 0),
        wd = (float)attrFloat(in, "weight_decay", 0);
  bool nesterov = attrBool(in, "nesterov", false);
  int64_t n = in.in[0].numel();
  const float *__restrict g = c.get<float>(in.in[0]);
  float *__restrict p = c.params[param];
  std::vector<float> &state = s.first[param];
  if ((int64_t)state.size() != n)
    return Status::error("optimizer state does not match the gradient");
  float *__restrict buf = state.data();
  bool first = !s.started[param];
#pragma omp parallel for simd if (parallel : n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    float d = g[i] * scale + wd * p[i];
    if (mu != 0) {
      buf[i] = first ? d : mu * buf[i] + d;
      d = nesterov ? d + mu * buf[i] : buf[i];
    }
    p[i] -= lr * d;
  }
  s.started[param] = 1;
  return Status::ok();
}

Status kAccumulateGrad(const Instruction &in, Context &c) {
  int64_t param = attrInt(in, "param", -1);
  if (param < 0 || param >= (int64_t)c.grads.size() || !c.grads[param])
    return Status::error("no gradient accumulator for this parameter");
  const float *g = c.get<float>(in.in[0]);
  float *acc = c.grads[param];
  for (int64_t i = 0, n = in.in[0].numel(); i < n; ++i)
    acc[i] += g[i];
  return Status::ok();
}

} // namespace fsdp::cpu::kernels
