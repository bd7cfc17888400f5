//===- DeviceBackend.h - A plan's step on a device --------------*- C++ -*-===//
//
// The StepBackend of every device: allocates the plan's arena and state in
// device memory once, lowers the program and the update once (Lowering.h),
// and replays them each micro-step.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_DEVICE_DEVICEBACKEND_H
#define FSDP_RUNTIME_DEVICE_DEVICEBACKEND_H

#include "runtime/device/Device.h"
#include "runtime/exec/StepBackend.h"

namespace fsdp::device {

std::unique_ptr<StepBackend> deviceBackend(std::unique_ptr<Device> device);

} // namespace fsdp::device

#endif // FSDP_RUNTIME_DEVICE_DEVICEBACKEND_H
