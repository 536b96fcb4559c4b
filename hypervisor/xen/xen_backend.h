// The Xen backend of the hypervisor port: each entry point opens what it needs from the Xen
// toolstack libraries and returns a port interface. Without Xen (no /dev/xen, no privcmd) every
// entry point fails cleanly with Unavailable — no crash, no partial state. Code outside hypervisor/
// reaches them through the factory (hypervisor/backend.h: OpenBackend(BackendKind::kXen)), whose
// Backend is NewBackend() here.
//
// Runs in dom0 (or a device-model stub domain with the right privileges). docs/HYPERVISOR.md has
// the process model; the Xen test bed (make xen-test, docs/XEN-TESTBED.md) runs these for real.
//
// Threading: as the port interfaces (one owner thread per object).
#ifndef GPUVM_HYPERVISOR_XEN_XEN_BACKEND_H_
#define GPUVM_HYPERVISOR_XEN_XEN_BACKEND_H_

#include <memory>

#include "hypervisor/backend.h"
#include "hypervisor/event_channels.h"
#include "hypervisor/grants.h"
#include "hypervisor/guest_memory.h"
#include "hypervisor/ioreq_server.h"
#include "hypervisor/store.h"

namespace gpuvm::hv::xen {

// The standalone IOREQ server sequence for HVM domain `domid`: create the server (with a buffered
// ring), map its ioreq pages (xenforeignmemory_map_resource: the buffered page and the synchronous
// page), enable it, bind one event channel per vCPU plus the buffered ring's. Claims (PCI device,
// MMIO ranges) follow through the IoreqServer calls. Destruction tears down in reverse from
// whichever step creation reached.
Result<std::unique_ptr<IoreqServer>> CreateIoreqServer(DomainId domid);

// Foreign mappings of `domid`'s guest frames (libxenforeignmemory), bounded by the domain's maximum
// guest frame number (libxenctrl).
Result<std::unique_ptr<GuestMemory>> OpenGuestMemory(DomainId domid);
// A whole HVM guest's RAM for a device that DMAs into it (the aggregator in pt mode): frames
// [0, frames) of `domid` mapped read-write into one contiguous range. An HVM guest's physical map
// has holes below its RAM's end (the VGA window at frames 0xa0-0xbf is never populated; ballooned
// pages), which GuestMemory::Map refuses; here each hole is backed by private anonymous pages of
// ours instead, so a device access there reads zeros and writes into our scratch memory — never
// into another domain, never a fault. `holes`, when given, receives the number of hole frames.
// OutOfRange past the domain's frames; InvalidArgument for 0 or more than 2^20 frames. (Added for
// the Xen test bed, issue 8.)
Result<std::unique_ptr<GuestMapping>> MapGuestRam(DomainId domid, uint64_t frames,
                                                  uint64_t* holes = nullptr);

Result<std::unique_ptr<EventChannels>> OpenEventChannels();
Result<std::unique_ptr<GrantSharer>> OpenGrantSharer();
Result<std::unique_ptr<GrantMapper>> OpenGrantMapper();
Result<std::unique_ptr<Store>> OpenStore();

// The factory's Xen Backend: the entry points above behind hv::Backend.
std::unique_ptr<Backend> NewBackend();

}  // namespace gpuvm::hv::xen

#endif  // GPUVM_HYPERVISOR_XEN_XEN_BACKEND_H_
