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
#include "common/CostRows.h"
#include "runtime/inspect/Inspect.h"
#include "runtime/support/File.h"

#include <algorithm>
#include <cmath>
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
  // The fit reads the device's own figures (bandwidths, cores, threads)
  // from the file: one that names a base leaves them to the built-in, and a
  // fit on the defaults would be wrong with no error.
  if (device.contains("base"))
    return Status::error(
        basePath + ": names a base device; --fit-device needs a device file "
                   "that gives its figures itself (fsdp-run --calibrate "
                   "writes one)");
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

namespace {

/// One compute instruction of a run: its op, what the plan predicted, what
/// it took.
struct Sample {
  std::string op;
  double predicted, measured;
  int64_t flops, bytes; // as fsdp-simulate priced the instruction
  int64_t rows;         // common/CostRows.h
  /// Its key with ".serial" where it ran on one thread (serialOnCpu), the
  /// variant it is fitted under too; empty otherwise.
  std::string serialKey;
};

/// The compute instructions of the slowest rank of one measured run (every
/// collective waits for it, so it sets the step). `linear` (the
/// calibration's fit): an op on bf16 or f16 tensors is its own key
/// ("matmul.bf16"), each instruction must carry its cost, and takes its
/// share of the measured median step.
Status samplesOf(const Plan &plan, const json &doc,
                 const std::string &measuredPath, bool linear,
                 std::vector<Sample> &out) {
  // Compute instructions only: a collective's span and a wait's time are
  // the network's, and views take no time.
  struct Timed {
    int64_t rank;
    const Instruction *ins;
    double seconds;
  };
  std::vector<Timed> timed;
  std::map<int64_t, double> perRank;    // compute seconds
  std::map<int64_t, double> everything; // every instruction's, waits too
  for (const json &e : doc["traceEvents"]) {
    if (e.value("ph", "") != "X" || !e.contains("args") ||
        !e["args"].contains("instruction"))
      continue;
    size_t i = e["args"]["instruction"].get<size_t>();
    if (i >= plan.program.size())
      return Status::error(measuredPath + ": instruction " + std::to_string(i) +
                           " is not in the plan");
    const Instruction &ins = plan.program[i];
    everything[e.value("pid", int64_t(0))] +=
        e["args"].value("median_dur", e.value("dur", 0.0)) / 1e6;
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
  auto slowest = std::max_element(
      perRank.begin(), perRank.end(),
      [](const auto &a, const auto &b) { return a.second < b.second; });
  // A step takes longer than its instructions' medians add up to (each
  // instruction's jitter, the executor's dispatch between them): fitting
  // the calibration, each instruction takes its share of the measured
  // median step.
  double share = 1.0;
  if (linear && doc.contains("otherData") && doc["otherData"].is_object()) {
    double step = doc["otherData"].value("step_seconds", 0.0);
    double sum = everything[slowest->first];
    if (step > 0 && sum > 0)
      share = std::clamp(step / sum, 1.0, 1.5);
  }
  for (const Timed &t : timed) {
    if (t.rank != slowest->first)
      continue;
    // Keyed as the simulator looks them up: "op.bf16" for an op on narrow
    // tensors (its result's, else its first operand's, element type; its
    // first operand's where that is narrow and the result is not).
    const std::vector<TensorRef> &tensors =
        t.ins->out.empty() ? t.ins->in : t.ins->out;
    DType type = tensors.empty() ? DType::F32 : tensors.front().dtype;
    auto narrow = [](DType d) { return d == DType::BF16 || d == DType::F16; };
    if (!narrow(type) && !t.ins->in.empty() && narrow(t.ins->in[0].dtype))
      type = t.ins->in[0].dtype;
    std::string key = t.ins->op;
    // A binary op on the CPU kernel's strided loop apart (CostRows.h).
    if (linear && t.ins->in.size() == 2 && t.ins->out.size() == 1) {
      const TensorRef &a = t.ins->in[0], &b = t.ins->in[1], &y = t.ins->out[0];
      bool oneType = a.dtype == y.dtype && b.dtype == y.dtype &&
                     (y.dtype == DType::F32 || narrow(y.dtype));
      std::string_view variant =
          costVariant(t.ins->op, a.shape.data(), a.shape.size(), b.shape.data(),
                      b.shape.size(), y.shape.data(), y.shape.size(), oneType);
      if (!variant.empty())
        key += "." + std::string(variant);
    }
    // A loop too small to split over the threads apart (CostRows.h), unless
    // it is strided already.
    std::string serialKey;
    if (linear && key == t.ins->op) {
      int64_t largest = 0;
      for (const std::vector<TensorRef> *side : {&t.ins->in, &t.ins->out})
        for (const TensorRef &r : *side)
          largest = std::max(largest, r.numel());
      if (serialOnCpu(t.ins->op, largest))
        serialKey = key + ".serial";
    }
    if (linear && (type == DType::BF16 || type == DType::F16)) {
      std::string suffix = type == DType::BF16 ? ".bf16" : ".f16";
      key += suffix;
      if (!serialKey.empty())
        serialKey += suffix;
    }
    if (linear && (t.ins->costFlops < 0 || t.ins->costBytes < 0))
      return Status::error(measuredPath +
                           ": its plan records no cost (flops, bytes) for " +
                           t.ins->op + ": compile it again with this fsdp-opt");
    int64_t rows = 0;
    if (!t.ins->in.empty())
      rows = costRows(t.ins->op, t.ins->in[0].shape.data(),
                      t.ins->in[0].shape.size());
    out.push_back({key, t.ins->predictedEnd - t.ins->predictedStart,
                   t.seconds * share, t.ins->costFlops, t.ins->costBytes, rows,
                   serialKey});
  }
  return Status::ok();
}

/// Non-negative least squares of y on the columns of `x` (a few): every
/// subset of the columns is solved by its normal equations, and the
/// feasible solution (all coefficients at least 0) with the least squared
/// error wins; a subset of k columns needs 2k points, and holds the
/// columns of `required` (a mask). Returns false when none is feasible.
bool nonNegativeFit(const std::vector<std::vector<double>> &x,
                    const std::vector<double> &y, const std::vector<double> &w,
                    std::vector<double> &best, unsigned required = 0) {
  size_t n = y.size(), k = x.empty() ? 0 : x.front().size();
  // Columns scaled to unit size, so seconds, flops and bytes compare.
  std::vector<double> norm(k, 0.0);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < k; ++j)
      norm[j] = std::max(norm[j], std::abs(x[i][j]));
  double bestError = 1e300;
  bool found = false;
  for (unsigned mask = 1; mask < (1u << k); ++mask) {
    if ((mask & required) != required)
      continue;
    std::vector<size_t> cols;
    for (size_t j = 0; j < k; ++j)
      if (mask & (1u << j) && norm[j] > 0)
        cols.push_back(j);
    size_t m = cols.size();
    if (m == 0 || n < 2 * m)
      continue;
    // Normal equations A^T A b = A^T y, by Gaussian elimination.
    std::vector<std::vector<double>> a(m, std::vector<double>(m + 1, 0.0));
    for (size_t i = 0; i < n; ++i)
      for (size_t p = 0; p < m; ++p) {
        double xp = w[i] * x[i][cols[p]] / norm[cols[p]];
        for (size_t q = 0; q < m; ++q)
          a[p][q] += xp * x[i][cols[q]] / norm[cols[q]];
        a[p][m] += xp * y[i];
      }
    bool singular = false;
    for (size_t p = 0; p < m && !singular; ++p) {
      size_t pivot = p;
      for (size_t r = p + 1; r < m; ++r)
        if (std::abs(a[r][p]) > std::abs(a[pivot][p]))
          pivot = r;
      std::swap(a[p], a[pivot]);
      if (std::abs(a[p][p]) < 1e-12 * (1 + std::abs(a[p][m])))
        singular = true;
      for (size_t r = 0; r < m && !singular; ++r)
        if (r != p) {
          double f = a[r][p] / a[p][p];
          for (size_t c = p; c <= m; ++c)
            a[r][c] -= f * a[p][c];
        }
    }
    if (singular)
      continue;
    std::vector<double> b(k, 0.0);
    bool feasible = true;
    for (size_t p = 0; p < m; ++p) {
      b[cols[p]] = a[p][m] / a[p][p] / norm[cols[p]];
      feasible = feasible && b[cols[p]] >= 0 && std::isfinite(b[cols[p]]);
    }
    if (!feasible)
      continue;
    double error = 0;
    for (size_t i = 0; i < n; ++i) {
      double fit = 0;
      for (size_t j = 0; j < k; ++j)
        fit += b[j] * x[i][j];
      error += w[i] * (fit - y[i]) * (fit - y[i]);
    }
    if (error < bestError) {
      bestError = error;
      best = b;
      found = true;
    }
  }
  return found;
}

/// nonNegativeFit with the least absolute relative error instead of the
/// least squared (iteratively reweighted): an op's odd instructions (a
/// reduction over another axis, slower per element) do not drag its fixed
/// cost up for all the others, and a small instruction counts as much as
/// a large one. Weighted by seconds, the large references decided a
/// matmul's fixed cost, 0 in one calibration and 6.5 us in the next: the
/// demo's compute under mpirun was priced 2.84 to 3.83 ms in three fresh
/// calibrations; relative, 2.90 to 2.94 (bench/fit_residuals.py's mean
/// |error| 8-9% -> 6%).
///
/// `known` (where not empty) is a part of each y that is not fitted (a
/// product's flops at the measured GEMM rate): the columns fit the rest,
/// y - known, while the errors stay relative to y itself.
bool robustFit(const std::vector<std::vector<double>> &x,
               const std::vector<double> &y, std::vector<double> &b,
               unsigned required = 0, const std::vector<double> &known = {}) {
  std::vector<double> rest = y;
  if (!known.empty())
    for (size_t i = 0; i < y.size(); ++i)
      rest[i] -= known[i];
  // Relative errors: each instruction counts alike, so the small ones
  // (which set a fixed cost) are not outweighed by the large ones (which
  // the scaling to the measured total takes care of).
  std::vector<double> w(y.size(), 1.0);
  for (size_t i = 0; i < y.size(); ++i)
    w[i] = 1.0 / std::max(y[i] * y[i], 1e-30);
  if (!nonNegativeFit(x, rest, w, b, required))
    return false;
  for (int iteration = 0; iteration < 30; ++iteration) {
    for (size_t i = 0; i < y.size(); ++i) {
      double fit = 0;
      for (size_t j = 0; j < b.size(); ++j)
        fit += b[j] * x[i][j];
      double yi = std::max(std::abs(y[i]), 1e-15);
      w[i] = 1.0 / (yi * std::max(std::abs(fit - rest[i]), 1e-6 * yi));
    }
    std::vector<double> next;
    if (!nonNegativeFit(x, rest, w, next, required))
      break;
    b = next;
  }
  return true;
}

} // namespace

Status fitDeviceJson(const Plan &plan, const json &doc,
                     const std::string &measuredPath, json &device,
                     std::ostream &os) {
  return fitDeviceRuns({{&plan, &doc, measuredPath}}, device, os,
                       /*linear=*/false);
}

Status fitDeviceRuns(const std::vector<FitRun> &runs, json &device,
                     std::ostream &os, bool linear) {
  if (runs.empty())
    return Status::error("no measured run to fit the device to");
  std::vector<Sample> samples;
  for (const FitRun &r : runs)
    FSDP_RETURN_IF_ERROR(samplesOf(*r.plan, *r.doc, r.path, linear, samples));
  // How the plans priced ranks sharing the node (fsdp-simulate): the runs
  // fitted together must agree.
  const Plan &first = *runs.front().plan;
  int64_t threads = first.predicted.value("threads_per_rank", int64_t(0));
  double threadFactor = first.predicted.value("thread_factor", 1.0);
  for (const FitRun &r : runs)
    if (r.plan->predicted.value("threads_per_rank", int64_t(0)) != threads)
      return Status::error(r.path + ": its ranks ran on other thread counts "
                                    "than the first run's; fit them apart");
  json scales = device.value("op_scale", json::object());
  json byThreads = device.value("op_scale_threads", json::object());
  json overheads = device.value("op_overhead", json::object());
  json overheadsByThreads = device.value("op_overhead_threads", json::object());
  std::string key = std::to_string(threads);
  // As the simulator reads them: op_scale_threads[t] where the device has
  // one for t (or t is not its own thread count), op_scale otherwise.
  bool perThreads = device.value("cores", 0.0) > 0 && threads > 0 &&
                    (threads != device.value("threads", int64_t(1)) ||
                     byThreads.contains(key));
  json fitted = perThreads ? byThreads.value(key, json::object()) : scales;
  json fittedOverhead =
      perThreads ? overheadsByThreads.value(key, json::object()) : overheads;
  json costs = device.value("op_cost", json::object());
  json costsByThreads = device.value("op_cost_threads", json::object());
  json fittedCost =
      perThreads ? costsByThreads.value(key, json::object()) : costs;
  // Each op's key fitted to its parallel instructions where it has enough
  // of them (at least 4), to all of them otherwise; its serial variant to
  // its serial ones where it has enough, else not at all (the simulator
  // then prices them on the op's own).
  std::map<std::string, std::vector<const Sample *>> all, byOp;
  for (const Sample &x : samples) {
    all[x.op].push_back(&x);
    if (!x.serialKey.empty())
      byOp[x.serialKey].push_back(&x);
  }
  for (auto it = byOp.begin(); it != byOp.end();)
    it = it->second.size() < 4 ? byOp.erase(it) : std::next(it);
  for (const auto &[op, points] : all) {
    std::vector<const Sample *> parallel;
    for (const Sample *x : points)
      if (x->serialKey.empty())
        parallel.push_back(x);
    byOp[op] = parallel.size() >= 4 ? parallel : points;
  }
  // The seconds an instruction's bytes take at the device's bandwidth (its
  // cache's where they fit: DeviceModel::bytesSeconds).
  double cacheBytes = device.value("cache_bytes", 0.0),
         cacheRate = device.value("cache_bandwidth", 0.0),
         memRate = device.value("mem_bandwidth", 0.0) *
                   device.value("memory_efficiency", 1.0);
  auto cached = [&](int64_t bytes) {
    return cacheBytes > 0 && cacheRate > 0 && bytes <= cacheBytes;
  };
  auto bytesSeconds = [&](int64_t bytes) {
    double rate = cached(bytes) ? cacheRate : memRate;
    return rate > 0 ? double(bytes) / rate : 0.0;
  };
  char line[200];
  os << "op                     count  measured us  predicted us  "
     << (linear ? "overhead us  ps/flop  x bytes\n" : "op_scale\n");
  for (const auto &[op, points] : byOp) {
    double m = 0, p = 0;
    for (const Sample *x : points)
      p += x->predicted, m += x->measured;
    if (p <= 0 || m <= 0)
      continue;
    std::snprintf(line, sizeof line, "%-22s %5zu %12.1f %13.1f", op.c_str(),
                  points.size(), m * 1e6, p * 1e6);
    os << line;
    if (linear) {
      // time = overhead + per_flop x flops + a factor x the seconds its
      // bytes take (at the cache's rate where they fit), by non-negative
      // least absolute relative error over the op's instructions (each
      // counts alike; the scaling below makes the totals, which the large
      // ones dominate, right): a tanh's cost per element does not
      // depend on where its data is, a copy's does. Products and attention
      // are priced by their flops (their bytes grow slower than their
      // work, and a fit on them extrapolates badly); attention by its
      // query rows too, in place of a fixed cost per instruction
      // (common/CostRows.h).
      std::string base = op.substr(0, op.find('.'));
      bool product = base == "matmul" || base == "gemm" ||
                     base.rfind("conv", 0) == 0 ||
                     base.rfind("attention", 0) == 0;
      // Within one regime a kernel's flops and bytes grow together: the
      // bytes, whose price jumps where they leave the cache, are a
      // regressor only where some reference instruction had left it (a fit
      // that chose them on cached data alone priced the larger ops of a
      // real model five times over).
      bool leftCache = false;
      for (const Sample *s : points)
        leftCache |= !cached(s->bytes);
      //
      // A GEMM's cost per flop is not fitted but taken from the rate the
      // calibration measured on a transformer block's products (flops_f32,
      // flops_bf16; at d = 768, where a GEMM runs near the machine's peak):
      // the references' products are small (d <= 384), and a cost per flop
      // fitted to them carries their inefficiency to every larger one. On
      // the project's 2-core Xeon it priced a d = 768 model's products 25%
      // over and bench/cpu_step.py's 10-36% over. What a small product
      // costs beyond its flops (a fixed cost, and its operands' bytes,
      // whose share shrinks as it grows) is fitted to the rest, the bytes
      // at one price wherever they are (the GEMM packs its operands into
      // the cache block by block; at the memory's price past the cache, a
      // d = 768 model's products came out 1.5x).
      bool gemm = base == "matmul" || base == "gemm";
      double rate = gemm ? device.value(op.find(".bf16") != std::string::npos
                                            ? "flops_bf16"
                                            : "flops_f32",
                                        0.0)
                         : 0.0;
      double perFlop =
          rate > 0 ? (perThreads ? threadFactor : 1.0) / rate : 0.0;
      bool byBytes = !product && leftCache;
      bool perRow = false;
      for (const Sample *s : points)
        perRow |= s->rows > 0;
      std::vector<std::vector<double>> x;
      std::vector<double> y, known;
      for (const Sample *s : points) {
        x.push_back({perRow ? 0.0 : 1.0, perFlop > 0 ? 0.0 : double(s->flops),
                     perFlop > 0 ? double(s->bytes)
                     : byBytes   ? bytesSeconds(s->bytes)
                                 : 0.0,
                     double(s->rows)});
        y.push_back(s->measured);
        if (perFlop > 0)
          known.push_back(perFlop * double(s->flops));
      }
      // The rows' term stays in attention's fit: without it the search may
      // take flops alone where noise (a loaded machine) makes the pair
      // infeasible, and price short rows as if they were free again.
      std::vector<double> b;
      if (!robustFit(x, y, b, perRow ? 1u << 3 : 0u, known))
        b = {perFlop > 0 ? 0.0 : m / double(points.size()), 0.0, 0.0,
             0.0}; // a constant
      if (perFlop > 0) {
        b[1] = perFlop;
        for (size_t i = 0; i < points.size(); ++i)
          x[i][1] = double(points[i]->flops);
      }
      // The robust fit follows the typical instruction, but a step is the
      // sum of them and an op's times are skewed to the slow side, so it
      // under-priced the runs it was fitted to (by 7-11% on average on the
      // project's 2-core Xeon, bench/fit_residuals.py; 2-5% over after
      // this, and mean |error| 2-3 points lower). Its costs are scaled so
      // the op's fitted total is its measured total.
      double total = 0; // the fit's, over the op's instructions
      for (const std::vector<double> &xi : x)
        for (size_t j = 0; j < b.size(); ++j)
          total += b[j] * xi[j];
      if (total > 0)
        for (double &v : b)
          v *= m / total;
      fittedCost[op] = perFlop > 0 ? json::array({b[1], 0.0, 0.0, b[2]})
                       : perRow    ? json::array({b[1], b[2], b[3]})
                                   : json::array({b[1], b[2]});
      fittedOverhead[op] = b[0];
      std::snprintf(line, sizeof line, " %12.2f %9.3f %8.3f", b[0] * 1e6,
                    b[1] * 1e12, perFlop > 0 ? b[2] * 1e12 : b[2]);
      os << line;
      if (perRow) {
        std::snprintf(line, sizeof line, "  %.4f us/row", b[3] * 1e6);
        os << line;
      }
      if (perFlop > 0) {
        std::snprintf(line, sizeof line,
                      "  (x bytes: ps/byte; ps/flop: the GEMM rate, scaled)");
        os << line;
      }
      os << "\n";
      continue;
    }
    // The scale multiplies the op's predicted time, so a plan simulated on
    // the fitted device predicts each op's measured total. The factor the
    // plan was simulated with: the per-thread one where fitted, else
    // op_scale times the thread factor.
    double old = fitted.contains(op) ? fitted[op].get<double>()
                                     : scales.value(op, 1.0) *
                                           (perThreads ? threadFactor : 1.0);
    fitted[op] = old * m / p;
    std::snprintf(line, sizeof line, " %9.3f\n", fitted[op].get<double>());
    os << line;
  }
  if (perThreads) {
    byThreads[key] = fitted;
    device["op_scale_threads"] = byThreads;
    if (linear) {
      overheadsByThreads[key] = fittedOverhead;
      device["op_overhead_threads"] = overheadsByThreads;
      costsByThreads[key] = fittedCost;
      device["op_cost_threads"] = costsByThreads;
    }
    os << "(factors for ranks on " << key << " thread"
       << (threads == 1 ? "" : "s") << ": op_scale_threads." << key << ")\n";
  } else {
    device["op_scale"] = fitted;
    if (linear) {
      device["op_overhead"] = fittedOverhead;
      device["op_cost"] = fittedCost;
    }
  }
  std::string name = device.value("name", "device");
  if (name.find("(fitted)") == std::string::npos)
    device["name"] = name + " (fitted)";
  return Status::ok();
}

} // namespace fsdp
