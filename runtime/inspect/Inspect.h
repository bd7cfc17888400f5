//===- Inspect.h - A plan, shown to a person tuning it ----------*- C++ -*-===//
//
// What fsdp-inspect prints and writes: the unit table, the per-stream
// schedule with predicted times, the memory a rank needs and what it is
// made of, and the predicted timeline as a Chrome trace (ui.perfetto.dev).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_INSPECT_INSPECT_H
#define FSDP_RUNTIME_INSPECT_INSPECT_H

#include "runtime/plan/Plan.h"

#include <ostream>
#include <string>
#include <vector>

namespace fsdp {

/// Units: parameters, elements, bytes full and per rank, resharding.
void printUnits(const Plan &plan, std::ostream &os);
/// Each stream's instructions with predicted times; runs of compute
/// between communication are summarised as one line.
void printSchedule(const Plan &plan, std::ostream &os);
/// Predicted step time and peak memory, and what the peak is made of.
void printMemory(const Plan &plan, std::ostream &os);
/// The predicted timeline in Chrome's trace event format: one process per
/// rank (the first `ranks`), one thread per stream, collectives with bytes,
/// dtype and group in `args`, and a memory counter.
Status writeTrace(const Plan &plan, const std::string &path, int64_t ranks);

/// The measured timeline in the same format: `timelines[r]` holds rank r's
/// [begin, end] per instruction index (Executor::measuredTimeline);
/// collectives span from their start to the end of their wait. `measured`
/// (step time, arena high-water mark, RSS) goes into `otherData`.
/// `medians[r]`, when given, holds rank r's median duration per
/// instruction index (steadyMedians), written as `args.median_dur` (us).
Status
writeMeasuredTrace(const Plan &plan, const std::string &path,
                   const std::vector<std::vector<double>> &timelines,
                   const nlohmann::json &measured,
                   const std::vector<std::vector<double>> *medians = nullptr);
/// Per instruction index, end - begin in one step's measured timeline.
std::vector<double> instructionDurations(const std::vector<double> &timeline);
/// Per instruction index, the median duration over the steps after the
/// first (which warms caches and pages the arena in); over all of them when
/// there is only one.
std::vector<double>
steadyMedians(const std::vector<std::vector<double>> &stepDurations);

/// A rank's memory at the plan's peak, as the text report and the page
/// give it: the state held all step, the kernels' scratch and the arena
/// (its planned size: the buffers' offsets and sizes).
/// The lane an instruction runs on: a collective's stream (all_gather,
/// reduce_scatter, all_reduce), an offload copy's (h2d, d2h), the host
/// (an offloaded shard's update and casts), or compute.
std::string laneOf(const Instruction &in);

struct MemoryBreakdown {
  int64_t arena = 0, params = 0, optimizer = 0, constants = 0, scratch = 0;
  /// Offload: the device copies of offloaded shards (device memory), and
  /// what is kept in host memory (the offloaded shards, their optimizer
  /// state and the host arena; not in total()).
  int64_t deviceCopies = 0, host = 0, hostArena = 0;
  /// The most bytes live during one instruction (its inputs and outputs
  /// together): the arena's lower bound.
  int64_t liveDuring = 0;
  bool sharded = false;
  int64_t total() const {
    return arena + params + optimizer + constants + scratch + deviceCopies;
  }
};
MemoryBreakdown memoryBreakdown(const Plan &plan);

/// One self-contained HTML page (inline SVG and CSS, no script; Page.cpp):
/// the step's timeline with phases, labelled collectives and exposed
/// communication; memory over the step stacked by category with the peak's
/// parts; the unit table. With `measured` (a checked fsdp-run --trace),
/// measured durations beside the predicted ones; with `candidates`
/// (loadCandidates), autotune's candidates against the budget.
Status writeHtml(const Plan &plan, const std::string &path,
                 const nlohmann::json *measured = nullptr,
                 const nlohmann::json *candidates = nullptr);
/// fsdp-opt --autotune-candidates' file, read and checked (every field
/// typed): the page then shows the plans autotune weighed and why the
/// chosen one won.
Status loadCandidates(const std::string &path, nlohmann::json &doc);
/// Two plans of one model on one page: what differs (step, exposed
/// communication, peak and its parts, unit choices), then each plan's page.
Status writeDiffHtml(const Plan &a, const std::string &nameA, const Plan &b,
                     const std::string &nameB, const std::string &path);

/// Predicted against measured (a --trace written by fsdp-run): step time
/// and peak memory with their errors, and the instructions that took the
/// most time, side by side.
Status compareMeasured(const Plan &plan, const std::string &measuredPath,
                       std::ostream &os);

/// A measured trace (fsdp-run --trace), read and checked: its fields typed
/// and plausible, and taken of `plan` (its digest, which the trace records).
Status loadMeasuredTrace(const Plan &plan, const std::string &path,
                         nlohmann::json &doc);
/// The same on the trace's text; `path` names it in errors (the fuzzing
/// entry point).
Status parseMeasuredTrace(const Plan &plan, const std::string &text,
                          const std::string &path, nlohmann::json &doc);
/// compareMeasured on a trace parseMeasuredTrace has checked.
Status compareTrace(const Plan &plan, const nlohmann::json &doc,
                    std::ostream &os);

/// Fits the device model to a measured run: per op name, the factor by
/// which the kernels took longer (or shorter) than predicted, summed over
/// every rank's compute instructions, multiplied into `base`'s op_scale
/// (a device JSON, the one the plan was simulated with). Writes the fitted
/// device to `outPath` and prints the factors.
Status fitDevice(const Plan &plan, const std::string &measuredPath,
                 const std::string &basePath, const std::string &outPath,
                 std::ostream &os);
/// The fit itself, on a checked trace and a device JSON whose fields
/// fitDevice has typed: `device` gains the fitted factors.
Status fitDeviceJson(const Plan &plan, const nlohmann::json &doc,
                     const std::string &measuredPath, nlohmann::json &device,
                     std::ostream &os);

/// A plan and its measured trace (fsdp-run --trace), named by the trace's
/// path in errors.
struct FitRun {
  const Plan *plan;
  const nlohmann::json *doc;
  std::string path;
};

/// fitDeviceJson over several runs pooled (their ranks on the same thread
/// counts). `linear` (the calibration's fit, runtime/run/Calibration.h):
/// each op's time is fitted as a fixed cost per instruction (`op_overhead`,
/// seconds) plus a cost per flop and a factor on its bytes' time
/// (`op_cost`), by least absolute error over the instructions of all the
/// runs, which should then span sizes; an op on bf16 or f16 tensors is
/// fitted apart ("matmul.bf16"). Without, op_scale alone (the ratio of the
/// sums), as fsdp-inspect --fit-device does.
Status fitDeviceRuns(const std::vector<FitRun> &runs, nlohmann::json &device,
                     std::ostream &os, bool linear);

} // namespace fsdp

#endif // FSDP_RUNTIME_INSPECT_INSPECT_H
