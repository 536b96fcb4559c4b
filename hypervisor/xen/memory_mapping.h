// BAR remap on Xen: what the device model asks of the hypervisor when a guest's BAR range stops
// trapping (IoreqServer::MapMemoryRange). Xen backs guest-physical frames with machine frames in
// the guest's p2m — XEN_DOMCTL_memory_mapping through libxenctrl's xc_domain_memory_mapping, after
// XEN_DOMCTL_iomem_permission (xc_domain_iomem_permission) lets the domain have them, as QEMU does
// for a passed-through BAR. The ioreq server's MMIO claim on those frames stays: Xen only turns
// accesses to frames without a p2m entry into ioreqs, so removing the mapping (DPCI_REMOVE_MAPPING)
// makes them trap again.
//
// The machine frames are a real GPU's BAR1/BAR3 aperture (pci_gpu: the aggregator programs the
// physical BAR page tables so the VM's part of the aperture reaches only its VRAM), or device
// memory the software GPU keeps its VRAM in (gpuvm-aggregator --sim-vram-file: a PCI BAR's sysfs
// resourceN file, e.g. the Xen test bed's ivshmem BAR2). A descriptor backing is resolved to
// machine frames when it is such a resource file (MachineBackingOfFd: the file's path, and the
// BAR's start from the device's `resource` file beside it). Anything else — a dom0 memfd, the
// software GPU's default VRAM — is dom0 RAM, which cannot be put into a guest's p2m this way:
// Unimplemented, and the range keeps trapping (correct, only slower).
//
// This unit is the arithmetic and the checks, independent of libxen (unit-tested everywhere); the
// calls are in ioreq_server.cc.
//
// Threading: pure functions (MachineBacking* read sysfs, nothing shared).
#ifndef GPUVM_HYPERVISOR_XEN_MEMORY_MAPPING_H_
#define GPUVM_HYPERVISOR_XEN_MEMORY_MAPPING_H_

#include <cstdint>
#include <string>

#include "base/status.h"
#include "hypervisor/ioreq_server.h"

namespace gpuvm::hv::xen {

struct MemoryMappingPlan {
  uint64_t first_gfn = 0;  // guest frame of `first`
  uint64_t first_mfn = 0;  // machine frame backing it
  uint64_t frames = 0;
};

// The frames for MapMemoryRange(first, last, backing) of a machine-address backing. InvalidArgument
// for partial pages or a range that wraps; Unimplemented for a descriptor backing (resolve it with
// MachineBackingOfFd first); OutOfRange for frame numbers Xen cannot hold (gfn/mfn beyond 2^40
// frames) or more than 2^20 frames in one call.
Result<MemoryMappingPlan> PlanMemoryMapping(uint64_t first, uint64_t last,
                                            const MemoryBacking& backing);

// [offset, offset + length) of the file at `path` as machine memory, when `path` is a PCI BAR's
// sysfs file (DIR/resourceN or DIR/resourceN_wc, N = 0..5) and DIR/resource says where that BAR is
// (line N: "start end flags", a memory BAR with an address). Unimplemented for any other file (not
// device memory); FailedPrecondition for an I/O-port or unassigned BAR; OutOfRange when the range
// does not fit in the BAR.
Result<MemoryBacking> MachineBackingOfFile(const std::string& path, uint64_t offset,
                                           uint64_t length);
// The same for an open descriptor (its path from /proc/self/fd, checked to be the same file).
Result<MemoryBacking> MachineBackingOfFd(int fd, uint64_t offset, uint64_t length);

}  // namespace gpuvm::hv::xen

#endif  // GPUVM_HYPERVISOR_XEN_MEMORY_MAPPING_H_
