//===- Backends.cpp - Choosing where fsdp-run computes --------------------===//
#include "runtime/backends/Backends.h"
#include "runtime/device/DeviceBackend.h"

#include <cstdlib>
#ifdef FSDP_HAVE_CUDA
#include "runtime/backends/cuda/CudaDevice.h"
#endif

namespace fsdp {

Status stepBackend(const std::string &name, Comm &comm, int64_t localRank,
                   double commTimeoutSeconds,
                   std::unique_ptr<StepBackend> &out) {
  out.reset();
  if (name == "cpu")
    return Status::ok();
  if (name == "emulated") {
    out = device::deviceBackend(device::hostDevice(comm));
    return Status::ok();
  }
  if (name == "cuda") {
#ifdef FSDP_HAVE_CUDA
    // mpirun's local rank, where no torchrun or Slurm variable gave one.
    if (const char *ompi = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
        ompi && localRank == 0)
      localRank = std::atoll(ompi);
    std::unique_ptr<device::Device> dev;
    FSDP_RETURN_IF_ERROR(
        cuda::cudaDevice(comm, localRank, commTimeoutSeconds, dev));
    out = device::deviceBackend(std::move(dev));
    return Status::ok();
#else
    (void)localRank;
    (void)commTimeoutSeconds;
    return Status::error("--backend cuda: this build has no CUDA backend "
                         "(configure where nvcc is found)");
#endif
  }
  return Status::error("--backend " + name +
                       ": unknown (cpu, emulated or cuda)");
}

} // namespace fsdp
