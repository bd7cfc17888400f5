//===- FitDevice.cpp - A device model fitted to a measured run ------------===//
//
// The roofline prices an op by its flops and bytes; what a kernel really
// takes also depends on what it computes (a tanh or an exp costs tens of
// flops' worth per element on a CPU) and on how well it is written. A
// measured run (fsdp-run --trace) gives, per instruction, both the
// prediction and the time: per op name, the ratio of their sums becomes a
// factor on that op's predicted time (`op_scale` in the device JSON). Fit on
// one run, predict others: bench/prediction.py fits on a different model
// than the ones it predicts.
//
// Ranks that share a CPU node run on fewer threads each, and ops gain from
// threads unevenly (a GEMM nearly doubles on two, a memory-bound add does
// not), so a run whose ranks had t threads other than the device's own
// fits `op_scale_threads[t]` instead: factors that include t threads'
// speed. Times are each instruction's median over the steady steps when
// the trace has them (`median_dur`), its last step's otherwise, and come
// from the slowest rank, which sets the step.
//
//===----------------------------------------------------------------------===//
#include "runtime/inspect/Inspect.h"
#include "runtime/support/File.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

namespace fsdp {

using nlohmann::json;

Status fitDevice(const Plan &plan, const std::string &measuredPath,
                 const std::string &basePath, const std::string &outPath,
                 std::ostream &os) {
  json doc;
  FSDP_RETURN_IF_ERROR(loadMeasuredTrace(plan, measuredPath, doc));
  std::string text;
  FSDP_RETURN_IF_ERROR(readFile(basePath, text, "the device description"));
  json device = json::parse(text, nullptr, false);
  if (device.is_discarded() || !device.is_object())
    return Status::error(basePath + ": not a device JSON object");
  // The fields read below, typed first (a string where a number belongs
  // threw out of nlohmann and aborted).
  auto numbers = [](const json &o) {
    if (!o.is_object())
      return false;
    for (const auto &[k, v] : o.items())
      if (!v.is_number())
        return false;
    return true;
  };
  bool typed =
      (!device.contains("cores") || device["cores"].is_number()) &&
      (!device.contains("threads") || device["threads"].is_number_integer()) &&
      (!device.contains("name") || device["name"].is_string()) &&
      (!device.contains("op_scale") || numbers(device["op_scale"]));
  if (typed && device.contains("op_scale_threads")) {
    typed = device["op_scale_threads"].is_object();
    for (const auto &[k, v] : device["op_scale_threads"].items())
      typed = typed && numbers(v);
  }
  if (!typed)
    return Status::error(
        basePath + ": cores, threads and name must be a number, an integer "
                   "and a string; op_scale {op: number}; op_scale_threads "
                   "{threads: {op: number}}");

  FSDP_RETURN_IF_ERROR(fitDeviceJson(plan, doc, measuredPath, device, os));
  return writeFileAtomically(outPath, device.dump(1) + "\n")
      .withContext("writing the fitted device");
}

Status fitDeviceJson(const Plan &plan, const json &doc,
                     const std::string &measuredPath, json &device,
                     std::ostream &os) {
  // Compute instructions only: a collective's span and a wait's time are
  // the network's, and views take no time.
  struct Timed {
    int64_t rank;
    const Instruction *ins;
    double seconds;
  };
  std::vector<Timed> timed;
  std::map<int64_t, double> perRank; // compute seconds
  for (const json &e : doc["traceEvents"]) {
    if (e.value("ph", "") != "X" || !e.contains("args") ||
        !e["args"].contains("instruction"))
      continue;
    size_t i = e["args"]["instruction"].get<size_t>();
    if (i >= plan.program.size())
      return Status::error(measuredPath + ": instruction " + std::to_string(i) +
                           " is not in the plan");
    const Instruction &ins = plan.program[i];
    if (ins.predictedEnd <= ins.predictedStart || ins.op == "wait" ||
        ins.op.find("_start") != std::string::npos || ins.op == "all_reduce")
      continue;
    Timed t{e.value("pid", int64_t(0)), &ins,
            e["args"].value("median_dur", e.value("dur", 0.0)) / 1e6};
    perRank[t.rank] += t.seconds;
    timed.push_back(t);
  }
  if (timed.empty())
    return Status::error(measuredPath +
                         ": no compute instruction with a prediction");
  // With many ranks, the slowest one's: every collective waits for it, so
  // it sets the step.
  auto slowest = std::max_element(
      perRank.begin(), perRank.end(),
      [](const auto &a, const auto &b) { return a.second < b.second; });
  std::map<std::string, std::pair<double, double>> sums; // measured, predicted
  std::map<std::string, int64_t> counts;
  for (const Timed &t : timed) {
    if (t.rank != slowest->first)
      continue;
    auto &[m, p] = sums[t.ins->op];
    m += t.seconds;
    p += t.ins->predictedEnd - t.ins->predictedStart;
    ++counts[t.ins->op];
  }
  // How the plan priced ranks sharing the node (fsdp-simulate).
  int64_t threads = plan.predicted.value("threads_per_rank", int64_t(0));
  double threadFactor = plan.predicted.value("thread_factor", 1.0);
  json scales = device.value("op_scale", json::object());
  json byThreads = device.value("op_scale_threads", json::object());
  std::string key = std::to_string(threads);
  // As the simulator reads them: op_scale_threads[t] where the device has
  // one for t (or t is not its own thread count), op_scale otherwise.
  bool perThreads = device.value("cores", 0.0) > 0 && threads > 0 &&
                    (threads != device.value("threads", int64_t(1)) ||
                     byThreads.contains(key));
  json fitted = perThreads ? byThreads.value(key, json::object()) : scales;
  char line[160];
  os << "op                     count  measured us  predicted us  op_scale\n";
  for (const auto &[op, mp] : sums) {
    // The scale multiplies the op's whole predicted time, so a plan
    // simulated on the fitted device predicts each op's measured total.
    auto [m, p] = mp;
    if (p <= 0 || m <= 0)
      continue;
    // The factor the plan was simulated with: the per-thread one where
    // fitted, else op_scale times the thread factor.
    double old = fitted.contains(op) ? fitted[op].get<double>()
                                     : scales.value(op, 1.0) *
                                           (perThreads ? threadFactor : 1.0);
    fitted[op] = old * m / p;
    std::snprintf(line, sizeof line, "%-22s %5lld %12.1f %13.1f %9.3f\n",
                  op.c_str(), (long long)counts[op], mp.first * 1e6,
                  mp.second * 1e6, fitted[op].get<double>());
    os << line;
  }
  if (perThreads) {
    byThreads[key] = fitted;
    device["op_scale_threads"] = byThreads;
    os << "(factors for ranks on " << key << " thread"
       << (threads == 1 ? "" : "s") << ": op_scale_threads." << key << ")\n";
  } else {
    device["op_scale"] = fitted;
  }
  std::string name = device.value("name", "device");
  if (name.find("(fitted)") == std::string::npos)
    device["name"] = name + " (fitted)";
  return Status::ok();
}

} // namespace fsdp
