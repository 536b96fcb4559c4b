#include "aggregator/physical_gpu.h"

#include "gpu/hw/pbus.h"
#include "gpu/hw/pfb.h"
#include "gpu/hw/pfifo.h"
#include "gpu/hw/pgraph.h"
#include "gpu/hw/pmc.h"

namespace gpuvm::aggregator {

namespace pf = gf100::pfifo;

void QuiesceChannels(gpu::Device& device) {
  // Interrupts first, so nothing below raises the line towards the next owner.
  device.WriteReg(gf100::pmc::kIntrEnHost, 0);
  for (uint32_t chid = 0; chid < pf::kChannels; ++chid) {
    const uint32_t entry = pf::kChanTable + chid * pf::kChanTableStride;
    device.WriteReg(entry + 4, 0);  // not runnable
    device.WriteReg(entry, 0);      // invalid: unbound from its instance block
  }
  device.WriteReg(pf::kPlaylistWr, 0);
  device.WriteReg(pf::kPlaylistWrLen, 0);  // an empty playlist: nothing is scheduled
  device.WriteReg(pf::kPollArea, 0);
  device.WriteReg(gf100::pbus::kBar1Inst, 0);
  device.WriteReg(gf100::pbus::kBar3Inst, 0);
  device.WriteReg(pf::kIntrEn, 0);
  device.WriteReg(pf::kIntr, 0xffffffff);
  device.WriteReg(pf::kVmFaultSource, 0xffffffff);
  device.WriteReg(pf::kRunlistIntr, 0xffffffff);
  device.WriteReg(gf100::pgraph::kIntrEn, 0);
  device.WriteReg(gf100::pgraph::kIntr, 0xffffffff);
}

uint64_t ProbeVramBytes(gpu::Device& device) {
  const uint32_t count = device.ReadReg(gf100::pfb::kFbpCount);
  if (count == 0 || count > gf100::pfb::kMaxFbps) return 0;
  const uint32_t disabled = device.ReadReg(gf100::pfb::kFbpDisabledMask);
  uint64_t total = 0;
  for (uint32_t n = 0; n < count; ++n) {
    if (disabled & (1u << n)) continue;
    total += uint64_t{device.ReadReg(gf100::pfb::kFbpAmount + n * gf100::pfb::kFbpStride)}
             << gf100::pfb::kAmountShift;
  }
  return total;
}

void ScrubVramThroughPramin(gpu::Device& device, uint64_t bytes) {
  const uint32_t saved = device.ReadReg(gf100::pbus::kPraminBase);
  for (uint64_t base = 0; base < bytes; base += gf100::pbus::kPraminWindowSize) {
    device.WriteReg(gf100::pbus::kPraminBase,
                    static_cast<uint32_t>(base >> gf100::pbus::kPraminBaseShift));
    const uint64_t span = std::min<uint64_t>(gf100::pbus::kPraminWindowSize, bytes - base);
    for (uint64_t off = 0; off < span; off += 4) {
      device.WriteReg(static_cast<uint32_t>(gf100::pbus::kPraminWindow + off), 0);
    }
  }
  device.WriteReg(gf100::pbus::kPraminBase, saved);
}

}  // namespace gpuvm::aggregator
