#include "base/enum_names.h"

#include <gtest/gtest.h>

namespace gpuvm {
namespace {

enum class Color { kRed, kGreen, kBlue };
constexpr EnumName<Color> kColorNames[] = {{Color::kRed, "red"}, {Color::kGreen, "green"}};

TEST(EnumNamesTest, NamesAndValuesComeFromOneTable) {
  static_assert(std::string_view(NameOf(kColorNames, Color::kGreen, "?")) == "green");
  EXPECT_STREQ(NameOf(kColorNames, Color::kRed, "?"), "red");
  EXPECT_STREQ(NameOf(kColorNames, Color::kBlue, "?"), "?");  // not in the table
  EXPECT_STREQ(NameOf(kColorNames, static_cast<Color>(99), "unknown"), "unknown");
  EXPECT_EQ(ValueNamed(kColorNames, "green"), Color::kGreen);
  EXPECT_EQ(ValueNamed(kColorNames, "red"), Color::kRed);
  EXPECT_EQ(ValueNamed(kColorNames, "blue"), std::nullopt);
  EXPECT_EQ(ValueNamed(kColorNames, "Red"), std::nullopt);  // exact spelling only
  EXPECT_EQ(ValueNamed(kColorNames, ""), std::nullopt);
}

}  // namespace
}  // namespace gpuvm
