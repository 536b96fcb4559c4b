// libFuzzer target: random register writes and BAR accesses. Each 13-byte record is one access:
//   byte 0: bits 0-1 BAR (0, 1, 3), bit 2 write, bits 3-4 width (1/2/4/8 bytes), bits 5-7 region
//   selector; bytes 1-4: offset (folded into the selected region), bytes 5-12: value.
// Selector 7 instead runs the channels for a few slices. The world starts with a channel already
// set up (see fuzz_world.h), so writes to CHAN_TABLE, the playlist, PRAMIN (page tables, RAMFC) and
// USER pages reach deep states. Nothing a driver writes may crash the device or cause undefined
// behaviour.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gpu/hw/pbus.h"
#include "gpu/hw/pfifo.h"
#include "gpu/hw/vm.h"
#include "gpu/sim/fuzz/fuzz_world.h"

using gpuvm::gpu::Bar;
using gpuvm::gpu::Width;
using gpuvm::sim::fuzz::World;

namespace {

// BAR0 regions the selector folds offsets into.
struct Region {
  uint32_t base;
  uint32_t size;
};
constexpr Region kRegions[] = {
    {0x000000, 0x1000},                             // PMC
    {0x001700, 0x100},                              // PBUS (PRAMIN base, BAR instances)
    {0x002000, 0x2000},                             // PFIFO incl. CHAN_TABLE
    {gpuvm::gf100::pfifo::kSubfifo, 0x6000},        // PSUBFIFO
    {gpuvm::gf100::vm::kCfg, 0x40},                 // MMU
    {gpuvm::gf100::pbus::kPraminWindow, 0x100000},  // PRAMIN window
    {0x000000, 0x1000000},                          // anywhere in BAR0
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World world;
  gpuvm::gpu::Device* dev = world.device.get();
  for (size_t pos = 0; pos + 13 <= size; pos += 13) {
    const uint8_t op = data[pos];
    uint32_t offset;
    uint64_t value;
    std::memcpy(&offset, data + pos + 1, 4);
    std::memcpy(&value, data + pos + 5, 8);
    const uint32_t selector = op >> 5;
    if (selector == 7) {
      world.device->RunUntilIdle(8);
      continue;
    }
    static constexpr Bar kBars[] = {Bar::k0, Bar::k1, Bar::k3, Bar::k0};
    const Bar bar = kBars[op & 3];
    const Width width = Width(1u << ((op >> 3) & 3));
    uint64_t at = offset;
    if (bar == Bar::k0) {
      const Region& r = kRegions[selector];
      at = r.base + (offset % r.size);
    }
    if (op & 4) {
      dev->Write(bar, at, width, value);
    } else {
      (void)dev->Read(bar, at, width);
    }
  }
  world.device->RunUntilIdle(64);
  return 0;
}
