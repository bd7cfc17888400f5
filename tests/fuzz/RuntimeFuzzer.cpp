//===- RuntimeFuzzer.cpp - libFuzzer target on the runtime's readers ------===//
//
// The first byte picks the reader: even → the plan parser, odd → the
// safetensors reader (checkpoints). Either must return a Status for any
// bytes, never crash or read out of bounds.
//
//===----------------------------------------------------------------------===//
#include "runtime/io/Checkpoint.h"
#include "runtime/plan/Plan.h"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  std::string bytes(reinterpret_cast<const char *>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    fsdp::Plan plan;
    (void)fsdp::parsePlan(bytes, plan);
  } else {
    std::map<std::string, fsdp::LoadedTensor> tensors;
    (void)fsdp::parseSafetensors(bytes, tensors);
  }
  return 0;
}
