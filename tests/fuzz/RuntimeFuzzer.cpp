//===- RuntimeFuzzer.cpp - libFuzzer targets on the runtime's readers -----===//
//
// One source, one fuzzer per reader (FSDP_FUZZ_READER picks it at compile
// time, so each gets its own corpus, counts and CPU-minutes):
//
//   plan         the plan parser (parsePlan)
//   safetensors  checkpoint shards and weights (parseSafetensors)
//   manifest     checkpoint manifests (parseManifest)
//   npz          .npz training data, then two batches drawn from it
//   bin          llm.c .bin token files, then two batches drawn from it
//   trace        measured traces (parseMeasuredTrace), then the comparison
//                and the device fit that read them
//
// The data and trace readers need a plan: FSDP_FUZZ_PLANS names fixture
// plans (colon-separated, written by tests/fuzz/run.sh); the input's first
// byte picks one. Every reader must return a Status for any bytes, never
// crash, read out of bounds or allocate what the bytes merely claim.
//
//===----------------------------------------------------------------------===//
#include "runtime/inspect/Inspect.h"
#include "runtime/io/Checkpoint.h"
#include "runtime/io/Data.h"
#include "runtime/plan/Plan.h"
#include "runtime/support/File.h"

#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#define FSDP_STR2(x) #x
#define FSDP_STR(x) FSDP_STR2(x)

namespace {

std::vector<fsdp::Plan> &fixtures() {
  static std::vector<fsdp::Plan> plans;
  return plans;
}

/// Two batches from `data`, into buffers the size of the plan's inputs.
void drawBatches(const fsdp::Plan &plan, fsdp::DataSource &data) {
  std::vector<std::vector<uint8_t>> buffers;
  std::vector<void *> dest;
  for (const fsdp::TensorRef &t : plan.inputs)
    buffers.emplace_back(t.bytes());
  for (auto &b : buffers)
    dest.push_back(b.data());
  (void)data.next(0, dest);
  (void)data.next(7, dest);
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  const char *list = std::getenv("FSDP_FUZZ_PLANS");
  std::stringstream paths(list ? list : "");
  std::string path;
  while (std::getline(paths, path, ':')) {
    std::string text;
    fsdp::Plan plan;
    if (path.empty() || !fsdp::readFile(path, text) ||
        !fsdp::parsePlan(text, plan)) {
      std::fprintf(stderr, "FSDP_FUZZ_PLANS: cannot load plan '%s'\n",
                   path.c_str());
      std::exit(1);
    }
    fixtures().push_back(std::move(plan));
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string reader = FSDP_STR(FSDP_FUZZ_READER);
  std::string bytes(reinterpret_cast<const char *>(data), size);
  if (reader == "plan") {
    fsdp::Plan plan;
    (void)fsdp::parsePlan(bytes, plan);
    return 0;
  }
  if (reader == "safetensors") {
    std::map<std::string, fsdp::LoadedTensor> tensors;
    (void)fsdp::parseSafetensors(bytes, tensors);
    return 0;
  }
  if (reader == "manifest") {
    fsdp::Manifest manifest;
    (void)fsdp::parseManifest(bytes, "manifest.json", manifest);
    return 0;
  }
  // The rest read against a fixture plan, picked by the first byte.
  if (size == 0 || fixtures().empty())
    return 0;
  const fsdp::Plan &plan = fixtures()[data[0] % fixtures().size()];
  bytes.erase(0, 1);
  if (reader == "npz") {
    std::unique_ptr<fsdp::DataSource> source;
    if (fsdp::npzDataFromBytes(bytes, "data.npz", plan, 1, 2, source))
      drawBatches(plan, *source);
  } else if (reader == "bin") {
    int64_t seq = !plan.inputs.empty() && plan.inputs[0].rank() == 2
                      ? plan.inputs[0].shape[1]
                      : 1;
    std::unique_ptr<fsdp::DataSource> source;
    if (fsdp::binTokenDataFromBytes(bytes, "tokens.bin", plan, seq, 1, 2,
                                    source))
      drawBatches(plan, *source);
  } else if (reader == "trace") {
    nlohmann::json doc;
    if (!fsdp::parseMeasuredTrace(plan, bytes, "trace.json", doc))
      return 0;
    std::ostringstream sink;
    (void)fsdp::compareTrace(plan, doc, sink);
    nlohmann::json device = {
        {"name", "cpu"}, {"cores", 2}, {"threads", 2}, {"op_scale", {}}};
    (void)fsdp::fitDeviceJson(plan, doc, "trace.json", device, sink);
  }
  return 0;
}
