//===- Executor.h - Runs a plan's training step on the CPU ------*- C++ -*-===//
//
// Owns every byte a step touches, allocated once at start: the arena of the
// plan's size, parameter storage, constants, optimizer state and kernel
// scratch. A step writes nothing else: no allocation inside a step.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_EXEC_EXECUTOR_H
#define FSDP_RUNTIME_EXEC_EXECUTOR_H

#include "runtime/cpu/Kernels.h"
#include "runtime/plan/Plan.h"

#include <functional>
#include <memory>
#include <vector>

namespace fsdp {

struct StepResult {
  double loss = 0, gradNorm = 0, lr = 0;
};

class Executor {
public:
  /// Allocates everything; parameters start at zero until loaded. `comm`
  /// carries the plan's collectives (it must outlive the executor).
  Status init(const Plan &plan, Comm &comm);

  /// Storage of input `i` (write the batch here before step()).
  void *input(size_t i) { return ctx.data(plan->inputs[i]); }
  float *param(size_t i) { return params[i].data(); }
  int64_t peakBytes() const;

  /// The learning-rate factor of optimizer step `t` (0-based): linear
  /// warm-up to 1 over warmup_steps, then constant or cosine to 0 at
  /// total_steps.
  double lrFactor(int64_t t) const;

  /// Runs one optimizer step (index `t`, 0-based): train.gradAccum
  /// micro-steps, each after `loadBatch(micro)` wrote the inputs (micro =
  /// t * gradAccum + i), then the update. The loss is the micro-steps' mean.
  /// With `grads` set, the gradients the optimizer applies are copied there.
  Status step(int64_t t, const std::function<Status(int64_t micro)> &loadBatch,
              StepResult &result,
              std::vector<std::vector<float>> *grads = nullptr);

  /// Optimizer state, for checkpoints.
  cpu::OptimizerState &optimizerState() { return optimizer; }

private:
  const Plan *plan = nullptr;
  std::unique_ptr<uint8_t, void (*)(void *)> arena{nullptr, nullptr};
  std::vector<std::vector<float>> params, gradSums;
  std::vector<cpu::Kernel> updateKernels;
  Status run(const std::vector<Instruction> &program,
             const std::vector<cpu::Kernel> &kernels, const char *what);
  std::vector<std::vector<uint8_t>> constants;
  std::vector<double> scratch; // viewed as floats by most kernels
  cpu::OptimizerState optimizer;
  double baseLr = 0;
  std::vector<cpu::Kernel> kernels;
  cpu::Context ctx;
};

} // namespace fsdp

#endif // FSDP_RUNTIME_EXEC_EXECUTOR_H
