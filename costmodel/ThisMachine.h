//===- ThisMachine.h - --device=cpu: this machine's calibration -*- C++ -*-===//
//
// fsdp-opt plans `--device=cpu` for the machine it runs on: the
// calibration fsdp-run keeps in the user's cache directory
// (runtime/run/Calibration.h), measured by fsdp-run on first use. The
// compiler does not link the runtime's kernels: it asks the fsdp-run
// beside it (or $FSDP_RUN) for the cached file's path.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_COSTMODEL_THISMACHINE_H
#define FSDP_COSTMODEL_THISMACHINE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace mlir::fsdp {

/// The collective engine a plan of `worldSize` ranks runs under when
/// launched by `launcher` (mpirun, torchrun): none for one rank, mpi, or
/// gloo (torchrun's, and Slurm's without MPI).
llvm::StringRef collectiveEngine(int64_t worldSize, llvm::StringRef launcher);

/// The path of this machine's calibration for `engine`, measured first
/// where there is none (fsdp-run says so on stderr). `argv0` locates the
/// fsdp-run installed beside this program; $FSDP_RUN overrides it.
llvm::Expected<std::string> thisMachineCalibration(const char *argv0,
                                                   llvm::StringRef engine);

} // namespace mlir::fsdp

#endif // FSDP_COSTMODEL_THISMACHINE_H
