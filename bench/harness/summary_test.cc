#include "bench/harness/summary.h"

#include <gtest/gtest.h>

#include <string>

namespace gpuvm::bench {
namespace {

RunRecord Record(std::string bench, std::string mode, double seconds, bool correct = true) {
  RunRecord r;
  r.bench = std::move(bench);
  r.mode = std::move(mode);
  r.api = "driver";
  r.problem = "p";
  r.seconds = seconds;
  r.phases = {seconds / 2, seconds / 4, seconds / 8, seconds / 16, seconds / 16};
  r.correct = correct;
  if (!correct) r.error = "wrong result: c element 1";
  return r;
}

TEST(BenchHarnessSummary, Median) {
  EXPECT_EQ(Median({}), 0);
  EXPECT_EQ(Median({3}), 3);
  EXPECT_EQ(Median({5, 1, 3}), 3);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
}

TEST(BenchHarnessSummary, MediansAndRatiosToNative) {
  Summary s;
  for (double t : {1.0, 3.0, 2.0}) s.Add(Record("madd", "native", t));
  for (double t : {4.0, 6.0, 5.0}) {
    RunRecord r = Record("madd", "pt", t);
    r.counters = {{"bar0_reads", 10}, {"bar1_writes", 66000}, {"refused", 0}, {"pt_scans", 7}};
    s.Add(r);
  }
  const std::string table = s.Render("header", {"madd"}, {"native", "pt"});
  EXPECT_NE(table.find("header"), std::string::npos);
  EXPECT_NE(table.find("ratio to native"), std::string::npos);
  EXPECT_NE(table.find("2.0000"), std::string::npos) << table;  // native median
  EXPECT_NE(table.find("5.0000"), std::string::npos) << table;  // pt median
  EXPECT_NE(table.find("2.50"), std::string::npos) << table;    // pt / native
  EXPECT_NE(table.find("phases, median seconds: native"), std::string::npos);
  EXPECT_NE(table.find("traps per BAR per run"), std::string::npos);
  EXPECT_NE(table.find("66000"), std::string::npos) << table;
  EXPECT_NE(table.find("pt_scans=7"), std::string::npos) << table;
  EXPECT_EQ(s.failures(), 0);
}

TEST(BenchHarnessSummary, FailuresAreCountedShownAndKeptOutOfTheMedians) {
  Summary s;
  s.Add(Record("nn", "native", 1.0));
  s.Add(Record("nn", "native", 100.0, false));
  s.Add(Record("lud", "native", 2.0, false));
  const std::string table = s.Render("h", {"nn", "lud"}, {"native"});
  EXPECT_EQ(s.failures(), 2);
  EXPECT_NE(table.find("1.0000!"), std::string::npos) << table;
  EXPECT_EQ(table.find("100.0"), std::string::npos) << table;
  EXPECT_NE(table.find("FAILED"), std::string::npos) << table;
  EXPECT_NE(table.find("nn native: 1 of 2 failed; first: wrong result"), std::string::npos)
      << table;
}

}  // namespace
}  // namespace gpuvm::bench
