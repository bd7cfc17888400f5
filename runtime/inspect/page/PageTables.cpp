//===- PageTables.cpp - The page's tables ---------------------------------===//
//
// Part of fsdp-inspect's page (runtime/inspect/page/PageParts.h).
//
//===----------------------------------------------------------------------===//
#include "runtime/inspect/page/PageParts.h"

namespace fsdp::page {

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
        "<th>comm</th><th>exposed</th><th>what the choices cost and "
        "save</th></tr>\n";
  for (const std::string &name : s.unitOrder) {
    const Summary::UnitRow &u = s.units.at(name);
    std::string effect;
    if (u.reshard && u.gathers > 1)
      effect += "resharding saves " + bytesText((double)u.gatheredBytes) +
                " between forward and backward, costs a backward all-gather "
                "(" +
                timeText(u.backwardGatherSeconds) + ")";
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
       << (u.recompute > 0 ? timeText(u.recompute) : "-")
       << "</td><td class='num'>" << timeText(u.gatherSeconds + u.reduceSeconds)
       << "</td><td class='num'>" << timeText(u.exposed) << "</td><td>"
       << effect << "</td></tr>\n";
  }
  os << "</table>\n";
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
       << fmt("%.1f", total > 0 ? 100 * u.exposed / total : 0.0)
       << "</td></tr>\n";
  }
  if (hidden)
    os << "<tr><td>" << hidden << " more units</td><td colspan='2' class='num'>"
       << timeText(hiddenComm)
       << "</td><td class='num'>0.0 us</td><td "
          "class='num'>0.0</td></tr>\n";
  os << "<tr class='total'><td>step</td><td colspan='2' class='num'>"
     << timeText(s.commTotal) << "</td><td class='num'>"
     << timeText(s.exposedTotal) << "</td><td class='num'>"
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
     << fmt("%+.1f", mStep > 0 ? 100 * (pStep - mStep) / mStep : 0.0) << "%)";
  // The measured steps' own spread (Inspect.cpp compareTrace).
  if (m.contains("step_p10_seconds") && m.contains("step_p90_seconds"))
    os << "; its steps from " << timeText(m.value("step_p10_seconds", 0.0))
       << " to " << timeText(m.value("step_p90_seconds", 0.0))
       << " (10th to 90th percentile)";
  os << "</span></div>\n";
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
    os << "<tr><td>" << escape(op) << "</td><td class='num'>"
       << timeText(pm.first) << "</td><td class='num'>" << timeText(pm.second)
       << "</td><td class='num'>"
       << fmt("%+.1f%%",
              pm.second > 0 ? 100 * (pm.first - pm.second) / pm.second : 0.0)
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
         << fmt("%+.1f%%",
                pm.second > 0 ? 100 * (pm.first - pm.second) / pm.second : 0.0)
         << "</td></tr>\n";
    os << "</table>\n";
  }
  std::sort(misses.rbegin(), misses.rend());
  os << "<table class='measured-top'><tr><th>instruction</th><th>op</th><th>"
        "unit</th><th>predicted</th><th>measured</th></tr>\n";
  for (size_t k = 0; k < std::min<size_t>(misses.size(), 15); ++k) {
    const Instruction &in = plan.program[misses[k].second];
    os << "<tr><td class='num'>" << misses[k].second << "</td><td>"
       << escape(in.op) << "</td><td>" << escape(unitOf(in))
       << "</td><td class='num'>"
       << timeText(in.predictedEnd - in.predictedStart)
       << "</td><td class='num'>" << timeText(measured[misses[k].second])
       << "</td></tr>\n";
  }
  os << "</table>\n";
}

} // namespace fsdp::page
