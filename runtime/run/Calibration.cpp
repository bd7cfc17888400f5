//===- Calibration.cpp - This machine's calibration, cached ---------------===//
#include "runtime/run/Calibration.h"
#include "common/CostRows.h"
#include "runtime/comm/Comm.h"
#include "runtime/cpu/Calibrate.h"
#include "runtime/cpu/Gemm.h"
#include "runtime/inspect/Inspect.h"
#include "runtime/plan/Plan.h"
#include "runtime/support/File.h"
#include "runtime/support/Threads.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

extern char **environ;

namespace fsdp {

namespace {

/// Bumped whenever the device description's fields or the measurements
/// behind them change: an older file is measured again. 4: attention
/// priced per query row; 5: ranks of one host without MPI meet in shared
/// memory (runtime/comm/HostChannel.h), not over Gloo's TCP; 6: binary ops
/// on the strided loop fitted apart, narrow inputs keyed narrow; 7: a
/// GEMM's cost per flop is the measured block products' rate, its rest a
/// fixed cost and a cost per byte (op_cost's fourth term); 8: the
/// references run twice (the second pass reversed), and AdamW's loop
/// splits over the threads from 2049 elements (common/CostRows.h), which
/// a 7's `adamw.serial` had priced on one thread; 9: the fit takes each
/// reference's faster run of the two; 10: runtime_bytes measured once the
/// calibration's own buffers are freed (9's counted 140 MiB of them, and
/// every plan's process_peak_bytes was 5-10% above the RSS measured).
constexpr int kFormat = 10;

/// How far a machine's speed may move while it is measured (the median
/// reference's two runs apart) for its calibration to be kept as good.
constexpr double kDriftTolerance = 0.25;

/// How many measured steps a calibration keeps (recordObservedStep); it
/// needs common/CostRows.h's kObservedStepsToCorrect before they correct it.
constexpr size_t kObservedSteps = 9;

/// The first "model name" of /proc/cpuinfo and the vector extensions among
/// its flags that decide which kernels and GEMMs run.
void cpuIdentity(std::string &model, std::string &isa) {
  model = "unknown";
  isa.clear();
  std::ifstream in("/proc/cpuinfo");
  std::string line, flags;
  bool haveModel = false;
  while (std::getline(in, line) && !(haveModel && !flags.empty())) {
    auto colon = line.find(':');
    if (colon == std::string::npos)
      continue;
    std::string key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t'))
      key.pop_back();
    std::string value = line.substr(std::min(colon + 2, line.size()));
    if (key == "model name" && !haveModel) {
      model = value;
      haveModel = true;
    } else if ((key == "flags" || key == "Features") && flags.empty()) {
      flags = " " + value + " ";
    }
  }
  for (const char *f :
       {"avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16",
        "avx512_fp16", "amx_tile", "amx_bf16", "asimd", "sve"})
    if (flags.find(std::string(" ") + f + " ") != std::string::npos)
      isa += (isa.empty() ? "" : " ") + std::string(f);
}

std::string cacheDir() {
  auto set = [](const char *name) {
    const char *v = std::getenv(name);
    return v && *v ? std::string(v) : std::string();
  };
  if (std::string d = set("FSDP_CACHE_DIR"); !d.empty())
    return d;
  if (std::string d = set("XDG_CACHE_HOME"); !d.empty())
    return d + "/fsdp";
  if (std::string d = set("HOME"); !d.empty())
    return d + "/.cache/fsdp";
  return "";
}

/// Creates `dir` and its parents (mode 0755); fine if it exists.
Status makeDirs(const std::string &dir) {
  for (size_t at = 1; at <= dir.size(); ++at) {
    if (at < dir.size() && dir[at] != '/')
      continue;
    std::string prefix = dir.substr(0, at);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
      return Status::error("cannot create the calibration cache directory " +
                           prefix + ": " + std::strerror(errno));
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::error("the calibration cache directory " + dir +
                         " is not a directory");
  return Status::ok();
}

/// Whether `v` is a finite number at least `min` (above it where
/// `strict`).
bool goodNumber(const nlohmann::json &v, double min, bool strict) {
  if (!v.is_number())
    return false;
  double x = v.get<double>();
  return std::isfinite(x) && (strict ? x > min : x >= min);
}

/// Why `map` ({op: value}, or with `byThreads` {count: {op: value}}) holds
/// a value `good` refuses (empty: none).
template <typename Good>
std::string badOpMap(const std::string &key, const nlohmann::json &map,
                     bool byThreads, Good good) {
  if (!map.is_object())
    return "its " + key + " is not an object";
  for (const auto &[name, value] : map.items()) {
    if (byThreads) {
      if (std::string why = badOpMap(key + "." + name, value, false, good);
          !why.empty())
        return why;
    } else if (!good(value)) {
      return "its " + key + "." + name + " is malformed";
    }
  }
  return "";
}

/// Why `device` cannot be a calibration (empty: it can): every rate the
/// cost model divides by is a positive finite number, every other number
/// finite and not negative, the flags are booleans, and the fitted maps
/// hold what DeviceModel.cpp reads (op_scale positive factors,
/// op_overhead seconds, op_cost [per_flop, on_bytes] pairs or, priced per
/// row, [per_flop, on_bytes, per_row], or per byte too, [per_flop,
/// on_bytes, per_row, per_byte]).
std::string badDevice(const nlohmann::json &device) {
  if (!device.is_object())
    return "it is not a JSON object";
  for (const char *key :
       {"flops_f32", "mem_bandwidth", "intra_bandwidth", "inter_bandwidth"}) {
    auto it = device.find(key);
    if (it == device.end() || !goodNumber(*it, 0, true))
      return std::string("it has no positive ") + key;
  }
  auto positive = [](const nlohmann::json &v) {
    return goodNumber(v, 0, true);
  };
  auto seconds = [](const nlohmann::json &v) {
    return goodNumber(v, 0, false);
  };
  auto terms = [](const nlohmann::json &v) {
    if (!v.is_array() || v.size() < 2 || v.size() > 4)
      return false;
    for (const nlohmann::json &x : v)
      if (!goodNumber(x, 0, false))
        return false;
    return true;
  };
  for (const auto &[key, value] : device.items()) {
    std::string why;
    if (key == "name") {
      if (!value.is_string())
        why = "its name is not a string";
    } else if (key == "unreliable") {
      if (!value.is_string())
        why = "its unreliable is not a string";
    } else if (key == "observed_steps") {
      bool good = value.is_array() && value.size() <= kObservedSteps;
      for (const nlohmann::json &x : value)
        good = good && goodNumber(x, 0, true);
      if (!good)
        why = "its observed_steps is not a list of positive numbers";
    } else if (key == "async_progress" || key == "native_bf16_products") {
      if (!value.is_boolean())
        why = "its " + key + " is not true or false";
    } else if (key == "op_scale" || key == "op_scale_threads") {
      why = badOpMap(key, value, key != "op_scale", positive);
    } else if (key == "op_overhead" || key == "op_overhead_threads") {
      why = badOpMap(key, value, key != "op_overhead", seconds);
    } else if (key == "op_cost" || key == "op_cost_threads") {
      why = badOpMap(key, value, key != "op_cost", terms);
    } else if (!goodNumber(value, 0, false)) {
      why = "its " + key + " is not a number of at least 0";
    }
    if (!why.empty())
      return why;
  }
  return "";
}

/// Why the cache file at `path` does not hold a calibration for
/// `fingerprint` (empty: it does; `device` is then its device).
std::string staleOrCorrupt(const std::string &path,
                           const nlohmann::json &fingerprint,
                           nlohmann::json &device) {
  std::string text;
  if (Status s = readFile(path, text, "the calibration cache"); !s)
    return "none could be read (" + s.message() + ")";
  nlohmann::json cached = nlohmann::json::parse(text, nullptr, false);
  if (cached.is_discarded() || !cached.is_object())
    return "it is not JSON (corrupt)";
  auto was = cached.find("machine");
  if (was == cached.end() || !was->is_object())
    return "it names no machine (corrupt)";
  if (was->value("format", 0) != kFormat)
    return "it is of an older format";
  for (const auto &[key, value] : fingerprint.items()) {
    auto it = was->find(key);
    if (it == was->end() || *it != value)
      return "it was measured with " + key + " " +
             (it == was->end() ? std::string("unknown") : it->dump()) +
             ", this machine has " + value.dump();
  }
  device = cached;
  device.erase("machine");
  if (std::string why = badDevice(device); !why.empty())
    return why + " (corrupt)";
  return "";
}

/// A TCP port free on the loopback now (the kernel's pick).
Status freePort(int &port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return Status::error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  bool ok = bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) == 0 &&
            getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) == 0;
  close(fd);
  if (!ok)
    return Status::error("no free port on 127.0.0.1 for the calibration's "
                         "store");
  port = ntohs(a.sin_port);
  return Status::ok();
}

/// Starts `argv` with `extraEnv` added to this process's environment and
/// its standard output on /dev/null (the measurement's JSON; the cache is
/// what counts).
Status spawn(const std::vector<std::string> &argv,
             const std::vector<std::string> &extraEnv, pid_t &pid) {
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e) {
    std::string entry = *e;
    bool replaced = false;
    for (const std::string &x : extraEnv)
      replaced |= entry.compare(0, x.find('=') + 1, x, 0, x.find('=') + 1) == 0;
    if (!replaced)
      env.push_back(entry);
  }
  env.insert(env.end(), extraEnv.begin(), extraEnv.end());
  std::vector<char *> args, envp;
  for (const std::string &a : argv)
    args.push_back(const_cast<char *>(a.c_str()));
  args.push_back(nullptr);
  for (const std::string &e : env)
    envp.push_back(const_cast<char *>(e.c_str()));
  envp.push_back(nullptr);
  std::fflush(nullptr);
  pid = fork();
  if (pid < 0)
    return Status::error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    std::FILE *null = std::fopen("/dev/null", "w");
    if (null)
      dup2(fileno(null), STDOUT_FILENO);
    setpgid(0, 0); // mpirun's own children go with it on a timeout
    execvpe(args[0], args.data(), envp.data());
    std::fprintf(stderr, "fsdp-run: cannot start %s: %s\n", args[0],
                 std::strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid);
  return Status::ok();
}

/// Waits for every process of `pids` until `timeoutSeconds`; on a failure
/// or the timeout, ends the rest (and their process groups).
Status waitAll(std::vector<pid_t> pids, double timeoutSeconds,
               const std::string &what) {
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration<double>(timeoutSeconds);
  std::string failed;
  while (!pids.empty()) {
    bool progressed = false;
    for (size_t i = 0; i < pids.size();) {
      int status = 0;
      pid_t r = waitpid(pids[i], &status, WNOHANG);
      if (r == 0) {
        ++i;
        continue;
      }
      progressed = true;
      if (r > 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0) &&
          failed.empty())
        failed = WIFSIGNALED(status)
                     ? "died of signal " + std::to_string(WTERMSIG(status))
                     : "exited with " + std::to_string(WEXITSTATUS(status));
      pids.erase(pids.begin() + i);
    }
    bool late = std::chrono::steady_clock::now() > deadline;
    if ((!failed.empty() || late) && !pids.empty()) {
      for (pid_t p : pids)
        kill(-p, SIGKILL);
      for (pid_t p : pids)
        waitpid(p, nullptr, 0);
      if (failed.empty())
        failed =
            "took longer than " + std::to_string((int)timeoutSeconds) + " s";
      break;
    }
    if (!progressed)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!failed.empty())
    return Status::error(what + " " + failed);
  return Status::ok();
}

std::string selfPath() {
  std::vector<char> buf(4096);
  ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  return n > 0 ? std::string(buf.data(), (size_t)n) : "fsdp-run";
}

/// Runs `args` (after this program) under `engine`: one process for
/// "none", two ranks otherwise (mpirun for "mpi", two processes with a
/// store of their own for "gloo"), their output on /dev/null; an error
/// unless all end well within `timeoutSeconds`.
Status launch(const std::string &engine, const std::vector<std::string> &args,
              double timeoutSeconds, const std::string &what) {
  std::string self = selfPath();
  std::vector<std::string> command = {self};
  command.insert(command.end(), args.begin(), args.end());
  std::vector<pid_t> pids;
  if (engine == "none" || engine == "mpi") {
    std::vector<std::string> argv;
    if (engine == "mpi") {
      argv = {"mpirun"};
      if (geteuid() == 0)
        argv.push_back("--allow-run-as-root");
      for (const char *a : {"--oversubscribe", "--bind-to", "none", "-np", "2"})
        argv.push_back(a);
    }
    argv.insert(argv.end(), command.begin(), command.end());
    pid_t pid;
    FSDP_RETURN_IF_ERROR(spawn(argv, {}, pid));
    pids.push_back(pid);
  } else {
    int port = 0;
    FSDP_RETURN_IF_ERROR(freePort(port));
    for (int rank = 0; rank < 2; ++rank) {
      pid_t pid;
      Status s =
          spawn(command,
                {"RANK=" + std::to_string(rank), "WORLD_SIZE=2",
                 "LOCAL_RANK=" + std::to_string(rank), "LOCAL_WORLD_SIZE=2",
                 "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port),
                 "TORCHELASTIC_USE_AGENT_STORE=False"},
                pid);
      if (!s) {
        for (pid_t p : pids)
          kill(-p, SIGKILL), waitpid(p, nullptr, 0);
        return s;
      }
      pids.push_back(pid);
    }
  }
  return waitAll(pids, timeoutSeconds, what);
}

/// Measures `engine`'s calibration and stores it: here for "none", in two
/// ranks of this program otherwise (each runs --calibrate, rank 0 stores).
Status measure(const std::string &engine, double timeoutSeconds) {
  if (engine == "none") {
    std::unique_ptr<Comm> comm = localComm();
    nlohmann::json device;
    FSDP_RETURN_IF_ERROR(cpu::calibrate(*comm, device));
    return storeCalibration(engine, device);
  }
  return launch(
      engine,
      {"--calibrate", "--gemm", cpu::gemmLibraryName(cpu::gemmLibrary())},
      timeoutSeconds,
      "measuring " + engine + "'s collectives between two ranks");
}

} // namespace

nlohmann::json machineFingerprint(const std::string &engine) {
  std::string model, isa;
  cpuIdentity(model, isa);
  nlohmann::json f = {{"format", kFormat},
                      {"engine", engine},
                      {"cpu", model},
                      {"isa", isa},
                      {"cores", numProcs()},
                      {"gemm", cpu::gemmLibraryName(cpu::gemmLibrary())}};
  // One process runs on the threads it is given (OMP_NUM_THREADS); ranks
  // of a launch split the cores between them whatever it says (Run.cpp).
  if (engine == "none")
    f["threads"] = maxThreads();
  return f;
}

Status calibrationCachePath(const std::string &engine, std::string &path) {
  std::string dir = cacheDir();
  if (dir.empty())
    return Status::error("no directory for the calibration cache: set "
                         "FSDP_CACHE_DIR (or HOME), or plan with "
                         "--device=cpu-generic or --device=FILE.json");
  path = dir + "/calibration-" + engine + ".json";
  return Status::ok();
}

Status storeCalibration(const std::string &engine,
                        const nlohmann::json &device) {
  std::string path;
  FSDP_RETURN_IF_ERROR(calibrationCachePath(engine, path));
  FSDP_RETURN_IF_ERROR(makeDirs(path.substr(0, path.rfind('/'))));
  nlohmann::json machine = machineFingerprint(engine);
  nlohmann::json named = device;
  std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  // What a plan's fsdp.predicted names (Simulate.cpp): the machine, the
  // library, the engine and when.
  named["name"] =
      "cpu: " + machine["cpu"].get<std::string>() + ", " +
      std::to_string(numProcs()) + " cores, " +
      machine["gemm"].get<std::string>() + " GEMMs, " +
      (engine == "none" ? std::string("one process")
                        : engine + " collectives") +
      " (calibrated " + date +
      (device.contains("fitted_runs")
           ? ", fitted to " + device["fitted_runs"].dump() + " reference runs" +
                 (device.contains("reference_runs")
                      ? " (the faster of " + device["reference_runs"].dump() +
                            ")"
                      : std::string())
           : std::string()) +
      (device.contains("speed_drift") && device["speed_drift"].is_number()
           ? "; its speed moved " +
                 std::to_string((int)std::lround(
                     100 * device["speed_drift"].get<double>())) +
                 "% meanwhile)"
           : std::string(")"));
  // The device's fields as --device=FILE.json reads them, and beside them
  // the machine they were measured on (which the cost model ignores).
  named["machine"] = machine;
  if (Status s = writeFileAtomically(path, named.dump(1) + "\n"); !s)
    return s.withContext("the calibration cache " + path);
  return Status::ok();
}

Status cachedCalibration(const std::string &engine, double timeoutSeconds,
                         std::string &path) {
  if (engine != "none" && engine != "mpi" && engine != "gloo")
    return Status::error("--calibration: '" + engine +
                         "' is not none, mpi or gloo");
  FSDP_RETURN_IF_ERROR(calibrationCachePath(engine, path));
  nlohmann::json fingerprint = machineFingerprint(engine), device;
  std::string why = staleOrCorrupt(path, fingerprint, device);
  if (why.empty())
    return Status::ok();
  std::fprintf(stderr,
               "fsdp-run: measuring this machine for --device=cpu (%s; a few "
               "seconds): %s calibration at %s: %s\n",
               engine == "none" ? "one process" : engine.c_str(),
               engine.c_str(), path.c_str(), why.c_str());
  FSDP_RETURN_IF_ERROR(measure(engine, timeoutSeconds));
  why = staleOrCorrupt(path, fingerprint, device);
  if (!why.empty())
    return Status::error("the calibration just measured was not stored at " +
                         path + ": " + why);
  return Status::ok();
}

Status fitCalibration(const std::string &engine,
                      const std::vector<std::string> &plans,
                      double timeoutSeconds, std::string &path) {
  if (plans.empty())
    return Status::error("--fit-plan: no plan");
  FSDP_RETURN_IF_ERROR(calibrationCachePath(engine, path));
  nlohmann::json fingerprint = machineFingerprint(engine), device;
  if (std::string why = staleOrCorrupt(path, fingerprint, device); !why.empty())
    return Status::error("--fit-plan: no calibration to fit at " + path + ": " +
                         why + " (fsdp-run --calibration=" + engine +
                         " measures one)");
  char dir[] = "/tmp/fsdp-fit-XXXXXX";
  if (!mkdtemp(dir))
    return Status::error(std::string("no temporary directory: ") +
                         std::strerror(errno));
  std::vector<Plan> loaded(plans.size());
  std::vector<std::string> traces;
  Status status = Status::ok();
  auto reference = [&](size_t i, const std::string &trace) {
    // Eight steps: each instruction's median over the steady ones.
    return launch(engine,
                  {plans[i], "--steps", "8", "--trace", trace, "--quiet",
                   "--gemm", cpu::gemmLibraryName(cpu::gemmLibrary())},
                  timeoutSeconds, "the reference run of " + plans[i]);
  };
  auto stepOf = [](const nlohmann::json &doc) {
    return doc.contains("otherData") && doc["otherData"].is_object()
               ? doc["otherData"].value("step_seconds", 0.0)
               : 0.0;
  };
  // Two passes over the references, the second in reverse order, and the
  // fit on each reference's faster run (below). A shared machine's speed
  // drifts: on the project's 2-core VM its vector throughput moved 20-45%
  // within minutes (a neighbour on the same core), and a calibration fitted
  // to one pass priced every plan for the state that pass met (over fresh
  // calibrations a minute apart, 2026-11-28: bench/cpu_step.py's step at
  // 141-207 ms). The reversed second pass puts a reference's two runs
  // apart in time, the first and last references' furthest. It costs one
  // more run of each reference (about 5 s on that VM).
  const size_t n = plans.size();
  std::vector<size_t> order;
  for (size_t i = 0; i < n; ++i)
    order.push_back(i);
  for (size_t i = n; i-- > 0;)
    order.push_back(i);
  std::vector<nlohmann::json> docs(order.size());
  // Reference i ran at positions i and 2n-1-i of `order`.
  auto fasterRun = [&](size_t i) {
    size_t a = i, b = 2 * n - 1 - i;
    return stepOf(docs[b]) < stepOf(docs[a]) ? b : a;
  };
  // How far the machine's own speed moved while it was measured: the
  // median, over the references, of how far a reference's step moved
  // between its two runs. The figure goes into the
  // calibration's name, which each plan priced on it carries.
  double drift = -1;
  size_t compared = 0;
  // A calibration measured while the machine's speed moved past
  // kDriftTolerance is measured again once; one that moved as far again is
  // kept but marked unreliable, which fsdp-opt then says at every compile
  // priced on it (costmodel/ThisMachine.cpp), and fsdp-run's measured steps
  // correct (recordObservedStep).
  for (int attempt = 0; attempt < 2 && status; ++attempt) {
    if (attempt > 0)
      std::fprintf(stderr,
                   "fsdp-run: this machine's speed moved by %.0f%% while it "
                   "was measured; measuring once more\n",
                   100 * drift);
    for (size_t r = 0; r < order.size() && status; ++r) {
      size_t i = order[r];
      if (attempt == 0)
        traces.push_back(std::string(dir) + "/trace" + std::to_string(r) +
                         ".json");
      status = reference(i, traces[r]);
      if (status && r < n && attempt == 0)
        status = loadPlan(plans[i], loaded[i]);
      if (status)
        status = loadMeasuredTrace(loaded[i], traces[r], docs[r]);
    }
    if (!status)
      break;
    std::vector<double> moved;
    for (size_t i = 0; i < n; ++i) {
      double a = stepOf(docs[i]), b = stepOf(docs[2 * n - 1 - i]);
      double fast = std::min(a, b), slow = std::max(a, b);
      if (fast > 0 && slow > 0)
        moved.push_back((slow - fast) / fast);
    }
    if (!moved.empty()) {
      std::sort(moved.begin(), moved.end());
      drift = moved[moved.size() / 2];
      compared = moved.size();
    }
    if (drift <= kDriftTolerance)
      break;
  }
  for (const std::string &t : traces)
    std::remove(t.c_str());
  rmdir(dir);
  FSDP_RETURN_IF_ERROR(status);
  // The fit takes each reference's faster run. The VM's slow spells are
  // transient (seconds: a neighbour on the core), a reference run (under a
  // second) either meets one or not, and the step a user measures (the
  // median of a run's steps, the median of a few runs) is mostly the
  // machine between them: the faster of two runs misses a spell unless
  // both meet one. Fitting both priced a plan for whichever share of them
  // met a spell. Over fresh calibrations on that VM (2026-11-29, nine of
  // each, 44 measured runs of each plan), bench/cpu_step.py's step was
  // priced -10..+24% from its measured median fitted on both runs,
  // -12..+4% (mean |error| 2.8%) on the faster; the demo's -15..+6% and
  // -11..+6%. A third pass, fitted on each reference's median run, was no
  // closer on four calibrations (cpu_step -3..+11%, demo -5..+12%) and
  // costs half as long again.
  std::vector<FitRun> runs;
  for (size_t i = 0; i < n; ++i)
    runs.push_back({&loaded[i], &docs[fasterRun(i)], plans[i]});
  std::ostringstream table;
  FSDP_RETURN_IF_ERROR(fitDeviceRuns(runs, device, table, /*linear=*/true));
  device["fitted_runs"] = (int64_t)runs.size();
  device["reference_runs"] = (int64_t)order.size();
  if (drift >= 0) {
    device["speed_drift"] = drift;
    if (drift > kDriftTolerance) {
      char why[160];
      std::snprintf(why, sizeof(why),
                    "its speed moved %.0f%% while it was measured, twice",
                    100 * drift);
      device["unreliable"] = why;
    }
    if (drift > 0.1)
      std::fprintf(stderr,
                   "fsdp-run: warning: this machine's speed moved by %.0f%% "
                   "while it was measured (the median over %zu reference "
                   "models of how far a model's step moved between its two "
                   "runs; the fit takes the faster): plans priced on this "
                   "calibration may be off by "
                   "as much; `fsdp-run --calibrate` (under the same "
                   "launcher) measures it again\n",
                   100 * drift, compared);
  }
  FSDP_RETURN_IF_ERROR(storeCalibration(engine, device));
  // The fit, op by op, beside the cache for whoever wonders why a plan is
  // priced as it is.
  std::string report = path.substr(0, path.size() - 5) + ".fit.txt";
  std::string runsText;
  for (const std::string &p : plans)
    runsText += "# " + p + "\n";
  (void)writeFileAtomically(report, "# calibration-" + engine +
                                        " fitted to the reference runs of\n" +
                                        runsText + table.str());
  return Status::ok();
}

Status recordObservedStep(const std::string &engine,
                          const nlohmann::json &predicted,
                          double measuredSeconds) {
  std::string path;
  FSDP_RETURN_IF_ERROR(calibrationCachePath(engine, path));
  // The plan is a file a user may have edited: a field of the wrong type
  // records nothing rather than throwing.
  auto text = [&](const char *key) {
    auto it = predicted.find(key);
    return it != predicted.end() && it->is_string() ? it->get<std::string>()
                                                    : std::string();
  };
  auto number = [&](const char *key, double otherwise) {
    auto it = predicted.find(key);
    return it != predicted.end() && it->is_number() ? it->get<double>()
                                                    : otherwise;
  };
  if (!predicted.is_object() || text("device_file") != path)
    return Status::ok();
  std::string cacheText;
  if (!readFile(path, cacheText, "the calibration cache"))
    return Status::ok();
  nlohmann::json cached = nlohmann::json::parse(cacheText, nullptr, false),
                 device;
  if (staleOrCorrupt(path, machineFingerprint(engine), device) != "" ||
      !cached.is_object() || !cached.contains("fitted_runs") ||
      cached.value("name", "") != text("device"))
    return Status::ok(); // measured again since the plan was priced, or
                         // a reference run of the fit itself
  // The prediction before the correction the plan was priced with: its
  // compute divided by it, its exposed communication as it is.
  double correction = number("step_correction", 1.0);
  double step = number("step_seconds", 0.0),
         compute = number("compute_seconds", 0.0);
  if (!(correction > 0) || !(step > 0) || !(measuredSeconds > 0) ||
      !(compute >= 0) || compute > step * (1 + 1e-9))
    return Status::ok();
  double fitted = compute / correction + (step - compute);
  double ratio = measuredSeconds / fitted;
  if (!(ratio > 0.05 && ratio < 20))
    return Status::ok(); // not this machine's step (a fault, a stall)
  nlohmann::json observed =
      cached.value("observed_steps", nlohmann::json::array());
  observed.push_back(ratio);
  while (observed.size() > kObservedSteps)
    observed.erase(observed.begin());
  cached["observed_steps"] = observed;
  if (observed.size() >= kObservedStepsToCorrect) {
    std::vector<double> sorted(observed.begin(), observed.end());
    std::sort(sorted.begin(), sorted.end());
    cached["step_correction"] = sorted[sorted.size() / 2];
  }
  return writeFileAtomically(path, cached.dump(1) + "\n");
}

} // namespace fsdp
