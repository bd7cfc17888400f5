//===- Data.cpp - Training batches and safetensors output -----------------===//
#include "runtime/io/Data.h"
#include "runtime/support/File.h"

#include <nlohmann/json.hpp>

#include <charconv>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

namespace fsdp {

namespace {

/// The exclusive upper bound of an integer input: the extent it indexes.
int64_t indexRange(const Plan &plan, const TensorRef &input) {
  for (const Instruction &in : plan.program) {
    auto same = [&](const TensorRef &t) {
      return t.space == Space::Arena && t.offset == input.offset &&
             t.numel() == input.numel() && t.dtype == input.dtype;
    };
    if (in.op == "gather" && in.in.size() == 2 && same(in.in[1])) {
      int64_t axis = in.attrs.value("axis", 0);
      if (axis >= 0 && axis < in.in[0].rank())
        return in.in[0].shape[axis];
    }
    if ((in.op == "cross_entropy" || in.op == "nll_loss" ||
         in.op == "cross_entropy_with_grad") &&
        in.in.size() >= 2 && same(in.in[1]) && in.in[0].rank() >= 2)
      return in.in[0].shape[1];
  }
  return 2;
}

class Synthetic : public DataSource {
public:
  Synthetic(const Plan &plan, uint64_t seed) : plan(plan), seed(seed) {
    for (const TensorRef &t : plan.inputs)
      ranges.push_back(t.dtype == DType::I64 ? indexRange(plan, t) : 0);
  }
  Status next(int64_t step, const std::vector<void *> &dest) override {
    std::mt19937_64 rng(seed * 1000003ull + (uint64_t)step);
    for (size_t i = 0; i < plan.inputs.size(); ++i) {
      const TensorRef &t = plan.inputs[i];
      int64_t n = t.numel();
      if (t.dtype == DType::I64) {
        std::uniform_int_distribution<int64_t> d(
            0, std::max<int64_t>(ranges[i], 1) - 1);
        for (int64_t k = 0; k < n; ++k)
          static_cast<int64_t *>(dest[i])[k] = d(rng);
      } else if (t.dtype == DType::F32) {
        std::normal_distribution<float> d(0.0f, 1.0f);
        for (int64_t k = 0; k < n; ++k)
          static_cast<float *>(dest[i])[k] = d(rng);
      } else {
        std::bernoulli_distribution d(0.5);
        for (int64_t k = 0; k < n; ++k)
          static_cast<uint8_t *>(dest[i])[k] = d(rng);
      }
    }
    return Status::ok();
  }

private:
  const Plan &plan;
  uint64_t seed;
  std::vector<int64_t> ranges;
};

struct Array {
  std::string descr;
  std::vector<int64_t> shape;
  std::string data;
};

uint32_t u32(const std::string &s, size_t at) {
  uint32_t v;
  std::memcpy(&v, s.data() + at, 4);
  return v;
}
uint16_t u16(const std::string &s, size_t at) {
  uint16_t v;
  std::memcpy(&v, s.data() + at, 2);
  return v;
}

/// A dimension of a .npy shape: a non-negative decimal integer that fits
/// in 63 bits, blanks around it allowed, nothing else.
bool parseDim(const std::string &tok, int64_t &out) {
  size_t b = tok.find_first_not_of(" \t"), e = tok.find_last_not_of(" \t");
  if (b == std::string::npos)
    return false;
  const char *first = tok.data() + b, *last = tok.data() + e + 1;
  auto [end, ec] = std::from_chars(first, last, out);
  return ec == std::errc() && end == last && out >= 0;
}

/// A Fortran-ordered array (np.save writes an F-contiguous array, a
/// transposed view, that way) rewritten in C order. Data shorter than its
/// shape is left for the size check that follows, which names it.
Status toCOrder(const std::string &name, Array &a) {
  size_t digits = a.descr.find_last_not_of("0123456789");
  int64_t item = 0;
  if (digits + 1 < a.descr.size())
    parseDim(a.descr.substr(digits + 1), item);
  if (item <= 0 || item > 16)
    return Status::error("'" + name + "': a Fortran-ordered array of dtype '" +
                         a.descr + "'");
  int64_t n = 1;
  for (int64_t d : a.shape)
    if (__builtin_mul_overflow(n, d, &n))
      return Status::error("'" + name + "': its shape's size overflows");
  int64_t bytes = 0;
  if (a.shape.size() < 2 || __builtin_mul_overflow(n, item, &bytes) ||
      bytes > (int64_t)a.data.size())
    return Status::ok();
  const size_t rank = a.shape.size();
  std::vector<int64_t> index(rank, 0), stride(rank, 1);
  for (size_t k = 1; k < rank; ++k)
    stride[k] = stride[k - 1] * a.shape[k - 1];
  std::string out((size_t)bytes, '\0');
  int64_t from = 0; // index · stride, kept as the C-order index advances
  for (int64_t c = 0; c < n; ++c) {
    std::memcpy(&out[c * item], a.data.data() + from * item, item);
    for (size_t k = rank; k-- > 0;) {
      if (++index[k] < a.shape[k]) {
        from += stride[k];
        break;
      }
      from -= (a.shape[k] - 1) * stride[k];
      index[k] = 0;
    }
  }
  a.data = std::move(out);
  return Status::ok();
}

Status parseNpy(const std::string &name, const std::string &npy, Array &out) {
  if (npy.size() < 10 || npy.compare(0, 6, "\x93NUMPY") != 0)
    return Status::error("'" + name + "' is not a .npy array");
  int major = (unsigned char)npy[6];
  if (major < 1 || major > 3)
    return Status::error("'" + name + "': unknown .npy version " +
                         std::to_string(major));
  size_t start = major == 1 ? 10 : 12;
  if (npy.size() < start)
    return Status::error("'" + name + "': truncated header");
  size_t headerLen = major == 1 ? u16(npy, 8) : u32(npy, 8);
  if (headerLen > npy.size() - start)
    return Status::error("'" + name + "': truncated header");
  std::string h = npy.substr(start, headerLen);
  auto field = [&](const std::string &key) -> std::string {
    size_t k = h.find("'" + key + "'");
    if (k == std::string::npos)
      return "";
    size_t colon = h.find(':', k);
    return colon == std::string::npos ? "" : h.substr(colon + 1);
  };
  std::string descr = field("descr"), fortran = field("fortran_order"),
              shape = field("shape");
  size_t q1 = descr.find('\''), q2 = descr.find('\'', q1 + 1);
  if (q1 == std::string::npos || q2 == std::string::npos)
    return Status::error("'" + name + "': no dtype in the header");
  out.descr = descr.substr(q1 + 1, q2 - q1 - 1);
  bool fortranOrder = fortran.find("True") != std::string::npos &&
                      fortran.find("True") < fortran.find(',');
  size_t p1 = shape.find('('), p2 = shape.find(')');
  if (p1 == std::string::npos || p2 == std::string::npos)
    return Status::error("'" + name + "': no shape in the header");
  std::stringstream dims(shape.substr(p1 + 1, p2 - p1 - 1));
  std::string tok;
  while (std::getline(dims, tok, ',')) {
    if (tok.find_first_not_of(" \t") == std::string::npos)
      continue; // the empty item after a 1-tuple's comma
    int64_t d = 0;
    if (!parseDim(tok, d))
      return Status::error("'" + name + "': shape dimension '" + tok +
                           "' is not a non-negative integer");
    out.shape.push_back(d);
  }
  out.data = npy.substr(start + headerLen);
  if (fortranOrder)
    return toCOrder(name, out);
  return Status::ok();
}

Status parseNpz(const std::string &z, const std::string &path,
                std::map<std::string, Array> &arrays) {
  size_t at = 0;
  while (at + 30 <= z.size() && u32(z, at) == 0x04034b50) {
    uint16_t flags = u16(z, at + 6), method = u16(z, at + 8);
    uint64_t csize = u32(z, at + 18);
    uint16_t nameLen = u16(z, at + 26), extraLen = u16(z, at + 28);
    if (at + 30 + nameLen + extraLen > z.size())
      return Status::error(path + ": truncated zip entry");
    std::string name = z.substr(at + 30, nameLen);
    size_t extra = at + 30 + nameLen;
    if (csize == 0xFFFFFFFFu) { // zip64: sizes in the extra field
      for (size_t e = extra; e + 4 <= extra + extraLen;) {
        uint16_t id = u16(z, e), len = u16(z, e + 2);
        if (e + 4 + len > extra + extraLen)
          return Status::error(path + ": '" + name +
                               "': zip extra field runs past its end");
        if (id == 1 && len >= 16) {
          std::memcpy(&csize, z.data() + e + 4 + 8, 8);
          break;
        }
        e += 4 + len;
      }
    }
    if (method != 0 || (flags & 8))
      return Status::error(path + ": '" + name +
                           "' is compressed; write the data with np.savez");
    size_t data = extra + extraLen;
    if (csize > z.size() - data)
      return Status::error(path + ": truncated zip entry '" + name + "'");
    std::string key = name.size() > 4 && name.substr(name.size() - 4) == ".npy"
                          ? name.substr(0, name.size() - 4)
                          : name;
    Array a;
    FSDP_RETURN_IF_ERROR(
        parseNpy(key, z.substr(data, csize), a).withContext(path));
    arrays[key] = std::move(a);
    at = data + csize;
  }
  if (arrays.empty())
    return Status::error(path + ": not an .npz archive");
  return Status::ok();
}

class Npz : public DataSource {
public:
  Npz(const Plan &plan, std::vector<Array> arrays, int64_t rank, int64_t world)
      : plan(plan), arrays(std::move(arrays)), rank(rank), world(world) {}
  Status next(int64_t step, const std::vector<void *> &dest) override {
    for (size_t i = 0; i < plan.inputs.size(); ++i) {
      const TensorRef &t = plan.inputs[i];
      const Array &a = arrays[i];
      int64_t batch = t.shape.empty() ? 1 : t.shape[0];
      int64_t rows = a.shape.empty() ? 1 : a.shape[0];
      int64_t rowBytes = t.bytes() / std::max<int64_t>(batch, 1);
      for (int64_t b = 0; b < batch; ++b) {
        int64_t row = ((step * world + rank) * batch + b) % rows;
        std::memcpy(static_cast<uint8_t *>(dest[i]) + b * rowBytes,
                    a.data.data() + row * rowBytes, rowBytes);
      }
    }
    return Status::ok();
  }

private:
  const Plan &plan;
  std::vector<Array> arrays;
  int64_t rank, world;
};

class BinTokens : public DataSource {
public:
  /// `file`: the whole .bin file, its tokens `count` uint16 after the
  /// header.
  BinTokens(std::string file, int64_t count, size_t ids, int64_t targets,
            int64_t batch, int64_t seq, int64_t rank, int64_t world)
      : file(std::move(file)), count(count), ids(ids), targets(targets),
        batch(batch), seq(seq), rank(rank), world(world) {}
  Status next(int64_t step, const std::vector<void *> &dest) override {
    int64_t windows = (count - 1) / seq;
    for (int64_t b = 0; b < batch; ++b) {
      int64_t w = ((step * world + rank) * batch + b) % windows;
      size_t src = kHeaderBytes + size_t(w * seq) * 2;
      int64_t *in = static_cast<int64_t *>(dest[ids]) + b * seq;
      for (int64_t t = 0; t < seq; ++t)
        in[t] = u16(file, src + 2 * t);
      if (targets >= 0) {
        int64_t *tg = static_cast<int64_t *>(dest[targets]) + b * seq;
        for (int64_t t = 0; t < seq; ++t)
          tg[t] = u16(file, src + 2 * (t + 1));
      }
    }
    return Status::ok();
  }
  static constexpr size_t kHeaderBytes = 256 * 4;

private:
  std::string file;
  int64_t count;
  size_t ids;
  int64_t targets, batch, seq, rank, world;
};

/// The plan's token inputs: `ids` (the first integer input) and `targets`
/// (-1 if none), [batch, seqLen] each.
Status tokenInputs(const Plan &plan, const std::string &path, int64_t seqLen,
                   int64_t &ids, int64_t &targets) {
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    const TensorRef &t = plan.inputs[i];
    if (t.dtype != DType::I64)
      return Status::error(path + ": token data feeds only integer inputs; '" +
                           t.name + "' is " + dtypeName(t.dtype));
    if (t.name == "targets")
      targets = i;
    else if (ids < 0)
      ids = i;
    else
      return Status::error(path + ": the plan has more than one token input");
  }
  if (ids < 0)
    return Status::error(path + ": the plan has no integer input for tokens");
  const TensorRef &in = plan.inputs[ids];
  if (in.rank() != 2 ||
      (targets >= 0 && plan.inputs[targets].shape != in.shape))
    return Status::error(path + ": token inputs must be [batch, seq]");
  if (seqLen != in.shape[1])
    return Status::error("--seq-len " + std::to_string(seqLen) +
                         " differs from the plan's sequence length " +
                         std::to_string(in.shape[1]));
  return Status::ok();
}
} // namespace

Status binTokenData(const std::string &path, const Plan &plan, int64_t seqLen,
                    int64_t rank, int64_t worldSize,
                    std::unique_ptr<DataSource> &out) {
  std::string bytes;
  FSDP_RETURN_IF_ERROR(readFile(path, bytes, "the token file"));
  return binTokenDataFromBytes(std::move(bytes), path, plan, seqLen, rank,
                               worldSize, out);
}

Status binTokenDataFromBytes(std::string bytes, const std::string &path,
                             const Plan &plan, int64_t seqLen, int64_t rank,
                             int64_t worldSize,
                             std::unique_ptr<DataSource> &out) {
  int64_t ids = -1, targets = -1;
  FSDP_RETURN_IF_ERROR(tokenInputs(plan, path, seqLen, ids, targets));
  const TensorRef &in = plan.inputs[ids];
  if (bytes.size() < BinTokens::kHeaderBytes ||
      (int32_t)u32(bytes, 0) != 20240520 || (int32_t)u32(bytes, 4) != 1 ||
      (int32_t)u32(bytes, 8) < 0)
    return Status::error(
        path + ": not an llm.c token file (magic 20240520, version 1)");
  // The file's size, not the header's count, bounds what is read.
  int64_t count = (int32_t)u32(bytes, 8);
  if (count > int64_t(bytes.size() - BinTokens::kHeaderBytes) / 2)
    return Status::error(path + ": holds fewer tokens than its header says");
  if (count < seqLen + 1)
    return Status::error(path + ": fewer than seq-len + 1 tokens");
  out = std::make_unique<BinTokens>(std::move(bytes), count, ids, targets,
                                    in.shape[0], seqLen, rank, worldSize);
  return Status::ok();
}

std::unique_ptr<DataSource> syntheticData(const Plan &plan, uint64_t seed) {
  return std::make_unique<Synthetic>(plan, seed);
}

Status npzData(const std::string &path, const Plan &plan, int64_t rank,
               int64_t worldSize, std::unique_ptr<DataSource> &out) {
  std::string bytes;
  FSDP_RETURN_IF_ERROR(readFile(path, bytes, "the data archive"));
  return npzDataFromBytes(bytes, path, plan, rank, worldSize, out);
}

namespace {
/// Replaces an integer array's data by the same values as int64 ("<i8").
Status widenToInt64(Array &a, const std::string &path,
                    const std::string &name) {
  int64_t width = a.descr == "<i4" ? 4 : (a.descr == "|u1" || a.descr == "|i1") ? 1 : 2;
  int64_t count = 1;
  for (int64_t d : a.shape)
    if (d < 0 || __builtin_mul_overflow(count, d, &count))
      return Status::error(path + ": '" + name + "' has shape too large");
  int64_t need = 0;
  if (__builtin_mul_overflow(count, width, &need) ||
      (int64_t)a.data.size() != need)
    return Status::error(path + ": '" + name +
                         "' holds the wrong number of bytes");
  std::string wide(size_t(count) * 8, '\0');
  for (int64_t i = 0; i < count; ++i) {
    const char *p = a.data.data() + i * width;
    int64_t v = 0;
    if (a.descr == "<i4") {
      int32_t x;
      std::memcpy(&x, p, 4);
      v = x;
    } else if (a.descr == "<i2") {
      int16_t x;
      std::memcpy(&x, p, 2);
      v = x;
    } else if (a.descr == "<u2") {
      uint16_t x;
      std::memcpy(&x, p, 2);
      v = x;
    } else if (a.descr == "|i1") {
      v = int8_t(*p);
    } else {
      v = uint8_t(*p);
    }
    std::memcpy(&wide[size_t(i) * 8], &v, 8);
  }
  a.data = std::move(wide);
  a.descr = "<i8";
  return Status::ok();
}
} // namespace

Status npzDataFromBytes(const std::string &bytes, const std::string &path,
                        const Plan &plan, int64_t rank, int64_t worldSize,
                        std::unique_ptr<DataSource> &out) {
  std::map<std::string, Array> arrays;
  FSDP_RETURN_IF_ERROR(parseNpz(bytes, path, arrays));
  std::vector<Array> ordered;
  for (const TensorRef &t : plan.inputs) {
    auto it = arrays.find(t.name);
    if (it == arrays.end())
      return Status::error(path + ": no array named '" + t.name +
                           "' (the graph input)");
    Array &a = it->second;
    std::string want = t.dtype == DType::F32   ? "<f4"
                       : t.dtype == DType::I64 ? "<i8"
                                               : "|b1";
    // Token ids are often stored narrower (nanoGPT's uint16, int32):
    // widened to the plan's int64 exactly, after the byte count is checked
    // against the array's own element size.
    if (want == "<i8" && a.descr != want &&
        (a.descr == "<i4" || a.descr == "<u2" || a.descr == "<i2" ||
         a.descr == "|u1" || a.descr == "|i1")) {
      FSDP_RETURN_IF_ERROR(widenToInt64(a, path, t.name));
    }
    if (a.descr != want)
      return Status::error(path + ": '" + t.name + "' has dtype " + a.descr +
                           ", the plan needs " + want);
    // A 0-dim input has no batch dimension: the archive holds its one
    // value (a 0-dim array), the same at every step and on every rank.
    if (t.shape.empty() && !a.shape.empty())
      return Status::error(path + ": '" + t.name +
                           "' is 0-dim in the plan; the archive must hold "
                           "one value (a 0-dim array), not an array of "
                           "rank " +
                           std::to_string(a.shape.size()));
    if (!t.shape.empty() &&
        (a.shape.size() != t.shape.size() || a.shape[0] < 1 ||
         !std::equal(a.shape.begin() + 1, a.shape.end(),
                     t.shape.begin() + 1)))
      return Status::error(path + ": '" + t.name +
                           "' rows do not have the plan's shape");
    // Checked: a crafted shape must not wrap into a small size.
    int64_t bytes = dtypeSize(t.dtype);
    for (int64_t d : a.shape)
      if (__builtin_mul_overflow(bytes, d, &bytes))
        return Status::error(path + ": '" + t.name + "' has shape too large");
    if ((int64_t)a.data.size() != bytes)
      return Status::error(path + ": '" + t.name +
                           "' holds the wrong number of bytes");
    ordered.push_back(std::move(a));
  }
  out = std::make_unique<Npz>(plan, std::move(ordered), rank, worldSize);
  return Status::ok();
}

Status writeSafetensors(const std::string &path,
                        const std::vector<NamedTensor> &tensors) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const NamedTensor &t : tensors) {
    uint64_t n = 1;
    for (int64_t d : t.shape)
      n *= d;
    header[t.name] = {{"dtype", "F32"},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + n * 4}}};
    offset += n * 4;
  }
  header["__metadata__"] = {{"format", "pt"}};
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  AtomicFile out;
  FSDP_RETURN_IF_ERROR(out.open(path));
  uint64_t len = h.size();
  FSDP_RETURN_IF_ERROR(out.write(&len, 8));
  FSDP_RETURN_IF_ERROR(out.write(h.data(), h.size()));
  for (const NamedTensor &t : tensors) {
    uint64_t n = 1;
    for (int64_t d : t.shape)
      n *= d;
    FSDP_RETURN_IF_ERROR(out.write(t.data, n * 4));
  }
  return out.commit();
}

} // namespace fsdp
