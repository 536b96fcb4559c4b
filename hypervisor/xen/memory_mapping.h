// BAR remap on Xen: what the device model asks of the hypervisor when a guest's BAR range stops
// trapping (IoreqServer::MapMemoryRange). Xen backs guest-physical frames with machine frames in
// the guest's p2m — XEN_DOMCTL_memory_mapping through libxenctrl's xc_domain_memory_mapping, after
// XEN_DOMCTL_iomem_permission (xc_domain_iomem_permission) lets the domain have them, as QEMU does
// for a passed-through BAR. The ioreq server's MMIO claim on those frames stays: Xen only turns
// accesses to frames without a p2m entry into ioreqs, so removing the mapping (DPCI_REMOVE_MAPPING)
// makes them trap again.
//
// The machine frames are a real GPU's BAR1/BAR3 aperture (pci_gpu: the aggregator programs the
// physical BAR page tables so the VM's part of the aperture reaches only its VRAM). The software
// GPU's VRAM is a dom0 memfd: dom0 RAM cannot be put into a guest's p2m this way, so a memfd
// backing is Unimplemented on Xen and the range keeps trapping (correct, only slower).
//
// This unit is the arithmetic and the checks, independent of libxen (unit-tested everywhere); the
// calls are in ioreq_server.cc.
//
// Threading: pure functions.
#ifndef GPUVM_HYPERVISOR_XEN_MEMORY_MAPPING_H_
#define GPUVM_HYPERVISOR_XEN_MEMORY_MAPPING_H_

#include <cstdint>

#include "base/status.h"
#include "hypervisor/ioreq_server.h"

namespace gpuvm::hv::xen {

struct MemoryMappingPlan {
  uint64_t first_gfn = 0;  // guest frame of `first`
  uint64_t first_mfn = 0;  // machine frame backing it
  uint64_t frames = 0;
};

// The frames for MapMemoryRange(first, last, backing). InvalidArgument for partial pages or a
// range that wraps; Unimplemented for a descriptor backing (see above); OutOfRange for frame
// numbers Xen cannot hold (gfn/mfn beyond 2^40 frames) or more than 2^20 frames in one call.
Result<MemoryMappingPlan> PlanMemoryMapping(uint64_t first, uint64_t last,
                                            const MemoryBacking& backing);

}  // namespace gpuvm::hv::xen

#endif  // GPUVM_HYPERVISOR_XEN_MEMORY_MAPPING_H_
