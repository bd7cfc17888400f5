//===- Plan.cpp - Load and validate a plan --------------------------------===//
#include "runtime/plan/Plan.h"
#include "runtime/support/CheckedJson.h"
#include "runtime/support/Digest.h"
#include "runtime/support/File.h"
#include "runtime/support/Half.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

namespace fsdp {

int64_t Instruction::attrInt(const char *name, int64_t dflt) const {
  auto it = attrs.find(name);
  return it != attrs.end() && it->is_number_integer() ? it->get<int64_t>()
                                                      : dflt;
}
double Instruction::attrFloat(const char *name, double dflt) const {
  auto it = attrs.find(name);
  return it != attrs.end() && it->is_number() ? it->get<double>() : dflt;
}
bool Instruction::attrBool(const char *name, bool dflt) const {
  auto it = attrs.find(name);
  return it != attrs.end() && it->is_boolean() ? it->get<bool>() : dflt;
}
std::string Instruction::attrString(const char *name, const char *dflt) const {
  auto it = attrs.find(name);
  return it != attrs.end() && it->is_string() ? it->get<std::string>() : dflt;
}

int64_t dtypeSize(DType t) {
  switch (t) {
  case DType::F32:
    return 4;
  case DType::I64:
    return 8;
  case DType::I1:
    return 1;
  case DType::BF16:
  case DType::F16:
    return 2;
  }
  return 1;
}

const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "f32";
  case DType::I64:
    return "i64";
  case DType::I1:
    return "i1";
  case DType::BF16:
    return "bf16";
  case DType::F16:
    return "f16";
  }
  return "?";
}

static int64_t product(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

int64_t TensorRef::numel() const { return product(shape); }
int64_t ParamInfo::numel() const { return product(shape); }

namespace {

using json = nlohmann::json;

/// Checks a JSON field's presence and type; errors name the path. The
/// plan's own fields (shapes within the CPU backend's rank, dtypes,
/// tensor locations) on top of the shared checked reader.
struct Reader : JsonReader {
  bool shape(const json &obj, const std::string &where,
             std::vector<int64_t> &out) {
    const json *f = field(obj, "shape", where);
    if (!f)
      return false;
    if (!f->is_array())
      return fail(where + ".shape", "expected an array");
    out.clear();
    if (f->size() > kMaxRank)
      return fail(where + ".shape", "rank " + std::to_string(f->size()) +
                                        " exceeds the CPU backend's " +
                                        std::to_string(kMaxRank));
    int64_t count = 1;
    for (const json &d : *f) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        return fail(where + ".shape",
                    "dimensions must be non-negative integers");
      int64_t v = d.get<int64_t>();
      if (v != 0 && count > (int64_t(1) << 40) / v)
        return fail(where + ".shape", "too many elements");
      count *= v;
      out.push_back(v);
    }
    return true;
  }

  bool dtype(const json &obj, const std::string &where, DType &out) {
    std::string name;
    if (!string(obj, "dtype", where, name))
      return false;
    if (name == "f32")
      out = DType::F32;
    else if (name == "i64")
      out = DType::I64;
    else if (name == "i1")
      out = DType::I1;
    else if (name == "bf16")
      out = DType::BF16;
    else if (name == "f16")
      out = DType::F16;
    else
      return fail(where + ".dtype",
                  "'" + name + "' is not supported by the CPU backend");
    return true;
  }

  bool tensor(const json &obj, const std::string &where, const Plan &plan,
              TensorRef &t) {
    std::string space;
    if (!string(obj, "space", where, space) || !shape(obj, where, t.shape) ||
        !dtype(obj, where, t.dtype))
      return false;
    if (space == "arena") {
      t.space = Space::Arena;
      if (!integer(obj, "offset", where, t.offset))
        return false;
      if (t.offset < 0 || t.offset > plan.arenaBytes ||
          t.bytes() > plan.arenaBytes - t.offset)
        return fail(where, "bytes [" + std::to_string(t.offset) + ", " +
                               std::to_string(t.offset + t.bytes()) +
                               ") lie outside the arena of " +
                               std::to_string(plan.arenaBytes) + " bytes");
      // Every offset the planner writes is a whole number of elements
      // (kernels read them as their type; a misaligned one is undefined).
      if (t.offset % dtypeSize(t.dtype) != 0)
        return fail(where, "offset " + std::to_string(t.offset) +
                               " is not a multiple of its " +
                               std::to_string(dtypeSize(t.dtype)) +
                               "-byte elements");
    } else if (space == "host") {
      t.space = Space::Host;
      if (!integer(obj, "offset", where, t.offset))
        return false;
      if (t.offset < 0 || t.offset > plan.hostArenaBytes ||
          t.bytes() > plan.hostArenaBytes - t.offset ||
          t.offset % dtypeSize(t.dtype) != 0)
        return fail(where, "bytes [" + std::to_string(t.offset) + ", " +
                               std::to_string(t.offset + t.bytes()) +
                               ") lie outside the host arena of " +
                               std::to_string(plan.hostArenaBytes) +
                               " bytes or are misaligned");
    } else if (space == "host_buffer") {
      t.space = Space::HostBuffer;
      if (!integer(obj, "index", where, t.index))
        return false;
      if (t.index < 0 || t.index >= (int64_t)plan.hostBuffers.size() ||
          plan.hostBuffers[t.index].numel() != t.numel() ||
          plan.hostBuffers[t.index].dtype != t.dtype)
        return fail(where, "index " + std::to_string(t.index) +
                               " names no host buffer of this size and dtype");
    } else if (space == "device_copy") {
      t.space = Space::DeviceCopy;
      if (!integer(obj, "index", where, t.index))
        return false;
      size_t first = plan.params.size();
      if (t.index < (int64_t)first || t.index >= (int64_t)plan.slotCount() ||
          !plan.flats[t.index - first].hasDeviceCopy() ||
          plan.flats[t.index - first].shardNumel != t.numel() ||
          plan.flats[t.index - first].deviceCopy != t.dtype)
        return fail(where, "index " + std::to_string(t.index) +
                               " names no device copy of this shape and "
                               "dtype (an offload = \"optimizer\" flat)");
    } else if (space == "param" || space == "const" || space == "grad") {
      t.space = space == "param"  ? Space::Param
                : space == "grad" ? Space::Grad
                                  : Space::Const;
      if (!integer(obj, "index", where, t.index))
        return false;
      if (t.space == Space::Param || t.space == Space::Grad) {
        if (t.index < 0 || t.index >= (int64_t)plan.slotCount())
          return fail(where, "parameter index " + std::to_string(t.index) +
                                 " out of range");
        if (plan.slotNumel(t.index) != t.numel() || t.dtype != DType::F32)
          return fail(where, "does not match parameter '" +
                                 plan.slotName(t.index) + "'");
        if (t.space == Space::Grad && !plan.slotTrainable(t.index))
          return fail(where, "reads the gradient of frozen parameter '" +
                                 plan.slotName(t.index) + "'");
      } else {
        if (t.index < 0 || t.index >= (int64_t)plan.constants.size())
          return fail(where, "constant index " + std::to_string(t.index) +
                                 " out of range");
        const ConstantInfo &c = plan.constants[t.index];
        if (product(c.shape) != t.numel() || c.dtype != t.dtype)
          return fail(where,
                      "does not match constant " + std::to_string(t.index));
      }
    } else {
      return fail(where + ".space", "unknown space '" + space + "'");
    }
    std::string name;
    if (!string(obj, "name", where, name, /*required=*/false))
      return false;
    t.name = name;
    return true;
  }
};

/// Decodes standard base64; false on a malformed string.
bool decodeBase64(const std::string &in, std::string &out) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z')
      return c - 'A';
    if (c >= 'a' && c <= 'z')
      return c - 'a' + 26;
    if (c >= '0' && c <= '9')
      return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  if (in.size() % 4 != 0)
    return false;
  out.clear();
  out.reserve(in.size() / 4 * 3);
  for (size_t i = 0; i < in.size(); i += 4) {
    int v[4], pad = 0;
    for (int k = 0; k < 4; ++k) {
      char c = in[i + k];
      if (c == '=' && i + 4 == in.size() && k >= 2) {
        v[k] = 0;
        ++pad;
        continue;
      }
      if (pad || (v[k] = value(c)) < 0)
        return false;
    }
    uint32_t n = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
    out.push_back((char)(n >> 16));
    if (pad < 2)
      out.push_back((char)(n >> 8));
    if (pad < 1)
      out.push_back((char)n);
  }
  return true;
}

double constantValue(const json &v) {
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    if (s == "inf")
      return std::numeric_limits<double>::infinity();
    if (s == "-inf")
      return -std::numeric_limits<double>::infinity();
    return std::numeric_limits<double>::quiet_NaN();
  }
  return v.get<double>();
}

/// Parses the instruction list `key` (absent is fine unless required).
Status parseProgram(Reader &r, const json &doc, const char *key,
                    const Plan &plan, std::vector<Instruction> &out,
                    bool required) {
  const json *program = r.field(doc, key, "plan", required);
  if (!program)
    return r.status;
  if (!program->is_array())
    return Status::error(std::string("plan.") + key + ": expected an array");
  for (size_t i = 0; i < program->size(); ++i) {
    const json &ins = (*program)[i];
    std::string where =
        std::string("plan.") + key + "[" + std::to_string(i) + "]";
    Instruction instr;
    if (!r.string(ins, "op", where, instr.op))
      return r.status;
    where += " (" + instr.op + ")";
    for (auto [key, list] :
         {std::pair{"in", &instr.in}, std::pair{"out", &instr.out}}) {
      const json *arr = r.field(ins, key, where);
      if (!arr || !arr->is_array())
        return r.status.isOk()
                   ? Status::error(where + "." + key + ": expected an array")
                   : r.status;
      for (size_t k = 0; k < arr->size(); ++k) {
        TensorRef t;
        if (!r.tensor((*arr)[k],
                      where + "." + key + "[" + std::to_string(k) + "]", plan,
                      t))
          return r.status;
        list->push_back(std::move(t));
      }
    }
    if (const json *pr = r.field(ins, "predicted", where, false)) {
      if (!pr->is_array() || pr->size() != 2 || !(*pr)[0].is_number() ||
          !(*pr)[1].is_number())
        return Status::error(where + ".predicted: expected [start, end]");
      instr.predictedStart = (*pr)[0].get<double>();
      instr.predictedEnd = (*pr)[1].get<double>();
    }
    if (const json *c = r.field(ins, "cost", where, false)) {
      if (!c->is_array() || c->size() != 2 || !(*c)[0].is_number_integer() ||
          !(*c)[1].is_number_integer() || (*c)[0].get<int64_t>() < 0 ||
          (*c)[1].get<int64_t>() < 0)
        return Status::error(where + ".cost: expected [flops, bytes]");
      instr.costFlops = (*c)[0].get<int64_t>();
      instr.costBytes = (*c)[1].get<int64_t>();
    }
    if (const json *a = r.field(ins, "attrs", where, false)) {
      if (!a->is_object())
        return Status::error(where + ".attrs: expected an object");
      instr.attrs = *a;
    } else {
      instr.attrs = json::object();
    }
    FSDP_RETURN_IF_ERROR(checkInstruction(plan, instr).withContext(where));
    out.push_back(std::move(instr));
  }
  return Status::ok();
}

} // namespace

Status checkChoice(const std::string &what, const std::string &value,
                   const std::vector<const char *> &allowed) {
  std::string names;
  for (const char *v : allowed) {
    if (value == v)
      return Status::ok();
    names += std::string(names.empty() ? "" : ", ") + v;
  }
  return Status::error(what + ": '" + value + "' is not one of " + names);
}

Status parsePlan(const std::string &text, Plan &plan) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded())
    return Status::error("not valid JSON (truncated or corrupt plan)");
  Reader r;
  std::string format;
  int64_t version = 0;
  if (!r.string(doc, "format", "plan", format) ||
      !r.integer(doc, "version", "plan", version))
    return r.status;
  if (format != "fsdp-plan")
    return Status::error("not an fsdp plan (format '" + format + "')");
  if (version != kPlanVersion)
    return Status::error("plan version " + std::to_string(version) +
                         " is not supported (this runtime reads version " +
                         std::to_string(kPlanVersion) + ")");
  if (!r.integer(doc, "arena_bytes", "plan", plan.arenaBytes))
    return r.status;
  if (plan.arenaBytes < 0 || plan.arenaBytes > (int64_t(1) << 42))
    return Status::error("plan.arena_bytes: " +
                         std::to_string(plan.arenaBytes) + " is out of range");
  if (!r.integer(doc, "host_arena_bytes", "plan", plan.hostArenaBytes, false))
    return r.status;
  if (const json *bufs = r.field(doc, "host_buffers", "plan", false)) {
    if (!bufs->is_array() || bufs->size() > (size_t(1) << 20))
      return Status::error("plan.host_buffers: expected an array");
    for (size_t i = 0; i < bufs->size(); ++i) {
      std::string where = "plan.host_buffers[" + std::to_string(i) + "]";
      TensorRef t;
      t.space = Space::HostBuffer;
      t.index = (int64_t)i;
      if (!r.shape((*bufs)[i], where, t.shape) ||
          !r.dtype((*bufs)[i], where, t.dtype))
        return r.status;
      int64_t of = -1;
      if (!r.integer((*bufs)[i], "copy_of", where, of, false))
        return r.status;
      plan.hostBuffers.push_back(std::move(t));
      plan.hostBufferCopyOf.push_back(of);
    }
  }
  if (plan.hostArenaBytes < 0 || plan.hostArenaBytes > (int64_t(1) << 42))
    return Status::error(
        "plan.host_arena_bytes: " + std::to_string(plan.hostArenaBytes) +
        " is out of range");

  if (const json *meta = r.field(doc, "meta", "plan")) {
    r.string(*meta, "source", "plan.meta", plan.source, false);
    r.string(*meta, "source_base", "plan.meta", plan.sourceBase, false);
    if (!plan.sourceBase.empty() &&
        (plan.sourceBase[0] != '/' ||
         plan.source.compare(0, plan.sourceBase.size(), plan.sourceBase) != 0 ||
         plan.source.size() <= plan.sourceBase.size() + 1 ||
         (plan.sourceBase != "/" &&
          plan.source[plan.sourceBase.size()] != '/')))
      return Status::error("plan.meta.source_base: '" + plan.sourceBase +
                           "' is not an absolute directory above the source '" +
                           plan.source + "'");
    r.integer(*meta, "world_size", "plan.meta", plan.worldSize, false);
    r.string(*meta, "strategy", "plan.meta", plan.strategy, false);
    r.string(*meta, "param_dtype", "plan.meta", plan.paramDtype, false);
    r.string(*meta, "reduce_dtype", "plan.meta", plan.reduceDtype, false);
    r.string(*meta, "compute_dtype", "plan.meta", plan.computeDtype, false);
    r.integer(*meta, "replicate_groups", "plan.meta", plan.replicateGroups,
              false);
  }
  if (const json *t = r.field(doc, "train", "plan", false)) {
    TrainOptions &o = plan.train;
    r.string(*t, "loss", "plan.train", o.loss, false);
    r.string(*t, "optimizer", "plan.train", o.optimizer, false);
    r.string(*t, "lr_schedule", "plan.train", o.lrSchedule, false);
    r.integer(*t, "warmup_steps", "plan.train", o.warmupSteps, false);
    r.integer(*t, "total_steps", "plan.train", o.totalSteps, false);
    r.integer(*t, "grad_accum", "plan.train", o.gradAccum, false);
    if (const json *c = r.field(*t, "grad_clip", "plan.train", false))
      o.gradClip = c->is_number() ? c->get<double>() : 0;
  }
  if (!r.status)
    return r.status;
  // Names the runtime acts on (or records in checkpoints): one of the
  // choices fsdp-opt writes (absent fields keep their default, a choice).
  const std::vector<const char *> dtypes = {"f32", "bf16", "f16"};
  FSDP_RETURN_IF_ERROR(
      checkChoice("plan.meta.strategy", plan.strategy,
                  {"full-shard", "shard-grad-op", "hybrid-shard", "no-shard"}));
  FSDP_RETURN_IF_ERROR(
      checkChoice("plan.meta.param_dtype", plan.paramDtype, dtypes));
  FSDP_RETURN_IF_ERROR(
      checkChoice("plan.meta.reduce_dtype", plan.reduceDtype, dtypes));
  FSDP_RETURN_IF_ERROR(
      checkChoice("plan.meta.compute_dtype", plan.computeDtype, dtypes));
  FSDP_RETURN_IF_ERROR(checkChoice("plan.train.optimizer", plan.train.optimizer,
                                   {"adamw", "sgd"}));
  FSDP_RETURN_IF_ERROR(checkChoice(
      "plan.train.lr_schedule", plan.train.lrSchedule, {"constant", "cosine"}));

  const json *params = r.field(doc, "params", "plan");
  if (!params || !params->is_array())
    return r.status.isOk() ? Status::error("plan.params: expected an array")
                           : r.status;
  for (size_t i = 0; i < params->size(); ++i) {
    const json &p = (*params)[i];
    std::string where = "plan.params[" + std::to_string(i) + "]";
    ParamInfo info;
    if (!r.string(p, "name", where, info.name) ||
        !r.shape(p, where, info.shape) || !r.dtype(p, where, info.dtype) ||
        !r.string(p, "source", where, info.source) ||
        !r.string(p, "module_path", where, info.modulePath, false) ||
        !r.string(p, "location", where, info.location, false) ||
        !r.integer(p, "offset", where, info.offset, false) ||
        !r.integer(p, "length", where, info.length, false))
      return r.status;
    if (const json *t = r.field(p, "trainable", where, false))
      info.trainable = t->is_boolean() && t->get<bool>();
    plan.params.push_back(std::move(info));
  }

  if (const json *flats = r.field(doc, "flats", "plan", false)) {
    if (!flats->is_array())
      return Status::error("plan.flats: expected an array");
    for (size_t i = 0; i < flats->size(); ++i) {
      const json &f = (*flats)[i];
      std::string where = "plan.flats[" + std::to_string(i) + "]";
      FlatInfo info;
      DType dt;
      if (!r.string(f, "name", where, info.name) ||
          !r.string(f, "unit", where, info.unit) || !r.dtype(f, where, dt) ||
          !r.integer(f, "shard_numel", where, info.shardNumel) ||
          !r.integer(f, "numel", where, info.numel) ||
          !r.integer(f, "group_size", where, info.groupSize))
        return r.status;
      if (const json *t = r.field(f, "trainable", where, false))
        info.trainable = t->is_boolean() && t->get<bool>();
      if (!r.string(f, "offload", where, info.offload, false))
        return r.status;
      if (!info.offload.empty()) {
        FSDP_RETURN_IF_ERROR(checkChoice(where + ".offload", info.offload,
                                         {"optimizer", "all"}));
        if (!info.trainable)
          return Status::error(where + ": only a trained flat parameter is "
                                       "offloaded");
      }
      if (r.field(f, "device_copy", where, false)) {
        std::string dc;
        r.string(f, "device_copy", where, dc);
        json probe = {{"dtype", dc}};
        if (!info.hasDeviceCopy() ||
            !r.dtype(probe, where + ".device_copy", info.deviceCopy) ||
            (info.deviceCopy != DType::F32 && info.deviceCopy != DType::BF16 &&
             info.deviceCopy != DType::F16))
          return Status::error(where + ".device_copy: a float dtype, given "
                                       "with offload = \"optimizer\" only");
      } else if (info.hasDeviceCopy()) {
        return Status::error(where + ": offload = \"optimizer\" needs a "
                                     "device_copy dtype");
      }
      if (dt != DType::F32)
        return Status::error(where +
                             ": only f32 flat parameters are supported");
      if (plan.replicateGroups < 1 ||
          info.groupSize * plan.replicateGroups != plan.worldSize ||
          info.shardNumel < 1 || info.numel < 1 ||
          info.shardNumel > (int64_t(1) << 40) ||
          info.shardNumel * info.groupSize < info.numel)
        return Status::error(
            where + ": " + std::to_string(info.groupSize) + " shards of " +
            std::to_string(info.shardNumel) + " elements cannot hold " +
            std::to_string(info.numel) + " elements, or the group is not the " +
            std::to_string(plan.worldSize) + " ranks of the plan over " +
            std::to_string(plan.replicateGroups) + " replica groups");
      const json *ps = r.field(f, "params", where);
      const json *os = r.field(f, "offsets", where);
      if (!ps || !os || !ps->is_array() || !os->is_array() ||
          ps->size() != os->size())
        return Status::error(where +
                             ": params and offsets must be arrays of one size");
      int64_t end = 0;
      for (size_t k = 0; k < ps->size(); ++k) {
        const json &pj = (*ps)[k], &oj = (*os)[k];
        if (!pj.is_number_integer() || !oj.is_number_integer())
          return Status::error(where + ": params and offsets must be integers");
        int64_t p = pj.get<int64_t>(), off = oj.get<int64_t>();
        if (p < 0 || p >= (int64_t)plan.params.size() ||
            plan.params[p].flat != -1 || off < end ||
            off + plan.params[p].numel() > info.numel)
          return Status::error(where + ": parameter " + std::to_string(p) +
                               " at offset " + std::to_string(off) +
                               " is unknown, already placed, overlaps the "
                               "previous one or ends past numel");
        end = off + plan.params[p].numel();
        plan.params[p].flat = (int64_t)i;
        plan.params[p].flatOffset = off;
        plan.params[p].trainable = info.trainable;
        info.params.push_back(p);
        info.offsets.push_back(off);
      }
      plan.flats.push_back(std::move(info));
    }
  }

  if (const json *units = r.field(doc, "units", "plan", false)) {
    if (!units->is_array())
      return Status::error("plan.units: expected an array");
    for (size_t i = 0; i < units->size(); ++i) {
      const json &u = (*units)[i];
      std::string where = "plan.units[" + std::to_string(i) + "]";
      UnitInfo info;
      if (!r.string(u, "name", where, info.name))
        return r.status;
      if (const json *ps = r.field(u, "params", where, false)) {
        if (!ps->is_array())
          return Status::error(where + ".params: expected an array");
        for (const json &pj : *ps) {
          if (!pj.is_number_integer() || pj.get<int64_t>() < 0 ||
              pj.get<int64_t>() >= (int64_t)plan.params.size())
            return Status::error(where + ".params: bad parameter index");
          info.params.push_back(pj.get<int64_t>());
        }
      }
      if (const json *rf = r.field(u, "reshard_after_forward", where, false))
        info.reshardAfterForward = rf->is_boolean() && rf->get<bool>();
      r.integer(u, "reshard_to", where, info.reshardTo, false);
      plan.units.push_back(std::move(info));
    }
  }
  if (const json *pred = r.field(doc, "predicted", "plan", false)) {
    if (!pred->is_object())
      return Status::error("plan.predicted: expected an object");
    plan.predicted = *pred;
  }

  if (const json *consts = r.field(doc, "constants", "plan", false)) {
    if (!consts->is_array())
      return Status::error("plan.constants: expected an array");
    for (size_t i = 0; i < consts->size(); ++i) {
      const json &c = (*consts)[i];
      std::string where = "plan.constants[" + std::to_string(i) + "]";
      ConstantInfo info;
      if (!r.shape(c, where, info.shape) || !r.dtype(c, where, info.dtype))
        return r.status;
      auto isValue = [](const json &v) {
        return v.is_number() || v.is_string();
      };
      // An i64 constant's JSON integers read as int64, exactly; a value
      // that is no integer is refused (a cast of NaN to int64 is undefined).
      auto addValue = [&](const json &v) {
        info.values.push_back(constantValue(v));
        if (info.dtype != DType::I64)
          return true;
        double d = info.values.back();
        if (v.is_number_integer())
          info.ints.push_back(v.get<int64_t>());
        else if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) < 0x1p63)
          info.ints.push_back((int64_t)d);
        else
          return false;
        return true;
      };
      if (const json *s = r.field(c, "splat", where, false)) {
        if (!isValue(*s))
          return Status::error(where + ".splat: expected a number");
        info.splat = true;
        if (!addValue(*s))
          return Status::error(where + ".splat: expected an integer (i64)");
      } else if (const json *b = r.field(c, "base64", where, false)) {
        std::string bytes;
        int64_t n = product(info.shape), width = dtypeSize(info.dtype);
        if (!b->is_string() || !decodeBase64(b->get<std::string>(), bytes) ||
            (int64_t)bytes.size() != n * width)
          return Status::error(where + ".base64: expected " +
                               std::to_string(n * width) + " bytes of base64");
        info.values.resize(n);
        for (int64_t k = 0; k < n; ++k) {
          if (info.dtype == DType::F32) {
            float f;
            std::memcpy(&f, bytes.data() + k * 4, 4);
            info.values[k] = f;
          } else if (info.dtype == DType::I64) {
            int64_t x;
            std::memcpy(&x, bytes.data() + k * 8, 8);
            info.values[k] = (double)x;
            info.ints.push_back(x);
          } else if (info.dtype == DType::BF16 || info.dtype == DType::F16) {
            uint16_t h;
            std::memcpy(&h, bytes.data() + k * 2, 2);
            info.values[k] =
                info.dtype == DType::BF16 ? floatFromBf16(h) : floatFromF16(h);
          } else {
            info.values[k] = bytes[k] != 0;
          }
        }
      } else if (const json *d = r.field(c, "data", where)) {
        if (!d->is_array() || (int64_t)d->size() != product(info.shape))
          return Status::error(where + ".data: expected " +
                               std::to_string(product(info.shape)) + " values");
        for (const json &v : *d) {
          if (!isValue(v))
            return Status::error(where + ".data: expected numbers");
          if (!addValue(v))
            return Status::error(where + ".data: expected integers (i64)");
        }
      } else {
        return r.status;
      }
      plan.constants.push_back(std::move(info));
    }
  }

  for (auto [key, list] : {std::pair{"inputs", &plan.inputs},
                           std::pair{"outputs", &plan.outputs}}) {
    const json *arr = r.field(doc, key, "plan");
    if (!arr || !arr->is_array())
      return r.status.isOk() ? Status::error(std::string("plan.") + key +
                                             ": expected an array")
                             : r.status;
    for (size_t i = 0; i < arr->size(); ++i) {
      TensorRef t;
      if (!r.tensor((*arr)[i],
                    std::string("plan.") + key + "[" + std::to_string(i) + "]",
                    plan, t))
        return r.status;
      list->push_back(std::move(t));
    }
  }

  FSDP_RETURN_IF_ERROR(
      parseProgram(r, doc, "program", plan, plan.program, true));
  FSDP_RETURN_IF_ERROR(
      parseProgram(r, doc, "update", plan, plan.update, false));
  if (const json *arr = r.field(doc, "update_outputs", "plan", false)) {
    if (!arr->is_array())
      return Status::error("plan.update_outputs: expected an array");
    for (size_t i = 0; i < arr->size(); ++i) {
      TensorRef t;
      if (!r.tensor((*arr)[i], "plan.update_outputs[" + std::to_string(i) + "]",
                    plan, t))
        return r.status;
      plan.updateOutputs.push_back(std::move(t));
    }
  }
  // Number every instruction and pair each wait with the collective whose
  // buffer it reads (the latest earlier start writing that buffer).
  int64_t next = 0;
  for (std::vector<Instruction> *list : {&plan.program, &plan.update}) {
    for (size_t i = 0; i < list->size(); ++i) {
      Instruction &in = (*list)[i];
      in.index = next++;
      in.deferred = in.attrs.contains("deferred");
      if (in.op != "wait")
        continue;
      for (int64_t j = (int64_t)i - 1; j >= 0 && in.start < 0; --j) {
        const Instruction &c = (*list)[j];
        bool copy = c.op == "copy_start";
        // A step buffer by offset, persistent storage (a copy into a host
        // buffer or a device copy) by index.
        bool byOffset = !c.out.empty() && (c.out[0].space == Space::Arena ||
                                           c.out[0].space == Space::Host);
        if ((isCollective(c.op) || copy) && !c.out.empty() &&
            c.out[0].space == in.in[0].space &&
            (byOffset ? c.out[0].offset == in.in[0].offset
                      : copy && c.out[0].index == in.in[0].index)) {
          in.start = c.index;
          in.completesCopy = copy;
        }
      }
      if (in.start < 0)
        return Status::error("plan: wait at instruction " + std::to_string(i) +
                             " completes no earlier collective");
    }
  }
  for (size_t i = 0; i < plan.hostBuffers.size(); ++i) {
    int64_t of = plan.hostBufferCopyOf[i];
    size_t first = plan.params.size();
    const TensorRef &b = plan.hostBuffers[i];
    if (of != -1 && (of < (int64_t)first || of >= (int64_t)plan.slotCount() ||
                     plan.flats[of - first].offload.empty() ||
                     plan.flats[of - first].shardNumel != b.numel() ||
                     (b.dtype != DType::F32 && b.dtype != DType::BF16 &&
                      b.dtype != DType::F16)))
      return Status::error("plan.host_buffers[" + std::to_string(i) +
                           "].copy_of: names no offloaded shard of its size, "
                           "or the buffer is not a float");
  }
  if (plan.train.gradAccum < 1)
    return Status::error("plan.train.grad_accum must be >= 1");
  if ((plan.train.gradAccum > 1) != !plan.update.empty())
    return Status::error(
        "plan.update must be present exactly when grad_accum > 1");
  return Status::ok();
}

int64_t Plan::slotNumel(size_t slot) const {
  if (slot < params.size())
    return params[slot].flat >= 0 ? 0 : params[slot].numel();
  return flats[slot - params.size()].shardNumel;
}

bool Plan::slotTrainable(size_t slot) const {
  return slot < params.size() ? params[slot].trainable && params[slot].flat < 0
                              : flats[slot - params.size()].trainable;
}

std::vector<Instruction> Plan::copyRefills() const {
  std::vector<Instruction> out;
  auto castOf = [&](int64_t slot, const TensorRef &to) {
    Instruction cast;
    cast.op = "cast";
    TensorRef from;
    from.space = Space::Param;
    from.index = slot;
    from.shape = to.shape;
    cast.in = {from};
    cast.out = {to};
    out.push_back(std::move(cast));
  };
  for (size_t f = 0; f < flats.size(); ++f)
    if (flats[f].hasDeviceCopy()) {
      TensorRef to;
      to.space = Space::DeviceCopy;
      to.index = (int64_t)(params.size() + f);
      to.shape = {flats[f].shardNumel};
      to.dtype = flats[f].deviceCopy;
      castOf(to.index, to);
    }
  for (size_t i = 0; i < hostBuffers.size() && i < hostBufferCopyOf.size(); ++i)
    if (hostBufferCopyOf[i] >= 0)
      castOf(hostBufferCopyOf[i], hostBuffers[i]);
  return out;
}

std::string Plan::slotName(size_t slot) const {
  return slot < params.size() ? params[slot].name
                              : flats[slot - params.size()].name;
}

Status loadPlan(const std::string &path, Plan &plan) {
  std::string text;
  FSDP_RETURN_IF_ERROR(readFile(path, text, "the plan"));
  Status s = parsePlan(text, plan);
  if (s)
    s = checkDigest(text);
  plan.digest = digestOf(text);
  return s.withContext(path);
}

} // namespace fsdp
