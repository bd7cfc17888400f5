#include "runtime/backends/cuda/DeviceInfo.h"

#include <cstdio>
#include <gtest/gtest.h>
#include <vector>

// Exits 77 (ctest: skipped) when the machine has no CUDA device.
int main(int argc, char **argv) {
  std::vector<fsdp::cuda::DeviceInfo> devices;
  fsdp::Status s = fsdp::cuda::listDevices(devices);
  if (s.isOk() && devices.empty()) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

TEST(CudaDevices, ListsUsableDevices) {
  std::vector<fsdp::cuda::DeviceInfo> devices;
  fsdp::Status s = fsdp::cuda::listDevices(devices);
  ASSERT_TRUE(s.isOk()) << s.message();
  ASSERT_FALSE(devices.empty());
  for (const auto &d : devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.totalBytes, 0u);
    EXPECT_GE(d.computeMajor, 7);
  }
}
