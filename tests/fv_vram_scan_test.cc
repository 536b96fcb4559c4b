// The VRAM-scan attack on BAR remap, with real processes: gpuvm-aggregator on the software GPU,
// local VMs started by gpuvm-vm, the guest program tests/fv_vram_scan_guest.cc.
//
// A victim VM in fv-lazy (nothing of it remapped) writes a secret into its VRAM. An attacker VM in
// fv-optimized does ordinary work until BAR remap has mapped pages of its apertures into it, then
// reads every readable shared mapping of its own process looking for the secret (and overwrites
// what it finds), for shadow page tables (the aggregator's reserved area) and for its own marker.
// BAR remap must have handed it only its own VRAM: its marker is there (the scan does reach VRAM),
// the secret and the shadow tables are not, no VRAM mapping in it is larger than its own 32 MiB,
// and the victim reads its secret back unchanged. Before per-VM VRAM backing the guest mapped the
// whole VRAM memfd: it found and overwrote the victim's secret and read the shadow page tables.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <regex>
#include <string>

#include "tests/vm_process_fixture.h"

namespace {

using gpuvm::process_testing::Process;

constexpr uint64_t kReservedMiB = 48;  // the pool (every machine address a VM gets) starts here
constexpr uint64_t kVmMiB = 32;        // below kReservedMiB: guest addresses never look machine

class FvVramScanTest : public gpuvm::process_testing::AggregatorProcessTest {
 protected:
  void SetUp() override {
    StartAggregator("fvscan", {"--vram-mib", "256", "--fv-reserved-mib",
                               std::to_string(kReservedMiB), "--compute-workers", "1"});
  }
  // The number after `what` on the attacker's line, or -1.
  static long long Count(const std::string& line, const std::string& what) {
    const size_t at = line.find(what + " ");
    return at == std::string::npos ? -1 : std::stoll(line.substr(at + what.size() + 1));
  }
};

TEST_F(FvVramScanTest, ARemappedGuestScanningItsMappingsFindsNoOtherVmsVramNorTheReservedArea) {
  const std::string vm_mib = std::to_string(kVmMiB);
  Process victim = StartVm({"--mode", "fv-lazy", "--name", "victim", "--vram-mib", vm_mib},
                           {"victim", dir_}, "victim");
  ASSERT_TRUE(WaitForFile(dir_ + "/victim-ready", victim, std::chrono::seconds(90)))
      << victim.Logs();

  Process attacker = StartVm({"--mode", "fv-optimized", "--name", "attacker", "--vram-mib", vm_mib},
                             {"attacker", dir_, std::to_string(kReservedMiB << 20)}, "attacker");
  ASSERT_TRUE(attacker.Wait(std::chrono::seconds(180))) << attacker.Logs();
  EXPECT_EQ(attacker.exit_code(), 0) << attacker.Logs();
  const std::string out = attacker.out();
  const size_t at = out.find("attacker: ");
  ASSERT_NE(at, std::string::npos) << attacker.Logs();
  const std::string line = out.substr(at, out.find('\n', at) - at);
  std::printf("%s\n", line.c_str());  // the figures, for whoever runs it by hand
  // The scan reached VRAM: the attacker's own marker page is in a VRAM mapping of its process.
  EXPECT_GT(Count(line, "own marker in VRAM"), 0) << line;
  EXPECT_EQ(Count(line, "secret records"), 0) << "the attacker read the victim's VRAM\n" << line;
  EXPECT_EQ(Count(line, "overwritten"), 0) << line;
  EXPECT_EQ(Count(line, "shadow PTE runs"), 0)
      << "the attacker read shadow page tables (the aggregator's reserved area)\n"
      << line;
  // Only its own pages: no VRAM mapping larger than its own VRAM.
  const std::regex size(":([0-9]+)KiB");
  int vram_mappings = 0;
  for (auto it = std::sregex_iterator(line.begin(), line.end(), size); it != std::sregex_iterator();
       ++it) {
    ++vram_mappings;
    EXPECT_LE(std::stoull((*it)[1]), kVmMiB << 10) << line;
  }
  EXPECT_GT(vram_mappings, 0) << line;

  std::ofstream(dir_ + "/check") << "go\n";
  ASSERT_TRUE(victim.Wait(std::chrono::seconds(60))) << victim.Logs();
  EXPECT_EQ(victim.exit_code(), 0) << victim.Logs();
  EXPECT_NE(victim.out().find("PASSED victim"), std::string::npos) << victim.Logs();
}

}  // namespace
