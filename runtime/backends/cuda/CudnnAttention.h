//===- CudnnAttention.h - cuDNN's fused attention ---------------*- C++ -*-===//
//
// The CUDA device runs fsdp.attention and fsdp.attention_grad (lowered as
// SdpaForward and SdpaBackward, runtime/device/Lowering.h) through cuDNN's
// fused scaled-dot-product attention where it can: cuDNN 9, loaded at run
// time through cudnn-frontend's dynamic loading, one graph built per
// shape and kept. Where it cannot (no libcudnn.so.9, FSDP_CUDNN=0, a shape
// cuDNN refuses), the device runs the operation's flash kernels instead
// and says so once.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_BACKENDS_CUDA_CUDNNATTENTION_H
#define FSDP_RUNTIME_BACKENDS_CUDA_CUDNNATTENTION_H

#include "runtime/device/Lowering.h"

#include <cuda_runtime.h>

#include <memory>
#include <string>

namespace fsdp::cuda {

class CudnnAttention {
public:
  virtual ~CudnnAttention() = default;
  /// Builds cuDNN's graph for the operation's shape (once a shape); false,
  /// with cuDNN's reason in `why`, where cuDNN does not take it.
  virtual bool prepare(const device::SdpaForward &op, std::string &why) = 0;
  virtual bool prepare(const device::SdpaBackward &op, std::string &why) = 0;
  /// The workspace the prepared graphs need, at most.
  virtual int64_t workspaceBytes() const = 0;
  /// Queues a prepared operation on the stream the handle was opened with.
  virtual Status run(const device::SdpaForward &op, void *workspace) = 0;
  virtual Status run(const device::SdpaBackward &op, void *workspace) = 0;
  /// "cuDNN 9.x.y" as loaded.
  virtual std::string describe() const = 0;
};

/// cuDNN on `stream`, or null with the reason in `why`.
std::unique_ptr<CudnnAttention> openCudnnAttention(cudaStream_t stream,
                                                   std::string &why);

} // namespace fsdp::cuda

#endif // FSDP_RUNTIME_BACKENDS_CUDA_CUDNNATTENTION_H
