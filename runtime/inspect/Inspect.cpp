//===- Inspect.cpp - Unit table, schedule, memory, Chrome trace -----------===//
#include "runtime/inspect/Inspect.h"
#include "runtime/support/CheckedJson.h"
#include "runtime/support/File.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>

namespace fsdp {

std::string laneOf(const Instruction &in) {
  if (isCollective(in.op) || in.op == "copy_start") {
    std::string s = in.attrString("stream", "");
    return s.empty() ? in.op.substr(0, in.op.find("_start")) : s;
  }
  return in.attrBool("on_host", false) ? "host" : "compute";
}

namespace {

std::string mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", bytes / (1 << 20));
  return buf;
}

std::string us(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", seconds * 1e6);
  return buf;
}

/// Whether an instruction is not the compute stream's (a lane of its own).
bool offCompute(const Instruction &in) { return laneOf(in) != "compute"; }

std::string attrText(const Instruction &in, const char *key) {
  auto a = in.attrs.find(key);
  if (a == in.attrs.end())
    return "";
  return a->is_string() ? a->get<std::string>() : a->dump();
}

int64_t storedBytes(const Plan &plan, size_t slot) {
  return plan.slotNumel(slot) * 4;
}

} // namespace

void printUnits(const Plan &plan, std::ostream &os) {
  char line[256];
  std::snprintf(line, sizeof line, "%-16s %6s %12s %14s %14s  %s\n", "unit",
                "params", "elements", "bytes full", "bytes/rank", "reshard");
  os << line;
  for (const UnitInfo &u : plan.units) {
    int64_t elements = 0, perRank = 0;
    std::map<int64_t, bool> flats;
    for (int64_t p : u.params) {
      elements += plan.params[p].numel();
      if (plan.params[p].flat >= 0)
        flats[plan.params[p].flat] = true;
      else
        perRank += plan.params[p].numel() * 4;
    }
    for (auto &[f, _] : flats)
      perRank += plan.flats[f].shardNumel * 4;
    std::string reshard = plan.flats.empty() ? "-"
                          : u.reshardTo > 0
                              ? "to " + std::to_string(u.reshardTo)
                          : u.reshardAfterForward ? "true"
                                                  : "false";
    std::snprintf(line, sizeof line, "%-16s %6zu %12lld %14lld %14lld  %s\n",
                  u.name.c_str(), u.params.size(), (long long)elements,
                  (long long)elements * 4, (long long)perRank, reshard.c_str());
    os << line;
  }
  os << "strategy " << plan.strategy << " over " << plan.worldSize << " ranks";
  if (plan.replicateGroups > 1)
    os << " (" << plan.replicateGroups << " replica groups)";
  os << "; gathered in " << plan.paramDtype << ", reduced in "
     << plan.reduceDtype << ", computed in " << plan.computeDtype << "\n";
}

void printSchedule(const Plan &plan, std::ostream &os) {
  if (plan.predicted.is_null()) {
    os << "no predicted schedule (compile with fsdp-opt --device=...)\n";
    return;
  }
  os << "stream          start us     end us  op\n";
  // Compute between communication events is summarised per run.
  int64_t run = 0;
  double runStart = -1, runEnd = -1;
  auto flush = [&] {
    if (run == 0)
      return;
    char line[160];
    std::snprintf(line, sizeof line, "%-12s %10s %10s  %lld compute ops\n",
                  "compute", us(runStart).c_str(), us(runEnd).c_str(),
                  (long long)run);
    os << line;
    run = 0;
  };
  for (const Instruction &in : plan.program) {
    if (in.predictedStart < 0)
      continue;
    bool comm = offCompute(in) || in.op == "wait";
    if (!comm) {
      if (run++ == 0)
        runStart = in.predictedStart;
      runEnd = in.predictedEnd;
      continue;
    }
    flush();
    std::string what = in.op;
    if (!attrText(in, "unit").empty())
      what += " " + attrText(in, "unit");
    if (isCollective(in.op))
      what += " " + mib((double)std::max(in.in[0].bytes(), in.out[0].bytes())) +
              " over " + attrText(in, "group_size");
    else if (in.op == "copy_start")
      what +=
          " " + mib((double)in.in[0].bytes()) + " to the " + attrText(in, "to");
    char line[256];
    std::snprintf(line, sizeof line, "%-12s %10s %10s  %s\n",
                  in.op == "wait" ? "compute" : laneOf(in).c_str(),
                  us(in.predictedStart).c_str(), us(in.predictedEnd).c_str(),
                  what.c_str());
    os << line;
  }
  flush();
}

MemoryBreakdown memoryBreakdown(const Plan &plan) {
  MemoryBreakdown m;
  bool adam = plan.train.optimizer == "adamw";
  for (size_t s = 0; s < plan.slotCount(); ++s) {
    int64_t bytes = storedBytes(plan, s) *
                    (1 + (plan.slotTrainable(s) ? (adam ? 2 : 1) : 0));
    const FlatInfo *flat =
        s >= plan.params.size() ? &plan.flats[s - plan.params.size()] : nullptr;
    if (flat && !flat->offload.empty()) { // in host memory
      m.host += bytes;
      if (flat->hasDeviceCopy())
        m.deviceCopies += flat->shardNumel * dtypeSize(flat->deviceCopy);
      continue;
    }
    m.params += storedBytes(plan, s);
    if (plan.slotTrainable(s))
      m.optimizer += storedBytes(plan, s) * (adam ? 2 : 1);
  }
  m.host += plan.hostArenaBytes;
  m.hostArena = plan.hostArenaBytes;
  for (const ConstantInfo &c : plan.constants) {
    int64_t n = 1;
    for (int64_t d : c.shape)
      n *= d;
    m.constants += n * dtypeSize(c.dtype);
  }
  m.arena = plan.arenaBytes;
  m.sharded = !plan.flats.empty();
  if (plan.predicted.is_object()) {
    m.scratch = plan.predicted.value("scratch_bytes", (int64_t)0);
    m.liveDuring = plan.predicted.value("live_peak_bytes", (int64_t)0);
  }
  return m;
}

void printMemory(const Plan &plan, std::ostream &os) {
  if (!plan.predicted.is_null()) {
    const nlohmann::json &p = plan.predicted;
    auto num = [&](const char *k) {
      return p.contains(k) && p[k].is_number() ? p[k].get<double>() : 0.0;
    };
    os << "predicted on " << p.value("device", std::string("?")) << ": step "
       << us(num("step_seconds")) << " us (compute "
       << us(num("compute_seconds")) << ", communication "
       << us(num("comm_seconds")) << ", exposed "
       << us(num("exposed_comm_seconds")) << ")\n";
  }
  MemoryBreakdown m = memoryBreakdown(plan);
  os << "peak memory per rank " << mib((double)m.total()) << " (" << m.total()
     << " bytes):\n"
     << "  activations and buffers (arena) " << mib((double)m.arena)
     << "\n  parameters (" << (m.sharded ? "shards" : "whole") << ") "
     << mib((double)m.params) << "\n  optimizer state "
     << mib((double)m.optimizer) << "\n  constants " << mib((double)m.constants)
     << "\n  kernel scratch " << mib((double)m.scratch) << "\n";
  if (m.host > 0)
    os << "  device copies of offloaded shards " << mib((double)m.deviceCopies)
       << "\nin host memory (offload) " << mib((double)m.host)
       << ": offloaded shards, their optimizer state and the host arena "
       << mib((double)plan.hostArenaBytes) << "\n";
  // The arena in use: held after an instruction; live during one; planned.
  int64_t held = 0;
  if (plan.predicted.is_object() && plan.predicted.contains("memory") &&
      plan.predicted["memory"].is_array())
    for (const nlohmann::json &pt : plan.predicted["memory"])
      if (pt.is_array() && pt.size() == 2 && pt[1].is_number_integer())
        held = std::max(held, pt[1].get<int64_t>());
  if (held > 0)
    os << "  the arena holds at most " << mib((double)held) << " after an "
       << "instruction, " << mib((double)m.liveDuring)
       << " during one (its inputs and outputs live together); packing the "
          "buffers into one arena takes "
       << mib((double)m.arena) << "\n";
}

namespace {

using nlohmann::json;

/// [begin, end] of instruction `i` on a rank, or false.
using TimesFn =
    std::function<bool(int64_t rank, size_t i, double &begin, double &end)>;

json traceEvents(const Plan &plan, int64_t ranks, const TimesFn &times,
                 const json *memory, const json *byCategory = nullptr) {
  json events = json::array();
  // A collective's request index (what its wait names) -> (thread, begin)
  // on this rank.
  std::map<int64_t, std::pair<int, double>> collectiveAt;
  std::map<std::string, int> tids{{"compute", 0},
                                  {"all_gather", 1},
                                  {"reduce_scatter", 2},
                                  {"all_reduce", 3}};
  for (int64_t r = 0; r < ranks; ++r) {
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", r},
                      {"args", {{"name", "rank " + std::to_string(r)}}}});
    for (auto &[name, tid] : tids)
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", r},
                        {"tid", tid},
                        {"args", {{"name", name}}}});
    for (size_t i = 0; i < plan.program.size(); ++i) {
      const Instruction &in = plan.program[i];
      double begin, end;
      if (in.op == "wait" || in.op == "free" || !times(r, i, begin, end))
        continue;
      std::string stream = laneOf(in);
      if (!tids.count(stream))
        tids[stream] = (int)tids.size();
      // A collective's slice names its unit ("all_gather_start h.0").
      std::string unit = attrText(in, "unit");
      std::string name = in.op;
      if (isCollective(in.op) && !unit.empty())
        name += " " + unit;
      json ev = {{"name", name},
                 {"ph", "X"},
                 {"pid", r},
                 {"tid", tids[stream]},
                 {"ts", begin * 1e6},
                 {"dur", (end - begin) * 1e6},
                 {"args", {{"instruction", i}}}};
      if (isCollective(in.op))
        ev["args"] = {{"instruction", i},
                      {"bytes", std::max(in.in[0].bytes(), in.out[0].bytes())},
                      {"dtype", dtypeName(in.in[0].dtype)},
                      {"group", attrText(in, "group").empty()
                                    ? std::string("world")
                                    : attrText(in, "group")},
                      {"group_size", attrText(in, "group_size")},
                      {"unit", attrText(in, "unit")}};
      if (in.op == "copy_start")
        ev["args"] = {{"instruction", i},
                      {"bytes", in.in[0].bytes()},
                      {"to", attrText(in, "to")}};
      events.push_back(std::move(ev));
      if (isCollective(in.op) || in.op == "copy_start")
        collectiveAt[in.index] = {tids[stream], begin};
    }
    // Flow arrows from each collective's start to the wait that needs it.
    for (size_t i = 0; i < plan.program.size(); ++i) {
      const Instruction &w = plan.program[i];
      double begin, end;
      if (w.op != "wait" || w.start < 0 || !times(r, i, begin, end))
        continue;
      auto it = collectiveAt.find(w.start);
      if (it == collectiveAt.end())
        continue;
      int64_t id = r * (int64_t)plan.program.size() + (int64_t)i;
      events.push_back({{"name", "wait"},
                        {"cat", "collective"},
                        {"ph", "s"},
                        {"id", id},
                        {"pid", r},
                        {"tid", it->second.first},
                        {"ts", it->second.second * 1e6}});
      events.push_back({{"name", "wait"},
                        {"cat", "collective"},
                        {"ph", "f"},
                        {"bp", "e"},
                        {"id", id},
                        {"pid", r},
                        {"tid", 0},
                        {"ts", begin * 1e6}});
    }
    collectiveAt.clear();
    // The arena by category (fsdp-plan-memory's), beside the total.
    if (byCategory && byCategory->is_object() && memory && memory->is_array())
      for (size_t k = 0; k < memory->size(); ++k) {
        const json &point = (*memory)[k];
        if (!point.is_array() || point.size() != 2 || !point[0].is_number())
          continue;
        json args = json::object();
        for (auto &[cat, pts] : byCategory->items())
          if (pts.is_array() && k < pts.size())
            args[cat] = pts[k];
        events.push_back({{"name", "arena by category"},
                          {"ph", "C"},
                          {"pid", r},
                          {"ts", point[0].get<double>() * 1e6},
                          {"args", args}});
      }
    if (memory && memory->is_array())
      for (const json &point : *memory)
        if (point.is_array() && point.size() == 2)
          events.push_back({{"name", "arena bytes"},
                            {"ph", "C"},
                            {"pid", r},
                            {"ts", point[0].get<double>() * 1e6},
                            {"args", {{"bytes", point[1]}}}});
  }
  return events;
}

/// Whole or not at all, and an error when any write fails, the last one
/// at close included (a full disk).
Status writeJson(const std::string &path, const json &doc) {
  return writeFileAtomically(path, doc.dump() + "\n");
}

} // namespace

Status writeTrace(const Plan &plan, const std::string &path, int64_t ranks) {
  ranks = std::max<int64_t>(1, std::min(ranks, plan.worldSize));
  const json *memory =
      plan.predicted.contains("memory") ? &plan.predicted["memory"] : nullptr;
  json events = traceEvents(
      plan, ranks,
      [&](int64_t, size_t i, double &b, double &e) {
        b = plan.program[i].predictedStart;
        e = plan.program[i].predictedEnd;
        return b >= 0;
      },
      memory,
      plan.predicted.contains("memory_by_category")
          ? &plan.predicted["memory_by_category"]
          : nullptr);
  json other = plan.predicted;
  other.erase("memory");
  other.erase("memory_by_category");
  return writeJson(path, {{"traceEvents", events},
                          {"displayTimeUnit", "ms"},
                          {"otherData", other}});
}

std::vector<double> instructionDurations(const std::vector<double> &timeline) {
  std::vector<double> d(timeline.size() / 2);
  for (size_t i = 0; i < d.size(); ++i)
    d[i] = timeline[2 * i + 1] - timeline[2 * i];
  return d;
}

std::vector<double>
steadyMedians(const std::vector<std::vector<double>> &stepDurations) {
  if (stepDurations.empty())
    return {};
  size_t first = stepDurations.size() > 1 ? 1 : 0;
  std::vector<double> medians(stepDurations.front().size()), xs;
  for (size_t i = 0; i < medians.size(); ++i) {
    xs.clear();
    for (size_t s = first; s < stepDurations.size(); ++s)
      if (i < stepDurations[s].size())
        xs.push_back(stepDurations[s][i]);
    std::nth_element(xs.begin(), xs.begin() + xs.size() / 2, xs.end());
    medians[i] = xs.empty() ? 0.0 : xs[xs.size() / 2];
  }
  return medians;
}

Status writeMeasuredTrace(const Plan &plan, const std::string &path,
                          const std::vector<std::vector<double>> &timelines,
                          const json &measured,
                          const std::vector<std::vector<double>> *medians) {
  // A collective ends when its wait does.
  std::map<int64_t, size_t> waitOf;
  for (size_t i = 0; i < plan.program.size(); ++i)
    if (plan.program[i].op == "wait")
      waitOf[plan.program[i].start] = i;
  json events = traceEvents(
      plan, (int64_t)timelines.size(),
      [&](int64_t r, size_t i, double &b, double &e) {
        const std::vector<double> &t = timelines[r];
        int64_t index = plan.program[i].index;
        if (2 * index + 1 >= (int64_t)t.size())
          return false;
        b = t[2 * index];
        e = t[2 * index + 1];
        auto w = waitOf.find(index);
        if (isCollective(plan.program[i].op) && w != waitOf.end())
          e = t[2 * plan.program[w->second].index + 1];
        return true;
      },
      nullptr);
  if (medians)
    for (json &ev : events) {
      if (ev.value("ph", "") != "X")
        continue;
      size_t r = ev["pid"].get<size_t>(),
             i = ev["args"]["instruction"].get<size_t>();
      int64_t index = plan.program[i].index;
      if (r < medians->size() && index >= 0 &&
          index < (int64_t)(*medians)[r].size() &&
          !isCollective(plan.program[i].op))
        ev["args"]["median_dur"] = (*medians)[r][index] * 1e6;
    }
  // The plan it measured, so that a comparison with another plan is refused.
  json other = measured;
  other["plan_digest"] = plan.digest;
  return writeJson(path, {{"traceEvents", events},
                          {"displayTimeUnit", "ms"},
                          {"otherData", other}});
}

Status loadMeasuredTrace(const Plan &plan, const std::string &path, json &doc) {
  std::string text;
  FSDP_RETURN_IF_ERROR(readFile(path, text, "the measured trace"));
  return parseMeasuredTrace(plan, text, path, doc);
}

Status parseMeasuredTrace(const Plan &plan, const std::string &text,
                          const std::string &path, json &doc) {
  doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("traceEvents") ||
      !doc["traceEvents"].is_array() || !doc.contains("otherData") ||
      !doc["otherData"].is_object())
    return Status::error(path + ": not a trace written by fsdp-run");
  // Every field the comparison and the fit read, typed and plausible,
  // before any is read (a string `dur` aborted fsdp-inspect; a negative or
  // 1e300 one made a confident table).
  JsonReader r;
  auto plausible = [&](const json &o, const char *key, const std::string &at,
                       double most) {
    double v = 0;
    if (!r.number(o, key, at, v, false))
      return false;
    if (!std::isfinite(v) || v < 0 || v > most)
      return r.fail(at + "." + key, "is not a plausible value");
    return true;
  };
  const json &other = doc["otherData"];
  std::string measuredPlan;
  if (!r.string(other, "plan_digest", path + ": otherData", measuredPlan))
    return Status::error(path + ": the trace names no plan (written by an "
                                "older fsdp-run): measure again");
  if (measuredPlan != plan.digest)
    return Status::error(path + ": the trace measured another plan (digest " +
                         measuredPlan + ", this plan's " + plan.digest + ")");
  if (!plausible(other, "step_seconds", path + ": otherData", 1e7) ||
      !plausible(other, "step_p10_seconds", path + ": otherData", 1e7) ||
      !plausible(other, "step_p90_seconds", path + ": otherData", 1e7) ||
      !plausible(other, "steady_steps", path + ": otherData", 1e12) ||
      !plausible(other, "peak_bytes", path + ": otherData", 1e15))
    return r.status;
  size_t k = 0;
  for (const json &e : doc["traceEvents"]) {
    std::string at = path + ": traceEvents[" + std::to_string(k++) + "]";
    std::string ph;
    if (!r.string(e, "ph", at, ph, false))
      return r.status;
    if (ph != "X")
      continue;
    int64_t pid = 0, instruction = 0;
    if (!r.integer(e, "pid", at, pid) || !plausible(e, "dur", at, 1e13) ||
        !plausible(e, "ts", at, 1e13))
      return r.status;
    if (pid < 0)
      return Status::error(at + ".pid: a rank is not negative");
    const json *args = r.field(e, "args", at, false);
    if (!args)
      continue;
    if (!r.integer(*args, "instruction", at + ".args", instruction, false) ||
        !plausible(*args, "median_dur", at + ".args", 1e13))
      return r.status;
    if (instruction < 0)
      return Status::error(at + ".args.instruction: not an instruction");
  }
  return Status::ok();
}

Status compareMeasured(const Plan &plan, const std::string &measuredPath,
                       std::ostream &os) {
  json doc;
  FSDP_RETURN_IF_ERROR(loadMeasuredTrace(plan, measuredPath, doc));
  return compareTrace(plan, doc, os);
}

Status compareTrace(const Plan &plan, const json &doc, std::ostream &os) {
  if (plan.predicted.is_null())
    return Status::error("the plan has no prediction to compare");
  const json &m = doc["otherData"];
  auto num = [](const json &o, const char *k) {
    return o.contains(k) && o[k].is_number() ? o[k].get<double>() : 0.0;
  };
  double pStep = num(plan.predicted, "step_seconds"),
         mStep = num(m, "step_seconds");
  double pPeak = num(plan.predicted, "peak_bytes"),
         mPeak = num(m, "peak_bytes");
  auto err = [](double p, double q) {
    return q > 0 ? 100.0 * (p - q) / q : 0.0;
  };
  char line[256];
  std::snprintf(line, sizeof line,
                "step time: predicted %s us, measured %s us (%+.1f%%)\n",
                us(pStep).c_str(), us(mStep).c_str(), err(pStep, mStep));
  os << line;
  // The measured steps' own spread: an error inside it is the machine's
  // as much as the prediction's.
  if (m.contains("step_p10_seconds") && m.contains("step_p90_seconds") &&
      mStep > 0) {
    double lo = num(m, "step_p10_seconds"), hi = num(m, "step_p90_seconds");
    std::snprintf(line, sizeof line,
                  "measured steps: 10th to 90th percentile %s to %s us "
                  "(%+.1f%% to %+.1f%% of the median) over %lld steps\n",
                  us(lo).c_str(), us(hi).c_str(), err(lo, mStep),
                  err(hi, mStep), (long long)num(m, "steady_steps"));
    os << line;
  }
  std::snprintf(line, sizeof line,
                "peak memory: predicted %s, measured %s (%+.1f%%)\n",
                mib(pPeak).c_str(), mib(mPeak).c_str(), err(pPeak, mPeak));
  os << line;
  // Rank 0's instructions, the longest measured first.
  std::vector<std::pair<double, size_t>> measured;
  for (const json &e : doc["traceEvents"])
    if (e.value("ph", "") == "X" && e.value("pid", -1) == 0 &&
        e.contains("args") && e["args"].contains("instruction"))
      measured.push_back(
          {e.value("dur", 0.0) / 1e6, e["args"]["instruction"].get<size_t>()});
  std::sort(measured.rbegin(), measured.rend());
  os << "instruction          measured us  predicted us\n";
  for (size_t k = 0; k < std::min<size_t>(measured.size(), 10); ++k) {
    auto [dur, i] = measured[k];
    if (i >= plan.program.size())
      continue;
    const Instruction &ins = plan.program[i];
    std::snprintf(line, sizeof line, "%5zu %-14s %11s %13s\n", i,
                  ins.op.c_str(), us(dur).c_str(),
                  us(ins.predictedEnd - ins.predictedStart).c_str());
    os << line;
  }
  return Status::ok();
}

} // namespace fsdp
