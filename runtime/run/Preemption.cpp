//===- Preemption.cpp - Save on a signal, then stop -----------------------===//
//
// See Preemption.h. The signals are blocked and one thread waits for them;
// the handler, for a thread that runs with them unblocked, only does what
// is async-signal-safe (atomics, write, _exit).
//
//===----------------------------------------------------------------------===//
#include "runtime/run/Preemption.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <pthread.h>
#include <spawn.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace fsdp {

namespace {

std::atomic<int> first{0};

const struct {
  const char *name;
  int number;
} kSignals[] = {{"TERM", SIGTERM}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
                {"INT", SIGINT},   {"HUP", SIGHUP},   {"QUIT", SIGQUIT}};

void say(const char *msg) {
  ssize_t ignored = write(STDERR_FILENO, msg, std::strlen(msg));
  (void)ignored;
}

std::atomic<int64_t> firstAtNs{0};

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// A signal arrived (async-signal-safe: atomics, write, _exit).
void onSignal(int sig) {
  int none = 0;
  if (first.compare_exchange_strong(none, sig)) {
    firstAtNs.store(nowNs());
    return;
  }
  say("fsdp-run: a second signal: stopping now without saving (the previous "
      "checkpoint is intact)\n");
  _exit(128 + first.load());
}

} // namespace

std::string signalName(int signal) {
  for (const auto &s : kSignals)
    if (s.number == signal)
      return std::string("SIG") + s.name;
  return "signal " + std::to_string(signal);
}

Status parseSaveSignals(const std::string &list, std::vector<int> &signals) {
  signals.clear();
  if (list == "none")
    return Status::ok();
  size_t at = 0;
  while (at <= list.size()) {
    size_t comma = list.find(',', at);
    std::string name = list.substr(
        at, comma == std::string::npos ? std::string::npos : comma - at);
    if (name.rfind("SIG", 0) == 0)
      name = name.substr(3);
    int number = 0;
    for (const auto &s : kSignals)
      if (name == s.name)
        number = s.number;
    if (number == 0)
      return Status::error("--save-on-signal: unknown signal '" + name +
                           "' (TERM, USR1, USR2, INT, HUP, QUIT, or none)");
    if (std::find(signals.begin(), signals.end(), number) == signals.end())
      signals.push_back(number); // "TERM,TERM" is TERM
    if (comma == std::string::npos)
      break;
    at = comma + 1;
  }
  return Status::ok();
}

Status installSaveOnSignal(const std::vector<int> &signals,
                           double graceSeconds) {
  if (signals.empty())
    return Status::ok();
  // Blocked in this thread, and so in every thread created after it (the
  // communicators', the kernels' pools), and taken by one thread with
  // sigtimedwait: no handler interrupts a system call of MPI or Gloo (one
  // did: a signal during a collective corrupted Open MPI's non-blocking
  // collectives' heap, one launch in eight). A thread that already ran
  // with them unblocked (a library's pool started before main) gets the
  // same bookkeeping as a handler.
  sigset_t set;
  sigemptyset(&set);
  for (int sig : signals) {
    sigaddset(&set, sig);
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = onSignal;
    sigfillset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(sig, &sa, nullptr) != 0)
      return Status::error("cannot catch " + signalName(sig) + ": " +
                           std::strerror(errno));
  }
  if (int e = pthread_sigmask(SIG_BLOCK, &set, nullptr); e != 0)
    return Status::error(std::string("cannot block the signals to save on: ") +
                         std::strerror(e));
  int64_t grace = (int64_t)(graceSeconds * 1e9);
  std::thread([set, grace] {
    for (;;) {
      timespec wait{0, 20 * 1000 * 1000};
      int sig = sigtimedwait(&set, nullptr, &wait);
      if (sig > 0)
        onSignal(sig);
      int64_t at = firstAtNs.load(); // stored just after `first`
      if (grace > 0 && first.load() != 0 && at != 0 && nowNs() - at > grace) {
        say("fsdp-run: --save-grace passed: stopping now without saving (the "
            "previous checkpoint is intact)\n");
        _exit(128 + first.load());
      }
    }
  }).detach();
  return Status::ok();
}

int caughtSignal() { return first.load(); }

Status requeueSlurmJob() {
  const char *job = std::getenv("SLURM_JOB_ID");
  if (!job || !*job)
    return Status::error("--slurm-requeue: SLURM_JOB_ID is not set (not "
                         "running under Slurm)");
  std::string id = job;
  char *argv[] = {const_cast<char *>("scontrol"), const_cast<char *>("requeue"),
                  id.data(), nullptr};
  // The signals this process blocks stay blocked in the child unless reset.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  int e = posix_spawnp(&pid, "scontrol", nullptr, &attr, argv, environ);
  posix_spawnattr_destroy(&attr);
  if (e != 0)
    return Status::error(std::string("--slurm-requeue: cannot run scontrol: ") +
                         std::strerror(e));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Status::error(
        "--slurm-requeue: 'scontrol requeue " + id + "' failed (exit status " +
        std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")");
  return Status::ok();
}

} // namespace fsdp
