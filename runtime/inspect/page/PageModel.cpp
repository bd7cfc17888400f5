//===- PageModel.cpp - What the page shows --------------------------------===//
//
// Part of fsdp-inspect's page (runtime/inspect/page/PageParts.h).
//
//===----------------------------------------------------------------------===//
#include "runtime/inspect/page/PageParts.h"

namespace fsdp::page {

std::string escape(const std::string &s) {
  std::string out;
  for (char c : s)
    switch (c) {
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '&':
      out += "&amp;";
      break;
    case '"':
      out += "&quot;";
      break;
    case '\'':
      out += "&#39;";
      break;
    default:
      out += c;
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
                 std::vector<std::pair<double, double>> *gaps) {
  double exposed = 0, at = a;
  auto it =
      std::lower_bound(busy.begin(), busy.end(), std::make_pair(a, a),
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

std::string laneColour(const std::string &lane) {
  for (auto &c : kLaneColours)
    if (lane == c[0])
      return c[1];
  return "#999999";
}

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
        s.phases.push_back({ph[0].get<std::string>(), ph[1].get<double>(),
                            ph[2].get<double>()});
  std::vector<std::pair<double, double>> busy;
  for (const Instruction &in : plan.program)
    if (in.predictedStart >= 0 && laneOf(in) == "compute" && in.op != "wait" &&
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
    if (laneOf(in) == "compute" || in.predictedStart < 0 || in.in.empty())
      continue;
    Summary::Comm c;
    c.index = i;
    c.kind = in.op.substr(0, in.op.find("_start"));
    c.unit = unitOf(in);
    c.lane = laneOf(in);
    c.dtype = dtypeName(in.in[0].dtype);
    c.group = in.attrString("group", "world");
    c.groupSize = in.attrInt("group_size", plan.worldSize);
    c.bytes =
        std::max(in.in[0].bytes(), in.out.empty() ? 0 : in.out[0].bytes());
    c.start = in.predictedStart;
    c.end = in.predictedEnd;
    c.exposed = uncovered(c.start, c.end, s.computeBusy, &c.gaps);
    s.commTotal += c.end - c.start;
    s.exposedTotal += c.exposed;
    if (s.units.count(c.unit)) {
      Summary::UnitRow &row = s.units[c.unit];
      row.exposed += c.exposed;
      if (c.kind == "all_gather") {
        row.gatheredBytes =
            std::max(row.gatheredBytes, (int64_t)in.out[0].bytes());
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
  if (p.contains("host_memory") && p["host_memory"].is_array())
    for (const json &pt : p["host_memory"])
      if (pt.is_array() && pt.size() == 2 && pt[0].is_number() &&
          pt[1].is_number_integer())
        s.hostHeld.push_back({pt[0].get<double>(), pt[1].get<int64_t>()});
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
    return memoryCategoryIndex(s.categories[a]) <
           memoryCategoryIndex(s.categories[b]);
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
    if (!keep.empty() && std::floor(s.times[i] / s.step * 2000) ==
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

} // namespace fsdp::page
