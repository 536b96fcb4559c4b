#include "base/vm_name.h"

#include <gtest/gtest.h>

#include <string>

#include "base/share.h"
#include "base/testing/refusals.h"

namespace gpuvm {
namespace {

using testing::Refusal;

std::string Error(const Status& s) { return s.ok() ? "(ok)" : s.message(); }

TEST(VmNameTest, NamesAreCheckedNeverCut) {
  EXPECT_TRUE(CheckVmName("web").ok());
  EXPECT_TRUE(CheckVmName("a.b_c-9").ok());
  EXPECT_TRUE(CheckVmName(std::string(31, 'n')).ok());
  EXPECT_NE(Error(CheckVmName(std::string(32, 'n'))).find("is 32 characters; at most 31"),
            std::string::npos);
  EXPECT_NE(Error(CheckVmName("")).find("cannot be empty"), std::string::npos);
  EXPECT_NE(Error(CheckVmName("guest one")).find("has ' ' at 6"), std::string::npos);
  EXPECT_NE(Error(CheckVmName("a\tb")).find("has 0x09 at 2"), std::string::npos);
  // '@' and ',' separate the options: a name with one is refused, saying where options go.
  const std::string at = Error(CheckVmName("a@300"));
  EXPECT_NE(at.find("has '@' at 2"), std::string::npos) << at;
  EXPECT_NE(at.find("--mode"), std::string::npos) << at;
  EXPECT_NE(at.find("--variant"), std::string::npos) << at;
  EXPECT_NE(Error(CheckVmName("a,b")).find("has ','"), std::string::npos);
}

TEST(ShareTest, OneSyntaxWithTheSameMessages) {
  EXPECT_EQ(*ParseSharePercent("0"), 0);
  EXPECT_EQ(*ParseSharePercent("100"), 100);
  EXPECT_EQ(*ParseSharePercent("100.000"), 100);
  EXPECT_EQ(*ParseSharePercent("12.5"), 12.5);
  EXPECT_EQ(*ParseSharePercent("40%"), 40);
  EXPECT_DOUBLE_EQ(*ParseSharePercent("33.333"), 33.333);
  const Refusal bad[] = {
      {"-5", "share '-5' is negative; shares are 0-100%"},
      {"-0", "is negative"},
      {"100.001", "share '100.001' is above 100%"},
      {"101", "is above 100%"},
      {"1.2345", "is not a percentage (0-100, at most 3 decimals"},
      {"1e2", "is not a percentage"},
      {"0x10", "is not a percentage"},
      {"nan", "is not a percentage"},
      {"inf", "is not a percentage"},
      {"", "is not a percentage"},
      {"%", "is not a percentage"},
      {" 5", "is not a percentage"},
      {"5.", "is not a percentage"},
      {".5", "is not a percentage"},
      {"1000", "is not a percentage"},
  };
  testing::ExpectRefusals(ParseSharePercent, bad);
  EXPECT_EQ(FormatSharePercent(25), "25");
  EXPECT_EQ(FormatSharePercent(12.5), "12.5");
  EXPECT_EQ(FormatSharePercent(100.0 / 3), "33.333");
  EXPECT_EQ(FormatSharePercent(-1), "0");
  for (double v : {0.0, 0.001, 12.5, 33.333, 99.999, 100.0}) {
    EXPECT_EQ(*ParseSharePercent(FormatSharePercent(v)), v) << v;
  }
}

}  // namespace
}  // namespace gpuvm
