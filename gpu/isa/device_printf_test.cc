// ParsePrintfSpec: what each conversion takes (the vprintf instruction sizes arguments with it and
// the host formats with it, so both must agree), and what is not a conversion.
#include "gpu/isa/device_printf.h"

#include <gtest/gtest.h>

#include <string>

namespace gpuvm::isa {
namespace {

PrintfSpec Parse(const std::string& format) { return ParsePrintfSpec(format, 0); }

TEST(DevicePrintfSpec, ValuesByConversionAndLength) {
  struct Case {
    const char* text;
    PrintfValue value;
  } cases[] = {
      {"%d", PrintfValue::kInt32},   {"%i", PrintfValue::kInt32},   {"%hhd", PrintfValue::kInt32},
      {"%hu", PrintfValue::kInt32},  {"%x", PrintfValue::kInt32},   {"%c", PrintfValue::kInt32},
      {"%ld", PrintfValue::kInt64},  {"%lld", PrintfValue::kInt64}, {"%zu", PrintfValue::kInt64},
      {"%jx", PrintfValue::kInt64},  {"%tX", PrintfValue::kInt64},  {"%f", PrintfValue::kDouble},
      {"%lf", PrintfValue::kDouble}, {"%Lg", PrintfValue::kDouble}, {"%A", PrintfValue::kDouble},
      {"%p", PrintfValue::kPointer}, {"%s", PrintfValue::kString},  {"%%", PrintfValue::kNone},
  };
  for (const Case& c : cases) {
    const PrintfSpec s = Parse(c.text);
    EXPECT_TRUE(s.valid) << c.text;
    EXPECT_EQ(s.length, std::string(c.text).size()) << c.text;
    EXPECT_EQ(s.value, c.value) << c.text;
  }
  EXPECT_EQ(PrintfValueBytes(PrintfValue::kInt32), 4u);
  EXPECT_EQ(PrintfValueBytes(PrintfValue::kInt64), 8u);
  EXPECT_EQ(PrintfValueBytes(PrintfValue::kDouble), 8u);
  EXPECT_EQ(PrintfValueBytes(PrintfValue::kString), 8u);
}

TEST(DevicePrintfSpec, FlagsWidthPrecisionAndStars) {
  PrintfSpec s = Parse("%-+ #0-12.5lf rest");
  ASSERT_TRUE(s.valid);
  EXPECT_STREQ(s.flags, "-+ #0");
  EXPECT_EQ(s.width, 12);
  EXPECT_EQ(s.precision, 5);
  EXPECT_STREQ(s.length_modifier, "l");
  EXPECT_EQ(s.conversion, 'f');
  EXPECT_EQ(s.length, 13u);
  EXPECT_EQ(s.ArgSlots(), 1u);
  s = Parse("%*.*d");
  ASSERT_TRUE(s.valid);
  EXPECT_EQ(s.width, kPrintfStar);
  EXPECT_EQ(s.precision, kPrintfStar);
  EXPECT_EQ(s.ArgSlots(), 3u);
  s = Parse("%.s");
  ASSERT_TRUE(s.valid);
  EXPECT_EQ(s.precision, 0);
  EXPECT_EQ(ParsePrintfSpec("ab%5d", 2).length, 3u);
}

TEST(DevicePrintfSpec, InvalidSpecsCoverOnlyThePercent) {
  for (const char* text : {"%n", "%hn", "%y", "%", "%5", "%.", "%l", "%ls", "%lc", "%hf", "%Ld",
                           "%lp", "%*%", "%5000d", "%.99999f", "%C", "%S"}) {
    const PrintfSpec s = Parse(text);
    EXPECT_FALSE(s.valid) << text;
    EXPECT_EQ(s.length, 1u) << text;
    EXPECT_EQ(s.ArgSlots(), 0u) << text;
  }
  // Never reads past the view, even when the text goes on in memory.
  const std::string text = "%5dXYZ";
  EXPECT_FALSE(ParsePrintfSpec(std::string_view(text.data(), 2), 0).valid);
  EXPECT_TRUE(Parse("%4096d").valid);
  EXPECT_FALSE(Parse("%4097d").valid);
}

}  // namespace
}  // namespace gpuvm::isa
