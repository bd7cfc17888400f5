//===- DeviceModel.h - What a device can do, for the cost model -*- C++ -*-===//
//
// Peak arithmetic per dtype, memory bandwidth, and the links between
// devices (within a node, across nodes): what the simulator needs to price
// a plan's instructions on a cluster that is not here. Built in: h100-sxm,
// h200, a100-80g (vendor datasheet figures, dense) and cpu (a 2-core
// development machine; calibrate your own with fsdp-run --calibrate). Any
// other name is read as a JSON file with the same fields.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_PASSES_DEVICEMODEL_H
#define FSDP_PASSES_DEVICEMODEL_H

#include "mlir/IR/Types.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <map>
#include <string>

namespace mlir::fsdp {

struct DeviceModel {
  std::string name;
  double flopsF32 = 0, flopsBf16 = 0;            // per second, dense
  double memBandwidth = 0;                       // bytes per second
  double intraBandwidth = 0, interBandwidth = 0; // bytes per second per device
  double intraLatency = 0, interLatency = 0;     // seconds
  double launchOverhead = 0;                     // seconds per kernel
  int64_t devicesPerNode = 1;
  /// Threads a rank's kernels run on (CPU: per-thread kernel scratch).
  int64_t threads = 1;
  /// Device memory a rank may plan into (0: unknown); --autotune's default
  /// budget.
  int64_t memoryBytes = 0;
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

  /// Seconds one op with these flops and bytes takes (a roofline).
  double computeSeconds(int64_t flops, int64_t bytes, Type element,
                        llvm::StringRef op = "") const;
  /// Seconds the op takes on one of `ranksOnNode` ranks sharing a node
  /// (0: a device of its own): computeSeconds with the op's per-thread
  /// factor where fitted, else with sharedNodeFactor.
  double rankComputeSeconds(int64_t flops, int64_t bytes, Type element,
                            llvm::StringRef op, int64_t ranksOnNode) const;
  /// Seconds of an all-gather / reduce-scatter (`allReduce` false) or an
  /// all-reduce of `bytes` (the full buffer) over `ranks` consecutive ranks:
  /// ring α-β, on the node's links when the group fits in a node.
  double collectiveSeconds(int64_t bytes, int64_t ranks, bool allReduce) const;
};

/// A built-in device by name, or a JSON description at that path.
llvm::Expected<DeviceModel> loadDeviceModel(llvm::StringRef nameOrPath);

} // namespace mlir::fsdp

#endif // FSDP_PASSES_DEVICEMODEL_H
