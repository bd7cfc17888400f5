//===- fsdp-run.cpp - Execute a plan: load weights, train, log ------------===//
//
// A thin main: parse flags, load and validate the plan, initialise the
// executor with the model's weights, then step through batches, logging.
// Every error arrives here as a Status and leaves as a message and exit 1.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/Backends.h"
#include "runtime/comm/Comm.h"
#include "runtime/cpu/Calibrate.h"
#include "runtime/cpu/Gemm.h"
#include "runtime/exec/Executor.h"
#include "runtime/inspect/Inspect.h"
#include "runtime/io/Checkpoint.h"
#include "runtime/io/Data.h"
#include "runtime/io/OnnxWeights.h"
#include "runtime/plan/Plan.h"
#include "runtime/support/AllocationCounter.h"
#include "runtime/support/Digest.h"
#include "runtime/support/File.h"
#include "runtime/support/Finite.h"
#include "runtime/support/Resident.h"
#include "runtime/support/Threads.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <unistd.h>

using namespace fsdp;

namespace {

/// The communicator, once there is one: errors on one of several ranks
/// end every rank (MPI_Abort), so none waits for it forever.
Comm *activeComm = nullptr;

int fail(const Status &s) {
  if (activeComm && activeComm->size() > 1) {
    std::fprintf(stderr, "fsdp-run: rank %lld: error: %s\n",
                 (long long)activeComm->rank(), s.message().c_str());
    std::fflush(stderr);
    activeComm->abort(1);
  }
  std::fprintf(stderr, "fsdp-run: error: %s\n", s.message().c_str());
  return 1;
}

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

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"fsdp-run: execute an fsdp plan (train on the CPU or a GPU)"};
  std::string planPath, data = "synthetic", weights, logPath, saveFull,
                        dumpGrads;
  std::string checkpointDir, resume;
  int64_t steps = 10, checkpointEvery = 0, seqLen = 0;
  uint64_t seed = 0;
  bool quiet = false, checkAllocations = false;
  app.add_option("plan", planPath,
                 "the plan written by fsdp-opt -o model.plan");
  bool calibrateOnly = false;
  app.add_flag("--calibrate", calibrateOnly,
               "measure this machine (and the links between mpirun's ranks) "
               "and print a device description for fsdp-opt --device=FILE");
  app.add_option("--steps", steps, "optimizer steps to run")
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "seed of the synthetic data");
  app.add_option("--data", data,
                 "synthetic (default), FILE.npz or FILE.bin (llm.c tokens)");
  app.add_option("--seq-len", seqLen,
                 "tokens per row of .bin data (the plan's T)");
  app.add_option("--weights", weights,
                 "initial weights (default: the plan's model)");
  app.add_option("--log", logPath, "JSON lines, one object per optimizer step");
  app.add_option("--save-full", saveFull,
                 "full state dict after the last step (.safetensors)");
  app.add_option("--dump-grads", dumpGrads,
                 "the first step's gradients (.safetensors)");
  app.add_option("--checkpoint-dir", checkpointDir, "write checkpoints here");
  app.add_option("--checkpoint-every", checkpointEvery,
                 "steps between checkpoints (0: only after the last step)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--resume", resume, "continue from this checkpoint directory");
  int64_t keepLast = 0;
  app.add_option("--keep-last", keepLast,
                 "keep only the newest N step-* checkpoints (0: all)")
      ->check(CLI::NonNegativeNumber);
  double commTimeout = 60;
  app.add_option(
      "--comm-timeout", commTimeout,
      "seconds a collective may wait for the other ranks before the run fails");
  std::string tracePath;
  app.add_option("--trace", tracePath,
                 "write the last step's measured timeline (Chrome trace, "
                 "every rank) for fsdp-inspect --compare");
  std::string onNonFinite = "stop";
  app.add_option("--on-nonfinite", onNonFinite,
                 "a step whose loss or gradient norm is NaN or inf: stop "
                 "(default) with an error naming the step, or skip its "
                 "update and go on (the plan never applies a non-finite "
                 "gradient; skipped steps are counted in the log)")
      ->check(CLI::IsMember({"stop", "skip"}));
  app.add_flag("--quiet", quiet, "print only errors");
  std::string backendName = "cpu";
  app.add_option("--backend", backendName,
                 "cpu (default), cuda (one GPU per process, NCCL) or emulated "
                 "(the GPU backend's kernels run on the host: for testing)")
      ->check(CLI::IsMember({"cpu", "cuda", "emulated"}));
  std::string gemmName = "auto";
  app.add_option("--gemm", gemmName,
                 "the CPU's matrix products: auto (default: oneDNN where it "
                 "has AVX-512 kernels and OpenBLAS has not), openblas or "
                 "onednn")
      ->check(CLI::IsMember({"auto", "openblas", "onednn"}));
  app.add_flag("--check-allocations", checkAllocations,
               "fail if any step after the first allocates heap memory");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e);
  }
  // Flags that would be ignored or mean nothing are errors, never silent.
  {
    std::string wrong;
    if (!(commTimeout > 0 && commTimeout <= 1e7)) // NaN fails too
      wrong = "--comm-timeout must be a number of seconds in (0, 1e7]";
    else if ((app.count("--checkpoint-every") || app.count("--keep-last")) &&
             checkpointDir.empty())
      wrong = "--checkpoint-every and --keep-last need --checkpoint-dir";
    else if (app.count("--seq-len") &&
             !(data.size() > 4 && data.substr(data.size() - 4) == ".bin"))
      wrong = "--seq-len applies to --data FILE.bin (llm.c tokens) only";
    if (!wrong.empty()) {
      std::fprintf(stderr, "fsdp-run: error: %s\n", wrong.c_str());
      return 1;
    }
  }

  cpu::GemmLibrary gemm = cpu::GemmLibrary::Auto;
  if (Status s = cpu::parseGemmLibrary(gemmName, gemm); !s)
    return fail(s);
  cpu::setGemmLibrary(gemm);

  // Ranks sharing a machine share its cores: split them, or the kernels'
  // threads and the MPI progress loops oversubscribe the CPU many times over.
#ifdef _OPENMP
  const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (!local)
    local = std::getenv("LOCAL_WORLD_SIZE"); // torchrun
  if (local) {
    int ranksHere = std::max(1, std::atoi(local));
    setNumThreads(std::max(1, numProcs() / ranksHere));
  }
#endif
  LaunchInfo launch;
  if (Status s = launchInfo(launch); !s)
    return fail(s);
  if (Status s = checkLaunch(launch, nullptr); !s)
    return fail(s);
  // The engine: MPI under mpirun (or for a plan of many ranks, which then
  // needs it), Gloo under torchrun and the like, none for one process.
  auto openComm = [&](int64_t plannedRanks, std::unique_ptr<Comm> &comm) {
    if (!launchedByMpi() && launch.size > 1)
      return glooComm(launch, commTimeout, comm);
    if (launchedByMpi() || plannedRanks > 1)
      return mpiComm(commTimeout, comm);
    comm = localComm();
    return Status::ok();
  };
  if (calibrateOnly) {
    std::unique_ptr<Comm> comm;
    if (Status s = openComm(1, comm); !s)
      return fail(s);
    nlohmann::json device;
    if (Status s = cpu::calibrate(*comm, device); !s)
      return fail(s);
    if (comm->rank() == 0)
      std::printf("%s\n", device.dump(1).c_str());
    return 0;
  }
  if (planPath.empty())
    return fail(Status::error("a plan is required (fsdp-run PLAN ...)"));
  Plan plan;
  if (Status s = loadPlan(planPath, plan); !s)
    return fail(s);
  std::unique_ptr<Comm> comm;
  if (Status s = openComm(plan.worldSize, comm); !s)
    return fail(s);
  if (Status s = checkLaunch(launch, comm.get()); !s)
    return fail(s);
  int64_t rank = comm->rank(), world = comm->size();
  // Every rank must run the same plan: compare before the first collective.
  std::string planText;
  if (Status s = readFile(planPath, planText, "the plan"); !s)
    return fail(s);
  if (Status s =
          comm->checkSame(fnv1a64(planText), "the plan (" + planPath + ")");
      !s) {
    std::fprintf(stderr, "fsdp-run: error: %s\n", s.message().c_str());
    return 1; // every rank reports it; none waits for another
  }
  // So must everything that shapes the collective sequence or the state
  // at start-up (a different --steps stalled until the deadline; different
  // --weights trained a chimera): the first option that differs is named,
  // on every rank.
  const std::pair<const char *, std::string> agreedOptions[] = {
      {"--steps", std::to_string(steps)},
      {"--checkpoint-dir", checkpointDir},
      {"--checkpoint-every", std::to_string(checkpointEvery)},
      {"--keep-last", std::to_string(keepLast)},
      {"--resume", resume},
      {"--weights", weights},
      {"--data", data},
      {"--seed", std::to_string(seed)},
      {"--seq-len", std::to_string(seqLen)},
      {"--on-nonfinite", onNonFinite},
      {"--backend", backendName},
      {"--save-full", saveFull.empty() ? "" : "given"},
      {"--dump-grads", dumpGrads.empty() ? "" : "given"},
      {"--trace", tracePath.empty() ? "" : "given"},
      {"--check-allocations", checkAllocations ? "given" : ""}};
  for (const auto &[flag, value] : agreedOptions)
    if (Status s = comm->checkSame(fnv1a64(value),
                                   std::string(flag) + " '" + value + "'");
        !s) {
      std::fprintf(stderr, "fsdp-run: error: %s\n", s.message().c_str());
      return 1;
    }
  activeComm = comm.get();
  if (plan.worldSize != world)
    return fail(Status::error(planPath + ": planned for " +
                              std::to_string(plan.worldSize) +
                              " ranks, launched on " + std::to_string(world)));
  bool leader = rank == 0;
  quiet = quiet || !leader;
  std::unique_ptr<StepBackend> backend;
  if (Status s = stepBackend(backendName, *comm, launch.localRank, commTimeout,
                             backend);
      !s)
    return fail(s);
  std::string weightsPath = weights.empty() ? plan.source : weights;
  if (weightsPath.empty())
    return fail(
        Status::error("the plan names no model; pass --weights FILE.onnx"));
  bool safetensors =
      weightsPath.size() > 12 &&
      weightsPath.substr(weightsPath.size() - 12) == ".safetensors";
  Executor exec;
  auto load = [&]() {
    auto pieces = [&](size_t i) { return exec.pieces(i); };
    // The plan's own source is opened by its rule (a path the traced
    // model's file named: no links below the directory the user named);
    // --weights is the user's and may be a link.
    std::string base = weights.empty() ? plan.sourceBase : "";
    return safetensors
               ? loadSafetensorsWeights(weightsPath, plan, pieces, base)
               : loadOnnxWeights(weightsPath, plan, pieces, base);
  };
  if (Status s = exec.init(plan, *comm, std::move(backend), load); !s)
    return fail(s);
  if (!quiet && backendName != "cpu")
    std::printf("backend: %s\n", exec.describe().c_str());

  std::unique_ptr<DataSource> source;
  if (data == "synthetic") {
    source = syntheticData(plan, seed + 7919 * (uint64_t)rank);
  } else if (data.size() > 4 && data.substr(data.size() - 4) == ".npz") {
    if (Status s = npzData(data, plan, rank, world, source); !s)
      return fail(s);
  } else if (data.size() > 4 && data.substr(data.size() - 4) == ".bin") {
    if (seqLen <= 0)
      return fail(Status::error("--data FILE.bin needs --seq-len"));
    if (Status s = binTokenData(data, plan, seqLen, rank, world, source); !s)
      return fail(s);
  } else {
    return fail(Status::error(
        "--data must be 'synthetic', a .npz or a .bin file, got '" + data +
        "'"));
  }

  // The checkpoint directory is this run's (a second job on it fails here,
  // naming the holder) and writable, known before the first step and
  // before a checkpoint in it is read (the holder may be writing it).
  CheckpointDirLock dirLock;
  if (!checkpointDir.empty()) {
    Status locked = leader ? dirLock.acquire(checkpointDir) : Status::ok();
    Status agreed = exec.agree(locked.isOk(), "taking " + checkpointDir);
    if (!locked)
      return fail(locked);
    if (!agreed)
      return fail(agreed);
    if (leader)
      removeLeftovers(checkpointDir); // ours now: a crash's half-saves go
  }
  TrainingPosition position{0, 0, seed, data};
  if (!resume.empty()) {
    TrainingPosition saved;
    if (Status s = loadCheckpoint(resume, plan, exec, saved); !s)
      return fail(s);
    if (saved.seed != seed || saved.data != data)
      return fail(Status::error(resume + ": saved with --data " + saved.data +
                                " --seed " + std::to_string(saved.seed) +
                                "; resume with the same data and seed"));
    if (saved.step > steps)
      return fail(Status::error(resume + ": the checkpoint is at step " +
                                std::to_string(saved.step) +
                                ", past --steps " + std::to_string(steps)));
    position.step = saved.step;
    position.skippedUpdates = saved.skippedUpdates;
    exec.setSkippedUpdates(saved.skippedUpdates);
    if (!quiet)
      std::printf("resumed from %s at step %lld\n", resume.c_str(),
                  (long long)saved.step);
  }
  // Every rank writes its shard of the state; rank 0 the manifest, last.
  auto checkpoint = [&](int64_t done) -> Status {
    position.step = done;
    position.skippedUpdates = exec.skippedUpdates();
    FSDP_RETURN_IF_ERROR(saveCheckpoint(checkpointDir, plan, exec, position));
    return leader ? keepLatest(checkpointDir, keepLast, done) : Status::ok();
  };

  std::ofstream log;
  if (!logPath.empty() && leader) {
    // A resumed run adds to the history it continues, never truncates it.
    log.open(logPath, resume.empty() ? std::ios::out | std::ios::trunc
                                     : std::ios::out | std::ios::app);
    if (!log)
      return fail(Status::error(logPath + ": cannot write the log (" +
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
  // (bounded: --steps may be 10^10)
  const int64_t kTimedSteps = 1 << 20;
  stepSeconds.reserve(std::min<int64_t>(std::max<int64_t>(steps, 0), kTimedSteps));
  // For --trace: per-instruction durations of the first step and of up to
  // 64 steady ones after it, for their medians (bounded on long runs).
  std::vector<std::vector<double>> durations;
  const size_t kMedianSteps = 1 + 64;

  int64_t accum = std::max<int64_t>(plan.train.gradAccum, 1);
  auto loadBatch = [&](int64_t micro) { return source->next(micro, inputs); };
  for (int64_t t = position.step; t < steps; ++t) {
    maybeInjectFault(rank, t + 1);
    auto start = std::chrono::steady_clock::now();
    StepResult r;
    bool capture = t == 0 && !dumpGrads.empty();
    bool counted = checkAllocations && t > position.step && !capture;
    if (counted)
      startCountingAllocations();
    Status stepStatus = exec.step(t, loadBatch, r, capture ? &grads : nullptr);
    int64_t allocated = counted ? stopCountingAllocations() : 0;
    if (!stepStatus)
      return fail(stepStatus.withContext("step " + std::to_string(t + 1)));
    if (allocated > 0)
      return fail(Status::error("step " + std::to_string(t + 1) +
                                " allocated heap memory " +
                                std::to_string(allocated) + " times"));
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    double tps = tokens * accum / (ms / 1000.0);
    if ((int64_t)stepSeconds.size() < std::min(steps, kTimedSteps))
      stepSeconds.push_back(r.computeSeconds);
    if (!tracePath.empty() && durations.size() < kMedianSteps)
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
                            {"arena_bytes", plan.arenaBytes},
                            {"arena_high_water", exec.arenaHighWater()},
                            {"rss_peak_bytes", peakResidentBytes()}}
                 .dump()
          << "\n";
    // Every line reaches the file, or the run says so (a full disk or
    // /dev/full exited 0 with the history lost).
    if (log.is_open() && !log.flush())
      return fail(Status::error(logPath + ": cannot write the log (" +
                                std::strerror(errno) + ")"));
    if (!quiet) {
      if (tty) {
        int width = 30, done = (int)((t + 1) * width / steps);
        std::printf("\r[%s%s] %lld/%lld loss %.4f  %.0f tok/s ",
                    std::string(std::max(done, 0), '#').c_str(),
                    std::string(width - done, '.').c_str(), (long long)(t + 1),
                    (long long)steps, r.loss, tps);
        if (t + 1 == steps)
          std::printf("\n");
      } else {
        std::printf("step %lld/%lld loss %.6f grad_norm %.6f lr %.3g %.1f ms "
                    "%.0f tok/s\n",
                    (long long)(t + 1), (long long)steps, r.loss, r.gradNorm,
                    r.lr, ms, tps);
      }
      std::fflush(stdout);
    }
    if (nonFinite && onNonFinite == "stop")
      return fail(Status::error(
          "step " + std::to_string(t + 1) + ": the loss is " +
          finiteOrName(r.loss) + " and the gradient norm " +
          finiteOrName(r.gradNorm) +
          (r.updateSkipped
               ? "; its update was skipped (the state is step " +
                     std::to_string(t) + "'s)"
               : "") +
          "; the run stops (--on-nonfinite=skip goes on past such steps)" +
          (checkpointDir.empty() ? std::string()
                                 : "; nothing of this step is checkpointed")));
    if (!checkpointDir.empty() &&
        ((checkpointEvery > 0 && (t + 1) % checkpointEvery == 0) ||
         t + 1 == steps))
      if (Status s = checkpoint(t + 1); !s)
        return fail(s);
    if (capture) {
      std::vector<std::vector<float>> full;
      if (Status s = exec.gatherFull(grads, full); !s)
        return fail(s);
      if (Status s = leader
                         ? writeSafetensors(dumpGrads, namedParams(plan, full))
                         : Status::ok();
          !s)
        return fail(s);
    }
  }

  if (!tracePath.empty()) {
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
      return fail(s);
    if (Status s = comm->wait(0); !s)
      return fail(s);
    std::vector<std::vector<double>> timelines, medianDurations;
    double stepEnd = 0;
    for (int64_t r = 0; r < world; ++r) {
      auto begin = all.begin() + r * mine.size();
      timelines.emplace_back(begin, begin + half);
      medianDurations.emplace_back(begin + half, begin + mine.size());
      for (double t : timelines.back())
        stepEnd = std::max(stepEnd, t);
    }
    // The median step after the first (which warms caches and pages in the
    // arena) is steadier than the last one on a shared machine.
    std::vector<double> steady(stepSeconds.begin() +
                                   (stepSeconds.size() > 1 ? 1 : 0),
                               stepSeconds.end());
    std::sort(steady.begin(), steady.end());
    double median = steady.empty() ? stepEnd : steady[steady.size() / 2];
    nlohmann::json measured{{"step_seconds", median},
                            {"last_step_seconds", stepEnd},
                            {"arena_bytes", plan.arenaBytes},
                            {"arena_high_water", exec.arenaHighWater()},
                            // Stored state plus the arena bytes steps wrote.
                            {"peak_bytes", exec.peakBytes() - plan.arenaBytes +
                                               exec.arenaHighWater()},
                            {"rss_peak_bytes", peakResidentBytes()}};
    if (Status s = leader ? writeMeasuredTrace(plan, tracePath, timelines,
                                               measured, &medianDurations)
                          : Status::ok();
        !s)
      return fail(s);
  }
  if (!saveFull.empty()) {
    std::vector<std::vector<float>> full;
    if (Status s = exec.gatherParams(full); !s)
      return fail(s);
    for (size_t i = 0; i < full.size(); ++i)
      if (!satisfies(plan.params[i].valueRule(), full[i].data(),
                     (int64_t)full[i].size()))
        return fail(Status::error(
            saveFull + " is not written: '" + plan.params[i].name +
            "' holds " + violationName(plan.params[i].valueRule())));
    if (Status s = leader ? writeSafetensors(saveFull, namedParams(plan, full))
                          : Status::ok();
        !s)
      return fail(s);
  }
  return 0;
}
