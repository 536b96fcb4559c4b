// Shared by the multi-process integration tests (pt_integration_test, fv_integration_test,
// fv_orphan_isolation_test, fv_vram_scan_test, ...): child processes with their output in files,
// and a fixture that starts gpuvm-aggregator on a socket of its own for each test and local VMs
// (gpuvm-vm + gpuvm-dm + a guest program) against it, with waits for a file or a log line.
//
// The including test defines GPUVM_AGGREGATOR_BIN, GPUVM_VM_BIN, GPUVM_DM_BIN and GPUVM_GUEST_BIN
// (tests/CMakeLists.txt). Logs of a failed test stay in its directory under TempDir().
//
// Threading: the test's main thread.
#ifndef GPUVM_TESTS_VM_PROCESS_FIXTURE_H_
#define GPUVM_TESTS_VM_PROCESS_FIXTURE_H_

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
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/os.h"

namespace gpuvm::process_testing {

using Clock = std::chrono::steady_clock;

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Whether `pid` still runs (a zombie nobody has reaped yet counts as gone: where PID 1 does not
// reap, orphans stay zombies).
inline bool Alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] != 'Z';
}

// A child process (its own process group) with stdout and stderr in files.
struct Process {
  pid_t pid = -1;
  std::string out_path, err_path;
  int status = -1;

  // `in_child` (if any) runs in the child just before the exec, e.g. to drop privileges.
  static Process Start(const std::vector<std::string>& argv, const std::string& log_prefix,
                       const std::function<void()>& in_child = {}) {
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
      ::setpgid(0, 0);  // our own group: a test's kill never reaches the test runner
      if (in_child) in_child();
      ::execv(cargv[0], cargv.data());
      ::_exit(127);
    }
    return p;
  }
  // Waits up to `timeout`; kills the process group on timeout (and reports it).
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
  // Whether it has ended (reaps it if so), without waiting.
  bool Exited() { return status != -1 || ::waitpid(pid, &status, WNOHANG) == pid; }
  int exit_code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }
  std::string out() const { return ReadFile(out_path); }
  std::string err() const { return ReadFile(err_path); }
  std::string Logs() const { return "--- stdout:\n" + out() + "--- stderr:\n" + err(); }
};

// One gpuvm-aggregator per test (started by StartAggregator, typically from SetUp), stopped with
// SIGTERM at TearDown, which must end cleanly.
class AggregatorProcessTest : public ::testing::Test {
 protected:
  // `tag` names the test's socket and log directory; `flags` go to gpuvm-aggregator after its
  // socket. `socket_file`: a filesystem socket of that name in the test's directory instead of
  // an abstract one.
  void StartAggregator(const std::string& tag, const std::vector<std::string>& flags,
                       const std::string& socket_file = "") {
    std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : test) {
      if (c == '/') c = '_';  // parameterized names
    }
    dir_ = ::testing::TempDir() + "gpuvm-" + tag + "-" + std::to_string(::getpid()) + "-" + test;
    ::mkdir(dir_.c_str(), 0755);
    socket_ = socket_file.empty()
                  ? "@gpuvm-" + tag + "-test-" + std::to_string(::getpid()) + "-" + test
                  : dir_ + "/" + socket_file;
    std::vector<std::string> argv = {GPUVM_AGGREGATOR_BIN, "--socket", socket_};
    argv.insert(argv.end(), flags.begin(), flags.end());
    aggregator_ = Process::Start(argv, dir_ + "/aggregator");
    // Ready when it accepts connections.
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < deadline) {
      if (os::ConnectSeqpacket(socket_).ok()) return;
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
    if (!HasFailure() && std::getenv("GPUVM_KEEP_LOGS") == nullptr)
      std::filesystem::remove_all(dir_, ignored);  // logs stay when it failed
  }

  // gpuvm-vm against our aggregator with `vm_flags` (after --ram-mib 256), running the guest
  // program with `guest` arguments.
  std::vector<std::string> VmCommand(const std::vector<std::string>& vm_flags,
                                     const std::vector<std::string>& guest) const {
    std::vector<std::string> argv = {GPUVM_VM_BIN, "--aggregator", socket_, "--dm",
                                     GPUVM_DM_BIN, "--ram-mib",    "256"};
    argv.insert(argv.end(), vm_flags.begin(), vm_flags.end());
    argv.push_back("--");
    argv.push_back(GPUVM_GUEST_BIN);
    argv.insert(argv.end(), guest.begin(), guest.end());
    return argv;
  }
  Process StartVm(const std::vector<std::string>& vm_flags, const std::vector<std::string>& guest,
                  const std::string& name) const {
    return Process::Start(VmCommand(vm_flags, guest), dir_ + "/" + name);
  }

  // The aggregator's log so far.
  std::string AggregatorLog() const { return aggregator_.err(); }
  // Waits up to `timeout` for `path` while `p` runs: false when it ended first or time ran out.
  static bool WaitForFile(const std::string& path, Process& p, std::chrono::seconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (!Exists(path)) {
      if (Clock::now() > deadline || p.Exited()) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }
  // Waits up to `timeout` until the aggregator's log says `text`.
  bool WaitForLog(const std::string& text, std::chrono::seconds timeout) const {
    const auto deadline = Clock::now() + timeout;
    while (AggregatorLog().find(text) == std::string::npos) {
      if (Clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }

  std::string dir_;
  std::string socket_;
  Process aggregator_;
};

}  // namespace gpuvm::process_testing

#endif  // GPUVM_TESTS_VM_PROCESS_FIXTURE_H_
