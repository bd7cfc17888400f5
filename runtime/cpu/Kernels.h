//===- Kernels.h - CPU kernels of every op a plan can contain ---*- C++ -*-===//
//
// One kernel per fsdp op (runtime/cpu/Kernels.cpp): float32 math, int64
// indices, i1 stored as bytes, OpenBLAS for every GEMM. Kernels read their
// tensors through a Context that maps plan references to memory and never
// allocate: scratch space is sized from the plan before the first step.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_CPU_KERNELS_H
#define FSDP_RUNTIME_CPU_KERNELS_H

#include "runtime/comm/Comm.h"
#include "runtime/plan/Plan.h"

#include <vector>

namespace fsdp::cpu {

using fsdp::kMaxRank;

/// Optimizer state and schedule the optimizer kernels read and update.
struct OptimizerState {
  std::vector<std::vector<float>> first, second; // AdamW m, v; SGD momentum
  std::vector<char> started;                     // SGD: momentum initialised
  int64_t step = 0;                              // 1-based inside a step
  /// What keys dropout's masks and fsdp.uniform's draws: the micro-batch's
  /// number in the run, 1-based (the optimizer's step does not advance
  /// over a skipped update; the draws do).
  int64_t drawStep = 0;
  double lrScale = 1.0;
};

struct Context {
  uint8_t *arena = nullptr;
  std::vector<float *> params;
  std::vector<float *> grads; // gradient accumulators (grad_accum > 1)
  std::vector<const uint8_t *> constants;
  float *scratch = nullptr;   // 8-byte aligned: kernels may use it as double
  uint8_t *widened = nullptr; // Space::Widened (runtime/plan/Widen.h)
  /// Offload: the host arena (Space::Host) and each slot's device copy
  /// (Space::DeviceCopy; null for a slot without one).
  uint8_t *host = nullptr;
  std::vector<uint8_t *> deviceCopies;
  std::vector<uint8_t *> hostBuffers; // Space::HostBuffer

  OptimizerState *optimizer = nullptr;
  Comm *comm = nullptr;
  /// When set, optimizer kernels record the gradient they apply, by param.
  std::vector<std::vector<float>> *captureGrads = nullptr;

  void *data(const TensorRef &t) const;
  template <typename T> T *get(const TensorRef &t) const {
    return static_cast<T *>(data(t));
  }
};

using Kernel = Status (*)(const Instruction &, Context &);

/// The kernel of `op` (checked by fsdp::checkInstruction first).
Kernel kernelFor(const std::string &op);

/// Whether the kernel of `instr` takes its bf16 operands as they are (a
/// matmul where the CPU multiplies bf16: cpu/Gemm.h), so the executor
/// gives it no widened f32 copies.
bool runsNarrow(const Instruction &instr);

/// Scratch floats an instruction needs (attention's score matrix, a
/// reduction's double accumulators).
int64_t scratchFloats(const Instruction &instr);

} // namespace fsdp::cpu

#endif // FSDP_RUNTIME_CPU_KERNELS_H
