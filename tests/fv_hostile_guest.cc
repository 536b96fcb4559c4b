// gpuvm-fv-hostile-guest: the guest program of tests/refusal_flood_test.cc, run by gpuvm-vm in a
// local fv VM (GPUVM_BUS=local). It drives the virtual GPU's registers itself, with no driver:
//
//   gpuvm-fv-hostile-guest flood N DIR   N refused BAR0 register writes (VM_CFG asking for 64 KiB
//                                        large pages, which every VM must share at 128 KiB) and N
//                                        refused playlists (in SYSRAM: a VM's playlist must be in
//                                        its VRAM), then writes DIR/flooded and waits (up to 60 s)
//                                        for DIR/done. Prints "PASSED flood N" and exits 0.
//
// Each of those acts was one line of the aggregator's log before refusals were rate-limited.
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "gpu/hw/pfifo.h"
#include "gpu/hw/vm.h"
#include "guest-pv-driver/local_trap_bus.h"

namespace {

namespace pf = gpuvm::gf100::pfifo;
namespace vm = gpuvm::gf100::vm;
using Clock = std::chrono::steady_clock;

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

int Flood(uint64_t n, const std::string& dir) {
  auto bus = gpuvm::guest::LocalTrapBus::FromEnvironment();
  if (!bus.ok()) {
    std::printf("FAILED bus: %s\n", bus.status().ToString().c_str());
    return 1;
  }
  for (uint64_t i = 0; i < n; ++i) {
    (*bus)->WriteReg(vm::kCfg, vm::kCfgLargePage64K);
    // Target 2 (SYSRAM), one entry: refused before anything of it is read.
    (*bus)->WriteReg(pf::kPlaylistWr, (2u << pf::kPlaylistTargetShift) | uint32_t(i & 0xfff));
    (*bus)->WriteReg(pf::kPlaylistWrLen, 1);
  }
  const uint64_t failed = (*bus)->failed_accesses();
  if (failed != 0) {
    std::printf("FAILED flood: %llu accesses failed\n", static_cast<unsigned long long>(failed));
    return 1;
  }
  std::ofstream(dir + "/flooded") << "flooded\n";
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (!Exists(dir + "/done")) {
    if (Clock::now() > deadline) {
      std::printf("FAILED flood: nobody wrote %s/done\n", dir.c_str());
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::printf("PASSED flood %llu\n", static_cast<unsigned long long>(n));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  if (what == "flood" && argc > 3) return Flood(std::strtoull(argv[2], nullptr, 10), argv[3]);
  std::fprintf(stderr, "usage: gpuvm-fv-hostile-guest flood N DIR\n");
  return 2;
}
