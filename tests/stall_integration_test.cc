// Stalls end to end with real processes (issue 13): a process of the stack that stops for seconds
// (SIGSTOP) and comes back resumes where it was, and a guest may run several programs one after
// another in one VM.
//
// StoppedProcessesResumeAndNobodyIsChargedThePause runs the stalls concurrently to keep the wall
// time down (one 15 s pause for all of them), on four fv-optimized VMs of one aggregator:
//   dmstop     its gpuvm-dm is stopped after the first of four madd runs, for the whole pause;
//   gueststop  its guest program is stopped right after launching madd, with the kernel in flight;
//   long       launches the corpus' loop kernel (bench size) and the aggregator itself is stopped
//              while it runs; its GPU time (gpuvm-ctl stats --json) must not contain the pause;
//   twice      a shell script running two programs in a row in one VM, throughout.
// Every VM must finish with correct results, nothing may time out (the dispatcher's poll errors
// stay 0), and the guest whose device model was stopped says what it waited for.
// TwoProgramsInARowInAPtVm: the same two-programs script in a pass-through VM.
//
// Timings are never asserted beyond generous bounds: the pause is 15 s (40 s under sanitizers, with
// max_run 12 s and 30 s), and the GPU-time check compares against the time the kernel took (which
// includes the pause) minus the pause, plus 2 s.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/vm_process_fixture.h"

namespace {

using gpuvm::process_testing::Clock;
using gpuvm::process_testing::Exists;
using gpuvm::process_testing::Process;
using gpuvm::process_testing::ReadFile;
using namespace std::chrono_literals;

// Under ASan + UBSan (make asan) the long kernel takes ~12 s of device time on a loaded 2-core
// machine instead of ~1-5 s, so max_run and the pause (which must stay above max_run, see below)
// scale with it.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif
constexpr auto kPause = kSanitized ? 40s : 15s;
constexpr auto kMaxRun = kSanitized ? 30s : 12s;

class StallIntegrationTest : public gpuvm::process_testing::AggregatorProcessTest {
 protected:
  Process Vm(const std::string& mode, const std::string& name,
             const std::vector<std::string>& program) {
    std::vector<std::string> argv = {GPUVM_VM_BIN,
                                     "--aggregator",
                                     socket_,
                                     "--dm",
                                     GPUVM_DM_BIN,
                                     "--ram-mib",
                                     "256",
                                     "--mode",
                                     mode,
                                     "--name",
                                     name,
                                     "--pid-file",
                                     dir_ + "/" + name + ".pids",
                                     "--"};
    argv.insert(argv.end(), program.begin(), program.end());
    return Process::Start(argv, dir_ + "/" + name);
  }
  // The two-programs script: two guest programs one after another in one VM.
  static std::vector<std::string> TwoPrograms() {
    const std::string guest = GPUVM_GUEST_BIN;
    return {"/bin/sh", "-c", guest + " case madd && " + guest + " case vector_add"};
  }
  // Waits up to 120 s for `path`; false if `vm` ended first or it never came.
  static bool AwaitFile(const std::string& path, Process& vm) {
    const auto deadline = Clock::now() + 120s;
    while (Clock::now() < deadline) {
      if (Exists(path)) return true;
      if (vm.Exited()) return false;
      std::this_thread::sleep_for(5ms);
    }
    return false;
  }
  // "dm <pid>" or "guest <pid>" from gpuvm-vm's pid file.
  pid_t PidOf(const std::string& vm, const std::string& who) {
    std::ifstream in(dir_ + "/" + vm + ".pids");
    std::string key;
    pid_t pid = -1;
    while (in >> key >> pid) {
      if (key == who) return pid;
    }
    return -1;
  }
  std::string Ctl(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {GPUVM_CTL_BIN, "--socket", socket_ + "-control"};
    argv.insert(argv.end(), args.begin(), args.end());
    Process c = Process::Start(argv, dir_ + "/ctl" + std::to_string(ctl_runs_++));
    EXPECT_TRUE(c.Wait(60s)) << c.Logs();
    EXPECT_EQ(c.exit_code(), 0) << c.Logs();
    return c.out();
  }
  // The number after "key": in the JSON object of the VM whose name starts with `vm` (end it with
  // a quote for the whole name).
  static int64_t VmField(const std::string& json, const std::string& vm, const std::string& key) {
    const size_t at = json.find("\"name\":\"" + vm);
    if (at == std::string::npos) return -1;
    const size_t field = json.find("\"" + key + "\":", at);
    if (field == std::string::npos) return -1;
    return std::strtoll(json.c_str() + field + key.size() + 3, nullptr, 10);
  }
  int ctl_runs_ = 0;
};

TEST_F(StallIntegrationTest, StoppedProcessesResumeAndNobodyIsChargedThePause) {
  // max_run above the long kernel's own time on a loaded host (~5 s here), and below the pause: a
  // max_run counted in wall time would expire over the pause.
  StartAggregator("stall", {"--vram-mib", "512", "--compute-workers", "2", "--max-run-ms",
                            std::to_string(std::chrono::milliseconds(kMaxRun).count())});
  const std::string guest = GPUVM_GUEST_BIN;
  std::ofstream(dir_ + "/now") << "go\n";
  // dmstop runs madd once, waits for dmstop.go, then three more times; gueststop launches its madd
  // and says so right away: each is stopped there, mid-run.
  Process dmstop = Vm("fv-optimized", "dmstop",
                      {guest, "repeat", "madd", "4", dir_ + "/dmstop.ready", dir_ + "/dmstop.go"});
  Process gueststop = Vm(
      "fv-optimized", "gueststop",
      {guest, "staged", "madd", "test", dir_ + "/now", dir_ + "/gueststop.ready", dir_ + "/exit"});
  Process longvm =
      Vm("fv-optimized", "long",
         {guest, "staged", "loop", "bench", dir_ + "/go", dir_ + "/long.ready", dir_ + "/exit"});
  Process twice = Vm("fv-optimized", "twice", TwoPrograms());

  // The device model of one VM stops (its guest's next accesses wait for it) and the guest program
  // of another stops with its kernel in flight...
  ASSERT_TRUE(AwaitFile(dir_ + "/dmstop.ready", dmstop)) << dmstop.Logs();
  const pid_t dm = PidOf("dmstop", "dm");
  ASSERT_GT(dm, 0);
  ASSERT_EQ(::kill(dm, SIGSTOP), 0);
  std::ofstream(dir_ + "/dmstop.go") << "go\n";
  ASSERT_TRUE(AwaitFile(dir_ + "/gueststop.ready", gueststop)) << gueststop.Logs();
  const pid_t stopped_guest = PidOf("gueststop", "guest");
  ASSERT_GT(stopped_guest, 0);
  ASSERT_EQ(::kill(stopped_guest, SIGSTOP), 0);
  // ... then the aggregator, while the long kernel runs.
  std::ofstream(dir_ + "/go") << "go\n";
  ASSERT_TRUE(AwaitFile(dir_ + "/long.ready", longvm)) << longvm.Logs();
  std::this_thread::sleep_for(300ms);  // the dispatcher has started it
  ASSERT_EQ(::kill(aggregator_.pid, SIGSTOP), 0);
  std::this_thread::sleep_for(kPause);
  ASSERT_EQ(::kill(aggregator_.pid, SIGCONT), 0);
  ASSERT_EQ(::kill(dm, SIGCONT), 0);
  ASSERT_EQ(::kill(stopped_guest, SIGCONT), 0);

  // The long kernel finishes right, and its VM is charged what the GPU did, not the pause: the
  // kernel's own time (launch to checked) includes the whole pause.
  const auto deadline = Clock::now() + 180s;
  while (longvm.out().find("VERIFIED") == std::string::npos && !longvm.Exited() &&
         Clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  const std::string out = longvm.out();
  const size_t verified = out.find("VERIFIED ");
  ASSERT_NE(verified, std::string::npos) << longvm.Logs();
  const double kernel_s = std::strtod(out.c_str() + verified + 9, nullptr);
  ASSERT_GE(kernel_s, std::chrono::duration<double>(kPause).count())
      << "the aggregator's stop did not overlap the long kernel";
  const std::string stats = Ctl({"stats", "--json"});
  const int64_t gpu_ns = VmField(stats, "long\"", "gpu_time_ns");
  ASSERT_GT(gpu_ns, 0) << stats;
  // The kernel had the GPU for at most kernel_s minus the pause (the engine stopped with the
  // aggregator); 2 s of slack for whatever else the VM ran.
  EXPECT_LT(double(gpu_ns) / 1e9, kernel_s - std::chrono::duration<double>(kPause).count() + 2)
      << "the VM was charged the aggregator's pause (kernel " << kernel_s << " s)\n"
      << stats;
  EXPECT_NE(stats.find("\"poll_errors\":0"), std::string::npos)
      << "a submission timed out over the pause\n"
      << stats;
  std::ofstream(dir_ + "/exit") << "exit\n";

  for (auto* vm : {&dmstop, &gueststop, &longvm, &twice}) {
    ASSERT_TRUE(vm->Wait(180s)) << vm->Logs();
    EXPECT_EQ(vm->exit_code(), 0) << vm->Logs();
  }
  EXPECT_NE(dmstop.out().find("PASSED madd x4"), std::string::npos) << dmstop.Logs();
  EXPECT_NE(gueststop.out().find("PASSED madd"), std::string::npos) << gueststop.Logs();
  EXPECT_NE(longvm.out().find("PASSED loop"), std::string::npos) << longvm.Logs();
  EXPECT_NE(twice.out().find("PASSED madd"), std::string::npos) << twice.Logs();
  EXPECT_NE(twice.out().find("PASSED vector_add"), std::string::npos) << twice.Logs();
  // What waited says for whom and why.
  EXPECT_NE(dmstop.err().find("has not answered"), std::string::npos) << dmstop.Logs();
  EXPECT_NE(dmstop.err().find("is alive"), std::string::npos) << dmstop.Logs();
}

TEST_F(StallIntegrationTest, TwoProgramsInARowInAPtVm) {
  StartAggregator("stall", {});
  Process twice = Vm("pt", "twice", TwoPrograms());
  ASSERT_TRUE(twice.Wait(180s)) << twice.Logs();
  EXPECT_EQ(twice.exit_code(), 0) << twice.Logs();
  EXPECT_NE(twice.out().find("PASSED madd"), std::string::npos) << twice.Logs();
  EXPECT_NE(twice.out().find("PASSED vector_add"), std::string::npos) << twice.Logs();
}

// A dead aggregator stays fail-stop: every device model sees its socket close at once (also one
// waiting for a reply in the fast lane: no reply timer is left to notice it), every VM ends with a
// clear error, and a restarted aggregator serves new VMs.
TEST_F(StallIntegrationTest, AKilledAggregatorEndsItsVmsAndARestartedOneServesNewOnes) {
  StartAggregator("stall", {"--vram-mib", "256"});
  const std::string guest = GPUVM_GUEST_BIN;
  std::vector<Process> vms;
  for (int i = 0; i < 2; ++i) {
    const std::string name = "hold" + std::to_string(i);
    vms.push_back(Vm("fv-lazy", name, {guest, "hold", dir_ + "/" + name + ".ready"}));
  }
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(AwaitFile(dir_ + "/hold" + std::to_string(i) + ".ready", vms[i])) << vms[i].Logs();
  }
  ASSERT_EQ(::kill(aggregator_.pid, SIGKILL), 0);
  ASSERT_TRUE(aggregator_.Wait(30s));
  for (Process& vm : vms) {
    ASSERT_TRUE(vm.Wait(60s)) << "a VM outlived its aggregator\n" << vm.Logs();
    EXPECT_EQ(vm.exit_code(), 1) << vm.Logs();
    EXPECT_NE(vm.err().find("aggregator"), std::string::npos) << vm.Logs();
  }
  StartAggregator("stall", {"--vram-mib", "256"});
  Process next = Vm("fv-lazy", "next", {guest, "case", "madd"});
  ASSERT_TRUE(next.Wait(180s)) << next.Logs();
  EXPECT_EQ(next.exit_code(), 0) << next.Logs();
  EXPECT_NE(next.out().find("PASSED madd"), std::string::npos) << next.Logs();
}

}  // namespace
