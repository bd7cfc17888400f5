//===- Preemption.h - Save on a signal, then stop --------------*- C++ -*-===//
//
// A cluster takes machines away with a signal: Slurm sends SIGTERM (and,
// with --signal=USR1@90, SIGUSR1 earlier), then SIGKILL after a grace
// period; torchrun forwards the signals it gets to its workers. fsdp-run
// catches the signals `--save-on-signal` names: one thread waits for them
// and records the first; the step loop asks every rank at each step's end
// whether any rank got one (a signal sent to one rank stops them all at the
// same step), saves a checkpoint and exits with 128 + the signal's number. A
// second signal, or --save-grace seconds after the first, ends the process at
// once: a checkpoint is written to a temporary name and renamed when
// complete (runtime/io/Checkpoint.h), so the previous one stays intact.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_RUN_PREEMPTION_H
#define FSDP_RUNTIME_RUN_PREEMPTION_H

#include "runtime/support/Status.h"

#include <string>
#include <vector>

namespace fsdp {

/// The signals of a `--save-on-signal` list ("TERM,USR1", "SIGTERM",
/// "none": no signal); an error names an unknown one.
Status parseSaveSignals(const std::string &list, std::vector<int> &signals);

/// Blocks `signals` in the calling thread, and so in every thread it
/// creates later: call it first, before the communicator starts its
/// threads. Starts the thread that takes them and, when graceSeconds > 0,
/// ends the process that long after the first. Once a process.
Status installSaveOnSignal(const std::vector<int> &signals,
                           double graceSeconds);

/// The first caught signal's number, or 0.
int caughtSignal();

/// The watched signals' names, for messages ("SIGTERM").
std::string signalName(int signal);

/// `scontrol requeue $SLURM_JOB_ID` (--slurm-requeue, after a save on a
/// signal): Slurm puts the job back in the queue, to start again with the
/// same script; an error names what failed (no SLURM_JOB_ID, no scontrol,
/// its exit status).
Status requeueSlurmJob();

} // namespace fsdp

#endif // FSDP_RUNTIME_RUN_PREEMPTION_H
