#include "hypervisor/local/guest_io.h"

#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <thread>

namespace gpuvm::hv::local {
namespace {

uint64_t AllOnes(uint32_t size) {
  return size >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * size)) - 1;
}

}  // namespace

Result<std::unique_ptr<LocalGuestIo>> LocalGuestIo::Create(const LocalDomain& domain,
                                                           std::chrono::milliseconds timeout) {
  std::unique_ptr<LocalGuestIo> g(new LocalGuestIo());
  g->vcpus_ = domain.config().vcpus;
  g->timeout_ = timeout;
  GPUVM_ASSIGN_OR_RETURN(
      g->region_, SharedMapping::Map(domain.ioreq_fd(), 0, kIoreqRegionPages * kPageSize, true));
  g->slots_ = std::make_unique<xen_abi::IoreqRequesterSlots>(
      g->region_.data() + kIoreqSlotsPage * kPageSize, g->vcpus_);
  GPUVM_ASSIGN_OR_RETURN(g->irq_, DuplicateFd(domain.irq_fd()));
  for (uint32_t v = 0; v < g->vcpus_; ++v) {
    GPUVM_ASSIGN_OR_RETURN(UniqueFd request, DuplicateFd(domain.request_fd(v)));
    GPUVM_ASSIGN_OR_RETURN(UniqueFd response, DuplicateFd(domain.response_fd(v)));
    UniqueFd wait(::epoll_create1(EPOLL_CLOEXEC));
    if (!wait.valid()) return Status::FromErrno(errno, "epoll_create1");
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;
    if (::epoll_ctl(wait.get(), EPOLL_CTL_ADD, response.get(), &ev) != 0) {
      return Status::FromErrno(errno, "epoll_ctl response eventfd");
    }
    g->requests_.push_back(std::move(request));
    g->responses_.push_back(std::move(response));
    g->waits_.push_back(std::move(wait));
  }
  return g;
}

Result<uint64_t> LocalGuestIo::AwaitResponse(uint32_t vcpu) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (;;) {
    if (std::optional<uint64_t> data = slots_->TryCollect(vcpu)) return *data;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return Status::DeadlineExceeded("device model did not answer vCPU " + std::to_string(vcpu) +
                                      " within " + std::to_string(timeout_.count()) + " ms");
    }
    // An edge that arrived before this wait is still queued, so a response between TryCollect and
    // here is not missed; a stale edge (a late answer we discarded) only costs one more look.
    epoll_event ev;
    if (::epoll_wait(waits_[vcpu].get(), &ev, 1, static_cast<int>(left.count())) < 0 &&
        errno != EINTR) {
      return Status::FromErrno(errno, "epoll_wait for the device model");
    }
  }
}

Result<uint64_t> LocalGuestIo::Submit(const IoRequest& request) {
  const uint32_t v = request.vcpu;
  if (v >= vcpus_) return Status::OutOfRange("no vCPU " + std::to_string(v));
  // A slot still busy from an access that timed out: the vCPU is still "blocked" on it, so wait for
  // (and throw away) that answer first.
  if (slots_->state(v) != STATE_IOREQ_NONE) {
    GPUVM_ASSIGN_OR_RETURN(uint64_t stale, AwaitResponse(v));
    (void)stale;
  }
  GPUVM_RETURN_IF_ERROR(slots_->Submit(v, xen_abi::ToXen(request)));
  // The server busy-polls the slots: it sees READY without the doorbell. Dekker with
  // LocalIoreqServer::EndBusyPoll — the slot's state is stored before the flag is read.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const auto* polling = reinterpret_cast<const uint32_t*>(
      region_.data() + kControlPage * kPageSize + kServerPollingOffset);
  if (LoadShared(*polling, std::memory_order_relaxed) == 0) {
    GPUVM_RETURN_IF_ERROR(SignalEventFd(requests_[v].get()));
  }
  return AwaitResponse(v);
}

Result<uint64_t> LocalGuestIo::Read(uint32_t vcpu, uint64_t gpa, uint32_t size) {
  if (size != 1 && size != 2 && size != 4 && size != 8) {
    return Status::InvalidArgument("MMIO access size must be 1, 2, 4 or 8");
  }
  if (!IsMmioClaimed(gpa, size)) return AllOnes(size);
  IoRequest r;
  r.vcpu = vcpu;
  r.space = IoSpace::kMmio;
  r.dir = IoDirection::kRead;
  r.addr = gpa;
  r.size = size;
  r.count = 1;
  GPUVM_ASSIGN_OR_RETURN(uint64_t value, Submit(r));
  return value & AllOnes(size);
}

Status LocalGuestIo::Write(uint32_t vcpu, uint64_t gpa, uint32_t size, uint64_t value) {
  if (size != 1 && size != 2 && size != 4 && size != 8) {
    return Status::InvalidArgument("MMIO access size must be 1, 2, 4 or 8");
  }
  if (!IsMmioClaimed(gpa, size)) return Status::Ok();
  IoRequest r;
  r.vcpu = vcpu;
  r.space = IoSpace::kMmio;
  r.dir = IoDirection::kWrite;
  r.addr = gpa;
  r.size = size;
  r.count = 1;
  r.data = value & AllOnes(size);
  return Submit(r).status();
}

Result<uint32_t> LocalGuestIo::ConfigRead(uint32_t vcpu, const Sbdf& sbdf, uint32_t offset,
                                          uint32_t size) {
  if (size != 1 && size != 2 && size != 4) {
    return Status::InvalidArgument("config access size must be 1, 2 or 4");
  }
  if (!IsPciClaimed(sbdf)) return static_cast<uint32_t>(AllOnes(size));
  IoRequest r;
  r.vcpu = vcpu;
  r.space = IoSpace::kPciConfig;
  r.dir = IoDirection::kRead;
  r.sbdf = sbdf;
  r.addr = offset;
  r.size = size;
  r.count = 1;
  GPUVM_ASSIGN_OR_RETURN(uint64_t value, Submit(r));
  return static_cast<uint32_t>(value & AllOnes(size));
}

Status LocalGuestIo::ConfigWrite(uint32_t vcpu, const Sbdf& sbdf, uint32_t offset, uint32_t size,
                                 uint32_t value) {
  if (size != 1 && size != 2 && size != 4) {
    return Status::InvalidArgument("config access size must be 1, 2 or 4");
  }
  if (!IsPciClaimed(sbdf)) return Status::Ok();
  IoRequest r;
  r.vcpu = vcpu;
  r.space = IoSpace::kPciConfig;
  r.dir = IoDirection::kWrite;
  r.sbdf = sbdf;
  r.addr = offset;
  r.size = size;
  r.count = 1;
  r.data = value & AllOnes(size);
  return Submit(r).status();
}

namespace {

// Runs `read` under the control page's seqlock until it sees a stable table. The server holds the
// lock only for a few stores; give up (false) rather than spin forever on a page someone scribbled
// on.
template <typename ReadTables>
bool ReadRouting(const LocalControlPage* page, ReadTables read) {
  for (int attempt = 0; attempt < 100000; ++attempt) {
    const uint32_t before = LoadShared(page->routing_seq, std::memory_order_acquire);
    if (before & 1u) {
      if (attempt > 100) std::this_thread::yield();
      continue;
    }
    const bool result = read();
    std::atomic_thread_fence(std::memory_order_acquire);
    if (LoadShared(page->routing_seq, std::memory_order_relaxed) == before) return result;
  }
  return false;
}

}  // namespace

bool LocalGuestIo::IsMmioClaimed(uint64_t gpa, uint64_t length) const {
  if (length == 0 || gpa + (length - 1) < gpa) return false;
  const uint64_t last = gpa + (length - 1);
  const LocalControlPage* page = control();
  return ReadRouting(page, [&] {
    const uint32_t count = std::min(LoadShared(page->mmio_range_count, std::memory_order_relaxed),
                                    kMaxClaimedMmioRanges);
    for (uint32_t i = 0; i < count; ++i) {
      const uint64_t f = LoadShared(page->mmio_ranges[i].first, std::memory_order_relaxed);
      const uint64_t l = LoadShared(page->mmio_ranges[i].last, std::memory_order_relaxed);
      // Like Xen, the whole access must lie inside one claimed range.
      if (gpa >= f && last <= l) return true;
    }
    return false;
  });
}

bool LocalGuestIo::IsPciClaimed(const Sbdf& sbdf) const {
  const uint64_t packed = PackSbdf(sbdf);
  const LocalControlPage* page = control();
  return ReadRouting(page, [&] {
    const uint32_t count = std::min(LoadShared(page->pci_device_count, std::memory_order_relaxed),
                                    kMaxClaimedPciDevices);
    for (uint32_t i = 0; i < count; ++i) {
      if (LoadShared(page->pci_devices[i], std::memory_order_relaxed) == packed) return true;
    }
    return false;
  });
}

LocalGuestIo::InterruptState LocalGuestIo::interrupts() const {
  const LocalControlPage* page = control();
  InterruptState s;
  s.msi_count = LoadShared(page->msi_count, std::memory_order_acquire);
  s.intx_levels = LoadShared(page->intx_levels, std::memory_order_acquire);
  s.last_msi_address = LoadShared(page->last_msi_address, std::memory_order_relaxed);
  s.last_msi_data = LoadShared(page->last_msi_data, std::memory_order_relaxed);
  return s;
}

Status LocalGuestIo::WaitForInterrupt(std::chrono::milliseconds timeout) {
  GPUVM_RETURN_IF_ERROR(WaitReadable(irq_.get(), static_cast<int>(timeout.count())));
  DrainEventFd(irq_.get());
  return Status::Ok();
}

}  // namespace gpuvm::hv::local
