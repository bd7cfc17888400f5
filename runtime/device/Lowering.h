//===- Lowering.h - A plan's instructions as device operations --*- C++ -*-===//
//
// The device backends (CUDA, and the host emulation that tests it) do not
// interpret instructions at run time: at start-up every instruction is
// lowered once into a list of DeviceOps whose pointers are final (the arena,
// parameters and optimizer state never move). A step is then a replay of
// that list: kernels of DeviceKernels.h over an index range, GEMMs, copies,
// fills and collectives. A list of fixed operations is exactly what a CUDA
// graph captures.
//
// Lowering checks shapes as the CPU kernels do, so a malformed plan is an
// error naming the instruction before the first step, not a device fault.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_DEVICE_LOWERING_H
#define FSDP_RUNTIME_DEVICE_LOWERING_H

#include "runtime/comm/Comm.h"
#include "runtime/device/DeviceKernels.h"
#include "runtime/device/FlashAttention.h"
#include "runtime/plan/Plan.h"

#include <memory>
#include <variant>
#include <vector>

namespace fsdp::device {

struct DeviceOp;

/// c = alpha * op(a) op(b) + beta * c (+ bias, one value per column of c,
/// added before c is rounded: a bias epilogue) on row-major matrices;
/// `batch` products, each operand `stride*` elements after the previous one
/// (0: the same matrix for every product). `sums` (matmul's lhs_sums, one
/// product): op(a)'s m row sums over k, of `type`, written by the GEMM's
/// bias-gradient epilogue where the library has one for it, else by
/// `sumsFallback`'s operations (the reduce_sum they replaced) after it.
struct Gemm {
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1, beta = 0;
  /// Of A, B and C. bf16/f16 products accumulate in f32 and round C once
  /// (tensor cores on a GPU).
  ElemType type = ElemType::F32;
  const void *a = nullptr, *b = nullptr;
  const void *bias = nullptr; // n values of `type`, or none
  void *c = nullptr;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t strideA = 0, strideB = 0, strideC = 0, batch = 1;
  void *sums = nullptr;
  std::shared_ptr<const std::vector<DeviceOp>> sumsFallback;
};

/// dst = src, `bytes` bytes (device to device, or host to device when src
/// is the host's staging memory).
struct Copy {
  const void *src = nullptr;
  void *dst = nullptr;
  int64_t bytes = 0;
};

/// dst = zeros.
struct Zero {
  void *dst = nullptr;
  int64_t bytes = 0;
};

enum class CollectiveKind { AllReduce, AllGather, ReduceScatter };

/// Starts a collective on the communicator (Comm's *Start arguments);
/// `slot` is the plan's start instruction index.
struct Collective {
  CollectiveKind kind = CollectiveKind::AllReduce;
  const void *in = nullptr;
  void *out = nullptr;
  int64_t count = 0, elemBytes = 4;
  Elem elem = Elem::F32;
  bool average = false;
  int64_t slot = 0;
  Group group = Group::World;
};

/// Completes the collective (or, `copy`, the Transfer) started with `slot`.
struct Wait {
  int64_t slot = 0;
  bool copy = false;
};

/// Offload: a copy between host and device memory (`toHost`: device to
/// host), on a copy stream of its direction, overlapping the compute
/// stream; `slot` is the plan's copy_start index, completed by a Wait.
struct Transfer {
  const void *src = nullptr;
  void *dst = nullptr;
  int64_t bytes = 0;
  bool toHost = false;
  int64_t slot = 0;
};

/// Offload: an instruction the plan runs on the host (fsdp.on_host),
/// lowered over host memory: its operations run on the host's cores (the
/// emulation: in order; a GPU: a host function on a host stream forked
/// where the plan issues it, runtime/backends/cuda/CudaDevice.cpp).
struct HostWork {
  std::shared_ptr<const std::vector<DeviceOp>> ops;
};

/// One attention as a fused-attention library takes it: q [b, h, tq, d],
/// k and v [b, hk, tk, d] (grouped-query: hk divides h), the output
/// [b, h, tq, d], each through its own
/// strides (elements; batch, head, row, column), 16-bit; causal rows see
/// keys up to i + tk - tq (the diagonal at the bottom right).
struct SdpaShape {
  int64_t b = 1, h = 1, hk = 1, tq = 0, tk = 0, d = 0; // hk: k's, v's heads
  int64_t qStride[4] = {}, kStride[4] = {}, vStride[4] = {}, oStride[4] = {};
  float scale = 1;
  bool causal = false, f16 = false;
};

/// fsdp.attention where the flash kernels take it: cuDNN's fused
/// attention on a GPU that has cuDNN (runtime/backends/cuda/
/// CudnnAttention.cpp), else `flash` over `flashBlocks` blocks (the host
/// emulation always). `lse` (with_lse; or none): each query row's
/// log-sum-exp, f32 [b, h, tq], contiguous.
struct SdpaForward {
  SdpaShape s;
  const void *q = nullptr, *k = nullptr, *v = nullptr;
  void *o = nullptr;
  float *lse = nullptr;
  FlashAttention flash;
  int64_t flashBlocks = 0;
};

/// fsdp.attention_grad with the forward's output and lse saved: cuDNN's
/// fused backward (deterministic) where the GPU has cuDNN, else the flash
/// kernels (`queries`, then `keys`; they recompute the statistics). dy is
/// laid out as the output, dq, dk and dv as q, k and v.
struct SdpaBackward {
  SdpaShape s;
  const void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr,
             *dy = nullptr;
  const float *lse = nullptr;
  void *dq = nullptr, *dk = nullptr, *dv = nullptr;
  FlashAttentionGradQueries queries;
  FlashAttentionGradKeys keys;
  int64_t queryBlocks = 0, keyBlocks = 0;
};

using Kernel = std::variant<
    Unary, UnaryInt, GeluGrad, Dropout, Uniform, Binary, BinaryMixed, BinaryInt,
    LogicalNot, Select, Cast, Scaled, Trilu, Argsort, Reduce, ReduceCombine,
    SoftmaxRows, LayerNormRows, LayerNormGradRows, LayerNormGradCols, Gather,
    ScatterAdd, ScatterAddInt, LossTerms, LossReduce, LossGradRows, StridedCopy,
    Im2Col, Col2Im, PoolForward, PoolBackward, BatchNormChannels,
    BatchNormGradChannels, BatchNormSyncedChannels, AdamWSchedule, AdamW,
    SgdSchedule, Sgd, AttentionRows, AttentionGradQueryRows,
    AttentionGradKeyRows, FlashAttention, FlashAttentionGradQueries,
    FlashAttentionGradKeys, SdpaForward, SdpaBackward, Gemm, Copy, Zero,
    Collective, Wait, Transfer, HostWork>;

/// One operation: a functor run for every index in [0, n), a block kernel
/// (FlashAttention.h) run over n blocks, or (SdpaForward, SdpaBackward,
/// Gemm, Copy, Zero, Collective, Wait, Transfer, HostWork) a library call;
/// `n` is unused for those.
struct DeviceOp {
  int64_t n = 1;
  Kernel kernel;
};

/// Where every tensor of a plan lives on the device, and the state the
/// optimizer ops update; by storage slot where the CPU executor indexes by
/// slot (runtime/exec/Executor.h).
struct Memory {
  uint8_t *arena = nullptr;
  std::vector<void *> params, grads, constants;
  /// Offload: the host arena (Space::Host), the device copies of offloaded
  /// shards (by slot) and the host buffers (Plan::hostBuffers).
  uint8_t *host = nullptr;
  std::vector<uint8_t *> deviceCopies, hostBuffers;
  std::vector<float *> first, second;  // AdamW's m and v; SGD's momentum
  std::vector<uint8_t *> started;      // SGD: the momentum buffer started
  const double *stepScalars = nullptr; // StepScalar's: this step's, or a
                                       // deferred update's
  float *schedule = nullptr;           // 4 floats: an optimizer's scalars
  uint8_t *scratch = nullptr;          // scratchBytes(), 8-byte aligned
  uint8_t *widened = nullptr;          // Space::Widened (plan/Widen.h)
  int *error = nullptr;                // a kernel's ErrorCode, or 0

  void *at(const TensorRef &t) const;
};

/// Scratch bytes lowering `in` needs (the losses' per-position terms,
/// layer_norm_grad's row statistics).
int64_t scratchBytes(const Instruction &in);

/// Bytes of f32 copies lowering `in` needs (Space::Widened: an instruction
/// computing in f32 on bf16/f16 tensors, runtime/plan/Widen.h).
int64_t widenedBytes(const Instruction &in);

/// Appends the operations of `in` to `out` (with its widening casts around
/// it, where it has one). `comm` gives the ranks and
/// group sizes the collectives and `reshard` are lowered for.
Status lower(const Instruction &in, const Memory &mem, const Comm &comm,
             std::vector<DeviceOp> &out);

} // namespace fsdp::device

#endif // FSDP_RUNTIME_DEVICE_LOWERING_H
