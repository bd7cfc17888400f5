//===- OnnxWeights.cpp - Initial parameters from an ONNX model ------------===//
#include "runtime/io/OnnxWeights.h"
#include "runtime/support/File.h"
#include "runtime/support/Finite.h"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

namespace fsdp {

Status
loadOnnxWeights(const std::string &path, const Plan &plan,
                const std::function<std::vector<Piece>(size_t)> &pieces) {
  std::string bytes;
  FSDP_RETURN_IF_ERROR(readFile(path, bytes, "the model for its weights"));
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
    int64_t n = 1;
    for (int64_t d : t.dims())
      n *= d;
    if (n != p.numel() || t.dims_size() != (int)p.shape.size())
      return Status::error(where + " does not have the planned shape");
    std::vector<Piece> mine = pieces(i);
    size_t bytesNeeded = (size_t)n * 4;
    if (t.data_location() == onnx::TensorProto::EXTERNAL) {
      std::string location;
      int64_t offset = 0, length = (int64_t)bytesNeeded;
      for (const auto &kv : t.external_data()) {
        if (kv.key() == "location")
          location = kv.value();
        else if (kv.key() == "offset")
          offset = std::stoll(kv.value());
        else if (kv.key() == "length")
          length = std::stoll(kv.value());
      }
      // The compiler validated the location; check again, the file may differ.
      std::filesystem::path rel(location);
      if (location.empty() || rel.is_absolute() ||
          location.find("..") != std::string::npos)
        return Status::error(where + ": unsafe external data location '" +
                             location + "'");
      std::filesystem::path file = dir / rel;
      std::ifstream data(file, std::ios::binary);
      if (!data)
        return Status::error(where + ": cannot open external data " +
                             file.string());
      if (length != (int64_t)bytesNeeded)
        return Status::error(where + ": external data length does not match");
      data.seekg(0, std::ios::end);
      if ((int64_t)data.tellg() < offset + length)
        return Status::error(where + ": external data " + file.string() +
                             " is shorter than offset + length");
      for (const Piece &piece : mine) {
        data.seekg(offset + piece.begin * 4);
        data.read(reinterpret_cast<char *>(piece.dst),
                  (std::streamsize)piece.count * 4);
        if (!data)
          return Status::error(where + ": cannot read external data " +
                               file.string());
      }
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
      if (!allFinite(piece.dst, piece.count))
        return Status::error(where + " holds a non-finite value (NaN or inf)");
  }
  return Status::ok();
}

} // namespace fsdp
