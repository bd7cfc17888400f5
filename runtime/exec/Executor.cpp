//===- Executor.cpp - Runs a plan's training step on the CPU --------------===//
#include "runtime/exec/Executor.h"

#include "runtime/support/Half.h"
#include <algorithm>

#include <cblas.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <utility>

namespace fsdp {

/// The storage slot holding parameter `i` (itself, or its flat buffer).
static size_t slotOf(const Plan &plan, size_t i) {
  return plan.params[i].flat < 0 ? i : plan.params.size() + plan.params[i].flat;
}

Status Executor::init(const Plan &p, Comm &comm_,
                      std::unique_ptr<StepBackend> backend_,
                      const std::function<Status()> &loadWeights) {
  plan = &p;
  backend = std::move(backend_);
  hostNewer = true;
  backendNewer = false;
  pending = Status::ok();
  // Kernels parallelise with OpenMP; BLAS calls stay on the calling thread.
  openblas_set_num_threads(1);
  comm = &comm_;
  for (const ParamInfo &info : p.params)
    if (info.dtype != DType::F32)
      return Status::error("parameter '" + info.name +
                           "': only f32 parameters are supported");
  if (!p.flats.empty() && p.worldSize != comm_.size())
    return Status::error("the plan shards over " + std::to_string(p.worldSize) +
                         " ranks but " + std::to_string(comm_.size()) +
                         " are running");
  if (p.replicateGroups < 1 || p.worldSize % p.replicateGroups != 0)
    return Status::error("the plan's replicate_groups does not divide its "
                         "world size");
  // Partial resharding gathers within blocks: one block size per plan.
  int64_t blockSize = 0;
  for (const auto *list : {&p.program, &p.update})
    for (const Instruction &in : *list) {
      auto g = in.attrs.find("group");
      if (g == in.attrs.end() || !g->is_string() || *g != "block")
        continue;
      auto n = in.attrs.find("group_size");
      int64_t size =
          n != in.attrs.end() && n->is_number_integer() ? n->get<int64_t>() : 0;
      if (size < 1 || (blockSize && size != blockSize))
        return Status::error("the plan gathers over blocks of " +
                             std::to_string(blockSize) + " and " +
                             std::to_string(size) +
                             " ranks; one size is "
                             "supported");
      blockSize = size;
    }
  FSDP_RETURN_IF_ERROR(comm_.split(p.worldSize / p.replicateGroups, blockSize));
  // One communicator slot per instruction, and a spare one for agreements
  // (agree, gatherFull), usable from here on.
  spareSlot = (int64_t)(p.program.size() + p.update.size());
  comm->reserve(spareSlot + 1);
  slots.clear();
  for (size_t i = 0; i < p.slotCount(); ++i)
    slots.emplace_back(p.slotNumel(i), 0.0f);
  // The weights go in before anything else is touched: a reader's
  // transient copies (an ONNX file parsed whole) then never stack on the
  // arena and the optimizer moments, and the process peaks at the step, as
  // the plan predicts.
  if (loadWeights) {
    // Every rank learns whether every rank loaded (one that cannot read its
    // file would otherwise leave the others waiting at their first
    // collective until --comm-timeout).
    Status loaded = loadWeights();
    Status agreed = agree(loaded.isOk(), "loading the weights");
    FSDP_RETURN_IF_ERROR(loaded);
    FSDP_RETURN_IF_ERROR(agreed);
#ifdef __GLIBC__
    // The reader's freed buffers (protobuf strings below glibc's mmap
    // threshold) would otherwise stay resident in the heap for the run.
    malloc_trim(0);
#endif
  }

  // 64-byte aligned, as the planner aligned every offset. A backend keeps
  // its own arena.
  size_t bytes = (size_t)std::max<int64_t>(backend ? 0 : p.arenaBytes, 64);
  bytes = (bytes + 63) / 64 * 64;
  arena = {static_cast<uint8_t *>(std::aligned_alloc(64, bytes)), std::free};
  if (!arena)
    return Status::error("cannot allocate the " + std::to_string(bytes) +
                         "-byte arena");
  // A byte pattern no kernel writes by chance, so the highest byte a step
  // wrote can be found afterwards (arenaHighWater).
  std::memset(arena.get(), kArenaPattern, bytes);

  constants.clear();
  for (const ConstantInfo &c : p.constants) {
    int64_t n = 1;
    for (int64_t d : c.shape)
      n *= d;
    TensorRef t;
    t.shape = c.shape;
    t.dtype = c.dtype;
    std::vector<uint8_t> data(std::max<int64_t>(t.bytes(), 1));
    for (int64_t i = 0; i < n; ++i) {
      double v = c.splat ? c.values[0] : c.values[i];
      if (c.dtype == DType::F32) {
        float f = (float)v;
        std::memcpy(data.data() + i * 4, &f, 4);
      } else if (c.dtype == DType::I64) {
        int64_t x = c.ints.empty() ? (int64_t)v : c.ints[c.splat ? 0 : i];
        std::memcpy(data.data() + i * 8, &x, 8);
      } else if (c.dtype == DType::BF16 || c.dtype == DType::F16) {
        uint16_t h = c.dtype == DType::BF16 ? bf16FromFloat((float)v)
                                            : f16FromFloat((float)v);
        std::memcpy(data.data() + i * 2, &h, 2);
      } else {
        data[i] = v != 0;
      }
    }
    constants.push_back(std::move(data));
  }

  int64_t scratchNeed = 0, widenNeed = 0;
  for (const auto *list : {&p.update, &p.program})
    for (const Instruction &in : *list) {
      scratchNeed = std::max(scratchNeed, cpu::scratchFloats(in));
      if ((in.op == "adamw" || in.op == "sgd") && in.attrs.contains("lr") &&
          in.attrs["lr"].is_number())
        baseLr = in.attrs["lr"].get<double>();
    }
  kernels = compile(p.program);
  updateKernels = compile(p.update);
  for (const auto *list : {&kernels, &updateKernels})
    for (const CpuInstruction &k : *list)
      if (k.widening)
        widenNeed = std::max(widenNeed, k.widening->bytes);
  // The plan's widening buffer when it planned more (a plan for a CPU
  // without bf16 products run on one with them): its memory stays the
  // plan's. It cannot exceed what one instruction would widen if none ran
  // narrow (the simulator counts a subset of those).
  if (const auto it = p.predicted.find("widened_bytes");
      it != p.predicted.end()) {
    int64_t most = 0;
    for (const auto *list : {&p.update, &p.program})
      for (const Instruction &in : *list)
        if (std::optional<Widening> w = widen(in))
          most = std::max(most, w->bytes);
    if (!it->is_number_integer() || it->get<int64_t>() < 0 ||
        it->get<int64_t>() > most)
      return Status::error("plan.predicted.widened_bytes: expected a count "
                           "of bytes, at most the " +
                           std::to_string(most) +
                           " its instructions could widen");
    widenNeed = std::max(widenNeed, it->get<int64_t>());
  }
  // (A backend has its own scratch and accumulators: none here.)
  scratch.assign(std::max<int64_t>(backend ? 1 : (scratchNeed + 1) / 2, 1),
                 0.0);
  widened.assign(backend ? 0 : (widenNeed + 7) / 8, 0.0);

  optimizer = cpu::OptimizerState();
  bool adam = p.train.optimizer == "adamw";
  gradSums.clear();
  for (size_t i = 0; i < p.slotCount(); ++i) {
    int64_t n = p.slotTrainable(i) ? p.slotNumel(i) : 0;
    optimizer.first.emplace_back(n, 0.0f);
    optimizer.second.emplace_back(adam ? n : 0, 0.0f);
    optimizer.started.push_back(0);
    gradSums.emplace_back(p.update.empty() || backend ? 0 : n, 0.0f);
  }

  ctx = cpu::Context();
  ctx.arena = arena.get();
  for (auto &v : slots)
    ctx.params.push_back(v.empty() ? nullptr : v.data());
  for (auto &v : gradSums)
    ctx.grads.push_back(v.empty() ? nullptr : v.data());
  for (auto &v : constants)
    ctx.constants.push_back(v.data());
  ctx.scratch = reinterpret_cast<float *>(scratch.data());
  ctx.widened = reinterpret_cast<uint8_t *>(widened.data());
  // Offload: host memory and the device copies are buffers of their own
  // (a backend keeps its own).
  hostArena.assign(backend ? 0 : (p.hostArenaBytes + 7) / 8, 0.0);
  ctx.host = reinterpret_cast<uint8_t *>(hostArena.data());
  // The device copies of offloaded shards, and host buffers that are casts
  // of them (AdamW's fused copies), each filled by a cast of its shard
  // where the shard changed outside a step.
  fillCopies = backend ? std::vector<Instruction>() : p.copyRefills();
  deviceCopies.assign(p.slotCount(), {});
  for (size_t f = 0; f < p.flats.size(); ++f)
    if (p.flats[f].hasDeviceCopy() && !backend)
      deviceCopies[p.params.size() + f].assign(
          (p.flats[f].shardNumel * dtypeSize(p.flats[f].deviceCopy) + 7) / 8,
          0.0);
  for (auto &v : deviceCopies)
    ctx.deviceCopies.push_back(
        v.empty() ? nullptr : reinterpret_cast<uint8_t *>(v.data()));
  copiesStale = true;
  hostBuffers.clear();
  for (const TensorRef &b : p.hostBuffers)
    if (!backend)
      hostBuffers.emplace_back((std::max<int64_t>(b.bytes(), 1) + 7) / 8, 0.0);
  for (auto &v : hostBuffers)
    ctx.hostBuffers.push_back(reinterpret_cast<uint8_t *>(v.data()));
  hasDeferred = std::any_of(p.program.begin(), p.program.end(),
                            [](const Instruction &in) { return in.deferred; });
  updatePending = false;
  ctx.optimizer = &optimizer;
  ctx.comm = comm;
  timeline.assign(2 * spareSlot, 0.0);
  if (backend)
    if (Status s = backend->init(p, comm_, constants); !s)
      return s.withContext(backend->describe());
  return Status::ok();
}

/// The device copies of offloaded shards and the host buffers that are
/// casts of them, cast from the shards as the plan's own refresh rounds
/// them.
Status Executor::refreshDeviceCopies() {
  for (const Instruction &cast : fillCopies)
    FSDP_RETURN_IF_ERROR(cpu::kernelFor("cast")(cast, ctx));
  copiesStale = false;
  return Status::ok();
}

std::string Executor::describe() const {
  return backend ? backend->describe() : "cpu";
}

HostState Executor::hostState() {
  return {&slots, &optimizer.first, &optimizer.second, &optimizer.started};
}

Status Executor::syncHost() {
  FSDP_RETURN_IF_ERROR(drain());
  if (!backend || !backendNewer)
    return Status::ok();
  FSDP_RETURN_IF_ERROR(backend->pull(hostState()));
  backendNewer = false;
  return Status::ok();
}

void Executor::touchHost() {
  if (!backend)
    return;
  if (Status s = syncHost(); !s && pending)
    pending = s;
  hostNewer = true;
}

std::vector<Piece> Executor::piecesIn(std::vector<std::vector<float>> &storage,
                                      size_t i) {
  const ParamInfo &p = plan->params[i];
  std::vector<float> &slot = storage[slotOf(*plan, i)];
  if (slot.empty())
    return {}; // no such state (frozen: no optimizer moments)
  int64_t shardRank = comm->rank(Group::Shard);
  int64_t lo = p.flat < 0 ? 0 : shardRank * plan->flats[p.flat].shardNumel;
  int64_t at = p.flat < 0 ? 0 : p.flatOffset;
  std::vector<Piece> out;
  for (auto [begin, count] : ranges(*plan, i, shardRank))
    out.push_back({begin, count, slot.data() + (at + begin - lo)});
  return out;
}

std::vector<std::pair<int64_t, int64_t>>
Executor::ranges(const Plan &plan, size_t i, int64_t shardRank) {
  const ParamInfo &p = plan.params[i];
  if (p.flat < 0)
    return {{0, p.numel()}};
  const FlatInfo &f = plan.flats[p.flat];
  int64_t lo = shardRank * f.shardNumel, hi = lo + f.shardNumel;
  int64_t a = std::max(lo, p.flatOffset),
          b = std::min(hi, p.flatOffset + p.numel());
  if (a >= b)
    return {};
  return {{a - p.flatOffset, b - a}};
}

std::vector<Piece> Executor::statePieces(size_t i, State s) {
  // (A backend's pending update applies there, before the state comes.)
  if (Status d = drain(); !d && pending)
    pending = d;
  touchHost();
  copiesStale = true;
  auto &storage = s == State::Value   ? slots
                  : s == State::First ? optimizer.first
                                      : optimizer.second;
  return piecesIn(storage, i);
}

bool Executor::writesState(size_t i) const {
  return plan->params[i].flat >= 0 ? comm->rank(Group::Replicate) == 0
                                   : comm->rank() == 0;
}

bool Executor::momentumStarted(size_t i) const {
  // (With a backend, read after syncHost(): saveCheckpoint does.)
  return optimizer.started[slotOf(*plan, i)];
}

void Executor::setMomentumStarted(size_t i) {
  touchHost();
  optimizer.started[slotOf(*plan, i)] = 1;
}

Status Executor::agree(bool ok, const std::string &what) {
  float failed = ok ? 0.0f : 1.0f;
  FSDP_RETURN_IF_ERROR(sumOverRanks(&failed, 1));
  if (failed > 0)
    return Status::error(what + " failed on " + std::to_string((int)failed) +
                         " rank(s)");
  return Status::ok();
}

Status Executor::sumOverRanks(float *values, int64_t count) {
  // In place (every communicator takes in == out): nothing allocated, as
  // the step loop asks this every step.
  FSDP_RETURN_IF_ERROR(comm->allReduceStart(values, values, count, Elem::F32,
                                            false, spareSlot, Group::World));
  return comm->wait(spareSlot);
}

Status Executor::gatherFull(const std::vector<std::vector<float>> &storage,
                            std::vector<std::vector<float>> &full) {
  full.assign(plan->params.size(), {});
  for (size_t i = 0; i < plan->params.size(); ++i)
    if (plan->params[i].flat < 0 && i < storage.size())
      full[i] = storage[i];
  for (size_t f = 0; f < plan->flats.size(); ++f) {
    const FlatInfo &flat = plan->flats[f];
    size_t slot = plan->params.size() + f;
    // Whether a slot holds anything (frozen buffers have no optimizer
    // state) follows from the plan, so every rank skips the same ones.
    if (slot >= storage.size() ||
        (int64_t)storage[slot].size() != flat.shardNumel)
      continue;
    std::vector<float> buffer(flat.shardNumel * flat.groupSize);
    FSDP_RETURN_IF_ERROR(comm->allGatherStart(storage[slot].data(),
                                              buffer.data(), flat.shardNumel,
                                              sizeof(float), spareSlot));
    FSDP_RETURN_IF_ERROR(comm->wait(spareSlot));
    for (size_t k = 0; k < flat.params.size(); ++k) {
      const float *from = buffer.data() + flat.offsets[k];
      full[flat.params[k]].assign(from,
                                  from + plan->params[flat.params[k]].numel());
    }
  }
  return Status::ok();
}

Status Executor::gatherParams(std::vector<std::vector<float>> &full) {
  FSDP_RETURN_IF_ERROR(drain());
  FSDP_RETURN_IF_ERROR(syncHost());
  return gatherFull(slots, full);
}

int64_t Executor::arenaHighWater() const {
  if (backend)
    return backend->arenaHighWater();
  return writtenEnd(arena.get(), plan->arenaBytes);
}

int64_t writtenEnd(const uint8_t *data, int64_t top) {
  // Whole 8-byte words still holding the pattern were never written.
  while (top >= 8) {
    uint64_t word;
    std::memcpy(&word, data + top - 8, 8);
    if (word != 0x0101010101010101ull * kArenaPattern)
      break;
    top -= 8;
  }
  return top;
}

int64_t Executor::peakBytes() const {
  if (backend) // the device's memory, measured
    return backend->peakBytes();
  int64_t bytes =
      plan->arenaBytes + (int64_t)(scratch.size() + widened.size()) * 8;
  for (const auto &v : slots)
    bytes += (int64_t)v.size() * 4;
  for (size_t i = 0; i < optimizer.first.size(); ++i)
    bytes +=
        (int64_t)(optimizer.first[i].size() + optimizer.second[i].size()) * 4;
  for (const auto &c : constants)
    bytes += (int64_t)c.size();
  for (const auto &g : gradSums)
    bytes += (int64_t)g.size() * 4;
  bytes += (int64_t)hostArena.size() * 8;
  for (const auto &c : deviceCopies)
    bytes += (int64_t)c.size() * 8;
  for (const auto &b : hostBuffers)
    bytes += (int64_t)b.size() * 8;
  return bytes;
}

int64_t Executor::hostBytes() const {
  if (backend)
    return backend->hostBytes();
  int64_t bytes = (int64_t)hostArena.size() * 8;
  for (const auto &b : hostBuffers)
    bytes += (int64_t)b.size() * 8;
  for (size_t f = 0; f < plan->flats.size(); ++f) {
    if (plan->flats[f].offload.empty())
      continue;
    size_t slot = plan->params.size() + f;
    bytes += (int64_t)(slots[slot].size() + optimizer.first[slot].size() +
                       optimizer.second[slot].size()) *
             4;
  }
  return bytes;
}

double Executor::lrFactor(int64_t t) const {
  const TrainOptions &o = plan->train;
  if (o.warmupSteps > 0 && t < o.warmupSteps)
    return double(t + 1) / double(o.warmupSteps);
  if (o.lrSchedule == "cosine" && o.totalSteps > o.warmupSteps) {
    double progress =
        double(t - o.warmupSteps) / double(o.totalSteps - o.warmupSteps);
    progress = std::min(std::max(progress, 0.0), 1.0);
    return 0.5 * (1.0 + std::cos(M_PI * progress));
  }
  return 1.0;
}

std::vector<Executor::CpuInstruction>
Executor::compile(const std::vector<Instruction> &list) {
  std::vector<CpuInstruction> out;
  for (const Instruction &in : list)
    out.push_back({cpu::kernelFor(in.op),
                   cpu::runsNarrow(in) ? std::nullopt : widen(in)});
  return out;
}

Status Executor::run(const std::vector<Instruction> &program,
                     const std::vector<CpuInstruction> &kernels,
                     const char *what, bool deferredOnly) {
  static const cpu::Kernel castKernel = cpu::kernelFor("cast");
  // The pending update applies the previous step's gradients at that
  // step's optimizer step and learning rate.
  int64_t stepNow = optimizer.step;
  double lrNow = optimizer.lrScale;
  for (size_t i = 0; i < program.size(); ++i) {
    const Instruction &in = program[i];
    if (in.deferred ? !updatePending : deferredOnly)
      continue;
    optimizer.step = in.deferred ? pendingStep : stepNow;
    optimizer.lrScale = in.deferred ? pendingLrScale : lrNow;
    double begin = clock();
    Status s = Status::ok();
    if (const std::optional<Widening> &w = kernels[i].widening) {
      for (const Instruction &c : w->before)
        if (s)
          s = castKernel(c, ctx);
      if (s)
        s = kernels[i].kernel(w->twin, ctx);
      for (const Instruction &c : w->after)
        if (s)
          s = castKernel(c, ctx);
    } else {
      s = kernels[i].kernel(in, ctx);
    }
    if (!s)
      return s.withContext(std::string(what) + "instruction " +
                           std::to_string(i) + " (" + in.op + ")");
    // The measured timeline: [begin, end] of every instruction of the step
    // (preallocated: no allocation inside a step).
    if (in.index >= 0 && 2 * in.index + 1 < (int64_t)timeline.size()) {
      timeline[2 * in.index] = begin;
      timeline[2 * in.index + 1] = clock();
    }
  }
  optimizer.step = stepNow;
  optimizer.lrScale = lrNow;
  return Status::ok();
}

Status Executor::drain() {
  if (!updatePending)
    return Status::ok();
  Status s = backend ? backend->runPending({true, pendingLrScale, pendingStep})
                     : run(plan->program, kernels, "pending update: ", true);
  updatePending = false;
  backendNewer = backendNewer || backend != nullptr;
  return s;
}

Status Executor::step(int64_t t,
                      const std::function<Status(int64_t micro)> &loadBatch,
                      StepResult &result,
                      std::vector<std::vector<float>> *grads) {
  // A failed transfer or pending update since the last step.
  if (!pending)
    return std::exchange(pending, Status::ok());
  if (backend) {
    if (grads)
      return Status::error("capturing gradients needs the cpu backend");
    if (hostNewer) { // weights loaded or a checkpoint restored since
      FSDP_RETURN_IF_ERROR(backend->push(hostState()));
      hostNewer = false;
    }
    backendNewer = true;
  }
  // The plan refreshes the device copies after each update; where the
  // shards changed outside a step they are filled here first.
  if (!backend && copiesStale)
    FSDP_RETURN_IF_ERROR(refreshDeviceCopies());
  optimizer.step = t + 1 - skipped;
  optimizer.lrScale = lrFactor(t);
  if (grads)
    grads->assign(slots.size(), {});
  ctx.captureGrads = grads;
  auto runList = [&](bool update) -> Status {
    if (backend)
      return backend->run(update, optimizer.lrScale, optimizer.step,
                          optimizer.drawStep,
                          {updatePending, pendingLrScale, pendingStep});
    return update ? run(plan->update, updateKernels, "update ")
                  : run(plan->program, kernels, "");
  };
  auto scalar = [&](const std::vector<TensorRef> &outs, const std::string &name,
                    double &out) -> Status {
    // A float scalar in whatever float type the step computes it in: a
    // model cast to bf16 ends in a bf16 loss (read as f32, its two bytes
    // made the logged loss and gradient norm 0).
    for (const TensorRef &o : outs)
      if (o.name == name && o.numel() == 1 &&
          (o.dtype == DType::F32 || o.dtype == DType::BF16 ||
           o.dtype == DType::F16)) {
        if (backend)
          return backend->readScalar(o, out);
        if (o.dtype == DType::F32)
          out = *ctx.get<float>(o);
        else if (o.dtype == DType::BF16)
          out = floatFromBf16(*ctx.get<uint16_t>(o));
        else
          out = floatFromF16(*ctx.get<uint16_t>(o));
      }
    return Status::ok();
  };
  int64_t k = std::max<int64_t>(plan->train.gradAccum, 1);
  double lossSum = 0;
  for (int64_t m = 0; m < k; ++m) {
    FSDP_RETURN_IF_ERROR(loadBatch(t * k + m));
    // The timeline starts with the program, after the (first) batch is in.
    if (m == 0)
      stepStart = std::chrono::steady_clock::now();
    // Dropout's masks and fsdp.uniform's draws are keyed by the
    // micro-batch's number in the run, 1-based: each micro-step draws its
    // own, and a step after a skipped update draws anew (the optimizer's
    // step, AdamW's bias correction, does not advance over it).
    optimizer.drawStep = t * k + m + 1;
    FSDP_RETURN_IF_ERROR(runList(false));
    double loss = 0;
    FSDP_RETURN_IF_ERROR(scalar(plan->outputs, "loss", loss));
    lossSum += loss;
    FSDP_RETURN_IF_ERROR(scalar(plan->outputs, "grad_norm", result.gradNorm));
  }
  if (!plan->update.empty()) {
    FSDP_RETURN_IF_ERROR(runList(true));
    FSDP_RETURN_IF_ERROR(
        scalar(plan->updateOutputs, "grad_norm", result.gradNorm));
    for (auto &g : gradSums) // (a backend zeroes its own)
      std::fill(g.begin(), g.end(), 0.0f);
  }
  // Offload's deferred updates: this step's is pending until the next step
  // (or a drain) applies it; its gradients are captured now.
  if (hasDeferred) {
    updatePending = true;
    pendingStep = optimizer.step;
    pendingLrScale = optimizer.lrScale;
    if (grads)
      FSDP_RETURN_IF_ERROR(drain());
  }
  ctx.captureGrads = nullptr;
  result.updateSkipped = !std::isfinite(result.gradNorm);
  if (result.updateSkipped)
    ++skipped;
  result.loss = lossSum / k;
  result.lr = baseLr * optimizer.lrScale;
  result.computeSeconds = clock();
  return Status::ok();
}

} // namespace fsdp
