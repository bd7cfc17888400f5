//===- Data.h - Training batches: synthetic or from .npz --------*- C++ -*-===//
#ifndef FSDP_RUNTIME_IO_DATA_H
#define FSDP_RUNTIME_IO_DATA_H

#include "runtime/plan/Plan.h"

#include <memory>
#include <string>
#include <vector>

namespace fsdp {

class DataSource {
public:
  virtual ~DataSource() = default;
  /// Writes batch `step` into the plan's input buffers `dest[i]`.
  virtual Status next(int64_t step, const std::vector<void *> &dest) = 0;
};

/// Seeded random batches: integer inputs uniform over the range the plan
/// uses them with (the embedding rows they index, the classes they name),
/// float inputs standard normal, booleans fair coins.
std::unique_ptr<DataSource> syntheticData(const Plan &plan, uint64_t seed);

/// Arrays named like the graph inputs in an uncompressed .npz (np.savez).
/// The leading dimension is the global batch; batch `step` takes rows
/// (step * B + i) mod N for this rank's slice, reused cyclically.
Status npzData(const std::string &path, const Plan &plan, int64_t rank,
               int64_t worldSize, std::unique_ptr<DataSource> &out);

/// The same on an archive's bytes in memory; `where` names it in errors
/// (the fuzzing entry point).
Status npzDataFromBytes(const std::string &bytes, const std::string &where,
                        const Plan &plan, int64_t rank, int64_t worldSize,
                        std::unique_ptr<DataSource> &out);

/// A token stream in llm.c's .bin format (a 256-int32 header: magic
/// 20240520, version 1, token count; then uint16 tokens). Each row of batch
/// `step` is a window of `seqLen` tokens for the first integer input and the
/// window shifted by one for `targets`; windows advance through the file,
/// wrapping around, each rank taking its own rows.
Status binTokenData(const std::string &path, const Plan &plan, int64_t seqLen,
                    int64_t rank, int64_t worldSize,
                    std::unique_ptr<DataSource> &out);
/// The same on the file's bytes (kept as the token store).
Status binTokenDataFromBytes(std::string bytes, const std::string &where,
                             const Plan &plan, int64_t seqLen, int64_t rank,
                             int64_t worldSize,
                             std::unique_ptr<DataSource> &out);

/// Writes tensors as a safetensors file readable by PyTorch/HF loaders.
struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  const float *data;
};
Status writeSafetensors(const std::string &path,
                        const std::vector<NamedTensor> &tensors);

} // namespace fsdp

#endif // FSDP_RUNTIME_IO_DATA_H
