#include "scheduler/sim/fairness.h"

#include <gtest/gtest.h>

namespace gpuvm::sched::sim {
namespace {

using namespace std::chrono_literals;

SimResult Runs(std::vector<SimRun> runs, Duration end) {
  SimResult result;
  result.runs = std::move(runs);
  result.end = end;
  return result;
}

TEST(SchedFairnessTest, SharesAreOfTheGpuTimeUsedInEachWindow) {
  // VM 0: 300 ms, VM 1: 100 ms, idle 100 ms, then VM 1 alone for 500 ms.
  const SimResult r = Runs({{0ms, 300ms, 0}, {300ms, 400ms, 1}, {500ms, 1000ms, 1}}, 1000ms);
  const std::vector<Window> w = Windows(r, 2, 500ms, 0ms, 1000ms, 500ms);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].busy, 400ms);
  EXPECT_DOUBLE_EQ(w[0].share[0], 0.75);
  EXPECT_DOUBLE_EQ(w[0].share[1], 0.25);
  EXPECT_EQ(w[1].used[1], 500ms);
  EXPECT_DOUBLE_EQ(w[1].share[1], 1.0);
}

TEST(SchedFairnessTest, SlidingWindowsAndRunsCrossingBoundaries) {
  const SimResult r = Runs({{50ms, 250ms, 0}, {250ms, 400ms, 1}}, 400ms);
  const std::vector<Window> w = Windows(r, 2, 200ms, 0ms, 400ms, 100ms);
  ASSERT_EQ(w.size(), 3u);  // [0,200) [100,300) [200,400)
  EXPECT_EQ(w[0].used[0], 150ms);
  EXPECT_EQ(w[1].used[0], 150ms);
  EXPECT_EQ(w[1].used[1], 50ms);
  EXPECT_EQ(w[2].used[0], 50ms);
  EXPECT_EQ(w[2].used[1], 150ms);
  EXPECT_TRUE(Windows(r, 2, 250ms, 0ms, 400ms, 100ms).empty());  // step must divide the window
}

TEST(SchedFairnessTest, TargetsNormalizeShares) {
  std::vector<SimVm> vms(3);
  vms[0].share_percent = 10;
  vms[1].share_percent = 30;
  vms[2].share_percent = 40;
  const std::vector<double> t = TargetShares(vms);
  EXPECT_DOUBLE_EQ(t[0], 0.125);
  EXPECT_DOUBLE_EQ(t[1], 0.375);
  EXPECT_DOUBLE_EQ(t[2], 0.5);
  for (SimVm& vm : vms) vm.share_percent = 0;
  EXPECT_DOUBLE_EQ(TargetShares(vms)[1], 1.0 / 3);
}

TEST(SchedFairnessTest, ReportsWorstDeviationJainAndUtilization) {
  const SimResult r = Runs({{0ms, 250ms, 0}, {250ms, 500ms, 1}, {500ms, 900ms, 0}}, 1000ms);
  const FairnessReport report = Evaluate(r, {0.5, 0.5}, 500ms, 0ms, 1000ms, 500ms);
  EXPECT_EQ(report.windows, 2u);
  EXPECT_DOUBLE_EQ(report.max_deviation[0], 0.5);  // second window: VM 0 had it all
  EXPECT_DOUBLE_EQ(report.worst_deviation, 0.5);
  EXPECT_DOUBLE_EQ(report.mean_share[0], 0.75);
  EXPECT_DOUBLE_EQ(report.jain_min, 0.5);  // one of two VMs served: 1/n
  EXPECT_DOUBLE_EQ(report.utilization, 0.9);
}

}  // namespace
}  // namespace gpuvm::sched::sim
