//===- fsdp-run.cpp - Execute a plan: load weights, train, log ------------===//
//
// A thin main: parse and check the flags, choose the CPU's GEMM library,
// and run the plan (runtime/run/Run.h). Every error arrives here as a
// Status and leaves as a message and exit 1.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Gemm.h"
#include "runtime/run/Calibration.h"
#include "runtime/run/Preemption.h"
#include "runtime/run/Run.h"

#include <CLI/CLI.hpp>

#include <cstdio>

using namespace fsdp;

namespace {

/// An error of one of several ranks ends every rank (MPI_Abort), so none
/// waits for it forever; one every rank found is reported by each.
int fail(const Status &s, const RunOutcome *run = nullptr) {
  Comm *comm = run ? run->comm.get() : nullptr;
  if (comm && comm->size() > 1 && run->abortOnError && !run->everyRankKnows) {
    std::fprintf(stderr, "fsdp-run: rank %lld: error: %s\n",
                 (long long)comm->rank(), s.message().c_str());
    std::fflush(stderr);
    comm->abort(1);
  }
  std::fprintf(stderr, "fsdp-run: error: %s\n", s.message().c_str());
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"fsdp-run: execute an fsdp plan (train on the CPU or a GPU)"};
  RunOptions o;
  app.add_option("plan", o.planPath,
                 "the plan written by fsdp-opt -o model.plan");
  app.add_flag("--calibrate", o.calibrateOnly,
               "measure this machine (and the links between mpirun's ranks) "
               "and print a device description for fsdp-opt --device=FILE");
  std::string calibration;
  app.add_option("--calibration", calibration,
                 "print the path of this machine's cached calibration for "
                 "the collective engine named (none, mpi or gloo), measuring "
                 "it first where the cache has none or a stale one "
                 "(fsdp-opt --device=cpu runs this)")
      ->check(CLI::IsMember({"none", "mpi", "gloo"}))
      ->excludes("--calibrate");
  std::vector<std::string> fitPlans;
  app.add_option("--fit-plan", fitPlans,
                 "with --calibration: run these reference plans (priced on "
                 "the cached calibration) and fit each op's fixed cost and "
                 "factor to them; fsdp-opt --device=cpu does this once")
      ->needs("--calibration");
  app.add_option("--steps", o.steps, "optimizer steps to run")
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", o.seed, "seed of the synthetic data");
  app.add_option("--data", o.data,
                 "synthetic (default), FILE.npz or FILE.bin (llm.c tokens)");
  app.add_option("--seq-len", o.seqLen,
                 "tokens per row of .bin data (the plan's T)");
  app.add_option("--weights", o.weights,
                 "initial weights (default: the plan's model)");
  app.add_option("--log", o.logPath,
                 "JSON lines, one object per optimizer step");
  app.add_option("--save-full", o.saveFull,
                 "full state dict after the last step (.safetensors)");
  app.add_option("--dump-grads", o.dumpGrads,
                 "the first step's gradients (.safetensors)");
  app.add_option("--checkpoint-dir", o.checkpointDir, "write checkpoints here");
  app.add_option("--checkpoint-every", o.checkpointEvery,
                 "steps between checkpoints (0: only after the last step)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--resume", o.resume,
                 "continue from this checkpoint directory; auto: from the "
                 "newest complete one in --checkpoint-dir, or from step 0 "
                 "when there is none");
  app.add_flag("--checkpoint-async", o.checkpointAsync,
               "write checkpoints in the background: the state is copied to "
               "a host staging buffer at the step and a thread writes it "
               "while training goes on (committed at a later step's end; "
               "the next save, the last step and a signal wait for it)");
  app.add_option("--save-on-signal", o.saveOnSignal,
                 "with --checkpoint-dir: these signals (comma-separated: "
                 "TERM, USR1, USR2, INT, HUP, QUIT; default TERM,USR1; none: "
                 "no signal is caught) make every rank finish its step, save "
                 "a checkpoint and exit with 128 + the signal's number (143 "
                 "for SIGTERM); a second signal exits at once, the previous "
                 "checkpoint intact");
  app.add_flag("--slurm-requeue", o.slurmRequeue,
               "after a save on a signal, rank 0 runs 'scontrol requeue "
               "$SLURM_JOB_ID' (the job starts again with the same script; "
               "with --resume=auto it resumes)");
  app.add_option("--save-grace", o.saveGrace,
                 "seconds after the first signal by which the save must be "
                 "done, else the run exits without it (0, the default: no "
                 "deadline)");
  app.add_option("--keep-last", o.keepLast,
                 "keep only the newest N step-* checkpoints (0: all)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--threads", o.threads,
                 "threads each process's kernels run on (default: this "
                 "machine's cores split between the ranks launched on it)")
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  app.add_option(
      "--comm-timeout", o.commTimeout,
      "seconds a collective may wait for the other ranks before the run fails");
  app.add_option("--trace", o.tracePath,
                 "write the last step's measured timeline (Chrome trace, "
                 "every rank) for fsdp-inspect --compare");
  app.add_option("--on-nonfinite", o.onNonFinite,
                 "a step whose loss or gradient norm is NaN or inf: stop "
                 "(default) with an error naming the step, or skip its "
                 "update and go on (the plan never applies a non-finite "
                 "gradient; skipped steps are counted in the log)")
      ->check(CLI::IsMember({"stop", "skip"}));
  app.add_flag("--quiet", o.quiet, "print only errors");
  app.add_option("--backend", o.backendName,
                 "cpu (default), cuda (one GPU per process, NCCL) or emulated "
                 "(the GPU backend's kernels run on the host: for testing)")
      ->check(CLI::IsMember({"cpu", "cuda", "emulated"}));
  std::string gemmName = "auto";
  app.add_option("--gemm", gemmName,
                 "the CPU's matrix products: auto (default: oneDNN where it "
                 "has AVX-512 kernels and OpenBLAS has not), openblas or "
                 "onednn")
      ->check(CLI::IsMember({"auto", "openblas", "onednn"}));
  app.add_flag("--check-allocations", o.checkAllocations,
               "fail if any step after the first allocates heap memory");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e);
  }
  // Flags that would be ignored or mean nothing are errors, never silent.
  std::vector<int> saveSignals;
  Status signalsParsed = parseSaveSignals(o.saveOnSignal, saveSignals);
  {
    std::string wrong, needDir;
    for (const char *flag :
         {"--checkpoint-every", "--keep-last", "--checkpoint-async",
          "--save-on-signal", "--save-grace", "--slurm-requeue"})
      if (app.count(flag) && o.checkpointDir.empty())
        needDir += (needDir.empty() ? "" : ", ") + std::string(flag);
    if (!(o.commTimeout > 0 && o.commTimeout <= 1e7)) // NaN fails too
      wrong = "--comm-timeout must be a number of seconds in (0, 1e7]";
    else if (!needDir.empty())
      wrong = needDir +
              (needDir.find(',') == std::string::npos ? " needs" : " need") +
              " --checkpoint-dir";
    else if (!(o.saveGrace >= 0 && o.saveGrace <= 1e7))
      wrong = "--save-grace must be a number of seconds in [0, 1e7]";
    else if (!signalsParsed)
      wrong = signalsParsed.message();
    else if (app.count("--seq-len") &&
             !(o.data.size() > 4 && o.data.substr(o.data.size() - 4) == ".bin"))
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

  if (!calibration.empty()) {
    std::string path;
    if (Status s = fitPlans.empty()
                       ? cachedCalibration(calibration, o.commTimeout * 5, path)
                       : fitCalibration(calibration, fitPlans,
                                        o.commTimeout * 5, path);
        !s)
      return fail(s);
    std::printf("%s\n", path.c_str());
    return 0;
  }

  // Before the communicator and the kernels start their threads.
  if (!o.checkpointDir.empty())
    if (Status s = installSaveOnSignal(saveSignals, o.saveGrace); !s)
      return fail(s);
  RunOutcome run;
  if (Status s = runPlan(o, run); !s)
    return fail(s, &run);
  return run.exitCode;
}
