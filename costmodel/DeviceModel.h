//===- DeviceModel.h - What a device can do, for the cost model -*- C++ -*-===//
//
// Peak arithmetic per dtype, memory bandwidth, and the links between
// devices (within a node, across nodes): what the simulator needs to price
// a plan's instructions on a cluster that is not here. Built in: h100-sxm,
// h200, a100-80g and cpu (a 2-core development machine; calibrate your own
// with fsdp-run --calibrate). Any other name is read as a JSON file with the
// same fields. The GPU figures are sourced, never fitted to a result:
// datasheet peaks, and what published measurements show is achievable of
// them (GEMM efficiency, flash attention, NCCL bus bandwidths); each is
// cited where DeviceModel.cpp sets it.
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
  double flopsF32 = 0, flopsBf16 = 0; // per second, dense peaks
  /// Fractions of the peak that GEMMs (matmul, gemm) and fused attention
  /// reach at best (1: the peak; the CPU's rates are measured already).
  double gemmEfficiency = 1.0, attentionEfficiency = 1.0;
  double memBandwidth = 0; // bytes per second
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
  double launchOverhead = 0;                     // seconds per kernel
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
  /// A CPU's bf16 products run as bf16 (`native_bf16_products`, from
  /// fsdp-run --calibrate: oneDNN on AVX512-BF16 or AMX) and need no f32
  /// copies of their operands; false: they are widened like the rest.
  bool nativeBf16Products = false;
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
  /// factor where fitted, else with sharedNodeFactor.
  double rankComputeSeconds(int64_t flops, int64_t bytes, Type element,
                            llvm::StringRef op, int64_t ranksOnNode) const;
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

} // namespace mlir::fsdp

#endif // FSDP_COSTMODEL_DEVICEMODEL_H
