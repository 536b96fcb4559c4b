#include "gpu/sim/pmc.h"

namespace gpuvm::sim {

namespace pmc = gf100::pmc;

bool Pmc::Read(uint32_t offset, uint32_t* value) const {
  switch (offset) {
    case pmc::kBoot0:
      *value = pmc::kBoot0Value;
      return true;
    case pmc::kIntrHost:
      *value = (sources_ & ~pmc::kIntrSoftware) | (software_ ? pmc::kIntrSoftware : 0);
      return true;
    case pmc::kIntrEnHost:
      *value = intr_en_;
      return true;
    case pmc::kIntrMaskHost:
      *value = intr_mask_;
      return true;
    case pmc::kEnable:
      *value = enable_;
      return true;
  }
  return false;
}

bool Pmc::Write(uint32_t offset, uint32_t value) {
  switch (offset) {
    case pmc::kBoot0:
      return true;  // read-only
    case pmc::kIntrHost:
      // Hardware bits are read-only summaries (cleared in their units); bit 31 is the software
      // interrupt.
      software_ = (value & pmc::kIntrSoftware) != 0;
      return true;
    case pmc::kIntrEnHost:
      intr_en_ = value & (pmc::kIntrEnHardware | pmc::kIntrEnSoftware);
      return true;
    case pmc::kIntrMaskHost:
      intr_mask_ = value;
      return true;
    case pmc::kEnable:
      enable_ = value;
      return true;
  }
  return false;
}

bool Pmc::line() const {
  const bool hardware =
      (intr_en_ & pmc::kIntrEnHardware) && (sources_ & intr_mask_ & ~pmc::kIntrSoftware) != 0;
  const bool software =
      (intr_en_ & pmc::kIntrEnSoftware) && software_ && (intr_mask_ & pmc::kIntrSoftware);
  return hardware || software;
}

}  // namespace gpuvm::sim
