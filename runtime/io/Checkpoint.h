//===- Checkpoint.h - Save and resume training state ------------*- C++ -*-===//
//
// A sharded checkpoint: a directory `step-N` in which every rank that holds
// a unique part of the state writes `rank-R.safetensors` (its parameter
// pieces and their optimizer moments, named `<param>#<begin>`,
// `<param>.exp_avg#<begin>`, `<param>.exp_avg_sq#<begin>` or
// `<param>.momentum_buffer#<begin>`, 1-D), and rank 0 writes
// `manifest.json` last: where every piece of every parameter lies, with the
// step, seed, data and optimizer. All of it goes into `step-N.tmp`, renamed
// into place once every rank has written; then `latest` (a file naming the
// directory) is replaced by rename too. A crash at any point leaves the
// previous checkpoint loadable. Loading reads the pieces a rank needs under
// its own plan, so a checkpoint saved on N ranks with one strategy resumes
// on M ranks with another.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_IO_CHECKPOINT_H
#define FSDP_RUNTIME_IO_CHECKPOINT_H

#include "runtime/exec/Executor.h"
#include "runtime/io/Data.h"
#include "runtime/plan/Plan.h"

#include <functional>
#include <map>
#include <string>

namespace fsdp {

struct TrainingPosition {
  int64_t step = 0;           // optimizer steps completed
  int64_t skippedUpdates = 0; // of them, skipped (non-finite gradients)
  uint64_t seed = 0;
  std::string data;
};

/// A run's hold on its checkpoint directory (rank 0 takes it at start-up):
/// `DIR/.lock`, flock'ed for the life of the process, holding the holder's
/// pid and host. A second job on the same directory fails at start-up
/// naming the holder instead of replacing the first job's checkpoints; and
/// a directory the run cannot create or write is found before the first
/// step, not at the first save.
class CheckpointDirLock {
public:
  CheckpointDirLock() = default;
  CheckpointDirLock(const CheckpointDirLock &) = delete;
  CheckpointDirLock &operator=(const CheckpointDirLock &) = delete;
  ~CheckpointDirLock();
  Status acquire(const std::string &dir);

private:
  int fd = -1;
};

/// Under the lock, before the run: removes what a crashed save left in
/// `dir` (`step-N.tmp` directories, AtomicFile temporaries `NAME.tmp.*`).
/// Only real directories and regular files are removed, never through a
/// link.
void removeLeftovers(const std::string &dir);

/// After a save: removes all but the newest `keep` `step-N` directories
/// (torchtitan's keep_latest_k; 0 keeps every one), never `step-current`,
/// the one just written (a resumed run can be behind an older run's
/// later steps).
Status keepLatest(const std::string &dir, int64_t keep, int64_t current);

/// The newest complete checkpoint in `dir` (a `step-N` directory, not a
/// link, whose manifest, written last, is there), or "" when there is none:
/// what `--resume=auto` resumes from.
std::string newestCheckpoint(const std::string &dir);

/// Every rank calls it; each writes its own shard file.
Status saveCheckpoint(const std::string &dir, const Plan &plan, Executor &exec,
                      const TrainingPosition &position);

/// saveCheckpoint in three parts, for a save written in the background
/// (runtime/io/AsyncCheckpoint.h): prepareSave (every rank, collective)
/// brings the state to the host, checks it and makes `step-N.tmp`;
/// writeShard writes this rank's file (any thread; no collective);
/// commitSave (every rank, collective, once each has written) agrees that
/// all did, and rank 0 writes the manifest and renames the directory into
/// place. `tensors` point at the executor's state until the caller repoints
/// them at a copy.
struct PreparedSave {
  std::string dir, name, tmp, manifest; // manifest: rank 0's text
  std::vector<NamedTensor> tensors;
  int64_t rank = 0, step = 0;
  bool leader = false;
};
Status prepareSave(const std::string &dir, const Plan &plan, Executor &exec,
                   const TrainingPosition &position, PreparedSave &out);
Status writeShard(const PreparedSave &save);
Status commitSave(Executor &exec, const PreparedSave &save, Status wrote);

/// A checkpoint's manifest.json as loadCheckpoint trusts it: every field
/// typed, a training position (0 <= skipped updates <= step), and per
/// parameter its pieces: ranges within [0, 2^40), sorted by their start
/// and overlapping none of the others, each in a shard file of the
/// checkpoint's own directory (a bare file name).
struct Manifest {
  struct Piece {
    int64_t begin = 0, count = 0;
    std::string file;
  };
  struct Param {
    std::vector<int64_t> shape;
    bool momentumStarted = false;
    std::vector<Piece> pieces;
  };
  TrainingPosition position;
  std::string optimizer;
  std::map<std::string, Param> params;
};
/// Parses and checks a manifest's text; `where` names it in errors (the
/// fuzzing entry point).
Status parseManifest(const std::string &text, const std::string &where,
                     Manifest &out);

/// Loads `dir`'s latest checkpoint (or `dir` itself if it is one) into the
/// pieces this rank keeps.
Status loadCheckpoint(const std::string &dir, const Plan &plan, Executor &exec,
                      TrainingPosition &position);

/// Initial parameters from a safetensors file (a --save-full output, or a
/// state dict saved by PyTorch/HF as F32), by original name, into the
/// pieces this rank keeps. With `base` (a directory above `path`), `path`
/// is one a file named: the part below `base` is opened without following
/// links (InputFile::openInside), as ONNX external data is.
Status
loadSafetensorsWeights(const std::string &path, const Plan &plan,
                       const std::function<std::vector<Piece>(size_t)> &pieces,
                       const std::string &base = "");

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
