#include "base/flag_number.h"

#include <gtest/gtest.h>

#include "base/testing/refusals.h"

namespace gpuvm {
namespace {

TEST(FlagNumberTest, ReadsWholeNumbersInTheirRangeAndSaysWhatElse) {
  EXPECT_EQ(*ParseFlagNumber("--vcpus", "1", 1, 32), 1u);
  EXPECT_EQ(*ParseFlagNumber("--vcpus", "32", 1, 32), 32u);
  EXPECT_EQ(*ParseFlagNumber("--n", "0", 0, 256), 0u);
  const auto parse = [](std::string_view text) {
    return ParseFlagNumber("--vcpus", std::string(text), 1, 32);
  };
  const testing::Refusal bad[] = {
      {"0", "--vcpus wants a number from 1 to 32, not '0'"},
      {"33", "not '33'"},
      {"", "not ''"},
      {"12abc", "not '12abc'"},
      {"-1", "not '-1'"},
      {"99999999999999999999999", "not '99999999999999999999999'"},
  };
  testing::ExpectRefusals(parse, bad, StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpuvm
