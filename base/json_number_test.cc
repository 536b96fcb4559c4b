#include "base/json_number.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "base/testing/round_trip_doubles.h"

namespace gpuvm {
namespace {

TEST(JsonNumberTest, WritesTheShortestTextThatReadsBackToTheSameDouble) {
  for (double v : testing::kRoundTripDoubles) {
    const std::string text = JsonNumber(v);
    const double back = std::strtod(text.c_str(), nullptr);
    EXPECT_EQ(std::memcmp(&back, &v, sizeof v), 0) << text;
    EXPECT_EQ(text.find_first_not_of("-+.0123456789e"), std::string::npos) << text;
  }
  EXPECT_EQ(JsonNumber(42), "42");
  EXPECT_EQ(JsonNumber(-0.0), "-0");
  EXPECT_EQ(JsonNumber(1e15), "1000000000000000");
  EXPECT_EQ(JsonNumber(0.1), "0.1");
  EXPECT_EQ(JsonNumber(4503599627370495.5), "4503599627370495.5");
  EXPECT_EQ(JsonNumber(1e300), "1e+300");
}

TEST(JsonNumberTest, NonFiniteIsNull) {
  EXPECT_EQ(JsonNumber(std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(JsonNumber(-std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(JsonNumber(std::numeric_limits<double>::quiet_NaN()), "null");
  std::string out = "[";
  AppendJsonNumber(out, 1.5);
  EXPECT_EQ(out, "[1.5");
}

}  // namespace
}  // namespace gpuvm
