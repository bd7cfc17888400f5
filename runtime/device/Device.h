//===- Device.h - What the device backend needs from a device ---*- C++ -*-===//
//
// Memory, copies and the replay of lowered operations (Lowering.h). Two
// implementations: the CUDA device (runtime/backends/cuda/CudaDevice.cpp:
// cudaMalloc, kernels on a compute stream, NCCL on a communication stream,
// CUDA graphs) and the host emulation (HostDevice.cpp: the same functors in
// a loop, OpenBLAS, the host communicator), which tests the lowering and
// the backend on machines without a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_DEVICE_DEVICE_H
#define FSDP_RUNTIME_DEVICE_DEVICE_H

#include "runtime/device/Lowering.h"

#include <memory>
#include <string>

namespace fsdp::device {

class Device {
public:
  virtual ~Device() = default;
  virtual std::string describe() const = 0;
  /// Device memory (`host`: host memory the device reads directly, for
  /// inputs and per-step scalars). Freed with the device.
  virtual Status allocate(int64_t bytes, bool host, void **out) = 0;
  /// Synchronous copies between the host and the device, after the work
  /// queued so far.
  virtual Status upload(void *dst, const void *src, int64_t bytes) = 0;
  virtual Status download(void *dst, const void *src, int64_t bytes) = 0;
  virtual Status fill(void *dst, uint8_t byte, int64_t bytes) = 0;
  /// Queues `ops` in order. The same `sequence` (a small integer) names the
  /// same list every time, so a device may capture it once and replay it.
  virtual Status run(const std::vector<DeviceOp> &ops, int sequence) = 0;
  /// Waits for the queued work; errors of the device or a collective.
  virtual Status synchronize() = 0;
  /// Device memory this process holds now, libraries' workspaces included.
  virtual int64_t memoryInUse() = 0;
  /// The communicator collectives of lowered programs run on (split like
  /// the host's).
  virtual const Comm &comm() const = 0;
};

/// The host emulation: runs collectives on `comm`.
std::unique_ptr<Device> hostDevice(Comm &comm);

} // namespace fsdp::device

#endif // FSDP_RUNTIME_DEVICE_DEVICE_H
