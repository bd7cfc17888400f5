//===- AsyncCheckpoint.h - A checkpoint written in the background -*- C++
//-*-===//
//
// --checkpoint-async: at the step, every rank copies its pieces of the
// state into a host staging buffer (grown to the largest save once, then
// reused) and a thread writes its shard file while training goes on. At
// each later step's end the ranks ask one another whether every writer is
// done; once all are, rank 0 writes the manifest and renames the directory
// into place, as a synchronous save does (runtime/io/Checkpoint.h). The
// next save, the end of the run and a save on a signal wait for the
// pending one first. A crash or a signal during the write leaves
// `step-N.tmp` without a manifest: the previous checkpoint stays the newest
// complete one.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_IO_ASYNCCHECKPOINT_H
#define FSDP_RUNTIME_IO_ASYNCCHECKPOINT_H

#include "runtime/io/Checkpoint.h"

#include <atomic>
#include <thread>

namespace fsdp {

class AsyncCheckpoint {
public:
  AsyncCheckpoint() = default;
  AsyncCheckpoint(const AsyncCheckpoint &) = delete;
  AsyncCheckpoint &operator=(const AsyncCheckpoint &) = delete;
  /// Waits for the writer (its half-written directory is a crash's).
  ~AsyncCheckpoint();

  /// Every rank, at the step: finishes the pending save (waiting for it),
  /// then prepares this one, copies the state and starts the writer. After
  /// the commit, rank 0 keeps the newest `keepLast` (0: all).
  Status start(const std::string &dir, const Plan &plan, Executor &exec,
               const TrainingPosition &position, int64_t keepLast);
  /// Every rank, at a step's end (collective while a save is pending):
  /// commits the pending save once every rank's writer is done; with
  /// `wait`, waits for this rank's writer first, so it always commits.
  Status poll(Executor &exec, bool wait);
  bool pending() const { return active; }
  /// Bytes of the staging buffer (the largest save's state on this rank).
  int64_t stagingBytes() const { return (int64_t)staging.size() * 4; }

private:
  std::vector<float> staging;
  PreparedSave save;
  std::thread writer;
  std::atomic<bool> finished{false};
  Status result = Status::ok();
  bool active = false;
  int64_t keep = 0;
};

} // namespace fsdp

#endif // FSDP_RUNTIME_IO_ASYNCCHECKPOINT_H
