// Runaway GPU work end to end with real processes (issue 18): gpuvm-aggregator, fv VMs (gpuvm-vm,
// gpuvm-dm, gpuvm-fairness-guest as the guest program) and gpuvm-ctl, the operator's controls of
// docs/SCHEDULER.md "Pause, kernel limit, kill-work":
//
//   KillWorkStopsAnEndlessKernelAndTheVmRunsOn   a VM waits on a kernel that never ends
//       (gpuvm-fairness-guest endless-sync); paused, the kernel is charged nothing, resumed it runs
//       on; then `gpuvm-ctl kill-work` fails it: the guest program's cuCtxSynchronize returns
//       CUDA_ERROR_LAUNCH_FAILED, its next calls return at once, the next program in the same VM
//       runs correctly; a second VM computes correctly throughout.
//   KernelLimitStopsAnEndlessKernel              the same stopped by the VM's kernel limit
//       (gpuvm-ctl set-kernel-limit; the aggregator's --kernel-limit-ms default shown in list):
//       CUDA_ERROR_LAUNCH_TIMEOUT, one log line with the VM, channel, run time and limit.
//   APausedVmMakesNoProgressAndCompletesAfterResume  a VM looping madd is paused: its GPU time
//       and completions stay still while paused, `list` says paused, bad requests are refused;
//       resumed, it completes with correct results; the other VM ran on.
//
// Nothing about timing is asserted: states, counters and outputs, with generous bounded waits.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/vm_process_fixture.h"

namespace {

using gpuvm::process_testing::Clock;
using gpuvm::process_testing::Process;
using namespace std::chrono_literals;

class RunawayIntegrationTest : public gpuvm::process_testing::AggregatorProcessTest {
 protected:
  Process Vm(const std::string& name, const std::string& share,
             const std::vector<std::string>& program) {
    std::vector<std::string> argv = {
        GPUVM_VM_BIN, "--aggregator", socket_,  "--dm", GPUVM_DM_BIN, "--ram-mib", "256",
        "--mode",     "fv-optimized", "--name", name,   "--share",    share,       "--"};
    argv.insert(argv.end(), program.begin(), program.end());
    return Process::Start(argv, dir_ + "/" + name);
  }
  // The endless kernel waited for, then (in the same VM) a short correct madd run; then the VM
  // stays until the test writes eater.done (at most 60 s), so that it can still be looked at.
  Process Eater(const std::string& share) {
    const std::string guest = GPUVM_GUEST_BIN;
    return Vm("eater", share,
              {"/bin/sh", "-c",
               guest + " endless-sync 60; echo rc=$?; " + guest +
                   " madd 60 64 --launches 20; i=0; while [ ! -e " + dir_ +
                   "/eater.done ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done"});
  }
  void ReleaseEater(Process& eater) {
    std::ofstream(dir_ + "/eater.done") << "done\n";
    EXPECT_TRUE(eater.Wait(30s)) << eater.Logs();
    EXPECT_EQ(eater.exit_code(), 0) << eater.Logs();
  }
  struct CtlResult {
    int code;
    std::string out, err;
  };
  CtlResult Ctl(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {GPUVM_CTL_BIN, "--socket", socket_ + "-control"};
    argv.insert(argv.end(), args.begin(), args.end());
    Process c = Process::Start(argv, dir_ + "/ctl" + std::to_string(ctl_runs_++));
    EXPECT_TRUE(c.Wait(60s)) << c.Logs();
    return {c.exit_code(), c.out(), c.err()};
  }
  // The value after "key": in the stats JSON object of the VM named `vm` (-1: not there; a
  // boolean reads 1 for true, 0 for false).
  int64_t VmField(const std::string& vm, const std::string& key) {
    const std::string json = Ctl({"stats", "--json"}).out;
    const size_t at = json.find("\"name\":\"" + vm + "\"");
    if (at == std::string::npos) return -1;
    const size_t field = json.find("\"" + key + "\":", at);
    if (field == std::string::npos) return -1;
    const char* value = json.c_str() + field + key.size() + 3;
    if (std::string_view(value).starts_with("true")) return 1;
    if (std::string_view(value).starts_with("false")) return 0;
    return std::strtoll(value, nullptr, 10);
  }
  // Waits up to `timeout` for `p`'s stdout to contain `text` while it runs.
  static bool WaitForOutput(Process& p, const std::string& text, std::chrono::seconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (p.out().find(text) == std::string::npos) {
      if (Clock::now() > deadline || p.Exited()) return p.out().find(text) != std::string::npos;
      std::this_thread::sleep_for(20ms);
    }
    return true;
  }
  // Waits until VM `vm` has been charged GPU time (its work is on the GPU).
  bool WaitForGpuTime(const std::string& vm, std::chrono::seconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (VmField(vm, "gpu_time_ns") <= 0) {
      if (Clock::now() > deadline) return false;
      std::this_thread::sleep_for(50ms);
    }
    return true;
  }
  static void ExpectPassed(Process& p, std::chrono::seconds timeout) {
    ASSERT_TRUE(p.Wait(timeout)) << p.Logs();
    EXPECT_EQ(p.exit_code(), 0) << p.Logs();
    EXPECT_NE(p.out().find("PASSED"), std::string::npos) << p.Logs();
  }
  // The eater's first program stopped with `error`, its later calls returned, and the next
  // program in the same VM passed.
  static void ExpectStoppedThenPassed(Process& eater, const std::string& error) {
    ASSERT_TRUE(WaitForOutput(eater, "PASSED", 60s)) << "the killed guest hangs\n" << eater.Logs();
    const std::string out = eater.out();
    EXPECT_NE(out.find("STOPPED " + error), std::string::npos) << eater.Logs();
    EXPECT_NE(out.find("AFTER synchronize="), std::string::npos) << eater.Logs();
    EXPECT_NE(out.find("rc=3"), std::string::npos) << eater.Logs();
    EXPECT_NE(out.find("madd n=64 launches=20"), std::string::npos) << eater.Logs();
  }
  int ctl_runs_ = 0;
};

TEST_F(RunawayIntegrationTest, KillWorkStopsAnEndlessKernelAndTheVmRunsOn) {
  StartAggregator("runaway", {"--scheduler", "band"});
  Process eater = Eater("50");
  // The victim loops madd for 12 s of wall time: it is running before, during and after the kill.
  Process victim = Vm("victim", "50", {GPUVM_GUEST_BIN, "madd", "12", "64"});
  ASSERT_TRUE(WaitForOutput(eater, "LAUNCHED endless", 60s)) << eater.Logs();
  ASSERT_TRUE(WaitForGpuTime("eater", 30s)) << AggregatorLog();
  // Still waiting for its kernel: nothing else stops it.
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(eater.out().find("STOPPED"), std::string::npos) << eater.Logs();
  // Paused, the endless kernel is switched out: its GPU time stands still; resumed, it runs on.
  ASSERT_EQ(Ctl({"pause", "eater"}).code, 0);
  std::this_thread::sleep_for(300ms);
  const int64_t paused_at = VmField("eater", "gpu_time_ns");
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(VmField("eater", "gpu_time_ns"), paused_at) << "a paused endless kernel was charged";
  ASSERT_EQ(Ctl({"resume", "eater"}).code, 0);
  const auto deadline = Clock::now() + 30s;
  while (VmField("eater", "gpu_time_ns") <= paused_at && Clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_GT(VmField("eater", "gpu_time_ns"), paused_at) << "the resumed kernel did not run";
  EXPECT_EQ(eater.out().find("STOPPED"), std::string::npos) << eater.Logs();

  const CtlResult kill = Ctl({"kill-work", "eater"});
  EXPECT_EQ(kill.code, 0) << kill.err;
  EXPECT_NE(kill.out.find("ok: kill-work eater (killed=1)"), std::string::npos) << kill.out;
  ExpectStoppedThenPassed(eater, "CUDA_ERROR_LAUNCH_FAILED 719");
  ExpectPassed(victim, 60s);
  EXPECT_TRUE(WaitForLog("failed: killed by the operator (kill-work)", 10s)) << AggregatorLog();
  const std::string log = AggregatorLog();
  const size_t line = log.find("failed: killed by the operator");
  const std::string kill_line = log.substr(log.rfind('\n', line) + 1, 300);
  EXPECT_NE(kill_line.find("name=eater"), std::string::npos) << kill_line;
  EXPECT_NE(kill_line.find("GPU work on channel"), std::string::npos) << kill_line;
  EXPECT_EQ(VmField("eater", "killed"), 1);
  // A VM with nothing on the GPU: nothing to kill, nothing changes.
  const CtlResult again = Ctl({"kill-work", "eater"});
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.out.find("(killed=0)"), std::string::npos) << again.out;
  const CtlResult unknown = Ctl({"kill-work", "nobody"});
  EXPECT_EQ(unknown.code, 1);
  EXPECT_NE(unknown.err.find("NotFound"), std::string::npos) << unknown.err;
  ReleaseEater(eater);
}

TEST_F(RunawayIntegrationTest, KernelLimitStopsAnEndlessKernel) {
  StartAggregator("runaway", {"--scheduler", "band", "--kernel-limit-ms", "30000"});
  Process eater = Eater("50");
  Process victim = Vm("victim", "50", {GPUVM_GUEST_BIN, "madd", "8", "64"});
  ASSERT_TRUE(WaitForOutput(eater, "LAUNCHED endless", 60s)) << eater.Logs();
  // Every VM starts with the aggregator's default limit.
  const CtlResult list = Ctl({"list"});
  EXPECT_NE(list.out.find("30000 ms"), std::string::npos) << list.out;
  ASSERT_TRUE(WaitForGpuTime("eater", 30s)) << AggregatorLog();
  const CtlResult bad = Ctl({"set-kernel-limit", "eater", "-5"});
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.err.find("negative"), std::string::npos) << bad.err;
  EXPECT_EQ(VmField("eater", "kernel_limit_ms"), 30000);
  const CtlResult set = Ctl({"set-kernel-limit", "eater", "500"});
  EXPECT_EQ(set.code, 0) << set.err;
  ExpectStoppedThenPassed(eater, "CUDA_ERROR_LAUNCH_TIMEOUT 702");
  ExpectPassed(victim, 60s);
  ASSERT_TRUE(WaitForLog("kernel limit of 500.0 ms", 10s)) << AggregatorLog();
  const std::string log = AggregatorLog();
  const size_t at = log.find("kernel limit of 500.0 ms");
  const std::string limit_line = log.substr(log.rfind('\n', at) + 1, 400);
  EXPECT_NE(limit_line.find("name=eater"), std::string::npos) << limit_line;
  EXPECT_NE(limit_line.find("channel"), std::string::npos) << limit_line;
  EXPECT_NE(limit_line.find("kernel ran "), std::string::npos) << limit_line;
  // Charged GPU time, not wall time: the eater was charged at least the limit.
  EXPECT_GE(VmField("eater", "gpu_time_ns"), 500'000'000) << AggregatorLog();
  EXPECT_EQ(VmField("eater", "killed"), 1);
  ReleaseEater(eater);
}

TEST_F(RunawayIntegrationTest, APausedVmMakesNoProgressAndCompletesAfterResume) {
  StartAggregator("runaway", {"--scheduler", "band"});
  // `worker` runs 3000 launches of madd (a few seconds) however long that takes; `other` loops
  // for 10 s.
  Process worker = Vm("worker", "50", {GPUVM_GUEST_BIN, "madd", "120", "64", "--launches", "3000"});
  Process other = Vm("other", "50", {GPUVM_GUEST_BIN, "madd", "10", "64"});
  ASSERT_TRUE(WaitForGpuTime("worker", 60s)) << AggregatorLog();
  EXPECT_EQ(Ctl({"resume", "worker"}).code, 1);  // not paused: refused
  const CtlResult pause = Ctl({"pause", "worker"});
  ASSERT_EQ(pause.code, 0) << pause.err;
  EXPECT_EQ(Ctl({"pause", "worker"}).code, 1);  // twice: refused
  const CtlResult list = Ctl({"list"});
  const std::string row = list.out.substr(list.out.find("worker"));
  EXPECT_NE(row.substr(0, row.find('\n')).find("paused"), std::string::npos) << list.out;
  std::this_thread::sleep_for(300ms);  // the rest of a device slice is charged by then
  const int64_t gpu_before = VmField("worker", "gpu_time_ns");
  const int64_t completed_before = VmField("worker", "completed");
  const int64_t other_before = VmField("other", "completed");
  EXPECT_EQ(VmField("worker", "paused"), 1);
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(VmField("worker", "gpu_time_ns"), gpu_before) << "a paused VM was charged";
  EXPECT_EQ(VmField("worker", "completed"), completed_before) << "a paused VM ran";
  EXPECT_FALSE(worker.Exited()) << worker.Logs();  // its guest waits, it does not fail
  EXPECT_GT(VmField("other", "completed"), other_before) << "the other VM did not run on";

  const CtlResult resume = Ctl({"resume", "worker"});
  ASSERT_EQ(resume.code, 0) << resume.err;
  EXPECT_EQ(VmField("worker", "paused"), 0);
  ExpectPassed(worker, 120s);  // every launch ran and the result is right (the VM is gone now)
  EXPECT_NE(worker.out().find("launches=3000"), std::string::npos) << worker.Logs();
  ExpectPassed(other, 60s);
}

}  // namespace
