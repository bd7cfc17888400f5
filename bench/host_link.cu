// bench/host_link.cu - A GPU's host link, alone and both ways at once.
//
// The offload cost model (costmodel/DeviceModel.cpp, setHost) prices
// host-to-device and device-to-host copies per GPU at a rate each way alone
// and a lower one while the other direction runs. For the A100 both come
// from published nvbandwidth runs; for the H100 only a one-way figure was
// found, so its both-ways ratio is the A100's. This measures all four on the
// GPU it runs on (copy engines, pinned memory, as fsdp-run's copy streams
// copy): scripts/device-check.sh runs it where a GPU is lent.
//
//   fsdp-host-link [MiB per copy, default 256] [repetitions, default 10]
//
// Prints one JSON object: host_to_device and device_to_host alone, and each
// while the other runs (bytes/s), and their ratios to the lone rates, the
// names the device files take (h2d_while_d2h, d2h_while_h2d).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                               \
  do {                                                                         \
    cudaError_t err_ = (x);                                                    \
    if (err_ != cudaSuccess) {                                                 \
      std::fprintf(stderr, "fsdp-host-link: %s: %s\n", #x,                     \
                   cudaGetErrorString(err_));                                  \
      return 1;                                                                \
    }                                                                          \
  } while (0)

int main(int argc, char **argv) {
  size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 256;
  int reps = argc > 2 ? std::atoi(argv[2]) : 10;
  if (mib == 0 || reps <= 0) {
    std::fprintf(stderr, "usage: fsdp-host-link [MiB > 0] [repetitions > 0]\n");
    return 2;
  }
  size_t bytes = mib << 20;
  void *hostIn = nullptr, *hostOut = nullptr, *devIn = nullptr,
       *devOut = nullptr;
  CHECK(cudaMallocHost(&hostIn, bytes));
  CHECK(cudaMallocHost(&hostOut, bytes));
  CHECK(cudaMalloc(&devIn, bytes));
  CHECK(cudaMalloc(&devOut, bytes));
  cudaStream_t up, down;
  CHECK(cudaStreamCreateWithFlags(&up, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&down, cudaStreamNonBlocking));
  cudaEvent_t e[4];
  for (cudaEvent_t &x : e)
    CHECK(cudaEventCreate(&x));
  // Seconds of `reps` copies on each stream asked for (the two at once
  // when both are), each timed on its own stream.
  auto run = [&](bool h2d, bool d2h, float &upMs, float &downMs) {
    upMs = downMs = 0;
    if (h2d)
      CHECK(cudaEventRecord(e[0], up));
    if (d2h)
      CHECK(cudaEventRecord(e[2], down));
    for (int r = 0; r < reps; ++r) {
      if (h2d)
        CHECK(
            cudaMemcpyAsync(devIn, hostIn, bytes, cudaMemcpyHostToDevice, up));
      if (d2h)
        CHECK(cudaMemcpyAsync(hostOut, devOut, bytes, cudaMemcpyDeviceToHost,
                              down));
    }
    if (h2d)
      CHECK(cudaEventRecord(e[1], up));
    if (d2h)
      CHECK(cudaEventRecord(e[3], down));
    CHECK(cudaDeviceSynchronize());
    if (h2d)
      CHECK(cudaEventElapsedTime(&upMs, e[0], e[1]));
    if (d2h)
      CHECK(cudaEventElapsedTime(&downMs, e[2], e[3]));
    return 0;
  };
  float a, b, warm;
  if (run(true, true, warm, warm)) // warm-up
    return 1;
  float h2dAlone, d2hAlone, h2dBoth, d2hBoth;
  if (run(true, false, h2dAlone, a) || run(false, true, b, d2hAlone) ||
      run(true, true, h2dBoth, d2hBoth))
    return 1;
  auto rate = [&](float ms) {
    return ms > 0 ? reps * (double)bytes / (ms / 1e3) : 0;
  };
  cudaDeviceProp prop{};
  int device = 0;
  CHECK(cudaGetDevice(&device));
  CHECK(cudaGetDeviceProperties(&prop, device));
  double up1 = rate(h2dAlone), down1 = rate(d2hAlone), up2 = rate(h2dBoth),
         down2 = rate(d2hBoth);
  std::printf("{\"gpu\": \"%s\", \"bytes\": %zu, \"repetitions\": %d, "
              "\"host_to_device\": %.4g, \"device_to_host\": %.4g, "
              "\"h2d_during_d2h\": %.4g, \"d2h_during_h2d\": %.4g, "
              "\"h2d_while_d2h\": %.3f, \"d2h_while_h2d\": %.3f}\n",
              prop.name, bytes, reps, up1, down1, up2, down2,
              up1 > 0 ? up2 / up1 : 0, down1 > 0 ? down2 / down1 : 0);
  return 0;
}
