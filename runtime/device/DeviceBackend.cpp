//===- DeviceBackend.cpp - A plan's step on a device ----------------------===//
#include "runtime/device/DeviceBackend.h"
#include "runtime/exec/Executor.h"
#include "runtime/support/Half.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

namespace fsdp::device {

namespace {

class Backend final : public StepBackend {
public:
  explicit Backend(std::unique_ptr<Device> d) : dev(std::move(d)) {}

  std::string describe() const override { return dev->describe(); }

  Status init(const Plan &p, Comm &comm,
              const std::vector<std::vector<uint8_t>> &constants) override;
  void *input(size_t i) override { return inputs[i]; }
  Status push(const HostState &s) override;
  Status pull(const HostState &s) override { return move(s, false); }
  Status run(bool update, double lrScale, int64_t step, int64_t drawStep,
             const PendingUpdate &pending) override;
  Status runPending(const PendingUpdate &pending) override;
  Status readScalar(const TensorRef &t, double &value) override {
    if (t.dtype == DType::F32) {
      float v = 0;
      FSDP_RETURN_IF_ERROR(dev->download(&v, mem.at(t), 4));
      value = v;
      return Status::ok();
    }
    uint16_t h = 0; // bf16 or f16 (the Executor reads no other scalar)
    FSDP_RETURN_IF_ERROR(dev->download(&h, mem.at(t), 2));
    value = t.dtype == DType::BF16 ? floatFromBf16(h) : floatFromF16(h);
    return Status::ok();
  }
  int64_t peakBytes() override {
    peak = std::max(peak, dev->memoryInUse());
    return peak;
  }
  int64_t arenaHighWater() override;
  int64_t hostBytes() override { return hostStateBytes; }

private:
  std::unique_ptr<Device> dev;
  const Plan *plan = nullptr;
  Memory mem;
  int64_t arenaBytes = 0, peak = 0;
  int64_t hostStateBytes = 0; // offload's part of the host pool
  bool dumped = false;        // FSDP_DEVICE_DUMP_ARENA
  std::vector<void *> inputs; // host memory the device reads
  /// The step scalars (StepScalar) of this step, then of the pending
  /// update.
  double *hostScalars = nullptr, *deviceScalars = nullptr;
  /// Offload: what host work is lowered over: `mem`, with scratch, widened
  /// copies, schedule scalars, step scalars and error flag of its own in
  /// host memory.
  Memory hostMem;
  /// The step's program (with the deferred update of the previous step,
  /// where the plan has one), the update, the program without the deferred
  /// update (the first step after a start or a resume), the deferred update
  /// alone, and the casts refilling offload's device copies after a push.
  enum Sequence { kProgram, kUpdate, kFresh, kDeferred, kRefresh };
  std::vector<DeviceOp> sequences[5];
  bool hasDeferred = false;

  /// Which of a program's instructions a sequence runs.
  enum class Take { All, Immediate, Deferred };
  Status lowerAll(const std::vector<Instruction> &list, const char *what,
                  std::vector<DeviceOp> &out, Take take = Take::All);
  Status runSequence(Sequence which);
  Status move(const HostState &s, bool toDevice);
};

/// Places many buffers in one allocation (no per-buffer allocation
/// granularity; the memory the plan predicts is what the device holds):
/// requests first, then one block, 256-byte aligned offsets.
class Carve {
public:
  template <typename T> void add(int64_t bytes, T *&at) {
    at = nullptr;
    int64_t offset = size;
    size += (std::max<int64_t>(bytes, 8) + 255) / 256 * 256;
    places.push_back([offset, &at](uint8_t *base) {
      at = reinterpret_cast<T *>(base + offset);
    });
  }
  int64_t bytes() const { return size; }
  Status place(Device &dev, bool host) {
    void *base = nullptr;
    FSDP_RETURN_IF_ERROR(
        dev.allocate(std::max<int64_t>(size, 256), host, &base));
    for (auto &f : places)
      f(static_cast<uint8_t *>(base));
    return Status::ok();
  }

private:
  int64_t size = 0;
  std::vector<std::function<void(uint8_t *)>> places;
};

Status Backend::init(const Plan &p, Comm &,
                     const std::vector<std::vector<uint8_t>> &constants) {
  plan = &p;
  Carve device, host;
  // 64-byte aligned (the planner's offsets), filled below with the pattern
  // the high-water scan looks for.
  arenaBytes = (std::max<int64_t>(p.arenaBytes, 64) + 63) / 64 * 64;
  device.add(arenaBytes, mem.arena);
  bool adam = p.train.optimizer == "adamw";
  size_t slots = p.slotCount();
  mem.params.assign(slots, nullptr);
  mem.grads.assign(slots, nullptr);
  mem.first.assign(slots, nullptr);
  mem.second.assign(slots, nullptr);
  mem.started.assign(slots, nullptr);
  uint8_t *started = nullptr;
  device.add((int64_t)slots, started);
  for (size_t i = 0; i < slots; ++i) {
    int64_t bytes = p.slotNumel(i) * 4;
    if (bytes == 0)
      continue;
    // Offload: an offloaded shard and its optimizer state in host memory.
    bool offloaded =
        i >= p.params.size() && !p.flats[i - p.params.size()].offload.empty();
    Carve &at = offloaded ? host : device;
    at.add(bytes, mem.params[i]);
    if (!p.slotTrainable(i))
      continue;
    at.add(bytes, mem.first[i]);
    if (adam)
      at.add(bytes, mem.second[i]);
    if (!p.update.empty())
      device.add(bytes, mem.grads[i]);
  }
  // Offload: the host arena, the host buffers kept from step to step, and
  // the device copies of offloaded shards.
  if (p.hostArenaBytes > 0)
    host.add(p.hostArenaBytes, mem.host);
  mem.hostBuffers.assign(p.hostBuffers.size(), nullptr);
  for (size_t i = 0; i < p.hostBuffers.size(); ++i)
    host.add(p.hostBuffers[i].bytes(), mem.hostBuffers[i]);
  hostStateBytes = host.bytes(); // (the host pool's first requests)
  mem.deviceCopies.assign(slots, nullptr);
  for (size_t f = 0; f < p.flats.size(); ++f)
    if (p.flats[f].hasDeviceCopy())
      device.add(p.flats[f].shardNumel * dtypeSize(p.flats[f].deviceCopy),
                 mem.deviceCopies[p.params.size() + f]);
  mem.constants.assign(constants.size(), nullptr);
  for (size_t i = 0; i < constants.size(); ++i)
    device.add((int64_t)constants[i].size(), mem.constants[i]);
  // (Host work has scratch of its own, in host memory.)
  int64_t scratch = 8, widened = 16, hostScratch = 8, hostWidened = 16;
  for (const auto *list : {&p.program, &p.update})
    for (const Instruction &in : *list) {
      bool onHost = in.attrBool("on_host", false);
      int64_t &s = onHost ? hostScratch : scratch;
      int64_t &w = onHost ? hostWidened : widened;
      s = std::max(s, scratchBytes(in));
      w = std::max(w, widenedBytes(in));
      hasDeferred = hasDeferred || in.deferred;
    }
  device.add(scratch, mem.scratch);
  device.add(widened, mem.widened);
  device.add(16, mem.schedule);
  device.add(8, mem.error);
  device.add(2 * kStepScalars * sizeof(double), deviceScalars);
  host.add(2 * kStepScalars * sizeof(double), hostScalars);
  host.add(hostScratch, hostMem.scratch);
  host.add(hostWidened, hostMem.widened);
  host.add(16, hostMem.schedule);
  host.add(8, hostMem.error);
  inputs.assign(p.inputs.size(), nullptr);
  for (size_t i = 0; i < p.inputs.size(); ++i)
    host.add(p.inputs[i].bytes(), inputs[i]);
  FSDP_RETURN_IF_ERROR(device.place(*dev, false));
  FSDP_RETURN_IF_ERROR(host.place(*dev, true));
  mem.stepScalars = deviceScalars;
  for (size_t i = 0; i < slots; ++i)
    mem.started[i] = started + i;
  {
    // Host work sees everything the device does, with its own scalars.
    Memory h = mem;
    h.scratch = hostMem.scratch;
    h.widened = hostMem.widened;
    h.schedule = hostMem.schedule;
    h.error = hostMem.error;
    h.stepScalars = hostScalars;
    hostMem = std::move(h);
  }
  FSDP_RETURN_IF_ERROR(dev->fill(mem.arena, kArenaPattern, arenaBytes));
  for (size_t i = 0; i < constants.size(); ++i)
    FSDP_RETURN_IF_ERROR(dev->upload(mem.constants[i], constants[i].data(),
                                     (int64_t)constants[i].size()));

  // Each run starts by copying the step's scalars and the batch in, so a
  // captured sequence reads new values when replayed.
  for (auto &list : sequences)
    list.clear();
  auto scalarsIn = [&](std::vector<DeviceOp> &out) {
    out.push_back({1, Copy{hostScalars, deviceScalars,
                           2 * kStepScalars * (int64_t)sizeof(double)}});
  };
  for (Sequence which : {kProgram, kFresh}) {
    if (which == kFresh && !hasDeferred)
      break;
    std::vector<DeviceOp> &out = sequences[which];
    scalarsIn(out);
    for (size_t i = 0; i < p.inputs.size(); ++i)
      if (p.inputs[i].bytes() > 0)
        out.push_back(
            {1, Copy{inputs[i], mem.at(p.inputs[i]), p.inputs[i].bytes()}});
    FSDP_RETURN_IF_ERROR(lowerAll(
        p.program, "", out, which == kFresh ? Take::Immediate : Take::All));
  }
  if (hasDeferred) {
    scalarsIn(sequences[kDeferred]);
    FSDP_RETURN_IF_ERROR(lowerAll(
        p.program, "pending update: ", sequences[kDeferred], Take::Deferred));
  }
  if (!p.update.empty()) {
    std::vector<DeviceOp> &out = sequences[kUpdate];
    scalarsIn(out);
    FSDP_RETURN_IF_ERROR(lowerAll(p.update, "update ", out));
    for (size_t i = 0; i < slots; ++i)
      if (mem.grads[i])
        out.push_back({1, Zero{mem.grads[i], p.slotNumel(i) * 4}});
  }
  // Offload's device copies (and host buffers that are casts of a shard),
  // refilled from the shards after a push.
  for (const Instruction &cast : p.copyRefills())
    if (Status s = lower(cast, mem, dev->comm(), sequences[kRefresh]); !s)
      return s.withContext("refilling the copy of an offloaded shard");
  peak = dev->memoryInUse();
  return Status::ok();
}

Status Backend::lowerAll(const std::vector<Instruction> &list, const char *what,
                         std::vector<DeviceOp> &out, Take take) {
  // FSDP_DEVICE_STOP_AFTER=K (a diagnostic, with FSDP_DEVICE_DUMP_ARENA):
  // the step program ends after its instruction K, so the dumped arena
  // holds what the instructions up to K wrote.
  size_t count = list.size();
  if (const char *k = std::getenv("FSDP_DEVICE_STOP_AFTER"); k && !*what)
    count = std::min(count, (size_t)std::strtoll(k, nullptr, 10) + 1);
  // Deferred instructions (a pending update) read the pending scalars.
  Memory pendingMem = mem, pendingHostMem = hostMem;
  pendingMem.stepScalars = deviceScalars + kStepScalars;
  pendingHostMem.stepScalars = hostScalars + kStepScalars;
  for (size_t i = 0; i < count; ++i) {
    const Instruction &in = list[i];
    if ((take == Take::Immediate && in.deferred) ||
        (take == Take::Deferred && !in.deferred))
      continue;
    Status s = Status::ok();
    if (in.attrBool("on_host", false)) {
      // Host work: its operations, over host memory, run on the host.
      auto ops = std::make_shared<std::vector<DeviceOp>>();
      s = lower(in, in.deferred ? pendingHostMem : hostMem, dev->comm(), *ops);
      if (s)
        out.push_back({1, HostWork{std::move(ops)}});
    } else {
      s = lower(in, in.deferred ? pendingMem : mem, dev->comm(), out);
    }
    if (!s)
      return s.withContext(std::string(what) + "instruction " +
                           std::to_string(i) + " (" + in.op + ")");
  }
  return Status::ok();
}

Status Backend::push(const HostState &s) {
  FSDP_RETURN_IF_ERROR(move(s, true));
  return runSequence(kRefresh);
}

Status Backend::move(const HostState &s, bool toDevice) {
  auto each = [&](std::vector<std::vector<float>> &host,
                  const auto &device) -> Status {
    for (size_t i = 0; i < host.size() && i < device.size(); ++i) {
      if (host[i].empty() || !device[i])
        continue;
      int64_t bytes = (int64_t)host[i].size() * 4;
      FSDP_RETURN_IF_ERROR(
          toDevice ? dev->upload(device[i], host[i].data(), bytes)
                   : dev->download(host[i].data(), device[i], bytes));
    }
    return Status::ok();
  };
  FSDP_RETURN_IF_ERROR(each(*s.values, mem.params));
  FSDP_RETURN_IF_ERROR(each(*s.first, mem.first));
  FSDP_RETURN_IF_ERROR(each(*s.second, mem.second));
  std::vector<char> &started = *s.started;
  if (!started.empty() && !mem.started.empty())
    FSDP_RETURN_IF_ERROR(toDevice
                             ? dev->upload(mem.started[0], started.data(),
                                           (int64_t)started.size())
                             : dev->download(started.data(), mem.started[0],
                                             (int64_t)started.size()));
  return Status::ok();
}

Status Backend::run(bool isUpdate, double lrScale, int64_t step,
                    int64_t drawStep, const PendingUpdate &pending) {
  hostScalars[kLrScale] = lrScale;
  hostScalars[kStep] = (double)step;
  hostScalars[kDrawStep] = (double)drawStep;
  hostScalars[kStepScalars + kLrScale] = pending.lrScale;
  hostScalars[kStepScalars + kStep] = (double)pending.step;
  hostScalars[kStepScalars + kDrawStep] = (double)pending.step;
  FSDP_RETURN_IF_ERROR(runSequence(isUpdate                      ? kUpdate
                                   : pending.due || !hasDeferred ? kProgram
                                                                 : kFresh));
  // FSDP_DEVICE_DUMP_ARENA=FILE (a diagnostic): the arena after the first
  // step's program, to compare backends byte for byte.
  if (const char *path = std::getenv("FSDP_DEVICE_DUMP_ARENA");
      path && !isUpdate && !dumped) {
    dumped = true;
    std::vector<uint8_t> bytes(plan->arenaBytes);
    FSDP_RETURN_IF_ERROR(
        dev->download(bytes.data(), mem.arena, (int64_t)bytes.size()));
    if (FILE *f = std::fopen(path, "wb")) {
      std::fwrite(bytes.data(), 1, bytes.size(), f);
      std::fclose(f);
    }
  }
  return Status::ok();
}

Status Backend::runPending(const PendingUpdate &pending) {
  if (!pending.due || !hasDeferred)
    return Status::ok();
  hostScalars[kStepScalars + kLrScale] = pending.lrScale;
  hostScalars[kStepScalars + kStep] = (double)pending.step;
  hostScalars[kStepScalars + kDrawStep] = (double)pending.step;
  return runSequence(kDeferred);
}

Status Backend::runSequence(Sequence which) {
  if (sequences[which].empty())
    return Status::ok();
  FSDP_RETURN_IF_ERROR(dev->run(sequences[which], which));
  // One synchronisation per run: the kernels' error flag (an index out of
  // range cannot return a Status from inside a kernel), the device's and
  // the host work's.
  int error = 0;
  FSDP_RETURN_IF_ERROR(dev->download(&error, mem.error, sizeof error));
  if (!error)
    error = *hostMem.error;
  if (error == kIndexOutOfRange)
    return Status::error("an index is out of range (gather or scatter_add)");
  if (error == kTargetOutOfRange)
    return Status::error("a loss target is out of range of its classes");
  if (error)
    return Status::error("a device kernel failed with code " +
                         std::to_string(error));
  peak = std::max(peak, dev->memoryInUse());
  return Status::ok();
}

int64_t Backend::arenaHighWater() {
  // From the top down, in chunks (of whole words) growing from 4 KiB to
  // 64 MiB: the top is usually written, so this is one small copy.
  int64_t chunk = 4096;
  std::vector<uint8_t> bytes;
  int64_t top = std::min(arenaBytes, (plan->arenaBytes + 7) / 8 * 8);
  while (top > 0) {
    int64_t begin = std::max<int64_t>(0, top - chunk);
    bytes.resize(top - begin);
    if (!dev->download(bytes.data(), mem.arena + begin, top - begin))
      return -1;
    if (int64_t end = writtenEnd(bytes.data(), top - begin))
      return std::min(plan->arenaBytes, begin + end);
    top = begin;
    chunk = std::min<int64_t>(chunk * 4, 64 << 20);
  }
  return 0;
}

} // namespace

std::unique_ptr<StepBackend> deviceBackend(std::unique_ptr<Device> device) {
  return std::make_unique<Backend>(std::move(device));
}

} // namespace fsdp::device
