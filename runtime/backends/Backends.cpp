//===- Backends.cpp - Choosing where fsdp-run computes --------------------===//
#include "runtime/backends/Backends.h"
#include "runtime/device/DeviceBackend.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>

namespace fsdp {

namespace {

/// runtime/backends/cuda/Plugin.cpp's entry point.
using CudaFactory = Status (*)(Comm &, int64_t, double,
                               std::unique_ptr<device::Device> &);

/// libfsdp_cuda.so next to this executable (the build puts both in
/// build/tools), loaded once and kept.
Status loadCuda(CudaFactory &out) {
  static CudaFactory factory = nullptr;
  static std::string failure;
  if (!factory && failure.empty()) {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    std::string dir = n > 0 ? std::string(exe, n) : std::string("./x");
    dir = dir.substr(0, dir.rfind('/'));
    std::string path = dir + "/libfsdp_cuda.so";
    void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle)
      failure = std::string("this build has no CUDA backend (") + dlerror() +
                "); it is built where nvcc is found";
    else if (!(factory = reinterpret_cast<CudaFactory>(
                   dlsym(handle, "fsdp_cuda_device_v1"))))
      failure = path + " has no fsdp_cuda_device_v1";
  }
  if (!factory)
    return Status::error("--backend cuda: " + failure);
  out = factory;
  return Status::ok();
}

} // namespace

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
    CudaFactory factory;
    FSDP_RETURN_IF_ERROR(loadCuda(factory));
    // mpirun's local rank, where no torchrun or Slurm variable gave one.
    if (const char *ompi = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
        ompi && localRank == 0)
      localRank = std::atoll(ompi);
    std::unique_ptr<device::Device> dev;
    FSDP_RETURN_IF_ERROR(factory(comm, localRank, commTimeoutSeconds, dev));
    out = device::deviceBackend(std::move(dev));
    return Status::ok();
  }
  return Status::error("--backend " + name +
                       ": unknown (cpu, emulated or cuda)");
}

} // namespace fsdp
