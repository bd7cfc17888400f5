//===- Inspect.cpp - Unit table, schedule, memory, Chrome trace -----------===//
#include "runtime/inspect/Inspect.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>

namespace fsdp {

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

bool isCollective(const std::string &op) {
  return op == "all_gather_start" || op == "reduce_scatter_start" ||
         op == "all_reduce";
}

std::string streamOf(const Instruction &in) {
  auto s = in.attrs.find("stream");
  if (s != in.attrs.end() && s->is_string())
    return s->get<std::string>();
  return isCollective(in.op) ? "comm" : "compute";
}

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
  os << "\n";
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
    bool comm = isCollective(in.op) || in.op == "wait";
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
    char line[256];
    std::snprintf(line, sizeof line, "%-12s %10s %10s  %s\n",
                  in.op == "wait" ? "compute" : streamOf(in).c_str(),
                  us(in.predictedStart).c_str(), us(in.predictedEnd).c_str(),
                  what.c_str());
    os << line;
  }
  flush();
}

void printMemory(const Plan &plan, std::ostream &os) {
  int64_t params = 0, optimizer = 0, constants = 0;
  bool adam = plan.train.optimizer == "adamw";
  for (size_t s = 0; s < plan.slotCount(); ++s) {
    params += storedBytes(plan, s);
    if (plan.slotTrainable(s))
      optimizer += storedBytes(plan, s) * (adam ? 2 : 1);
  }
  for (const ConstantInfo &c : plan.constants) {
    int64_t n = 1;
    for (int64_t d : c.shape)
      n *= d;
    constants += n * dtypeSize(c.dtype);
  }
  int64_t peak = plan.arenaBytes + params + optimizer + constants;
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
  os << "peak memory per rank " << mib((double)peak) << ":\n"
     << "  activations and buffers (arena) " << mib((double)plan.arenaBytes)
     << "\n  parameters (" << (plan.flats.empty() ? "whole" : "shards") << ") "
     << mib((double)params) << "\n  optimizer state " << mib((double)optimizer)
     << "\n  constants " << mib((double)constants) << "\n";
}

Status writeTrace(const Plan &plan, const std::string &path, int64_t ranks) {
  using nlohmann::json;
  json events = json::array();
  std::map<std::string, int> tids{{"compute", 0},
                                  {"all_gather", 1},
                                  {"reduce_scatter", 2},
                                  {"all_reduce", 3}};
  ranks = std::max<int64_t>(1, std::min(ranks, plan.worldSize));
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
    for (const Instruction &in : plan.program) {
      if (in.predictedStart < 0 || in.op == "wait" || in.op == "free")
        continue;
      std::string stream = isCollective(in.op) ? streamOf(in) : "compute";
      if (!tids.count(stream))
        tids[stream] = (int)tids.size();
      json ev = {{"name", in.op},
                 {"ph", "X"},
                 {"pid", r},
                 {"tid", tids[stream]},
                 {"ts", in.predictedStart * 1e6},
                 {"dur", (in.predictedEnd - in.predictedStart) * 1e6}};
      if (isCollective(in.op))
        ev["args"] = {{"bytes", std::max(in.in[0].bytes(), in.out[0].bytes())},
                      {"dtype", dtypeName(in.in[0].dtype)},
                      {"group", attrText(in, "group").empty()
                                    ? std::string("world")
                                    : attrText(in, "group")},
                      {"group_size", attrText(in, "group_size")},
                      {"unit", attrText(in, "unit")}};
      events.push_back(std::move(ev));
    }
    if (plan.predicted.contains("memory") &&
        plan.predicted["memory"].is_array())
      for (const json &point : plan.predicted["memory"])
        if (point.is_array() && point.size() == 2)
          events.push_back({{"name", "arena bytes"},
                            {"ph", "C"},
                            {"pid", r},
                            {"ts", point[0].get<double>() * 1e6},
                            {"args", {{"bytes", point[1]}}}});
  }
  std::ofstream out(path);
  out << json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump()
      << "\n";
  if (!out)
    return Status::error(path + ": cannot write the trace");
  return Status::ok();
}

} // namespace fsdp
