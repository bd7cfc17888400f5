//===- Simulate.cpp - Predicted time and memory of a planned step ---------===//
//
// A discrete-event simulation of the plan on a device model: the compute
// stream runs instructions in program order (a roofline per op from
// CostOpInterface); each collective runs on its stream (fsdp.stream) once
// its input is ready, its stream is free and so is the link it crosses
// (collectives running at once share a link's bandwidth, so they take
// turns on it: the node's bus within a node, its NICs across nodes), priced
// by a ring α-β model on the group's real topology; compute that overlaps
// a running collective is slowed by the SMs the collective's kernel holds
// (DeviceModel::overlapRate); a wait blocks the compute stream until its
// collective ends, and the time it blocks is exposed communication. Results:
//   - every instruction gets `fsdp.sim = array<f64: start, end>` (seconds);
//   - the module gets `fsdp.predicted`: device, step time (micro-steps times
//     the gradient accumulation, plus the update), compute, communication,
//     exposed communication, and peak bytes (the arena plus stored state).
// The memory timeline is fsdp-plan-memory's `fsdp.live_bytes`, drawn at
// the simulated times.
//
//===----------------------------------------------------------------------===//
#include "costmodel/DeviceModel.h"
#include "dialect/AttrNames.h"
#include "passes/Passes.h"
#include "passes/TrainStep.h"

#include "common/ComputeOps.h"
#include "common/CostRows.h"
#include "dialect/FsdpOps.h"

#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <map>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPSIMULATE
#include "passes/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// Ops the runtime does not execute (views of storage it already has).
bool isView(Operation *op) {
  return isStorageView(op) || isa<FreeOp, func::ReturnOp>(op);
}

Type elementOf(Operation *op) {
  for (Type t : op->getResultTypes())
    if (auto tt = dyn_cast<RankedTensorType>(t))
      return tt.getElementType();
  for (Type t : op->getOperandTypes())
    if (auto tt = dyn_cast<RankedTensorType>(t))
      return tt.getElementType();
  return {};
}

/// What eager PyTorch runs where torchtitan measured its Llama 3 figures
/// (pytorch/torchtitan at 1ea476e9f, docs/performance.md: compile = false):
/// one kernel per op, each reading and writing whole tensors.
///
/// Its RMSNorm (torchtitan/models/norms.py), `_norm(x.float()).type_as(x) *
/// weight` with `_norm(x) = x * rsqrt(x.pow(2).mean(-1, keepdim=True) +
/// eps)`, in f32 between the casts. For rms_norm, bytes per element of x
/// (e bytes each) and kernels:
///   x.float() e+4, pow 8, mean 4, add and rsqrt (per row), x * r 8,
///   type_as 4+e, * weight 2e: 4e + 28 bytes, 8 kernels;
/// for rms_norm_grad, autograd's backward of those ops:
///   dy * weight 2e, dweight = sum(dy * out) 4e, type_as' cast e+4,
///   g * r 8, dr = sum(g * x) 16, rsqrt and add (per row), the mean's
///   expand 4, pow's 2x * g 12, the two paths' sum 12, x.float()'s cast
///   4+e: 8e + 60 bytes, 12 kernels.
///
/// (FSDP2's own copies, torch/distributed/_composable/fsdp/
/// _fsdp_collectives.py of that time, are priced where its collectives are:
/// foreach_all_gather_copy_out after each all-gather, and
/// foreach_reduce_scatter's in-place pre-divide before each reduce-scatter.)
///
/// Its optimizer (train.py), torch.optim.AdamW(foreach=True): per f32
/// parameter, weight decay p *= 1 - lr·wd 8, m.lerp_(g) 12, v *= β2 8,
/// v.addcmul_(g, g) 12, sqrt(v) 8, / bias correction 8, + eps 8,
/// p.addcdiv_(m, denom) 16: 80 bytes (the fused kernel's 28), 8 kernels.
struct EagerCost {
  int64_t bytes = 0, kernels = 1;
};
std::optional<EagerCost> eagerCost(Operation *op) {
  if (auto adamw = dyn_cast<AdamWOp>(op)) {
    auto g = cast<RankedTensorType>(adamw.getGrad().getType());
    return EagerCost{g.getNumElements() * 80, 8};
  }
  if (!isa<RmsNormOp, RmsNormGradOp>(op))
    return std::nullopt;
  auto x = cast<RankedTensorType>(op->getOperand(0).getType());
  int64_t n = x.getNumElements(), e = (x.getElementTypeBitWidth() + 7) / 8;
  if (isa<RmsNormOp>(op))
    return EagerCost{n * (4 * e + 28), 8};
  return EagerCost{n * (8 * e + 60), 12};
}

struct Timing {
  double step = 0, compute = 0, comm = 0, exposed = 0;
  /// Offload: seconds of host-device copies and of host work (the host's
  /// optimizer and casts).
  double copy = 0, host = 0;
};

/// When compute starting at `start` with `seconds` of work at full speed
/// ends, running at `rate` inside the spans (start-ordered, possibly
/// overlapping) where collectives are in flight.
double finishAround(double start, double seconds, double rate,
                    const std::vector<std::pair<double, double>> &busy) {
  double t = start, left = seconds;
  for (auto [from, to] : busy) {
    if (left <= 0 || rate >= 1.0)
      break;
    if (to <= t)
      continue;
    if (from > t) { // full speed until the span opens
      double free = from - t;
      if (free >= left)
        return t + left;
      left -= free;
      t = from;
    }
    double slow = (to - t) * rate;
    if (slow >= left)
      return t + left / rate;
    left -= slow;
    t = to;
  }
  return t + left;
}

struct FsdpSimulate : mlir::fsdp::impl::FsdpSimulateBase<FsdpSimulate> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto model = loadDeviceModel(device);
    if (!model) {
      module.emitError("--device: ") << llvm::toString(model.takeError());
      return signalPassFailure();
    }
    if (devicesPerNode > 0)
      model->devicesPerNode = devicesPerNode;
    if (runtime != "fsdp" && runtime != "fsdp2-eager") {
      module.emitError("--simulate-runtime must be fsdp or fsdp2-eager, not '")
          << runtime << "'";
      return signalPassFailure();
    }
    Timing total;
    int64_t accum = 1;
    if (auto train =
            module->getAttrOfType<DictionaryAttr>(mlir::fsdp::attrs::train))
      if (auto k = train.getAs<IntegerAttr>("grad_accum"))
        accum = std::max<int64_t>(k.getInt(), 1);
    for (StringRef name : {"train_step", "apply_update"}) {
      auto func = module.lookupSymbol<func::FuncOp>(name);
      if (!func)
        continue;
      Timing t = simulate(func, *model);
      int64_t times = name == "train_step" ? accum : 1;
      total.step += t.step * times;
      total.compute += t.compute * times;
      total.comm += t.comm * times;
      total.exposed += t.exposed * times;
      total.copy += t.copy * times;
      total.host += t.host * times;
    }
    Builder b(&getContext());
    int64_t arena = 0;
    if (auto a =
            module->getAttrOfType<IntegerAttr>(mlir::fsdp::attrs::arenaBytes))
      arena = a.getInt();
    int64_t livePeak = arena;
    if (auto a = module->getAttrOfType<IntegerAttr>(
            mlir::fsdp::attrs::livePeakBytes))
      livePeak = a.getInt();
    int64_t hostState = 0;
    int64_t state = stateBytes(module, &hostState),
            scratch = scratchBytes(module, *model);
    int64_t hostArena = 0;
    if (auto a = module->getAttrOfType<IntegerAttr>(
            mlir::fsdp::attrs::hostArenaBytes))
      hostArena = a.getInt();
    int64_t commScratch = commScratchBytes(module, *model);
    int64_t ranks = ranksOnNode(module, *model);
    SmallVector<NamedAttribute> predicted({
            b.getNamedAttr("device", b.getStringAttr(model->name)),
            // The calibration file it was priced with ("": built in).
            b.getNamedAttr("device_file", b.getStringAttr(model->file)),
            b.getNamedAttr("step_seconds", b.getF64FloatAttr(total.step)),
            b.getNamedAttr("compute_seconds", b.getF64FloatAttr(total.compute)),
            b.getNamedAttr("comm_seconds", b.getF64FloatAttr(total.comm)),
            b.getNamedAttr("exposed_comm_seconds",
                           b.getF64FloatAttr(total.exposed)),
            b.getNamedAttr("arena_bytes", b.getI64IntegerAttr(arena)),
            // The most bytes live at one instruction: what a perfect
            // packing of the arena would need.
            b.getNamedAttr("live_peak_bytes", b.getI64IntegerAttr(livePeak)),
            b.getNamedAttr("state_bytes", b.getI64IntegerAttr(state)),
            // Offload: what a rank keeps in host memory (its offloaded
            // shards and their optimizer state, and the host arena), and
            // the step's host-device copies and host work.
            b.getNamedAttr("host_bytes",
                           b.getI64IntegerAttr(hostState + hostArena)),
            // The node's: every rank on it keeps as much (autotune checks
            // it against the node's host memory, when the device says).
            b.getNamedAttr("host_bytes_per_node",
                           b.getI64IntegerAttr((hostState + hostArena) *
                                               std::max<int64_t>(ranks, 1))),
            b.getNamedAttr("host_memory_bytes",
                           b.getI64IntegerAttr(model->hostMemoryBytes)),
            b.getNamedAttr("copy_seconds", b.getF64FloatAttr(total.copy)),
            b.getNamedAttr("host_seconds", b.getF64FloatAttr(total.host)),
            b.getNamedAttr("scratch_bytes", b.getI64IntegerAttr(scratch)),
            // Of which the f32 copies of widened ops (Widen.h): the CPU
            // backend holds this much for them at least, so its memory is
            // the plan's also where it runs more ops narrow than planned
            // (bf16 products on a CPU with AVX512-BF16, planned for one
            // without).
            b.getNamedAttr("widened_bytes",
                           b.getI64IntegerAttr(widenedBytes(module, *model))),
            // How ranks sharing a node were priced (what --fit-device
            // needs to turn measured times into per-thread factors).
            b.getNamedAttr("threads_per_rank",
                           b.getI64IntegerAttr(model->threadsPerRank(ranks))),
            b.getNamedAttr("thread_factor",
                           b.getF64FloatAttr(model->threadFactor(ranks))),
            b.getNamedAttr("oversubscription",
                           b.getF64FloatAttr(model->oversubscription(ranks))),
            b.getNamedAttr("peak_bytes",
                           b.getI64IntegerAttr(arena + state + scratch)),
            // The whole process: the plan's memory, the runtime's own
            // (libraries, MPI, BLAS buffers) and the temporaries MPI's
            // reductions allocate (the figure to hold against peak RSS).
            b.getNamedAttr("runtime_bytes",
                           b.getI64IntegerAttr(model->runtimeBytes)),
            b.getNamedAttr("comm_scratch_bytes",
                           b.getI64IntegerAttr(commScratch)),
            b.getNamedAttr("process_peak_bytes",
                           b.getI64IntegerAttr(arena + state + scratch +
                                               model->runtimeBytes +
                                               commScratch)),
        });
    // The factor fsdp-run's measured steps put on this calibration's
    // compute (DeviceModel::stepCorrection): fsdp-run divides it out of the
    // prediction when it records the step it measures.
    if (model->stepCorrection != 1.0)
      predicted.push_back(b.getNamedAttr(
          "step_correction", b.getF64FloatAttr(model->stepCorrection)));
    module->setAttr(mlir::fsdp::attrs::predicted,
                    b.getDictionaryAttr(predicted));
  }

  /// Ranks on one node (0 when the plan has no world size).
  int64_t ranksOnNode(ModuleOp module, const DeviceModel &model) {
    auto w = module->getAttrOfType<IntegerAttr>(mlir::fsdp::attrs::worldSize);
    return w ? std::min<int64_t>(w.getInt(), model.devicesPerNode) : 0;
  }

  Timing simulate(func::FuncOp func, const DeviceModel &model) {
    Builder b(&getContext());
    Timing t;
    // Ranks that share one CPU node each compute at their share of it.
    int64_t ranksOnNode =
        this->ranksOnNode(func->getParentOfType<ModuleOp>(), model);
    double compute = 0; // when the compute stream is free
    std::map<std::string, double> streams;
    double busFree = 0, netFree = 0; // when the node's links are free
    // Spans in which a collective's kernel runs, sorted by start.
    std::vector<std::pair<double, double>> busy;
    int64_t world = 1;
    if (auto w = func->getParentOfType<ModuleOp>()->getAttrOfType<IntegerAttr>(
            mlir::fsdp::attrs::worldSize))
      world = std::max<int64_t>(w.getInt(), 1);
    llvm::DenseMap<Value, double> ready;
    bool eager = runtime == "fsdp2-eager";
    // Without asynchronous progress: each started collective's stream and
    // duration, until its wait.
    llvm::DenseMap<Value, std::pair<std::string, double>> deferred;
    auto readyOf = [&](Value v) { return ready.lookup(v); };
    for (Operation &op : func.getBody().front()) {
      double start = compute, end = compute;
      if (isView(&op)) {
        double at = 0;
        for (Value v : op.getOperands())
          at = std::max(at, readyOf(v));
        for (Value r : op.getResults())
          ready[r] = at;
        continue;
      }
      bool gpuHost = model.hostToDevice > 0;
      if (auto copy = dyn_cast<CopyStartOp>(op)) {
        // Offload's copies. On a GPU: on the copy stream of their direction,
        // at the host link's rate (less while the other direction runs),
        // once their input is ready (a host value does not wait for the
        // compute stream that issued it). On the CPU: a memcpy in line.
        int64_t bytes = bufferBytes(copy.getInput().getType());
        bool toDevice = copy.getTo() == "device";
        if (!gpuHost) {
          start = std::max(compute, readyOf(copy.getInput()));
          double seconds = model.rankComputeSeconds(
              0, 2 * bytes, elementOf(&op), "copy", ranksOnNode);
          end = start + seconds;
          compute = end;
          t.compute += seconds;
          t.copy += seconds;
        } else {
          std::string s = toDevice ? "h2d" : "d2h";
          std::string other = toDevice ? "d2h" : "h2d";
          start = std::max(streams[s], readyOf(copy.getInput()));
          if (!isHostValue(copy.getInput()))
            start = std::max(start, compute);
          double rate = toDevice ? model.hostToDevice : model.deviceToHost;
          if (streams[other] > start)
            rate *= toDevice ? model.h2dWhileD2H : model.d2hWhileH2D;
          end = start + bytes / rate;
          streams[s] = end;
          t.copy += end - start;
        }
        ready[copy.getFuture()] = end;
      } else if (gpuHost && op.hasAttr(mlir::fsdp::attrs::onHost)) {
        // Host work (an offloaded shard's update, the cast that makes its
        // gather-dtype copy) on the host, beside the device's compute:
        // fsdp's fused kernels, or where FSDP2 is priced PyTorch's CPU
        // AdamW.
        int64_t bytes = 0;
        if (auto cost = dyn_cast<CostOpInterface>(op))
          bytes = cost.getBytesMoved();
        start = streams["host"];
        for (Value v : op.getOperands())
          start = std::max(start, readyOf(v));
        double seconds = model.hostSeconds(bytes, ranksOnNode,
                                           eager && isa<AdamWOp, SgdOp>(op));
        end = start + seconds;
        streams["host"] = end;
        t.host += seconds;
        for (Value r : op.getResults())
          ready[r] = end;
        if (annotate)
          op.setAttr(mlir::fsdp::attrs::cost,
                     b.getDenseI64ArrayAttr({0, bytes}));
      } else if (isCollectiveStart(&op)) {
        auto stream = op.getAttrOfType<StringAttr>(mlir::fsdp::attrs::stream);
        std::string s = stream ? stream.getValue().str() : "comm";
        Value in = op.getOperand(0);
        auto buffer =
            cast<FutureType>(op.getResult(0).getType()).getValueType();
        auto inType = cast<RankedTensorType>(in.getType());
        // The full (gathered or reduced) buffer's bytes.
        int64_t bytes = std::max(bufferBytes(buffer), bufferBytes(inType));
        int64_t ranks = op.getAttrOfType<IntegerAttr>("group_size").getInt();
        // Replica groups (hybrid-shard) take one rank of each shard group:
        // ranks a shard group apart, usually one per node.
        auto group = op.getAttrOfType<StringAttr>("group");
        int64_t stride =
            group && group.getValue() == "replicate" ? world / ranks : 1;
        double seconds =
            model.collectiveSeconds(bytes, ranks, isa<AllReduceOp>(op), stride);
        if (eager && ranks > 1 && isa<ReduceScatterStartOp>(op)) {
          // FSDP2's foreach_reduce_scatter divides its input by the
          // pre-divide factor in place (tensor.div_, a factor > 1 for any
          // group of 2 or more) before the reduce-scatter, and the compute
          // stream waits for that copy-in to finish: the reduced bytes
          // read and written once more, in line with compute.
          double div = model.rankComputeSeconds(0, 2 * bufferBytes(inType),
                                                inType.getElementType(), "div",
                                                ranksOnNode);
          double from = std::max(compute, readyOf(in));
          compute = finishAround(from, div, model.overlapRate(), busy);
          t.compute += compute - from;
          ready[in] = compute;
        }
        bool net = model.crossesNodes(ranks, stride);
        bool bus = !net || stride < model.devicesPerNode;
        t.comm += seconds;
        if (!model.progressesBesideCompute(ranksOnNode)) {
          // Nothing moves until a wait progresses it (priced there).
          deferred[op.getResult(0)] = {s, seconds};
          continue;
        }
        start = std::max(streams[s], std::max(readyOf(in), compute));
        if (bus)
          start = std::max(start, busFree);
        if (net)
          start = std::max(start, netFree);
        end = start + seconds;
        streams[s] = end;
        // Sorted by start: a collective issued later can start earlier
        // than one queued behind a busy stream.
        busy.insert(std::upper_bound(busy.begin(), busy.end(),
                                     std::make_pair(start, end)),
                    {start, end});
        if (bus)
          busFree = end;
        if (net)
          netFree = end;
        ready[op.getResult(0)] = end;
      } else if (auto wait = dyn_cast<WaitOp>(op)) {
        if (auto d = deferred.find(wait.getFuture()); d != deferred.end()) {
          auto &[s, seconds] = d->second;
          double begin = std::max(streams[s], compute);
          streams[s] = begin + seconds;
          ready[wait.getFuture()] = begin + seconds;
          if (annotate)
            wait.getFuture().getDefiningOp()->setAttr(
                mlir::fsdp::attrs::sim,
                b.getDenseF64ArrayAttr({begin, begin + seconds}));
        }
        double done = readyOf(wait.getFuture());
        if (done > compute)
          t.exposed += done - compute;
        compute = std::max(compute, done);
        start = end = compute;
        if (auto gather =
                eager ? wait.getFuture().getDefiningOp<AllGatherStartOp>()
                      : AllGatherStartOp();
            gather) {
          // FSDP2 gathers into one flat buffer, then copies each parameter
          // out of it on the compute stream (foreach_all_gather_copy_out):
          // the gathered bytes read and written once more.
          auto gathered =
              cast<FutureType>(gather.getResult().getType()).getValueType();
          double seconds =
              model.rankComputeSeconds(0, 2 * bufferBytes(gathered),
                                       elementOf(gather), "copy", ranksOnNode);
          end = finishAround(compute, seconds, model.overlapRate(), busy);
          t.compute += end - compute;
          compute = end;
        }
        ready[wait.getResult()] = compute;
      } else {
        int64_t flops = 0, bytes = 0;
        if (auto cost = dyn_cast<CostOpInterface>(op)) {
          flops = cost.getFlops();
          bytes = cost.getBytesMoved();
        }
        for (Value v : op.getOperands())
          start = std::max(start, readyOf(v));
        double launches = 0;
        if (eager)
          if (auto cost = eagerCost(&op)) {
            bytes = cost->bytes;
            launches = double(cost->kernels - 1) * model.launchOverhead;
          }
        Type element = elementOf(&op);
        // Fitted costs of the op on narrow tensors ("matmul.bf16") apply
        // however the CPU runs it: its result's type, or its first
        // operand's where that is narrow and the result is not (a pack of
        // bf16 gradients into an f32 buffer widens every element, ten times
        // a copy's cost). FitDevice.cpp keys its fit the same way.
        Type keyed = element;
        if (keyed && !keyed.isBF16() && !keyed.isF16() &&
            op.getNumOperands() > 0)
          if (auto first =
                  dyn_cast<RankedTensorType>(op.getOperand(0).getType()))
            if (first.getElementType().isBF16() ||
                first.getElementType().isF16())
              keyed = first.getElementType();
        StringRef narrow = !keyed           ? ""
                           : keyed.isBF16() ? "bf16"
                           : keyed.isF16()  ? "f16"
                                            : "";
        if (model.cores > 0)
          widenOnCpu(op, model, element, bytes);
        StringRef name = op.getName().stripDialect();
        int64_t rows = 0;
        if (op.getNumOperands() > 0)
          if (auto first =
                  dyn_cast<RankedTensorType>(op.getOperand(0).getType()))
            rows = ::fsdp::costRows(std::string_view(name.data(), name.size()),
                                    first.getShape().data(), first.getRank());
        // A binary op on the CPU kernel's strided loop is fitted apart.
        std::string_view variant;
        if (op.getNumOperands() == 2 && op.getNumResults() == 1) {
          auto a = dyn_cast<RankedTensorType>(op.getOperand(0).getType());
          auto b2 = dyn_cast<RankedTensorType>(op.getOperand(1).getType());
          auto y = dyn_cast<RankedTensorType>(op.getResult(0).getType());
          if (a && b2 && y)
            variant = ::fsdp::costVariant(
                std::string_view(name.data(), name.size()), a.getShape().data(),
                a.getRank(), b2.getShape().data(), b2.getRank(),
                y.getShape().data(), y.getRank(),
                a.getElementType() == y.getElementType() &&
                    b2.getElementType() == y.getElementType() &&
                    (y.getElementType().isF32() ||
                     y.getElementType().isBF16() ||
                     y.getElementType().isF16()));
        }
        // On a CPU, a loop too small to split over the threads is fitted
        // apart too (its largest tensor's elements; CostRows.h).
        if (variant.empty() && model.cores > 0) {
          int64_t largest = 0;
          for (Type type : llvm::concat<const Type>(op.getOperandTypes(),
                                                    op.getResultTypes()))
            if (auto tt = dyn_cast<RankedTensorType>(type))
              if (tt.hasStaticShape())
                largest = std::max(largest, tt.getNumElements());
          if (::fsdp::serialOnCpu(std::string_view(name.data(), name.size()),
                                  largest))
            variant = "serial";
        }
        double seconds = model.rankComputeSeconds(
                             flops, bytes, element, name, ranksOnNode, narrow,
                             rows, StringRef(variant.data(), variant.size())) +
                         launches;
        // A matmul's lhs_sums (fsdp-fuse-bias-grad): a GPU's GEMM epilogue
        // sums as it reads, a CPU runs the reduction it replaced after it.
        if (auto mm = dyn_cast<MatmulOp>(op); mm && mm.getLhsSums() &&
                                               model.cores > 0) {
          auto lhs = cast<RankedTensorType>(mm.getLhs().getType());
          auto sums = cast<RankedTensorType>(mm.getSums().getType());
          int64_t size = lhs.getElementTypeBitWidth() / 8;
          seconds += model.rankComputeSeconds(
              lhs.getNumElements(),
              (lhs.getNumElements() + sums.getNumElements()) * size, element,
              "reduce_sum", ranksOnNode, narrow, 0, StringRef());
        }
        end = finishAround(start, seconds, model.overlapRate(), busy);
        t.compute += end - start;
        if (annotate)
          op.setAttr(mlir::fsdp::attrs::cost,
                     b.getDenseI64ArrayAttr({flops, bytes}));
        // SyncBatchNorm: the kernel waits on its all-reduces of per-channel
        // sums (two of C, each two floats, forward; backward those and one
        // of 2C).
        auto sync = isa<BatchNormOp, BatchNormGradOp>(op)
                        ? op.getAttrOfType<IntegerAttr>("sync_group_size")
                        : IntegerAttr();
        if (sync && sync.getInt() > 1) {
          int64_t c =
              cast<RankedTensorType>(op.getOperand(0).getType()).getDimSize(1);
          double wait =
              2 * model.collectiveSeconds(8 * c, sync.getInt(), true) +
              (isa<BatchNormGradOp>(op)
                   ? model.collectiveSeconds(16 * c, sync.getInt(), true)
                   : 0.0);
          end += wait;
          t.comm += wait;
          t.exposed += wait;
        }
        compute = end;
        for (Value r : op.getResults())
          ready[r] = end;
      }
      if (annotate)
        op.setAttr(mlir::fsdp::attrs::sim,
                   b.getDenseF64ArrayAttr({start, end}));
    }
    t.step = compute;
    for (auto &[name, at] : streams)
      t.step = std::max(t.step, at);
    return t;
  }

  /// On the CPU with more than one rank: OpenMPI's non-blocking
  /// reductions (libnbc's reduce-scatter and all-reduce) reduce into a
  /// temporary as large as their whole input, allocated while the
  /// collective runs; the largest one is the most held at once (the
  /// executor waits on them in order). GPUs' NCCL reduces in place.
  int64_t commScratchBytes(ModuleOp module, const DeviceModel &model) {
    auto w = module->getAttrOfType<IntegerAttr>(mlir::fsdp::attrs::worldSize);
    if (model.cores == 0 || !w || w.getInt() <= 1)
      return 0;
    int64_t most = 0;
    module.walk([&](Operation *op) {
      if (isa<ReduceScatterStartOp, AllReduceOp>(op))
        most = std::max(most, bufferBytes(cast<RankedTensorType>(
                                  op->getOperand(0).getType())));
    });
    return most;
  }

  /// Kernel scratch the backend sizes before the first step. On a GPU: the
  /// device kernels' and the widening buffer. On the CPU: the largest need
  /// of one instruction, by the rule the CPU backend sizes it with
  /// (cpuScratchFloats, common/ComputeOps.h), and its buffer of
  /// widened copies.
  int64_t scratchBytes(ModuleOp module, const DeviceModel &model) {
    if (model.cores == 0) // a GPU: the device kernels' scratch
      return deviceScratch(module) + widenedBytes(module, model);
    int64_t floats = 0, threads = model.threads;
    if (int64_t ranks = ranksOnNode(module, model))
      threads = model.threadsPerRank(ranks);
    Dialect *fsdp = module.getContext()->getLoadedDialect("fsdp");
    module.walk([&](Operation *op) {
      if (op->getDialect() != fsdp)
        return;
      auto group = op->getAttrOfType<IntegerAttr>("sync_group_size");
      floats = std::max(floats, ::fsdp::cpuScratchFloats(
                                    op->getName().stripDialect(),
                                    shapesOf(op->getOperandTypes()),
                                    shapesOf(op->getResultTypes()),
                                    group ? group.getInt() : 0, threads,
                                    bshdLayout(op)));
    });
    return (floats + 1) / 2 * 8 + widenedBytes(module, model);
  }

  /// The shapes of `types` (an empty one for a non-tensor).
  static std::vector<std::vector<int64_t>> shapesOf(TypeRange types) {
    std::vector<std::vector<int64_t>> shapes;
    for (Type t : types) {
      auto tt = dyn_cast<RankedTensorType>(t);
      shapes.push_back(
          tt ? std::vector<int64_t>(tt.getShape().begin(), tt.getShape().end())
             : std::vector<int64_t>());
    }
    return shapes;
  }

  /// The largest scratch one instruction's device kernels need
  /// (common/ComputeOps.h), at least the 8 bytes the backend
  /// allocates.
  int64_t deviceScratch(ModuleOp module) {
    int64_t most = 8;
    module.walk([&](Operation *op) {
      if (op->getDialect() != op->getContext()->getLoadedDialect("fsdp"))
        return;
      most = std::max(
          most, ::fsdp::deviceScratchBytes(op->getName().stripDialect(),
                                           shapesOf(op->getOperandTypes()),
                                           shapesOf(op->getResultTypes())));
    });
    return most;
  }

  static bool causal(Operation *op) {
    auto a = op->getAttrOfType<BoolAttr>("causal");
    return a && a.getValue();
  }
  /// An attention's layout attribute says "bshd" (heads after rows).
  static bool bshdLayout(Operation *op) {
    auto a = op->getAttrOfType<StringAttr>("layout");
    return a && a.getValue() == "bshd";
  }

  /// The cost of an op the CPU backend widens (runtime/plan/Widen.h;
  /// runsNarrowOnCpu says which it need not): it
  /// computes at the f32 rate, and each distinct narrow operand is cast to
  /// an f32 copy (2 bytes read, 4 written) that the op reads (4 bytes where
  /// its own cost counted 2), each narrow result written in f32 and cast
  /// back (4 written, 4 read, 2 written where it counted 2): 8 bytes more
  /// an element either way.
  static void widenOnCpu(Operation &op, const DeviceModel &model, Type &element,
                         int64_t &bytes) {
    if (!::fsdp::computesInF32(op.getName().stripDialect()) ||
        runsNarrowOnCpu(op, model))
      return;
    auto narrowElements = [](Value v) -> int64_t {
      auto t = dyn_cast<RankedTensorType>(v.getType());
      return t && isa<FloatType>(t.getElementType()) &&
                     t.getElementTypeBitWidth() < 32
                 ? t.getNumElements()
                 : 0;
    };
    int64_t extra = 0;
    llvm::SmallPtrSet<Value, 4> seen;
    for (Value v : op.getOperands())
      if (seen.insert(v).second)
        extra += narrowElements(v);
    for (Value v : op.getResults())
      extra += narrowElements(v);
    if (extra == 0)
      return;
    element = Float32Type::get(op.getContext());
    bytes += 8 * extra;
  }

  /// Whether the CPU backend runs `op` on its narrow tensors as they are
  /// (ComputeOps.h's rule, on the op's element types).
  static bool runsNarrowOnCpu(Operation &op, const DeviceModel &model) {
    if (op.getNumResults() != 1)
      return false;
    Type one = op.getResult(0).getType();
    if (auto t = dyn_cast<RankedTensorType>(one))
      one = t.getElementType();
    bool oneNarrow = one.isBF16() || one.isF16();
    for (Type t : op.getOperandTypes()) {
      auto tt = dyn_cast<RankedTensorType>(t);
      oneNarrow = oneNarrow && tt && tt.getElementType() == one;
    }
    return ::fsdp::runsNarrowOnCpu(op.getName().stripDialect(), oneNarrow,
                                   one.isBF16(), model.nativeBf16Products);
  }

  /// The buffer of f32 copies for ops computing in f32 on bf16/f16
  /// tensors (runtime/plan/Widen.h): the largest need of one op, each
  /// distinct narrow operand and narrow result copied once. A GPU (a model
  /// with no CPU cores) runs GEMMs, losses and flash attention on narrow
  /// tensors directly.
  int64_t widenedBytes(ModuleOp module, const DeviceModel &model) {
    int64_t most = 0;
    auto narrow = [](Value v) {
      auto t = dyn_cast<RankedTensorType>(v.getType());
      return t && isa<FloatType>(t.getElementType()) &&
             t.getElementTypeBitWidth() < 32;
    };
    auto copy = [](Value v) -> int64_t {
      return ::fsdp::widenedCopyBytes(
          cast<RankedTensorType>(v.getType()).getNumElements());
    };
    module.walk([&](Operation *op) {
      std::string name = op->getName().stripDialect().str();
      if (op->getDialect() != op->getContext()->getLoadedDialect("fsdp") ||
          !::fsdp::computesInF32(name) ||
          (model.cores == 0 &&
           ::fsdp::runsNarrowOnDevice(name, shapesOf(op->getOperandTypes()),
                                      causal(op), bshdLayout(op))) ||
          (model.cores > 0 && runsNarrowOnCpu(*op, model)))
        return;
      int64_t bytes = 0;
      llvm::SmallPtrSet<Value, 4> seen;
      for (Value v : op->getOperands())
        if (narrow(v) && seen.insert(v).second)
          bytes += copy(v);
      for (Value v : op->getResults())
        if (narrow(v))
          bytes += copy(v);
      most = std::max(most, bytes);
    });
    return most;
  }

  /// Bytes the runtime keeps between steps on the device: parameters (or
  /// their shards), optimizer moments, accumulators, constants and the
  /// device copies of offloaded shards; `host` gets the offloaded shards'
  /// state, kept in host memory.
  int64_t stateBytes(ModuleOp module, int64_t *host) {
    llvm::StringSet<> inFlat;
    int64_t bytes = 0;
    auto train =
        module->getAttrOfType<DictionaryAttr>(mlir::fsdp::attrs::train);
    bool adam = !train || !train.getAs<StringAttr>("optimizer") ||
                train.getAs<StringAttr>("optimizer").getValue() == "adamw";
    bool accum = train && train.getAs<IntegerAttr>("grad_accum") &&
                 train.getAs<IntegerAttr>("grad_accum").getInt() > 1;
    llvm::StringSet<> trained;
    module.walk([&](Operation *op) {
      if (isa<AdamWOp, SgdOp>(op))
        trained.insert(
            cast<FlatSymbolRefAttr>(op->getAttr("param")).getValue());
    });
    auto slotBytes = [&](StringRef name, int64_t b) {
      bool t = trained.contains(name);
      return b * (1 + (t ? (adam ? 2 : 1) : 0) + (t && accum ? 1 : 0));
    };
    auto slot = [&](StringRef name, int64_t b) { bytes += slotBytes(name, b); };
    for (auto flat : module.getOps<FlatParameterOp>()) {
      for (Attribute a : flat.getParams())
        inFlat.insert(cast<FlatSymbolRefAttr>(a).getValue());
      int64_t b = bufferBytes(flat.getShardType());
      if (!flat.getOffload()) {
        slot(flat.getSymName(), b);
        continue;
      }
      // The shard and its optimizer state on the host; a gradient
      // accumulator (--grad-accum) stays on the device, where the
      // micro-steps' reduced gradients are summed.
      bool t = trained.contains(flat.getSymName());
      *host += b * (1 + (t ? (adam ? 2 : 1) : 0));
      bytes += t && accum ? b : 0;
      if (auto dc = flat.getDeviceCopy())
        bytes += bufferBytes(
            RankedTensorType::get(flat.getShardType().getShape(), *dc));
    }
    // Offload's host buffers (gradients waiting for the next step's update).
    for (auto b : module.getOps<HostBufferOp>())
      *host += bufferBytes(b.getType());
    for (auto p : module.getOps<ParameterOp>())
      if (!inFlat.contains(p.getSymName()))
        slot(p.getSymName(), bufferBytes(p.getTensorType()));
    // The plan holds one copy per distinct constant value the emitted
    // functions read (EmitPlan merges equal values), as the runtime loads
    // them.
    llvm::DenseSet<Attribute> constants;
    for (StringRef name : {"train_step", "apply_update"})
      if (auto func = module.lookupSymbol<func::FuncOp>(name))
        func.walk([&](ConstantOp c) {
          if (!c->use_empty() && constants.insert(c.getValue()).second)
            bytes += bufferBytes(c.getType());
        });
    return bytes;
  }
};

} // namespace
