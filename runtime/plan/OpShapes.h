//===- OpShapes.h - Shape rules shared by the backends ----------*- C++ -*-===//
//
// Checks every backend makes the same way before it moves data: the CPU
// kernels (runtime/cpu/Kernels.cpp) at run time, the device lowering
// (runtime/device/Lowering.cpp) once at start-up.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_PLAN_OPSHAPES_H
#define FSDP_RUNTIME_PLAN_OPSHAPES_H

#include "runtime/plan/Plan.h"

namespace fsdp {

/// Concat (`parts` into `whole`) or split (`whole` into `parts`) along
/// `axis`: every part matches `whole` outside the axis, in its dtype, and
/// the parts cover it. `outer` and `inner` are the products of the
/// dimensions before and after the axis.
Status concatLayout(const std::vector<TensorRef> &parts, const TensorRef &whole,
                    int64_t axis, bool split, int64_t &outer, int64_t &inner);

} // namespace fsdp

#endif // FSDP_RUNTIME_PLAN_OPSHAPES_H
