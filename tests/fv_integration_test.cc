// Full virtualization end to end with real processes: gpuvm-aggregator owns the software GPU;
// gpuvm-vm starts local VMs in the fv modes (gpuvm-vm --mode fv-*), each running gpuvm-pt-guest on
// the unmodified guest driver, whose every BAR access traps through gpuvm-dm to the aggregator's
// FullVirtGpu (shadow page tables, shadow channels). Checked: nop and madd correct in one VM; 1, 2,
// 4 and 8 VMs of different VRAM sizes at once in each fv mode, all correct (8 VMs declare 704 MiB
// on a GPU with 464 MiB for VMs: dynamic VRAM over-commits); the same with static slices; a VM
// larger than the GPU is refused with a clear error while the others run; the next VM cannot read
// the previous one's VRAM; the aggregator's per-VM counters are logged, and every line of the
// aggregator's and of gpuvm-dm's log about the VM carries its id and name (docs/OPERATOR.md "Logs").
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tests/vm_process_fixture.h"

namespace {

using gpuvm::process_testing::Clock;
using gpuvm::process_testing::Process;

class FvIntegrationTest : public gpuvm::process_testing::AggregatorProcessTest {
 protected:
  void SetUp() override { StartAggregator("fv", AggregatorFlags()); }
  virtual std::vector<std::string> AggregatorFlags() const {
    return {"--vram-mib", "512", "--compute-workers", "2"};
  }

  Process StartVm(const std::string& mode, const std::string& name, uint64_t vram_mib,
                  const std::vector<std::string>& guest) {
    std::vector<std::string> flags = {"--mode", mode, "--name", name};
    if (vram_mib != 0) {
      flags.push_back("--vram-mib");
      flags.push_back(std::to_string(vram_mib));
    }
    return AggregatorProcessTest::StartVm(flags, guest, name);
  }

  // `count` VMs of different sizes (32, 48, 64, ... MiB) in `mode` at once, each running one of
  // the suite's kernels (madd, mmul, fmmul, backprop in turn; test sizes), all correct.
  void RunVmsAtOnce(const std::string& mode, int count) {
    static const char* const kCases[] = {"madd", "mmul", "fmmul", "backprop"};
    std::vector<Process> vms;
    for (int i = 0; i < count; ++i) {
      vms.push_back(StartVm(mode, "vm" + std::to_string(i), 32 + 16 * i, {"case", kCases[i % 4]}));
    }
    for (int i = 0; i < count; ++i) {
      Process& p = vms[i];
      ASSERT_TRUE(p.Wait(std::chrono::seconds(180))) << "vm" << i << " hung\n" << p.Logs();
      EXPECT_EQ(p.exit_code(), 0) << "vm" << i << "\n" << p.Logs();
      EXPECT_NE(p.out().find(std::string("PASSED ") + kCases[i % 4]), std::string::npos)
          << "vm" << i << "\n"
          << p.Logs();
    }
  }
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

  // Logs: the VM's id, from the aggregator's line that names it...
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m, std::regex(" vm=([0-9]+) name=madd "))) << log;
  const std::string fields = "vm=" + m[1].str() + " name=madd";
  // ...is on every aggregator line that mentions the VM (its session's end and its counters),
  // right after the time, level and component; no line carries another VM's id with its name.
  const std::regex aggregator_line(
      "^ts=[0-9-]+T[0-9:.]+Z level=(info|warn|error) component=gpuvm-aggregator " + fields +
      " .*msg=.*");
  size_t vm_lines = 0;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("'madd'") == std::string::npos && line.find("name=madd") == std::string::npos) {
      continue;
    }
    ++vm_lines;
    EXPECT_TRUE(std::regex_match(line, aggregator_line)) << line;
  }
  EXPECT_GE(vm_lines, 2u) << log;  // "session ended" and the fv counters
  // gpuvm-dm's lines once the VM is admitted: serving, its trap counters, the bench hook.
  const std::regex dm_line("^ts=\\S+ level=info component=gpuvm-dm " + fields +
                           " domid=[0-9]+ msg=.*");
  size_t dm_lines = 0;
  std::istringstream err(p.err());
  for (std::string line; std::getline(err, line);) {
    if (line.find("component=gpuvm-dm") == std::string::npos) continue;
    ++dm_lines;
    EXPECT_TRUE(std::regex_match(line, dm_line)) << line;
  }
  EXPECT_GE(dm_lines, 3u) << p.err();
}

// BAR3 accesses (reads + writes) the VM's gpuvm-dm trapped, from its last line on stderr.
uint64_t Bar3Traps(const Process& p) {
  const std::string err = p.err();
  const size_t bar3 = err.find("BAR3 r=");
  if (bar3 == std::string::npos) return 0;
  const size_t w = err.find(" w=", bar3);
  return std::stoull(err.substr(bar3 + 7)) + std::stoull(err.substr(w + 3));
}

// BAR remap between real processes: the guest's aperture accesses stop trapping (gpuvm-dm maps the
// aggregator's ranges into the guest), and the results stay right.
TEST_F(FvIntegrationTest, BarRemapMapsTheAperturesAndMaddStaysCorrect) {
  Process p = StartVm("fv-bar-remap", "remap", 0, {"case", "madd"});
  ASSERT_TRUE(p.Wait(std::chrono::seconds(120))) << p.Logs();
  EXPECT_EQ(p.exit_code(), 0) << p.Logs();
  EXPECT_NE(p.out().find("PASSED madd"), std::string::npos) << p.Logs();
  // gpuvm-dm: "BAR remap: N ranges mapped, ..." with N > 0.
  const std::string err = p.err();
  const size_t at = err.find("BAR remap: ");
  ASSERT_NE(at, std::string::npos) << p.Logs();
  EXPECT_GT(std::stoul(err.substr(at + 11)), 0u) << p.Logs();
  // Far fewer BAR3 traps than the same program in fv-naive, run after it: every one of its ~95,000
  // page-table stores traps there. How many trap before the ranges are mapped depends on how soon
  // the device model gets to the aggregator's BAR_MAP (8,192 on an idle machine, 56,670 seen under
  // load), so the bound is a share of the naive count measured here, not a fixed number.
  Process naive = StartVm("fv-naive", "naive", 0, {"case", "madd"});
  ASSERT_TRUE(naive.Wait(std::chrono::seconds(120))) << naive.Logs();
  ASSERT_EQ(naive.exit_code(), 0) << naive.Logs();
  const uint64_t remapped = Bar3Traps(p), trapped = Bar3Traps(naive);
  std::printf("BAR3 traps: fv-bar-remap %llu, fv-naive %llu\n", (unsigned long long)remapped,
              (unsigned long long)trapped);
  EXPECT_GT(trapped, 50000u) << naive.Logs();
  EXPECT_LT(remapped * 4, trapped * 3) << p.Logs() << naive.Logs();
}

TEST_F(FvIntegrationTest, VmLargerThanTheFreeVramIsRefusedClearly) {
  Process p = StartVm("fv-naive", "huge", 4096, {"nop", "1"});
  ASSERT_TRUE(p.Wait(std::chrono::seconds(60))) << p.Logs();
  EXPECT_NE(p.exit_code(), 0) << p.Logs();
  EXPECT_NE(p.err().find("no free VRAM"), std::string::npos) << p.Logs();
  // The aggregator serves the next VM.
  Process q = StartVm("fv-naive", "next", 0, {"nop", "1"});
  ASSERT_TRUE(q.Wait(std::chrono::seconds(60))) << q.Logs();
  EXPECT_EQ(q.exit_code(), 0) << q.Logs();
}

TEST_F(FvIntegrationTest, TheNextVmCannotReadThePreviousOnesVram) {
  Process secret = StartVm("fv-optimized", "secret", 64, {"secret"});
  ASSERT_TRUE(secret.Wait(std::chrono::seconds(60))) << secret.Logs();
  ASSERT_EQ(secret.exit_code(), 0) << secret.Logs();
  Process snoop = StartVm("fv-optimized", "snoop", 64, {"snoop"});
  ASSERT_TRUE(snoop.Wait(std::chrono::seconds(60))) << snoop.Logs();
  EXPECT_EQ(snoop.exit_code(), 0) << snoop.Logs();
  EXPECT_NE(snoop.out().find("PASSED snoop"), std::string::npos) << snoop.Logs();
}

// 1, 2, 4 and 8 VMs at once in every fv mode (dynamic VRAM, the default).
class FvScaleTest : public FvIntegrationTest,
                    public ::testing::WithParamInterface<std::tuple<const char*, int>> {};

TEST_P(FvScaleTest, VmsOfDifferentSizesAtOnceAllCorrect) {
  RunVmsAtOnce(std::get<0>(GetParam()), std::get<1>(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(ModesAndCounts, FvScaleTest,
                         ::testing::Combine(::testing::Values("fv-naive", "fv-lazy", "fv-bar-remap",
                                                              "fv-optimized"),
                                            ::testing::Values(1, 2, 4, 8)),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param);
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n + "_" + std::to_string(std::get<1>(info.param)) + "vms";
                         });

// Static slices (--fv-vram-policy static): the same VMs fit as long as their slices do.
class FvStaticVramTest : public FvIntegrationTest {
 protected:
  std::vector<std::string> AggregatorFlags() const override {
    return {"--vram-mib", "512", "--compute-workers", "2", "--fv-vram-policy", "static"};
  }
};

TEST_F(FvStaticVramTest, FourOptimizedVmsInSlicesAllCorrect) { RunVmsAtOnce("fv-optimized", 4); }

TEST_F(FvStaticVramTest, VmLargerThanTheFreeSliceIsRefusedClearly) {
  Process p = StartVm("fv-naive", "huge", 480, {"nop", "1"});
  ASSERT_TRUE(p.Wait(std::chrono::seconds(60))) << p.Logs();
  EXPECT_NE(p.exit_code(), 0) << p.Logs();
  EXPECT_NE(p.err().find("no free VRAM slice of 480 MiB"), std::string::npos) << p.Logs();
}

// Over-committed VRAM (dynamic policy): 80 MiB for VMs, two VMs of 64 MiB. The first fills 48 MiB
// and keeps it; the second's 48 MiB pass its own allocator (it sees 64 MiB) but the GPU has no VRAM
// left for all of them: the guest gets CUDA_ERROR_OUT_OF_MEMORY (2), not a bad address (700), and
// the first VM's data stays (docs/FULL-VIRTUALIZATION.md, "Out of VRAM").
class FvOverCommitTest : public FvIntegrationTest,
                         public ::testing::WithParamInterface<const char*> {
 protected:
  std::vector<std::string> AggregatorFlags() const override {
    return {"--vram-mib", "128", "--fv-reserved-mib", "48", "--compute-workers", "1"};
  }
};

TEST_P(FvOverCommitTest, TheGuestThatFindsNoVramGetsOutOfMemory) {
  const std::string ready = dir_ + "/holder.ready";
  Process holder = StartVm("fv-lazy", "holder", 64, {"fill", "48", ready});
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (!gpuvm::process_testing::Exists(ready)) {
    ASSERT_FALSE(holder.Exited()) << holder.Logs();
    ASSERT_LT(Clock::now(), deadline) << holder.Logs();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  Process p = StartVm(GetParam(), "late", 64, {"fill", "48"});
  ASSERT_TRUE(p.Wait(std::chrono::seconds(120))) << p.Logs();
  EXPECT_EQ(p.exit_code(), 1) << p.Logs();
  EXPECT_NE(p.err().find("CUDA_ERROR_OUT_OF_MEMORY (2)"), std::string::npos) << p.Logs();
  EXPECT_EQ(p.err().find("CUDA_ERROR_ILLEGAL_ADDRESS"), std::string::npos) << p.Logs();
  EXPECT_NE(AggregatorLog().find("reported as out of VRAM"), std::string::npos) << AggregatorLog();
  EXPECT_TRUE(holder.Exited() == false) << holder.Logs();  // the holder never noticed
  ::kill(-holder.pid, SIGTERM);
  holder.Wait(std::chrono::seconds(30));
}

INSTANTIATE_TEST_SUITE_P(Modes, FvOverCommitTest, ::testing::Values("fv-naive", "fv-optimized"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

// What native and pt do with too little VRAM: the guest driver's own allocator says so
// (CUDA_ERROR_OUT_OF_MEMORY at cuMemAlloc), as it always did.
TEST_F(FvIntegrationTest, NativeAndPtRunOutOfMemoryInTheGuestsAllocator) {
  Process native = Process::Start(
      {"/usr/bin/env", "GPUVM_BUS=native", "GPUVM_SIM_VRAM_MB=64", GPUVM_GUEST_BIN, "fill", "96"},
      dir_ + "/native");
  ASSERT_TRUE(native.Wait(std::chrono::seconds(60))) << native.Logs();
  EXPECT_EQ(native.exit_code(), 1) << native.Logs();
  EXPECT_NE(native.err().find("cuMemAlloc(&d, bytes): CUDA_ERROR_OUT_OF_MEMORY (2)"),
            std::string::npos)
      << native.Logs();
  // The aggregator's GPU has 512 MiB; a pt VM sees all of it.
  Process pt =
      AggregatorProcessTest::StartVm({"--mode", "pt", "--name", "pt"}, {"fill", "1024"}, "pt");
  ASSERT_TRUE(pt.Wait(std::chrono::seconds(60))) << pt.Logs();
  EXPECT_EQ(pt.exit_code(), 1) << pt.Logs();
  EXPECT_NE(pt.err().find("cuMemAlloc(&d, bytes): CUDA_ERROR_OUT_OF_MEMORY (2)"), std::string::npos)
      << pt.Logs();
}

}  // namespace
