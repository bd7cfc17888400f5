//===- OnnxWeights.h - Initial parameters from an ONNX model ----*- C++ -*-===//
#ifndef FSDP_RUNTIME_IO_ONNXWEIGHTS_H
#define FSDP_RUNTIME_IO_ONNXWEIGHTS_H

#include "runtime/plan/Plan.h"

#include <functional>
#include <string>

namespace fsdp {

/// Reads every plan parameter's initial value from the ONNX model at
/// `path` (inline raw or typed data, or external data next to the model),
/// one parameter at a time, into `dest(i)` (param i's float storage).
Status loadOnnxWeights(const std::string &path, const Plan &plan,
                       const std::function<float *(size_t)> &dest);

} // namespace fsdp

#endif // FSDP_RUNTIME_IO_ONNXWEIGHTS_H
