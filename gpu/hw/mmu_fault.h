// GF100 MMU fault reasons, as recorded in VM_FAULT[i] flags bits 0-3.
// Source: envytools rnndb/memory/gf100_vm.xml (VM_FAULT reason enum) and
// docs/FERMI-FACTS.md. Facts only; the software GPU (gpu/sim) and the compute engine
// share them.
#ifndef GPUVM_GPU_HW_MMU_FAULT_H_
#define GPUVM_GPU_HW_MMU_FAULT_H_

#include <cstdint>
#include <iterator>

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

// The reasons above by value: nouveau's name (gf100_vm.xml's enum; what the guest driver logs) and
// a phrase for the software GPU's messages (ours).
struct FaultReasonText {
  const char* name;
  const char* phrase;
};
inline constexpr FaultReasonText kFaultReasonTexts[] = {
    {"PT_NOT_PRESENT", "page table not present"},
    {"PT_TOO_SHORT", "page table too short"},
    {"PAGE_NOT_PRESENT", "page not present"},
    {"VSPACE_LIMIT", "beyond the address space limit"},
    {"NO_CHANNEL", "no channel"},
    {"PAGE_SUPERVISOR_ONLY", "supervisor-only page"},
    {"PAGE_READ_ONLY", "read-only page"},
};
static_assert(std::size(kFaultReasonTexts) == static_cast<size_t>(FaultReason::kPageReadOnly) + 1);
// The text of reason value `reason`; null for a value that is no FaultReason.
constexpr const FaultReasonText* FaultReasonTextOf(uint32_t reason) {
  return reason < std::size(kFaultReasonTexts) ? &kFaultReasonTexts[reason] : nullptr;
}

// Not the hardware's: gpuvm's full virtualization reports a fault on a page the guest mapped but
// the over-committed GPU had no VRAM left for (docs/FULL-VIRTUALIZATION.md, "Out of VRAM") with
// this reason, so the guest driver can say "out of memory" instead of "bad address". (our choice)
// 0xf: no GF100 reason we know of uses it (nouveau names 0x0-0x6, 0xa and 0xc for GF100); the
// software GPU never reports it.
inline constexpr uint32_t kFaultReasonGpuvmOutOfVram = 0xf;

// Which unit saw the fault: the index of the VM_FAULT[] record it lands in and the bit it sets in
// PFIFO's VM_FAULT_SOURCE (0x259c). Source: envytools rnndb/memory/gf100_vm.xml GF100_VM_ENGINE.
enum class FaultUnit : uint8_t {
  kPgraph = 0x00,
  kPeephole = 0x03,
  kBar1 = 0x04,
  kBar3 = 0x05,
  kPsubfifo0 =
      0x07,  // PFIFO's command fetch (GPFIFO, pushbuffers, semaphores); nouveau calls it "PFIFO"
  kPcopy0 = 0x15,
  kPcopy1 = 0x16,
};

// VM_FAULT[i].FLAGS client field (bits 8-12) for hub clients (bit 6 set).
// Source: envytools rnndb/memory/gf100_vm.xml GF100_VM_HUBCLIENT.
enum class FaultHubClient : uint8_t {
  kPcopy0 = 0x01,
  kPcopy1 = 0x02,
  kDispatch = 0x04,
  kPfifo = 0x06,
  kBar = 0x07,
};
// GPC clients (bit 6 clear): GF100_VM_GPCCLIENT. TPC0_L1 is the compute units' load/store path.
enum class FaultGpcClient : uint8_t { kTpc0L1 = 0x00 };

}  // namespace gpuvm::gf100

#endif  // GPUVM_GPU_HW_MMU_FAULT_H_
