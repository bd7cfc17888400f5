//===- AsyncCheckpoint.cpp - A checkpoint written in the background -------===//
//
// See AsyncCheckpoint.h.
//
//===----------------------------------------------------------------------===//
#include "runtime/io/AsyncCheckpoint.h"

#include <cstring>

namespace fsdp {

AsyncCheckpoint::~AsyncCheckpoint() {
  if (writer.joinable())
    writer.join();
}

Status AsyncCheckpoint::start(const std::string &dir, const Plan &plan,
                              Executor &exec, const TrainingPosition &position,
                              int64_t keepLast) {
  FSDP_RETURN_IF_ERROR(poll(exec, true));
  FSDP_RETURN_IF_ERROR(prepareSave(dir, plan, exec, position, save));
  // The state as it is now, into the staging buffer: training goes on
  // changing the executor's copy while the writer reads this one.
  size_t total = 0;
  for (const NamedTensor &t : save.tensors)
    total += (size_t)t.shape[0];
  if (staging.size() < total)
    staging.resize(total);
  size_t at = 0;
  for (NamedTensor &t : save.tensors) {
    std::memcpy(staging.data() + at, t.data, (size_t)t.shape[0] * 4);
    t.data = staging.data() + at;
    at += (size_t)t.shape[0];
  }
  keep = keepLast;
  active = true;
  finished = false;
  writer = std::thread([this] {
    result = writeShard(save);
    finished = true;
  });
  return Status::ok();
}

Status AsyncCheckpoint::poll(Executor &exec, bool wait) {
  if (!active)
    return Status::ok();
  if (wait && writer.joinable())
    writer.join();
  // Whether every rank's writer is done (every rank asks at the same step:
  // saves start at the same steps, and this answer is the same on all).
  float notDone = finished ? 0.0f : 1.0f;
  FSDP_RETURN_IF_ERROR(exec.sumOverRanks(&notDone, 1));
  if (notDone > 0)
    return Status::ok();
  if (writer.joinable())
    writer.join();
  active = false;
  FSDP_RETURN_IF_ERROR(commitSave(exec, save, result));
  return save.leader ? keepLatest(save.dir, keep, save.step) : Status::ok();
}

} // namespace fsdp
