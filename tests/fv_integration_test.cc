// Full virtualization end to end with real processes: gpuvm-aggregator owns the software GPU;
// gpuvm-vm starts local VMs in the fv modes (gpuvm-vm --mode fv-*), each running gpuvm-pt-guest on
// the unmodified guest driver, whose every BAR access traps through gpuvm-dm to the aggregator's
// FullVirtGpu (shadow page tables, shadow channels). Checked: nop and madd correct in one VM; two
// and four VMs (different VRAM sizes) at once, all correct; a VM larger than the free VRAM is
// refused with a clear error while the others run; the aggregator's per-VM counters are logged.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hypervisor/local/os.h"

namespace {

using Clock = std::chrono::steady_clock;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A child process (its own process group) with stdout and stderr in files.
struct Process {
  pid_t pid = -1;
  std::string out_path, err_path;
  int status = -1;

  static Process Start(const std::vector<std::string>& argv, const std::string& log_prefix) {
    Process p;
    p.out_path = log_prefix + ".out";
    p.err_path = log_prefix + ".err";
    std::vector<std::string> args = argv;
    std::vector<char*> cargv;
    for (std::string& a : args) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    p.pid = ::fork();
    if (p.pid == 0) {
      const int out = ::open(p.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int err = ::open(p.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(out, 1);
      ::dup2(err, 2);
      ::setpgid(0, 0);
      ::execv(cargv[0], cargv.data());
      ::_exit(127);
    }
    return p;
  }
  bool Wait(std::chrono::seconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      if (::waitpid(pid, &status, WNOHANG) == pid) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    return false;
  }
  int exit_code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }
  std::string out() const { return ReadFile(out_path); }
  std::string err() const { return ReadFile(err_path); }
  std::string Logs() const { return "--- stdout:\n" + out() + "--- stderr:\n" + err(); }
};

class FvIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = ::testing::TempDir() + "gpuvm-fv-" + std::to_string(::getpid()) + "-" + test;
    ::mkdir(dir_.c_str(), 0755);
    socket_ = "@gpuvm-fv-test-" + std::to_string(::getpid()) + "-" + test;
    aggregator_ = Process::Start(
        {GPUVM_AGGREGATOR_BIN, "--socket", socket_, "--vram-mib", "512", "--compute-workers", "2"},
        dir_ + "/aggregator");
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < deadline) {
      if (gpuvm::hv::local::ConnectSeqpacket(socket_).ok()) return;
      int status;
      ASSERT_NE(::waitpid(aggregator_.pid, &status, WNOHANG), aggregator_.pid)
          << "the aggregator exited: " << aggregator_.Logs();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    FAIL() << "the aggregator did not come up: " << aggregator_.Logs();
  }

  void TearDown() override {
    if (aggregator_.pid > 0) {
      ::kill(aggregator_.pid, SIGTERM);
      EXPECT_TRUE(aggregator_.Wait(std::chrono::seconds(30))) << aggregator_.Logs();
      EXPECT_EQ(aggregator_.exit_code(), 0) << aggregator_.Logs();
      if (HasFailure()) std::fprintf(stderr, "aggregator log:\n%s", aggregator_.err().c_str());
    }
    std::error_code ignored;
    if (!HasFailure()) std::filesystem::remove_all(dir_, ignored);
  }

  Process StartVm(const std::string& mode, const std::string& name, uint64_t vram_mib,
                  const std::vector<std::string>& guest) {
    std::vector<std::string> argv = {GPUVM_VM_BIN, "--aggregator", socket_, "--dm",
                                     GPUVM_DM_BIN, "--ram-mib",    "256",   "--mode",
                                     mode,         "--name",       name};
    if (vram_mib != 0) {
      argv.push_back("--vram-mib");
      argv.push_back(std::to_string(vram_mib));
    }
    argv.push_back("--");
    argv.push_back(GPUVM_GUEST_BIN);
    argv.insert(argv.end(), guest.begin(), guest.end());
    return Process::Start(argv, dir_ + "/" + name);
  }

  // The aggregator's log, after its sessions ended (it logs each VM's fv counters then).
  std::string AggregatorLog() { return aggregator_.err(); }

  std::string dir_;
  std::string socket_;
  Process aggregator_;
};

TEST_F(FvIntegrationTest, NaiveRunsNop) {
  Process p = StartVm("fv-naive", "nop", 0, {"nop", "5"});
  ASSERT_TRUE(p.Wait(std::chrono::seconds(120))) << p.Logs();
  EXPECT_EQ(p.exit_code(), 0) << p.Logs();
  EXPECT_NE(p.out().find("PASSED nop x5"), std::string::npos) << p.Logs();
}

TEST_F(FvIntegrationTest, NaiveRunsMaddCorrectly) {
  Process p = StartVm("fv-naive", "madd", 0, {"case", "madd"});
  ASSERT_TRUE(p.Wait(std::chrono::seconds(120))) << p.Logs();
  EXPECT_EQ(p.exit_code(), 0) << p.Logs();
  EXPECT_NE(p.out().find("PASSED madd"), std::string::npos) << p.Logs();
  // The aggregator logged the VM's shadowing work when the session ended.
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (AggregatorLog().find("fv-naive, VRAM") == std::string::npos && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const std::string log = AggregatorLog();
  EXPECT_NE(log.find("fv-naive, VRAM 128 MiB"), std::string::npos) << log;
  EXPECT_NE(log.find("rejected 0,"), std::string::npos) << log;
}

TEST_F(FvIntegrationTest, TwoLazyVmsAtOnce) {
  Process a = StartVm("fv-lazy", "a", 64, {"case", "madd"});
  Process b = StartVm("fv-lazy", "b", 96, {"nop", "3"});
  ASSERT_TRUE(a.Wait(std::chrono::seconds(120))) << a.Logs();
  ASSERT_TRUE(b.Wait(std::chrono::seconds(120))) << b.Logs();
  EXPECT_EQ(a.exit_code(), 0) << a.Logs();
  EXPECT_NE(a.out().find("PASSED madd"), std::string::npos) << a.Logs();
  EXPECT_EQ(b.exit_code(), 0) << b.Logs();
  EXPECT_NE(b.out().find("PASSED nop x3"), std::string::npos) << b.Logs();
}

TEST_F(FvIntegrationTest, FourOptimizedVmsOfDifferentSizesAtOnce) {
  const uint64_t sizes[] = {32, 64, 96, 128};
  std::vector<Process> vms;
  for (int i = 0; i < 4; ++i) {
    vms.push_back(StartVm("fv-optimized", "vm" + std::to_string(i), sizes[i], {"case", "madd"}));
  }
  for (Process& p : vms) {
    ASSERT_TRUE(p.Wait(std::chrono::seconds(180))) << p.Logs();
    EXPECT_EQ(p.exit_code(), 0) << p.Logs();
    EXPECT_NE(p.out().find("PASSED madd"), std::string::npos) << p.Logs();
  }
}

TEST_F(FvIntegrationTest, VmLargerThanTheFreeVramIsRefusedClearly) {
  Process p = StartVm("fv-naive", "huge", 4096, {"nop", "1"});
  ASSERT_TRUE(p.Wait(std::chrono::seconds(60))) << p.Logs();
  EXPECT_NE(p.exit_code(), 0) << p.Logs();
  EXPECT_NE(p.err().find("no free VRAM slice"), std::string::npos) << p.Logs();
  // The aggregator serves the next VM.
  Process q = StartVm("fv-naive", "next", 0, {"nop", "1"});
  ASSERT_TRUE(q.Wait(std::chrono::seconds(60))) << q.Logs();
  EXPECT_EQ(q.exit_code(), 0) << q.Logs();
}

}  // namespace
