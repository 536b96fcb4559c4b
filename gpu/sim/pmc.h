// PMC of the software GPU: the chip id, engine enables and the top of the interrupt tree. Units
// report whether they have an interrupt pending (level); PMC combines them with its enable and mask
// registers into the level of the one interrupt line.
//
// Threading: not thread-safe; the device calls it with its register lock held.
#ifndef GPUVM_GPU_SIM_PMC_H_
#define GPUVM_GPU_SIM_PMC_H_

#include <cstdint>

#include "gpu/hw/pmc.h"

namespace gpuvm::sim {

class Pmc {
 public:
  // Returns false for offsets PMC does not implement.
  bool Read(uint32_t offset, uint32_t* value) const;
  bool Write(uint32_t offset, uint32_t value);

  // A unit's pending state, as an INTR_HOST bit (gf100::pmc::kIntr*).
  void SetSource(uint32_t bit, bool pending) {
    sources_ = pending ? (sources_ | bit) : (sources_ & ~bit);
  }
  bool line() const;
  uint32_t enable() const { return enable_; }

 private:
  uint32_t enable_ = gf100::pmc::kEnableResetValue;
  uint32_t intr_en_ = 0;
  uint32_t intr_mask_ = 0xffffffff;
  uint32_t sources_ = 0;   // hardware sources
  bool software_ = false;  // INTR_HOST bit 31, set and cleared by the driver
};

}  // namespace gpuvm::sim

#endif  // GPUVM_GPU_SIM_PMC_H_
