//===- Run.cpp - Run a plan: launch, load, train, log, save ---------------===//
//
// See Run.h. Every error is returned as a Status; tools/fsdp-run.cpp turns
// it into a message and an exit code.
//
//===----------------------------------------------------------------------===//
#include "runtime/run/Run.h"
#include "runtime/backends/Backends.h"
#include "runtime/cpu/Calibrate.h"
#include "runtime/cpu/Gemm.h"
#include "runtime/exec/Executor.h"
#include "runtime/inspect/Inspect.h"
#include "runtime/io/AsyncCheckpoint.h"
#include "runtime/io/Checkpoint.h"
#include "runtime/io/Data.h"
#include "runtime/io/OnnxWeights.h"
#include "runtime/plan/Plan.h"
#include "runtime/run/Calibration.h"
#include "runtime/run/Preemption.h"
#include "runtime/support/AllocationCounter.h"
#include "runtime/support/Digest.h"
#include "runtime/support/File.h"
#include "runtime/support/Finite.h"
#include "runtime/support/Resident.h"
#include "runtime/support/Threads.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <unistd.h>

namespace fsdp {

namespace {

/// Test hook: FSDP_FAULT_RANK=R FSDP_FAULT_STEP=S kills rank R as step S
/// starts, as a crash would.
void maybeInjectFault(int64_t rank, int64_t step) {
  const char *r = std::getenv("FSDP_FAULT_RANK"),
             *s = std::getenv("FSDP_FAULT_STEP");
  if (r && s && std::atoll(r) == rank && std::atoll(s) == step)
    std::_Exit(9);
}

/// Tokens a step processes: the elements of the first integer input (token
/// ids), or the batch size.
int64_t tokensPerStep(const Plan &plan) {
  for (const TensorRef &t : plan.inputs)
    if (t.dtype == DType::I64)
      return t.numel();
  return plan.inputs.empty() || plan.inputs[0].shape.empty()
             ? 1
             : plan.inputs[0].shape[0];
}

/// Full per-parameter tensors by original name (empty ones left out).
std::vector<NamedTensor>
namedParams(const Plan &plan, const std::vector<std::vector<float>> &data) {
  std::vector<NamedTensor> out;
  for (size_t i = 0; i < plan.params.size() && i < data.size(); ++i)
    if (!data[i].empty())
      out.push_back(
          {plan.params[i].name, plan.params[i].shape, data[i].data()});
  return out;
}

/// A log value: the number, or "nan" / "inf" / "-inf" (JSON has no such
/// numbers; nlohmann would write null).
nlohmann::json logNumber(double v) {
  if (std::isfinite(v))
    return v;
  return finiteOrName(v);
}

/// The calibration a run under `comm` is priced on and refreshes
/// (runtime/run/Calibration.h): one process, MPI's or Gloo's.
std::string calibrationEngine(const Comm &comm) {
  return comm.size() == 1 ? "none" : launchedByMpi() ? "mpi" : "gloo";
}

} // namespace

Status runPlan(const RunOptions &o, RunOutcome &out) {
  // Ranks sharing a machine share its cores: split them, or the kernels'
  // threads and the MPI progress loops oversubscribe the CPU many times over.
  const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (!local)
    local = std::getenv("LOCAL_WORLD_SIZE"); // torchrun
  if (o.threads > 0) {
    setNumThreads((int)o.threads);
  } else if (local) {
    int ranksHere = std::max(1, std::atoi(local));
    setNumThreads(std::max(1, numProcs() / ranksHere));
  }
  LaunchInfo launch;
  if (Status s = launchInfo(launch); !s)
    return (s);
  if (Status s = checkLaunch(launch, nullptr); !s)
    return (s);
  // The engine: MPI under mpirun (or for a plan of many ranks, which then
  // needs it), Gloo under torchrun and the like, none for one process.
  auto openComm = [&](int64_t plannedRanks, std::unique_ptr<Comm> &comm) {
    if (!launchedByMpi() && launch.size > 1)
      return glooComm(launch, o.commTimeout, comm);
    if (launchedByMpi() || plannedRanks > 1)
      return mpiComm(o.commTimeout, comm);
    comm = localComm();
    return Status::ok();
  };
  if (o.calibrateOnly) {
    FSDP_RETURN_IF_ERROR(openComm(1, out.comm));
    nlohmann::json device;
    FSDP_RETURN_IF_ERROR(cpu::calibrate(*out.comm, device));
    if (out.comm->rank() != 0)
      return Status::ok();
    std::printf("%s\n", device.dump(1).c_str());
    std::fflush(stdout);
    // It refreshes the cache fsdp-opt's --device=cpu reads, for the engine
    // it ran under (runtime/run/Calibration.h).
    return storeCalibration(calibrationEngine(*out.comm), device);
  }
  if (o.planPath.empty())
    return (Status::error("a plan is required (fsdp-run PLAN ...)"));
  Plan plan;
  if (Status s = loadPlan(o.planPath, plan); !s)
    return (s);
  FSDP_RETURN_IF_ERROR(openComm(plan.worldSize, out.comm));
  Comm *comm = out.comm.get();
  if (Status s = checkLaunch(launch, comm); !s)
    return (s);
  int64_t rank = comm->rank(), world = comm->size();
  // Every rank must run the same plan: compare before the first collective.
  std::string planText;
  if (Status s = readFile(o.planPath, planText, "the plan"); !s)
    return (s);
  if (Status s =
          comm->checkSame(fnv1a64(planText), "the plan (" + o.planPath + ")");
      !s) {
    out.everyRankKnows = true; // every rank reports it; none waits
    return s;
  }
  // So must everything that shapes the collective sequence or the state
  // at start-up (a different --o.steps stalled until the deadline; different
  // --o.weights trained a chimera): the first option that differs is named,
  // on every rank.
  const std::pair<const char *, std::string> agreedOptions[] = {
      {"--steps", std::to_string(o.steps)},
      {"--checkpoint-dir", o.checkpointDir},
      {"--checkpoint-every", std::to_string(o.checkpointEvery)},
      {"--checkpoint-async", o.checkpointAsync ? "given" : ""},
      {"--keep-last", std::to_string(o.keepLast)},
      {"--resume", o.resume},
      {"--weights", o.weights},
      {"--data", o.data},
      {"--seed", std::to_string(o.seed)},
      {"--seq-len", std::to_string(o.seqLen)},
      {"--on-nonfinite", o.onNonFinite},
      {"--backend", o.backendName},
      {"--save-full", o.saveFull.empty() ? "" : "given"},
      {"--dump-grads", o.dumpGrads.empty() ? "" : "given"},
      {"--trace", o.tracePath.empty() ? "" : "given"},
      {"--save-on-signal", o.checkpointDir.empty() ? "" : o.saveOnSignal},
      {"--check-allocations", o.checkAllocations ? "given" : ""}};
  for (const auto &[flag, value] : agreedOptions)
    if (Status s = comm->checkSame(fnv1a64(value),
                                   std::string(flag) + " '" + value + "'");
        !s) {
      out.everyRankKnows = true;
      return s;
    }
  out.abortOnError = true; // a failure from here on ends every rank
  if (plan.worldSize != world)
    return (Status::error(o.planPath + ": planned for " +
                          std::to_string(plan.worldSize) +
                          " ranks, launched on " + std::to_string(world)));
  bool leader = rank == 0;
  bool quiet = o.quiet || !leader;
  std::unique_ptr<StepBackend> backend;
  if (Status s = stepBackend(o.backendName, *comm, launch.localRank,
                             o.commTimeout, backend);
      !s)
    return (s);
  std::string weightsPath = o.weights.empty() ? plan.source : o.weights;
  if (weightsPath.empty())
    return (Status::error("the plan names no model; pass --weights FILE.onnx"));
  bool safetensors =
      weightsPath.size() > 12 &&
      weightsPath.substr(weightsPath.size() - 12) == ".safetensors";
  Executor exec;
  auto load = [&]() {
    auto pieces = [&](size_t i) { return exec.pieces(i); };
    // The plan's own source is opened by its rule (a path the traced
    // model's file named: no links below the directory the user named);
    // --o.weights is the user's and may be a link.
    std::string base = o.weights.empty() ? plan.sourceBase : "";
    return safetensors ? loadSafetensorsWeights(weightsPath, plan, pieces, base)
                       : loadOnnxWeights(weightsPath, plan, pieces, base);
  };
  if (Status s = exec.init(plan, *comm, std::move(backend), load); !s)
    return (s);
  if (!quiet && o.backendName != "cpu")
    std::printf("backend: %s\n", exec.describe().c_str());

  std::unique_ptr<DataSource> source;
  if (o.data == "synthetic") {
    source = syntheticData(plan, o.seed + 7919 * (uint64_t)rank);
  } else if (o.data.size() > 4 && o.data.substr(o.data.size() - 4) == ".npz") {
    if (Status s = npzData(o.data, plan, rank, world, source); !s)
      return (s);
  } else if (o.data.size() > 4 && o.data.substr(o.data.size() - 4) == ".bin") {
    if (o.seqLen <= 0)
      return (Status::error("--data FILE.bin needs --seq-len"));
    if (Status s = binTokenData(o.data, plan, o.seqLen, rank, world, source);
        !s)
      return (s);
  } else {
    return (Status::error(
        "--data must be 'synthetic', a .npz or a .bin file, got '" + o.data +
        "'"));
  }

  // The checkpoint directory is this run's (a second job on it fails here,
  // naming the holder) and writable, known before the first step and
  // before a checkpoint in it is read (the holder may be writing it).
  CheckpointDirLock dirLock;
  if (!o.checkpointDir.empty()) {
    Status locked = leader ? dirLock.acquire(o.checkpointDir) : Status::ok();
    Status agreed = exec.agree(locked.isOk(), "taking " + o.checkpointDir);
    if (!locked)
      return (locked);
    if (!agreed)
      return (agreed);
    if (leader)
      removeLeftovers(o.checkpointDir); // ours now: a crash's half-saves go
  }
  // --resume=auto: the newest complete checkpoint of --checkpoint-dir, or
  // a fresh start, so one command line serves the first launch, a requeue
  // and a restart (every rank looks once the leader has cleared the
  // directory of half-saves).
  std::string resume = o.resume;
  if (resume == "auto") {
    if (o.checkpointDir.empty())
      return (Status::error("--resume=auto needs --checkpoint-dir (where to "
                            "look for the newest checkpoint)"));
    FSDP_RETURN_IF_ERROR(exec.agree(true, "clearing " + o.checkpointDir));
    resume = newestCheckpoint(o.checkpointDir);
    if (resume.empty() && !quiet)
      std::printf("no checkpoint in %s: starting at step 0\n",
                  o.checkpointDir.c_str());
  }
  TrainingPosition position{0, 0, o.seed, o.data};
  if (!resume.empty()) {
    TrainingPosition saved;
    if (Status s = loadCheckpoint(resume, plan, exec, saved); !s)
      return (s);
    if (saved.seed != o.seed || saved.data != o.data)
      return (Status::error(resume + ": saved with --data " + saved.data +
                            " --seed " + std::to_string(saved.seed) +
                            "; resume with the same data and seed"));
    if (saved.step > o.steps)
      return (Status::error(resume + ": the checkpoint is at step " +
                            std::to_string(saved.step) + ", past --steps " +
                            std::to_string(o.steps)));
    position.step = saved.step;
    position.skippedUpdates = saved.skippedUpdates;
    exec.setSkippedUpdates(saved.skippedUpdates);
    if (!quiet)
      std::printf("resumed from %s at step %lld\n", resume.c_str(),
                  (long long)saved.step);
  }
  // Save on a signal: with somewhere to save to, the signals named are
  // taken (tools/fsdp-run.cpp installs that before anything starts a
  // thread); their default, ending the process, otherwise.
  std::vector<int> saveSignals;
  if (!o.checkpointDir.empty())
    FSDP_RETURN_IF_ERROR(parseSaveSignals(o.saveOnSignal, saveSignals));
  std::vector<float> caught(saveSignals.size()); // per signal, every step
  // Every rank writes its shard of the state; rank 0 the manifest, last.
  // With --checkpoint-async the shards are written in the background (and
  // committed at a later step's end); `now` saves before returning.
  AsyncCheckpoint background;
  auto checkpoint = [&](int64_t done, bool now) -> Status {
    position.step = done;
    position.skippedUpdates = exec.skippedUpdates();
    if (o.checkpointAsync && !now)
      return background.start(o.checkpointDir, plan, exec, position,
                              o.keepLast);
    FSDP_RETURN_IF_ERROR(background.poll(exec, true));
    FSDP_RETURN_IF_ERROR(saveCheckpoint(o.checkpointDir, plan, exec, position));
    return leader ? keepLatest(o.checkpointDir, o.keepLast, done)
                  : Status::ok();
  };

  // After step `done` (`due`: its checkpoint was just started): whether
  // any rank caught a signal (every rank asks at every step's end, so all
  // stop after the same step); if one did, the step is saved, `stop` set
  // and the exit code 128 + the signal's number.
  auto stopIfSignalled = [&](int64_t done, bool due, bool &stop) -> Status {
    for (size_t i = 0; i < saveSignals.size(); ++i)
      caught[i] = caughtSignal() == saveSignals[i] ? 1.0f : 0.0f;
    FSDP_RETURN_IF_ERROR(
        exec.sumOverRanks(caught.data(), (int64_t)caught.size()));
    size_t which = 0;
    while (which < caught.size() && caught[which] == 0.0f)
      ++which;
    if (which == caught.size())
      return Status::ok();
    int sig = saveSignals[which];
    Status s = due ? background.poll(exec, true) : checkpoint(done, true);
    if (!s)
      return s.withContext("saving on " + signalName(sig));
    // Every rank leaves only once the leader has also pruned old
    // checkpoints (a launcher ends the others when one exits).
    FSDP_RETURN_IF_ERROR(exec.agree(true, "stopping after the save"));
    stop = true;
    out.exitCode = 128 + sig;
    if (!leader)
      return Status::ok();
    std::fprintf(stderr,
                 "fsdp-run: %s on %d of %lld rank(s): saved step %lld in %s; "
                 "stopping with exit code %d (--resume=auto goes on from "
                 "it)\n",
                 signalName(sig).c_str(), (int)caught[which], (long long)world,
                 (long long)done, o.checkpointDir.c_str(), out.exitCode);
    // The job goes back in Slurm's queue; the checkpoint is saved either
    // way, so a failed requeue is said, not an error.
    if (o.slurmRequeue) {
      Status r = requeueSlurmJob();
      std::fprintf(
          stderr, "fsdp-run: %s\n",
          r ? ("requeued Slurm job " + std::string(std::getenv("SLURM_JOB_ID")))
                  .c_str()
            : r.message().c_str());
    }
    std::fflush(stderr);
    return Status::ok();
  };
  std::ofstream log;
  if (!o.logPath.empty() && leader) {
    // A resumed run adds to the history it continues, never truncates it.
    log.open(o.logPath, resume.empty() ? std::ios::out | std::ios::trunc
                                       : std::ios::out | std::ios::app);
    if (!log)
      return (Status::error(o.logPath + ": cannot write the log (" +
                            std::strerror(errno) + ")"));
  }
  std::vector<void *> inputs;
  for (size_t i = 0; i < plan.inputs.size(); ++i)
    inputs.push_back(exec.input(i));
  // mpirun hands its children a pseudo-terminal: plain lines there.
  bool tty = isatty(fileno(stdout)) && !launchedByMpi();
  int64_t tokens = tokensPerStep(plan) * world;
  std::vector<std::vector<float>> grads;
  std::vector<double> stepSeconds; // for --trace: the median step
  // (bounded: --o.steps may be 10^10)
  const int64_t kTimedSteps = 1 << 20;
  stepSeconds.reserve(
      std::min<int64_t>(std::max<int64_t>(o.steps, 0), kTimedSteps));
  // For --trace: per-instruction durations of the first step and of up to
  // 64 steady ones after it, for their medians (bounded on long runs).
  std::vector<std::vector<double>> durations;
  const size_t kMedianSteps = 1 + 64;

  int64_t accum = std::max<int64_t>(plan.train.gradAccum, 1);
  auto loadBatch = [&](int64_t micro) { return source->next(micro, inputs); };
  for (int64_t t = position.step; t < o.steps; ++t) {
    maybeInjectFault(rank, t + 1);
    auto start = std::chrono::steady_clock::now();
    StepResult r;
    bool capture = t == 0 && !o.dumpGrads.empty();
    bool counted = o.checkAllocations && t > position.step && !capture;
    if (counted)
      startCountingAllocations();
    Status stepStatus = exec.step(t, loadBatch, r, capture ? &grads : nullptr);
    int64_t allocated = counted ? stopCountingAllocations() : 0;
    if (!stepStatus)
      return (stepStatus.withContext("step " + std::to_string(t + 1)));
    if (allocated > 0)
      return (Status::error("step " + std::to_string(t + 1) +
                            " allocated heap memory " +
                            std::to_string(allocated) + " times"));
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    double tps = tokens * accum / (ms / 1000.0);
    if ((int64_t)stepSeconds.size() < std::min(o.steps, kTimedSteps))
      stepSeconds.push_back(r.computeSeconds);
    if (!o.tracePath.empty() && durations.size() < kMedianSteps)
      durations.push_back(instructionDurations(exec.measuredTimeline()));
    bool nonFinite = !std::isfinite(r.loss) || !std::isfinite(r.gradNorm);
    if (log.is_open())
      log << nlohmann::json{{"step", t + 1},
                            {"loss", logNumber(r.loss)},
                            {"grad_norm", logNumber(r.gradNorm)},
                            {"update_skipped", r.updateSkipped},
                            {"skipped_updates", exec.skippedUpdates()},
                            {"lr", r.lr},
                            {"step_ms", ms},
                            {"tokens_per_s", tps},
                            {"peak_bytes", exec.peakBytes()},
                            {"host_bytes", exec.hostBytes()},
                            {"arena_bytes", plan.arenaBytes},
                            {"arena_high_water", exec.arenaHighWater()},
                            {"rss_peak_bytes", peakResidentBytes()}}
                 .dump()
          << "\n";
    // Every line reaches the file, or the run says so (a full disk or
    // /dev/full exited 0 with the history lost).
    if (log.is_open() && !log.flush())
      return (Status::error(o.logPath + ": cannot write the log (" +
                            std::strerror(errno) + ")"));
    if (!quiet) {
      if (tty) {
        int width = 30, done = (int)((t + 1) * width / o.steps);
        std::printf("\r[%s%s] %lld/%lld loss %.4f  %.0f tok/s ",
                    std::string(std::max(done, 0), '#').c_str(),
                    std::string(width - done, '.').c_str(), (long long)(t + 1),
                    (long long)o.steps, r.loss, tps);
        if (t + 1 == o.steps)
          std::printf("\n");
      } else {
        std::printf("step %lld/%lld loss %.6f grad_norm %.6f lr %.3g %.1f ms "
                    "%.0f tok/s\n",
                    (long long)(t + 1), (long long)o.steps, r.loss, r.gradNorm,
                    r.lr, ms, tps);
      }
      std::fflush(stdout);
    }
    if (nonFinite && o.onNonFinite == "stop")
      return (Status::error(
          "step " + std::to_string(t + 1) + ": the loss is " +
          finiteOrName(r.loss) + " and the gradient norm " +
          finiteOrName(r.gradNorm) +
          (r.updateSkipped ? "; its update was skipped (the state is step " +
                                 std::to_string(t) + "'s)"
                           : "") +
          "; the run stops (--on-nonfinite=skip goes on past such steps)" +
          (o.checkpointDir.empty()
               ? std::string()
               : "; nothing of this step is checkpointed")));
    bool due = !o.checkpointDir.empty() &&
               ((o.checkpointEvery > 0 && (t + 1) % o.checkpointEvery == 0) ||
                t + 1 == o.steps);
    if (due)
      if (Status s = checkpoint(t + 1, false); !s)
        return (s);
    if (background.pending())
      if (Status s = background.poll(exec, t + 1 == o.steps); !s)
        return (s);
    if (!saveSignals.empty() && t + 1 < o.steps) {
      bool stop = false;
      if (Status s = stopIfSignalled(t + 1, due, stop); !s)
        return (s);
      if (stop)
        return Status::ok();
    }
    if (capture) {
      std::vector<std::vector<float>> full;
      if (Status s = exec.gatherFull(grads, full); !s)
        return (s);
      if (Status s =
              leader ? writeSafetensors(o.dumpGrads, namedParams(plan, full))
                     : Status::ok();
          !s)
        return (s);
    }
  }

  // The steps after the first (which warms caches and pages in the
  // arena): their median is steadier than the last step on a shared
  // machine, and their spread (10th to 90th percentile) says how far the
  // machine moved during the run (bench/machine_noise.py).
  std::vector<double> steady(stepSeconds.begin() +
                                 (stepSeconds.size() > 1 ? 1 : 0),
                             stepSeconds.end());
  std::sort(steady.begin(), steady.end());
  auto percentile = [&](double q) { // steady not empty
    return steady[(size_t)(q * (double)(steady.size() - 1))];
  };

  // A plan priced on this machine's calibration: its measured step joins
  // the calibration's observed steps, which correct the plans priced after
  // it (recordObservedStep). Never a reason for the run to fail. Not a run
  // whose steps spread by more than a quarter of their median (it measured
  // a busy machine, not the plan), nor one on other threads than the plan
  // was priced for (--threads: another machine).
  bool pricedThreads = false;
  if (plan.predicted.is_object())
    if (auto it = plan.predicted.find("threads_per_rank");
        it != plan.predicted.end() && it->is_number_integer())
      pricedThreads = it->get<int64_t>() == maxThreads();
  if (leader && o.backendName == "cpu" && steady.size() >= 3 &&
      pricedThreads &&
      percentile(0.9) - percentile(0.1) <= 0.25 * steady[steady.size() / 2])
    if (Status s = recordObservedStep(calibrationEngine(*comm), plan.predicted,
                                      steady[steady.size() / 2]);
        !s)
      std::fprintf(stderr,
                   "fsdp-run: warning: the measured step was not recorded in "
                   "this machine's calibration: %s\n",
                   s.message().c_str());

  if (!o.tracePath.empty()) {
    // Every rank's timeline to every rank (bytes of doubles), rank 0 writes.
    // This rank's last step, then its per-instruction medians.
    std::vector<double> mine = exec.measuredTimeline();
    size_t half = mine.size();
    std::vector<double> medians = steadyMedians(durations);
    mine.insert(mine.end(), medians.begin(), medians.end());
    std::vector<double> all(mine.size() * world);
    if (Status s =
            comm->allGatherStart(mine.data(), all.data(), (int64_t)mine.size(),
                                 sizeof(double), 0, Group::World);
        !s)
      return (s);
    if (Status s = comm->wait(0); !s)
      return (s);
    std::vector<std::vector<double>> timelines, medianDurations;
    double stepEnd = 0;
    for (int64_t r = 0; r < world; ++r) {
      auto begin = all.begin() + r * mine.size();
      timelines.emplace_back(begin, begin + half);
      medianDurations.emplace_back(begin + half, begin + mine.size());
      for (double t : timelines.back())
        stepEnd = std::max(stepEnd, t);
    }
    // The steps' own spread: on a shared machine it is as wide as 30-40%,
    // which fsdp-inspect --compare shows beside the prediction's error.
    bool none = steady.empty();
    nlohmann::json measured{
        {"step_seconds", none ? stepEnd : steady[steady.size() / 2]},
        {"step_p10_seconds", none ? stepEnd : percentile(0.1)},
        {"step_p90_seconds", none ? stepEnd : percentile(0.9)},
                            {"steady_steps", (int64_t)steady.size()},
                            {"last_step_seconds", stepEnd},
                            {"arena_bytes", plan.arenaBytes},
                            {"arena_high_water", exec.arenaHighWater()},
                            // Stored state plus the arena bytes o.steps wrote.
                            {"peak_bytes", exec.peakBytes() - plan.arenaBytes +
                                               exec.arenaHighWater()},
                            {"rss_peak_bytes", peakResidentBytes()}};
    if (Status s = leader ? writeMeasuredTrace(plan, o.tracePath, timelines,
                                               measured, &medianDurations)
                          : Status::ok();
        !s)
      return (s);
  }
  if (!o.saveFull.empty()) {
    std::vector<std::vector<float>> full;
    if (Status s = exec.gatherParams(full); !s)
      return (s);
    for (size_t i = 0; i < full.size(); ++i)
      if (!satisfies(plan.params[i].valueRule(), full[i].data(),
                     (int64_t)full[i].size()))
        return (Status::error(o.saveFull + " is not written: '" +
                              plan.params[i].name + "' holds " +
                              violationName(plan.params[i].valueRule())));
    if (Status s = leader
                       ? writeSafetensors(o.saveFull, namedParams(plan, full))
                       : Status::ok();
        !s)
      return (s);
  }
  return Status::ok();
}

} // namespace fsdp
