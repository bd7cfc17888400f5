//===- CudaDevice.cpp - The device backend on an NVIDIA GPU ---------------===//
//
// Streams: every kernel, copy and GEMM runs on one compute stream; every
// collective on one communication stream. A plan's `*_start` records an
// event on the compute stream that the communication stream waits for, then
// queues the NCCL call and records the slot's `done` event; the plan's
// `wait` makes the compute stream wait for that event. Nothing on the host
// waits inside a step: the only synchronisations are the reads of the loss
// and the error flag after a micro-step, and those go through a watchdog
// that polls NCCL's asynchronous errors and aborts the communicators past
// the deadline (a dead rank becomes an error, not a hang).
//
// Offload: a host-device copy (Transfer) runs on the copy stream of its
// direction (h2d, d2h: the GPU's two copy engines), forked from the
// compute stream and joined by its `wait` as a collective is; host memory
// is pinned (cudaMallocHost). Host work (HostWork: the host's AdamW and
// casts) is a host function (a host node in a graph) running the host
// emulation's loop over host memory (runtime/device/HostDevice.cpp), on a
// host stream forked from the compute stream where the plan issues it: the
// kernels after it run while the host computes. Device kernels never read
// host memory (fsdp-verify-plan), only copies do, so every copy also waits
// for the host work issued before it (it may read what that wrote, or
// overwrite what that reads).
//
// Graphs: the first run of a sequence executes directly (and creates the
// events, GEMM descriptors and NCCL sub-communicators it needs); the
// second is captured into a CUDA graph and every later one replays it. A
// capture that fails falls back to direct launches, with a note on stderr.
// FSDP_CUDA_GRAPHS=0 turns capture off.
//
// FSDP_CUDA_PROFILE=1 (a diagnostic): graphs off, every operation after a
// sequence's first run timed between CUDA events, and at exit a table on
// stderr of the time spent per kind of kernel (GEMMs by shape), largest
// first.
//
// GEMMs: cuBLASLt in f32 (FSDP_CUDA_TF32=1: TF32 tensor cores), row-major
// products computed as the column-major transposed product.
//
// Attention: cuDNN's fused attention (CudnnAttention.h) where cuDNN loads
// and takes the shape, prepared with the GEMMs; else the flash kernels the
// lowering put beside it, with one note on stderr saying why.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CudaDevice.h"
#include "runtime/backends/cuda/CudnnAttention.h"
#include "runtime/backends/cuda/DeviceKernels.cu.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <typeinfo>
#include <utility>

namespace fsdp::cuda {

using namespace fsdp::device;

namespace {

Status cudaStatus(cudaError_t e, const char *what) {
  if (e == cudaSuccess)
    return Status::ok();
  return Status::error(std::string(what) + ": " + cudaGetErrorString(e));
}
Status ncclStatus(ncclResult_t r, const char *what) {
  if (r == ncclSuccess || r == ncclInProgress)
    return Status::ok();
  return Status::error(std::string(what) + ": " + ncclGetErrorString(r));
}
Status blasStatus(cublasStatus_t s, const char *what) {
  if (s == CUBLAS_STATUS_SUCCESS)
    return Status::ok();
  return Status::error(std::string(what) + ": cuBLASLt status " +
                       std::to_string((int)s));
}
#define CUDA_TRY(expr) FSDP_RETURN_IF_ERROR(cudaStatus((expr), #expr))
#define NCCL_TRY(expr) FSDP_RETURN_IF_ERROR(ncclStatus((expr), #expr))
#define BLAS_TRY(expr) FSDP_RETURN_IF_ERROR(blasStatus((expr), #expr))

/// A GEMM's cuBLASLt descriptors and algorithm, made on its first run.
struct LtGemm {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool sumsInEpilogue = false; // lhs_sums by BGRADB, not sumsFallback
};

class CudaDevice final : public Device {
public:
  CudaDevice(Comm &host, double timeout) : host(host), timeout(timeout) {}
  ~CudaDevice() override;

  Status open(int64_t localRank);
  std::string describe() const override { return name; }
  Status allocate(int64_t bytes, bool hostMemory, void **out) override;
  // (cudaMemcpyDefault: an offloaded shard's "device" side is pinned host
  // memory, which a fixed direction would misname.)
  Status upload(void *dst, const void *src, int64_t bytes) override {
    FSDP_RETURN_IF_ERROR(synchronize());
    CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
    return Status::ok();
  }
  Status download(void *dst, const void *src, int64_t bytes) override {
    FSDP_RETURN_IF_ERROR(synchronize());
    CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
    return Status::ok();
  }
  Status fill(void *dst, uint8_t byte, int64_t bytes) override {
    CUDA_TRY(cudaMemsetAsync(dst, byte, bytes, compute));
    return synchronize();
  }
  Status run(const std::vector<DeviceOp> &ops, int sequence) override;
  Status synchronize() override;
  int64_t memoryInUse() override {
    size_t freeBytes = 0, total = 0;
    if (cudaMemGetInfo(&freeBytes, &total) != cudaSuccess)
      return -1;
    return (int64_t)(total - freeBytes) - baseline;
  }
  const Comm &comm() const override { return host; }

private:
  Comm &host;
  double timeout;
  std::string name;
  int64_t baseline = 0;
  cudaStream_t compute = nullptr, comms = nullptr;
  cudaStream_t toDevice = nullptr, toHost = nullptr; // offload's copies
  cudaStream_t hostStream = nullptr;                 // offload's host work
  cudaEvent_t hostReady = nullptr, hostDone = nullptr;
  cudaEvent_t joined = nullptr, finished = nullptr;
  cublasLtHandle_t lt = nullptr;
  void *workspace = nullptr;
  size_t workspaceBytes = 32 << 20;
  bool tf32 = false, graphs = true, profile = false, serial = false;
  // Streams the operations launchAll is launching forked from compute.
  bool commsUsed = false, toDeviceUsed = false, toHostUsed = false,
       hostUsed = false;
  // FSDP_CUDA_PROFILE: an event after each operation, and the totals.
  std::vector<cudaEvent_t> marks;
  struct Tally {
    int64_t count = 0;
    double ms = 0;
  };
  std::map<std::string, Tally> tally;
  std::vector<void *> deviceBlocks, hostBlocks;
  // NCCL: the world communicator and one per group the plan uses.
  std::map<Group, ncclComm_t> nccl;
  std::map<int64_t, std::pair<cudaEvent_t, cudaEvent_t>> slots; // ready, done
  std::map<const Gemm *, LtGemm> gemms;
  // cuDNN's attention: opened on the first attention, the operations it
  // took, its workspace (never freed while the device lives: a captured
  // graph keeps the pointer it was captured with).
  std::unique_ptr<CudnnAttention> cudnn;
  bool cudnnTried = false;
  std::set<const void *> viaCudnn;
  std::set<std::string> cudnnNotes;
  void *cudnnWorkspace = nullptr;
  int64_t cudnnWorkspaceBytes = 0;
  template <typename Op> Status prepareAttention(const Op &op);
  void noteOnce(const std::string &note) {
    if (cudnnNotes.insert(note).second && host.rank() == 0)
      std::fprintf(stderr, "fsdp-run: note: %s\n", note.c_str());
  }
  struct Sequence {
    int runs = 0;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    bool direct = false; // capture failed or is off
  };
  std::map<int, Sequence> sequences;

  Status prepare(const std::vector<DeviceOp> &ops);
  /// cuBLASLt's descriptors and algorithm for `g` (`sums`: with the
  /// bias-gradient epilogue writing g.sums); an error where it has none.
  Status describeGemm(const Gemm &g, bool sums, LtGemm &d);
  static void destroyGemm(LtGemm &d) {
    for (cublasLtMatrixLayout_t l : {d.a, d.b, d.c})
      if (l)
        cublasLtMatrixLayoutDestroy(l);
    if (d.desc)
      cublasLtMatmulDescDestroy(d.desc);
  }
  Status communicator(Group g, ncclComm_t &out);
  Status waitNccl(ncclComm_t c, const char *what);
  Status launchAll(const std::vector<DeviceOp> &ops, bool timed = false);
  void printProfile();
  template <typename F> Status one(int64_t n, const F &f) {
    if constexpr (device::IsBlockKernel<F>::value)
      return cudaStatus(launchBlocks(n, f, compute), "kernel launch");
    else
      return cudaStatus(launchEach(n, f, compute), "kernel launch");
  }
  Status one(int64_t, const Gemm &g);
  Status one(int64_t, const SdpaForward &a) {
    if (viaCudnn.count(&a))
      return cudnn->run(a, cudnnWorkspace);
    return cudaStatus(launchBlocks(a.flashBlocks, a.flash, compute),
                      "kernel launch");
  }
  Status one(int64_t, const SdpaBackward &a) {
    if (viaCudnn.count(&a))
      return cudnn->run(a, cudnnWorkspace);
    CUDA_TRY(launchBlocks(a.queryBlocks, a.queries, compute));
    return cudaStatus(launchBlocks(a.keyBlocks, a.keys, compute),
                      "kernel launch");
  }
  Status one(int64_t, const Copy &c) {
    return cudaStatus(
        cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyDefault, compute),
        "cudaMemcpyAsync");
  }
  Status one(int64_t, const Zero &z) {
    return cudaStatus(cudaMemsetAsync(z.dst, 0, z.bytes, compute),
                      "cudaMemsetAsync");
  }
  Status one(int64_t, const Collective &c);
  Status one(int64_t, const Wait &w) {
    auto it = slots.find(w.slot);
    if (it == slots.end())
      return Status::error(std::string("wait for ") +
                           (w.copy ? "copy " : "collective ") +
                           std::to_string(w.slot) + ", which never started");
    return cudaStatus(cudaStreamWaitEvent(compute, it->second.second, 0),
                      "cudaStreamWaitEvent");
  }
  Status one(int64_t, const Transfer &t) {
    auto &[ready, done] = slots.at(t.slot);
    cudaStream_t s = t.toHost ? toHost : toDevice;
    (t.toHost ? toHostUsed : toDeviceUsed) = true;
    CUDA_TRY(cudaEventRecord(ready, compute));
    CUDA_TRY(cudaStreamWaitEvent(s, ready, 0));
    if (hostUsed)
      CUDA_TRY(cudaStreamWaitEvent(s, hostDone, 0));
    CUDA_TRY(cudaMemcpyAsync(t.dst, t.src, t.bytes, cudaMemcpyDefault, s));
    CUDA_TRY(cudaEventRecord(done, s));
    return Status::ok();
  }
  /// Host work's ops and the emulation that runs them; the first error is
  /// kept for synchronize() (a host function cannot fail the stream).
  struct HostCall {
    const std::vector<DeviceOp> *ops;
    CudaDevice *self;
  };
  static void CUDART_CB runHostWork(void *data) {
    auto *call = static_cast<HostCall *>(data);
    CudaDevice &d = *call->self;
    Status s = d.hostRunner->run(*call->ops, -1);
    if (!s) {
      std::lock_guard<std::mutex> lock(d.hostErrorMutex);
      if (d.hostError.isOk())
        d.hostError = s;
    }
  }
  Status one(int64_t, const HostWork &w) {
    if (!hostRunner)
      hostRunner = device::hostDevice(host);
    auto &call = hostCalls[w.ops.get()];
    call = {w.ops.get(), this};
    hostUsed = true;
    CUDA_TRY(cudaEventRecord(hostReady, compute));
    CUDA_TRY(cudaStreamWaitEvent(hostStream, hostReady, 0));
    CUDA_TRY(cudaLaunchHostFunc(hostStream, runHostWork, &call));
    CUDA_TRY(cudaEventRecord(hostDone, hostStream));
    return Status::ok();
  }
  std::unique_ptr<Device> hostRunner;
  std::map<const void *, HostCall> hostCalls;
  std::mutex hostErrorMutex;
  Status hostError = Status::ok();
};

Status CudaDevice::open(int64_t localRank) {
  int count = 0;
  CUDA_TRY(cudaGetDeviceCount(&count));
  if (count == 0)
    return Status::error("no CUDA device");
  int index = (int)(localRank % count);
  CUDA_TRY(cudaSetDevice(index));
  CUDA_TRY(cudaFree(nullptr)); // the context, before the baseline
  cudaDeviceProp prop{};
  CUDA_TRY(cudaGetDeviceProperties(&prop, index));
  name = std::string("cuda (") + prop.name + ", device " +
         std::to_string(index) + ")";
  size_t freeBytes = 0, total = 0;
  CUDA_TRY(cudaMemGetInfo(&freeBytes, &total));
  baseline = (int64_t)(total - freeBytes);
  CUDA_TRY(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  CUDA_TRY(cudaStreamCreateWithFlags(&comms, cudaStreamNonBlocking));
  CUDA_TRY(cudaStreamCreateWithFlags(&toDevice, cudaStreamNonBlocking));
  CUDA_TRY(cudaStreamCreateWithFlags(&toHost, cudaStreamNonBlocking));
  CUDA_TRY(cudaStreamCreateWithFlags(&hostStream, cudaStreamNonBlocking));
  CUDA_TRY(cudaEventCreateWithFlags(&hostReady, cudaEventDisableTiming));
  CUDA_TRY(cudaEventCreateWithFlags(&hostDone, cudaEventDisableTiming));
  CUDA_TRY(cudaEventCreateWithFlags(&joined, cudaEventDisableTiming));
  CUDA_TRY(cudaEventCreateWithFlags(&finished, cudaEventDisableTiming));
  BLAS_TRY(cublasLtCreate(&lt));
  CUDA_TRY(cudaMalloc(&workspace, workspaceBytes));
  const char *t = std::getenv("FSDP_CUDA_TF32");
  tf32 = t && std::strcmp(t, "1") == 0;
  const char *g = std::getenv("FSDP_CUDA_GRAPHS");
  graphs = !(g && std::strcmp(g, "0") == 0);
  const char *p = std::getenv("FSDP_CUDA_PROFILE");
  profile = p && std::strcmp(p, "1") == 0;
  // FSDP_CUDA_SERIAL=1 (a diagnostic): graphs off, and the host waits for
  // both streams after every operation, so no two overlap.
  const char *q = std::getenv("FSDP_CUDA_SERIAL");
  serial = q && std::strcmp(q, "1") == 0;
  graphs = graphs && !profile && !serial;

  // NCCL's world communicator: rank 0's id reaches every rank through the
  // host communicator (MPI_Bcast under mpirun; under torchrun, the store the
  // ranks met at).
  ncclUniqueId id{};
  if (host.rank() == 0)
    NCCL_TRY(ncclGetUniqueId(&id));
  FSDP_RETURN_IF_ERROR(host.broadcast(&id, sizeof id, "nccl-unique-id"));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0; // every call returns; the watchdog polls
  ncclComm_t world = nullptr;
  NCCL_TRY(ncclCommInitRankConfig(&world, (int)host.size(), id,
                                  (int)host.rank(), &config));
  FSDP_RETURN_IF_ERROR(waitNccl(world, "ncclCommInitRankConfig"));
  nccl[Group::World] = world;
  return Status::ok();
}

CudaDevice::~CudaDevice() {
  if (compute)
    cudaStreamSynchronize(compute);
  if (profile)
    printProfile();
  cudnn.reset();
  for (cudaEvent_t e : marks)
    cudaEventDestroy(e);
  for (auto &[n, s] : sequences) {
    if (s.exec)
      cudaGraphExecDestroy(s.exec);
    if (s.graph)
      cudaGraphDestroy(s.graph);
  }
  for (auto &[op, g] : gemms)
    destroyGemm(g);
  for (auto &[slot, e] : slots) {
    cudaEventDestroy(e.first);
    cudaEventDestroy(e.second);
  }
  for (auto &[g, c] : nccl)
    ncclCommDestroy(c);
  for (void *p : deviceBlocks)
    cudaFree(p);
  for (void *p : hostBlocks)
    cudaFreeHost(p);
  if (workspace)
    cudaFree(workspace);
  if (lt)
    cublasLtDestroy(lt);
  for (cudaEvent_t e : {joined, finished, hostReady, hostDone})
    if (e)
      cudaEventDestroy(e);
  for (cudaStream_t s : {compute, comms, toDevice, toHost, hostStream})
    if (s)
      cudaStreamDestroy(s);
}

Status CudaDevice::allocate(int64_t bytes, bool hostMemory, void **out) {
  if (hostMemory) {
    CUDA_TRY(cudaMallocHost(out, bytes));
    std::memset(*out, 0, bytes);
    hostBlocks.push_back(*out);
    return Status::ok();
  }
  if (cudaError_t e = cudaMalloc(out, bytes); e != cudaSuccess)
    return Status::error("cannot allocate " + std::to_string(bytes) +
                         " bytes of GPU memory: " + cudaGetErrorString(e));
  deviceBlocks.push_back(*out);
  CUDA_TRY(cudaMemset(*out, 0, bytes));
  return Status::ok();
}

Status CudaDevice::waitNccl(ncclComm_t c, const char *what) {
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    ncclResult_t state = ncclSuccess;
    NCCL_TRY(ncclCommGetAsyncError(c, &state));
    if (state == ncclSuccess)
      return Status::ok();
    if (state != ncclInProgress)
      return Status::error(std::string(what) + ": " +
                           ncclGetErrorString(state));
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count() > timeout) {
      ncclCommAbort(c);
      return Status::error(std::string(what) + " did not finish within " +
                           std::to_string((int)timeout) + " s");
    }
    std::this_thread::yield();
  }
}

Status CudaDevice::communicator(Group g, ncclComm_t &out) {
  auto it = nccl.find(g);
  if (it != nccl.end()) {
    out = it->second;
    return Status::ok();
  }
  // Groups as the host communicator forms them (runtime/comm/Comm.h):
  // shard groups and blocks are runs of consecutive ranks, replicate groups
  // the ranks at one position of every shard group.
  int64_t r = host.rank(), shard = host.size(Group::Shard);
  int color = g == Group::Shard       ? (int)(r / shard)
              : g == Group::Replicate ? (int)(r % shard)
                                      : (int)(r / host.size(Group::Block));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t c = nullptr;
  NCCL_TRY(
      ncclCommSplit(nccl[Group::World], color, (int)host.rank(g), &c, &config));
  FSDP_RETURN_IF_ERROR(waitNccl(c, "ncclCommSplit"));
  nccl[g] = out = c;
  return Status::ok();
}

template <typename Op> Status CudaDevice::prepareAttention(const Op &op) {
  if (!cudnnTried) {
    cudnnTried = true;
    std::string why;
    cudnn = openCudnnAttention(compute, why);
    noteOnce(cudnn ? "attention runs on " + cudnn->describe() +
                         "'s fused attention"
                   : "attention runs on fsdp's flash kernels: no cuDNN (" +
                         why + ")");
  }
  if (!cudnn)
    return Status::ok();
  std::string why;
  if (!cudnn->prepare(op, why)) {
    noteOnce(std::string("cuDNN does not take an attention ") +
             (std::is_same_v<Op, SdpaForward> ? "" : "gradient ") + "of " +
             std::to_string(op.s.b) + "x" + std::to_string(op.s.h) + "x" +
             std::to_string(op.s.tq) + "x" + std::to_string(op.s.d) +
             "; it runs on the flash kernels (" + why + ")");
    return Status::ok();
  }
  if (cudnn->workspaceBytes() > cudnnWorkspaceBytes) {
    void *w = nullptr;
    FSDP_RETURN_IF_ERROR(allocate(cudnn->workspaceBytes(), false, &w));
    cudnnWorkspace = w;
    cudnnWorkspaceBytes = cudnn->workspaceBytes();
  }
  viaCudnn.insert(&op);
  return Status::ok();
}

Status CudaDevice::prepare(const std::vector<DeviceOp> &ops) {
  // Sub-communicators in one order on every rank (a split is collective).
  std::vector<bool> used(4, false);
  for (const DeviceOp &op : ops)
    if (const auto *c = std::get_if<Collective>(&op.kernel))
      used[(int)c->group] = true;
  for (Group g : {Group::Shard, Group::Replicate, Group::Block})
    if (used[(int)g]) {
      ncclComm_t c;
      FSDP_RETURN_IF_ERROR(communicator(g, c));
    }
  for (const DeviceOp &op : ops) {
    const int64_t *slot = nullptr;
    if (const auto *c = std::get_if<Collective>(&op.kernel))
      slot = &c->slot;
    if (const auto *t = std::get_if<Transfer>(&op.kernel))
      slot = &t->slot;
    if (slot) {
      if (slots.count(*slot))
        continue;
      cudaEvent_t ready, done;
      CUDA_TRY(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
      CUDA_TRY(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
      slots[*slot] = {ready, done};
    }
    if (const auto *a = std::get_if<SdpaForward>(&op.kernel))
      FSDP_RETURN_IF_ERROR(prepareAttention(*a));
    if (const auto *a = std::get_if<SdpaBackward>(&op.kernel))
      FSDP_RETURN_IF_ERROR(prepareAttention(*a));
    if (const auto *g = std::get_if<Gemm>(&op.kernel)) {
      if (gemms.count(g))
        continue;
      LtGemm d;
      // lhs_sums: in the epilogue where cuBLASLt has an algorithm for it,
      // else the GEMM alone and the reduction's kernels after it.
      if (g->sums) {
        Status fused = describeGemm(*g, true, d);
        if (fused) {
          d.sumsInEpilogue = true;
          gemms[g] = d;
          continue;
        }
        destroyGemm(d);
        d = LtGemm{};
        noteOnce("cuBLASLt has no bias-gradient epilogue for a " +
                 std::to_string(g->m) + "x" + std::to_string(g->n) + "x" +
                 std::to_string(g->k) + " product (" + fused.message() +
                 "); a reduction kernel sums the bias gradient");
      }
      FSDP_RETURN_IF_ERROR(describeGemm(*g, false, d));
      gemms[g] = d;
    }
  }
  return Status::ok();
}

Status CudaDevice::describeGemm(const Gemm &gm, bool sums, LtGemm &d) {
  const Gemm *g = &gm;
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T:
  // B's storage is the first operand.
  // bf16/f16 operands: tensor cores, f32 accumulation, f32 scalars.
  // f32: exact f32, or TF32 when FSDP_CUDA_TF32=1.
  bool f32 = g->type == ElemType::F32;
  cudaDataType_t type = g->type == ElemType::BF16  ? CUDA_R_16BF
                        : g->type == ElemType::F16 ? CUDA_R_16F
                                                   : CUDA_R_32F;
  int64_t size = f32 ? 4 : 2;
  BLAS_TRY(cublasLtMatmulDescCreate(
      &d.desc,
      f32 && tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
      CUDA_R_32F));
  cublasOperation_t ta = g->tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                    tb = g->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  BLAS_TRY(cublasLtMatmulDescSetAttribute(
      d.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  BLAS_TRY(cublasLtMatmulDescSetAttribute(
      d.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  if (g->bias || sums) {
    // Column-major D is C^T: its rows are C's columns, one bias each,
    // the same vector for every product of a batch (stride 0). The sums
    // of op(A)'s rows over k are BGRADB's: op(A)^T is the second
    // operand, [k, m], reduced over k into one value per column of D.
    cublasLtEpilogue_t epilogue =
        sums ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_BIAS;
    const void *vector = sums ? g->sums : g->bias;
    BLAS_TRY(cublasLtMatmulDescSetAttribute(
        d.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
    BLAS_TRY(cublasLtMatmulDescSetAttribute(
        d.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &vector, sizeof vector));
    cudaDataType_t biasType = type;
    BLAS_TRY(cublasLtMatmulDescSetAttribute(
        d.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &biasType,
        sizeof biasType));
  }
  // Stored (column-major) shapes: B^T is [n x k] or [k x n].
  uint64_t brows = g->tb ? g->k : g->n, bcols = g->tb ? g->n : g->k;
  uint64_t arows = g->ta ? g->m : g->k, acols = g->ta ? g->k : g->m;
  BLAS_TRY(cublasLtMatrixLayoutCreate(&d.a, type, brows, bcols, g->ldb));
  BLAS_TRY(cublasLtMatrixLayoutCreate(&d.b, type, arows, acols, g->lda));
  BLAS_TRY(cublasLtMatrixLayoutCreate(&d.c, type, g->n, g->m, g->ldc));
  int32_t batch = (int32_t)g->batch;
  int64_t strides[3] = {g->strideB, g->strideA, g->strideC};
  cublasLtMatrixLayout_t layouts[3] = {d.a, d.b, d.c};
  for (int i = 0; i < 3; ++i) {
    BLAS_TRY(cublasLtMatrixLayoutSetAttribute(
        layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
        sizeof batch));
    BLAS_TRY(cublasLtMatrixLayoutSetAttribute(
        layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
        &strides[i], sizeof strides[i]));
  }
  cublasLtMatmulPreference_t pref;
  BLAS_TRY(cublasLtMatmulPreferenceCreate(&pref));
  BLAS_TRY(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspaceBytes,
      sizeof workspaceBytes));
  // The alignment the operands really have (a batch split into single
  // products offsets pointers by whole matrices only).
  auto alignment = [&](const void *p, int64_t ld, int64_t stride) {
    uint64_t bits = (uint64_t)(uintptr_t)p | (uint64_t)(ld * size) |
                    (uint64_t)(stride * size) | 16u;
    return (uint32_t)(bits & (~bits + 1)); // lowest set bit, at most 16
  };
  uint32_t aligns[4] = {alignment(g->b, g->ldb, g->strideB),
                        alignment(g->a, g->lda, g->strideA),
                        alignment(g->c, g->ldc, g->strideC),
                        alignment(g->c, g->ldc, g->strideC)};
  cublasLtMatmulPreferenceAttributes_t alignAttrs[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i)
    BLAS_TRY(cublasLtMatmulPreferenceSetAttribute(
        pref, alignAttrs[i], &aligns[i], sizeof aligns[i]));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t h = cublasLtMatmulAlgoGetHeuristic(
      lt, d.desc, d.a, d.b, d.c, d.c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  BLAS_TRY(h);
  if (found == 0)
    return Status::error("cuBLASLt has no algorithm for a " +
                         std::to_string(g->m) + "x" + std::to_string(g->n) +
                         "x" + std::to_string(g->k) + " product");
  d.algo = result.algo;
  return Status::ok();
}

Status CudaDevice::one(int64_t, const Gemm &g) {
  const LtGemm &d = gemms.at(&g);
  BLAS_TRY(cublasLtMatmul(lt, d.desc, &g.alpha, g.b, d.a, g.a, d.b, &g.beta,
                          g.c, d.c, g.c, d.c, &d.algo, workspace,
                          workspaceBytes, compute));
  if (g.sumsFallback && !d.sumsInEpilogue)
    for (const DeviceOp &op : *g.sumsFallback)
      FSDP_RETURN_IF_ERROR(
          std::visit([&](const auto &k) { return one(op.n, k); }, op.kernel));
  return Status::ok();
}

ncclDataType_t ncclType(Elem e) {
  return e == Elem::BF16  ? ncclBfloat16
         : e == Elem::F16 ? ncclFloat16
                          : ncclFloat32;
}

Status CudaDevice::one(int64_t, const Collective &c) {
  auto &[ready, done] = slots.at(c.slot);
  if (host.size(c.group) == 1) {
    // Over one rank every collective is a copy (a sum or an average of one
    // value is the value), on the compute stream. NCCL is not asked: before
    // 2.29.7 its one-rank average leaves the last count % blocks elements
    // unwritten (NVIDIA/nccl#1950), which the GPU parity test caught here
    // as the tail of each unit's reduced gradient.
    if (c.in != c.out)
      CUDA_TRY(cudaMemcpyAsync(c.out, c.in, c.count * c.elemBytes,
                               cudaMemcpyDeviceToDevice, compute));
    CUDA_TRY(cudaEventRecord(done, compute));
    return Status::ok();
  }
  ncclComm_t comm;
  FSDP_RETURN_IF_ERROR(communicator(c.group, comm));
  commsUsed = true;
  CUDA_TRY(cudaEventRecord(ready, compute));
  CUDA_TRY(cudaStreamWaitEvent(comms, ready, 0));
  ncclRedOp_t op = c.average ? ncclAvg : ncclSum;
  ncclResult_t r = ncclSuccess;
  switch (c.kind) {
  case CollectiveKind::AllReduce:
    r = ncclAllReduce(c.in, c.out, c.count, ncclType(c.elem), op, comm, comms);
    break;
  case CollectiveKind::AllGather:
    r = ncclAllGather(c.in, c.out, c.count * c.elemBytes, ncclUint8, comm,
                      comms);
    break;
  case CollectiveKind::ReduceScatter:
    r = ncclReduceScatter(c.in, c.out, c.count, ncclType(c.elem), op, comm,
                          comms);
    break;
  }
  NCCL_TRY(r);
  // A non-blocking communicator may still be enqueueing: NCCL asks that it
  // be polled to success before its next call.
  if (r == ncclInProgress)
    FSDP_RETURN_IF_ERROR(waitNccl(comm, "an NCCL collective"));
  CUDA_TRY(cudaEventRecord(done, comms));
  return Status::ok();
}

/// What FSDP_CUDA_PROFILE's table calls an operation: its kernel's name,
/// a GEMM with its shape and element type.
std::string profileName(const DeviceOp &op) {
  return std::visit(
      [&](const auto &k) -> std::string {
        using K = std::decay_t<decltype(k)>;
        if constexpr (std::is_same_v<K, Gemm>)
          return std::string("gemm ") +
                 (k.type == ElemType::F32 ? "f32 " : "16-bit ") +
                 std::to_string(k.m) + "x" + std::to_string(k.n) + "x" +
                 std::to_string(k.k) +
                 (k.batch > 1 ? " x" + std::to_string(k.batch) : "") +
                 (k.sums ? " +bias grad" : "");
        int status = 0;
        char *d =
            abi::__cxa_demangle(typeid(K).name(), nullptr, nullptr, &status);
        std::string name = status == 0 && d ? d : typeid(K).name();
        std::free(d);
        return name;
      },
      op.kernel);
}

Status CudaDevice::launchAll(const std::vector<DeviceOp> &ops, bool timed) {
  while (timed && marks.size() < ops.size() + 1) {
    cudaEvent_t e;
    CUDA_TRY(cudaEventCreate(&e));
    marks.push_back(e);
  }
  commsUsed = toDeviceUsed = toHostUsed = hostUsed = false;
  if (timed)
    CUDA_TRY(cudaEventRecord(marks[0], compute));
  for (size_t i = 0; i < ops.size(); ++i) {
    const DeviceOp &op = ops[i];
    Status s =
        std::visit([&](const auto &k) { return one(op.n, k); }, op.kernel);
    if (!s)
      return s;
    if (timed)
      CUDA_TRY(cudaEventRecord(marks[i + 1], compute));
    if (serial)
      for (cudaStream_t s : {compute, comms, toDevice, toHost, hostStream})
        CUDA_TRY(cudaStreamSynchronize(s));
  }
  // Join the forked streams back (a capture must end joined; a capture
  // that never forked one must not wait for it).
  for (auto [used, s] :
       {std::pair{commsUsed, comms}, std::pair{toDeviceUsed, toDevice},
        std::pair{toHostUsed, toHost}, std::pair{hostUsed, hostStream}})
    if (used) {
      CUDA_TRY(cudaEventRecord(joined, s));
      CUDA_TRY(cudaStreamWaitEvent(compute, joined, 0));
    }
  if (timed) {
    FSDP_RETURN_IF_ERROR(synchronize());
    for (size_t i = 0; i < ops.size(); ++i) {
      float ms = 0;
      CUDA_TRY(cudaEventElapsedTime(&ms, marks[i], marks[i + 1]));
      const void *kernel = std::visit(
          [](const auto &k) { return static_cast<const void *>(&k); },
          ops[i].kernel);
      Tally &t = tally[profileName(ops[i]) +
                       (viaCudnn.count(kernel) ? " (cuDNN)" : "")];
      ++t.count;
      t.ms += ms;
    }
  }
  return Status::ok();
}

void CudaDevice::printProfile() {
  std::vector<std::pair<std::string, Tally>> rows(tally.begin(), tally.end());
  std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
    return a.second.ms > b.second.ms;
  });
  double total = 0;
  for (const auto &r : rows)
    total += r.second.ms;
  std::fprintf(stderr, "FSDP_CUDA_PROFILE: %.3f ms in all, timed runs only\n",
               total);
  for (const auto &[name, t] : rows)
    std::fprintf(stderr, "%10.3f ms %5.1f%% %8lld  %s\n", t.ms,
                 total > 0 ? 100 * t.ms / total : 0.0, (long long)t.count,
                 name.c_str());
}

Status CudaDevice::run(const std::vector<DeviceOp> &ops, int sequence) {
  Sequence &s = sequences[sequence];
  ++s.runs;
  if (s.runs == 1) {
    FSDP_RETURN_IF_ERROR(prepare(ops));
    return launchAll(ops);
  }
  if (!graphs || s.direct)
    return launchAll(ops, profile);
  if (!s.exec) {
    // Capture after the first run: everything it needed exists now.
    FSDP_RETURN_IF_ERROR(synchronize());
    CUDA_TRY(cudaStreamBeginCapture(compute, cudaStreamCaptureModeThreadLocal));
    Status launched = launchAll(ops);
    cudaError_t ended = cudaStreamEndCapture(compute, &s.graph);
    cudaError_t made = launched && ended == cudaSuccess
                           ? cudaGraphInstantiate(&s.exec, s.graph, 0)
                           : cudaErrorStreamCaptureInvalidated;
    if (!launched || ended != cudaSuccess || made != cudaSuccess) {
      std::fprintf(
          stderr,
          "fsdp-run: note: CUDA graph capture failed (%s); "
          "launching kernels one by one\n",
          !launched ? launched.message().c_str()
                    : cudaGetErrorString(ended != cudaSuccess ? ended : made));
      cudaGetLastError(); // clear the capture's error
      if (s.graph)
        cudaGraphDestroy(s.graph);
      s.graph = nullptr;
      s.exec = nullptr;
      s.direct = true;
      return launchAll(ops);
    }
  }
  return cudaStatus(cudaGraphLaunch(s.exec, compute), "cudaGraphLaunch");
}

Status CudaDevice::synchronize() {
  // Poll, never block: a collective waiting for a dead rank would block
  // forever. Past the deadline the communicators are aborted.
  CUDA_TRY(cudaEventRecord(finished, compute));
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    cudaError_t q = cudaEventQuery(finished);
    if (q == cudaSuccess) {
      std::lock_guard<std::mutex> lock(hostErrorMutex);
      return std::exchange(hostError, Status::ok())
          .withContext("host work of an offload plan");
    }
    if (q != cudaErrorNotReady)
      return cudaStatus(q, "the step on the GPU");
    for (auto &[g, c] : nccl) {
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(c, &state);
      if (state != ncclSuccess && state != ncclInProgress) {
        for (auto &[g2, c2] : nccl)
          ncclCommAbort(c2);
        nccl.clear();
        return Status::error(std::string("NCCL failed: ") +
                             ncclGetErrorString(state));
      }
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count() > timeout) {
      for (auto &[g, c] : nccl)
        ncclCommAbort(c);
      nccl.clear();
      return Status::error("the GPU's work did not finish within " +
                           std::to_string((int)timeout) +
                           " s (a rank died or hung in a collective); "
                           "NCCL aborted");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

} // namespace

Status cudaDevice(Comm &hostComm, int64_t localRank, double timeoutSeconds,
                  std::unique_ptr<Device> &out) {
  auto d = std::make_unique<CudaDevice>(hostComm, timeoutSeconds);
  if (Status s = d->open(localRank); !s)
    return s.withContext("--backend cuda");
  out = std::move(d);
  return Status::ok();
}

} // namespace fsdp::cuda
