//===- Page.cpp - The plan as one page a person tunes with ----------------===//
//
// fsdp-inspect --html: one self-contained HTML file (inline SVG and CSS, no
// script, nothing fetched) drawn from the plan alone:
//   - the step on a time axis, forward / backward / optimizer shaded, one
//     lane per stream; every collective labelled with its unit and with its
//     kind, bytes, dtype and group on hover; the communication no compute
//     overlaps (Holistic Trace Analysis's "exposed" communication) drawn in
//     red under the lanes and totalled per unit and for the step;
//   - the memory of a rank over the step, stacked by what it holds (the
//     state that is there all step, then the arena's buffers by category as
//     fsdp-plan-memory classifies them), the peak marked and its parts
//     listed with the same figures as the text report;
//   - the unit table: each unit's choices and what they cost and save;
//   - with measured traces (--compare): measured durations beside the
//     predicted ones, per unit and per instruction.
// Two plans (fsdp-inspect A.plan B.plan --html): side by side, with the
// differences listed.
//
//===----------------------------------------------------------------------===//
#include "runtime/inspect/Inspect.h"
#include "runtime/plan/MemoryCategories.h"
#include "runtime/support/File.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

namespace fsdp {

namespace {

using nlohmann::json;

std::string escape(const std::string &s) {
  std::string out;
  for (char c : s)
    switch (c) {
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '&': out += "&amp;"; break;
    case '"': out += "&quot;"; break;
    case '\'': out += "&#39;"; break;
    default: out += c;
    }
  return out;
}

std::string fmt(const char *f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

/// Bytes for a person: B, KiB, MiB or GiB with two decimals.
std::string bytesText(double b) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::fabs(b) >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  return u == 0 ? fmt("%.0f B", b) : fmt("%.2f ", b) + units[u];
}

/// Seconds for a person: us or ms.
std::string timeText(double s) {
  return s < 1e-3 ? fmt("%.1f us", s * 1e6)
         : s < 1  ? fmt("%.3f ms", s * 1e3)
                  : fmt("%.3f s", s);
}

std::string laneOf(const Instruction &in) {
  if (!isCollective(in.op))
    return "compute";
  std::string s = in.attrString("stream", "");
  return s.empty() ? in.op.substr(0, in.op.find("_start")) : s;
}

std::string unitOf(const Instruction &in) {
  std::string u = in.attrString("unit", "");
  return u.empty() ? "-" : u;
}

/// A 1-2-5 step for about `target` ticks over `span`.
double niceStep(double span, int target) {
  double raw = span / std::max(target, 1);
  double p = std::pow(10.0, std::floor(std::log10(std::max(raw, 1e-300))));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw)
      return m * p;
  return 10 * p;
}

/// [start, end) intervals merged.
std::vector<std::pair<double, double>>
merged(std::vector<std::pair<double, double>> v) {
  std::sort(v.begin(), v.end());
  std::vector<std::pair<double, double>> out;
  for (auto [a, b] : v) {
    if (b <= a)
      continue;
    if (!out.empty() && a <= out.back().second)
      out.back().second = std::max(out.back().second, b);
    else
      out.push_back({a, b});
  }
  return out;
}

/// How much of [a, b) no interval of `busy` (merged) covers.
double uncovered(double a, double b,
                 const std::vector<std::pair<double, double>> &busy,
                 std::vector<std::pair<double, double>> *gaps = nullptr) {
  double exposed = 0, at = a;
  auto it = std::lower_bound(
      busy.begin(), busy.end(), std::make_pair(a, a),
      [](auto &x, auto &y) { return x.second < y.first; });
  for (; it != busy.end() && it->first < b && at < b; ++it) {
    if (it->first > at) {
      exposed += it->first - at;
      if (gaps)
        gaps->push_back({at, it->first});
    }
    at = std::max(at, it->second);
  }
  if (at < b) {
    exposed += b - at;
    if (gaps)
      gaps->push_back({at, b});
  }
  return exposed;
}

const char *kLaneColours[][2] = {{"compute", "#4e79a7"},
                                 {"all_gather", "#f28e2b"},
                                 {"reduce_scatter", "#59a14f"},
                                 {"all_reduce", "#b07aa1"}};
const char *kExposedColour = "#e15759";

/// Memory bands, bottom to top, with their colours.
const char *kStateColours[] = {"#bab0ac", "#d4a6c8", "#ff9da7", "#79706e"};
/// Indexed by MemoryCategory.
const char *kCategoryColours[kMemoryCategoryCount] = {"#86bcb6", "#f28e2b", "#4e79a7", "#a0cbe8",
                                  "#9c755f", "#59a14f", "#edc948"};

std::string laneColour(const std::string &lane) {
  for (auto &c : kLaneColours)
    if (lane == c[0])
      return c[1];
  return "#999999";
}

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
  /// Gathered parameters held at the peak, by unit: each all-gather's
  /// buffer from the gather's start to the free of it.
  std::vector<std::pair<std::string, int64_t>> gatheredAtPeak;
};

Summary summarize(const Plan &plan) {
  Summary s;
  for (const Instruction &in : plan.program)
    s.step = std::max(s.step, in.predictedEnd);
  s.step = std::max(s.step, 1e-12);
  for (auto &c : kLaneColours)
    for (const Instruction &in : plan.program)
      if (in.predictedStart >= 0 && laneOf(in) == c[0]) {
        s.lanes.push_back(c[0]);
        break;
      }
  if (s.lanes.empty() || s.lanes[0] != "compute")
    s.lanes.insert(s.lanes.begin(), "compute");
  const json &p = plan.predicted;
  if (p.contains("phases") && p["phases"].is_array())
    for (const json &ph : p["phases"])
      if (ph.is_array() && ph.size() == 3 && ph[0].is_string() &&
          ph[1].is_number() && ph[2].is_number())
        s.phases.push_back(
            {ph[0].get<std::string>(), ph[1].get<double>(), ph[2].get<double>()});
  std::vector<std::pair<double, double>> busy;
  for (const Instruction &in : plan.program)
    if (in.predictedStart >= 0 && !isCollective(in.op) && in.op != "wait" &&
        in.op != "free")
      busy.push_back({in.predictedStart, in.predictedEnd});
  s.computeBusy = merged(busy);

  for (const UnitInfo &u : plan.units) {
    Summary::UnitRow &row = s.units[u.name];
    s.unitOrder.push_back(u.name);
    row.params = (int64_t)u.params.size();
    row.reshard = u.reshardAfterForward;
    // As the text report counts them: f32 masters, a flat's shard per rank.
    std::set<int64_t> flats;
    for (int64_t i : u.params) {
      if (i < 0 || i >= (int64_t)plan.params.size())
        continue;
      row.elements += plan.params[i].numel();
      if (plan.params[i].flat >= 0)
        flats.insert(plan.params[i].flat);
      else
        row.shardBytes += plan.params[i].numel() * 4;
    }
    for (int64_t f : flats)
      if (f < (int64_t)plan.flats.size())
        row.shardBytes += plan.flats[f].shardNumel * 4;
  }
  if (p.contains("recompute_seconds") && p["recompute_seconds"].is_object())
    for (auto &[unit, sec] : p["recompute_seconds"].items())
      if (sec.is_number() && s.units.count(unit))
        s.units[unit].recompute = sec.get<double>();

  double forwardEnd = s.phases.empty() ? s.step : s.phases[0].end;
  std::map<int64_t, double> waitAt; // collective's index -> its wait's start
  for (const Instruction &in : plan.program)
    if (in.op == "wait" && in.start >= 0)
      waitAt[in.start] = in.predictedStart;
  for (size_t i = 0; i < plan.program.size(); ++i) {
    const Instruction &in = plan.program[i];
    if (!isCollective(in.op) || in.predictedStart < 0 || in.in.empty() ||
        in.out.empty())
      continue;
    Summary::Comm c;
    c.index = i;
    c.kind = in.op.substr(0, in.op.find("_start"));
    c.unit = unitOf(in);
    c.lane = laneOf(in);
    c.dtype = dtypeName(in.in[0].dtype);
    c.group = in.attrString("group", "world");
    c.groupSize = in.attrInt("group_size", plan.worldSize);
    c.bytes = std::max(in.in[0].bytes(), in.out[0].bytes());
    c.start = in.predictedStart;
    c.end = in.predictedEnd;
    c.exposed = uncovered(c.start, c.end, s.computeBusy, &c.gaps);
    s.commTotal += c.end - c.start;
    s.exposedTotal += c.exposed;
    if (s.units.count(c.unit)) {
      Summary::UnitRow &row = s.units[c.unit];
      row.exposed += c.exposed;
      if (c.kind == "all_gather") {
        row.gatheredBytes = std::max(row.gatheredBytes, (int64_t)in.out[0].bytes());
        ++row.gathers;
        row.gatherSeconds += c.end - c.start;
        if (c.start >= forwardEnd)
          row.backwardGatherSeconds += c.end - c.start;
        if (auto w = waitAt.find(in.index); w != waitAt.end())
          row.lead = std::max(row.lead, w->second - c.start);
      } else {
        row.reduceSeconds += c.end - c.start;
      }
    }
    s.comms.push_back(std::move(c));
  }

  s.memory = memoryBreakdown(plan);
  if (p.contains("memory") && p["memory"].is_array())
    for (const json &pt : p["memory"])
      s.times.push_back(pt.is_array() && pt.size() == 2 && pt[0].is_number()
                            ? pt[0].get<double>()
                            : 0.0);
  if (p.contains("memory_by_category") && p["memory_by_category"].is_object())
    for (auto &[name, pts] : p["memory_by_category"].items()) {
      if (!pts.is_array() || pts.size() != s.times.size())
        continue;
      std::vector<int64_t> v;
      for (const json &b : pts)
        v.push_back(b.is_number_integer() ? b.get<int64_t>() : 0);
      s.categories.push_back(name);
      s.held.push_back(std::move(v));
    }
  // Stacked in fsdp-plan-memory's order (inputs at the bottom).
  std::vector<size_t> order(s.categories.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return memoryCategoryIndex(s.categories[a]) < memoryCategoryIndex(s.categories[b]);
  });
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> held;
  for (size_t i : order) {
    names.push_back(s.categories[i]);
    held.push_back(std::move(s.held[i]));
  }
  s.categories = std::move(names);
  s.held = std::move(held);
  for (size_t i = 0; i < s.times.size(); ++i) {
    int64_t total = 0;
    for (auto &v : s.held)
      total += v[i];
    if (total > s.peakHeld) {
      s.peakHeld = total;
      s.peakPoint = i;
    }
  }
  s.peakTime = s.times.empty() ? 0 : s.times[s.peakPoint];
  s.atPeak.clear();
  for (auto &v : s.held)
    s.atPeak.push_back(s.times.empty() ? 0 : v[s.peakPoint]);
  // Which units' gathered parameters the peak holds.
  for (size_t i = 0; i < plan.program.size(); ++i) {
    const Instruction &g = plan.program[i];
    if (g.op != "all_gather_start" || g.out.empty() || g.predictedStart < 0 ||
        g.predictedStart > s.peakTime)
      continue;
    double freed = s.step;
    for (size_t j = i + 1; j < plan.program.size(); ++j) {
      const Instruction &f = plan.program[j];
      if (f.op == "free" && !f.in.empty() && f.in[0].space == g.out[0].space &&
          f.in[0].offset == g.out[0].offset) {
        // A free is not simulated: it happens when the compute stream
        // reaches it.
        freed = 0;
        for (size_t k = j + 1; k-- > 0;)
          if (plan.program[k].predictedEnd >= 0 &&
              !isCollective(plan.program[k].op)) {
            freed = plan.program[k].predictedEnd;
            break;
          }
        break;
      }
    }
    if (freed > s.peakTime)
      s.gatheredAtPeak.push_back({unitOf(g), g.out[0].bytes()});
  }
  // What is drawn: a point per 1/2000 of the step at most, the fullest
  // of each stretch (a 70B step has 11,000), the peak among them.
  std::vector<size_t> keep;
  for (size_t i = 0; i < s.times.size(); ++i) {
    int64_t total = 0;
    for (auto &v : s.held)
      total += v[i];
    if (!keep.empty() &&
        std::floor(s.times[i] / s.step * 2000) ==
            std::floor(s.times[keep.back()] / s.step * 2000)) {
      int64_t kept = 0;
      for (auto &v : s.held)
        kept += v[keep.back()];
      if (total > kept)
        keep.back() = i;
      continue;
    }
    keep.push_back(i);
  }
  std::vector<double> times;
  for (size_t i : keep)
    times.push_back(s.times[i]);
  for (auto &v : s.held) {
    std::vector<int64_t> drawn;
    for (size_t i : keep)
      drawn.push_back(v[i]);
    v = std::move(drawn);
  }
  s.times = std::move(times);
  return s;
}

struct Frame {
  double width = 1180, left = 130, right = 20;
  double step;
  double x(double t) const { return left + (width - left - right) * t / step; }
};

/// The time axis along y = `y`, ticks and labels.
void timeAxis(std::ostream &os, const Frame &f, double y) {
  double tick = niceStep(f.step, 10);
  bool ms = f.step >= 2e-3;
  os << "<line x1='" << f.left << "' y1='" << y << "' x2='" << f.x(f.step)
     << "' y2='" << y << "' stroke='#333'/>\n";
  for (double t = 0; t <= f.step * 1.0001; t += tick) {
    os << "<line x1='" << f.x(t) << "' y1='" << y << "' x2='" << f.x(t)
       << "' y2='" << y + 5 << "' stroke='#333'/>"
       << "<text class='tick' x='" << f.x(t) << "' y='" << y + 17
       << "' text-anchor='middle'>"
       << (ms ? fmt("%g", std::round(t * 1e6) / 1e3) : fmt("%g", std::round(t * 1e7) / 10))
       << "</text>\n";
  }
  os << "<text class='axis' x='" << f.x(f.step) << "' y='" << y + 32
     << "' text-anchor='end'>time in the step (" << (ms ? "ms" : "us")
     << ")</text>\n";
}

void phaseBands(std::ostream &os, const Frame &f, const Summary &s, double top,
                double bottom) {
  const char *fill[] = {"#eef3fa", "#faf1e6", "#eef7ee"};
  for (size_t i = 0; i < s.phases.size(); ++i) {
    const auto &ph = s.phases[i];
    os << "<rect class='phase' x='" << f.x(ph.start) << "' y='" << top
       << "' width='" << std::max(0.0, f.x(ph.end) - f.x(ph.start))
       << "' height='" << bottom - top << "' fill='" << fill[i % 3]
       << "'><title>" << escape(ph.name) << ": " << timeText(ph.start)
       << " to " << timeText(ph.end) << "</title></rect>\n"
       << "<text class='phase-label' x='" << (f.x(ph.start) + f.x(ph.end)) / 2
       << "' y='" << top + 13 << "' text-anchor='middle'>" << escape(ph.name)
       << "</text>\n";
  }
}

/// Each lane's collectives labelled with their units, over the bars: a
/// run of bars closer together than their names is one cluster named
/// "h.0, h.1" after its last bar, where the lane has room before the next.
void unitLabels(std::ostream &os, const Frame &f, const Summary &s, double top,
                double lane) {
  for (size_t l = 0; l < s.lanes.size(); ++l) {
    struct Cluster {
      double x0, x1;
      std::vector<std::string> units;
    };
    std::vector<Cluster> clusters;
    for (const Summary::Comm &c : s.comms) {
      if (c.lane != s.lanes[l] || c.unit == "-")
        continue;
      double x0 = f.x(c.start), x1 = std::max(x0 + 0.6, f.x(c.end));
      if (!clusters.empty() && x0 - clusters.back().x1 < 24) {
        clusters.back().x1 = std::max(clusters.back().x1, x1);
        if (std::find(clusters.back().units.begin(), clusters.back().units.end(),
                      c.unit) == clusters.back().units.end())
          clusters.back().units.push_back(c.unit);
      } else {
        clusters.push_back({x0, x1, {c.unit}});
      }
    }
    for (size_t k = 0; k < clusters.size(); ++k) {
      std::string name;
      for (const std::string &u : clusters[k].units)
        name += (name.empty() ? "" : ", ") + u;
      double width = 6.0 * (double)name.size() + 4;
      double room = (k + 1 < clusters.size() ? clusters[k + 1].x0 : f.width) -
                    clusters[k].x1 - 2;
      double y = top + l * lane + lane * 0.5 + 0.5;
      if (width <= clusters[k].x1 - clusters[k].x0 && clusters[k].units.size() == 1)
        os << "<text class='unit-label' x='"
           << (clusters[k].x0 + clusters[k].x1) / 2 << "' y='" << y
           << "' text-anchor='middle'>" << escape(name) << "</text>\n";
      else if (width <= room)
        os << "<text class='unit-label outside' x='" << clusters[k].x1 + 2
           << "' y='" << y << "'>" << escape(name) << "</text>\n";
    }
  }
}

void timeline(std::ostream &os, const Plan &plan, const Summary &s,
              const std::vector<double> *measured) {
  Frame f;
  f.step = s.step;
  const double lane = 30, top = 22;
  size_t rows = s.lanes.size() + (measured ? 1 : 0);
  double exposedRow = top + rows * lane + 4;
  double axis = exposedRow + 16;
  os << "<svg class='timeline' xmlns='http://www.w3.org/2000/svg' width='"
     << f.width << "' height='" << axis + 40 << "'>\n";
  phaseBands(os, f, s, 0, exposedRow + 12);
  for (size_t l = 0; l < s.lanes.size(); ++l)
    os << "<text class='lane' x='6' y='" << top + l * lane + lane * 0.62
       << "'>" << s.lanes[l] << "</text>\n";
  if (measured)
    os << "<text class='lane' x='6' y='" << top + s.lanes.size() * lane + lane * 0.62
       << "'>measured</text>\n";
  os << "<text class='lane' x='6' y='" << exposedRow + 9
     << "' fill='" << kExposedColour << "'>exposed comm</text>\n";
  // Compute kernels. Runs of kernels narrower together than a pixel and a
  // half are drawn as one rect (a 70B step has 11,000 of them).
  size_t runFirst = 0, runCount = 0;
  double runStart = 0, runEnd = 0, runBusy = 0;
  auto flush = [&]() {
    if (!runCount)
      return;
    const Instruction &first = plan.program[runFirst];
    double x0 = f.x(runStart), w = std::max(0.4, f.x(runEnd) - x0);
    os << "<rect class='op' x='" << fmt("%.2f", x0) << "' y='" << top + 4
       << "' width='" << fmt("%.2f", w) << "' height='" << lane - 8
       << "' fill='" << laneColour("compute") << "'><title>";
    if (runCount == 1)
      os << "#" << runFirst << " " << escape(first.op) << ": "
         << timeText(runBusy) << " at " << timeText(runStart);
    else
      os << runCount << " kernels from #" << runFirst << " (" << escape(first.op)
         << "): " << timeText(runBusy) << " busy from " << timeText(runStart);
    os << "</title></rect>\n";
    runCount = 0;
  };
  for (size_t i = 0; i < plan.program.size(); ++i) {
    const Instruction &in = plan.program[i];
    if (in.predictedStart < 0 || isCollective(in.op) || in.op == "wait" ||
        in.op == "free")
      continue;
    if (runCount && f.x(in.predictedEnd) - f.x(runStart) > 1.5)
      flush();
    if (!runCount) {
      runFirst = i;
      runStart = in.predictedStart;
      runBusy = 0;
    }
    ++runCount;
    runEnd = std::max(runEnd, in.predictedEnd);
    if (runCount == 1)
      runEnd = in.predictedEnd;
    runBusy += in.predictedEnd - in.predictedStart;
    if (measured && i < measured->size() && (*measured)[i] > 0) {
      double x0 = f.x(in.predictedStart);
      double mw = std::max(0.4, f.x(in.predictedStart + (*measured)[i]) - x0);
      os << "<rect class='measured' x='" << fmt("%.2f", x0) << "' y='"
         << top + s.lanes.size() * lane + 4 << "' width='" << fmt("%.2f", mw)
         << "' height='" << lane - 8 << "' fill='#76b7b2'><title>#" << i << " "
         << escape(in.op) << ": measured " << timeText((*measured)[i])
         << ", predicted " << timeText(in.predictedEnd - in.predictedStart)
         << "</title></rect>\n";
    }
  }
  flush();
  // Collectives, labelled by unit.
  for (const Summary::Comm &c : s.comms) {
    size_t l = std::find(s.lanes.begin(), s.lanes.end(), c.lane) - s.lanes.begin();
    double y = top + std::min(l, s.lanes.size() - 1) * lane + 4;
    double x0 = f.x(c.start), w = std::max(0.6, f.x(c.end) - x0);
    os << "<g class='comm'><rect x='" << x0 << "' y='" << y << "' width='" << w
       << "' height='" << lane - 8 << "' fill='" << laneColour(c.lane)
       << "' stroke='#fff' stroke-width='0.5'><title>" << escape(c.kind) << " of unit "
       << escape(c.unit) << ": " << bytesText((double)c.bytes) << " " << c.dtype
       << ", group " << escape(c.group) << " (" << c.groupSize << " ranks), "
       << timeText(c.end - c.start) << ", exposed " << timeText(c.exposed)
       << "</title></rect>";
    os << "</g>\n";
    for (auto [a, b] : c.gaps)
      os << "<rect class='exposed' x='" << f.x(a) << "' y='" << exposedRow
         << "' width='" << std::max(0.6, f.x(b) - f.x(a))
         << "' height='10' fill='" << kExposedColour << "'><title>exposed "
         << escape(c.kind) << " of " << escape(c.unit) << ": "
         << timeText(b - a) << "</title></rect>\n";
  }
  unitLabels(os, f, s, top, lane);
  timeAxis(os, f, axis);
  os << "</svg>\n";
}

void memoryChart(std::ostream &os, const Summary &s) {
  Frame f;
  f.step = s.step;
  const double top = 20, height = 300;
  const MemoryBreakdown &m = s.memory;
  std::vector<std::pair<std::string, int64_t>> state = {
      {"parameters (" + std::string(m.sharded ? "shards" : "whole") + ")", m.params},
      {"optimizer state", m.optimizer},
      {"constants", m.constants},
      {"kernel scratch", m.scratch}};
  int64_t base = m.params + m.optimizer + m.constants + m.scratch;
  double ymax = (double)(base + std::max(m.arena, s.peakHeld));
  // Ticks at round numbers of the unit the axis is read in (KiB, MiB, ...).
  double unit = 1;
  while (ymax / unit >= 1024 * 4 && unit < std::pow(1024.0, 4))
    unit *= 1024;
  double tick = niceStep(ymax / unit, 6) * unit;
  ymax = std::ceil(ymax / tick) * tick;
  auto y = [&](double b) { return top + height - height * b / ymax; };
  os << "<svg class='memory' xmlns='http://www.w3.org/2000/svg' width='"
     << f.width << "' height='" << top + height + 50 << "'>\n";
  // y axis.
  os << "<line x1='" << f.left << "' y1='" << top << "' x2='" << f.left
     << "' y2='" << top + height << "' stroke='#333'/>\n";
  for (double b = 0; b <= ymax * 1.0001; b += tick)
    os << "<line x1='" << f.left - 5 << "' y1='" << y(b) << "' x2='"
       << f.x(s.step) << "' y2='" << y(b) << "' stroke='#ddd'/>"
       << "<text class='tick' x='" << f.left - 8 << "' y='" << y(b) + 4
       << "' text-anchor='end'>" << bytesText(b) << "</text>\n";
  os << "<text class='axis' x='12' y='" << top + height / 2
     << "' transform='rotate(-90 12 " << top + height / 2
     << ")' text-anchor='middle'>bytes per rank</text>\n";
  // State bands (all step), then the arena's categories stacked.
  double below = 0;
  for (size_t i = 0; i < state.size(); ++i) {
    if (state[i].second <= 0)
      continue;
    os << "<rect class='band' x='" << f.left << "' y='"
       << y(below + state[i].second) << "' width='" << f.x(s.step) - f.left
       << "' height='" << y(below) - y(below + state[i].second) << "' fill='"
       << kStateColours[i] << "'><title>" << escape(state[i].first) << ": "
       << bytesText((double)state[i].second) << " (" << state[i].second
       << " bytes) all step</title></rect>\n";
    below += state[i].second;
  }
  std::vector<int64_t> stacked(s.times.size(), 0);
  for (size_t c = 0; c < s.categories.size(); ++c) {
    std::ostringstream upper;
    for (size_t i = 0; i < s.times.size(); ++i) {
      double t0 = s.times[i],
             t1 = i + 1 < s.times.size() ? s.times[i + 1] : s.step;
      double yu = y(below + stacked[i] + s.held[c][i]);
      upper << fmt("%.2f", f.x(t0)) << "," << fmt("%.2f", yu) << " "
            << fmt("%.2f", f.x(t1)) << "," << fmt("%.2f", yu) << " ";
    }
    std::string lowerPts;
    for (size_t k = s.times.size(); k-- > 0;) {
      double t0 = s.times[k],
             t1 = k + 1 < s.times.size() ? s.times[k + 1] : s.step;
      double yl = y(below + stacked[k]);
      lowerPts += fmt("%.2f", f.x(t1)) + "," + fmt("%.2f", yl) + " " +
                  fmt("%.2f", f.x(t0)) + "," + fmt("%.2f", yl) + " ";
    }
    int64_t most = 0;
    for (int64_t b : s.held[c])
      most = std::max(most, b);
    os << "<polygon class='area' points='" << upper.str() << lowerPts
       << "' fill='" << kCategoryColours[memoryCategoryIndex(s.categories[c])]
       << "'><title>" << escape(s.categories[c]) << ": up to "
       << bytesText((double)most) << "</title></polygon>\n";
    for (size_t i = 0; i < s.times.size(); ++i)
      stacked[i] += s.held[c][i];
  }
  // The peak held, and the planned arena above the state.
  if (!s.times.empty()) {
    double px = f.x(s.peakTime);
    double py = y(below + s.peakHeld);
    os << "<line x1='" << px << "' y1='" << top << "' x2='" << px << "' y2='"
       << top + height << "' stroke='#000' stroke-dasharray='4 3'/>"
       << "<circle cx='" << px << "' cy='" << py << "' r='4' fill='#000'/>"
       << "<text class='peak-label' x='" << px + 6 << "' y='" << py - 6
       << "'>peak in use " << bytesText(below + s.peakHeld) << " at "
       << timeText(s.peakTime) << "</text>\n";
  }
  double arenaTop = y(base + m.arena);
  os << "<line x1='" << f.left << "' y1='" << arenaTop << "' x2='" << f.x(s.step)
     << "' y2='" << arenaTop << "' stroke='#e15759' stroke-dasharray='6 3'/>"
     << "<text class='peak-label' x='" << f.x(s.step) << "' y='" << arenaTop - 5
     << "' text-anchor='end' fill='#e15759'>planned peak "
     << bytesText((double)m.total()) << " (state + arena)</text>\n";
  timeAxis(os, f, top + height);
  os << "</svg>\n";
}

void legend(std::ostream &os, const Summary &s) {
  os << "<div class='legend'>";
  for (const std::string &lane : s.lanes)
    os << "<span><i style='background:" << laneColour(lane) << "'></i>" << lane
       << "</span>";
  os << "<span><i style='background:" << kExposedColour
     << "'></i>exposed communication</span>";
  for (size_t i = 0; i < s.phases.size(); ++i)
    os << "<span class='phase-key'>" << escape(s.phases[i].name) << " "
       << timeText(s.phases[i].end - s.phases[i].start) << "</span>";
  os << "</div>\n";
}

void memoryLegend(std::ostream &os, const Summary &s) {
  const MemoryBreakdown &m = s.memory;
  os << "<div class='legend'>";
  const char *names[] = {"parameters", "optimizer state", "constants",
                         "kernel scratch"};
  int64_t values[] = {m.params, m.optimizer, m.constants, m.scratch};
  for (size_t i = 0; i < 4; ++i)
    if (values[i] > 0)
      os << "<span><i style='background:" << kStateColours[i] << "'></i>"
         << names[i] << "</span>";
  for (const std::string &c : s.categories)
    os << "<span><i style='background:" << kCategoryColours[memoryCategoryIndex(c)]
       << "'></i>" << escape(c) << "</span>";
  os << "</div>\n";
}

void peakTable(std::ostream &os, const Summary &s) {
  const MemoryBreakdown &m = s.memory;
  auto row = [&](const std::string &what, int64_t b, const std::string &note) {
    os << "<tr><td>" << what << "</td><td class='num'>" << bytesText((double)b)
       << "</td><td class='num bytes'>" << b << "</td><td>" << note
       << "</td></tr>\n";
  };
  os << "<table class='peak'><tr><th>peak memory per rank (the text "
        "report's)</th><th>size</th><th>bytes</th><th></th></tr>\n";
  row("parameters (" + std::string(m.sharded ? "shards" : "whole") + ")",
      m.params, "all step");
  row("optimizer state", m.optimizer, "all step");
  row("constants", m.constants, "all step");
  row("kernel scratch", m.scratch, "the largest kernel's");
  row("arena (planned)", m.arena,
      "every buffer's planned offset and size: the buffers below, plus "
      "what packing them into one arena leaves unused");
  os << "<tr class='total'><td>planned peak</td><td class='num'>"
     << bytesText((double)m.total()) << "</td><td class='num bytes'>"
     << m.total() << "</td><td></td></tr>\n";
  os << "<tr><th colspan='4'>the arena at its fullest, after instruction "
        "point "
     << s.peakPoint << " (" << (s.times.empty() ? "" : timeText(s.peakTime))
     << ")</th></tr>\n";
  std::string byUnit;
  for (auto &[unit, bytes] : s.gatheredAtPeak)
    byUnit += (byUnit.empty() ? "" : ", ") + escape(unit) + " " +
              bytesText((double)bytes);
  for (size_t c = 0; c < s.categories.size(); ++c)
    if (s.atPeak[c] > 0)
      row(escape(s.categories[c]), s.atPeak[c],
          s.categories[c] == "gathered parameters" && !byUnit.empty()
              ? "units: " + byUnit
              : std::string());
  row("arena in use", s.peakHeld,
      "held after an instruction; the arena is larger by " +
          bytesText((double)(m.arena - s.peakHeld)) +
          ": an instruction's inputs and outputs are live together "
          "(at most " +
          bytesText((double)m.liveDuring) +
          "), and the packing leaves gaps between buffers");
  os << "</table>\n";
}

void unitTable(std::ostream &os, const Summary &s) {
  os << "<table class='units'><tr><th>unit</th><th>params</th><th>elements"
        "</th><th>shard / rank</th><th>gathered</th><th>reshard after "
        "forward</th><th>gathers</th><th>prefetch lead</th><th>recompute</th>"
        "<th>comm</th><th>exposed</th><th>what the choices cost and save</th></tr>\n";
  for (const std::string &name : s.unitOrder) {
    const Summary::UnitRow &u = s.units.at(name);
    std::string effect;
    if (u.reshard && u.gathers > 1)
      effect += "resharding saves " + bytesText((double)u.gatheredBytes) +
                " between forward and backward, costs a backward all-gather "
                "(" + timeText(u.backwardGatherSeconds) + ")";
    else if (!u.reshard)
      effect += "kept gathered: " + bytesText((double)u.gatheredBytes) +
                " held from forward to backward, no second all-gather";
    if (u.recompute > 0)
      effect += std::string(effect.empty() ? "" : "; ") + "recomputing costs " +
                timeText(u.recompute) + " and frees its saved activations";
    os << "<tr><td>" << escape(name) << "</td><td class='num'>" << u.params
       << "</td><td class='num'>" << u.elements << "</td><td class='num'>"
       << bytesText((double)u.shardBytes) << "</td><td class='num'>"
       << bytesText((double)u.gatheredBytes) << "</td><td>"
       << (u.reshard ? "yes" : "no") << "</td><td class='num'>" << u.gathers
       << "</td><td class='num'>" << timeText(u.lead) << "</td><td class='num'>"
       << (u.recompute > 0 ? timeText(u.recompute) : "-") << "</td><td class='num'>"
       << timeText(u.gatherSeconds + u.reduceSeconds) << "</td><td class='num'>"
       << timeText(u.exposed) << "</td><td>" << effect << "</td></tr>\n";
  }
  os << "</table>\n";
}

const char *kStyle = R"(<style>
body{font-family:sans-serif;margin:16px;color:#222}
h1{font-size:20px}h2{font-size:16px;margin-top:26px}
.tick{font-size:10px;fill:#444}.axis{font-size:11px;fill:#222}
.lane{font-size:12px}.unit-label{font-size:10px;fill:#fff;dominant-baseline:middle}
.unit-label.outside{fill:#333}
.phase-label{font-size:11px;fill:#555}.peak-label{font-size:11px}
.legend span{margin-right:14px;font-size:12px;white-space:nowrap}
.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:middle}
.phase-key{color:#555}
table{border-collapse:collapse;font-size:12px;margin-top:8px}
td,th{border:1px solid #ccc;padding:3px 7px;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.total td{font-weight:bold}
.figures span{margin-right:22px}
</style>
)";

void header(std::ostream &os, const Plan &plan, const Summary &s) {
  const json &p = plan.predicted;
  os << "<h1>fsdp plan: predicted step " << timeText(s.step) << " on "
     << escape(p.value("device", std::string("?"))) << ", " << plan.worldSize
     << " ranks (" << escape(plan.strategy) << ")</h1>\n"
     << "<div class='figures'><span>compute "
     << timeText(p.value("compute_seconds", 0.0)) << "</span><span>communication "
     << timeText(s.commTotal) << "</span><span>exposed communication "
     << timeText(s.exposedTotal) << " ("
     << fmt("%.1f", 100 * s.exposedTotal / std::max(s.commTotal, 1e-300))
     << "% of it; the simulator's waits: "
     << timeText(p.value("exposed_comm_seconds", 0.0)) << ")</span><span>planned peak "
     << bytesText((double)s.memory.total()) << "</span></div>\n";
}

void exposedTable(std::ostream &os, const Summary &s) {
  os << "<table class='exposed'><tr><th>unit</th><th>all-gather</th>"
        "<th>reduce-scatter / all-reduce</th><th>exposed</th><th>exposed %"
        "</th></tr>\n";
  // The most exposed first; units with nothing exposed in one line.
  std::vector<std::string> order = s.unitOrder;
  std::stable_sort(order.begin(), order.end(), [&](auto &a, auto &b) {
    return s.units.at(a).exposed > s.units.at(b).exposed;
  });
  int64_t hidden = 0;
  double hiddenComm = 0;
  for (const std::string &name : order) {
    const Summary::UnitRow &u = s.units.at(name);
    double total = u.gatherSeconds + u.reduceSeconds;
    if (u.exposed <= 0 && order.size() > 12) {
      ++hidden;
      hiddenComm += total;
      continue;
    }
    os << "<tr><td>" << escape(name) << "</td><td class='num'>"
       << timeText(u.gatherSeconds) << "</td><td class='num'>"
       << timeText(u.reduceSeconds) << "</td><td class='num'>"
       << timeText(u.exposed) << "</td><td class='num'>"
       << fmt("%.1f", total > 0 ? 100 * u.exposed / total : 0.0) << "</td></tr>\n";
  }
  if (hidden)
    os << "<tr><td>" << hidden << " more units</td><td colspan='2' class='num'>"
       << timeText(hiddenComm) << "</td><td class='num'>0.0 us</td><td "
          "class='num'>0.0</td></tr>\n";
  os << "<tr class='total'><td>step</td><td colspan='2' class='num'>"
     << timeText(s.commTotal) << "</td><td class='num'>" << timeText(s.exposedTotal)
     << "</td><td class='num'>"
     << fmt("%.1f", 100 * s.exposedTotal / std::max(s.commTotal, 1e-300))
     << "</td></tr></table>\n";
}

/// Per instruction, the measured duration on rank 0 (seconds; 0 if absent).
std::vector<double> measuredDurations(const Plan &plan, const json &doc) {
  std::vector<double> out(plan.program.size(), 0.0);
  for (const json &e : doc["traceEvents"])
    if (e.is_object() && e.value("ph", "") == "X" && e.value("pid", -1) == 0 &&
        e.contains("args") && e["args"].is_object() &&
        e["args"].contains("instruction") &&
        e["args"]["instruction"].is_number_unsigned()) {
      size_t i = e["args"]["instruction"].get<size_t>();
      if (i < out.size() && e.contains("dur") && e["dur"].is_number())
        out[i] = e["dur"].get<double>() / 1e6;
    }
  return out;
}

void measuredTables(std::ostream &os, const Plan &plan,
                    const std::vector<double> &measured, const json &doc) {
  const json &m = doc["otherData"];
  double pStep = plan.predicted.value("step_seconds", 0.0),
         mStep = m.value("step_seconds", 0.0);
  os << "<div class='figures'><span>step: predicted " << timeText(pStep)
     << ", measured " << timeText(mStep) << " ("
     << fmt("%+.1f", mStep > 0 ? 100 * (pStep - mStep) / mStep : 0.0)
     << "%)</span></div>\n";
  // Per op kind, then the instructions the prediction missed most.
  std::map<std::string, std::pair<double, double>> byOp;
  std::vector<std::pair<double, size_t>> misses;
  for (size_t i = 0; i < plan.program.size(); ++i) {
    const Instruction &in = plan.program[i];
    if (measured[i] <= 0 || in.predictedStart < 0)
      continue;
    double p = in.predictedEnd - in.predictedStart;
    byOp[in.op].first += p;
    byOp[in.op].second += measured[i];
    misses.push_back({std::fabs(measured[i] - p), i});
  }
  os << "<table class='measured-ops'><tr><th>op</th><th>predicted</th><th>"
        "measured</th><th>error</th></tr>\n";
  for (auto &[op, pm] : byOp)
    os << "<tr><td>" << escape(op) << "</td><td class='num'>" << timeText(pm.first)
       << "</td><td class='num'>" << timeText(pm.second) << "</td><td class='num'>"
       << fmt("%+.1f%%", pm.second > 0 ? 100 * (pm.first - pm.second) / pm.second : 0.0)
       << "</td></tr>\n";
  os << "</table>\n";
  // Per unit: its collectives, predicted and measured.
  std::map<std::string, std::pair<double, double>> byUnit;
  for (size_t i = 0; i < plan.program.size(); ++i) {
    const Instruction &in = plan.program[i];
    if (isCollective(in.op) && measured[i] > 0 && in.predictedStart >= 0) {
      byUnit[unitOf(in)].first += in.predictedEnd - in.predictedStart;
      byUnit[unitOf(in)].second += measured[i];
    }
  }
  if (!byUnit.empty()) {
    os << "<table class='measured-units'><tr><th>unit</th><th>collectives "
          "predicted</th><th>measured</th><th>error</th></tr>\n";
    for (auto &[unit, pm] : byUnit)
      os << "<tr><td>" << escape(unit) << "</td><td class='num'>"
         << timeText(pm.first) << "</td><td class='num'>" << timeText(pm.second)
         << "</td><td class='num'>"
         << fmt("%+.1f%%", pm.second > 0 ? 100 * (pm.first - pm.second) / pm.second : 0.0)
         << "</td></tr>\n";
    os << "</table>\n";
  }
  std::sort(misses.rbegin(), misses.rend());
  os << "<table class='measured-top'><tr><th>instruction</th><th>op</th><th>"
        "unit</th><th>predicted</th><th>measured</th></tr>\n";
  for (size_t k = 0; k < std::min<size_t>(misses.size(), 15); ++k) {
    const Instruction &in = plan.program[misses[k].second];
    os << "<tr><td class='num'>" << misses[k].second << "</td><td>"
       << escape(in.op) << "</td><td>" << escape(unitOf(in)) << "</td><td class='num'>"
       << timeText(in.predictedEnd - in.predictedStart) << "</td><td class='num'>"
       << timeText(measured[misses[k].second]) << "</td></tr>\n";
  }
  os << "</table>\n";
}

void planSections(std::ostream &os, const Plan &plan, const Summary &s,
                  const json *measuredDoc) {
  header(os, plan, s);
  std::vector<double> measured;
  if (measuredDoc)
    measured = measuredDurations(plan, *measuredDoc);
  os << "<h2>Step timeline</h2>\n";
  legend(os, s);
  timeline(os, plan, s, measuredDoc ? &measured : nullptr);
  os << "<h2>Exposed communication (not overlapped by compute)</h2>\n";
  exposedTable(os, s);
  os << "<h2>Memory per rank over the step</h2>\n";
  memoryLegend(os, s);
  memoryChart(os, s);
  peakTable(os, s);
  os << "<h2>Units</h2>\n";
  unitTable(os, s);
  if (measuredDoc) {
    os << "<h2>Predicted against measured (rank 0)</h2>\n";
    measuredTables(os, plan, measured, *measuredDoc);
  }
}

/// Whole or not at all, and an error when any write fails, the last one
/// at close included (a full disk).
Status writeFile(const std::string &path, const std::string &text) {
  return writeFileAtomically(path, text);
}

} // namespace

Status loadCandidates(const std::string &path, nlohmann::json &doc) {
  std::string text;
  FSDP_RETURN_IF_ERROR(readFile(path, text, "the autotune candidates"));
  doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || doc.value("format", std::string()) !=
                              "fsdp-autotune-candidates")
    return Status::error(path + ": not a file written by fsdp-opt "
                                "--autotune-candidates");
  if (!doc.contains("budget_bytes") || !doc["budget_bytes"].is_number() ||
      !doc.contains("candidates") || !doc["candidates"].is_array())
    return Status::error(path + ": budget_bytes (a number) and candidates (a "
                                "list) are required");
  size_t i = 0;
  for (const json &c : doc["candidates"]) {
    std::string where = path + ": candidates[" + std::to_string(i++) + "]";
    if (!c.is_object())
      return Status::error(where + ": expected an object");
    for (const char *k : {"strategy", "reshard_after_forward",
                          "activation_checkpointing"})
      if (!c.contains(k) || !c[k].is_string())
        return Status::error(where + "." + k + ": expected a string");
    for (const char *k : {"step_seconds", "peak_bytes", "merge_units",
                          "prefetch_depth"})
      if (!c.contains(k) || !c[k].is_number() || !std::isfinite(c[k].get<double>()) ||
          c[k].get<double>() < 0)
        return Status::error(where + "." + k + ": expected a number >= 0");
    for (const char *k : {"ok", "chosen"})
      if (!c.contains(k) || !c[k].is_boolean())
        return Status::error(where + "." + k + ": expected true or false");
  }
  return Status::ok();
}

/// Autotune's candidates: step against peak, the budget, the chosen plan,
/// and the fastest that fit.
static void candidatesSection(std::ostream &os, const json &doc) {
  const json &list = doc["candidates"];
  double budget = doc["budget_bytes"].get<double>();
  double maxPeak = budget, minPeak = budget, maxStep = 0, minStep = 1e300;
  for (const json &c : list)
    if (c["ok"].get<bool>()) {
      maxPeak = std::max(maxPeak, c["peak_bytes"].get<double>());
      minPeak = std::min(minPeak, c["peak_bytes"].get<double>());
      maxStep = std::max(maxStep, c["step_seconds"].get<double>());
      minStep = std::min(minStep, c["step_seconds"].get<double>());
    }
  if (maxStep <= 0)
    return;
  minStep = std::min(minStep, maxStep);
  double lo = minStep * 0.98, hi = maxStep * 1.02 + 1e-12;
  const double width = 640, height = 300, left = 90, top = 16;
  double from = minPeak * 0.97, to = maxPeak * 1.03 + 1;
  auto x = [&](double b) {
    return left + (width - left - 20) * (b - from) / (to - from);
  };
  auto y = [&](double t) { return top + height - height * (t - lo) / (hi - lo); };
  os << "<svg class='candidates' xmlns='http://www.w3.org/2000/svg' width='"
     << width << "' height='" << top + height + 40 << "'>\n"
     << "<line x1='" << left << "' y1='" << top + height << "' x2='" << width - 20
     << "' y2='" << top + height << "' stroke='#333'/><line x1='" << left
     << "' y1='" << top << "' x2='" << left << "' y2='" << top + height
     << "' stroke='#333'/>\n"
     << "<line x1='" << x(budget) << "' y1='" << top << "' x2='" << x(budget)
     << "' y2='" << top + height << "' stroke='#e15759' stroke-dasharray='5 3'/>"
     << "<text class='tick' x='" << x(budget) - 4 << "' y='" << top + 10
     << "' text-anchor='end' fill='#e15759'>budget " << bytesText(budget)
     << "</text>\n"
     << "<text class='axis' x='" << (left + width) / 2 << "' y='" << top + height + 32
     << "' text-anchor='middle'>predicted peak per rank</text>"
     << "<text class='axis' x='14' y='" << top + height / 2 << "' transform='rotate(-90 14 "
     << top + height / 2 << ")' text-anchor='middle'>predicted step</text>\n"
     << "<text class='tick' x='" << left - 6 << "' y='" << y(lo) << "' text-anchor='end'>"
     << timeText(lo) << "</text><text class='tick' x='" << left - 6 << "' y='"
     << y(hi) + 8 << "' text-anchor='end'>" << timeText(hi) << "</text>"
     << "<text class='tick' x='" << left << "' y='" << top + height + 14
     << "'>" << bytesText(from) << "</text><text class='tick' x='" << x(maxPeak) << "' y='"
     << top + height + 14 << "' text-anchor='middle'>" << bytesText(maxPeak)
     << "</text>\n";
  auto describe = [](const json &c) {
    return c["strategy"].get<std::string>() + ", units merged by " +
           std::to_string(c["merge_units"].get<int64_t>()) + ", prefetch depth " +
           std::to_string(c["prefetch_depth"].get<int64_t>()) + ", reshard " +
           c["reshard_after_forward"].get<std::string>() + ", recompute " +
           c["activation_checkpointing"].get<std::string>();
  };
  const json *chosen = nullptr;
  for (const json &c : list) {
    if (!c["ok"].get<bool>())
      continue;
    bool fits = c["peak_bytes"].get<double>() <= budget;
    bool isChosen = c["chosen"].get<bool>();
    if (isChosen)
      chosen = &c;
    os << "<circle class='" << (isChosen ? "chosen" : fits ? "fits" : "over")
       << "' cx='" << x(c["peak_bytes"].get<double>()) << "' cy='"
       << y(c["step_seconds"].get<double>()) << "' r='" << (isChosen ? 6 : 3.5)
       << "' fill='" << (isChosen ? "#e15759" : fits ? "#4e79a7" : "#bab0ac")
       << "'><title>" << escape(describe(c)) << ": step "
       << timeText(c["step_seconds"].get<double>()) << ", peak "
       << bytesText(c["peak_bytes"].get<double>())
       << (fits ? "" : " (over the budget)") << "</title></circle>\n";
  }
  os << "</svg>\n";
  int64_t fit = 0, over = 0, failed = 0;
  for (const json &c : list)
    (c["ok"].get<bool>() ? (c["peak_bytes"].get<double>() <= budget ? fit : over)
                         : failed)++;
  os << "<p>" << list.size() << " plans simulated: " << fit << " fit the budget, "
     << over << " do not, " << failed << " failed to build.";
  if (chosen)
    os << " Chosen (red): the fastest that fits, " << escape(describe(*chosen))
       << ": step " << timeText((*chosen)["step_seconds"].get<double>())
       << ", peak " << bytesText((*chosen)["peak_bytes"].get<double>()) << ".";
  os << "</p>\n";
  // The fitting plans, each once (the chosen one is simulated again packed).
  std::vector<const json *> fitting;
  std::set<std::string> seen;
  for (const json &c : list)
    if (c["ok"].get<bool>() && c["peak_bytes"].get<double>() <= budget &&
        seen.insert(describe(c) + fmt("%.9g", c["step_seconds"].get<double>()) +
                    fmt("%.0f", c["peak_bytes"].get<double>()))
            .second)
      fitting.push_back(&c);
  std::stable_sort(fitting.begin(), fitting.end(), [](const json *a, const json *b) {
    return (*a)["step_seconds"].get<double>() < (*b)["step_seconds"].get<double>();
  });
  os << "<table class='candidate-table'><tr><th>step</th><th>peak</th><th>"
        "choices</th><th></th></tr>\n";
  for (size_t k = 0; k < std::min<size_t>(fitting.size(), 10); ++k)
    os << "<tr><td class='num'>" << timeText((*fitting[k])["step_seconds"].get<double>())
       << "</td><td class='num'>" << bytesText((*fitting[k])["peak_bytes"].get<double>())
       << "</td><td>" << escape(describe(*fitting[k])) << "</td><td>"
       << ((*fitting[k])["chosen"].get<bool>() ? "chosen" : "") << "</td></tr>\n";
  os << "</table>\n";
}

Status writeHtml(const Plan &plan, const std::string &path,
                 const nlohmann::json *measured,
                 const nlohmann::json *candidates) {
  if (plan.predicted.is_null())
    return Status::error("the plan has no prediction to draw (fsdp-opt "
                         "--device=...)");
  Summary s = summarize(plan);
  std::ostringstream os;
  os << "<!DOCTYPE html><html><head><meta charset='utf-8'><title>fsdp plan"
        "</title>\n"
     << kStyle << "</head><body>\n";
  planSections(os, plan, s, measured);
  if (candidates) {
    os << "<h2>Autotune: the plans it weighed</h2>\n";
    candidatesSection(os, *candidates);
  }
  os << "</body></html>\n";
  return writeFile(path, os.str());
}

Status writeDiffHtml(const Plan &a, const std::string &nameA, const Plan &b,
                     const std::string &nameB, const std::string &path) {
  if (a.predicted.is_null() || b.predicted.is_null())
    return Status::error("both plans need a prediction to compare (fsdp-opt "
                         "--device=...)");
  Summary sa = summarize(a), sb = summarize(b);
  std::ostringstream os;
  os << "<!DOCTYPE html><html><head><meta charset='utf-8'><title>fsdp plans"
        "</title>\n"
     << kStyle << "</head><body>\n<h1>" << escape(nameA) << " against "
     << escape(nameB) << "</h1>\n";
  auto row = [&](const std::string &what, const std::string &x,
                 const std::string &y, double dx, double dy) {
    os << "<tr><td>" << what << "</td><td class='num'>" << x
       << "</td><td class='num'>" << y << "</td><td class='num'>"
       << fmt("%+.1f%%", dx > 0 ? 100 * (dy - dx) / dx : 0.0) << "</td></tr>\n";
  };
  os << "<table class='diff'><tr><th></th><th>" << escape(nameA) << "</th><th>"
     << escape(nameB) << "</th><th>change</th></tr>\n";
  row("step", timeText(sa.step), timeText(sb.step), sa.step, sb.step);
  row("exposed communication", timeText(sa.exposedTotal),
      timeText(sb.exposedTotal), sa.exposedTotal, sb.exposedTotal);
  row("communication", timeText(sa.commTotal), timeText(sb.commTotal),
      sa.commTotal, sb.commTotal);
  row("planned peak", bytesText((double)sa.memory.total()),
      bytesText((double)sb.memory.total()), (double)sa.memory.total(),
      (double)sb.memory.total());
  row("arena", bytesText((double)sa.memory.arena),
      bytesText((double)sb.memory.arena), (double)sa.memory.arena,
      (double)sb.memory.arena);
  row("arena in use (most)", bytesText((double)sa.peakHeld),
      bytesText((double)sb.peakHeld), (double)sa.peakHeld, (double)sb.peakHeld);
  std::set<std::string> cats(sa.categories.begin(), sa.categories.end());
  cats.insert(sb.categories.begin(), sb.categories.end());
  auto atPeak = [](const Summary &s, const std::string &c) -> int64_t {
    for (size_t i = 0; i < s.categories.size(); ++i)
      if (s.categories[i] == c)
        return s.atPeak[i];
    return 0;
  };
  for (const std::string &c : cats)
    row("at the peak: " + escape(c), bytesText((double)atPeak(sa, c)),
        bytesText((double)atPeak(sb, c)), (double)atPeak(sa, c),
        (double)atPeak(sb, c));
  os << "</table>\n<h2>Unit choices that differ</h2>\n<table class='unit-diff'>"
        "<tr><th>unit</th><th>"
     << escape(nameA) << "</th><th>" << escape(nameB) << "</th></tr>\n";
  std::set<std::string> units(sa.unitOrder.begin(), sa.unitOrder.end());
  units.insert(sb.unitOrder.begin(), sb.unitOrder.end());
  int differing = 0;
  auto choice = [](const Summary &s, const std::string &u) -> std::string {
    auto it = s.units.find(u);
    if (it == s.units.end())
      return "(no such unit)";
    return std::string("reshard ") + (it->second.reshard ? "yes" : "no") +
           ", recompute " +
           (it->second.recompute > 0 ? timeText(it->second.recompute) : "no") +
           ", " + std::to_string(it->second.params) + " params";
  };
  for (const std::string &u : units) {
    std::string ca = choice(sa, u), cb = choice(sb, u);
    if (ca == cb)
      continue;
    ++differing;
    os << "<tr><td>" << escape(u) << "</td><td>" << ca << "</td><td>" << cb
       << "</td></tr>\n";
  }
  if (!differing)
    os << "<tr><td colspan='3'>none: every unit makes the same choices</td></tr>\n";
  os << "</table>\n<hr><h2>" << escape(nameA) << "</h2>\n";
  planSections(os, a, sa, nullptr);
  os << "<hr><h2>" << escape(nameB) << "</h2>\n";
  planSections(os, b, sb, nullptr);
  os << "</body></html>\n";
  return writeFile(path, os.str());
}

} // namespace fsdp
