// The scale run: --scale parsing and the table (medians per VM count and mode, ratios).
#include "bench/harness/scale.h"

#include <gtest/gtest.h>

#include "bench/harness/options.h"

namespace gpuvm::bench {
namespace {

RunRecord Record(const std::string& mode, int vms, double seconds, bool correct = true) {
  RunRecord r;
  r.bench = "madd";
  r.mode = mode;
  r.vms = vms;
  r.seconds = seconds;
  r.correct = correct;
  return r;
}

TEST(ScaleTest, ParsesCountsAndChecksThemAgainstTheModes) {
  auto o = ParseOptions({"--bench", "madd", "--mode", "native,fv-optimized", "--scale", "1,2,4,8"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->scale, (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(o->vms, 8);
  EXPECT_FALSE(ParseOptions({"--mode", "pt", "--scale", "1,2"}).ok());  // pt: one VM
  EXPECT_FALSE(ParseOptions({"--scale", "1,0"}).ok());
  EXPECT_FALSE(ParseOptions({"--scale", ","}).ok());
}

TEST(ScaleTest, TableHasMediansPerCountAndRatios) {
  std::vector<RunRecord> records = {Record("native", 1, 1.0),
                                    Record("native", 1, 3.0),
                                    Record("native", 2, 2.0),
                                    Record("fv-optimized", 1, 4.0),
                                    Record("fv-optimized", 2, 6.0),
                                    Record("fv-optimized", 2, 6.0),
                                    Record("fv-optimized", 2, 9.0, false)};
  const std::string table = RenderScale(records, {"madd"}, {"native", "fv-optimized"}, {1, 2});
  EXPECT_NE(table.find("2.0000 s (x1.00)"), std::string::npos) << table;  // native, 1: median 2
  EXPECT_NE(table.find("4.0000 s (x1.00) [x2.0 native]"), std::string::npos) << table;
  EXPECT_NE(table.find("6.0000 s (x1.50) [x3.0 native] 1 FAILED"), std::string::npos) << table;
}

}  // namespace
}  // namespace gpuvm::bench
