// Pass-through end to end with real processes: gpuvm-aggregator owns the software GPU; gpuvm-vm
// starts local VMs (guest RAM, ioreq page, gpuvm-dm) and runs gpuvm-pt-guest inside them with
// GPUVM_BUS=local, so every BAR access of the unmodified guest driver traps through gpuvm-dm to the
// aggregator. Checked: nop and madd give correct results; a second pt VM is refused with a clear
// error; killing the guest, its device model or its launcher mid-run leaves the aggregator serving
// the next VM; the next VM cannot read the previous one's VRAM.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/vm_process_fixture.h"

namespace {

using gpuvm::process_testing::Alive;
using gpuvm::process_testing::Clock;
using gpuvm::process_testing::Exists;
using gpuvm::process_testing::Process;
using gpuvm::process_testing::ReadFile;

class PtIntegrationTest : public gpuvm::process_testing::AggregatorProcessTest {
 protected:
  void SetUp() override { StartAggregator("pt", {"--vram-mib", "512"}); }

  std::vector<std::string> VmCommand(const std::vector<std::string>& guest,
                                     const std::string& pid_file = "") {
    std::vector<std::string> flags;
    if (!pid_file.empty()) flags = {"--pid-file", pid_file};
    return AggregatorProcessTest::VmCommand(flags, guest);
  }

  Process RunVm(const std::vector<std::string>& guest, const std::string& name) {
    Process p = Process::Start(VmCommand(guest), dir_ + "/" + name);
    EXPECT_TRUE(p.Wait(std::chrono::seconds(120))) << name << " hung\n" << p.Logs();
    return p;
  }

  // Runs `guest` in a VM, retrying while the GPU still belongs to a VM the aggregator has not
  // finished tearing down (it learns of a killed device model from its closed socket, a moment
  // after the kill).
  Process RunVmWhenFree(const std::vector<std::string>& guest, const std::string& name) {
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    for (int attempt = 0;; ++attempt) {
      Process p = RunVm(guest, name + "-" + std::to_string(attempt));
      if (p.exit_code() == 0 || p.err().find("refused") == std::string::npos ||
          Clock::now() > deadline) {
        return p;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  // Starts a VM that holds the GPU (launching empty kernels) and waits until it has run one.
  // Starts a holding VM, SIGKILLs its `which` process ("guest" or "dm") mid-run and returns the
  // holder once it has exited (a fatal failure when either step goes wrong).
  Process KillMidRun(const char* which) {
    std::string pids;
    Process holder = StartHolder("victim", &pids);
    const pid_t victim = PidOf(pids, which);
    if (victim <= 0) {
      ADD_FAILURE() << "no " << which << " pid in " << ReadFile(pids);
      return holder;
    }
    ::kill(victim, SIGKILL);
    if (!holder.Wait(std::chrono::seconds(60))) ADD_FAILURE() << holder.Logs();
    return holder;
  }

  Process StartHolder(const std::string& name, std::string* pid_file) {
    const std::string ready = dir_ + "/" + name + ".ready";
    *pid_file = dir_ + "/" + name + ".pids";
    Process p = Process::Start(VmCommand({"hold", ready}, *pid_file), dir_ + "/" + name);
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (!Exists(ready) && Clock::now() < deadline) {
      int status;
      if (::waitpid(p.pid, &status, WNOHANG) == p.pid) {
        p.status = status;
        ADD_FAILURE() << "the holding VM exited early: " << p.Logs();
        return p;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_TRUE(Exists(ready)) << p.Logs();
    return p;
  }

  static pid_t PidOf(const std::string& pid_file, const std::string& who) {
    std::istringstream in(ReadFile(pid_file));
    std::string name;
    pid_t pid = -1;
    while (in >> name >> pid) {
      if (name == who) return pid;
    }
    return -1;
  }
};

TEST_F(PtIntegrationTest, RunsNop) {
  Process p = RunVm({"nop", "20"}, "nop");
  EXPECT_EQ(p.exit_code(), 0) << p.Logs();
  EXPECT_NE(p.out().find("PASSED nop x20"), std::string::npos) << p.Logs();
  EXPECT_NE(p.out().find("gpuvm local"), std::string::npos) << "not on the trapping bus\n"
                                                            << p.Logs();
}

TEST_F(PtIntegrationTest, RunsMaddWithCorrectResults) {
  Process p = RunVm({"case", "madd"}, "madd");
  EXPECT_EQ(p.exit_code(), 0) << p.Logs();
  EXPECT_NE(p.out().find("PASSED madd"), std::string::npos) << p.Logs();
  // pt remaps the apertures' VRAM pages (aggregator/pt_gpu.h): gpuvm-dm says "BAR remap: N ranges
  // mapped, U unmapped, X refused" with N > 0 and nothing refused, and madd's results (its copies
  // went through those mappings) are right.
  const std::string err = p.err();
  const size_t at = err.find("BAR remap: ");
  ASSERT_NE(at, std::string::npos) << p.Logs();
  EXPECT_GT(std::stoul(err.substr(at + 11)), 0u) << p.Logs();
  EXPECT_NE(err.find(" 0 refused", at), std::string::npos) << p.Logs();
}

TEST_F(PtIntegrationTest, SecondPtVmIsRefusedWithAClearError) {
  std::string pids;
  Process holder = StartHolder("holder", &pids);
  Process second = RunVm({"nop"}, "second");
  EXPECT_NE(second.exit_code(), 0) << second.Logs();
  EXPECT_NE(second.err().find("a second pt VM is refused"), std::string::npos) << second.Logs();
  ::kill(holder.pid, SIGTERM);  // gpuvm-vm passes it to the guest and tears the VM down
  ASSERT_TRUE(holder.Wait(std::chrono::seconds(60))) << holder.Logs();
  Process third = RunVm({"nop"}, "third");
  EXPECT_EQ(third.exit_code(), 0) << third.Logs();
}

TEST_F(PtIntegrationTest, KillingTheGuestMidRunLeavesTheAggregatorServing) {
  Process holder = KillMidRun("guest");
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(holder.exit_code(), 128 + SIGKILL) << holder.Logs();
  Process next = RunVm({"case", "madd"}, "next");  // no retry: the launcher waited for teardown
  EXPECT_EQ(next.exit_code(), 0) << next.Logs();
}

TEST_F(PtIntegrationTest, KillingTheDeviceModelMidRunLeavesTheAggregatorServing) {
  Process holder = KillMidRun("dm");
  ASSERT_FALSE(HasFailure());
  EXPECT_NE(holder.exit_code(), 0);
  EXPECT_NE(holder.err().find("device model died"), std::string::npos) << holder.Logs();
  Process next = RunVmWhenFree({"case", "madd"}, "next");
  EXPECT_EQ(next.exit_code(), 0) << next.Logs();
}

TEST_F(PtIntegrationTest, KillingTheLauncherTakesItsVmDown) {
  std::string pids;
  Process holder = StartHolder("victim", &pids);
  const pid_t guest = PidOf(pids, "guest");
  const pid_t dm = PidOf(pids, "dm");
  ::kill(holder.pid, SIGKILL);
  ASSERT_TRUE(holder.Wait(std::chrono::seconds(10)));
  // Its children die with it (parent-death signals): nothing keeps the GPU.
  for (pid_t pid : {guest, dm}) {
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (Alive(pid) && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_FALSE(Alive(pid)) << "pid " << pid << " outlived its launcher";
  }
  Process next = RunVmWhenFree({"nop"}, "next");
  EXPECT_EQ(next.exit_code(), 0) << next.Logs();
}

TEST_F(PtIntegrationTest, TheNextOwnerCannotReadThePreviousOnesVram) {
  Process secret = RunVm({"secret"}, "secret");
  ASSERT_EQ(secret.exit_code(), 0) << secret.Logs();
  Process snoop = RunVm({"snoop"}, "snoop");
  EXPECT_EQ(snoop.exit_code(), 0) << snoop.Logs();
  EXPECT_NE(snoop.out().find("PASSED snoop"), std::string::npos) << snoop.Logs();
}

}  // namespace
