// gpuvm-fv-scan-guest: the guest program of tests/fv_vram_scan_test.cc, run by gpuvm-vm in a local
// fv VM (GPUVM_BUS=local) on the unmodified guest driver.
//
//   gpuvm-fv-scan-guest victim DIR     writes a secret (32-byte records "gpuvm victim secret #N")
//                                      into 4 MiB of its VRAM, checks it (DIR/victim-ready), waits
//                                      for DIR/check and reads it back: "PASSED victim" when every
//                                      byte is as written, else how many records changed and how
//                                      many of them now say "PWNED".
//   gpuvm-fv-scan-guest attacker DIR MIN_MACHINE
//                                      an fv-bar-remap/fv-optimized guest that does ordinary work
//                                      (8 MiB of VRAM filled, a marker page of its own copied in,
//                                      small copies through BAR1 until BAR remap has published
//                                      ranges of it and the bus has mapped their backing), then
//                                      scans every readable shared mapping of its own process
//                                      (/proc/self/maps: whatever the hypervisor, the device model
//                                      or its libraries put there) for
//                                        - the victim's secret records, overwriting each one found
//                                          with "PWNED ..." of the same length;
//                                        - runs of 8 or more page-table entries mapping VRAM at
//                                          MIN_MACHINE or above with a stride of one 4 KiB or one
//                                          128 KiB page: shadow page tables, which only the
//                                          aggregator's reserved area holds (its own guest tables
//                                          name guest addresses, below its VRAM size, which the
//                                          test keeps under MIN_MACHINE);
//                                        - its own marker page in mappings whose name says VRAM
//                                          (the proof that the scan reaches VRAM at all).
//                                      Prints one "attacker: ..." line with the counts and the size
//                                      of every VRAM-named mapping, writes DIR/attacker-done and
//                                      exits 0 (the test judges the counts).
//
// The attacker never writes the secret's bytes into shared memory itself: it searches with a
// private copy, so a hit in a shared mapping is someone else's data.
#include <setjmp.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/os.h"
#include "gpu/hw/vm.h"
#include "guest-pv-driver/driver.h"
#include "guest-pv-driver/local_trap_bus.h"
#include "hypervisor/local/domain.h"
#include "tests/guest_program.h"

namespace gpuvm::guest_program {
namespace {

using gpuvm::guest::Bar;
using gpuvm::hv::local::LocalControlPage;
using Clock = std::chrono::steady_clock;
namespace vm = gpuvm::gf100::vm;

constexpr uint64_t kPage = 4096;
constexpr uint64_t kSecretBytes = 4ull << 20;
constexpr uint64_t kAttackerBytes = 8ull << 20;
constexpr size_t kRecord = 32;
constexpr char kSecretPrefix[] = "gpuvm victim secret #";      // then 10 digits, then NUL padding
constexpr char kPwned[] = "PWNED by the scanning guest ....";  // kRecord bytes without the NUL
static_assert(sizeof kPwned - 1 == kRecord);
constexpr char kMarker[] = "attacker's own marker page, rec ";
static_assert(sizeof kMarker - 1 == kRecord);
constexpr size_t kShadowRun = 8;

// The secret, record by record: the prefix, a 10-digit index, NULs.
std::vector<uint8_t> Secret() {
  std::vector<uint8_t> bytes(kSecretBytes, 0);
  for (size_t r = 0; r < kSecretBytes / kRecord; ++r) {
    char text[kRecord + 1] = {};
    std::snprintf(text, sizeof text, "%s%010zu", kSecretPrefix, r);
    std::memcpy(bytes.data() + r * kRecord, text, kRecord);
  }
  return bytes;
}

int Victim(const std::string& dir) {
  auto bus = gpuvm::guest::LocalTrapBus::FromEnvironment();
  if (!bus.ok()) return Fail("bus: " + bus.status().ToString());
  GuestGpu g = BringUp(bus->get());
  const uint64_t va = AllocDevice(g, kSecretBytes);
  const std::vector<uint8_t> secret = Secret();
  if (!g.ch->CopyHostToDevice(va, secret.data(), secret.size()).ok()) Fail("victim: copy in");
  std::vector<uint8_t> back(kSecretBytes);
  auto check = [&](uint64_t* pwned) -> uint64_t {
    if (!g.ch->CopyDeviceToHost(back.data(), va, back.size()).ok()) return ~0ull;
    uint64_t changed = 0;
    for (size_t r = 0; r < kSecretBytes / kRecord; ++r) {
      const uint8_t* got = back.data() + r * kRecord;
      if (std::memcmp(got, secret.data() + r * kRecord, kRecord) == 0) continue;
      ++changed;
      if (std::memcmp(got, "PWNED", 5) == 0) ++*pwned;
    }
    return changed;
  };
  uint64_t pwned = 0;
  if (check(&pwned) != 0) return Fail("victim: the secret did not stick");
  Touch(dir + "/victim-ready", "ready\n");
  if (!WaitFor(dir + "/check", std::chrono::seconds(120))) return Fail("victim: no check signal");
  const uint64_t changed = check(&pwned);
  if (changed != 0) {
    return Fail("victim: " + std::to_string(changed) + " records of its secret changed, " +
                std::to_string(pwned) + " say PWNED");
  }
  g.ctx.reset();
  std::printf("PASSED victim\n");
  return 0;
}

// ---- the attacker ----

sigjmp_buf fault_jump;
void OnFault(int) { siglongjmp(fault_jump, 1); }
// One page of shared memory copied out, or false when reading it faults (SIGBUS/SIGSEGV, handled
// by OnFault while the scan runs).
[[gnu::noinline]] bool CopyPage(const uint8_t* page, uint8_t* out) {
  if (sigsetjmp(fault_jump, 1) != 0) return false;
  std::memcpy(out, page, kPage);
  return true;
}

struct Mapping {
  uint8_t* begin = nullptr;
  uint8_t* end = nullptr;
  std::string perms, name;
};
std::vector<Mapping> SharedReadableMappings() {
  std::vector<Mapping> out;
  std::istringstream maps([] {
    std::ifstream in("/proc/self/maps");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }());
  std::string line;
  while (std::getline(maps, line)) {
    Mapping m;
    uintptr_t b = 0, e = 0;
    char perms[8] = {};
    int name_at = 0;
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " %7s %*s %*s %*s%n", &b, &e, perms,
                    &name_at) < 3) {
      continue;
    }
    m.begin = reinterpret_cast<uint8_t*>(b);
    m.end = reinterpret_cast<uint8_t*>(e);
    m.perms = perms;
    if (name_at > 0 && size_t(name_at) < line.size()) {
      m.name = line.substr(size_t(name_at));
      m.name.erase(0, m.name.find_first_not_of(' '));
    }
    if (m.perms.size() >= 4 && m.perms[0] == 'r' && m.perms[3] == 's') out.push_back(m);
  }
  return out;
}

struct ScanCounts {
  uint64_t mappings = 0, bytes = 0, faults = 0;
  uint64_t secrets = 0, overwritten = 0, shadow_runs = 0, own_marker_in_vram = 0;
  std::string vram_mappings;  // "name:KiB ..." of mappings whose name says VRAM
};

// Counts runs of >= kShadowRun consecutive VRAM PTEs at or above `min_machine` whose addresses
// step by one small or one large page; `run`/`last` carry a run across pages.
void CountShadowRuns(const uint64_t* words, size_t n, uint64_t min_machine, uint64_t& run,
                     uint64_t& last, ScanCounts& c) {
  for (size_t i = 0; i < n; ++i) {
    const uint64_t w = words[i];
    const uint64_t address = vm::pte::Address(w);
    const bool pte = (w & vm::pte::kPresent) != 0 && vm::pte::TargetOf(w) == vm::Target::kVram &&
                     address >= min_machine;
    if (!pte) {
      run = 0;
      continue;
    }
    const bool follows = run > 0 && (address == last + kPage || address == last + (128 << 10));
    run = follows ? run + 1 : 1;
    last = address;
    if (run == kShadowRun) ++c.shadow_runs;
  }
}

int Attacker(const std::string& dir, uint64_t min_machine) {
  gpuvm::guest_program::LocalVmWithControlPage local =
      gpuvm::guest_program::OpenLocalVmWithControlPage();
  auto bus = gpuvm::guest::LocalTrapBus::Create(local.vm);
  if (!bus.ok()) return Fail("bus: " + bus.status().ToString());
  const LocalControlPage* page = local.page();

  // Ordinary work: a buffer filled by the GPU, a marker page copied in and read back.
  GuestGpu g = BringUp(bus->get());
  const uint64_t va = AllocDevice(g, kAttackerBytes);
  auto fill = g.ch->Memset32Async(va, 0x0a77ac4e, kAttackerBytes / 4);
  if (!fill.ok() || !g.ch->Synchronize().ok()) return Fail("memset");
  std::vector<uint8_t> marker(kPage);
  for (size_t r = 0; r < kPage / kRecord; ++r) std::memcpy(&marker[r * kRecord], kMarker, kRecord);
  if (!g.ch->CopyHostToDevice(va + kPage, marker.data(), kPage).ok()) return Fail("marker in");
  std::vector<uint8_t> back(kPage);
  if (!g.ch->CopyDeviceToHost(back.data(), va + kPage, kPage).ok() || back != marker) {
    return Fail("marker back");
  }

  // Small copies (the driver's BAR1 path) until ranges are published and their backing is mapped
  // in this process: a copy served from a published range maps it (LocalGuestIo).
  const uint64_t bar1 = (*bus)->bar_address(Bar::k1);
  const uint64_t bar1_size = (*bus)->pci().bar1_size;
  auto remapped = [&] {
    const uint32_t count =
        std::min<uint32_t>(__atomic_load_n(&page->memory_range_count, __ATOMIC_ACQUIRE),
                           gpuvm::hv::local::kMaxMemoryRanges);
    for (uint32_t i = 0; i < count; ++i) {
      const auto& r = page->memory_ranges[i];
      if (r.first >= bar1 && r.last < bar1 + bar1_size) return true;
    }
    return false;
  };
  auto vram_mapped = [] {
    for (const Mapping& m : SharedReadableMappings()) {
      if (m.name.find("vram") != std::string::npos) return true;
    }
    return false;
  };
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  uint32_t word = 0;
  do {
    if (Clock::now() > deadline) return Fail("BAR1 was never remapped");
    if (!g.ch->CopyDeviceToHost(&word, va, 4).ok() || word != 0x0a77ac4e) {
      return Fail("small copy");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  } while (!remapped() || !vram_mapped());

  // The scan.
  struct sigaction on_fault = {}, old_bus = {}, old_segv = {};
  on_fault.sa_handler = OnFault;
  sigemptyset(&on_fault.sa_mask);
  ::sigaction(SIGBUS, &on_fault, &old_bus);
  ::sigaction(SIGSEGV, &on_fault, &old_segv);
  ScanCounts c;
  const std::string prefix = kSecretPrefix;
  std::vector<uint8_t> copy(kPage);
  for (const Mapping& m : SharedReadableMappings()) {
    ++c.mappings;
    const bool vram = m.name.find("vram") != std::string::npos;
    if (vram) {
      c.vram_mappings += (c.vram_mappings.empty() ? "" : " ") + m.name + ":" +
                         std::to_string((m.end - m.begin) >> 10) + "KiB";
    }
    uint64_t run = 0, last = 0;
    for (uint8_t* p = m.begin; p < m.end; p += kPage) {
      // One read of shared memory; the rest is on the copy.
      if (!CopyPage(p, copy.data())) {
        ++c.faults;
        break;  // the rest of this mapping is not readable
      }
      c.bytes += kPage;
      CountShadowRuns(reinterpret_cast<const uint64_t*>(copy.data()), kPage / 8, min_machine, run,
                      last, c);
      for (size_t at = 0; at + kRecord <= kPage; at += 8) {
        if (vram && std::memcmp(copy.data() + at, kMarker, kRecord) == 0) ++c.own_marker_in_vram;
        if (std::memcmp(copy.data() + at, prefix.data(), prefix.size()) != 0) continue;
        ++c.secrets;
        std::memcpy(p + at, kPwned, kRecord);  // the overwrite: in place, in the shared mapping
        if (std::memcmp(p + at, kPwned, kRecord) == 0) ++c.overwritten;
      }
    }
  }
  ::sigaction(SIGBUS, &old_bus, nullptr);
  ::sigaction(SIGSEGV, &old_segv, nullptr);
  std::printf("attacker: mappings %" PRIu64 ", bytes %" PRIu64 ", faults %" PRIu64
              ", own marker in VRAM "
              "%" PRIu64 ", secret records %" PRIu64 ", overwritten %" PRIu64
              ", shadow PTE runs %" PRIu64 ", VRAM mappings [%s]\n",
              c.mappings, c.bytes, c.faults, c.own_marker_in_vram, c.secrets, c.overwritten,
              c.shadow_runs, c.vram_mappings.c_str());
  std::fflush(stdout);
  Touch(dir + "/attacker-done", "done\n");
  g.ctx.reset();
  return 0;
}

}  // namespace
}  // namespace gpuvm::guest_program

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  if (argc > 2 && what == "victim") return gpuvm::guest_program::Victim(argv[2]);
  if (argc > 3 && what == "attacker")
    return gpuvm::guest_program::Attacker(argv[2], std::strtoull(argv[3], nullptr, 0));
  std::fprintf(stderr, "usage: gpuvm-fv-scan-guest victim DIR | attacker DIR MIN_MACHINE\n");
  return 2;
}
