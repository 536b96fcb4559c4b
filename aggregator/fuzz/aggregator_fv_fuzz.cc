// libFuzzer target: one hostile fv VM's BAR accesses against a victim fv VM's memory. Two
// FullVirtGpus share a software GPU (no engine thread: the attacker's channels run when the input
// says so, on this thread). The victim's VRAM slice and RAM hold a known pattern; whatever the
// attacker does — registers, PRAMIN, its BAR1/BAR3 apertures, USER pages, page tables it builds
// through PRAMIN, channels it binds and kicks — the victim's bytes must be untouched afterwards
// (checked after every input; a difference aborts). ASan/UBSan catch the rest.
//
// The attacker is fv-naive, fv-lazy, pv-naive or pv-multicall (the input's size picks). A pv
// attacker has a call area of 4 pages registered at the start whose bytes are the input's first
// 16 KiB (so the fuzzer writes its batches), and PV window writes ring them (docs/PARAVIRT.md).
//
// Input: records of 12 bytes: [u8 op][u8 selector][u16 offset low][u32 offset/value][u32 value]
//   op % 8 == 0..3  a BAR0 write to a register chosen by `selector` (sensitive ones first) + a
//                   small offset, or anywhere in BAR0 (op & 8)
//   op % 8 == 4     a PRAMIN write (base register, then the window); op & 32: a PV window write
//                   (the doorbell when op & 64) with `value`
//   op % 8 == 5     a BAR1 write (USER area or aperture), op & 16: BAR3
//   op % 8 == 6     a read of the same kinds (interrupt state polled as the server would)
//   op % 8 == 7     the GPU runs a few time slices
// Seeds: aggregator/fuzz/aggregator_fv_fuzz/.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "aggregator/fv_gpu.h"
#include "aggregator/fv_host.h"
#include "aggregator/guest_ram.h"
#include "aggregator/sim_gpu.h"
#include "base/os.h"
#include "gpu/hw/pbus.h"
#include "gpu/hw/pfifo.h"
#include "gpu/hw/pgraph.h"
#include "gpu/hw/pmc.h"
#include "gpu/hw/vm.h"
#include "pv/protocol.h"

namespace {

using namespace gpuvm::aggregator;  // NOLINT: a fuzz target's brevity
namespace pf = gpuvm::gf100::pfifo;
namespace pbus = gpuvm::gf100::pbus;
namespace vm = gpuvm::gf100::vm;
namespace pmc = gpuvm::gf100::pmc;
namespace pgraph = gpuvm::gf100::pgraph;

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kSlice = 2 * kMiB;
constexpr uint64_t kRam = 1 * kMiB;

const uint32_t kRegisters[] = {pmc::kIntrHost,
                               pmc::kIntrEnHost,
                               pmc::kEnable,
                               pbus::kPraminBase,
                               pbus::kBar1Inst,
                               pbus::kBar3Inst,
                               pf::kIntr,
                               pf::kIntrEn,
                               pf::kPollArea,
                               pf::kPlaylistWr,
                               pf::kPlaylistWrLen,
                               pf::kKickChid,
                               pf::kVmFaultSource,
                               pf::kRunlistIntr,
                               pf::kChanTable,
                               pf::kChanTable + 4,
                               pf::kChanTable + 8,
                               pf::kChanTable + 12,
                               pf::kChanTable + 0x3f8,
                               vm::kCfg,
                               vm::kTlbFlushVspace,
                               vm::kTlbFlushTrigger,
                               vm::kTlbFlushPage,
                               pgraph::kIntr,
                               pgraph::kTrap,
                               pgraph::kTpc0MpWarpError,
                               pgraph::kTpc0MpGlobalError,
                               pf::kSubfifo + pf::kSubfifoIntr,
                               pf::kVmFault};

struct World {
  std::unique_ptr<SimGpu> gpu;
  std::unique_ptr<FvHost> host;
  std::unique_ptr<GuestRam> attacker_ram, victim_ram;
};

std::unique_ptr<GuestRam> MakeRam() {
  auto fd = gpuvm::os::CreateSealedMemfd("fv-fuzz", kRam);
  if (!fd.ok()) std::abort();
  auto ram = GuestRam::FromLocalMemfd(std::move(*fd), kRam);
  if (!ram.ok()) std::abort();
  return std::move(*ram);
}

World& TheWorld() {
  static World* world = [] {
    auto* w = new World;
    SimGpuOptions o;
    o.vram_bytes = 64 * kMiB;
    o.threaded = false;
    o.compute_engine = false;
    auto gpu = SimGpu::Create(o);
    if (!gpu.ok()) std::abort();
    w->gpu = std::move(*gpu);
    FvOptions fv;
    fv.reserved_bytes = 16 * kMiB;
    // Static slices: the victim's VRAM is one known range to fill and compare (dynamic VRAM's
    // isolation is VramMapTest's, FvVramPolicyTest's and FvIsolationTest's).
    fv.vram_policy = VramPolicy::kStatic;
    auto host = FvHost::Create(w->gpu.get(), fv);
    if (!host.ok()) std::abort();
    w->host = std::move(*host);
    w->attacker_ram = MakeRam();
    w->victim_ram = MakeRam();
    return w;
  }();
  return *world;
}

uint8_t Pattern(uint64_t i) { return uint8_t(i * 131 + (i >> 12) * 7 + 1); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World& w = TheWorld();
  const VmBars bars{16 * kMiB, 128 * kMiB, 64 * kMiB};
  static constexpr FvMode kAttackerModes[] = {FvMode::kNaive, FvMode::kLazy, FvMode::kPvNaive,
                                              FvMode::kPvMulticall};
  FvVmOptions a_options{.mode = kAttackerModes[size % 4],
                        .vram_bytes = kSlice,
                        .channels = 4,
                        .vm_id = 1,
                        .name = "attacker"};
  FvVmOptions v_options{
      .mode = FvMode::kNaive, .vram_bytes = kSlice, .channels = 4, .vm_id = 2, .name = "victim"};
  auto victim = FullVirtGpu::Create(w.host.get(), bars, v_options);
  auto attacker = FullVirtGpu::Create(w.host.get(), bars, a_options);
  if (!victim.ok() || !attacker.ok()) std::abort();
  if (!(*victim)->AttachGuestRam(*w.victim_ram).ok()) std::abort();
  if (!(*attacker)->AttachGuestRam(*w.attacker_ram).ok()) std::abort();

  // The victim's memory: a known pattern.
  static const std::vector<uint8_t> vram_pattern = [] {
    std::vector<uint8_t> p(kSlice);
    for (uint64_t i = 0; i < kSlice; ++i) p[i] = Pattern(i);
    return p;
  }();
  static const std::vector<uint8_t> ram_pattern = [] {
    std::vector<uint8_t> p(kRam);
    for (uint64_t i = 0; i < kRam; ++i) p[i] = Pattern(i ^ 0x55);
    return p;
  }();
  std::span<uint8_t> vram_of_victim =
      w.gpu->vram_mapping().subspan((*victim)->partition().vram_base, kSlice);
  std::span<uint8_t> ram = w.victim_ram->bytes();
  std::memcpy(vram_of_victim.data(), vram_pattern.data(), kSlice);
  std::memcpy(ram.data(), ram_pattern.data(), kRam);

  FullVirtGpu& a = **attacker;
  if (a.pv() != nullptr) {
    // A call area: the page list at RAM 0, four pages from 0x1000 holding the input's first bytes.
    std::span<uint8_t> own = w.attacker_ram->bytes();
    std::memset(own.data(), 0, 5 * 4096);
    for (uint64_t i = 0; i < 4; ++i) {
      const uint64_t page = 0x1000 * (i + 1);
      std::memcpy(own.data() + 8 * i, &page, 8);
    }
    std::memcpy(own.data() + 0x1000, data, std::min<size_t>(size, 4 * 4096));
    (void)a.Write(gpuvm::gpu::Bar::k0, gpuvm::pv::kRegAreaListLo, 4, 0, 0);
    (void)a.Write(gpuvm::gpu::Bar::k0, gpuvm::pv::kRegAreaPages, 4, 4, 0);
  }
  for (size_t at = 0; at + 12 <= size; at += 12) {
    const uint8_t op = data[at];
    const uint8_t selector = data[at + 1];
    uint16_t low;
    uint32_t word, value;
    std::memcpy(&low, data + at + 2, 2);
    std::memcpy(&word, data + at + 4, 4);
    std::memcpy(&value, data + at + 8, 4);
    switch (op % 8) {
      case 0:
      case 1:
      case 2:
      case 3: {
        const uint32_t offset = (op & 8) ? (word & (16 * kMiB - 4))
                                         : kRegisters[selector % std::size(kRegisters)] +
                                               (low & 0x3fc) * (selector >> 6);
        (void)a.Write(gpuvm::gpu::Bar::k0, offset, 4, value, 0);
        break;
      }
      case 4:
        if (op & 32) {
          const uint32_t reg = (op & 64) ? gpuvm::pv::kRegDoorbell
                                         : gpuvm::pv::kWindow + (low & (gpuvm::pv::kWindowSize - 4));
          (void)a.Write(gpuvm::gpu::Bar::k0, reg, 4, value, 0);
          break;
        }
        (void)a.Write(gpuvm::gpu::Bar::k0, pbus::kPraminBase, 4, word >> 16, 0);
        (void)a.Write(gpuvm::gpu::Bar::k0, pbus::kPraminWindow + (low & 0xfffc), 4, value, 0);
        break;
      case 5:
        (void)a.Write((op & 16) ? gpuvm::gpu::Bar::k3 : gpuvm::gpu::Bar::k1, word & (64 * kMiB - 8),
                      1u << (selector % 4), uint64_t(value) << 32 | word, 0);
        break;
      case 6: {
        const gpuvm::gpu::Bar bar = selector % 3 == 0   ? gpuvm::gpu::Bar::k0
                                    : selector % 3 == 1 ? gpuvm::gpu::Bar::k1
                                                        : gpuvm::gpu::Bar::k3;
        (void)a.Read(bar, word & (16 * kMiB - 8), 4, 0);
        (void)a.interrupt_asserted();
        break;
      }
      case 7:
        w.gpu->sim_device()->RunUntilIdle(1 + selector % 16);
        (void)a.interrupt_asserted();
        break;
    }
  }
  w.gpu->sim_device()->RunUntilIdle(64);
  (void)a.interrupt_asserted();

  // The attacker must not have reached the victim's VRAM or RAM.
  if (std::memcmp(vram_of_victim.data(), vram_pattern.data(), kSlice) != 0) __builtin_trap();
  if (std::memcmp(ram.data(), ram_pattern.data(), kRam) != 0) __builtin_trap();
  (void)(*attacker)->Detach();
  (void)(*victim)->Detach();
  return 0;
}
