// Para-virtualization end to end with real processes (docs/PARAVIRT.md): gpuvm-aggregator owns the
// software GPU; gpuvm-vm starts local VMs with --mode pv-naive / pv-multicall, each running
// gpuvm-pt-guest on the unmodified guest driver, which finds the PV window behind its trapping bus
// and writes its page tables with calls through gpuvm-dm. Checked: nop and madd correct in each pv
// mode with the calls and doorbells gpuvm-dm reports (one doorbell per call in pv-naive, fewer in
// pv-multicall) and the aggregator's per-VM counters; pv and fv VMs at once, all correct; gpuvm-ctl
// list shows a running pv VM's mode.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/vm_process_fixture.h"

namespace {

using gpuvm::process_testing::Clock;
using gpuvm::process_testing::Process;

// The last "name=N" in `text`, or -1.
long long Counter(const std::string& text, const std::string& name) {
  const size_t at = text.rfind(name + "=");
  return at == std::string::npos ? -1 : std::stoll(text.substr(at + name.size() + 1));
}

class PvIntegrationTest : public gpuvm::process_testing::AggregatorProcessTest {
 protected:
  void SetUp() override { StartAggregator("pv", {"--vram-mib", "512", "--compute-workers", "2"}); }
  Process StartVm(const std::string& mode, const std::string& name,
                  const std::vector<std::string>& guest, uint64_t vram_mib = 64) {
    return AggregatorProcessTest::StartVm(
        {"--mode", mode, "--name", name, "--vram-mib", std::to_string(vram_mib)}, guest, name);
  }
};

TEST_F(PvIntegrationTest, NopAndMaddInBothModesWithTheirCallsAndDoorbells) {
  for (const std::string mode : {"pv-naive", "pv-multicall"}) {
    SCOPED_TRACE(mode);
    Process nop = StartVm(mode, "nop", {"nop", "3"});
    ASSERT_TRUE(nop.Wait(std::chrono::seconds(120))) << nop.Logs();
    EXPECT_EQ(nop.exit_code(), 0) << nop.Logs();
    EXPECT_NE(nop.out().find("PASSED nop x3"), std::string::npos) << nop.Logs();
    Process madd = StartVm(mode, "madd", {"case", "madd"});
    ASSERT_TRUE(madd.Wait(std::chrono::seconds(120))) << madd.Logs();
    EXPECT_EQ(madd.exit_code(), 0) << madd.Logs();
    EXPECT_NE(madd.out().find("PASSED madd"), std::string::npos) << madd.Logs();
    // gpuvm-dm's hook line: the calls the aggregator applied and the doorbells the guest rang.
    const std::string err = madd.err();
    const long long calls = Counter(err, "pv_calls"), doorbells = Counter(err, "pv_doorbells");
    EXPECT_GT(calls, 10) << err;
    if (mode == "pv-naive") {
      EXPECT_EQ(doorbells, calls) << err;
    } else {
      EXPECT_GT(doorbells, 0) << err;
      EXPECT_LT(doorbells * 2, calls) << err;
    }
    EXPECT_GT(Counter(err, "mmio_exits"), 0) << err;
    EXPECT_NE(err.find("refused: none"), std::string::npos) << err;
  }
  // The aggregator's per-VM lines: the mode, a static slice, calls applied, nothing refused, no
  // shadow scan.
  ASSERT_TRUE(WaitForLog("'madd' (local domain", std::chrono::seconds(10)));
  ASSERT_TRUE(WaitForLog("pv-multicall, VRAM 64 MiB at", std::chrono::seconds(10)));
  const std::string log = AggregatorLog();
  EXPECT_NE(log.find("pv-naive, VRAM 64 MiB at"), std::string::npos) << log;
  EXPECT_EQ(log.find("para-virtual call refused"), std::string::npos) << log;
  const size_t line = log.find("pv-multicall, VRAM 64 MiB at");
  const std::string counters = log.substr(line, log.find('\n', line) - line);
  EXPECT_NE(counters.find("scans 0 "), std::string::npos) << counters;
  EXPECT_NE(counters.find("(refused 0)"), std::string::npos) << counters;
  EXPECT_NE(counters.find("(batches refused 0)"), std::string::npos) << counters;
}

// Two programs one after another in one pv VM (what the Xen test bed's guest does): each is a new
// driver instance that attaches the same directories at the same addresses; the registration of
// its call area releases what the last program left attached (aggregator/pv_tables.h).
TEST_F(PvIntegrationTest, TwoProgramsInARowInOneVm) {
  const std::string guest = GPUVM_GUEST_BIN;
  for (const std::string mode : {"pv-naive", "pv-multicall"}) {
    SCOPED_TRACE(mode);
    std::vector<std::string> argv =
        VmCommand({"--mode", mode, "--name", "twice-" + mode, "--vram-mib", "64"}, {});
    argv.back() = "/bin/sh";  // the guest: a script running two programs
    argv.push_back("-c");
    argv.push_back(guest + " nop 3 && " + guest + " case madd");
    Process twice = Process::Start(argv, dir_ + "/twice-" + mode);
    ASSERT_TRUE(twice.Wait(std::chrono::seconds(180))) << twice.Logs();
    EXPECT_EQ(twice.exit_code(), 0) << twice.Logs();
    EXPECT_NE(twice.out().find("PASSED nop x3"), std::string::npos) << twice.Logs();
    EXPECT_NE(twice.out().find("PASSED madd"), std::string::npos) << twice.Logs();
  }
  EXPECT_EQ(AggregatorLog().find("para-virtual call refused"), std::string::npos)
      << AggregatorLog();
}

TEST_F(PvIntegrationTest, PvAndFvVmsAtOnceAllCorrect) {
  struct Vm {
    const char* mode;
    const char* kernel;
    uint64_t mib;
  };
  const Vm vms[] = {{"pv-naive", "madd", 48},
                    {"pv-multicall", "mmul", 64},
                    {"fv-optimized", "fmmul", 80},
                    {"pv-multicall", "backprop", 32}};
  std::vector<Process> running;
  for (size_t i = 0; i < std::size(vms); ++i) {
    running.push_back(
        StartVm(vms[i].mode, "vm" + std::to_string(i), {"case", vms[i].kernel}, vms[i].mib));
  }
  for (size_t i = 0; i < running.size(); ++i) {
    Process& p = running[i];
    ASSERT_TRUE(p.Wait(std::chrono::seconds(240))) << i << " hung\n" << p.Logs();
    EXPECT_EQ(p.exit_code(), 0) << i << "\n" << p.Logs();
    EXPECT_NE(p.out().find(std::string("PASSED ") + vms[i].kernel), std::string::npos) << i << "\n"
                                                                                       << p.Logs();
    EXPECT_EQ(Counter(p.err(), "pv_calls") > 0, std::string(vms[i].mode).rfind("pv", 0) == 0)
        << i << "\n"
        << p.err();
  }
}

TEST_F(PvIntegrationTest, ControlListShowsTheRunningPvVmsMode) {
  const std::string ready = dir_ + "/held-ready";
  Process vm = StartVm("pv-multicall", "held", {"hold", ready});
  ASSERT_TRUE(WaitForFile(ready, vm, std::chrono::seconds(120))) << vm.Logs();
  // The aggregator's control socket is its VM socket's name plus "-control" (docs/CONTROL.md).
  for (const bool json : {false, true}) {
    std::vector<std::string> argv = {GPUVM_CTL_BIN, "--socket", socket_ + "-control"};
    argv.push_back(json ? "stats" : "list");
    if (json) argv.push_back("--json");
    Process ctl = Process::Start(argv, dir_ + (json ? "/ctl-json" : "/ctl"));
    ASSERT_TRUE(ctl.Wait(std::chrono::seconds(30))) << ctl.Logs();
    EXPECT_EQ(ctl.exit_code(), 0) << ctl.Logs();
    const std::string want =
        json ? R"("name":"held","mode":"pv-multicall")" : "held            pv-multicall  64 MiB";
    EXPECT_NE(ctl.out().find(want), std::string::npos) << ctl.Logs();
  }
  ::kill(-vm.pid, SIGTERM);
  vm.Wait(std::chrono::seconds(60));
}

}  // namespace
