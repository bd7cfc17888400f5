//===- ThisMachine.cpp - --device=cpu: this machine's calibration ---------===//
#include "costmodel/ThisMachine.h"
#include "common/CostRows.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <cstdlib>
#include <optional>
#include <vector>

using namespace mlir;
using namespace mlir::fsdp;

llvm::StringRef mlir::fsdp::collectiveEngine(int64_t worldSize,
                                             llvm::StringRef launcher) {
  if (worldSize <= 1)
    return "none";
  return launcher == "torchrun" ? "gloo" : "mpi";
}

namespace {

/// A program beside this one (or `envName`'s value).
std::string sibling(const char *argv0, const char *envName,
                    llvm::StringRef name) {
  if (const char *env = std::getenv(envName); env && *env)
    return env;
  static int anchor;
  llvm::SmallString<256> path(llvm::sys::fs::getMainExecutable(argv0, &anchor));
  llvm::sys::path::remove_filename(path);
  llvm::sys::path::append(path, name);
  return std::string(path);
}

/// Runs `args` (args[0] the program) with its standard output in `out`;
/// the exit status, or -1 with `error` set.
int run(llvm::ArrayRef<std::string> args, std::string &out,
        std::string &error) {
  llvm::SmallString<128> file;
  if (std::error_code ec =
          llvm::sys::fs::createTemporaryFile("fsdp-calibration", "txt", file)) {
    error = "no temporary file: " + ec.message();
    return -1;
  }
  llvm::FileRemover remove(file);
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, file.str(),
                                                std::nullopt};
  llvm::SmallVector<llvm::StringRef> argv(args.begin(), args.end());
  int rc = llvm::sys::ExecuteAndWait(args[0], argv, std::nullopt, redirects,
                                     /*SecondsToWait=*/0, /*MemoryLimit=*/0,
                                     &error);
  if (auto text = llvm::MemoryBuffer::getFile(file))
    out = (*text)->getBuffer().trim().str();
  return rc;
}

/// The reference models the calibration is fitted to: the lines of
/// references.txt, `FILE FLAG...` (FILE relative to it), installed beside
/// the tools in ../share/fsdp/calibration (or at $FSDP_REFERENCES).
std::vector<std::pair<std::string, std::vector<std::string>>>
references(const char *argv0, std::string &dir) {
  if (const char *env = std::getenv("FSDP_REFERENCES"); env && *env) {
    dir = env;
  } else {
    static int anchor;
    llvm::SmallString<256> path(
        llvm::sys::fs::getMainExecutable(argv0, &anchor));
    llvm::sys::path::remove_filename(path);
    llvm::sys::path::append(path, "..", "share", "fsdp", "calibration");
    llvm::sys::path::remove_dots(path, /*remove_dot_dot=*/true);
    dir = std::string(path);
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  llvm::SmallString<256> list(dir);
  llvm::sys::path::append(list, "references.txt");
  auto text = llvm::MemoryBuffer::getFile(list);
  if (!text)
    return out;
  llvm::SmallVector<llvm::StringRef> lines;
  (*text)->getBuffer().split(lines, '\n', -1, false);
  for (llvm::StringRef line : lines) {
    line = line.trim();
    if (line.empty() || line.starts_with("#"))
      continue;
    llvm::SmallVector<llvm::StringRef> words;
    line.split(words, ' ', -1, false);
    llvm::SmallString<256> model(dir);
    llvm::sys::path::append(model, words[0]);
    std::vector<std::string> flags;
    for (llvm::StringRef w : llvm::ArrayRef(words).drop_front())
      flags.push_back(w.str());
    out.push_back({std::string(model), flags});
  }
  return out;
}

/// Says on stderr, at every compile priced on it, that the calibration at
/// `path` was measured while the machine's speed moved past what fsdp-run
/// keeps as good (its "unreliable"), until the steps fsdp-run has measured
/// since correct it (kObservedStepsToCorrect "observed_steps":
/// runtime/run/Calibration.h).
void warnIfUnreliable(llvm::StringRef path) {
  auto text = llvm::MemoryBuffer::getFile(path);
  if (!text)
    return;
  auto json = llvm::json::parse((*text)->getBuffer());
  if (!json) {
    llvm::consumeError(json.takeError());
    return;
  }
  const llvm::json::Object *o = json->getAsObject();
  if (!o)
    return;
  auto why = o->getString("unreliable");
  const llvm::json::Array *observed = o->getArray("observed_steps");
  size_t seen = observed ? observed->size() : 0;
  if (!why || seen >= ::fsdp::kObservedStepsToCorrect)
    return;
  llvm::errs() << "fsdp-opt: warning: this machine's calibration (" << path
               << ") is unreliable: " << *why
               << "; predicted times may be off by as much until fsdp-run "
                  "has measured "
               << (::fsdp::kObservedStepsToCorrect - seen)
               << " more run(s) of 4 steps or more priced on it (they "
                  "correct it), or `fsdp-run --calibrate` measures it again "
                  "on a quiet machine\n";
}

/// Whether the calibration at `path` has been fitted to reference runs.
bool fitted(llvm::StringRef path) {
  auto text = llvm::MemoryBuffer::getFile(path);
  if (!text)
    return false;
  auto json = llvm::json::parse((*text)->getBuffer());
  if (!json) {
    llvm::consumeError(json.takeError());
    return false;
  }
  const llvm::json::Object *o = json->getAsObject();
  return o && o->get("fitted_runs");
}

} // namespace

llvm::Expected<std::string>
mlir::fsdp::thisMachineCalibration(const char *argv0, llvm::StringRef engine) {
  std::string runner = sibling(argv0, "FSDP_RUN", "fsdp-run");
  auto fail = [&](const llvm::Twine &why) {
    return llvm::createStringError(
        "--device=cpu (this machine's calibration, from " + runner +
        " --calibration=" + engine + "): " + why +
        "; --device=cpu-generic plans for the built-in CPU instead");
  };
  if (!llvm::sys::fs::can_execute(runner))
    return fail("fsdp-run is not there (set FSDP_RUN to it)");
  std::string flag = ("--calibration=" + engine).str(), path, error;
  int rc = run({runner, flag}, path, error);
  if (rc != 0)
    return fail(error.empty() ? "it failed (exit " + std::to_string(rc) + ")"
                              : error);
  if (path.empty() || !llvm::sys::fs::is_regular_file(path))
    return fail("it named no calibration file ('" + path + "')");
  if (fitted(path)) {
    warnIfUnreliable(path);
    return path;
  }

  // First use: each reference model is compiled for the calibration as
  // measured and run, and each op's cost fitted to what it took.
  std::string dir;
  auto refs = references(argv0, dir);
  if (refs.empty()) {
    llvm::errs() << "fsdp-opt: warning: no reference models at " << dir
                 << " (references.txt): --device=cpu is priced on the raw "
                    "calibration, without each op's measured cost\n";
    return path;
  }
  llvm::errs() << "fsdp-opt: fitting this machine's calibration to "
               << refs.size()
               << " reference models, each run twice (" << engine
               << "; once, seconds)\n";
  llvm::SmallString<128> tmp;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueDirectory("fsdp-references", tmp))
    return fail("no temporary directory: " + ec.message());
  std::string self = sibling(argv0, "FSDP_OPT", "fsdp-opt");
  std::string world = engine == "none" ? "1" : "2";
  std::vector<std::string> fit = {runner, flag};
  llvm::Error failure = llvm::Error::success();
  for (size_t i = 0; i < refs.size() && !failure; ++i) {
    std::string plan =
        (tmp + "/reference" + std::to_string(i) + ".plan").str();
    std::vector<std::string> args = {self, refs[i].first};
    args.insert(args.end(), refs[i].second.begin(), refs[i].second.end());
    args.insert(args.end(),
                {"--world-size=" + world, "--device=" + path, "-o", plan});
    std::string ignored;
    if (run(args, ignored, error) != 0)
      failure = fail("compiling the reference " + refs[i].first + " failed" +
                     (error.empty() ? "" : ": " + error));
    fit.insert(fit.end(), {"--fit-plan", plan});
  }
  if (!failure && run(fit, path, error) != 0)
    failure = fail("fitting to the reference runs failed" +
                   (error.empty() ? std::string() : ": " + error));
  llvm::sys::fs::remove_directories(tmp, /*IgnoreErrors=*/true);
  if (failure)
    return std::move(failure);
  warnIfUnreliable(path);
  return path;
}
