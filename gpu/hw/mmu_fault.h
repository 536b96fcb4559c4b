// GF100 MMU fault reasons, as recorded in VM_FAULT[i] flags bits 0-3.
// Source: envytools rnndb/memory/gf100_vm.xml (VM_FAULT reason enum) and ../shared/design/FERMI-FACTS.md.
// Facts only; the software GPU (gpu/sim) and the compute engine share them.
#ifndef GPUVM_GPU_HW_MMU_FAULT_H_
#define GPUVM_GPU_HW_MMU_FAULT_H_

#include <cstdint>

namespace gpuvm::gf100 {

enum class FaultReason : uint8_t {
  kPtNotPresent = 0,
  kPtTooShort = 1,
  kPageNotPresent = 2,
  kVspaceLimit = 3,
  kNoChannel = 4,
  kPageSupervisorOnly = 5,
  kPageReadOnly = 6,
};

}  // namespace gpuvm::gf100

#endif  // GPUVM_GPU_HW_MMU_FAULT_H_
