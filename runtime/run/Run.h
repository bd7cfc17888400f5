//===- Run.h - Run a plan: what fsdp-run does, as a library ----*- C++ -*-===//
//
// fsdp-run's work after its flags are parsed: the launch and the
// communicator, the plan and the checks every rank agrees on, the backend
// and the weights, the data, checkpoints and resumption, the steps with
// their log and progress, and at the end the measured trace and the
// exports. tools/fsdp-run.cpp is the thin main around it.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_RUN_RUN_H
#define FSDP_RUNTIME_RUN_RUN_H

#include "runtime/comm/Comm.h"
#include "runtime/support/Status.h"

#include <cstdint>
#include <memory>
#include <string>

namespace fsdp {

/// fsdp-run's flags (tools/fsdp-run.cpp documents each).
struct RunOptions {
  std::string planPath, data = "synthetic", weights, logPath, saveFull,
                        dumpGrads, checkpointDir, resume, tracePath;
  std::string onNonFinite = "stop", backendName = "cpu";
  /// Signals that save a checkpoint and stop (runtime/run/Preemption.h),
  /// with --checkpoint-dir; "none" leaves every signal's default.
  std::string saveOnSignal = "TERM,USR1";
  double saveGrace = 0; // seconds after the first signal; 0: no deadline
  int64_t steps = 10, checkpointEvery = 0, seqLen = 0, keepLast = 0;
  /// Threads each process's kernels run on; 0: this machine's cores split
  /// between the ranks launched on it.
  int64_t threads = 0;
  uint64_t seed = 0;
  double commTimeout = 60;
  bool quiet = false, checkAllocations = false, calibrateOnly = false;
  bool checkpointAsync = false; // shards written by a background thread
  bool slurmRequeue = false;    // after a save on a signal
};

/// How a run ended, beyond its Status: the communicator it opened, and
/// how an error is to be reported (every rank found it together, so none
/// waits for another; or one rank did, and the others must be ended).
struct RunOutcome {
  std::unique_ptr<Comm> comm;
  bool everyRankKnows = false, abortOnError = false;
  /// Not 0 when the run saved and stopped on a signal: 128 + its number.
  int exitCode = 0;
};

/// Runs a plan as `o` says (or with `o.calibrateOnly` measures the machine
/// and prints a device description).
Status runPlan(const RunOptions &o, RunOutcome &out);

} // namespace fsdp

#endif // FSDP_RUNTIME_RUN_RUN_H
