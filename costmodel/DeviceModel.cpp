//===- DeviceModel.cpp - Built-in devices and JSON descriptions -----------===//
#include "costmodel/DeviceModel.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cmath>
#include <optional>

using namespace mlir;
using namespace mlir::fsdp;

double DeviceModel::rooflineSeconds(int64_t flops, int64_t bytes, Type element,
                                    llvm::StringRef op) const {
  bool half = element && (element.isBF16() || element.isF16());
  double peak = (half && flopsBf16 > 0 ? flopsBf16 : flopsF32) * efficiency(op);
  return launchOverhead + std::max(flops / peak, bytesSeconds(bytes));
}

double DeviceModel::bytesSeconds(int64_t bytes) const {
  // Data that fits in the rank's caches moves at their rate (where
  // measured: cache_bytes, cache_bandwidth).
  double bandwidth = cacheBytes > 0 && cacheBandwidth > 0 && bytes <= cacheBytes
                         ? cacheBandwidth
                         : memBandwidth;
  return bytes / (bandwidth * memEfficiency);
}

double DeviceModel::computeSeconds(int64_t flops, int64_t bytes, Type element,
                                   llvm::StringRef op) const {
  double scale = op.empty() ? 1.0 : opScale.lookup(op);
  if (scale <= 0)
    scale = 1.0;
  return scale * rooflineSeconds(flops, bytes, element, op);
}

double DeviceModel::efficiency(llvm::StringRef op) const {
  if (op == "matmul" || op == "gemm" || op == "conv" ||
      op == "conv_grad_input" || op == "conv_grad_weight")
    return gemmEfficiency * sustained; // convolutions run as GEMMs (im2col)
  if (op == "attention" || op == "attention_grad")
    return attentionEfficiency * sustained;
  return 1.0;
}

double DeviceModel::overlapRate() const {
  if (sms <= 0 || collectiveCtas <= 0 || collectiveCtas >= sms)
    return 1.0;
  return double(sms - collectiveCtas) / double(sms);
}

bool DeviceModel::crossesNodes(int64_t ranks, int64_t stride) const {
  return (ranks - 1) * std::max<int64_t>(stride, 1) >= devicesPerNode;
}

double DeviceModel::collectiveSeconds(int64_t bytes, int64_t ranks,
                                      bool allReduce, int64_t stride) const {
  if (ranks <= 1)
    return 0;
  stride = std::max<int64_t>(stride, 1);
  bool intra = !crossesNodes(ranks, stride);
  double alpha = intra ? intraLatency : interLatency;
  double beta =
      intra ? intraBandwidth : std::min(interBandwidth, intraBandwidth);
  if (!intra) {
    // Each node holds `members` of the group's ranks; its other devices run
    // groups of their own at the same time over the same NICs.
    int64_t members = std::clamp<int64_t>(devicesPerNode / stride, 1,
                                          std::min(ranks, devicesPerNode));
    beta *= double(members) / double(devicesPerNode);
  }
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

bool DeviceModel::progressesBesideCompute(int64_t ranksOnNode) const {
  if (!asyncProgress)
    return false;
  if (cores <= 0 || ranksOnNode <= 0)
    return true;
  return threadsPerRank(ranksOnNode) * ranksOnNode < cores;
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

/// `map`'s value for the first of `keys` it has ("mul.strided.bf16",
/// "mul.strided", "mul.bf16", "mul").
template <typename V>
static const V *lookupFitted(const llvm::StringMap<V> &map,
                             llvm::ArrayRef<llvm::StringRef> keys) {
  for (llvm::StringRef key : keys)
    if (auto it = map.find(key); it != map.end())
      return &it->second;
  return nullptr;
}

double DeviceModel::rankComputeSeconds(int64_t flops, int64_t bytes,
                                       Type element, llvm::StringRef op,
                                       int64_t ranksOnNode,
                                       llvm::StringRef narrow, int64_t rows,
                                       llvm::StringRef variant) const {
  return stepCorrection * fittedComputeSeconds(flops, bytes, element, op,
                                               ranksOnNode, narrow, rows,
                                               variant);
}

double DeviceModel::fittedComputeSeconds(int64_t flops, int64_t bytes,
                                         Type element, llvm::StringRef op,
                                         int64_t ranksOnNode,
                                         llvm::StringRef narrow, int64_t rows,
                                         llvm::StringRef variant) const {
  // A fitted value for the op's variant ("mul.strided") on narrow tensors
  // ("matmul.bf16": AMX, not AVX-512) where there is one, else without
  // the narrow type, else the op's own (common/CostRows.h).
  llvm::SmallString<48> both(op), withVariant(op), withNarrow(op);
  llvm::SmallVector<llvm::StringRef, 4> keys; // each once, most specific first
  if (!variant.empty()) {
    withVariant.append({".", variant});
    if (!narrow.empty()) {
      both.append({".", variant, ".", narrow});
      keys.push_back(both);
    }
    keys.push_back(withVariant);
  }
  if (!narrow.empty()) {
    withNarrow.append({".", narrow});
    keys.push_back(withNarrow);
  }
  keys.push_back(op);
  auto find = [&](const llvm::StringMap<double> &map) -> std::optional<double> {
    if (const double *v = lookupFitted(map, keys))
      return *v;
    return std::nullopt;
  };
  bool shared = cores > 0 && ranksOnNode > 0 && !op.empty();
  // A fixed cost per instruction where fitted: the per-thread one for the
  // rank's thread count, else the device's own.
  double overhead = 0;
  if (!op.empty()) {
    auto t = shared ? opOverheadByThreads.find(threadsPerRank(ranksOnNode))
                    : opOverheadByThreads.end();
    overhead = find(t != opOverheadByThreads.end() ? t->second : opOverhead)
                   .value_or(0.0);
  }
  // A fitted linear cost replaces the scaled roofline.
  auto findCost =
      [&](const llvm::StringMap<LinearCost> &map) -> std::optional<double> {
    const LinearCost *c = lookupFitted(map, keys);
    if (!c)
      return std::nullopt;
    return c->perFlop * double(flops) + c->onBytes * bytesSeconds(bytes) +
           c->perRow * double(rows) + c->perByte * double(bytes);
  };
  if (shared)
    if (auto t = opCostByThreads.find(threadsPerRank(ranksOnNode));
        t != opCostByThreads.end())
      if (auto body = findCost(t->second))
        return (overhead + *body) * oversubscription(ranksOnNode);
  if (!op.empty())
    if (auto body = findCost(opCost))
      return overhead * oversubscription(ranksOnNode) +
             *body * sharedNodeFactor(ranksOnNode);
  double roofline = rooflineSeconds(flops, bytes, element, op);
  if (shared) {
    auto t = opScaleByThreads.find(threadsPerRank(ranksOnNode));
    if (t != opScaleByThreads.end())
      if (auto s = find(t->second))
        return (overhead + *s * roofline) * oversubscription(ranksOnNode);
  }
  double scale = op.empty() ? 1.0 : find(opScale).value_or(1.0);
  if (scale <= 0)
    scale = 1.0;
  return overhead * oversubscription(ranksOnNode) +
         scale * roofline * sharedNodeFactor(ranksOnNode);
}

double DeviceModel::hostSeconds(int64_t bytes, int64_t ranksOnNode,
                                bool torch) const {
  int64_t ranks = std::max<int64_t>(ranksOnNode, 1);
  double cores = std::max<double>((double)hostCores / ranks, 1.0);
  double perCore = torch ? torchHostAdamwPerCore : hostAdamwPerCore;
  double rate = perCore * cores;
  // The node's memory, shared by its ranks, caps it; PyTorch's passes
  // move more bytes than the cost model counts.
  if (hostMemBandwidth > 0)
    rate = std::min(rate, hostMemBandwidth / ranks /
                              (torch ? torchHostAdamwTraffic : 1.0));
  return rate > 0 ? (double)bytes / rate : 0.0;
}

/// The host side of a GPU node (offload): sourced, or measured on this
/// project's machine where the rate is the kernel's own.
static void setHost(DeviceModel &d, bool a100) {
  // Host links, copy engines, per GPU. A100 (PCIe Gen4 x16): 25-26 GB/s
  // each way alone; both at once, host-to-device drops to 12-13 GB/s while
  // device-to-host keeps about 24 (NVIDIA/nvbandwidth#11, #53, 8x
  // A100-SXM4). H100 (PCIe Gen5 x16): 52.8 GB/s device to host
  // (NVIDIA/nvbandwidth#24, an H100 cluster); host to device assumed the
  // same on copy engines, and both at once as on the A100 (no H100
  // bidirectional measurement was found; bench/host_link.cu measures all
  // four where scripts/device-check.sh runs on a GPU).
  d.hostToDevice = d.deviceToHost = a100 ? 25e9 : 52.8e9;
  d.h2dWhileD2H = 12.5 / 25.0;
  d.d2hWhileH2D = 24.0 / 25.0;
  // Host CPUs and memory: DGX A100, two 64-core AMD EPYC 7742 with eight
  // channels of DDR4-3200 each (409.6 GB/s peak); DGX H100, two 56-core
  // Xeon Platinum 8480C with eight channels of DDR5-4800 each (614.4 GB/s
  // peak) (the DGX A100 and DGX H100 datasheets). Peaks: no sustained
  // figure for these nodes was found, so both plans are priced on the
  // same optimistic bound.
  d.hostCores = a100 ? 128 : 112;
  d.hostMemBandwidth = a100 ? 409.6e9 : 614.4e9;
  // System memory: 2 TB on a DGX H100 and on a DGX A100 640GB (the
  // datasheets; the DGX A100 320GB has 1 TB), decimal. What offload keeps
  // on the host, times the node's ranks, must fit in it.
  d.hostMemoryBytes = 2'000'000'000'000;
  // One core's AdamW over 12.6M f32 elements, in cost-model bytes: fsdp's
  // fused host kernel 21.7 GB/s, torch 2.11's default CPU AdamW
  // (foreach=False, the for-loop) 3.84 GB/s (its fused=True: 20.9)
  // (bench/host_adamw.py on the project's 2-core AVX-512 Xeon,
  // 2026-11-26). PyTorch's for-loop update (torch/optim/adamw.py,
  // _single_tensor_adamw: mul_, lerp_, mul_, addcmul_, sqrt, div, add_,
  // addcdiv_) moves 80 bytes an element against the fused pass's 28.
  d.hostAdamwPerCore = 21.7e9;
  d.torchHostAdamwPerCore = 3.84e9;
  d.torchHostAdamwTraffic = 80.0 / 28.0;
}

bool mlir::fsdp::isBuiltInDevice(llvm::StringRef name) {
  return llvm::is_contained({"h100-sxm", "h200", "a100-80g", "cpu-generic"},
                            name);
}

/// The one constant fitted to published runs: inside a training step, a
/// GPU's GEMMs and fused attention sustain this fraction of the best rates
/// below (those are microbenchmark maxima: the best shape, one kernel
/// alone, the clocks of a short run). Fitted by `bench/calibration.py --fit`
/// so that its ten published FSDP2 runs (torchtitan's Llama 2 and 3, 8 to
/// 128 A100s and H100s, 8B to 70B, every activation checkpointing mode)
/// are predicted without bias: the mean of log(predicted / published) is
/// zero. The same for every GPU; no point has a setting of its own.
constexpr double kGpuSustained = 0.876;

llvm::Expected<DeviceModel> mlir::fsdp::loadDeviceModel(llvm::StringRef name) {
  DeviceModel d;
  d.name = name.str();
  if (name == "h100-sxm" || name == "h200") {
    // Peaks, dense (NVIDIA H100 / H200 datasheets): bf16 989 TFLOP/s; f32
    // 67 TFLOP/s: fsdp-run's f32 GEMMs are exact FP32 (TF32, 494 TFLOP/s,
    // only with FSDP_CUDA_TF32=1); HBM3 3.35 TB/s, H200's HBM3e 4.8 TB/s.
    d.flopsBf16 = 989e12;
    d.flopsF32 = 67e12;
    d.memBandwidth = name == "h200" ? 4.8e12 : 3.35e12;
    // Achievable: the best cuBLAS bf16 GEMM reaches 80.3% of the H100's
    // peak (stas00/ml-engineering, "maximum achievable matmul FLOPS");
    // FlashAttention-2's forward and backward up to 335 TFLOP/s on H100
    // (Dao 2023, "FlashAttention-2", section 4.1): 34%.
    d.gemmEfficiency = 0.803;
    d.attentionEfficiency = 335.0 / 989.0;
    d.sustained = kGpuSustained;
    // Memory-bound kernels: about 90% of the HBM peak is the most any
    // kernel reached in an NVIDIA GTC talk cited on the developer forums
    // ("Trouble to reach peak bandwidth of A100"); no H100 measurement
    // with a citable source was found, so that ceiling is assumed.
    d.memEfficiency = 0.90;
    // NCCL bus bandwidth within an 8-GPU NVLink 4 node: ~360 GB/s for
    // all-gather and all-reduce (NVIDIA/nccl-tests#326, confirmed by
    // NCCL's maintainer), not the 450 GB/s link peak. Across nodes: eight
    // 400 Gb/s NICs per node (DGX H100), 46-48 GB/s each achieved
    // (NVIDIA/nccl-tests#290), 8 x 47 = 376 GB/s, capped by the 360 GB/s
    // of the node's bus.
    d.intraBandwidth = 360e9;
    d.interBandwidth = 8 * 47e9;
    d.intraLatency = 5e-6;
    d.interLatency = 15e-6;
    d.launchOverhead = 4e-6;
    d.devicesPerNode = 8;
    // 132 SMs (H100 SXM5 and H200 datasheets); an NCCL all-gather beside a
    // GEMM was seen holding 24 of them, pushing the GEMM into a second
    // wave (NVIDIA developer forums, "Compute-communication overlap causes
    // severe GEMM performance degradation because of tail effect").
    d.sms = 132;
    d.collectiveCtas = 24;
    // A planning budget of 80 GB (H200: 141 GB), decimal: of the 79.6 GiB
    // an H100 reports, it leaves about 5 GiB to the CUDA context, NCCL and
    // library workspaces.
    d.memoryBytes = name == "h200" ? 141'000'000'000 : 80'000'000'000;
    setHost(d, /*a100=*/false);
    return d;
  }
  if (name == "a100-80g") {
    // Peaks (NVIDIA A100 datasheet): bf16 312 TFLOP/s, FP32 19.5 TFLOP/s
    // (TF32 156 only with FSDP_CUDA_TF32=1), HBM2e 2.039 TB/s.
    d.flopsBf16 = 312e12;
    d.flopsF32 = 19.5e12;
    d.memBandwidth = 2.039e12;
    // The best cuBLAS bf16 GEMM reaches 86.9% of peak (stas00/ml-engineering,
    // "maximum achievable matmul FLOPS"); FlashAttention-2 reaches 50-73%
    // of the A100's peak, its backward at the low end (Dao 2023, abstract
    // and figure 4): 60% for forward and backward together.
    d.gemmEfficiency = 0.869;
    d.attentionEfficiency = 0.60;
    d.sustained = kGpuSustained;
    // Memory-bound kernels: 1.80 of the 2.04 TB/s measured on an A100
    // 80GB SXM, confirmed by Nsight Compute at 88% of peak (NVIDIA
    // developer forums, "Trouble to reach peak bandwidth of A100").
    d.memEfficiency = 0.88;
    // NCCL bus bandwidth within an 8-GPU NVLink 3 node: 200-210 GB/s
    // measured (NVIDIA/nccl-tests#149, #178), not the 300 GB/s link peak.
    // Across nodes: eight 200 Gb/s HDR NICs per node (DGX A100), 24 GB/s
    // each achieved (NVIDIA/nccl#412, NCCL's maintainer; nccl-tests#119:
    // four per node gave 85-96 GB/s), 8 x 24 = 192 GB/s.
    d.intraBandwidth = 210e9;
    d.interBandwidth = 8 * 24e9;
    d.intraLatency = 6e-6;
    d.interLatency = 20e-6;
    d.launchOverhead = 5e-6;
    d.devicesPerNode = 8;
    // 108 SMs (A100 datasheet); NCCL's collective kernels take one CTA
    // per channel, 24 as on the H100 above.
    d.sms = 108;
    d.collectiveCtas = 24;
    d.memoryBytes = 80'000'000'000;
    setHost(d, /*a100=*/true);
    return d;
  }
  if (name == "cpu-generic" || name == "cpu") {
    // The 2-core development machine of 2024 (OpenBLAS sgemm, one core per
    // rank; shared memory "links" through MPI), measured once and fixed:
    // what tests plan for, the same on every machine. fsdp-opt's
    // --device=cpu is the machine it runs on instead (ThisMachine.h); only
    // a pass pipeline run by hand meets "cpu" here.
    d.name = "cpu-generic";
    d.flopsF32 = d.flopsBf16 = 40e9;
    d.memBandwidth = 8e9;
    d.intraBandwidth = d.interBandwidth = 3e9;
    d.intraLatency = d.interLatency = 3e-6;
    d.launchOverhead = 1e-6;
    d.devicesPerNode = 1 << 20;
    d.cores = 2;
    d.threads = 2;
    d.asyncProgress = false;
    // Measured on it: a tiny MLP's run holds 12 MiB (21 under mpirun), and
    // GEMM-heavy runs 72-75 MiB over their plan's memory, OpenBLAS keeping
    // a 32 MiB buffer for each thread that calls it.
    d.runtimeBytes = 76ll << 20;
    return d;
  }
  auto buffer = llvm::MemoryBuffer::getFile(name);
  if (!buffer)
    return llvm::createStringError(
        "unknown device '" + name.str() +
        "' (h100-sxm, h200, a100-80g, cpu, cpu-generic, or a JSON file): " +
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
  // "base": a built-in device the file starts from, its keys overriding
  // the built-in's (a 500 W H100, a node with other NICs); the built-in's
  // rates are then not required.
  bool based = false;
  if (const llvm::json::Value *b = o->get("base")) {
    std::optional<llvm::StringRef> baseName = b->getAsString();
    if (!baseName || !isBuiltInDevice(*baseName))
      return llvm::createStringError(
          "device file " + name.str() +
          ": base must name a built-in device (h100-sxm, h200, a100-80g, "
          "cpu-generic)");
    d = llvm::cantFail(loadDeviceModel(*baseName));
    d.name = name.str();
    based = true;
  }
  // A key that is present must hold a number: a quoted "0.5" is an error,
  // never silently the default.
  std::string wrongType;
  auto number = [&](const char *key, double &out, bool required) -> bool {
    if (auto v = o->getNumber(key)) {
      out = *v;
      return true;
    }
    if (o->get(key) && wrongType.empty())
      wrongType = key;
    return !required && !o->get(key);
  };
  double perNode = based ? double(d.devicesPerNode) : 8,
         threads = double(d.threads), memory = double(d.memoryBytes),
         sms = double(d.sms), ctas = double(d.collectiveCtas),
         runtime = double(d.runtimeBytes), hostCores = double(d.hostCores),
         hostMemory = double(d.hostMemoryBytes);
  if (!number("flops_f32", d.flopsF32, !based) ||
      !number("mem_bandwidth", d.memBandwidth, !based) ||
      !number("intra_bandwidth", d.intraBandwidth, !based) ||
      !number("inter_bandwidth", d.interBandwidth, !based) ||
      !number("flops_bf16", d.flopsBf16, false) ||
      !number("intra_latency", d.intraLatency, false) ||
      !number("inter_latency", d.interLatency, false) ||
      !number("launch_overhead", d.launchOverhead, false) ||
      !number("devices_per_node", perNode, false) ||
      !number("threads", threads, false) ||
      !number("memory_bytes", memory, false) ||
      !number("gemm_efficiency", d.gemmEfficiency, false) ||
      !number("memory_efficiency", d.memEfficiency, false) ||
      !number("attention_efficiency", d.attentionEfficiency, false) ||
      !number("sustained", d.sustained, false) || !number("sms", sms, false) ||
      !number("runtime_bytes", runtime, false) ||
      !number("collective_ctas", ctas, false) ||
      !number("cache_bytes", d.cacheBytes, false) ||
      !number("cache_bandwidth", d.cacheBandwidth, false) ||
      !number("host_to_device", d.hostToDevice, false) ||
      !number("device_to_host", d.deviceToHost, false) ||
      !number("h2d_while_d2h", d.h2dWhileD2H, false) ||
      !number("d2h_while_h2d", d.d2hWhileH2D, false) ||
      !number("host_cores", hostCores, false) ||
      !number("host_mem_bandwidth", d.hostMemBandwidth, false) ||
      !number("host_memory_bytes", hostMemory, false) ||
      !number("host_adamw_per_core", d.hostAdamwPerCore, false) ||
      !number("torch_host_adamw_per_core", d.torchHostAdamwPerCore, false) ||
      !number("torch_host_adamw_traffic", d.torchHostAdamwTraffic, false))
    return llvm::createStringError(
        "device file " + name.str() +
        (wrongType.empty() ? std::string()
                           : ": '" + wrongType + "' is not a number;") +
        ": needs numbers flops_f32, mem_bandwidth, intra_bandwidth and "
        "inter_bandwidth, unless it names a base (optional: flops_bf16, "
        "intra_latency, "
        "inter_latency, launch_overhead, devices_per_node, threads, "
        "memory_bytes, runtime_bytes, gemm_efficiency, attention_efficiency, "
        "sustained, "
        "cache_bytes, cache_bandwidth, host_to_device, device_to_host, "
        "h2d_while_d2h, d2h_while_h2d, host_cores, host_mem_bandwidth, "
        "host_memory_bytes, "
        "host_adamw_per_core, torch_host_adamw_per_core, "
        "torch_host_adamw_traffic, "
        "memory_efficiency, sms, "
        "collective_ctas, cores, "
        "parallel_efficiency, async_progress, native_bf16_products, op_scale, "
        "op_scale_threads, op_overhead, op_overhead_threads, op_cost, "
        "op_cost_threads)");
  if (d.flopsF32 <= 0 || d.memBandwidth <= 0 || d.intraBandwidth <= 0 ||
      d.interBandwidth <= 0 || perNode < 1)
    return llvm::createStringError("device file " + name.str() +
                                   ": rates must be positive");
  if (auto n = o->getString("name"))
    d.name = n->str();
  d.file = name.str();
  if (!(d.gemmEfficiency > 0 && d.gemmEfficiency <= 1) ||
      !(d.attentionEfficiency > 0 && d.attentionEfficiency <= 1) ||
      !(d.memEfficiency > 0 && d.memEfficiency <= 1) ||
      !(d.sustained > 0 && d.sustained <= 1))
    return llvm::createStringError(
        "device file " + name.str() +
        ": gemm_efficiency, attention_efficiency, memory_efficiency and "
        "sustained must be within (0, 1]");
  if (sms < 0 || ctas < 0 || (sms > 0 && ctas >= sms))
    return llvm::createStringError("device file " + name.str() +
                                   ": collective_ctas must be fewer than sms");
  if (!(d.cacheBytes >= 0) || !(d.cacheBandwidth >= 0))
    return llvm::createStringError("device file " + name.str() +
                                   ": cache_bytes and cache_bandwidth must "
                                   "not be negative");
  if (runtime < 0)
    return llvm::createStringError("device file " + name.str() +
                                   ": runtime_bytes must not be negative");
  if (!(d.hostToDevice >= 0) || !(d.deviceToHost >= 0) || hostCores < 0 ||
      !(hostMemory >= 0) || !(d.hostMemBandwidth >= 0) ||
      !(d.hostAdamwPerCore >= 0) || !(d.torchHostAdamwPerCore >= 0) ||
      !(d.torchHostAdamwTraffic >= 1) ||
      !(d.h2dWhileD2H > 0 && d.h2dWhileD2H <= 1) ||
      !(d.d2hWhileH2D > 0 && d.d2hWhileH2D <= 1))
    return llvm::createStringError(
        "device file " + name.str() +
        ": host rates must not be negative, the *_while_* shares within "
        "(0, 1] and torch_host_adamw_traffic at least 1");
  if ((d.hostToDevice > 0 || d.deviceToHost > 0) &&
      (d.hostToDevice <= 0 || d.deviceToHost <= 0 || d.hostAdamwPerCore <= 0 ||
       d.torchHostAdamwPerCore <= 0 || hostCores < 1))
    return llvm::createStringError(
        "device file " + name.str() +
        ": a host link needs host_to_device, device_to_host, host_cores, "
        "host_adamw_per_core and torch_host_adamw_per_core");
  d.hostCores = (int64_t)hostCores;
  d.hostMemoryBytes = (int64_t)hostMemory;
  d.runtimeBytes = (int64_t)runtime;
  d.sms = (int64_t)sms;
  d.collectiveCtas = (int64_t)ctas;
  d.devicesPerNode = (int64_t)perNode;
  d.threads = std::max<int64_t>(1, (int64_t)threads);
  d.memoryBytes = std::max<int64_t>(0, (int64_t)memory);
  if (!number("step_correction", d.stepCorrection, false) ||
      !(d.stepCorrection > 0 && d.stepCorrection < 100))
    return llvm::createStringError(
        "device file " + name.str() +
        ": step_correction must be a number in (0, 100)");
  double cores = double(d.cores), efficiency = d.parallelEfficiency;
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
  if (const llvm::json::Value *v = o->get("native_bf16_products")) {
    if (!v->getAsBoolean())
      return llvm::createStringError(
          "device file " + name.str() +
          ": native_bf16_products must be true or false");
    d.nativeBf16Products = *v->getAsBoolean();
  }
  d.cores = (int64_t)cores;
  d.parallelEfficiency = efficiency;
  // The fitted maps: {op: value} and, per thread count, {t: {op: value}};
  // op_scale's values positive factors, op_overhead's seconds, op_cost's
  // [per_flop, on_bytes] pairs, or [per_flop, on_bytes, per_row], or
  // [per_flop, on_bytes, per_row, per_byte] (DeviceModel.h).
  auto numbers = [](bool positive) {
    return [positive](const llvm::json::Value &v) -> std::optional<double> {
      auto x = v.getAsNumber();
      if (!x || !std::isfinite(*x) || !(positive ? *x > 0 : *x >= 0))
        return std::nullopt;
      return *x;
    };
  };
  auto cost =
      [](const llvm::json::Value &v) -> std::optional<DeviceModel::LinearCost> {
    const llvm::json::Array *terms = v.getAsArray();
    if (!terms || terms->size() < 2 || terms->size() > 4)
      return std::nullopt;
    double x[4] = {0, 0, 0, 0};
    for (size_t i = 0; i < terms->size(); ++i) {
      auto n = (*terms)[i].getAsNumber();
      if (!n || !(*n >= 0) || !std::isfinite(*n))
        return std::nullopt;
      x[i] = *n;
    }
    return DeviceModel::LinearCost{x[0], x[1], x[2], x[3]};
  };
  auto bad = [&](const std::string &what) {
    return llvm::createStringError("device file " + name.str() + ": " + what);
  };
  // {op: value} at `where`; `kind` names a value, `want` a good one.
  auto readOps = [&](const llvm::json::Value &v, const std::string &where,
                     const char *kind, const char *want, auto read,
                     auto &out) -> llvm::Error {
    const llvm::json::Object *map = v.getAsObject();
    if (!map)
      return bad(where + " must map op names to " + kind + "s");
    for (const auto &[op, value] : *map) {
      auto x = read(value);
      if (!x)
        return bad(where + "." + op.str() + " must be " + want);
      out[op.str()] = *x;
    }
    return llvm::Error::success();
  };
  auto readMaps = [&](const char *key, const char *kind, const char *want,
                      auto read, auto &own, auto &byThreads) -> llvm::Error {
    if (const llvm::json::Value *v = o->get(key))
      if (auto e = readOps(*v, key, kind, want, read, own))
        return e;
    std::string perThreads = std::string(key) + "_threads";
    const llvm::json::Value *v = o->get(perThreads);
    if (!v)
      return llvm::Error::success();
    const llvm::json::Object *counts = v->getAsObject();
    if (!counts)
      return bad(perThreads + " must map thread counts to {op: " + kind +
                 "} objects");
    for (const auto &[count, value] : *counts) {
      int64_t t = 0;
      if (llvm::StringRef(count).getAsInteger(10, t) || t < 1 ||
          !value.getAsObject())
        return bad(perThreads + "." + count.str() +
                   ": must be a thread count mapped to {op: " + kind + "}");
      if (auto e = readOps(value, perThreads + "." + count.str(), kind, want,
                           read, byThreads[t]))
        return e;
    }
    return llvm::Error::success();
  };
  if (auto e = readMaps("op_scale", "number", "a positive number",
                        numbers(true), d.opScale, d.opScaleByThreads))
    return std::move(e);
  if (auto e =
          readMaps("op_overhead", "number", "a number of seconds, at least 0",
                   numbers(false), d.opOverhead, d.opOverheadByThreads))
    return std::move(e);
  if (auto e = readMaps("op_cost", "[per_flop, on_bytes]",
                        "[per_flop, on_bytes], [per_flop, on_bytes, "
                        "per_row] or [per_flop, on_bytes, per_row, "
                        "per_byte], numbers at least 0",
                        cost, d.opCost, d.opCostByThreads))
    return std::move(e);
  return d;
}
