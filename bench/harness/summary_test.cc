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
  r.wall_seconds = seconds + 0.125;  // the process around the program's phases
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
  // The phase table's last column: the process's wall time (median), the VM's start and end with.
  EXPECT_NE(table.find("5.0000      5.1250  p"), std::string::npos) << table;
  EXPECT_NE(table.find("wall  problem"), std::string::npos) << table;
  EXPECT_NE(table.find("traps per BAR per run"), std::string::npos);
  EXPECT_NE(table.find("66000"), std::string::npos) << table;
  EXPECT_NE(table.find("pt_scans=7"), std::string::npos) << table;
  EXPECT_EQ(s.failures(), 0);
}

TEST(BenchHarnessSummary, ParaVirtualCallsAndDoorbellsBesideExitsAndTraps) {
  Summary s;
  auto add = [&](const char* mode, double calls, double doorbells, double exits) {
    RunRecord r = Record("nop", mode, 1.0);
    r.counters = {
        {"bar0_reads", 10}, {"bar0_writes", 90}, {"bar3_writes", 900}, {"mmio_exits", exits}};
    if (calls >= 0) r.counters["pv_calls"] = calls, r.counters["pv_doorbells"] = doorbells;
    s.Add(r);
  };
  add("fv-optimized", -1, 0, 321);
  add("pv-naive", 24, 24, 250);
  add("pv-multicall", 23, 9, 235);
  const std::string table = s.Render("h", {"nop"}, {"fv-optimized", "pv-naive", "pv-multicall"});
  const size_t at = table.find("para-virtual calls / doorbells per run");
  ASSERT_NE(at, std::string::npos) << table;
  const std::string section = table.substr(at);
  EXPECT_NE(section.find("pv-naive calls"), std::string::npos) << section;
  EXPECT_NE(section.find("pv-multicall calls"), std::string::npos) << section;
  EXPECT_EQ(section.find("fv-optimized calls"), std::string::npos) << section;
  EXPECT_NE(section.find("fv-optimized exits"), std::string::npos) << section;
  const std::string row = section.substr(section.find("\nnop") + 1);
  // calls and doorbells of each pv mode, then exits and traps (1000) of every mode.
  EXPECT_NE(row.find("24"), std::string::npos) << row;
  EXPECT_NE(row.find("9"), std::string::npos) << row;
  EXPECT_NE(row.find("321"), std::string::npos) << row;
  EXPECT_NE(row.find("1000"), std::string::npos) << row;
  // Without pv modes there is no such section.
  Summary plain;
  plain.Add(Record("nop", "pt", 1.0));
  EXPECT_EQ(plain.Render("h", {"nop"}, {"pt"}).find("para-virtual calls"), std::string::npos);
}

TEST(BenchHarnessSummary, CountersPerIterationForProgramsThatCountThem) {
  Summary s;
  RunRecord r = Record("churn", "fv-optimized", 1.0);
  r.iterations = 20;
  r.counters = {{"bar0_reads", 100}, {"bar1_writes", 300}, {"scans", 40}, {"mmio_exits", 60}};
  s.Add(r);
  RunRecord plain = Record("nop", "fv-optimized", 1.0);
  plain.counters = {{"bar0_reads", 7}};
  s.Add(plain);
  const std::string table = s.Render("h", {"nop", "churn"}, {"fv-optimized"});
  const size_t at = table.find("per iteration");
  ASSERT_NE(at, std::string::npos) << table;
  const std::string section = table.substr(at);
  const std::string row = section.substr(section.find("\nchurn") + 1);
  // traps (100 + 300) / 20, exits 60 / 20, scans 40 / 20.
  EXPECT_NE(row.find("20.0"), std::string::npos) << row;
  EXPECT_NE(row.find("3.0"), std::string::npos) << row;
  EXPECT_NE(row.find("2.0"), std::string::npos) << row;
  EXPECT_EQ(section.find("\nnop"), std::string::npos) << section;
  Summary none;
  none.Add(plain);
  EXPECT_EQ(none.Render("h", {"nop"}, {"fv-optimized"}).find("per iteration"), std::string::npos);
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
