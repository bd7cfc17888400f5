//===- PageParts.h - The parts of fsdp-inspect's page -----------*- C++ -*-===//
//
// Private to runtime/inspect: the page (Page.cpp) is assembled from its
// data model (PageModel.cpp: what a plan's page shows, computed once, and
// the text helpers), its drawings (PageDrawing.cpp: the timeline, the
// memory chart and their legends, inline SVG) and its tables
// (PageTables.cpp); the style sheet stays with the assembly.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_INSPECT_PAGE_PAGEPARTS_H
#define FSDP_RUNTIME_INSPECT_PAGE_PAGEPARTS_H

#include "runtime/inspect/Inspect.h"
#include "common/MemoryCategories.h"
#include "runtime/support/File.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

namespace fsdp::page {

using nlohmann::json;

inline const char *kLaneColours[][2] = {{"compute", "#4e79a7"},
                                        {"all_gather", "#f28e2b"},
                                        {"reduce_scatter", "#59a14f"},
                                        {"all_reduce", "#b07aa1"},
                                        {"h2d", "#76b7b2"},
                                        {"d2h", "#9c755f"},
                                        {"host", "#edc948"}};
inline const char *kExposedColour = "#e15759";

/// Memory bands, bottom to top, with their colours.
inline const char *kStateColours[] = {"#bab0ac", "#d4a6c8", "#ff9da7",
                                      "#79706e", "#76b7b2"};
/// Indexed by MemoryCategory.
inline const char *kCategoryColours[kMemoryCategoryCount] = {
    "#86bcb6", "#f28e2b", "#4e79a7", "#a0cbe8",
    "#9c755f", "#59a14f", "#edc948"};

/// What a plan's page shows, computed once (also for the two-plan diff).
struct Summary {
  double step = 0;
  std::vector<std::string> lanes;
  struct Phase {
    std::string name;
    double start, end;
  };
  std::vector<Phase> phases;
  std::vector<std::pair<double, double>> computeBusy;
  struct Comm {
    size_t index;
    std::string kind, unit, lane, dtype, group;
    int64_t bytes, groupSize;
    double start, end, exposed;
    std::vector<std::pair<double, double>> gaps;
  };
  std::vector<Comm> comms;
  struct UnitRow {
    int64_t params = 0, elements = 0, shardBytes = 0, gatheredBytes = 0;
    bool reshard = true;
    int64_t gathers = 0;
    double gatherSeconds = 0, backwardGatherSeconds = 0, reduceSeconds = 0;
    double exposed = 0, recompute = 0, lead = 0;
  };
  std::map<std::string, UnitRow> units;
  std::vector<std::string> unitOrder;
  double commTotal = 0, exposedTotal = 0;
  MemoryBreakdown memory;
  /// memory points: time, then bytes per category (kept order).
  std::vector<std::string> categories;
  std::vector<double> times;
  std::vector<std::vector<int64_t>> held; // [category][point], as drawn
  size_t peakPoint = 0;                   // among all points (not drawn)
  int64_t peakHeld = 0;
  double peakTime = 0;
  std::vector<int64_t> atPeak; // [category] at the peak
  /// Offload: the host arena in use over the step (time, bytes).
  std::vector<std::pair<double, int64_t>> hostHeld;
  /// Gathered parameters held at the peak, by unit: each all-gather's
  /// buffer from the gather's start to the free of it.
  std::vector<std::pair<std::string, int64_t>> gatheredAtPeak;
};

//===----------------------------------------------------------------------===//
// The data model and text helpers (PageModel.cpp)
//===----------------------------------------------------------------------===//

std::string escape(const std::string &s);

std::string fmt(const char *f, double v);

/// Bytes for a person: B, KiB, MiB or GiB with two decimals.
std::string bytesText(double b);

/// Seconds for a person: us or ms.
std::string timeText(double s);

using fsdp::laneOf; // runtime/inspect/Inspect.h

std::string unitOf(const Instruction &in);

/// A 1-2-5 step for about `target` ticks over `span`.
double niceStep(double span, int target);

/// How much of [a, b) no interval of `busy` (merged) covers.
double uncovered(double a, double b,
                 const std::vector<std::pair<double, double>> &busy,
                 std::vector<std::pair<double, double>> *gaps = nullptr);

std::string laneColour(const std::string &lane);

Summary summarize(const Plan &plan);

//===----------------------------------------------------------------------===//
// Drawings (PageDrawing.cpp)
//===----------------------------------------------------------------------===//

void timeline(std::ostream &os, const Plan &plan, const Summary &s,
              const std::vector<double> *measured);

void memoryChart(std::ostream &os, const Summary &s);
/// Offload: host memory per rank over the step (the offloaded state, and
/// the host arena in use).
void hostMemoryChart(std::ostream &os, const Summary &s);

void legend(std::ostream &os, const Summary &s);

void memoryLegend(std::ostream &os, const Summary &s);

//===----------------------------------------------------------------------===//
// Tables (PageTables.cpp)
//===----------------------------------------------------------------------===//

void peakTable(std::ostream &os, const Summary &s);

void unitTable(std::ostream &os, const Summary &s);

void exposedTable(std::ostream &os, const Summary &s);

/// Per instruction, the measured duration on rank 0 (seconds; 0 if absent).
std::vector<double> measuredDurations(const Plan &plan, const json &doc);

void measuredTables(std::ostream &os, const Plan &plan,
                    const std::vector<double> &measured, const json &doc);

} // namespace fsdp::page

#endif // FSDP_RUNTIME_INSPECT_PAGE_PAGEPARTS_H
