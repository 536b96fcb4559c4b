// Isolation when a device model dies under BAR remap, with real processes: gpuvm-aggregator on the
// software GPU, local VMs started by gpuvm-vm in fv-bar-remap/fv-optimized, the guest program
// tests/fv_orphan_guest.cc.
//
// VM A's aperture pages are mapped straight into its guest (ranges published on the control page,
// A's own VRAM memfd in the guest). Its gpuvm-dm is killed with SIGKILL while its launcher is
// stopped, so the guest outlives it, orphaned but running, with those ranges still mapped; the
// aggregator tears A down and gives A's VRAM back to the pool at once — per-VM backing: the machine
// pages are re-backed by the GPU's own memory before anyone else gets them, so A's file, all the
// orphan holds, reaches none of them (no quarantine is needed, and none is logged). VM B then gets
// A's machine pages (with static slices the test checks B's slice is A's) and fills 16 MiB with a
// pattern. A's guest reads, overwrites and reads again everything it can still reach without a
// trap: it must never see B's pattern, and B's VRAM must come back unchanged. Before per-VM
// backing the guest mapped the GPU's whole VRAM memfd and only the quarantine kept B off A's
// pages; with that gone as well, both checks fail.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "tests/vm_process_fixture.h"

namespace {

using gpuvm::process_testing::Clock;
using gpuvm::process_testing::Exists;
using gpuvm::process_testing::Process;
using gpuvm::process_testing::ReadFile;

// The parameter: the aggregator's --fv-vram-policy.
class FvOrphanIsolationTest : public gpuvm::process_testing::AggregatorProcessTest,
                              public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    StartAggregator("fvorphan", {"--vram-mib", "512", "--compute-workers", "1", "--fv-vram-policy",
                                 GetParam()});
  }
  // Where the counter line of the VM named `name` says its static slice is ("" if none says).
  std::string SliceOf(const std::string& name) {
    std::istringstream log(AggregatorLog());
    std::string line;
    while (std::getline(log, line)) {
      const size_t at = line.find(" MiB at ");
      if (line.find(" name=" + name + " ") == std::string::npos || at == std::string::npos)
        continue;
      const size_t begin = at + 8;
      return line.substr(begin, line.find_first_of(",; ", begin) - begin);
    }
    return "";
  }
};

TEST_P(FvOrphanIsolationTest, AGuestWhoseDeviceModelDiedCannotReachTheNextVmsVram) {
  // A VM that runs throughout (its VRAM checked at the end too): A is not the last fv VM, so the
  // GPU is not reset under A's guest (the software GPU would start over with fresh VRAM; a real
  // board keeps its VRAM).
  const std::string holder_dir = dir_ + "/holder";
  ASSERT_EQ(::mkdir(holder_dir.c_str(), 0755), 0);
  Process holder = StartVm({"--mode", "fv-optimized", "--name", "holder", "--vram-mib", "64"},
                           {"victim", holder_dir}, "holder");
  ASSERT_TRUE(WaitForFile(holder_dir + "/victim-ready", holder, std::chrono::seconds(90)))
      << holder.Logs();
  const std::string pids = dir_ + "/orphan.pids";
  Process a = StartVm(
      {"--mode", "fv-bar-remap", "--name", "orphan", "--vram-mib", "64", "--pid-file", pids},
      {"orphan", dir_}, "orphan");
  // Whatever happens below, A's (stopped) launcher and its guest do not outlive the test.
  struct KillGroup {
    Process* p;
    ~KillGroup() {
      if (!p->Exited()) (void)p->Wait(std::chrono::seconds(0));
    }
  } kill_a{&a};
  ASSERT_TRUE(WaitForFile(dir_ + "/orphan-ready", a, std::chrono::seconds(90))) << a.Logs();
  ASSERT_TRUE(WaitForFile(pids, a, std::chrono::seconds(10))) << a.Logs();
  std::istringstream in(ReadFile(pids));
  std::string word;
  pid_t dm = 0, guest = 0;
  while (in >> word) {
    if (word == "dm") in >> dm;
    if (word == "guest") in >> guest;
  }
  ASSERT_GT(dm, 0);
  ASSERT_GT(guest, 0);
  // The launcher would kill the guest as soon as its device model dies: stop it first, so the
  // guest lives on with its ranges mapped, as a guest whose dm crashed would.
  ASSERT_EQ(::kill(a.pid, SIGSTOP), 0);
  ASSERT_EQ(::kill(dm, SIGKILL), 0);
  // The aggregator notices (the session's socket breaks) and removes VM A.
  ASSERT_TRUE(WaitForLog("fv-bar-remap, VRAM 64 MiB", std::chrono::seconds(30))) << AggregatorLog();
  const std::string a_slice = SliceOf("orphan");

  Process b = StartVm({"--mode", "fv-optimized", "--name", "victim", "--vram-mib", "64"},
                      {"victim", dir_}, "victim");
  ASSERT_TRUE(WaitForFile(dir_ + "/victim-ready", b, std::chrono::seconds(90))) << b.Logs();
  ASSERT_TRUE(gpuvm::process_testing::Alive(guest)) << "the orphaned guest is gone";
  std::ofstream(dir_ + "/snoop") << "go\n";
  // A's guest output goes to its (stopped) launcher's files.
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (!Exists(dir_ + "/orphan-done") && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const std::string orphan = a.out();
  EXPECT_TRUE(Exists(dir_ + "/orphan-done")) << orphan << a.err();
  EXPECT_NE(orphan.find("orphan: pages "), std::string::npos) << orphan << a.err();
  EXPECT_EQ(orphan.find("orphan: pages 0,"), std::string::npos) << orphan;
  EXPECT_NE(orphan.find(", secret words 0, failed 0"), std::string::npos)
      << "the orphaned guest reached the next VM's VRAM\n"
      << orphan;

  std::ofstream(dir_ + "/check") << "go\n";
  ASSERT_TRUE(b.Wait(std::chrono::seconds(60))) << b.Logs();
  EXPECT_EQ(b.exit_code(), 0) << b.Logs();
  EXPECT_NE(b.out().find("PASSED victim"), std::string::npos) << b.Logs();

  std::ofstream(holder_dir + "/check") << "go\n";
  ASSERT_TRUE(holder.Wait(std::chrono::seconds(60))) << holder.Logs();
  EXPECT_EQ(holder.exit_code(), 0) << holder.Logs();
  EXPECT_NE(holder.out().find("PASSED victim"), std::string::npos) << holder.Logs();

  if (GetParam() == "static") {
    // B's slice is A's old one: the orphan's file once backed exactly the pages B now uses.
    ASSERT_TRUE(WaitForLog(" name=victim ", std::chrono::seconds(30))) << AggregatorLog();
    EXPECT_FALSE(a_slice.empty()) << AggregatorLog();
    EXPECT_EQ(SliceOf("victim"), a_slice) << AggregatorLog();
  }
  // Nothing was held back for the orphan: A's VRAM went back to the pool when A was removed.
  EXPECT_EQ(AggregatorLog().find("quarantine"), std::string::npos) << AggregatorLog();
}

INSTANTIATE_TEST_SUITE_P(Policies, FvOrphanIsolationTest, ::testing::Values("static", "dynamic"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
