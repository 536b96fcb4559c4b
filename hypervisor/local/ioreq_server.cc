#include "hypervisor/local/ioreq_server.h"

#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <string>

namespace gpuvm::hv::local {

Result<std::unique_ptr<LocalIoreqServer>> LocalIoreqServer::Create(const LocalDomain& domain) {
  std::unique_ptr<LocalIoreqServer> s(new LocalIoreqServer());
  s->domid_ = domain.domid();
  s->vcpus_ = domain.config().vcpus;
  GPUVM_RETURN_IF_ERROR(CheckSealedMemfd(domain.ioreq_fd(), kIoreqRegionPages * kPageSize));
  GPUVM_ASSIGN_OR_RETURN(
      s->region_, SharedMapping::Map(domain.ioreq_fd(), 0, kIoreqRegionPages * kPageSize, true));
  s->dispatcher_ = std::make_unique<xen_abi::IoreqDispatcher>(
      s->region_.data() + kIoreqSlotsPage * kPageSize,
      s->region_.data() + kBufferedIoreqPage * kPageSize, s->vcpus_);
  s->epoll_ = UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
  if (!s->epoll_.valid()) return Status::FromErrno(errno, "epoll_create1");
  GPUVM_ASSIGN_OR_RETURN(s->irq_, DuplicateFd(domain.irq_fd()));
  for (uint32_t v = 0; v < s->vcpus_; ++v) {
    GPUVM_ASSIGN_OR_RETURN(UniqueFd request, DuplicateFd(domain.request_fd(v)));
    GPUVM_ASSIGN_OR_RETURN(UniqueFd response, DuplicateFd(domain.response_fd(v)));
    // Edge-triggered: every doorbell is a new edge, so nothing has to read the eventfd back (one
    // system call less per trap); the counter is never read and cannot realistically overflow.
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;
    ev.data.u32 = v;
    if (::epoll_ctl(s->epoll_.get(), EPOLL_CTL_ADD, request.get(), &ev) != 0) {
      return Status::FromErrno(errno, "epoll_ctl add request eventfd");
    }
    s->requests_.push_back(std::move(request));
    s->responses_.push_back(std::move(response));
  }
  // A fresh server starts with nothing claimed, whatever a previous server left on the page.
  s->PublishRouting();
  return s;
}

LocalIoreqServer::~LocalIoreqServer() {
  if (region_.data() == nullptr) return;
  // Unclaim everything, so the guest sees all-ones instead of waiting for a server that is gone,
  // and answer what is still in flight with all-ones so no vCPU stays blocked on us.
  pci_devices_.clear();
  ranges_.clear();
  PublishRouting();
  for (uint32_t v : dispatcher_->AbandonInFlight()) (void)SignalEventFd(responses_[v].get());
}

void LocalIoreqServer::PublishRouting() {
  LocalControlPage* page = control();
  // Seqlock writer: odd while the tables change, even again after. Only we write the sequence, but
  // the guest may have scribbled on it, so derive an odd value from whatever is there.
  const uint32_t odd = (LoadShared(page->routing_seq, std::memory_order_relaxed) + 1) | 1u;
  StoreShared(page->routing_seq, odd, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);  // odd is visible before any table store
  for (size_t i = 0; i < pci_devices_.size(); ++i) {
    StoreShared(page->pci_devices[i], PackSbdf(pci_devices_[i]), std::memory_order_relaxed);
  }
  StoreShared(page->pci_device_count, static_cast<uint32_t>(pci_devices_.size()),
              std::memory_order_relaxed);
  for (size_t i = 0; i < ranges_.size(); ++i) {
    StoreShared(page->mmio_ranges[i].first, ranges_[i].first, std::memory_order_relaxed);
    StoreShared(page->mmio_ranges[i].last, ranges_[i].second, std::memory_order_relaxed);
  }
  StoreShared(page->mmio_range_count, static_cast<uint32_t>(ranges_.size()),
              std::memory_order_relaxed);
  StoreShared(page->routing_seq, odd + 1, std::memory_order_release);
}

Status LocalIoreqServer::MapPciDevice(const Sbdf& sbdf) {
  if (!sbdf.valid()) return Status::InvalidArgument("invalid PCI address " + sbdf.ToString());
  if (std::find(pci_devices_.begin(), pci_devices_.end(), sbdf) != pci_devices_.end()) {
    return Status::AlreadyExists("PCI device " + sbdf.ToString() + " already claimed");
  }
  if (pci_devices_.size() >= kMaxClaimedPciDevices) {
    return Status::ResourceExhausted("too many PCI devices claimed");
  }
  pci_devices_.push_back(sbdf);
  PublishRouting();
  return Status::Ok();
}

Status LocalIoreqServer::UnmapPciDevice(const Sbdf& sbdf) {
  auto it = std::find(pci_devices_.begin(), pci_devices_.end(), sbdf);
  if (it == pci_devices_.end()) {
    return Status::NotFound("PCI device " + sbdf.ToString() + " not claimed");
  }
  pci_devices_.erase(it);
  PublishRouting();
  return Status::Ok();
}

Status LocalIoreqServer::MapMmioRange(uint64_t first, uint64_t last) {
  if (first > last) return Status::InvalidArgument("MMIO range ends before it starts");
  for (const auto& [f, l] : ranges_) {
    if (first <= l && f <= last) {
      return Status::AlreadyExists("MMIO range " + Hex(first) + "-" + Hex(last) + " overlaps " +
                                   Hex(f) + "-" + Hex(l));
    }
  }
  if (ranges_.size() >= kMaxClaimedMmioRanges) {
    return Status::ResourceExhausted("too many MMIO ranges claimed");
  }
  ranges_.emplace_back(first, last);
  PublishRouting();
  return Status::Ok();
}

Status LocalIoreqServer::UnmapMmioRange(uint64_t first, uint64_t last) {
  auto it = std::find(ranges_.begin(), ranges_.end(), std::make_pair(first, last));
  if (it == ranges_.end()) {
    return Status::NotFound("MMIO range " + Hex(first) + "-" + Hex(last) + " not mapped");
  }
  ranges_.erase(it);
  PublishRouting();
  return Status::Ok();
}

Result<std::optional<IoRequest>> LocalIoreqServer::Poll() {
  // The slots first: the common case (a doorbell woke us) costs no system call here. Only when they
  // are empty do we consume the doorbell edges, then look once more: a doorbell that rings after
  // that is a new edge and wakes wait_fd again, so no request is missed.
  GPUVM_ASSIGN_OR_RETURN(std::optional<IoRequest> next, dispatcher_->Next());
  // Busy polling: no system calls (the caller spins). An edge-triggered waiter: nothing to consume.
  if (next || busy_polling_ || edge_triggered_waiter_) return next;
  epoll_event events[kMaxLocalVcpus];
  if (::epoll_wait(epoll_.get(), events, kMaxLocalVcpus, 0) <= 0) return next;
  return dispatcher_->Next();
}

uint32_t* LocalIoreqServer::polling_flag() const {
  return reinterpret_cast<uint32_t*>(region_.data() + kControlPage * kPageSize +
                                     kServerPollingOffset);
}

void LocalIoreqServer::BeginBusyPoll() {
  busy_polling_ = true;
  StoreShared(*polling_flag(), uint32_t{1}, std::memory_order_relaxed);
  // A guest that rang before seeing the flag leaves an edge behind: one spurious wakeup later.
}

void LocalIoreqServer::EndBusyPoll() {
  busy_polling_ = false;
  StoreShared(*polling_flag(), uint32_t{0}, std::memory_order_relaxed);
  // Dekker with the guest side (LocalGuestIo::Submit: state READY, fence, read the flag): after
  // this fence the caller's next Poll() sees every request whose guest skipped the doorbell.
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

Status LocalIoreqServer::Complete(const IoRequest& request, uint64_t read_value) {
  GPUVM_ASSIGN_OR_RETURN(bool notify, dispatcher_->Complete(request, read_value));
  return notify ? SignalEventFd(responses_[request.vcpu].get()) : Status::Ok();
}

Status LocalIoreqServer::SetPciIntxLevel(const Sbdf& sbdf, uint8_t pin, bool asserted) {
  if (pin > 3) return Status::InvalidArgument("INTx pin must be 0..3 (INTA..INTD)");
  if (std::find(pci_devices_.begin(), pci_devices_.end(), sbdf) == pci_devices_.end()) {
    return Status::FailedPrecondition("interrupt for unclaimed PCI device " + sbdf.ToString());
  }
  LocalControlPage* page = control();
  const uint32_t bit = 1u << pin;
  std::atomic_ref<uint32_t> levels(page->intx_levels);
  const uint32_t before = asserted ? levels.fetch_or(bit) : levels.fetch_and(~bit);
  if (asserted && !(before & bit)) return SignalEventFd(irq_.get());  // edges only
  return Status::Ok();
}

Status LocalIoreqServer::InjectMsi(uint64_t address, uint32_t data) {
  LocalControlPage* page = control();
  StoreShared(page->last_msi_address, address, std::memory_order_relaxed);
  StoreShared(page->last_msi_data, data, std::memory_order_relaxed);
  std::atomic_ref<uint32_t>(page->msi_count).fetch_add(1, std::memory_order_release);
  return SignalEventFd(irq_.get());
}

}  // namespace gpuvm::hv::local
