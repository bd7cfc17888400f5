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
#include "runtime/exec/StepBackend.h"
#include "runtime/plan/Plan.h"
#include "runtime/plan/Widen.h"

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

namespace fsdp {

struct StepResult {
  double loss = 0, gradNorm = 0, lr = 0;
  /// The gradient norm was not finite: the plan's update skipped every
  /// parameter (the state is the previous step's).
  bool updateSkipped = false;
  /// From the program's first instruction to the end of the step (data
  /// loading of the first micro-batch excluded).
  double computeSeconds = 0;
};

/// Elements [begin, begin + count) of a parameter, kept by this rank at dst.
struct Piece {
  int64_t begin = 0, count = 0;
  float *dst = nullptr;
};

constexpr uint8_t kArenaPattern = 0xA5;
/// The end of the highest 8-byte word of data[0, bytes), counted down from
/// the top, that no longer holds kArenaPattern everywhere: the high-water
/// mark of an arena filled with the pattern (bytes % 8 when none was
/// written).
int64_t writtenEnd(const uint8_t *data, int64_t bytes);

class Executor {
public:
  /// Allocates everything; parameters start at zero until loaded. `comm`
  /// carries the plan's collectives (it must outlive the executor). With a
  /// `backend` the steps run there (runtime/exec/StepBackend.h); the
  /// executor keeps the host's copy of the state.
  /// `loadWeights`, when given, runs as soon as the parameters have
  /// storage (pieces() works), before the arena and the optimizer state
  /// are allocated.
  Status init(const Plan &plan, Comm &comm,
              std::unique_ptr<StepBackend> backend = nullptr,
              const std::function<Status()> &loadWeights = nullptr);
  /// "cpu", or the backend's description.
  std::string describe() const;

  /// Storage of input `i` (write the batch here before step()).
  void *input(size_t i) {
    return backend ? backend->input(i) : ctx.data(plan->inputs[i]);
  }
  /// Where this rank keeps parameter `i`: the whole of it, or the part of
  /// it inside this rank's shard of its flat buffer (possibly nothing).
  /// With a backend, handing out pieces brings the host copy up to date and
  /// sends it back before the next step (it may be written).
  std::vector<Piece> pieces(size_t i) {
    if (Status s = drain(); !s && pending)
      pending = s;
    touchHost();
    copiesStale = true;
    return piecesIn(slots, i);
  }
  /// Applies a pending update (offload's deferred one) and, with a
  /// backend, copies its state to the host if steps changed it (before
  /// reading pieces for a checkpoint or an export).
  Status syncHost();

  /// Assembles full per-parameter tensors from per-slot storage (`slots`
  /// indexed like the plan's slots): flat shards are all-gathered, so every
  /// rank must call it.
  Status gatherFull(const std::vector<std::vector<float>> &slots,
                    std::vector<std::vector<float>> &full);
  /// Every parameter's full value (collective: see gatherFull).
  Status gatherParams(std::vector<std::vector<float>> &full);

  /// Per-parameter state a checkpoint holds: the value, and the
  /// optimizer's first (AdamW exp_avg, SGD momentum) and second moments.
  enum class State { Value, First, Second };
  std::vector<Piece> statePieces(size_t param, State s);
  /// Element ranges [begin, begin + count) of parameter `param` stored by
  /// the rank at position `shardRank` of its shard group (the whole
  /// parameter when it is not sharded).
  static std::vector<std::pair<int64_t, int64_t>>
  ranges(const Plan &plan, size_t param, int64_t shardRank);
  /// Whether this rank writes parameter `param` into a checkpoint: one copy
  /// of every element (replicas and unsharded parameters: rank 0's).
  bool writesState(size_t param) const;
  /// SGD's momentum buffer of `param` exists (after its first step).
  bool momentumStarted(size_t param) const;
  void setMomentumStarted(size_t param);
  /// Every rank passes `ok`; an error on every rank if any passed false, or
  /// if a rank does not arrive within the communicator's timeout.
  Status agree(bool ok, const std::string &what);
  /// values[i] summed over every rank, in place (small host-side counts).
  Status sumOverRanks(float *values, int64_t count);
  Comm &communicator() { return *comm; }
  /// Updates skipped so far (a non-finite gradient norm); AdamW's bias
  /// correction counts only the updates made, as torch.optim's step does
  /// when GradScaler skips one. Saved in checkpoints.
  int64_t skippedUpdates() const { return skipped; }
  void setSkippedUpdates(int64_t n) { skipped = n; }

  /// The last step's measured [begin, end] of every instruction (by
  /// Instruction::index; seconds since the step started).
  const std::vector<double> &measuredTimeline() const { return timeline; }
  /// Bytes this process holds for training: the arena, the parameter
  /// shards, optimizer state, accumulators, constants and scratch.
  int64_t peakBytes() const;
  /// Offload: bytes this rank keeps in host memory (the offloaded shards
  /// and their optimizer state, the host arena, the host buffers), as
  /// allocated; a plan's `predicted.host_bytes`. Of it, on the CPU
  /// backend, peakBytes() counts the same bytes too.
  int64_t hostBytes() const;
  /// The end of the highest arena byte any step has written: the measured
  /// counterpart of the plan's arena_bytes.
  int64_t arenaHighWater() const;

  /// The learning-rate factor of optimizer step `t` (0-based): linear
  /// warm-up to 1 over warmup_steps, then constant or cosine to 0 at
  /// total_steps.
  double lrFactor(int64_t t) const;

  /// Runs one optimizer step (index `t`, 0-based): train.gradAccum
  /// micro-steps, each after `loadBatch(micro)` wrote the inputs (micro =
  /// t * gradAccum + i), then the update. The loss is the micro-steps' mean.
  /// With `grads` set, the gradients the optimizer applies are copied there
  /// (by slot: see gatherFull).
  Status step(int64_t t, const std::function<Status(int64_t micro)> &loadBatch,
              StepResult &result,
              std::vector<std::vector<float>> *grads = nullptr);

private:
  const Plan *plan = nullptr;
  std::unique_ptr<StepBackend> backend;
  bool hostNewer = true, backendNewer = false;
  int64_t skipped = 0;
  Status pending; // a failed transfer of touchHost, reported by step()
  void touchHost();
  HostState hostState();
  std::unique_ptr<uint8_t, void (*)(void *)> arena{nullptr, nullptr};
  std::vector<std::vector<float>> slots, gradSums;
  std::vector<Piece> piecesIn(std::vector<std::vector<float>> &storage,
                              size_t param);
  int64_t spareSlot = 0; // the communicator slot of gatherFull's collectives
  std::vector<double> timeline;
  std::chrono::steady_clock::time_point stepStart;
  double clock() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         stepStart)
        .count();
  }
  Comm *comm = nullptr;
  /// An instruction as the CPU backend runs it: its kernel, and on bf16/f16
  /// tensors its widening (casts, the kernel on f32 copies, casts).
  struct CpuInstruction {
    cpu::Kernel kernel = nullptr;
    std::optional<Widening> widening;
  };
  std::vector<CpuInstruction> compile(const std::vector<Instruction> &list);
  std::vector<CpuInstruction> kernels, updateKernels;
  /// `deferred`: run only the deferred instructions (drain); otherwise
  /// everything, the deferred ones where an update is pending.
  Status run(const std::vector<Instruction> &program,
             const std::vector<CpuInstruction> &kernels, const char *what,
             bool deferredOnly = false);
  std::vector<std::vector<uint8_t>> constants;
  std::vector<double> scratch; // viewed as floats by most kernels
  std::vector<double> widened; // Space::Widened: f32 copies
  /// Offload: the host arena, each slot's device copy (empty without one),
  /// and the casts that fill the copies from the shards where the shards
  /// changed outside a step (weights loaded, a checkpoint restored).
  std::vector<double> hostArena;
  std::vector<std::vector<double>> deviceCopies;
  std::vector<Instruction> fillCopies;
  bool copiesStale = true;
  Status refreshDeviceCopies();
  std::vector<std::vector<double>> hostBuffers;
  /// Offload's updates run before the next step's first use of their shard
  /// (Instruction::deferred): whether one is pending, and the optimizer
  /// step and learning-rate factor of the step whose gradients it applies.
  bool hasDeferred = false, updatePending = false;
  int64_t pendingStep = 0;
  double pendingLrScale = 1;
  /// Runs the pending update alone (the plan's deferred instructions), so
  /// the state is every step's so far (before anything reads it).
  Status drain();
  cpu::OptimizerState optimizer;
  double baseLr = 0;
  cpu::Context ctx;
};

} // namespace fsdp

#endif // FSDP_RUNTIME_EXEC_EXECUTOR_H
