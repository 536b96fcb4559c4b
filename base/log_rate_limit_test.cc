#include "base/log_rate_limit.h"

#include <gtest/gtest.h>

namespace gpuvm {
namespace {

using namespace std::chrono_literals;

TEST(LogRateLimit, AFewLinesASecondAndThenHowManyWereLeftOut) {
  LogRateLimit limit(3);
  const auto t0 = LogRateLimit::Clock::now();
  uint64_t left_out = 99;
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(limit.Allow(&left_out, t0 + i * 1ms));
    EXPECT_EQ(left_out, 0u);
  }
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(limit.Allow(&left_out, t0 + 10ms));
  EXPECT_TRUE(limit.Allow(&left_out, t0 + 1001ms));
  EXPECT_EQ(left_out, 5u) << "the first line of the next second says what was left out";
  EXPECT_TRUE(limit.Allow(&left_out, t0 + 1002ms));
  EXPECT_EQ(left_out, 0u);
}

}  // namespace
}  // namespace gpuvm
