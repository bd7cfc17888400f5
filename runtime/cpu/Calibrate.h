//===- Calibrate.h - Measure this machine for the cost model ----*- C++ -*-===//
#ifndef FSDP_RUNTIME_CPU_CALIBRATE_H
#define FSDP_RUNTIME_CPU_CALIBRATE_H

#include "runtime/comm/Comm.h"

#include <nlohmann/json.hpp>

namespace fsdp::cpu {

/// Microbenchmarks the machine as the CPU backend uses it: sgemm throughput
/// with the rank's threads, copy bandwidth, and (with more than one rank)
/// all-reduce latency and bandwidth between ranks. Returns a device
/// description fsdp-opt --device=FILE.json reads (costmodel/DeviceModel.h).
Status calibrate(Comm &comm, nlohmann::json &device);

} // namespace fsdp::cpu

#endif // FSDP_RUNTIME_CPU_CALIBRATE_H
