//===- DeviceModel.h - What a device can do, for the cost model -*- C++ -*-===//
//
// Peak arithmetic per dtype, memory bandwidth, and the links between
// devices (within a node, across nodes): what the simulator needs to price
// a plan's instructions on a cluster that is not here. Built in: h100-sxm,
// h200, a100-80g and cpu-generic (a 2-core development machine of 2024,
// fixed: what the tests plan for). fsdp-opt's --device=cpu is the machine
// it runs on, calibrated by fsdp-run and cached (ThisMachine.h). Any other
// name is read as a JSON file with the same fields. The GPU figures are
// sourced, never fitted to a result: datasheet peaks, and what published
// measurements show is achievable of them (GEMM efficiency, flash attention,
// NCCL bus bandwidths); each is cited where DeviceModel.cpp sets it.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_COSTMODEL_DEVICEMODEL_H
#define FSDP_COSTMODEL_DEVICEMODEL_H

#include "mlir/IR/Types.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <map>
#include <string>

namespace mlir::fsdp {

struct DeviceModel {
  std::string name;
  /// The JSON file it was read from (empty: built in): what a plan names
  /// as its calibration.
  std::string file;
  double flopsF32 = 0, flopsBf16 = 0; // per second, dense peaks
  /// Fractions of the peak that GEMMs (matmul, gemm) and fused attention
  /// reach at best (1: the peak; the CPU's rates are measured already).
  double gemmEfficiency = 1.0, attentionEfficiency = 1.0;
  /// The fraction of that best which they sustain inside a training step
  /// (1: the best throughout).
  double sustained = 1.0;
  double memBandwidth = 0; // bytes per second
  /// CPU: the bytes a rank's caches hold (its cores' L2) and the rate data
  /// that fits in them moves at; an op moving no more runs at it (0: not
  /// measured, memBandwidth throughout).
  double cacheBytes = 0, cacheBandwidth = 0;
  /// The fraction of it memory-bound kernels reach (1: the CPU's rate is
  /// measured already).
  double memEfficiency = 1.0;
  /// Bus bandwidth (nccl-tests' busbw, bytes per second) of a ring within
  /// a node, and of a ring that spans nodes with every device of each node
  /// in it: the node's NICs together, capped by the node's own bus
  /// bandwidth. A group with fewer of a node's devices (hybrid-shard's
  /// replica groups: one) shares those NICs with the node's other groups.
  double intraBandwidth = 0, interBandwidth = 0;
  double intraLatency = 0, interLatency = 0; // seconds per ring step
  double launchOverhead = 0;                 // seconds per kernel
  /// Streaming multiprocessors, and how many of them a running NCCL
  /// collective kernel holds (one CTA per channel): compute that overlaps
  /// a collective runs on the rest, (sms - collectiveCtas) / sms as fast.
  /// 0 SMs: no contention modelled (the CPU).
  int64_t sms = 0, collectiveCtas = 0;
  /// The rate compute runs at while a collective is in flight.
  double overlapRate() const;
  int64_t devicesPerNode = 1;
  /// Threads a rank's kernels run on (CPU: per-thread kernel scratch).
  int64_t threads = 1;
  /// Device memory a rank may plan into (0: unknown); --autotune's default
  /// budget.
  int64_t memoryBytes = 0;
  /// Resident bytes a rank's process holds besides the plan's memory
  /// (CPU: libraries, MPI, the BLAS buffers of its threads; fsdp-run
  /// --calibrate measures it). 0 on GPUs, where the plan is device memory.
  int64_t runtimeBytes = 0;
  /// CPU: the rates above are the node's, measured on `threads` threads;
  /// its `cores` are shared by the ranks on it (each runs on
  /// cores / ranks threads, or time-shares a core), and a loop on t
  /// threads runs 1 + (t - 1) * parallelEfficiency times faster than on
  /// one. 0 cores: a device per rank (GPUs).
  int64_t cores = 0;
  double parallelEfficiency = 1.0;
  /// Whether collectives move while the rank computes (NCCL's kernels do).
  /// MPI's non-blocking collectives progress only inside MPI calls: the CPU
  /// backend's transfers happen in its waits (`async_progress: false`).
  bool asyncProgress = true;
  /// Whether a rank's collectives move while it computes: they progress on
  /// their own (asyncProgress) and, on a CPU, a core is free for their
  /// transfers. fsdp-run's kernels take every core (cores / ranks threads
  /// a rank), so Gloo's transfer threads wait for the kernels' cores: on
  /// this project's 2-core machine a 3 MB gather took 8-16 ms beside
  /// compute against 1.7 ms alone, so they are priced from their waits.
  bool progressesBesideCompute(int64_t ranksOnNode) const;
  /// A CPU's bf16 products run as bf16 (`native_bf16_products`, from
  /// fsdp-run --calibrate: oneDNN on AVX512-BF16 or AMX) and need no f32
  /// copies of their operands; false: they are widened like the rest.
  bool nativeBf16Products = false;
  /// Offload (GPUs): the host link of each device, bytes per second copy
  /// engines move each way alone, and the fraction each direction keeps
  /// while the other runs; the node's host cores and memory bandwidth
  /// (shared by its ranks); the host AdamW rate one core reaches with
  /// fsdp's fused kernel and with PyTorch's default CPU AdamW (for-loop),
  /// counted in the cost model's bytes (28 an f32 element), and how many
  /// times those bytes PyTorch's actually moves (it makes several passes).
  /// 0 host bandwidth: the device is the host (the CPU), copies are memcpys.
  double hostToDevice = 0, deviceToHost = 0;
  double h2dWhileD2H = 1, d2hWhileH2D = 1;
  int64_t hostCores = 0;
  double hostMemBandwidth = 0;
  /// The node's host memory, bytes, shared by its ranks' offloaded state
  /// (0: unknown, unchecked).
  int64_t hostMemoryBytes = 0;
  double hostAdamwPerCore = 0, torchHostAdamwPerCore = 0;
  double torchHostAdamwTraffic = 1;
  /// Seconds a host op moving `bytes` (cost-model bytes) takes on one of
  /// `ranksOnNode` ranks sharing the node's cores and memory: fsdp's
  /// kernels, or PyTorch's CPU AdamW (`torch`).
  double hostSeconds(int64_t bytes, int64_t ranksOnNode, bool torch) const;
  /// Factor on a rank's compute time when `ranksOnNode` ranks share it:
  /// threadFactor * oversubscription.
  double sharedNodeFactor(int64_t ranksOnNode) const;
  /// How much slower a rank's kernels run on its threads than on `threads`
  /// (from parallelEfficiency).
  double threadFactor(int64_t ranksOnNode) const;
  /// More ranks than cores time-share them: ranks / cores, at least 1.
  double oversubscription(int64_t ranksOnNode) const;
  /// Threads a rank's kernels run on when `ranksOnNode` ranks share it.
  int64_t threadsPerRank(int64_t ranksOnNode) const;
  /// Per op name (e.g. "tanh"), a factor on the op's time: what a
  /// measured run showed the kernels take against the roofline
  /// (`fsdp-inspect --fit-device`). Absent ops keep 1.
  llvm::StringMap<double> opScale;
  /// Per thread count t, per op: factors fitted to a run whose ranks each
  /// ran on t threads. They include the speed of t threads, so for those
  /// ops a rank on t threads pays no threadFactor (`op_scale_threads` in
  /// the JSON, keyed by the count).
  std::map<int64_t, llvm::StringMap<double>> opScaleByThreads;
  /// Per op name, seconds each instruction of it takes besides its scaled
  /// roofline: a CPU kernel's fixed cost (its parallel region, its setup
  /// per call), which dominates small ops. `op_overhead` and, like the
  /// scales, `op_overhead_threads` by thread count; both fitted by the
  /// calibration's reference runs (runtime/inspect/FitDevice.cpp).
  llvm::StringMap<double> opOverhead;
  std::map<int64_t, llvm::StringMap<double>> opOverheadByThreads;
  /// Per op name, a fitted linear cost that replaces the scaled roofline:
  /// seconds per flop, and a factor on the seconds its bytes take at the
  /// cache's bandwidth where they fit in it, at the memory's where not
  /// (`op_cost: {op: [per_flop, on_bytes]}`, and `op_cost_threads`). A
  /// kernel's time is then overhead + perFlop x flops + onBytes x
  /// bytesSeconds(bytes): a tanh's cost per element does not depend on
  /// where its data is, a copy's does. Ops with rows (common/CostRows.h:
  /// attention's query rows) may add seconds per row, a third number; a
  /// GEMM seconds per byte of its operands wherever they are (its packing
  /// copies them block by block through the cache), a fourth.
  struct LinearCost {
    double perFlop = 0, onBytes = 0, perRow = 0, perByte = 0;
  };
  llvm::StringMap<LinearCost> opCost;
  std::map<int64_t, llvm::StringMap<LinearCost>> opCostByThreads;
  /// Seconds `bytes` take to move at the roofline's bandwidth (the cache's
  /// where they fit in it).
  double bytesSeconds(int64_t bytes) const;

  /// Seconds one op with these flops and bytes takes (a roofline at the
  /// op's efficiency, times its op_scale).
  double computeSeconds(int64_t flops, int64_t bytes, Type element,
                        llvm::StringRef op = "") const;
  /// The roofline alone: the op's efficiency, no op_scale (per-thread
  /// factors replace op_scale, not the efficiency).
  double rooflineSeconds(int64_t flops, int64_t bytes, Type element,
                         llvm::StringRef op = "") const;
  /// Seconds the op takes on one of `ranksOnNode` ranks sharing a node
  /// (0: a device of its own): computeSeconds with the op's per-thread
  /// factor where fitted, else with sharedNodeFactor. `narrow` ("bf16",
  /// "f16": the op's tensors in the plan) selects fitted values keyed
  /// "op.bf16" before the op's own, and `variant` (common/CostRows.h:
  /// "strided") values keyed "op.strided.bf16", "op.strided" before those;
  /// `rows` (common/CostRows.h) is priced where a fitted cost has a price
  /// per row.
  double rankComputeSeconds(int64_t flops, int64_t bytes, Type element,
                            llvm::StringRef op, int64_t ranksOnNode,
                            llvm::StringRef narrow = "", int64_t rows = 0,
                            llvm::StringRef variant = "") const;
  /// The same before stepCorrection: what the fitted costs alone say.
  double fittedComputeSeconds(int64_t flops, int64_t bytes, Type element,
                              llvm::StringRef op, int64_t ranksOnNode,
                              llvm::StringRef narrow = "", int64_t rows = 0,
                              llvm::StringRef variant = "") const;
  /// CPU (this machine's calibration): a factor on every compute time, the
  /// median of measured / predicted over the steps fsdp-run measured on
  /// plans priced on this calibration (`step_correction`, kept beside
  /// `observed_steps` by runtime/run/Calibration.cpp), so a calibration
  /// measured in a slow or fast spell is corrected by the runs after it.
  double stepCorrection = 1.0;
  /// Whether a group of `ranks` ranks `stride` apart spans nodes.
  bool crossesNodes(int64_t ranks, int64_t stride) const;
  /// Seconds of an all-gather / reduce-scatter (`allReduce` false) or an
  /// all-reduce of `bytes` (the full buffer) over `ranks` ranks `stride`
  /// apart (1: consecutive; hybrid-shard's replica groups: the shard group
  /// size): ring α-β on the node's bus within a node, on its NICs across
  /// nodes, shared by the node's concurrent groups.
  double collectiveSeconds(int64_t bytes, int64_t ranks, bool allReduce,
                           int64_t stride = 1) const;
  /// The fraction of peak arithmetic an op reaches: GEMMs and attention
  /// their measured best, everything else the peak (memory-bound anyway).
  double efficiency(llvm::StringRef op) const;
};

/// A built-in device by name, or a JSON description at that path.
llvm::Expected<DeviceModel> loadDeviceModel(llvm::StringRef nameOrPath);

/// Whether `name` is one of loadDeviceModel's built-in devices (what a
/// device file's "base" may name).
bool isBuiltInDevice(llvm::StringRef name);

} // namespace mlir::fsdp

#endif // FSDP_COSTMODEL_DEVICEMODEL_H
