//===- StepBackend.h - Where a training step runs, if not here --*- C++ -*-===//
//
// The Executor (runtime/exec/Executor.h) keeps the host's copy of the
// parameters and optimizer state: what weights load into and checkpoints
// are written from. By default it computes on it too (the CPU kernels).
// With a StepBackend the step runs elsewhere (a GPU, or the host emulation
// of one) on the backend's own copy, moved only when the host side is
// read or written between steps.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_EXEC_STEPBACKEND_H
#define FSDP_RUNTIME_EXEC_STEPBACKEND_H

#include "runtime/comm/Comm.h"
#include "runtime/plan/Plan.h"

#include <string>
#include <vector>

namespace fsdp {

/// The host's training state, by storage slot (Plan::slotCount()): values,
/// optimizer moments (empty where a slot has none) and SGD's started flags.
struct HostState {
  std::vector<std::vector<float>> *values = nullptr, *first = nullptr,
                                  *second = nullptr;
  std::vector<char> *started = nullptr;
};

/// An optimizer update of the previous step that the plan runs in this
/// one (offload's before-use updates): that step's index and rate factor.
struct PendingUpdate {
  bool due = false;
  double lrScale = 1;
  int64_t step = 0;
};

class StepBackend {
public:
  virtual ~StepBackend() = default;
  /// "cuda (NVIDIA H100 …)", "emulated": for logs.
  virtual std::string describe() const = 0;
  /// Allocates everything (no allocation inside a step), uploads the
  /// constants (their bytes, by plan constant) and prepares the plan's
  /// programs. `comm` has been split.
  virtual Status init(const Plan &plan, Comm &comm,
                      const std::vector<std::vector<uint8_t>> &constants) = 0;
  /// Where the host writes input `i` before each micro-step.
  virtual void *input(size_t i) = 0;
  /// Copies the host's state to the backend (and refills what the plan
  /// keeps as casts of it: offload's device copies), or back.
  virtual Status push(const HostState &s) = 0;
  virtual Status pull(const HostState &s) = 0;
  /// Runs one micro-step's program (or, `update`, the optimizer update)
  /// for optimizer step `step` (1-based) at learning-rate factor `lrScale`,
  /// its draws keyed by `drawStep` (the micro-batch's number in the run);
  /// the program's deferred instructions (offload's before-use updates)
  /// run only where an update is `pending`, at its step and rate.
  virtual Status run(bool update, double lrScale, int64_t step,
                     int64_t drawStep, const PendingUpdate &pending) = 0;
  /// Runs the pending update's deferred instructions alone (before the
  /// state is read: a checkpoint, an export).
  virtual Status runPending(const PendingUpdate &pending) = 0;
  /// An f32 scalar the last run wrote (the loss, the gradient norm).
  virtual Status readScalar(const TensorRef &t, double &value) = 0;
  /// Bytes of memory the backend holds (measured where it can be).
  virtual int64_t peakBytes() = 0;
  /// Offload: bytes of host memory held for the plan's host state (the
  /// offloaded shards and their optimizer state, the host arena and
  /// buffers), as allocated.
  virtual int64_t hostBytes() = 0;
  /// The end of the highest arena byte any step has written.
  virtual int64_t arenaHighWater() = 0;
};

} // namespace fsdp

#endif // FSDP_RUNTIME_EXEC_STEPBACKEND_H
