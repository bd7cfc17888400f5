//===- DeviceModel.cpp - Built-in devices and JSON descriptions -----------===//
#include "passes/DeviceModel.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::fsdp;

double DeviceModel::computeSeconds(int64_t flops, int64_t bytes, Type element,
                                   llvm::StringRef op) const {
  bool half = element && (element.isBF16() || element.isF16());
  double peak = half && flopsBf16 > 0 ? flopsBf16 : flopsF32;
  double scale = op.empty() ? 1.0 : opScale.lookup(op);
  if (scale <= 0)
    scale = 1.0;
  return scale *
         (launchOverhead + std::max(flops / peak, bytes / memBandwidth));
}

double DeviceModel::collectiveSeconds(int64_t bytes, int64_t ranks,
                                      bool allReduce) const {
  if (ranks <= 1)
    return 0;
  bool intra = ranks <= devicesPerNode;
  double alpha = intra ? intraLatency : interLatency;
  double beta = intra ? intraBandwidth : interBandwidth;
  double steps = double(ranks - 1), share = double(ranks - 1) / double(ranks);
  double factor = allReduce ? 2.0 : 1.0;
  return factor * (steps * alpha + share * double(bytes) / beta);
}

int64_t DeviceModel::threadsPerRank(int64_t ranksOnNode) const {
  // fsdp-run gives each rank cores / ranks threads (at least one).
  if (cores <= 0 || ranksOnNode <= 0)
    return threads;
  return std::max<int64_t>(1, cores / ranksOnNode);
}

double DeviceModel::threadFactor(int64_t ranksOnNode) const {
  if (cores <= 0 || ranksOnNode <= 0)
    return 1.0;
  auto speedup = [&](int64_t t) {
    return 1.0 + double(t - 1) * parallelEfficiency;
  };
  return speedup(std::max<int64_t>(1, threads)) /
         speedup(threadsPerRank(ranksOnNode));
}

double DeviceModel::oversubscription(int64_t ranksOnNode) const {
  if (cores <= 0 || ranksOnNode <= 0)
    return 1.0;
  return std::max(1.0, double(ranksOnNode) / double(cores));
}

double DeviceModel::sharedNodeFactor(int64_t ranksOnNode) const {
  return threadFactor(ranksOnNode) * oversubscription(ranksOnNode);
}

double DeviceModel::rankComputeSeconds(int64_t flops, int64_t bytes,
                                       Type element, llvm::StringRef op,
                                       int64_t ranksOnNode) const {
  if (cores > 0 && ranksOnNode > 0 && !op.empty()) {
    auto t = opScaleByThreads.find(threadsPerRank(ranksOnNode));
    if (t != opScaleByThreads.end())
      if (auto s = t->second.find(op); s != t->second.end())
        return s->second * computeSeconds(flops, bytes, element) *
               oversubscription(ranksOnNode);
  }
  return computeSeconds(flops, bytes, element, op) *
         sharedNodeFactor(ranksOnNode);
}

llvm::Expected<DeviceModel> mlir::fsdp::loadDeviceModel(llvm::StringRef name) {
  DeviceModel d;
  d.name = name.str();
  if (name == "h100-sxm" || name == "h200") {
    // H100 SXM5: 989 TFLOP/s bf16 dense, 494 TF32 (f32 GEMMs run as TF32);
    // HBM3 3.35 TB/s (H200: HBM3e 4.8 TB/s); NVLink 4 450 GB/s per
    // direction; one 400 Gb/s NIC per GPU across nodes.
    d.flopsBf16 = 989e12;
    d.flopsF32 = 494e12;
    d.memBandwidth = name == "h200" ? 4.8e12 : 3.35e12;
    d.intraBandwidth = 450e9;
    d.interBandwidth = 50e9;
    d.intraLatency = 5e-6;
    d.interLatency = 15e-6;
    d.launchOverhead = 4e-6;
    d.devicesPerNode = 8;
    // A planning budget of 80 GB (H200: 141 GB), decimal: of the 79.6 GiB
    // an H100 reports, it leaves about 5 GiB to the CUDA context, NCCL and
    // library workspaces.
    d.memoryBytes = name == "h200" ? 141'000'000'000 : 80'000'000'000;
    return d;
  }
  if (name == "a100-80g") {
    d.flopsBf16 = 312e12;
    d.flopsF32 = 156e12; // TF32
    d.memBandwidth = 2.039e12;
    d.intraBandwidth = 300e9; // NVLink 3
    d.interBandwidth = 25e9;  // 200 Gb/s per GPU
    d.intraLatency = 6e-6;
    d.interLatency = 20e-6;
    d.launchOverhead = 5e-6;
    d.devicesPerNode = 8;
    d.memoryBytes = 80'000'000'000;
    return d;
  }
  if (name == "cpu") {
    // The 2-core development machine (OpenBLAS sgemm, one core per rank);
    // shared memory "links" through MPI.
    d.flopsF32 = d.flopsBf16 = 40e9;
    d.memBandwidth = 8e9;
    d.intraBandwidth = d.interBandwidth = 3e9;
    d.intraLatency = d.interLatency = 3e-6;
    d.launchOverhead = 1e-6;
    d.devicesPerNode = 1 << 20;
    d.cores = 2;
    d.threads = 2;
    d.asyncProgress = false;
    return d;
  }
  auto buffer = llvm::MemoryBuffer::getFile(name);
  if (!buffer)
    return llvm::createStringError(
        "unknown device '" + name.str() +
        "' (h100-sxm, h200, a100-80g, cpu, or a JSON file): " +
        buffer.getError().message());
  auto json = llvm::json::parse((*buffer)->getBuffer());
  if (!json)
    return llvm::createStringError(
        "device file " + name.str() +
        ": not JSON: " + llvm::toString(json.takeError()));
  const llvm::json::Object *o = json->getAsObject();
  if (!o)
    return llvm::createStringError("device file " + name.str() +
                                   ": expected a JSON object");
  auto number = [&](const char *key, double &out, bool required) -> bool {
    if (auto v = o->getNumber(key)) {
      out = *v;
      return true;
    }
    return !required;
  };
  double perNode = 8, threads = 1, memory = 0;
  if (!number("flops_f32", d.flopsF32, true) ||
      !number("mem_bandwidth", d.memBandwidth, true) ||
      !number("intra_bandwidth", d.intraBandwidth, true) ||
      !number("inter_bandwidth", d.interBandwidth, true) ||
      !number("flops_bf16", d.flopsBf16, false) ||
      !number("intra_latency", d.intraLatency, false) ||
      !number("inter_latency", d.interLatency, false) ||
      !number("launch_overhead", d.launchOverhead, false) ||
      !number("devices_per_node", perNode, false) ||
      !number("threads", threads, false) ||
      !number("memory_bytes", memory, false))
    return llvm::createStringError(
        "device file " + name.str() +
        ": needs numbers flops_f32, mem_bandwidth, intra_bandwidth and "
        "inter_bandwidth (optional: flops_bf16, intra_latency, "
        "inter_latency, launch_overhead, devices_per_node, threads, "
        "memory_bytes, cores, parallel_efficiency, async_progress, op_scale, "
        "op_scale_threads)");
  if (d.flopsF32 <= 0 || d.memBandwidth <= 0 || d.intraBandwidth <= 0 ||
      d.interBandwidth <= 0 || perNode < 1)
    return llvm::createStringError("device file " + name.str() +
                                   ": rates must be positive");
  if (auto n = o->getString("name"))
    d.name = n->str();
  d.devicesPerNode = (int64_t)perNode;
  d.threads = std::max<int64_t>(1, (int64_t)threads);
  d.memoryBytes = std::max<int64_t>(0, (int64_t)memory);
  double cores = 0, efficiency = 1;
  if (!number("cores", cores, false) ||
      !number("parallel_efficiency", efficiency, false) || cores < 0 ||
      efficiency < 0 || efficiency > 1)
    return llvm::createStringError(
        "device file " + name.str() +
        ": cores must be a count and parallel_efficiency within [0, 1]");
  if (const llvm::json::Value *v = o->get("async_progress")) {
    if (!v->getAsBoolean())
      return llvm::createStringError("device file " + name.str() +
                                     ": async_progress must be true or false");
    d.asyncProgress = *v->getAsBoolean();
  }
  d.cores = (int64_t)cores;
  d.parallelEfficiency = efficiency;
  if (const llvm::json::Value *v = o->get("op_scale")) {
    const llvm::json::Object *scales = v->getAsObject();
    if (!scales)
      return llvm::createStringError("device file " + name.str() +
                                     ": op_scale must map op names to "
                                     "numbers");
    for (const auto &[op, value] : *scales) {
      auto x = value.getAsNumber();
      if (!x || *x <= 0)
        return llvm::createStringError("device file " + name.str() +
                                       ": op_scale." + op.str() +
                                       " must be a positive number");
      d.opScale[op.str()] = *x;
    }
  }
  if (const llvm::json::Value *v = o->get("op_scale_threads")) {
    const llvm::json::Object *byThreads = v->getAsObject();
    auto bad = [&](const std::string &what) {
      return llvm::createStringError("device file " + name.str() +
                                     ": op_scale_threads" + what);
    };
    if (!byThreads)
      return bad(" must map thread counts to {op: factor} objects");
    for (const auto &[count, value] : *byThreads) {
      int64_t t = 0;
      const llvm::json::Object *scales = value.getAsObject();
      if (llvm::StringRef(count).getAsInteger(10, t) || t < 1 || !scales)
        return bad("." + count.str() +
                   ": must be a thread count mapped to {op: factor}");
      for (const auto &[op, factor] : *scales) {
        auto x = factor.getAsNumber();
        if (!x || *x <= 0)
          return bad("." + count.str() + "." + op.str() +
                     " must be a positive number");
        d.opScaleByThreads[t][op.str()] = *x;
      }
    }
  }
  return d;
}
