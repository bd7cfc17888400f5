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
#include "runtime/inspect/page/PageParts.h"

namespace fsdp {

namespace {

using namespace page;

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
     << timeText(p.value("compute_seconds", 0.0))
     << "</span><span>communication " << timeText(s.commTotal)
     << "</span><span>exposed communication " << timeText(s.exposedTotal)
     << " ("
     << fmt("%.1f", 100 * s.exposedTotal / std::max(s.commTotal, 1e-300))
     << "% of it; the simulator's waits: "
     << timeText(p.value("exposed_comm_seconds", 0.0))
     << ")</span><span>planned peak " << bytesText((double)s.memory.total())
     << "</span></div>\n";
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
  if (s.memory.host > 0) {
    os << "<h2>Host memory per rank over the step (offload)</h2>\n";
    hostMemoryChart(os, s);
  }
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
  if (!doc.is_object() ||
      doc.value("format", std::string()) != "fsdp-autotune-candidates")
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
    for (const char *k :
         {"strategy", "reshard_after_forward", "activation_checkpointing"})
      if (!c.contains(k) || !c[k].is_string())
        return Status::error(where + "." + k + ": expected a string");
    for (const char *k :
         {"step_seconds", "peak_bytes", "merge_units", "prefetch_depth"})
      if (!c.contains(k) || !c[k].is_number() ||
          !std::isfinite(c[k].get<double>()) || c[k].get<double>() < 0)
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
  auto y = [&](double t) {
    return top + height - height * (t - lo) / (hi - lo);
  };
  os << "<svg class='candidates' xmlns='http://www.w3.org/2000/svg' width='"
     << width << "' height='" << top + height + 40 << "'>\n"
     << "<line x1='" << left << "' y1='" << top + height << "' x2='"
     << width - 20 << "' y2='" << top + height << "' stroke='#333'/><line x1='"
     << left << "' y1='" << top << "' x2='" << left << "' y2='" << top + height
     << "' stroke='#333'/>\n"
     << "<line x1='" << x(budget) << "' y1='" << top << "' x2='" << x(budget)
     << "' y2='" << top + height
     << "' stroke='#e15759' stroke-dasharray='5 3'/>"
     << "<text class='tick' x='" << x(budget) - 4 << "' y='" << top + 10
     << "' text-anchor='end' fill='#e15759'>budget " << bytesText(budget)
     << "</text>\n"
     << "<text class='axis' x='" << (left + width) / 2 << "' y='"
     << top + height + 32
     << "' text-anchor='middle'>predicted peak per rank</text>"
     << "<text class='axis' x='14' y='" << top + height / 2
     << "' transform='rotate(-90 14 " << top + height / 2
     << ")' text-anchor='middle'>predicted step</text>\n"
     << "<text class='tick' x='" << left - 6 << "' y='" << y(lo)
     << "' text-anchor='end'>" << timeText(lo)
     << "</text><text class='tick' x='" << left - 6 << "' y='" << y(hi) + 8
     << "' text-anchor='end'>" << timeText(hi) << "</text>"
     << "<text class='tick' x='" << left << "' y='" << top + height + 14 << "'>"
     << bytesText(from) << "</text><text class='tick' x='" << x(maxPeak)
     << "' y='" << top + height + 14 << "' text-anchor='middle'>"
     << bytesText(maxPeak) << "</text>\n";
  auto describe = [](const json &c) {
    return c["strategy"].get<std::string>() + ", units merged by " +
           std::to_string(c["merge_units"].get<int64_t>()) +
           ", prefetch depth " +
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
    os << "<circle class='"
       << (isChosen ? "chosen"
           : fits   ? "fits"
                    : "over")
       << "' cx='" << x(c["peak_bytes"].get<double>()) << "' cy='"
       << y(c["step_seconds"].get<double>()) << "' r='" << (isChosen ? 6 : 3.5)
       << "' fill='"
       << (isChosen ? "#e15759"
           : fits   ? "#4e79a7"
                    : "#bab0ac")
       << "'><title>" << escape(describe(c)) << ": step "
       << timeText(c["step_seconds"].get<double>()) << ", peak "
       << bytesText(c["peak_bytes"].get<double>())
       << (fits ? "" : " (over the budget)") << "</title></circle>\n";
  }
  os << "</svg>\n";
  int64_t fit = 0, over = 0, failed = 0;
  for (const json &c : list)
    (c["ok"].get<bool>()
         ? (c["peak_bytes"].get<double>() <= budget ? fit : over)
         : failed)++;
  os << "<p>" << list.size() << " plans simulated: " << fit
     << " fit the budget, " << over << " do not, " << failed
     << " failed to build.";
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
  std::stable_sort(fitting.begin(), fitting.end(),
                   [](const json *a, const json *b) {
                     return (*a)["step_seconds"].get<double>() <
                            (*b)["step_seconds"].get<double>();
                   });
  os << "<table class='candidate-table'><tr><th>step</th><th>peak</th><th>"
        "choices</th><th></th></tr>\n";
  for (size_t k = 0; k < std::min<size_t>(fitting.size(), 10); ++k)
    os << "<tr><td class='num'>"
       << timeText((*fitting[k])["step_seconds"].get<double>())
       << "</td><td class='num'>"
       << bytesText((*fitting[k])["peak_bytes"].get<double>()) << "</td><td>"
       << escape(describe(*fitting[k])) << "</td><td>"
       << ((*fitting[k])["chosen"].get<bool>() ? "chosen" : "")
       << "</td></tr>\n";
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
    os << "<tr><td colspan='3'>none: every unit makes the same "
          "choices</td></tr>\n";
  os << "</table>\n<hr><h2>" << escape(nameA) << "</h2>\n";
  planSections(os, a, sa, nullptr);
  os << "<hr><h2>" << escape(nameB) << "</h2>\n";
  planSections(os, b, sb, nullptr);
  os << "</body></html>\n";
  return writeFile(path, os.str());
}

} // namespace fsdp
