#include "base/vm_name.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>

#include "base/share.h"
#include "base/testing/refusals.h"

namespace gpuvm {
namespace {

std::string Error(const Status& s) { return s.ok() ? "(ok)" : s.message(); }

VmNameParts Parts(std::string name, std::string mode = "", std::optional<uint64_t> mib = {},
                  std::optional<uint32_t> channels = {}, std::optional<double> share = {}) {
  VmNameParts p;
  p.name = std::move(name);
  p.mode = std::move(mode);
  p.vram_mib = mib;
  p.channels = channels;
  p.share = share;
  return p;
}

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
  EXPECT_NE(Error(CheckVmName("a,b")).find("has ','"), std::string::npos);
}

TEST(VmNameTest, ParsesNameAndOptions) {
  Result<VmNameParts> p = ParseVmName("a@lazy,256,ch8,share12.5");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->name, "a");
  EXPECT_EQ(p->mode, "lazy");
  EXPECT_EQ(p->vram_mib, 256u);
  EXPECT_EQ(p->channels, 8u);
  EXPECT_EQ(p->share, 12.5);
  p = ParseVmName("plain");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, Parts("plain"));
  p = ParseVmName("b@share33.333");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->mode, "");
  EXPECT_DOUBLE_EQ(*p->share, 33.333);
  p = ParseVmName("c@bar-remap");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->mode, "bar-remap");
  EXPECT_EQ(VmBaseName("a@lazy,256"), "a");
  EXPECT_EQ(VmBaseName("plain"), "plain");
}

using testing::Refusal;

TEST(VmNameTest, RefusesMalformedNamesSayingWhat) {
  const Refusal cases[] = {
      {"a@300@optimized", "'@' twice"},  // what gpuvm-vm --name 'a@300' used to make
      {"a b@lazy", "has ' '"},
      {"@lazy", "cannot be empty"},
      {"a@", "without options"},
      {"a@lazy,", "an empty option"},
      {"a@,lazy", "an empty option"},
      {"a@LAZY", "has 'L'"},
      {"a@0", "must be 1 to 999999"},
      {"a@0128", "must be 1 to 999999"},
      {"a@1234567", "must be 1 to 999999"},
      {"a@ch0", "ch1 to ch999999"},
      {"a@share-5", "share '-5' is negative; shares are 0-100%"},
      {"a@share101", "share '101' is above 100%"},
      {"a@share1e2", "is not a percentage"},
      {"a@share", "is not a percentage"},
      {"a@share1.2345", "is not a percentage"},
      {"a@lazy,naive", "the mode given twice"},
      {"a@256,128", "VRAM given twice"},
      {"a@ch4,ch8", "channel count given twice"},
      {"a@share1,share2", "share given twice"},
      {"a@9lives", "must be 1 to 999999"},
      {"a@x_y", "has '_'"},
      {"abcdefghijklmnopqrstuvwxy@optimized", "fit in 31"},
  };
  testing::ExpectRefusals(ParseVmName, cases, StatusCode::kInvalidArgument);
}

TEST(VmNameTest, FormatsWhatParsesBackAndRefusesWhatDoesNotFit) {
  const VmNameParts parts = Parts("web", "opt", 256, 8, 12.5);
  Result<std::string> text = FormatVmName(parts);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, "web@opt,256,ch8,share12.5");
  Result<VmNameParts> back = ParseVmName(*text);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, parts);
  EXPECT_EQ(*FormatVmName(Parts("plain")), "plain");
  // 25 and 31 characters with "@optimized" used to be cut to the same 21-character name.
  for (size_t n : {25u, 31u}) {
    Result<std::string> long_name = FormatVmName(Parts(std::string(n, 'v'), "optimized"));
    ASSERT_FALSE(long_name.ok()) << n;
    EXPECT_NE(long_name.status().message().find("use a name of at most 21 characters"),
              std::string::npos)
        << long_name.status().message();
  }
  EXPECT_TRUE(FormatVmName(Parts(std::string(21, 'v'), "optimized")).ok());
  EXPECT_FALSE(FormatVmName(Parts("a b")).ok());
  EXPECT_FALSE(FormatVmName(Parts("a", "", {}, {}, -1)).ok());
  EXPECT_FALSE(FormatVmName(Parts("a", "", {}, {}, 100.5)).ok());
  EXPECT_FALSE(FormatVmName(Parts("a", "", 0)).ok());
  EXPECT_FALSE(FormatVmName(Parts("a", "Lazy")).ok());
  Result<std::string> crowded = FormatVmName(Parts("a", "bar-remap", 999999, 128, 33.333));
  ASSERT_FALSE(crowded.ok());
  EXPECT_NE(crowded.status().message().find("alone take"), std::string::npos);
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
