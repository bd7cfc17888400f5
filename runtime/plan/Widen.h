//===- Widen.h - f32 twins of instructions on bf16/f16 tensors --*- C++ -*-===//
//
// A plan computed in bf16 or f16 (fsdp-opt --compute-dtype) stores its
// activations narrow, but the math kernels of both backends compute in f32.
// Such an instruction runs as: casts of its narrow inputs to f32 copies, its
// f32 twin, casts of the twin's f32 results back to the narrow outputs. That
// is the numerics of PyTorch's bf16 kernels (load, compute in f32, round the
// result once). The copies live in a widening buffer (Space::Widened) sized
// before the first step, so nothing is allocated inside a step. Kernels that
// only move bytes (copies, views, gathers, collectives) take any dtype and
// are never widened.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_PLAN_WIDEN_H
#define FSDP_RUNTIME_PLAN_WIDEN_H

#include "common/ComputeOps.h"
#include "runtime/plan/Plan.h"

#include <optional>

namespace fsdp {

struct Widening {
  std::vector<Instruction> before; // `cast`: narrow input -> f32 copy
  Instruction twin;                // the instruction on the f32 copies
  std::vector<Instruction> after;  // `cast`: f32 copy -> narrow output
  int64_t bytes = 0;               // of the widening buffer it uses
};

/// The widening of `in`, or nothing when it has no bf16/f16 tensor or its
/// kernels take any dtype.
std::optional<Widening> widen(const Instruction &in);

} // namespace fsdp

#endif // FSDP_RUNTIME_PLAN_WIDEN_H
