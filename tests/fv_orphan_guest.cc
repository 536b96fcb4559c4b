// gpuvm-fv-orphan-guest: the guest program of tests/fv_orphan_isolation_test.cc, run by gpuvm-vm in
// a local fv VM (GPUVM_BUS=local) on the unmodified guest driver.
//
//   gpuvm-fv-orphan-guest orphan DIR   the guest whose device model the test kills: fills 8 MiB of
//                                      VRAM, maps it into BAR1 (a small copy: the driver's BAR1
//                                      path) and waits until BAR remap has published ranges on the
//                                      control page (DIR/orphan-ready). Once DIR/snoop appears (its
//                                      device model is dead by then) it reads every page it can
//                                      still reach without a trap — the published ranges — looking
//                                      for the victim's pattern, writes its own pattern over all of
//                                      them, and reads them again. Prints "orphan: pages P, secret
//                                      words S, failed F", writes DIR/orphan-done and exits 0 when
//                                      S and F are 0.
//   gpuvm-fv-orphan-guest victim DIR   fills 16 MiB of VRAM with the victim's pattern
//                                      (DIR/victim-ready), waits for DIR/check, reads it all back:
//                                      "PASSED victim" when none of it changed.
//
// Every access of the orphan after DIR/snoop stays inside a published range: a trap would wait for
// the dead device model (the bus then dies and reads all-ones, which the failed count reports).
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "base/os.h"
#include "guest-pv-driver/driver.h"
#include "guest-pv-driver/local_trap_bus.h"
#include "hypervisor/backend.h"
#include "hypervisor/local/domain.h"
#include "hypervisor/local/guest_io.h"
#include "tests/guest_program.h"

namespace gpuvm::guest_program {
namespace {

using gpuvm::guest::Bar;
using gpuvm::hv::local::LocalControlPage;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kVictimPattern = 0x51c7e5e7;
constexpr uint32_t kOrphanPattern = 0x0a7f0a7f;
constexpr uint64_t kOrphanBytes = 8ull << 20;
constexpr uint64_t kVictimBytes = 16ull << 20;
constexpr uint64_t kPage = 4096;

// The memory ranges the device model published on the control page (read under its seqlock).
std::vector<LocalControlPage::MemoryRange> Ranges(const LocalControlPage* page) {
  for (int attempt = 0;; ++attempt) {
    const uint32_t seq = __atomic_load_n(&page->routing_seq, __ATOMIC_ACQUIRE);
    // (A server that died mid-update leaves the sequence odd: take the tables as they are.)
    if ((seq & 1) && attempt < 1000000) continue;
    const uint32_t count =
        std::min<uint32_t>(page->memory_range_count, gpuvm::hv::local::kMaxMemoryRanges);
    std::vector<LocalControlPage::MemoryRange> ranges(page->memory_ranges,
                                                      page->memory_ranges + count);
    if (__atomic_load_n(&page->routing_seq, __ATOMIC_ACQUIRE) == seq || attempt >= 1000000) {
      return ranges;
    }
  }
}

// The driver up on `bus`, a context, and `bytes` of VRAM (at `va`) filled with `pattern` by the
// GPU.
struct Filled : GuestGpu {
  uint64_t va = 0;
};
Filled Fill(gpuvm::guest::Bus* bus, uint64_t bytes, uint32_t pattern) {
  Filled f;
  static_cast<GuestGpu&>(f) = BringUp(bus);
  f.va = AllocDevice(f, bytes);
  auto fill = f.ch->Memset32Async(f.va, pattern, bytes / 4);
  if (!fill.ok() || !f.ch->Synchronize().ok()) Fail("memset");
  return f;
}

int Orphan(const std::string& dir) {
  gpuvm::guest_program::LocalVmWithControlPage local =
      gpuvm::guest_program::OpenLocalVmWithControlPage();
  auto bus = gpuvm::guest::LocalTrapBus::Create(local.vm);
  if (!bus.ok()) return Fail("bus: " + bus.status().ToString());
  const LocalControlPage* page = local.page();
  Filled gpu = Fill(bus->get(), kOrphanBytes, kOrphanPattern);
  gpuvm::guest::Channel* ch = gpu.ch;
  // Published ranges of BAR1 (the buffer, mapped by the driver's BAR1 path for small copies).
  const uint64_t bar1 = (*bus)->bar_address(Bar::k1), bar3 = (*bus)->bar_address(Bar::k3);
  const uint64_t bar1_size = (*bus)->pci().bar1_size, bar3_size = (*bus)->pci().bar3_size;
  auto bar1_pages = [&] {
    uint64_t pages = 0;
    for (const auto& r : Ranges(page)) {
      if (r.first >= bar1 && r.last < bar1 + bar1_size) pages += (r.last - r.first + 1) / kPage;
    }
    return pages;
  };
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  uint32_t word = 0;
  while (bar1_pages() < kOrphanBytes / kPage) {
    if (Clock::now() > deadline) return Fail("BAR1 never remapped the buffer");
    // A small copy goes through BAR1 (and a trapped one makes the aggregator look again).
    if (!ch->CopyDeviceToHost(&word, gpu.va, 4).ok()) return Fail("small copy");
    if (word != kOrphanPattern) return Fail("the buffer does not hold the orphan's pattern");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  Touch(dir + "/orphan-ready", std::to_string(bar1_pages()) + "\n");
  std::printf("orphan: ready, %llu BAR1 pages remapped\n", (unsigned long long)bar1_pages());
  std::fflush(stdout);

  // From here on the device model is dead: no trap may be made.
  if (!WaitFor(dir + "/snoop", std::chrono::seconds(120))) return Fail("no snoop signal");
  uint64_t pages = 0, secret = 0;
  std::vector<uint32_t> bytes(kPage / 4);
  std::vector<uint32_t> mine(kPage / 4, kOrphanPattern);
  auto pass = [&](bool write) {
    for (const auto& r : Ranges(page)) {
      Bar bar;
      uint64_t base;
      if (r.first >= bar1 && r.last < bar1 + bar1_size) {
        bar = Bar::k1;
        base = bar1;
      } else if (r.first >= bar3 && r.last < bar3 + bar3_size) {
        bar = Bar::k3;
        base = bar3;
      } else {
        continue;
      }
      for (uint64_t gpa = r.first; gpa < r.last; gpa += kPage) {
        if (write) {
          (void)(*bus)->WriteBlock(bar, gpa - base, mine.data(), kPage);
          continue;
        }
        (void)(*bus)->ReadBlock(bar, gpa - base, bytes.data(), kPage);
        ++pages;
        for (uint32_t w : bytes) secret += w == kVictimPattern;
      }
    }
  };
  for (int round = 0; round < 3; ++round) {
    pass(/*write=*/false);
    pass(/*write=*/true);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pass(/*write=*/false);
  const uint64_t failed = (*bus)->failed_accesses();
  std::printf("orphan: pages %llu, secret words %llu, failed %llu\n", (unsigned long long)pages,
              (unsigned long long)secret, (unsigned long long)failed);
  std::fflush(stdout);
  Touch(dir + "/orphan-done", "done\n");
  // No destructors: they would talk to the dead device model.
  std::_Exit(secret == 0 && failed == 0 && pages > 0 ? 0 : 1);
}

int Victim(const std::string& dir) {
  auto bus = gpuvm::guest::LocalTrapBus::FromEnvironment();
  if (!bus.ok()) return Fail("bus: " + bus.status().ToString());
  Filled gpu = Fill(bus->get(), kVictimBytes, kVictimPattern);
  gpuvm::guest::Channel* ch = gpu.ch;
  std::vector<uint32_t> back(kVictimBytes / 4);
  auto changed = [&]() -> uint64_t {
    if (!ch->CopyDeviceToHost(back.data(), gpu.va, kVictimBytes).ok()) return ~0ull;
    uint64_t n = 0;
    for (uint32_t w : back) n += w != kVictimPattern;
    return n;
  };
  if (changed() != 0) return Fail("victim: the memset did not stick");
  Touch(dir + "/victim-ready", "ready\n");
  if (!WaitFor(dir + "/check", std::chrono::seconds(120))) return Fail("victim: no check signal");
  const uint64_t n = changed();
  if (n != 0) return Fail("victim: " + std::to_string(n) + " words of its VRAM changed");
  gpu.ctx.reset();
  std::printf("PASSED victim\n");
  return 0;
}

}  // namespace
}  // namespace gpuvm::guest_program

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  if (argc > 2 && what == "orphan") return gpuvm::guest_program::Orphan(argv[2]);
  if (argc > 2 && what == "victim") return gpuvm::guest_program::Victim(argv[2]);
  std::fprintf(stderr, "usage: gpuvm-fv-orphan-guest orphan|victim DIR\n");
  return 2;
}
