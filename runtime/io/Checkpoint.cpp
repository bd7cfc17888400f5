//===- Checkpoint.cpp - Save and resume training state --------------------===//
#include "runtime/io/Checkpoint.h"
#include "runtime/io/Data.h"
#include "runtime/support/CheckedJson.h"
#include "runtime/support/File.h"
#include "runtime/support/Finite.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

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
    if (count > 0) // an empty vector's data() may be null (memcpy's is UB)
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

Status
loadSafetensorsWeights(const std::string &path, const Plan &plan,
                       const std::function<std::vector<Piece>(size_t)> &pieces,
                       const std::string &base) {
  std::map<std::string, LoadedTensor> tensors;
  std::string bytes;
  FSDP_RETURN_IF_ERROR(readFileBelow(path, base, bytes, "the weights file"));
  FSDP_RETURN_IF_ERROR(parseSafetensors(bytes, tensors).withContext(path));
  for (size_t i = 0; i < plan.params.size(); ++i) {
    const ParamInfo &p = plan.params[i];
    auto it = tensors.find(p.name);
    if (it == tensors.end())
      return Status::error(path + ": no tensor named '" + p.name + "'");
    if (it->second.shape != p.shape)
      return Status::error(path + ": '" + p.name +
                           "' does not have the planned shape");
    for (const Piece &piece : pieces(i)) {
      if (!satisfies(p.valueRule(), it->second.data.data() + piece.begin,
                     piece.count))
        return Status::error(path + ": '" + p.name + "' holds " +
                             violationName(p.valueRule()));
      std::copy_n(it->second.data.data() + piece.begin, piece.count, piece.dst);
    }
  }
  return Status::ok();
}

namespace {

Status writeText(const fs::path &path, const std::string &text) {
  return writeFileAtomically(path.string(), text);
}

} // namespace

namespace {

/// The tensor-name suffixes of the optimizer state.
struct StateName {
  Executor::State state;
  const char *suffix;
};

std::vector<StateName> stateNames(const Plan &plan, size_t param) {
  if (!plan.params[param].trainable)
    return {{Executor::State::Value, ""}};
  if (plan.train.optimizer == "adamw")
    return {{Executor::State::Value, ""},
            {Executor::State::First, ".exp_avg"},
            {Executor::State::Second, ".exp_avg_sq"}};
  return {{Executor::State::Value, ""},
          {Executor::State::First, ".momentum_buffer"}};
}

std::string shardFile(int64_t rank) {
  char name[64];
  std::snprintf(name, sizeof name, "rank-%05lld.safetensors", (long long)rank);
  return name;
}

/// The manifest: where the pieces of every parameter lie. Rank 0 builds it
/// from the plan alone (every rank's pieces follow from the layout).
nlohmann::json manifest(const Plan &plan, const Executor &exec,
                        const TrainingPosition &position) {
  int64_t shardSize =
      plan.worldSize / std::max<int64_t>(plan.replicateGroups, 1);
  nlohmann::json params = nlohmann::json::object();
  for (size_t i = 0; i < plan.params.size(); ++i) {
    const ParamInfo &p = plan.params[i];
    nlohmann::json pieces = nlohmann::json::array();
    // Replica 0 of every shard group writes: ranks 0 .. shardSize - 1 (one
    // rank, rank 0, for unsharded parameters).
    int64_t writers = p.flat >= 0 ? shardSize : 1;
    for (int64_t r = 0; r < writers; ++r)
      for (auto [begin, count] : Executor::ranges(plan, i, r))
        pieces.push_back(
            {{"file", shardFile(r)}, {"begin", begin}, {"count", count}});
    params[p.name] = {{"shape", p.shape},
                      {"trainable", p.trainable},
                      {"momentum_started", exec.momentumStarted(i)},
                      {"pieces", std::move(pieces)}};
  }
  return {{"format", "fsdp-checkpoint"},
          {"version", 2},
          {"step", position.step},
          {"skipped_updates", position.skippedUpdates},
          {"seed", position.seed},
          {"data", position.data},
          {"optimizer", plan.train.optimizer},
          {"world_size", plan.worldSize},
          {"strategy", plan.strategy},
          {"replicate_groups", plan.replicateGroups},
          {"params", std::move(params)}};
}

} // namespace

CheckpointDirLock::~CheckpointDirLock() {
  if (fd >= 0)
    ::close(fd); // releases the flock; the file stays (its name is reused)
}

Status CheckpointDirLock::acquire(const std::string &dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return Status::error(dir + ": cannot create the checkpoint directory (" +
                         ec.message() + ")");
  std::string path = (fs::path(dir) / ".lock").string();
  fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    return Status::error(path + ": cannot create the checkpoint lock (" +
                         std::strerror(errno) + ")");
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    return Status::error(path + ": the checkpoint lock is not a regular file");
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char holder[256] = {};
    ssize_t n = ::pread(fd, holder, sizeof holder - 1, 0);
    std::string who = n > 0 ? std::string(holder, (size_t)n) : "another run";
    while (!who.empty() && (who.back() == '\n' || who.back() == ' '))
      who.pop_back();
    ::close(fd);
    fd = -1;
    return Status::error(dir + ": checkpoint directory in use by " + who +
                         "; two runs would replace each other's checkpoints");
  }
  char host[128] = "?";
  ::gethostname(host, sizeof host - 1);
  std::string me =
      "pid " + std::to_string((long long)::getpid()) + " on " + host + "\n";
  if (::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, me.data(), me.size(), 0) != (ssize_t)me.size())
    return Status::error(path + ": cannot write the checkpoint lock (" +
                         std::strerror(errno) +
                         "): the directory is not "
                         "writable");
  return Status::ok();
}

namespace {

/// N for a name `step-N` (N decimal digits only), or -1.
int64_t stepOf(const std::string &name) {
  if (name.size() <= 5 || name.compare(0, 5, "step-") != 0 || name.size() > 24)
    return -1;
  int64_t n = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9')
      return -1;
    n = n * 10 + (name[i] - '0');
  }
  return n;
}

} // namespace

void removeLeftovers(const std::string &dir) {
  std::error_code ec;
  for (const auto &e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    fs::file_status st = e.symlink_status(ec);
    bool tmpDir = fs::is_directory(st) && name.size() > 4 &&
                  name.compare(name.size() - 4, 4, ".tmp") == 0 &&
                  stepOf(name.substr(0, name.size() - 4)) >= 0;
    bool tmpFile =
        fs::is_regular_file(st) && name.find(".tmp.") != std::string::npos;
    if (tmpDir)
      fs::remove_all(e.path(), ec);
    else if (tmpFile)
      fs::remove(e.path(), ec);
  }
}

Status keepLatest(const std::string &dir, int64_t keep, int64_t current) {
  if (keep <= 0)
    return Status::ok();
  std::error_code ec;
  std::vector<std::pair<int64_t, fs::path>> steps;
  for (const auto &e : fs::directory_iterator(dir, ec))
    if (int64_t n = stepOf(e.path().filename().string());
        n >= 0 && fs::is_directory(e.symlink_status(ec)))
      steps.push_back({n, e.path()});
  std::sort(steps.begin(), steps.end());
  for (size_t i = 0; i + (size_t)keep < steps.size(); ++i) {
    if (steps[i].first == current)
      continue;
    fs::remove_all(steps[i].second, ec);
    if (ec)
      return Status::error(steps[i].second.string() +
                           ": cannot remove an old checkpoint (" +
                           ec.message() + ")");
  }
  return Status::ok();
}

std::string newestCheckpoint(const std::string &dir) {
  std::error_code ec;
  int64_t best = -1;
  fs::path found;
  for (const auto &e : fs::directory_iterator(dir, ec)) {
    int64_t n = stepOf(e.path().filename().string());
    if (n <= best || !fs::is_directory(e.symlink_status(ec)))
      continue;
    std::error_code mec;
    if (!fs::is_regular_file(
            fs::symlink_status(e.path() / "manifest.json", mec)))
      continue; // a save that did not finish
    best = n;
    found = e.path();
  }
  return found.string();
}

Status prepareSave(const std::string &dir, const Plan &plan, Executor &exec,
                   const TrainingPosition &position, PreparedSave &out) {
  Comm &comm = exec.communicator();
  // A device backend's state comes to the host first (every rank: the
  // error, if any, is agreed on below).
  Status synced = exec.syncHost();
  FSDP_RETURN_IF_ERROR(
      exec.agree(synced.isOk(), "copying the state from the device"));
  out = PreparedSave{};
  out.leader = comm.rank() == 0;
  out.rank = comm.rank();
  out.dir = dir;
  out.step = position.step;
  out.name = "step-" + std::to_string(position.step);
  fs::path tmp = fs::path(dir) / (out.name + ".tmp");
  out.tmp = tmp.string();
  // This rank's unique pieces.
  std::vector<ValueRule> rules; // what each tensor may hold
  for (size_t i = 0; i < plan.params.size(); ++i) {
    if (!exec.writesState(i))
      continue;
    for (const StateName &sn : stateNames(plan, i)) {
      if (sn.state == Executor::State::First &&
          plan.train.optimizer != "adamw" && !exec.momentumStarted(i))
        continue;
      for (const Piece &piece : exec.statePieces(i, sn.state)) {
        out.tensors.push_back({plan.params[i].name + sn.suffix + "#" +
                                   std::to_string(piece.begin),
                               {piece.count},
                               piece.dst});
        rules.push_back(plan.params[i].valueRule());
      }
    }
  }
  // No checkpoint with a NaN (or an inf in trained state) in it is ever
  // written: the first such value this rank holds is named, and every rank
  // stops before writing.
  std::string poisoned;
  for (size_t t = 0; t < out.tensors.size() && poisoned.empty(); ++t)
    if (!satisfies(rules[t], out.tensors[t].data, out.tensors[t].shape[0]))
      poisoned = out.tensors[t].name.substr(0, out.tensors[t].name.rfind('#')) +
                 "' holds " + violationName(rules[t]);
  Status finite = poisoned.empty()
                      ? Status::ok()
                      : Status::error(out.name + " is not saved: '" + poisoned);
  Status allFiniteRanks =
      exec.agree(finite.isOk(), "saving " + out.name + " (state is finite)");
  if (!finite)
    return finite;
  FSDP_RETURN_IF_ERROR(allFiniteRanks);
  if (out.leader)
    out.manifest = manifest(plan, exec, position).dump(1) + "\n";
  std::error_code ec;
  Status made = Status::ok();
  if (out.leader) {
    fs::create_directories(dir, ec);
    fs::remove_all(tmp, ec);
    fs::create_directories(tmp, ec);
    if (ec)
      made = Status::error(tmp.string() + ": cannot create");
  }
  FSDP_RETURN_IF_ERROR(exec.agree(made.isOk(), "creating " + tmp.string()));
  return made;
}

Status writeShard(const PreparedSave &save) {
  Status wrote = Status::ok();
  if (!save.tensors.empty() || save.leader)
    wrote = writeSafetensors(
        (fs::path(save.tmp) / shardFile(save.rank)).string(), save.tensors);
  // Test hook: FSDP_FAULT_IN_SAVE=N dies here while saving step N, leaving
  // a half-written temporary directory, as a crash would.
  if (const char *f = std::getenv("FSDP_FAULT_IN_SAVE"))
    if (std::atoll(f) == save.step)
      std::_Exit(9);
  return wrote;
}

Status commitSave(Executor &exec, const PreparedSave &save, Status wrote) {
  fs::path tmp = save.tmp, final = fs::path(save.dir) / save.name;
  // From here a failed save leaves nothing behind: the leader removes the
  // temporary directory on any return before the commit (each failure
  // below is agreed first, so no rank is still writing into it).
  struct RemoveUnlessCommitted {
    bool leader;
    const fs::path &tmp;
    bool committed = false;
    ~RemoveUnlessCommitted() {
      std::error_code ignored;
      if (leader && !committed)
        fs::remove_all(tmp, ignored);
    }
  } cleanup{save.leader, tmp};
  Status wroteAll = exec.agree(wrote.isOk(), "writing the checkpoint shards");
  if (!wrote)
    return wrote;
  FSDP_RETURN_IF_ERROR(wroteAll);

  Status done = Status::ok();
  if (save.leader) {
    std::error_code ec;
    done = writeText(tmp / "manifest.json", save.manifest);
    if (done) {
      fs::remove_all(final, ec);
      fs::rename(tmp, final, ec);
      if (ec)
        done = Status::error(final.string() +
                             ": cannot rename the checkpoint into place (" +
                             ec.message() + ")");
      else
        cleanup.committed = true;
    }
    if (done) {
      // Point `latest` at it, atomically (never through a planted link).
      done = writeText(fs::path(save.dir) / "latest", save.name + "\n");
    }
  }
  // Every rank learns whether the commit failed; the one that failed says
  // what (the file it could not write).
  Status agreed = exec.agree(done.isOk(), "committing the checkpoint");
  return done.isOk() ? agreed : done;
}

Status saveCheckpoint(const std::string &dir, const Plan &plan, Executor &exec,
                      const TrainingPosition &position) {
  PreparedSave save;
  FSDP_RETURN_IF_ERROR(prepareSave(dir, plan, exec, position, save));
  return commitSave(exec, save, writeShard(save));
}

Status parseManifest(const std::string &text, const std::string &where,
                     Manifest &out) {
  nlohmann::json m = nlohmann::json::parse(text, nullptr, false);
  // Every field's type is checked before it is read (a hand-edited
  // manifest gets an error naming the field, never an abort).
  JsonReader r;
  std::string format;
  int64_t version = 0;
  if (m.is_discarded() || !r.string(m, "format", where, format) ||
      format != "fsdp-checkpoint" || !r.integer(m, "version", where, version) ||
      version != 2)
    return Status::error(where + ": not a version 2 checkpoint manifest" +
                         (r.status ? "" : " (" + r.status.message() + ")"));
  TrainingPosition &position = out.position;
  position.skippedUpdates = 0;
  const nlohmann::json *params = nullptr;
  if (!r.integer(m, "step", where, position.step) ||
      !r.integer(m, "skipped_updates", where, position.skippedUpdates,
                 /*required=*/false) ||
      !r.unsignedInteger(m, "seed", where, position.seed, false) ||
      !r.string(m, "data", where, position.data, false) ||
      !r.string(m, "optimizer", where, out.optimizer) ||
      !(params = r.field(m, "params", where)))
    return r.status;
  if (!params->is_object())
    return Status::error(where + ".params: expected an object");
  if (position.step < 0 || position.skippedUpdates < 0 ||
      position.skippedUpdates > position.step)
    return Status::error(where + ": step " + std::to_string(position.step) +
                         " with " + std::to_string(position.skippedUpdates) +
                         " skipped updates is not a training position");
  for (const auto &[name, entry] : params->items()) {
    std::string at = where + ".params['" + name + "']";
    Manifest::Param &p = out.params[name];
    const nlohmann::json *pieces = nullptr;
    if (!r.dims(entry, "shape", at, p.shape) ||
        !r.boolean(entry, "momentum_started", at, p.momentumStarted, false) ||
        !(pieces = r.field(entry, "pieces", at)))
      return r.status;
    if (!pieces->is_array())
      return Status::error(at + ".pieces: expected an array");
    for (const nlohmann::json &saved : *pieces) {
      Manifest::Piece piece;
      if (!r.integer(saved, "begin", at + ".pieces[]", piece.begin) ||
          !r.integer(saved, "count", at + ".pieces[]", piece.count) ||
          !r.string(saved, "file", at + ".pieces[]", piece.file))
        return r.status;
      const int64_t most = int64_t(1) << 40;
      if (piece.begin < 0 || piece.count < 0 || piece.begin > most ||
          piece.count > most)
        return Status::error(at + ": a piece [" + std::to_string(piece.begin) +
                             ", +" + std::to_string(piece.count) +
                             ") is not a range of the parameter");
      if (piece.file.empty() || piece.file.find('/') != std::string::npos ||
          piece.file == "." || piece.file == "..")
        return Status::error(at + ": a piece's file '" + piece.file +
                             "' is not a file of the checkpoint's directory");
      p.pieces.push_back(std::move(piece));
    }
    std::sort(p.pieces.begin(), p.pieces.end(),
              [](const auto &a, const auto &b) { return a.begin < b.begin; });
    for (size_t k = 1; k < p.pieces.size(); ++k)
      if (p.pieces[k].begin < p.pieces[k - 1].begin + p.pieces[k - 1].count)
        return Status::error(at + ": pieces at " +
                             std::to_string(p.pieces[k - 1].begin) + " and " +
                             std::to_string(p.pieces[k].begin) + " overlap");
  }
  return Status::ok();
}

Status loadCheckpoint(const std::string &dir, const Plan &plan, Executor &exec,
                      TrainingPosition &position) {
  fs::path base(dir);
  if (!fs::exists(base / "manifest.json")) {
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
  fs::path manifestPath = base / "manifest.json";
  FSDP_RETURN_IF_ERROR(
      readFile(manifestPath.string(), text, "the checkpoint manifest"));
  Manifest m;
  FSDP_RETURN_IF_ERROR(parseManifest(text, manifestPath.string(), m));
  if (m.optimizer != plan.train.optimizer)
    return Status::error(base.string() + ": saved with optimizer '" +
                         m.optimizer + "', the plan uses '" +
                         plan.train.optimizer + "'");
  position = m.position;

  std::map<std::string, std::map<std::string, LoadedTensor>> files;
  auto tensor = [&](const std::string &file,
                    const std::string &key) -> const LoadedTensor * {
    auto it = files.find(file);
    if (it == files.end()) {
      std::map<std::string, LoadedTensor> loaded;
      if (!readSafetensors((base / file).string(), loaded))
        return nullptr;
      it = files.emplace(file, std::move(loaded)).first;
    }
    auto t = it->second.find(key);
    return t == it->second.end() ? nullptr : &t->second;
  };
  for (size_t i = 0; i < plan.params.size(); ++i) {
    const ParamInfo &p = plan.params[i];
    std::string where = base.string() + ": parameter '" + p.name + "'";
    auto entry = m.params.find(p.name);
    if (entry == m.params.end())
      return Status::error(where + " is missing");
    const Manifest::Param &saved = entry->second;
    if (saved.shape != p.shape)
      return Status::error(where + " has another shape");
    bool started = saved.momentumStarted;
    for (const StateName &sn : stateNames(plan, i)) {
      if (sn.state == Executor::State::First &&
          plan.train.optimizer != "adamw" && !started)
        continue;
      for (const Piece &want : exec.statePieces(i, sn.state)) {
        // The pieces overlap none of each other (parseManifest), so the
        // elements they give add up to the coverage.
        int64_t covered = 0;
        for (const Manifest::Piece &piece : saved.pieces) {
          int64_t b = piece.begin, c = piece.count;
          int64_t lo = std::max(b, want.begin),
                  hi = std::min(b + c, want.begin + want.count);
          if (lo >= hi)
            continue;
          std::string key = p.name + sn.suffix + "#" + std::to_string(b);
          const LoadedTensor *t = tensor(piece.file, key);
          if (!t || (int64_t)t->data.size() != c)
            return Status::error(where + ": '" + key + "' is missing from " +
                                 piece.file + " or has the wrong size");
          if (!satisfies(p.valueRule(), t->data.data() + (lo - b), hi - lo))
            return Status::error(where + ": '" + key + "' in " + piece.file +
                                 " holds " + violationName(p.valueRule()));
          std::copy(t->data.begin() + (lo - b), t->data.begin() + (hi - b),
                    want.dst + (lo - want.begin));
          covered += hi - lo;
        }
        if (covered != want.count)
          return Status::error(where + ": the checkpoint covers " +
                               std::to_string(covered) + " of the " +
                               std::to_string(want.count) +
                               " elements this rank needs");
      }
    }
    if (started && plan.params[i].trainable)
      exec.setMomentumStarted(i);
  }
  return Status::ok();
}

} // namespace fsdp
