// Xen's ioreq ABI: the per-vCPU synchronous ioreq slots (shared_iopage_t), their state machine, and
// the buffered ioreq ring (buffered_iopage_t), with the layouts taken from the real header
// <xen/hvm/ioreq.h>. This is the one place that reads or writes ioreq_t; it translates to and from
// the port's IoRequest. Both backends use it: xen/ on the pages Xen shares with an IOREQ server,
// local/ on the same layout in shared memory between a VM process and its device model. Nothing
// here calls libxen, so tests drive it on an ordinary page.
//
// The state machine of one slot (Xen's rules, with its barriers as acquire/release on the state
// byte):
//   NONE --requester fills the slot, then (release) READY + notify--> READY
//   READY --server sees READY (acquire), copies the slot ONCE, marks--> INPROCESS
//   INPROCESS --server writes data, then (release) IORESP_READY + notify--> IORESP_READY
//   IORESP_READY --requester sees it (acquire), reads data, marks--> NONE
// The server never re-reads the slot after the copy: on the local backend the requester is the
// guest process, which can scribble on the page at any time (a "torn" page), so all decisions are
// made on the copy (CONTRIBUTING.md, "Code").
//
// Threading: an IoreqServerSlots is used by one thread (the device model loop); an
// IoreqRequesterSlots by one thread per vCPU index. The two ends may live in different processes.
#ifndef GPUVM_HYPERVISOR_XEN_ABI_IOREQ_PAGE_H_
#define GPUVM_HYPERVISOR_XEN_ABI_IOREQ_PAGE_H_

#include <cstdint>
#include <optional>
#include <vector>

extern "C" {
#include <xen/hvm/ioreq.h>
}

#include "base/status.h"
#include "hypervisor/types.h"

namespace gpuvm::hv::xen_abi {

static_assert(sizeof(ioreq_t) == 32, "ioreq_t layout changed");
static_assert(sizeof(buf_ioreq_t) == 8, "buf_ioreq_t layout changed");
static_assert(sizeof(buffered_iopage_t) <= kPageSize, "buffered_iopage_t exceeds a page");

// One 4 KiB page holds this many vCPU slots (Xen maps further pages for larger guests; we stop
// here).
inline constexpr uint32_t kMaxVcpusPerPage = kPageSize / sizeof(ioreq_t);
// The state nibble shares byte 30 of ioreq_t with data_is_ptr/dir/df (GCC's x86-64 bitfield layout,
// checked by the tests).
inline constexpr size_t kStateByteOffset = 30;

// ioreq_t (a copy) <-> IoRequest. FromXen keeps every field as sent; it validates nothing.
IoRequest FromXen(const ioreq_t& copy, uint32_t vcpu);
ioreq_t ToXen(const IoRequest& request);
// Xen's PCI config address: segment 63..48, bus 47..40, device 39..35, function 34..32,
// offset 31..0.
uint64_t PciConfigAddress(const Sbdf& sbdf, uint32_t offset);

// Copies slot `vcpu` of the page with single (non-tearing) 8-byte loads.
ioreq_t LoadSlot(const void* page, uint32_t vcpu);
uint8_t LoadState(const void* page, uint32_t vcpu);  // acquire

// The server (device model) end of a page of vCPU slots.
class IoreqServerSlots {
 public:
  // `page` is one page of ioreq slots, valid for this object's life; vcpus <= kMaxVcpusPerPage.
  IoreqServerSlots(void* page, uint32_t vcpus);

  uint32_t vcpus() const { return vcpus_; }
  // When the slot is READY: copies it once, marks it INPROCESS and returns the copy.
  std::optional<ioreq_t> TryTake(uint32_t vcpu);
  // Stores `data` (when given) and then, with release order, IORESP_READY. The caller notifies.
  void Respond(uint32_t vcpu, std::optional<uint64_t> data);
  uint8_t state(uint32_t vcpu) const { return LoadState(page_, vcpu); }
  // The per-vCPU event channel port Xen wrote into the slot (valid once the server is enabled).
  uint32_t event_port(uint32_t vcpu) const;

 private:
  void* page_;
  uint32_t vcpus_;
};

// The requesting end: Xen itself on Xen; the guest's trap library on the local backend.
class IoreqRequesterSlots {
 public:
  IoreqRequesterSlots(void* page, uint32_t vcpus);

  // Fills the slot and marks it READY (release). FailedPrecondition unless the slot is NONE. The
  // caller notifies.
  Status Submit(uint32_t vcpu, const ioreq_t& request);
  // When the slot is IORESP_READY: reads the response data (acquire), marks the slot NONE, returns
  // it.
  std::optional<uint64_t> TryCollect(uint32_t vcpu);
  uint8_t state(uint32_t vcpu) const { return LoadState(page_, vcpu); }
  // Abandons an outstanding request (the requester gave up waiting): the slot goes back to NONE.
  void Reset(uint32_t vcpu);

 private:
  void* page_;
  uint32_t vcpus_;
};

// The consumer end of Xen's buffered ioreq ring (posted writes that need no completion).
class BufferedIoreqRing {
 public:
  explicit BufferedIoreqRing(void* page) : page_(page) {}
  // The next posted write as an IoRequest (vcpu 0, buffered = true), or nullopt when the ring is
  // empty. DataLoss when the producer's pointers are impossible (more than a ring's worth
  // outstanding, or an 8-byte write missing its second half); the ring is then skipped to the
  // producer's position.
  Result<std::optional<IoRequest>> Pop();

 private:
  void* page_;
};

// The server-side dispatch both backends share: buffered writes first, then the vCPU slots round
// robin (a flooding vCPU cannot starve the others), at most one request in flight per vCPU (a guest
// that re-marks its slot READY while we work gets nothing twice), completion, and teardown.
class IoreqDispatcher {
 public:
  // `buffered_page` may be null (no buffered ring).
  IoreqDispatcher(void* slots_page, void* buffered_page, uint32_t vcpus);

  uint32_t vcpus() const { return slots_.vcpus(); }
  Result<std::optional<IoRequest>> Next();
  // Writes the response for `request`. Returns whether its vCPU must now be notified (false for a
  // buffered write). FailedPrecondition when nothing is in flight on that vCPU.
  Result<bool> Complete(const IoRequest& request, uint64_t read_value);
  // Answers every request still in flight with all-ones and returns their vCPUs (to notify), so no
  // vCPU stays blocked on a server that goes away.
  std::vector<uint32_t> AbandonInFlight();
  uint32_t event_port(uint32_t vcpu) const { return slots_.event_port(vcpu); }
  // The vCPU's slot state (STATE_IOREQ_*), read with acquire order.
  uint8_t state(uint32_t vcpu) const { return slots_.state(vcpu); }

 private:
  IoreqServerSlots slots_;
  std::optional<BufferedIoreqRing> buffered_;
  std::vector<bool> in_flight_;
  uint32_t next_vcpu_ = 0;
};

// The producer end of the buffered ring (Xen's role; used by tests and by the local backend's guest
// side). ResourceExhausted when the ring is full.
Status PushBuffered(void* page, const IoRequest& write);

}  // namespace gpuvm::hv::xen_abi

#endif  // GPUVM_HYPERVISOR_XEN_ABI_IOREQ_PAGE_H_
