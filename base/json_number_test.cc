#include "base/json_number.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

namespace gpuvm {
namespace {

// Values a writer with 9 significant digits ("%.9g") did not keep, and some edges.
TEST(JsonNumberTest, WritesTheShortestTextThatReadsBackToTheSameDouble) {
  const double values[] = {4503599627370495.5,
                           0.1234567891234,
                           1.0000000001,
                           123456789.123,
                           0.30000000000000004,
                           1e-300,
                           2.2250738585072014e-308,
                           4.9406564584124654e-324,
                           1.7976931348623157e308,
                           9007199254740993.0,
                           -0.0,
                           -1234567.0,
                           0.1,
                           2.5,
                           6.02214076e23};
  for (double v : values) {
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
