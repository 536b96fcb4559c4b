// Operator control end to end with real processes: gpuvm-aggregator (with a configured share and
// scheduler), a pt VM started by gpuvm-vm that holds the GPU, and gpuvm-ctl talking to the
// aggregator's control socket. Checked: list shows the VM (mode, VRAM, channels, configured share);
// set-share and set-scheduler change things live and list/stats show it; unknown VMs, shares past
// 100 %, negative shares and garbage are refused with a clear error and exit status 1 or 2, and
// change nothing; a control socket of someone else's aggregator is not ours to reach (no test: one
// user only).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/os.h"
#include "tests/vm_process_fixture.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

using gpuvm::process_testing::Process;

struct CtlResult {
  int code = -1;
  std::string out, err;
};

class ControlIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = ::testing::TempDir() + "gpuvm-control-" + std::to_string(::getpid()) + "-" + test;
    ::mkdir(dir_.c_str(), 0755);
    socket_ = "@gpuvm-control-test-" + std::to_string(::getpid()) + "-" + test;
    aggregator_ = Process::Start({GPUVM_AGGREGATOR_BIN, "--socket", socket_, "--vram-mib", "256",
                                  "--scheduler", "credit", "--vm-share", "tenant=35"},
                                 dir_ + "/aggregator");
    const auto deadline = Clock::now() + 30s;
    while (Clock::now() < deadline) {
      if (gpuvm::os::ConnectSeqpacket(socket_ + "-control").ok()) return;
      ASSERT_FALSE(aggregator_.Exited()) << "the aggregator exited: " << aggregator_.Logs();
      std::this_thread::sleep_for(5ms);
    }
    FAIL() << "the aggregator's control socket did not come up: " << aggregator_.Logs();
  }

  void TearDown() override {
    if (holder_.pid > 0 && !holder_.Exited()) {
      ::kill(-holder_.pid, SIGTERM);
      holder_.Wait(30s);
    }
    if (aggregator_.pid > 0) {
      ::kill(aggregator_.pid, SIGTERM);
      EXPECT_TRUE(aggregator_.Wait(30s)) << aggregator_.Logs();
      EXPECT_EQ(aggregator_.exit_code(), 0) << aggregator_.Logs();
    }
    std::error_code ignored;
    if (!HasFailure()) std::filesystem::remove_all(dir_, ignored);
  }

  CtlResult Ctl(std::vector<std::string> args) {
    args.insert(args.begin(), {GPUVM_CTL_BIN, "--socket", socket_ + "-control"});
    Process c = Process::Start(args, dir_ + "/ctl" + std::to_string(ctl_runs_++));
    EXPECT_TRUE(c.Wait(30s)) << c.Logs();
    return {c.exit_code(), c.out(), c.err()};
  }

  // A VM named `name` (pt, or what `vm_flags` say) holding the GPU (launching empty kernels until
  // killed).
  void StartHolder(const std::string& name, std::vector<std::string> vm_flags = {}) {
    const std::string ready = dir_ + "/" + name + ".ready";
    std::vector<std::string> argv = {GPUVM_VM_BIN, "--aggregator", socket_,  "--dm", GPUVM_DM_BIN,
                                     "--ram-mib",  "256",          "--name", name};
    argv.insert(argv.end(), vm_flags.begin(), vm_flags.end());
    argv.insert(argv.end(), {"--", GPUVM_GUEST_BIN, "hold", ready});
    holder_ = Process::Start(argv, dir_ + "/" + name);
    const auto deadline = Clock::now() + 60s;
    while (!std::filesystem::exists(ready) && Clock::now() < deadline) {
      ASSERT_FALSE(holder_.Exited()) << "the VM exited early: " << holder_.Logs();
      std::this_thread::sleep_for(5ms);
    }
    ASSERT_TRUE(std::filesystem::exists(ready)) << holder_.Logs();
  }

  std::string dir_, socket_;
  Process aggregator_, holder_;
  int ctl_runs_ = 0;
};

TEST_F(ControlIntegrationTest, ListsAndChangesSharesLive) {
  CtlResult empty = Ctl({"list"});
  EXPECT_EQ(empty.code, 0) << empty.err;
  EXPECT_NE(empty.out.find("scheduler: credit"), std::string::npos) << empty.out;

  ASSERT_NO_FATAL_FAILURE(StartHolder("tenant"));
  CtlResult list = Ctl({"list"});
  ASSERT_EQ(list.code, 0) << list.err;
  EXPECT_NE(list.out.find("tenant"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("pt"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("256 MiB"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("128"), std::string::npos) << list.out;  // a pt VM has every channel
  EXPECT_NE(list.out.find("35.0%"), std::string::npos) << "the configured share\n" << list.out;

  CtlResult set = Ctl({"set-share", "tenant", "60"});
  EXPECT_EQ(set.code, 0) << set.err;
  set = Ctl({"set-scheduler", "band"});
  EXPECT_EQ(set.code, 0) << set.err;
  list = Ctl({"list"});
  EXPECT_NE(list.out.find("60.0%"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("scheduler: band"), std::string::npos) << list.out;

  CtlResult stats = Ctl({"stats", "--json"});
  ASSERT_EQ(stats.code, 0) << stats.err;
  EXPECT_EQ(stats.out.substr(0, 1), "{") << stats.out;
  EXPECT_NE(stats.out.find("\"policy\":\"band\""), std::string::npos) << stats.out;
  EXPECT_NE(stats.out.find("\"name\":\"tenant\""), std::string::npos) << stats.out;
  EXPECT_NE(stats.out.find("\"share\":60"), std::string::npos) << stats.out;
}

TEST_F(ControlIntegrationTest, AnFvVmStartsWithTheShareInItsConfiguration) {
  ASSERT_NO_FATAL_FAILURE(
      StartHolder("guest", {"--mode", "fv-lazy", "--vram-mib", "64", "--share", "15"}));
  CtlResult list = Ctl({"list"});
  ASSERT_EQ(list.code, 0) << list.err;
  // The name is only the name; the mode, VRAM and share travelled as VM_CONFIG's typed fields.
  EXPECT_NE(list.out.find("guest           fv-lazy       64 MiB"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("15.0%"), std::string::npos) << "the VM's own share\n" << list.out;
  CtlResult set = Ctl({"set-share", "guest", "25"});
  EXPECT_EQ(set.code, 0) << set.err;
  list = Ctl({"list"});
  EXPECT_NE(list.out.find("25.0%"), std::string::npos) << list.out;
}

TEST_F(ControlIntegrationTest, InvalidInputIsRefusedAndChangesNothing) {
  ASSERT_NO_FATAL_FAILURE(StartHolder("tenant"));
  const std::string before = Ctl({"list"}).out;

  CtlResult r = Ctl({"set-share", "nobody", "10"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no VM named 'nobody'"), std::string::npos) << r.err;
  r = Ctl({"set-share", "999", "10"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("NotFound"), std::string::npos) << r.err;
  // Refused locally by gpuvm-ctl (exit 2, usage) before reaching the aggregator.
  r = Ctl({"set-share", "tenant", "-5"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("negative"), std::string::npos) << r.err;
  r = Ctl({"set-share", "tenant", "250"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("above 100%"), std::string::npos) << r.err;
  r = Ctl({"set-scheduler", "lottery"});
  EXPECT_EQ(r.code, 2);
  r = Ctl({"frobnicate"});
  EXPECT_EQ(r.code, 2);

  // Garbage straight onto the socket, past gpuvm-ctl's own checks.
  gpuvm::Result<gpuvm::os::UniqueFd> fd = gpuvm::os::ConnectSeqpacket(socket_ + "-control");
  ASSERT_TRUE(fd.ok());
  for (std::string_view raw :
       {std::string_view("set-share tenant -5"), std::string_view("set-share tenant 1e9"),
        std::string_view("\x01\x02\xff"), std::string_view("list list")}) {
    ASSERT_EQ(::send(fd->get(), raw.data(), raw.size(), 0), static_cast<ssize_t>(raw.size()));
    ASSERT_TRUE(gpuvm::os::WaitReadable(fd->get(), 10000).ok());
    char reply[4096];
    const ssize_t n = ::recv(fd->get(), reply, sizeof reply, 0);
    ASSERT_GT(n, 0);
    EXPECT_EQ(std::string(reply, static_cast<size_t>(n)).substr(0, 22), "error InvalidArgument:")
        << raw;
  }
  EXPECT_EQ(Ctl({"list"}).out, before);  // usage moves; a holder's share and policy do not
  EXPECT_NE(before.find("35.0%"), std::string::npos) << before;
}

// One syntax for shares and names everywhere (base/share.h, base/vm_name.h): gpuvm-vm takes the
// decimal share gpuvm-ctl takes; names are refused with the reason by gpuvm-vm, gpuvm-dm,
// gpuvm-ctl and gpuvm-aggregator alike, never cut.
TEST_F(ControlIntegrationTest, SharesAndNamesAreReadTheSameByEveryTool) {
  ASSERT_NO_FATAL_FAILURE(StartHolder("web", {"--share", "12.5"}));
  CtlResult list = Ctl({"list"});
  ASSERT_EQ(list.code, 0) << list.err;
  EXPECT_NE(list.out.find("web "), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("12.5%"), std::string::npos) << "the VM's own share\n" << list.out;
  EXPECT_EQ(Ctl({"set-share", "web", "33.333"}).code, 0);
  EXPECT_NE(Ctl({"list"}).out.find("33.3%"), std::string::npos);

  const auto run = [&](const std::vector<std::string>& argv, const std::string& tag) {
    Process p = Process::Start(argv, dir_ + "/" + tag);
    EXPECT_TRUE(p.Wait(60s)) << p.Logs();
    return CtlResult{p.exit_code(), p.out(), p.err()};
  };
  const std::vector<std::string> vm = {GPUVM_VM_BIN, "--aggregator", socket_, "--dm",
                                       GPUVM_DM_BIN, "--ram-mib",    "256"};
  const auto vm_with = [&](std::vector<std::string> flags) {
    std::vector<std::string> argv = vm;
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"--", GPUVM_GUEST_BIN, "nop", "1"});
    return argv;
  };
  // '@' in a name used to reach the aggregator as "unknown fv mode '300@optimized'".
  CtlResult r = run(vm_with({"--mode", "fv-optimized", "--name", "a@300"}), "at");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--name: VM name 'a@300' has '@' at 2"), std::string::npos) << r.err;
  // A 32-character name is refused, not cut.
  r = run(vm_with({"--mode", "fv-lazy", "--vram-mib", "128", "--name", std::string(32, 'x')}),
          "long");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("is 32 characters; at most 31"), std::string::npos) << r.err;
  // The device model checks its typed options as well.
  r = run({GPUVM_DM_BIN, "--backend", "local", "--domid", "5", "--aggregator", socket_, "--mode",
           "pv", "--variant", "lazy", "--token-file", "/nonexistent"},
          "variant");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("unknown pv variant 'lazy' (naive, multicall, pvdrm)"), std::string::npos) << r.err;
  r = run({GPUVM_DM_BIN, "--backend", "local", "--domid", "5", "--aggregator", socket_, "--mode",
           "fv", "--channels", "129", "--token-file", "/nonexistent"},
          "channels");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--channels wants a number from 1 to 128"), std::string::npos) << r.err;
  r = run(vm_with({"--share", "12.5.5"}), "share");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--share: share '12.5.5' is not a percentage"), std::string::npos) << r.err;
  r = run({GPUVM_DM_BIN, "--backend", "local", "--domid", "5", "--aggregator", socket_, "--name",
           "a b"},
          "dm");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--name: VM name 'a b' has ' ' at 2"), std::string::npos) << r.err;
  r = Ctl({"set-share", "a@opt", "5"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("is neither an id nor a VM name"), std::string::npos) << r.err;
  r = run({GPUVM_AGGREGATOR_BIN, "--socket", socket_ + "-second", "--vm-share", "a b=5"}, "agg");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--vm-share: VM name 'a b' has ' '"), std::string::npos) << r.err;
  r = run({GPUVM_AGGREGATOR_BIN, "--socket", socket_ + "-second", "--default-share", "-5"}, "agg2");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("share '-5' is negative; shares are 0-100%"), std::string::npos) << r.err;
}

}  // namespace
