//===- Plan.h - The compiler → runtime plan, loaded and checked -*- C++ -*-===//
//
// A plan is the JSON document fsdp-opt writes (passes/EmitPlan.cpp). Loading
// validates everything the executor relies on: the version, every tensor
// reference (space, bounds inside the arena, known dtype), every op name and
// its operand counts. A bad plan is a Status error, never a crash.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_PLAN_PLAN_H
#define FSDP_RUNTIME_PLAN_PLAN_H

#include "runtime/support/Finite.h"
#include "runtime/support/Status.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace fsdp {

constexpr int64_t kPlanVersion = 1;

/// BF16 and F16 are stored and communicated; kernels compute in f32.
enum class DType { F32, I64, I1, BF16, F16 };
/// Widened: a backend's f32 copies of bf16/f16 tensors (runtime/plan/Widen.h),
/// never in a plan file. Offload: Host, a step's buffers in host memory (by
/// byte offset in the host arena); DeviceCopy, the gather-dtype copy of an
/// offloaded shard kept on the device (by slot); HostBuffer, host memory
/// kept from one step to the next (by index in Plan::hostBuffers).
enum class Space {
  Arena,
  Param,
  Const,
  Grad,
  Widened,
  Host,
  DeviceCopy,
  HostBuffer
};

int64_t dtypeSize(DType t);
const char *dtypeName(DType t);

struct TensorRef {
  Space space = Space::Arena;
  int64_t offset = 0; // arena byte offset
  int64_t index = 0;  // param, constant or gradient-accumulator index
  std::vector<int64_t> shape;
  DType dtype = DType::F32;
  std::string name; // inputs and outputs only

  int64_t numel() const;
  int64_t bytes() const { return numel() * dtypeSize(dtype); }
  int64_t rank() const { return (int64_t)shape.size(); }
};

/// The address of `t` given each space's storage: arena and widened copies
/// by byte offset, parameters, constants and gradient accumulators by
/// index (the CPU executor's Context and the device backend's Memory).
template <typename P, typename C, typename G>
void *tensorAddress(const TensorRef &t, uint8_t *arena,
                    const std::vector<P *> &params,
                    const std::vector<C *> &constants,
                    const std::vector<G *> &grads, uint8_t *widened,
                    uint8_t *host = nullptr,
                    const std::vector<uint8_t *> *deviceCopies = nullptr,
                    const std::vector<uint8_t *> *hostBuffers = nullptr) {
  switch (t.space) {
  case Space::Host:
    return host ? host + t.offset : nullptr;
  case Space::HostBuffer:
    return hostBuffers ? (*hostBuffers)[t.index] : nullptr;
  case Space::DeviceCopy:
    return deviceCopies ? (*deviceCopies)[t.index] : nullptr;
  case Space::Arena:
    return arena + t.offset;
  case Space::Param:
    return params[t.index];
  case Space::Const:
    return const_cast<void *>(static_cast<const void *>(constants[t.index]));
  case Space::Grad:
    return grads[t.index];
  case Space::Widened:
    return widened + t.offset;
  }
  return nullptr;
}

struct ParamInfo {
  std::string name, modulePath, source, location;
  std::vector<int64_t> shape;
  DType dtype = DType::F32;
  bool trainable = false;
  int64_t offset = 0, length = 0;
  /// Sharded plans: the flat parameter holding it (-1: stored whole) and
  /// its element offset in the flat buffer.
  int64_t flat = -1, flatOffset = 0;
  int64_t numel() const;
  /// Trained parameters must be finite; buffers and frozen ones may hold
  /// ±inf (masks), never NaN.
  ValueRule valueRule() const {
    return trainable ? ValueRule::Finite : ValueRule::NoNaN;
  }
};

/// A unit's parameters laid end to end, padded to `shardNumel * groupSize`
/// elements; each rank stores shard `rank` (elements [rank * shardNumel,
/// (rank + 1) * shardNumel)).
struct FlatInfo {
  std::string name, unit;
  int64_t shardNumel = 0, numel = 0, groupSize = 1;
  bool trainable = false;
  std::vector<int64_t> params, offsets;
  /// Offload: "" (on the device), "optimizer" (the shard and its optimizer
  /// state in host memory, a copy in `deviceCopy` on the device) or "all".
  std::string offload;
  DType deviceCopy = DType::F32;
  bool hasDeviceCopy() const { return offload == "optimizer"; }
};

struct ConstantInfo {
  std::vector<int64_t> shape;
  DType dtype = DType::F32;
  std::vector<double> values; // one value when splat
  /// The values of an i64 constant, exactly (a double holds integers to
  /// 2^53 only: a hash's modulus, an id past it); one when splat.
  std::vector<int64_t> ints;
  bool splat = false;
};

/// Whether a program's op starts a collective (its result is complete at
/// the `wait` that names it).
inline bool isCollective(const std::string &op) {
  return op == "all_gather_start" || op == "reduce_scatter_start" ||
         op == "all_reduce";
}

struct Instruction {
  std::string op;
  std::vector<TensorRef> in, out;
  nlohmann::json attrs;
  /// Unique over program and update: a collective's request slot.
  int64_t index = -1;
  /// For `wait`: the index of the collective (or offload copy) it
  /// completes, and whether it is a copy.
  int64_t start = -1;
  bool completesCopy = false;
  /// Offload: part of an update of the previous step, run before this
  /// step first reads its shard (`deferred` in the plan): skipped where no
  /// update is pending, run alone to bring the state up to date.
  bool deferred = false;
  /// fsdp-simulate's predicted start and end (seconds; -1 when absent).
  double predictedStart = -1, predictedEnd = -1;
  /// The flops and bytes fsdp-simulate priced it at (-1: not recorded).
  int64_t costFlops = -1, costBytes = -1;

  /// Attribute `name` of the expected type, or `dflt` when it is absent or
  /// of another type (backends check values they depend on).
  int64_t attrInt(const char *name, int64_t dflt) const;
  double attrFloat(const char *name, double dflt) const;
  bool attrBool(const char *name, bool dflt) const;
  std::string attrString(const char *name, const char *dflt) const;
};

/// An FSDP unit, for reports.
struct UnitInfo {
  std::string name;
  std::vector<int64_t> params;
  bool reshardAfterForward = true;
  int64_t reshardTo = 0;
};

struct TrainOptions {
  std::string loss = "auto", optimizer = "adamw", lrSchedule = "constant";
  int64_t warmupSteps = 0, totalSteps = 0, gradAccum = 1;
  double gradClip = 0;
};

struct Plan {
  std::string source; // the ONNX model the initial weights come from
  /// Where a file named `source` (a traced model's MLIR names its weights):
  /// the directory the user named; the rest of `source` below it is opened
  /// without following links (InputFile::openInside). Empty: `source` is
  /// a path the user typed (the ONNX model given to fsdp-opt).
  std::string sourceBase;
  std::string digest; // of the plan's text, as fsdp-opt sealed it (loadPlan)
  int64_t worldSize = 1;
  int64_t arenaBytes = 0;
  /// Offload: the step's buffers in host memory (Space::Host), and host
  /// memory kept from one step to the next (Space::HostBuffer: shape and
  /// dtype of each).
  int64_t hostArenaBytes = 0;
  std::vector<TensorRef> hostBuffers;
  /// Per host buffer, the slot of the shard it is a cast of (-1: none).
  std::vector<int64_t> hostBufferCopyOf;
  TrainOptions train;
  std::string strategy = "no-shard";
  /// Mixed precision (for reports; the instructions carry their dtypes).
  std::string paramDtype = "f32", reduceDtype = "f32", computeDtype = "f32";
  /// Hybrid sharding: replica groups; flats shard over worldSize / this.
  int64_t replicateGroups = 1;
  std::vector<ParamInfo> params;
  std::vector<FlatInfo> flats;
  std::vector<UnitInfo> units;
  /// fsdp-simulate's summary (device, times, bytes, memory timeline), as
  /// written; empty when the plan was not simulated.
  nlohmann::json predicted;
  std::vector<ConstantInfo> constants;
  std::vector<TensorRef> inputs, outputs;
  std::vector<Instruction> program;
  /// With gradient accumulation: the update run once per optimizer step,
  /// after train.gradAccum runs of `program` (empty otherwise).
  std::vector<Instruction> update;
  std::vector<TensorRef> updateOutputs;

  /// Storage slots (Space::Param and Space::Grad indices, optimizer state):
  /// the parameters, then the flat parameters' shards. A parameter that
  /// lives in a flat buffer has an empty slot.
  size_t slotCount() const { return params.size() + flats.size(); }
  int64_t slotNumel(size_t slot) const;
  bool slotTrainable(size_t slot) const;
  std::string slotName(size_t slot) const;
  /// Offload: the casts that fill each offloaded shard's device copy and
  /// each host buffer that is a cast of a shard (Plan::hostBufferCopyOf)
  /// from the shard, as the plan's own refresh rounds them; a backend runs
  /// them where the shards changed outside a step (loaded, restored).
  std::vector<Instruction> copyRefills() const;
};

/// A name the runtime acts on (a strategy, an attribute's choice) that must
/// be one of `allowed`: anything else would fall back to a default and
/// train differently with exit 0. The error reads
/// "WHAT: 'VALUE' is not one of A, B".
Status checkChoice(const std::string &what, const std::string &value,
                   const std::vector<const char *> &allowed);

/// The largest tensor rank a plan may hold (checked at plan load).
constexpr size_t kMaxRank = 8;

/// Validates an instruction's op (a row of common/Ops.def), operand and
/// result counts, choice attributes and where it writes
/// (plan/CheckInstruction.cpp); an unknown op is an error.
Status checkInstruction(const Plan &plan, const Instruction &instr);

/// Parses and validates a plan held in memory (the fuzzing entry point).
Status parsePlan(const std::string &text, Plan &plan);
/// Reads and validates the plan at `path`.
Status loadPlan(const std::string &path, Plan &plan);

} // namespace fsdp

#endif // FSDP_RUNTIME_PLAN_PLAN_H
