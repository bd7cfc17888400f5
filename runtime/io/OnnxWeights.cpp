//===- OnnxWeights.cpp - Initial parameters from an ONNX model ------------===//
#include "runtime/io/OnnxWeights.h"
#include "runtime/support/File.h"
#include "runtime/support/Finite.h"

#include <onnx/onnx_pb.h>

#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

namespace fsdp {

Status
loadOnnxWeights(const std::string &path, const Plan &plan,
                const std::function<std::vector<Piece>(size_t)> &pieces,
                const std::string &base) {
  std::string bytes;
  FSDP_RETURN_IF_ERROR(
      readFileBelow(path, base, bytes, "the model for its weights"));
  onnx::ModelProto model;
  if (bytes.size() > INT32_MAX ||
      !model.ParseFromArray(bytes.data(), (int)bytes.size()))
    return Status::error(path + ": not a valid ONNX model");
  bytes.clear();
  bytes.shrink_to_fit();

  std::unordered_map<std::string, const onnx::TensorProto *> inits;
  for (const auto &t : model.graph().initializer())
    inits[t.name()] = &t;
  std::filesystem::path dir = std::filesystem::path(path).parent_path();

  for (size_t i = 0; i < plan.params.size(); ++i) {
    const ParamInfo &p = plan.params[i];
    std::string where = path + ": initializer '" + p.name + "'";
    auto it = inits.find(p.name);
    if (it == inits.end())
      return Status::error(where + " is not in the model");
    const onnx::TensorProto &t = *it->second;
    if (t.data_type() != onnx::TensorProto::FLOAT)
      return Status::error(where + " is not float32");
    // The exact shape, as the safetensors path checks (a transposed or
    // negated [32,96] passed a rank-and-count check and loaded silently).
    std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
    if (dims != p.shape)
      return Status::error(where + " does not have the planned shape");
    int64_t n = p.numel();
    std::vector<Piece> mine = pieces(i);
    size_t bytesNeeded = (size_t)n * 4;
    if (t.data_location() == onnx::TensorProto::EXTERNAL) {
      std::string location;
      int64_t offset = 0, length = (int64_t)bytesNeeded;
      for (const auto &kv : t.external_data()) {
        int64_t *field = kv.key() == "offset"   ? &offset
                         : kv.key() == "length" ? &length
                                                : nullptr;
        if (kv.key() == "location")
          location = kv.value();
        else if (field) {
          const std::string &v = kv.value();
          auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), *field);
          if (ec != std::errc() || end != v.data() + v.size() || *field < 0)
            return Status::error(where + ": external data " + kv.key() + " '" +
                                 v + "' is not a non-negative integer");
        }
      }
      if (length != (int64_t)bytesNeeded)
        return Status::error(where + ": external data length does not match");
      // Checked again on the descriptor (the compiler checked the name;
      // the file may have changed since): inside the model's directory,
      // no symlink on the way, a regular file with one link.
      InputFile data;
      FSDP_RETURN_IF_ERROR(
          data.openInside(dir.string(), location, "external data of " + where));
      if (offset > data.size() || length > data.size() - offset)
        return Status::error(where + ": external data " + data.name() +
                             " is shorter than offset + length");
      for (const Piece &piece : mine)
        FSDP_RETURN_IF_ERROR(data.read(offset + piece.begin * 4, piece.dst,
                                       piece.count * 4));
    } else if (t.has_raw_data()) {
      if (t.raw_data().size() != bytesNeeded)
        return Status::error(where + ": raw_data has the wrong length");
      for (const Piece &piece : mine)
        std::memcpy(piece.dst, t.raw_data().data() + piece.begin * 4,
                    piece.count * 4);
    } else {
      if (t.float_data_size() != n)
        return Status::error(where + ": float_data has the wrong length");
      for (const Piece &piece : mine)
        std::memcpy(piece.dst, t.float_data().data() + piece.begin,
                    piece.count * 4);
    }
    for (const Piece &piece : mine)
      if (!satisfies(p.valueRule(), piece.dst, piece.count))
        return Status::error(where + " holds " +
                             violationName(p.valueRule()));
  }
  return Status::ok();
}

} // namespace fsdp
