//===- Checkpoint.h - Save and resume training state ------------*- C++ -*-===//
//
// A checkpoint is a directory `step-N` holding params.safetensors (original
// names), optimizer.safetensors (`<name>.exp_avg`, `<name>.exp_avg_sq` for
// AdamW, `<name>.momentum_buffer` for SGD) and state.json (step, seed, data
// source). It is written into a temporary directory and renamed into place;
// then `latest` (a file naming the directory) is replaced by rename too. A
// crash at any point leaves the previous checkpoint loadable.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_IO_CHECKPOINT_H
#define FSDP_RUNTIME_IO_CHECKPOINT_H

#include "runtime/exec/Executor.h"
#include "runtime/plan/Plan.h"

#include <functional>
#include <map>
#include <string>

namespace fsdp {

struct TrainingPosition {
  int64_t step = 0; // optimizer steps completed
  uint64_t seed = 0;
  std::string data;
};

/// Writes the full (unsharded) state: whatever the world size and strategy
/// it was saved under, any plan of the same model can resume from it.
Status saveCheckpoint(const std::string &dir, const Plan &plan,
                      const FullState &state, const TrainingPosition &position);

/// Loads `dir`'s latest checkpoint (or `dir` itself if it is one).
Status loadCheckpoint(const std::string &dir, const Plan &plan,
                      FullState &state, TrainingPosition &position);

/// Initial parameters from a safetensors file (a --save-full output, or a
/// state dict saved by PyTorch/HF as F32), by original name, into the
/// pieces this rank keeps.
Status
loadSafetensorsWeights(const std::string &path, const Plan &plan,
                       const std::function<std::vector<Piece>(size_t)> &pieces);

/// Reads a safetensors file of F32 tensors, checking every header field.
struct LoadedTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};
Status readSafetensors(const std::string &path,
                       std::map<std::string, LoadedTensor> &out);
/// The same on bytes in memory (the fuzzing entry point).
Status parseSafetensors(const std::string &bytes,
                        std::map<std::string, LoadedTensor> &out);

} // namespace fsdp

#endif // FSDP_RUNTIME_IO_CHECKPOINT_H
