//===- Calibration.h - This machine's calibration, cached ------*- C++ -*-===//
//
// fsdp-opt's `--device=cpu` is this machine: the device description
// fsdp-run --calibrate measures (runtime/cpu/Calibrate.h), kept in the
// user's cache directory, one file for each collective engine a plan can
// run under (none: one process; mpi: mpirun; gloo: torchrun, or Slurm
// without MPI), since MPI's and Gloo's latencies differ many times over.
//
// A cache file holds the machine it was measured on (the fingerprint: CPU
// model, its vector extensions, the cores this process may use, the GEMM
// library fsdp-run picks, the threads of a one-process run, the format)
// beside the device. A file whose fingerprint differs (another CPU, another
// thread count, an older format), that does not parse, or whose device
// lacks a positive rate is measured again; nothing in it is trusted first.
//
// The cache directory: $FSDP_CACHE_DIR, else $XDG_CACHE_HOME/fsdp, else
// $HOME/.cache/fsdp.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_RUN_CALIBRATION_H
#define FSDP_RUNTIME_RUN_CALIBRATION_H

#include "runtime/support/Status.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace fsdp {

/// What a calibration for `engine` ("none", "mpi" or "gloo") is valid
/// for, on this machine, as this process would run it.
nlohmann::json machineFingerprint(const std::string &engine);

/// The cache file of `engine`'s calibration (its directory not created).
Status calibrationCachePath(const std::string &engine, std::string &path);

/// Writes `device`, measured under `engine`, to the cache with this
/// machine's fingerprint (atomically: a reader sees the old file or the
/// new one).
Status storeCalibration(const std::string &engine,
                        const nlohmann::json &device);

/// fsdp-run --calibration=ENGINE: `path` is a valid cached calibration of
/// this machine for `engine`, measured first (and said so on stderr) when
/// there is none or the one there is stale or corrupt: in this process for
/// "none", else in two ranks this process launches (mpirun for "mpi", two
/// processes with a store of their own for "gloo"), which fail after
/// `timeoutSeconds`.
Status cachedCalibration(const std::string &engine, double timeoutSeconds,
                         std::string &path);

/// fsdp-run --calibration=ENGINE --fit-plan PLAN...: runs each plan
/// (fsdp-opt's reference models, priced on the cached calibration) under
/// `engine` with --trace, fits each op's fixed cost and factor to the
/// pooled runs (fitDeviceRuns) and stores the fitted calibration at `path`.
Status fitCalibration(const std::string &engine,
                      const std::vector<std::string> &plans,
                      double timeoutSeconds, std::string &path);

/// After a run under `engine` (whose steps spread by no more than a
/// quarter of their median: runPlan checks) of a plan whose prediction
/// (`predicted`, the plan's fsdp.predicted) was priced on this machine's
/// cached calibration for it: the step it measured (`measuredSeconds`, the
/// median after the first) against the step the calibration's fitted costs
/// predicted joins the calibration's `observed_steps` (the last 9), and from
/// three on their median is its `step_correction`
/// (DeviceModel::stepCorrection). A plan priced on anything else (a
/// built-in device, another calibration, an older one of this machine)
/// records nothing.
Status recordObservedStep(const std::string &engine,
                          const nlohmann::json &predicted,
                          double measuredSeconds);

} // namespace fsdp

#endif // FSDP_RUNTIME_RUN_CALIBRATION_H
