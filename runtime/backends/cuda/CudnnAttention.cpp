//===- CudnnAttention.cpp - cuDNN's fused attention -----------------------===//
//
// cudnn-frontend's graph API (header-only, pinned by
// scripts/install-cudnn-frontend.sh) over cuDNN 9, which is opened here
// with dlopen: a machine without cuDNN still runs every plan, on the flash
// kernels. One graph per shape (and direction), built when the CUDA device
// prepares a sequence, before any CUDA graph capture; a run only binds the
// pointers and queues cuDNN's kernels on the compute stream.
//
// The forward writes the output and, for a training step (with_lse), each
// query row's log-sum-exp (cuDNN's "stats", f32, natural log), which the
// backward reads with the output: no recomputed forward. The backward is
// cuDNN's deterministic one, so a step gives the same gradients every run.
// Causal attention: row i sees keys up to i + tk - tq, cuDNN's diagonal at
// the bottom right (the top left where tq = tk, the same mask).
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CudnnAttention.h"

#include <cstdlib>
#include <cstring>

#ifdef FSDP_HAVE_CUDNN_FRONTEND
#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING
// The frontend's JSON serialisation is not used; without it, it defines
// nlohmann's two macros as no-ops, which this file (through Plan.h) has
// from nlohmann itself and uses no more.
#define CUDNN_FRONTEND_SKIP_JSON_LIB
#undef NLOHMANN_JSON_SERIALIZE_ENUM
#undef NLOHMANN_DEFINE_TYPE_INTRUSIVE
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include <cudnn_frontend.h>
#pragma GCC diagnostic pop
#include <dlfcn.h>

#include <exception>
#include <map>
#include <unordered_map>
#include <vector>

// cudnn-frontend's dynamic loading reads cuDNN's symbols from this handle.
namespace cudnn_frontend {
void *cudnn_dlhandle = nullptr;
} // namespace cudnn_frontend
#endif

namespace fsdp::cuda {

#ifdef FSDP_HAVE_CUDNN_FRONTEND
namespace {

namespace fe = cudnn_frontend;
using device::SdpaBackward;
using device::SdpaForward;
using device::SdpaShape;

// Tensor uids of a graph's variant pack.
enum : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

std::vector<int64_t> strides(const int64_t *s) { return {s[0], s[1], s[2], s[3]}; }

/// What makes two operations one graph: direction, shape, strides, scale,
/// mask, element type, statistics.
std::vector<int64_t> keyOf(const SdpaShape &s, bool backward, bool stats) {
  std::vector<int64_t> k = {backward, stats, s.causal, s.f16, s.b, s.h,
                            s.hk,     s.tq,  s.tk,     s.d};
  for (const int64_t *st : {s.qStride, s.kStride, s.vStride, s.oStride})
    k.insert(k.end(), st, st + 4);
  uint32_t bits;
  std::memcpy(&bits, &s.scale, sizeof bits);
  k.push_back(bits);
  return k;
}

class Cudnn final : public CudnnAttention {
public:
  Cudnn(cudnnHandle_t h, size_t version) : handle(h), version(version) {}
  ~Cudnn() override {
    graphs.clear();
    fe::detail::destroy_handle(handle);
  }

  bool prepare(const SdpaForward &op, std::string &why) override {
    return build(op.s, false, op.lse != nullptr, why);
  }
  bool prepare(const SdpaBackward &op, std::string &why) override {
    return build(op.s, true, true, why);
  }
  int64_t workspaceBytes() const override { return workspace; }

  Status run(const SdpaForward &op, void *ws) override {
    std::unordered_map<int64_t, void *> pack = {
        {kQ, const_cast<void *>(op.q)},
        {kK, const_cast<void *>(op.k)},
        {kV, const_cast<void *>(op.v)},
        {kO, op.o}};
    if (op.lse)
      pack[kStats] = op.lse;
    return execute(keyOf(op.s, false, op.lse != nullptr), pack, ws);
  }
  Status run(const SdpaBackward &op, void *ws) override {
    std::unordered_map<int64_t, void *> pack = {
        {kQ, const_cast<void *>(op.q)},
        {kK, const_cast<void *>(op.k)},
        {kV, const_cast<void *>(op.v)},
        {kO, const_cast<void *>(op.o)},
        {kDO, const_cast<void *>(op.dy)},
        {kStats, const_cast<float *>(op.lse)},
        {kDQ, op.dq},
        {kDK, op.dk},
        {kDV, op.dv}};
    return execute(keyOf(op.s, true, true), pack, ws);
  }
  std::string describe() const override {
    return "cuDNN " + std::to_string(version / 10000) + "." +
           std::to_string(version / 100 % 100) + "." +
           std::to_string(version % 100);
  }

private:
  cudnnHandle_t handle;
  size_t version;
  std::map<std::vector<int64_t>, std::shared_ptr<fe::graph::Graph>> graphs;
  std::map<std::vector<int64_t>, std::string> refused;
  int64_t workspace = 0;

  bool build(const SdpaShape &s, bool backward, bool stats,
             std::string &why) {
    std::vector<int64_t> key = keyOf(s, backward, stats);
    if (graphs.count(key))
      return true;
    if (auto it = refused.find(key); it != refused.end()) {
      why = it->second;
      return false;
    }
    try {
      auto g = std::make_shared<fe::graph::Graph>();
      g->set_io_data_type(s.f16 ? fe::DataType_t::HALF
                                : fe::DataType_t::BFLOAT16)
          .set_intermediate_data_type(fe::DataType_t::FLOAT)
          .set_compute_data_type(fe::DataType_t::FLOAT);
      // q, the output and their gradients have h heads; k, v and theirs
      // hk (grouped-query attention, which cuDNN takes as it is).
      auto tensor = [&](const char *name, int64_t uid, int64_t heads,
                        int64_t rows, const int64_t *st) {
        return g->tensor(fe::graph::Tensor_attributes()
                             .set_name(name)
                             .set_uid(uid)
                             .set_dim({s.b, heads, rows, s.d})
                             .set_stride(strides(st)));
      };
      auto output = [&](const std::shared_ptr<fe::graph::Tensor_attributes> &t,
                        int64_t uid, int64_t heads, int64_t rows,
                        const int64_t *st) {
        t->set_output(true)
            .set_uid(uid)
            .set_dim({s.b, heads, rows, s.d})
            .set_stride(strides(st));
      };
      // Row statistics: f32 [b, h, tq, 1], contiguous.
      auto statsDims = std::vector<int64_t>{s.b, s.h, s.tq, 1};
      auto statsStrides = std::vector<int64_t>{s.h * s.tq, s.tq, 1, 1};
      auto q = tensor("Q", kQ, s.h, s.tq, s.qStride);
      auto k = tensor("K", kK, s.hk, s.tk, s.kStride);
      auto v = tensor("V", kV, s.hk, s.tk, s.vStride);
      if (!backward) {
        auto options = fe::graph::SDPA_attributes()
                           .set_name("fsdp_attention")
                           .set_generate_stats(stats)
                           .set_attn_scale(s.scale);
        if (s.causal && s.tq == s.tk)
          options.set_causal_mask(true);
        else if (s.causal)
          options.set_causal_mask_bottom_right(true);
        auto [o, lse] = g->sdpa(q, k, v, options);
        output(o, kO, s.h, s.tq, s.oStride);
        if (stats)
          lse->set_output(true)
              .set_uid(kStats)
              .set_data_type(fe::DataType_t::FLOAT)
              .set_dim(statsDims)
              .set_stride(statsStrides);
      } else {
        auto o = tensor("O", kO, s.h, s.tq, s.oStride);
        auto dy = tensor("dO", kDO, s.h, s.tq, s.oStride);
        auto lse = g->tensor(fe::graph::Tensor_attributes()
                                 .set_name("Stats")
                                 .set_uid(kStats)
                                 .set_dim(statsDims)
                                 .set_stride(statsStrides)
                                 .set_data_type(fe::DataType_t::FLOAT));
        auto options = fe::graph::SDPA_backward_attributes()
                           .set_name("fsdp_attention_grad")
                           .set_attn_scale(s.scale)
                           .set_deterministic_algorithm(true);
        if (s.causal && s.tq == s.tk)
          options.set_causal_mask(true);
        else if (s.causal)
          options.set_causal_mask_bottom_right(true);
        auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dy, lse, options);
        output(dq, kDQ, s.h, s.tq, s.qStride);
        output(dk, kDK, s.hk, s.tk, s.kStride);
        output(dv, kDV, s.hk, s.tk, s.vStride);
      }
      fe::error_t e = g->validate();
      if (e.is_good())
        e = g->build_operation_graph(handle);
      if (e.is_good())
        e = g->create_execution_plans({fe::HeurMode_t::A});
      if (e.is_good())
        e = g->check_support(handle);
      if (e.is_good())
        e = g->build_plans(handle);
      int64_t bytes = 0;
      if (e.is_good())
        e = g->get_workspace_size(bytes);
      if (e.is_bad()) {
        why = refused[key] = e.get_message();
        return false;
      }
      workspace = std::max(workspace, bytes);
      graphs[key] = std::move(g);
      return true;
    } catch (const std::exception &x) {
      why = refused[key] = x.what();
      return false;
    }
  }

  Status execute(const std::vector<int64_t> &key,
                 std::unordered_map<int64_t, void *> &pack, void *ws) {
    auto it = graphs.find(key);
    if (it == graphs.end())
      return Status::error("cuDNN attention run before it was prepared");
    try {
      fe::error_t e = it->second->execute(handle, pack, ws);
      if (e.is_bad())
        return Status::error("cuDNN attention: " + e.get_message());
    } catch (const std::exception &x) {
      return Status::error(std::string("cuDNN attention: ") + x.what());
    }
    return Status::ok();
  }
};

} // namespace

std::unique_ptr<CudnnAttention> openCudnnAttention(cudaStream_t stream,
                                                   std::string &why) {
  if (const char *off = std::getenv("FSDP_CUDNN"); off && !std::strcmp(off, "0")) {
    why = "FSDP_CUDNN=0";
    return nullptr;
  }
  // cudnn-frontend's own calls into the CUDA runtime go to the one this
  // process runs on (it would take the first of libcudart.so.12 and .13
  // it finds, and a CUDA 12 one may be on the path beside PyTorch).
  setenv("CUDNN_FRONTEND_CUDART_LIB_NAME",
         ("libcudart.so." + std::to_string(CUDART_VERSION / 1000)).c_str(),
         /*overwrite=*/0);
  // FSDP_CUDNN_LIBRARY names the library; else the loader's search path
  // (LD_LIBRARY_PATH: the toolkit's, or PyTorch's nvidia-cudnn wheel).
  if (!fe::cudnn_dlhandle) {
    const char *named = std::getenv("FSDP_CUDNN_LIBRARY");
    for (const char *lib : {named, "libcudnn.so.9", "libcudnn.so"})
      if (lib && *lib && (fe::cudnn_dlhandle = dlopen(lib, RTLD_NOW | RTLD_GLOBAL)))
        break;
  }
  if (!fe::cudnn_dlhandle) {
    const char *err = dlerror();
    why = std::string("cannot load libcudnn.so.9") + (err ? ": " + std::string(err) : "");
    return nullptr;
  }
  try {
    size_t version = fe::detail::get_backend_version();
    if (version < 90000) {
      why = "cuDNN " + std::to_string(version) + " is older than 9";
      return nullptr;
    }
    // A cuDNN built for another CUDA major (PyTorch's cu12 wheel beside a
    // CUDA 13 build) is not mixed into this process's runtime.
    using CudartVersion = size_t (*)();
    if (auto built = reinterpret_cast<CudartVersion>(
            dlsym(fe::cudnn_dlhandle, "cudnnGetCudartVersion"));
        built && built() / 1000 != CUDART_VERSION / 1000) {
      why = "the cuDNN found was built for CUDA " +
            std::to_string(built() / 1000) + ", this build runs CUDA " +
            std::to_string(CUDART_VERSION / 1000) +
            " (FSDP_CUDNN_LIBRARY names another)";
      return nullptr;
    }
    cudnnHandle_t handle = nullptr;
    if (cudnnStatus_t st = fe::detail::create_handle(&handle);
        st != CUDNN_STATUS_SUCCESS) {
      why = "cudnnCreate failed (status " + std::to_string((int)st) + ")";
      return nullptr;
    }
    if (cudnnStatus_t st = fe::detail::set_stream(handle, stream);
        st != CUDNN_STATUS_SUCCESS) {
      fe::detail::destroy_handle(handle);
      why = "cudnnSetStream failed (status " + std::to_string((int)st) + ")";
      return nullptr;
    }
    return std::make_unique<Cudnn>(handle, version);
  } catch (const std::exception &x) {
    why = x.what();
    return nullptr;
  }
}

#else

std::unique_ptr<CudnnAttention> openCudnnAttention(cudaStream_t,
                                                   std::string &why) {
  why = "built without cudnn-frontend (scripts/install-cudnn-frontend.sh)";
  return nullptr;
}

#endif

} // namespace fsdp::cuda
