//===- Checkpoint.cpp - Save and resume training state --------------------===//
#include "runtime/io/Checkpoint.h"
#include "runtime/io/Data.h"
#include "runtime/support/File.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace fsdp {

Status parseSafetensors(const std::string &bytes,
                        std::map<std::string, LoadedTensor> &out) {
  if (bytes.size() < 8)
    return Status::error(
        "not a safetensors file (shorter than its header size)");
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  if (n > bytes.size() - 8)
    return Status::error("header size " + std::to_string(n) +
                         " exceeds the file");
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n), nullptr,
                                                /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object())
    return Status::error("the header is not a JSON object");
  uint64_t dataSize = bytes.size() - 8 - n;
  const char *data = bytes.data() + 8 + n;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__")
      continue;
    const auto &v = it.value();
    std::string where = "tensor '" + it.key() + "'";
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets") || !v["dtype"].is_string() ||
        !v["shape"].is_array() || !v["data_offsets"].is_array() ||
        v["data_offsets"].size() != 2)
      return Status::error(where + ": malformed entry");
    if (v["dtype"] != "F32")
      return Status::error(where + ": dtype " + v["dtype"].get<std::string>() +
                           " (only F32 is read)");
    LoadedTensor t;
    uint64_t count = 1;
    for (const auto &d : v["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t(1) << 40))
        return Status::error(where + ": bad dimension");
      t.shape.push_back(d.get<int64_t>());
      count *= d.get<uint64_t>();
      if (count > (uint64_t(1) << 40))
        return Status::error(where + ": too many elements");
    }
    const auto &o = v["data_offsets"];
    if (!o[0].is_number_unsigned() || !o[1].is_number_unsigned())
      return Status::error(where + ": bad data offsets");
    uint64_t begin = o[0].get<uint64_t>(), end = o[1].get<uint64_t>();
    if (begin > end || end > dataSize || end - begin != count * 4)
      return Status::error(where + ": data offsets [" + std::to_string(begin) +
                           ", " + std::to_string(end) + ") do not hold its " +
                           std::to_string(count) + " floats");
    t.data.resize(count);
    std::memcpy(t.data.data(), data + begin, count * 4);
    out[it.key()] = std::move(t);
  }
  return Status::ok();
}

Status readSafetensors(const std::string &path,
                       std::map<std::string, LoadedTensor> &out) {
  std::string bytes;
  FSDP_RETURN_IF_ERROR(readFile(path, bytes));
  return parseSafetensors(bytes, out).withContext(path);
}

Status loadSafetensorsWeights(
    const std::string &path, const Plan &plan,
    const std::function<std::vector<Piece>(size_t)> &pieces) {
  std::map<std::string, LoadedTensor> tensors;
  FSDP_RETURN_IF_ERROR(readSafetensors(path, tensors));
  for (size_t i = 0; i < plan.params.size(); ++i) {
    const ParamInfo &p = plan.params[i];
    auto it = tensors.find(p.name);
    if (it == tensors.end())
      return Status::error(path + ": no tensor named '" + p.name + "'");
    if (it->second.shape != p.shape)
      return Status::error(path + ": '" + p.name +
                           "' does not have the planned shape");
    for (const Piece &piece : pieces(i))
      std::copy_n(it->second.data.data() + piece.begin, piece.count, piece.dst);
  }
  return Status::ok();
}

namespace {

Status writeText(const fs::path &path, const std::string &text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.flush();
  if (!out)
    return Status::error(path.string() + ": write failed");
  return Status::ok();
}

} // namespace

Status saveCheckpoint(const std::string &dir, const Plan &plan,
                      const FullState &full, const TrainingPosition &position) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return Status::error(dir + ": cannot create the checkpoint directory");
  std::string name = "step-" + std::to_string(position.step);
  fs::path tmp = fs::path(dir) / (name + ".tmp"), final = fs::path(dir) / name;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec)
    return Status::error(tmp.string() + ": cannot create");

  std::vector<NamedTensor> params, state;
  bool adam = plan.train.optimizer == "adamw";
  for (size_t i = 0; i < plan.params.size(); ++i) {
    const ParamInfo &p = plan.params[i];
    params.push_back({p.name, p.shape, full.params[i].data()});
    if (!p.trainable)
      continue;
    if (adam) {
      state.push_back({p.name + ".exp_avg", p.shape, full.first[i].data()});
      state.push_back({p.name + ".exp_avg_sq", p.shape, full.second[i].data()});
    } else if (full.started[i]) {
      state.push_back(
          {p.name + ".momentum_buffer", p.shape, full.first[i].data()});
    }
  }
  FSDP_RETURN_IF_ERROR(
      writeSafetensors((tmp / "params.safetensors").string(), params));
  FSDP_RETURN_IF_ERROR(
      writeSafetensors((tmp / "optimizer.safetensors").string(), state));
  // Test hook: FSDP_FAULT_IN_SAVE=N dies here while saving step N, leaving
  // a half-written temporary directory, as a crash would.
  if (const char *f = std::getenv("FSDP_FAULT_IN_SAVE"))
    if (std::atoll(f) == position.step)
      std::_Exit(9);
  nlohmann::json s{
      {"step", position.step},       {"seed", position.seed},
      {"data", position.data},       {"optimizer", plan.train.optimizer},
      {"format", "fsdp-checkpoint"}, {"version", 1}};
  FSDP_RETURN_IF_ERROR(writeText(tmp / "state.json", s.dump(1) + "\n"));
  fs::remove_all(final, ec);
  fs::rename(tmp, final, ec);
  if (ec)
    return Status::error(final.string() +
                         ": cannot rename the checkpoint into place");
  // Point `latest` at it, atomically.
  fs::path latestTmp = fs::path(dir) / "latest.tmp";
  FSDP_RETURN_IF_ERROR(writeText(latestTmp, name + "\n"));
  fs::rename(latestTmp, fs::path(dir) / "latest", ec);
  if (ec)
    return Status::error(dir + ": cannot update 'latest'");
  return Status::ok();
}

Status loadCheckpoint(const std::string &dir, const Plan &plan, FullState &full,
                      TrainingPosition &position) {
  fs::path base(dir);
  if (!fs::exists(base / "state.json")) {
    std::ifstream latest(base / "latest");
    std::string name;
    if (!latest || !std::getline(latest, name) || name.empty() ||
        name.find('/') != std::string::npos ||
        name.find("..") != std::string::npos)
      return Status::error(dir +
                           ": no checkpoint ('latest' is missing or invalid)");
    base /= name;
  }
  std::string text;
  FSDP_RETURN_IF_ERROR(
      readFile((base / "state.json").string(), text, "the checkpoint state"));
  nlohmann::json s = nlohmann::json::parse(text, nullptr, false);
  if (s.is_discarded() || !s.is_object() ||
      s.value("format", "") != "fsdp-checkpoint" || !s.contains("step") ||
      !s["step"].is_number_integer())
    return Status::error((base / "state.json").string() +
                         ": not a checkpoint state");
  if (s.value("optimizer", "") != plan.train.optimizer)
    return Status::error(base.string() + ": saved with optimizer '" +
                         s.value("optimizer", "") + "', the plan uses '" +
                         plan.train.optimizer + "'");
  position.step = s["step"].get<int64_t>();
  position.seed = s.value("seed", (uint64_t)0);
  position.data = s.value("data", "");

  std::map<std::string, LoadedTensor> params, state;
  FSDP_RETURN_IF_ERROR(
      readSafetensors((base / "params.safetensors").string(), params));
  FSDP_RETURN_IF_ERROR(
      readSafetensors((base / "optimizer.safetensors").string(), state));
  auto take = [&](std::map<std::string, LoadedTensor> &from,
                  const std::string &key, const ParamInfo &p,
                  std::vector<float> &dest) -> Status {
    auto it = from.find(key);
    if (it == from.end())
      return Status::error(base.string() + ": '" + key + "' is missing");
    if (it->second.shape != p.shape)
      return Status::error(base.string() + ": '" + key + "' has another shape");
    dest = std::move(it->second.data);
    return Status::ok();
  };
  bool adam = plan.train.optimizer == "adamw";
  size_t n = plan.params.size();
  full.params.assign(n, {});
  full.first.assign(n, {});
  full.second.assign(n, {});
  full.started.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const ParamInfo &p = plan.params[i];
    FSDP_RETURN_IF_ERROR(take(params, p.name, p, full.params[i]));
    if (!p.trainable)
      continue;
    if (adam) {
      FSDP_RETURN_IF_ERROR(take(state, p.name + ".exp_avg", p, full.first[i]));
      FSDP_RETURN_IF_ERROR(
          take(state, p.name + ".exp_avg_sq", p, full.second[i]));
    } else if (state.count(p.name + ".momentum_buffer")) {
      FSDP_RETURN_IF_ERROR(
          take(state, p.name + ".momentum_buffer", p, full.first[i]));
      full.started[i] = 1;
    }
  }
  return Status::ok();
}

} // namespace fsdp
