// A hostile fv guest floods the aggregator with refused acts (gpuvm-fv-hostile-guest: 4,000
// refused register writes and 4,000 refused playlists, with real gpuvm-aggregator, gpuvm-vm and
// gpuvm-dm processes). The aggregator's log must stay bounded — its lines are counted — while the
// refusal counters show every one of them: in `gpuvm-ctl stats --json` during the run and in the
// VM's last log line (docs/AGGREGATOR.md, "Logs"; docs/CONTROL.md, "stats").
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "tests/vm_process_fixture.h"

namespace gpuvm::process_testing {
namespace {

using namespace std::chrono_literals;

constexpr int kActs = 4000;

// Lines of `text` (empty ones aside) that contain `containing`.
size_t CountLines(const std::string& text, const std::string& containing = "") {
  size_t n = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end > start && text.substr(start, end - start).find(containing) != std::string::npos) ++n;
    start = end + 1;
  }
  return n;
}

class RefusalFloodTest : public AggregatorProcessTest {
 protected:
  void SetUp() override { StartAggregator("flood", {}); }
};

TEST_F(RefusalFloodTest, TheLogStaysBoundedAndTheCountersHaveEveryRefusal) {
  Process vm = StartVm({"--mode", "fv-naive", "--name", "flood"},
                       {"flood", std::to_string(kActs), dir_}, "vm");
  const auto deadline = Clock::now() + 120s;
  while (!Exists(dir_ + "/flooded")) {
    ASSERT_FALSE(vm.Exited()) << vm.Logs();
    ASSERT_LT(Clock::now(), deadline) << vm.Logs();
    std::this_thread::sleep_for(5ms);
  }
  // The counters while the VM runs.
  Process ctl = Process::Start({GPUVM_CTL_BIN, "--socket", socket_ + "-control", "stats", "--json"},
                               dir_ + "/ctl");
  ASSERT_TRUE(ctl.Wait(30s)) << ctl.Logs();
  ASSERT_EQ(ctl.exit_code(), 0) << ctl.Logs();
  const std::string stats = ctl.out();
  EXPECT_NE(stats.find("\"name\":\"flood\",\"mode\":\"fv-naive\""), std::string::npos) << stats;
  EXPECT_NE(stats.find("\"refused\":{\"mmio\":0,\"registers\":" + std::to_string(kActs) +
                       ",\"memory\":0,\"channels\":0,\"playlists\":" + std::to_string(kActs)),
            std::string::npos)
      << stats;

  std::ofstream(dir_ + "/done") << "done\n";
  ASSERT_TRUE(vm.Wait(60s)) << vm.Logs();
  EXPECT_EQ(vm.exit_code(), 0) << vm.Logs();
  EXPECT_NE(vm.out().find("PASSED flood"), std::string::npos) << vm.Logs();
  // The VM's session has ended (its line is the last one of it).
  const auto logged = Clock::now() + 30s;
  while (AggregatorLog().find("session ended") == std::string::npos && Clock::now() < logged) {
    std::this_thread::sleep_for(10ms);
  }
  const std::string log = AggregatorLog();
  // 8,000 refusals: each kind's first 10 one by one, then one summary per second and kind.
  EXPECT_EQ(CountLines(log, "refused 64 KiB large pages"), 10u) << log;
  EXPECT_EQ(CountLines(log, "refused a playlist"), 10u) << log;
  EXPECT_GE(CountLines(log, "more refused BAR0 register writes in the last"), 1u) << log;
  EXPECT_GE(CountLines(log, "more refused playlists in the last"), 1u) << log;
  EXPECT_LT(CountLines(log), 100u) << log;
  EXPECT_LT(log.size(), 20000u) << log;
  // The summaries add up to every refusal: 10 one by one plus the rest counted.
  EXPECT_NE(log.find("refused: 4,000 BAR0 register writes, 4,000 playlists"), std::string::npos)
      << log;
}

}  // namespace
}  // namespace gpuvm::process_testing
