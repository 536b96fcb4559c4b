#include "bench/harness/results.h"

#include <gtest/gtest.h>

#include <string>

namespace gpuvm::bench {
namespace {

constexpr char kGood[] =
    R"({"bench":"madd","api":"driver","size":"test","problem":"64 x 64 int32 add","correct":true,)"
    R"("seconds":0.5,"phases":{"init":0.25,"htod":0.125,"launch":0.0625,"dtoh":0.03125,)"
    R"("close":0.03125},"error":""})";

RunRecord MaddRecord() {
  RunRecord r;
  r.bench = "madd";
  r.mode = "native";
  r.size = "test";
  return r;
}

TEST(BenchHarnessResults, TakesThePhasesAndTheVerdict) {
  RunRecord r = MaddRecord();
  ASSERT_TRUE(ApplyProgramResult(kGood, &r).ok());
  EXPECT_TRUE(r.correct);
  EXPECT_EQ(r.api, "driver");
  EXPECT_EQ(r.problem, "64 x 64 int32 add");
  EXPECT_DOUBLE_EQ(r.seconds, 0.5);
  EXPECT_DOUBLE_EQ(r.phases[0], 0.25);
  EXPECT_DOUBLE_EQ(r.phases[4], 0.03125);
  EXPECT_TRUE(r.error.empty());
}

TEST(BenchHarnessResults, IterationsAreOptionalAndChecked) {
  RunRecord r = MaddRecord();
  ASSERT_TRUE(ApplyProgramResult(kGood, &r).ok());
  EXPECT_EQ(r.iterations, 0);
  EXPECT_EQ(r.ToJson().Find("iterations"), nullptr);
  std::string text = kGood;
  text.insert(text.size() - 1, ",\"iterations\":20");
  ASSERT_TRUE(ApplyProgramResult(text, &r).ok());
  EXPECT_EQ(r.iterations, 20);
  ASSERT_NE(r.ToJson().Find("iterations"), nullptr);
  for (const char* bad : {"0", "-3", "2.5", "\"20\"", "1e300"}) {
    std::string t = kGood;
    t.insert(t.size() - 1, std::string(",\"iterations\":") + bad);
    RunRecord b = MaddRecord();
    const Status s = ApplyProgramResult(t, &b);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("iterations"), std::string::npos) << bad;
  }
}

TEST(BenchHarnessResults, SessionCountersComeFromTheVmsOwnLine) {
  const std::string log =
      "ts=2026-11-28T01:18:05.123Z level=info component=gpuvm-aggregator vm=1 name=churn-0 "
      "msg=\"VM 1 'churn-0' (local domain 7, fv): session ended (normal); ...\"\n"
      "ts=2026-11-28T01:18:05.123Z level=info component=gpuvm-aggregator vm=1 name=churn-0 "
      "msg=\"fv-optimized, VRAM 64 MiB dynamic "
      "(512 KiB assigned), channels 16..31; traps BAR0/1/3 1/2/3 (PRAMIN 0, USER 5), TLB flushes "
      "28, scans 12 (tables 40, unchanged 3), shadow entries written 4096, rejected 0\"\n"
      "ts=2026-11-28T01:18:05.123Z level=info component=gpuvm-aggregator vm=2 name=churn-00 "
      "msg=\"fv-optimized, TLB flushes 1, scans 99 (tables 99, unchanged 0), shadow entries "
      "written 1\"\n";
  std::map<std::string, double> c = ParseSessionCounters(log, "churn-0");
  EXPECT_EQ(c["scans"], 12);
  EXPECT_EQ(c["tables_scanned"], 40);
  EXPECT_EQ(c["tlb_flushes"], 28);
  EXPECT_EQ(c["shadow_entries_written"], 4096);
  EXPECT_TRUE(ParseSessionCounters(log, "churn-1").empty());
  EXPECT_EQ(
      ParseSessionCounters("x vm=3 name=nop-1 msg=\"fv-naive, TLB flushes 2, scans 5 (tables 6",
                           "nop-1")["scans"],
      5);
  EXPECT_TRUE(ParseSessionCounters("scans 3 (tables 4", "x").empty());
}

TEST(BenchHarnessResults, AWrongResultKeepsTheProgramsReason) {
  std::string text = kGood;
  text.replace(text.find("\"correct\":true"), 14, "\"correct\":false");
  text.replace(text.find("\"error\":\"\""), 10, "\"error\":\"wrong result: c element 3\"");
  RunRecord r = MaddRecord();
  ASSERT_TRUE(ApplyProgramResult(text, &r).ok());
  EXPECT_FALSE(r.correct);
  EXPECT_EQ(r.error, "wrong result: c element 3");
}

TEST(BenchHarnessResults, MalformedReportsAreRefusedAndLeaveTheRecordAlone) {
  auto replace = [](std::string from, std::string to) {
    std::string text = kGood;
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
  };
  const std::pair<std::string, std::string> cases[] = {
      {"not json", "JSON: expected"},
      {"[1,2]", "not a JSON object"},
      {replace("\"bench\":\"madd\"", "\"bench\":\"mmul\""), "reported benchmark 'mmul'"},
      {replace("\"bench\":\"madd\",", ""), "has no \"bench\""},
      {replace("\"api\":\"driver\"", "\"api\":\"vulkan\""), "unknown api"},
      {replace("\"correct\":true", "\"correct\":1"), "\"correct\" of the wrong type"},
      {replace("\"seconds\":0.5", "\"seconds\":-1"), "implausible \"seconds\""},
      {replace("\"seconds\":0.5", "\"seconds\":1e300"), "implausible \"seconds\""},
      {replace("\"launch\":0.0625", "\"launch\":\"fast\""), "\"launch\" of the wrong type"},
      {replace("\"close\":0.03125", "\"closed\":0"), "has no \"close\""},
      {replace("\"error\":\"\"", "\"error\":\"boom\""), "correct but carries an error"},
  };
  for (const auto& [text, message] : cases) {
    RunRecord r = MaddRecord();
    const Status s = ApplyProgramResult(text, &r);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_NE(s.message().find(message), std::string::npos) << s.message();
    EXPECT_FALSE(r.correct);
    EXPECT_DOUBLE_EQ(r.seconds, 0);
  }
}

TEST(BenchHarnessResults, ReadsTheDeviceModelsCounters) {
  // gpuvm-dm's exit line (qemu-device/trap_counters.h), among other output.
  const std::string err =
      "gpuvm-dm: domain 7, local at @sock, vm id 1\n"
      "gpuvm-dm: domain 7: BAR0 r=55 w=148 | BAR1 r=0 w=66064 | BAR3 r=2 w=94626 | config r=40 "
      "w=12 | refused: outside_bars=3 bad_size=1\n"
      "gpuvm-vm: guest exited 0\n";
  const auto c = ParseCounters(err);
  EXPECT_EQ(c.at("bar0_reads"), 55);
  EXPECT_EQ(c.at("bar0_writes"), 148);
  EXPECT_EQ(c.at("bar1_writes"), 66064);
  EXPECT_EQ(c.at("bar3_reads"), 2);
  EXPECT_EQ(c.at("bar3_writes"), 94626);
  EXPECT_EQ(c.at("config_reads"), 40);
  EXPECT_EQ(c.at("config_writes"), 12);
  EXPECT_EQ(c.at("refused"), 4);
  EXPECT_EQ(c.at("refused_outside_bars"), 3);
}

TEST(BenchHarnessResults, CountersOfLaterLayersThroughTheHook) {
  const auto c = ParseCounters(
      "BAR0 r=1 w=2 | BAR1 r=3 w=4 | BAR3 r=5 w=6 | config r=7 w=8 | refused: none\n"
      "gpuvm-counters: pt_scans=12 shadow_entries_written=4096 pv_calls=118\n");
  EXPECT_EQ(c.at("refused"), 0);
  EXPECT_EQ(c.at("pt_scans"), 12);
  EXPECT_EQ(c.at("shadow_entries_written"), 4096);
  EXPECT_EQ(c.at("pv_calls"), 118);
  EXPECT_TRUE(ParseCounters("nothing to see\n").empty());
  // A flood of digits is a big number, not a crash.
  const auto huge = ParseCounters("gpuvm-counters: x=" + std::string(400, '9') + "\n");
  EXPECT_GT(huge.at("x"), 1e300);
}

TEST(BenchHarnessResults, TheResultsLineHasEveryField) {
  RunRecord r = MaddRecord();
  ASSERT_TRUE(ApplyProgramResult(kGood, &r).ok());
  r.mode = "pt";
  r.counters["bar0_reads"] = 55;
  r.rev = "abc123";
  r.time = UtcTimestamp();
  const std::string line = r.ToJson().Serialize();
  Result<Json> j = ParseJson(line);
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  for (const char* key :
       {"bench", "mode", "vms", "vm", "run", "api", "size", "problem", "seconds", "wall_seconds",
        "phases", "counters", "correct", "error", "exit_status", "rev", "load", "time"}) {
    EXPECT_NE(j->Find(key), nullptr) << key;
  }
  for (const char* phase : kPhaseNames) EXPECT_NE(j->Find("phases")->Find(phase), nullptr);
  EXPECT_EQ(j->Find("counters")->Find("bar0_reads")->number(), 55);
  EXPECT_EQ(j->Find("time")->string().size(), 20u);  // 2025-01-31T12:34:56Z
}

}  // namespace
}  // namespace gpuvm::bench
