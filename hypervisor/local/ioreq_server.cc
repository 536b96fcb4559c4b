#include "hypervisor/local/ioreq_server.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

namespace gpuvm::hv::local {

Result<std::unique_ptr<LocalIoreqServer>> LocalIoreqServer::Create(const LocalDomain& domain) {
  std::unique_ptr<LocalIoreqServer> s(new LocalIoreqServer());
  s->domid_ = domain.domid();
  s->vcpus_ = domain.config().vcpus;
  GPUVM_RETURN_IF_ERROR(os::CheckSealedMemfd(domain.ioreq_fd(), kIoreqRegionPages * kPageSize));
  GPUVM_ASSIGN_OR_RETURN(s->region_, os::SharedMapping::Map(domain.ioreq_fd(), 0,
                                                            kIoreqRegionPages * kPageSize, true));
  s->dispatcher_ = std::make_unique<xen_abi::IoreqDispatcher>(
      s->region_.data() + kIoreqSlotsPage * kPageSize,
      s->region_.data() + kBufferedIoreqPage * kPageSize, s->vcpus_);
  s->epoll_ = os::UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
  if (!s->epoll_.valid()) return Status::FromErrno(errno, "epoll_create1");
  GPUVM_ASSIGN_OR_RETURN(s->irq_, os::DuplicateFd(domain.irq_fd()));
  GPUVM_ASSIGN_OR_RETURN(s->physmap_, os::DuplicateFd(domain.physmap_server_fd()));
  // Never block on the guest side: a full socket fails a send instead (the range keeps trapping).
  if (::fcntl(s->physmap_.get(), F_SETFL, ::fcntl(s->physmap_.get(), F_GETFL) | O_NONBLOCK) != 0) {
    return Status::FromErrno(errno, "physmap socket O_NONBLOCK");
  }
  for (uint32_t v = 0; v < s->vcpus_; ++v) {
    GPUVM_ASSIGN_OR_RETURN(os::UniqueFd request, os::DuplicateFd(domain.request_fd(v)));
    GPUVM_ASSIGN_OR_RETURN(os::UniqueFd response, os::DuplicateFd(domain.response_fd(v)));
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
  os::StoreShared(s->control()->server_pid, static_cast<uint32_t>(::getpid()),
                  std::memory_order_release);
  return s;
}

LocalIoreqServer::~LocalIoreqServer() {
  if (region_.data() == nullptr) return;
  // Unclaim everything, so the guest sees all-ones instead of waiting for a server that is gone,
  // and answer what is still in flight with all-ones so no vCPU stays blocked on us.
  pci_devices_.clear();
  ranges_.clear();
  memory_ranges_.clear();
  PublishRouting();
  for (uint32_t v : dispatcher_->AbandonInFlight()) (void)os::SignalEventFd(responses_[v].get());
  os::StoreShared(control()->server_pid, uint32_t{0}, std::memory_order_release);
}

void LocalIoreqServer::PublishRouting() {
  LocalControlPage* page = control();
  // Seqlock writer: odd while the tables change, even again after. Only we write the sequence, but
  // the guest may have scribbled on it, so derive an odd value from whatever is there.
  const uint32_t odd = (os::LoadShared(page->routing_seq, std::memory_order_relaxed) + 1) | 1u;
  os::StoreShared(page->routing_seq, odd, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);  // odd is visible before any table store
  for (size_t i = 0; i < pci_devices_.size(); ++i) {
    os::StoreShared(page->pci_devices[i], PackSbdf(pci_devices_[i]), std::memory_order_relaxed);
  }
  os::StoreShared(page->pci_device_count, static_cast<uint32_t>(pci_devices_.size()),
                  std::memory_order_relaxed);
  for (size_t i = 0; i < ranges_.size(); ++i) {
    os::StoreShared(page->mmio_ranges[i].first, ranges_[i].first, std::memory_order_relaxed);
    os::StoreShared(page->mmio_ranges[i].last, ranges_[i].second, std::memory_order_relaxed);
  }
  os::StoreShared(page->mmio_range_count, static_cast<uint32_t>(ranges_.size()),
                  std::memory_order_relaxed);
  for (size_t i = 0; i < memory_ranges_.size(); ++i) {
    const LocalControlPage::MemoryRange& r = memory_ranges_[i];
    os::StoreShared(page->memory_ranges[i].first, r.first, std::memory_order_relaxed);
    os::StoreShared(page->memory_ranges[i].last, r.last, std::memory_order_relaxed);
    os::StoreShared(page->memory_ranges[i].offset, r.offset, std::memory_order_relaxed);
    os::StoreShared(page->memory_ranges[i].backing, r.backing, std::memory_order_relaxed);
  }
  os::StoreShared(page->memory_range_count, static_cast<uint32_t>(memory_ranges_.size()),
                  std::memory_order_relaxed);
  os::StoreShared(page->memory_backing_count, static_cast<uint32_t>(backings_.size()),
                  std::memory_order_relaxed);
  os::StoreShared(page->routing_seq, odd + 1, std::memory_order_release);
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
  GPUVM_RETURN_IF_ERROR(CheckNoOverlap(ranges_, first, last));
  if (ranges_.size() >= kMaxClaimedMmioRanges) {
    return Status::ResourceExhausted("too many MMIO ranges claimed");
  }
  ranges_.emplace_back(first, last);
  PublishRouting();
  return Status::Ok();
}

Status LocalIoreqServer::UnmapMmioRange(uint64_t first, uint64_t last) {
  GPUVM_RETURN_IF_ERROR(RemoveRange(ranges_, first, last));
  PublishRouting();
  return Status::Ok();
}

Status LocalIoreqServer::MapMemoryRange(uint64_t first, uint64_t last,
                                        const MemoryBacking& backing) {
  if (first > last || first % kPageSize != 0 || (last + 1) % kPageSize != 0 ||
      backing.offset % kPageSize != 0) {
    return Status::InvalidArgument("a memory range is whole pages");
  }
  if (backing.fd < 0) {
    return Status::Unimplemented("the local backend maps memfds, not machine frames");
  }
  for (const LocalControlPage::MemoryRange& r : memory_ranges_) {
    if (first <= r.last && r.first <= last) {
      return Status::AlreadyExists("memory range " + Hex(first) + "-" + Hex(last) + " overlaps " +
                                   Hex(r.first) + "-" + Hex(r.last));
    }
  }
  if (memory_ranges_.size() >= kMaxMemoryRanges) {
    return Status::ResourceExhausted("too many memory ranges mapped");
  }
  // The backing: sealed against shrinking, large enough, and sent to the guest side once.
  const int seals = ::fcntl(backing.fd, F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
    return Status::PermissionDenied(
        "a memory range's backing must be a memfd sealed against "
        "shrinking");
  }
  struct stat st;
  if (::fstat(backing.fd, &st) != 0) return Status::FromErrno(errno, "fstat backing");
  const uint64_t length = last - first + 1;
  if (backing.offset > uint64_t(st.st_size) || length > uint64_t(st.st_size) - backing.offset) {
    return Status::OutOfRange("the memory range runs past its backing's end");
  }
  size_t id = 0;
  while (id < backings_.size() &&
         (backings_[id].device != uint64_t(st.st_dev) || backings_[id].inode != st.st_ino)) {
    ++id;
  }
  if (id == backings_.size()) {
    if (backings_.size() >= kMaxMemoryBackings) {
      return Status::ResourceExhausted("too many distinct memory backings");
    }
    GPUVM_ASSIGN_OR_RETURN(os::UniqueFd copy, os::DuplicateFd(backing.fd));
    backings_.push_back(
        Backing{uint64_t(st.st_dev), uint64_t(st.st_ino), uint64_t(st.st_size), std::move(copy)});
    if (Status sent = SendBacking(id); !sent.ok()) {
      backings_.pop_back();
      return sent;
    }
  }
  memory_ranges_.push_back({first, last, backing.offset, id});
  PublishRouting();
  return Status::Ok();
}

Status LocalIoreqServer::SendBacking(size_t id) {
  // The message: backing id and size; the guest side checks both against the descriptor.
  const uint64_t message[2] = {id, backings_[id].size};
  const int fds[1] = {backings_[id].fd.get()};
  return os::SendWithFds(physmap_.get(),
                         {reinterpret_cast<const uint8_t*>(message), sizeof message}, fds)
      .WithContext("physmap socket");
}

Status LocalIoreqServer::Housekeep() {
  bool asked = false;
  for (int i = 0; i < 64; ++i) {  // bounded: a guest writing without pause cannot keep us here
    uint8_t request[16];
    const ssize_t n = ::recv(physmap_.get(), request, sizeof request, MSG_DONTWAIT);
    if (n == 0) return Status::Unavailable("no guest side left on the physmap socket");
    if (n < 0) break;  // drained (EAGAIN), or nothing to read
    asked = true;
  }
  // Again, all of them (duplicates are ignored on the guest side); a full socket only costs that
  // guest its direct accesses.
  for (size_t id = 0; asked && id < backings_.size(); ++id) (void)SendBacking(id);
  return Status::Ok();
}

Status LocalIoreqServer::UnmapMemoryRange(uint64_t first, uint64_t last) {
  for (auto it = memory_ranges_.begin(); it != memory_ranges_.end(); ++it) {
    if (it->first == first && it->last == last) {
      memory_ranges_.erase(it);
      PublishRouting();
      return Status::Ok();
    }
  }
  return Status::NotFound("memory range " + Hex(first) + "-" + Hex(last) + " not mapped");
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
  os::StoreShared(*polling_flag(), uint32_t{1}, std::memory_order_relaxed);
  // A guest that rang before seeing the flag leaves an edge behind: one spurious wakeup later.
}

void LocalIoreqServer::EndBusyPoll() {
  busy_polling_ = false;
  os::StoreShared(*polling_flag(), uint32_t{0}, std::memory_order_relaxed);
  // Dekker with the guest side (LocalGuestIo::Submit: state READY, fence, read the flag): after
  // this fence the caller's next Poll() sees every request whose guest skipped the doorbell.
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

Status LocalIoreqServer::Complete(const IoRequest& request, uint64_t read_value) {
  GPUVM_ASSIGN_OR_RETURN(bool notify, dispatcher_->Complete(request, read_value));
  return notify ? os::SignalEventFd(responses_[request.vcpu].get()) : Status::Ok();
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
  if (asserted && !(before & bit)) return os::SignalEventFd(irq_.get());  // edges only
  return Status::Ok();
}

Status LocalIoreqServer::InjectMsi(uint64_t address, uint32_t data) {
  LocalControlPage* page = control();
  os::StoreShared(page->last_msi_address, address, std::memory_order_relaxed);
  os::StoreShared(page->last_msi_data, data, std::memory_order_relaxed);
  std::atomic_ref<uint32_t>(page->msi_count).fetch_add(1, std::memory_order_release);
  return os::SignalEventFd(irq_.get());
}

}  // namespace gpuvm::hv::local
