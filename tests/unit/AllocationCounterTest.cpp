#include "runtime/support/AllocationCounter.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

TEST(AllocationCounter, CountsOnlyWhileOn) {
  auto before = std::make_unique<int>(1); // not counted
  fsdp::startCountingAllocations();
  auto a = std::make_unique<int>(2);
  std::vector<double> v(100);
  int64_t n = fsdp::stopCountingAllocations();
  auto after = std::make_unique<int>(3); // not counted
  EXPECT_EQ(n, 2);
  fsdp::startCountingAllocations();
  int x = *a + *before + *after + (int)v.size();
  EXPECT_EQ(fsdp::stopCountingAllocations(), 0);
  EXPECT_EQ(x, 106);
}
