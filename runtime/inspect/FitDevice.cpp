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
//===----------------------------------------------------------------------===//
#include "runtime/inspect/Inspect.h"

#include <cstdio>
#include <fstream>
#include <map>

namespace fsdp {

using nlohmann::json;

Status fitDevice(const Plan &plan, const std::string &measuredPath,
                 const std::string &basePath, const std::string &outPath,
                 std::ostream &os) {
  json doc;
  FSDP_RETURN_IF_ERROR(loadMeasuredTrace(measuredPath, doc));
  std::ifstream in(basePath);
  json device = json::parse(in, nullptr, false);
  if (!in || device.is_discarded() || !device.is_object())
    return Status::error(basePath + ": not a device JSON object");

  // Compute instructions only: a collective's span and a wait's time are
  // the network's, and views take no time.
  std::map<std::string, std::pair<double, double>> sums; // measured, predicted
  std::map<std::string, int64_t> counts;
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
    auto &[m, p] = sums[ins.op];
    m += e.value("dur", 0.0) / 1e6;
    p += ins.predictedEnd - ins.predictedStart;
    ++counts[ins.op];
  }
  if (sums.empty())
    return Status::error(measuredPath +
                         ": no compute instruction with a prediction");
  json scales = device.value("op_scale", json::object());
  char line[160];
  os << "op                     count  measured us  predicted us  op_scale\n";
  for (const auto &[op, mp] : sums) {
    // The scale multiplies the op's whole predicted time, so a plan
    // simulated on the fitted device predicts each op's measured total.
    auto [m, p] = mp;
    if (p <= 0 || m <= 0)
      continue;
    double old = scales.value(op, 1.0);
    scales[op] = old * m / p;
    std::snprintf(line, sizeof line, "%-22s %5lld %12.1f %13.1f %9.3f\n",
                  op.c_str(), (long long)counts[op], mp.first * 1e6,
                  mp.second * 1e6, scales[op].get<double>());
    os << line;
  }
  device["op_scale"] = scales;
  std::string name = device.value("name", "device");
  if (name.find("(fitted)") == std::string::npos)
    device["name"] = name + " (fitted)";
  std::ofstream out(outPath);
  out << device.dump(1) << "\n";
  if (!out)
    return Status::error(outPath + ": cannot write the fitted device");
  return Status::ok();
}

} // namespace fsdp
