// Local backend of IoreqServer: the device model's end of a local VM's ioreq region.
//
// Requests arrive in Xen's ioreq_t slots (hypervisor/xen_abi) with a request eventfd per vCPU; the
// server's wait_fd is an epoll set of those eventfds. What the server claims (PCI functions, MMIO
// ranges) is published on the control page under a seqlock, where the guest side (LocalGuestIo)
// routes by it — the local stand-in for Xen's routing of accesses to IOREQ servers. One IOREQ
// server per local domain (Xen allows several; the local backend has no default QEMU to share
// with).
//
// Memory ranges (BAR remap): MapMemoryRange publishes the range on the control page and, the first
// time a backing memfd is used, sends a duplicate of it over the domain's physmap socket; the guest
// side maps each backing once and routes accesses inside a memory range straight to it. A guest
// side created later asks on that socket, and Housekeep sends every backing again. A backing
// must be a memfd sealed against shrinking (so no peer can make a mapping of it fault) that holds
// the whole range. At most kMaxMemoryBackings distinct backings per server.
//
// Threading: one owner thread, as IoreqServer.
#ifndef GPUVM_HYPERVISOR_LOCAL_IOREQ_SERVER_H_
#define GPUVM_HYPERVISOR_LOCAL_IOREQ_SERVER_H_

#include <memory>
#include <utility>
#include <vector>

#include "base/os.h"
#include "hypervisor/ioreq_server.h"
#include "hypervisor/local/domain.h"
#include "hypervisor/xen_abi/ioreq_page.h"

namespace gpuvm::hv::local {

class LocalIoreqServer : public IoreqServer {
 public:
  static Result<std::unique_ptr<LocalIoreqServer>> Create(const LocalDomain& domain);
  ~LocalIoreqServer() override;

  DomainId domain() const override { return domid_; }
  uint32_t vcpu_count() const override { return vcpus_; }
  Status MapPciDevice(const Sbdf& sbdf) override;
  Status UnmapPciDevice(const Sbdf& sbdf) override;
  Status MapMmioRange(uint64_t first, uint64_t last) override;
  Status UnmapMmioRange(uint64_t first, uint64_t last) override;
  Status MapMemoryRange(uint64_t first, uint64_t last, const MemoryBacking& backing) override;
  Status UnmapMemoryRange(uint64_t first, uint64_t last) override;
  int wait_fd() const override { return epoll_.get(); }
  Result<std::optional<IoRequest>> Poll() override;
  // Sets / clears the control page's busy-poll flag (guests skip the request doorbell while it is
  // set); Poll() makes no system call in between.
  void BeginBusyPoll() override;
  void EndBusyPoll() override;
  // wait_fd() is an epoll set of edge-triggered doorbells: registered EPOLLET in the caller's set,
  // every doorbell is a new edge there, so Poll() no longer needs to consume them.
  bool UseEdgeTriggeredWait() override {
    edge_triggered_waiter_ = true;
    return true;
  }
  // The physmap socket: a guest side that attached late asks there for the backings (LocalGuestIo);
  // Housekeep sends every backing again (never blocking: a guest that does not read only loses its
  // own direct accesses). Unavailable once no guest side is left to ask.
  int housekeeping_fd() const override { return physmap_.get(); }
  Status Housekeep() override;
  Status Complete(const IoRequest& request, uint64_t read_value) override;
  Status SetPciIntxLevel(const Sbdf& sbdf, uint8_t pin, bool asserted) override;
  Status InjectMsi(uint64_t address, uint32_t data) override;

 private:
  LocalIoreqServer() = default;
  void PublishRouting();
  uint32_t* polling_flag() const;  // on the control page, at kServerPollingOffset
  LocalControlPage* control() const {
    return reinterpret_cast<LocalControlPage*>(region_.data() + kControlPage * kPageSize);
  }

  DomainId domid_ = 0;
  uint32_t vcpus_ = 0;
  os::SharedMapping region_;
  std::unique_ptr<xen_abi::IoreqDispatcher> dispatcher_;
  os::UniqueFd epoll_;
  os::UniqueFd irq_;
  std::vector<os::UniqueFd> requests_;
  std::vector<os::UniqueFd> responses_;
  std::vector<Sbdf> pci_devices_;
  MmioRangeList ranges_;
  bool busy_polling_ = false;
  bool edge_triggered_waiter_ = false;
  os::UniqueFd physmap_;  // our end of the physmap socket pair
  struct Backing {
    uint64_t device = 0, inode = 0;  // identity of the memfd
    uint64_t size = 0;
    os::UniqueFd fd;
  };
  // Sends backing `id` on the physmap socket (non-blocking).
  Status SendBacking(size_t id);
  std::vector<Backing> backings_;  // index = id on the control page
  std::vector<LocalControlPage::MemoryRange> memory_ranges_;
};

}  // namespace gpuvm::hv::local

#endif  // GPUVM_HYPERVISOR_LOCAL_IOREQ_SERVER_H_
