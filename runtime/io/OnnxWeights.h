//===- OnnxWeights.h - Initial parameters from an ONNX model ----*- C++ -*-===//
#ifndef FSDP_RUNTIME_IO_ONNXWEIGHTS_H
#define FSDP_RUNTIME_IO_ONNXWEIGHTS_H

#include "runtime/exec/Executor.h"

#include <functional>
#include <string>

namespace fsdp {

/// Reads every plan parameter's initial value from the ONNX model at
/// `path` (inline raw or typed data, or external data next to the model)
/// into the pieces of it this rank keeps (`pieces(i)`); from external data
/// only those byte ranges are read. With `base` (a directory above
/// `path`), `path` is one a file named, opened without following links
/// below `base` (see loadSafetensorsWeights).
Status loadOnnxWeights(const std::string &path, const Plan &plan,
                       const std::function<std::vector<Piece>(size_t)> &pieces,
                       const std::string &base = "");

} // namespace fsdp

#endif // FSDP_RUNTIME_IO_ONNXWEIGHTS_H
