#include "hypervisor/local/guest_io.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace gpuvm::hv::local {
namespace {

uint64_t AllOnes(uint32_t size) {
  return size >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * size)) - 1;
}

// The tag of the server's pidfd in a vCPU's wait set (the response eventfd's is 0).
constexpr uint32_t kServerWaitTag = 1;
// How often a waiting vCPU looks at the control page again (for a server replaced meanwhile).
constexpr std::chrono::milliseconds kWaitSlice{1000};

// One plain (not rep, not buffered) access of the guest's vCPU `vcpu`, as its instruction makes it;
// `data` is the value written (masked to `size` bytes), ignored for a read. `sbdf`: PCI config
// only.
IoRequest PlainAccess(uint32_t vcpu, IoSpace space, IoDirection dir, uint64_t addr, uint32_t size,
                      uint64_t data, const Sbdf& sbdf = {}) {
  return IoRequest{.vcpu = vcpu,
                   .space = space,
                   .dir = dir,
                   .addr = addr,
                   .sbdf = sbdf,
                   .data = dir == IoDirection::kWrite ? data & AllOnes(size) : 0,
                   .size = size,
                   .count = 1};
}

// One load or store of a whole Word at `memory` (aligned), from or to `buffer` (any alignment).
template <typename Word>
void AccessWord(uint8_t* memory, uint8_t* buffer, bool write) {
  Word v;
  if (write) {
    std::memcpy(&v, buffer, sizeof v);
    __atomic_store_n(reinterpret_cast<Word*>(memory), v, __ATOMIC_RELAXED);
  } else {
    v = __atomic_load_n(reinterpret_cast<Word*>(memory), __ATOMIC_RELAXED);
    std::memcpy(buffer, &v, sizeof v);
  }
}

}  // namespace

Result<std::unique_ptr<LocalGuestIo>> LocalGuestIo::Create(const LocalDomain& domain,
                                                           std::chrono::milliseconds timeout,
                                                           std::chrono::microseconds busy_poll) {
  std::unique_ptr<LocalGuestIo> g(new LocalGuestIo());
  g->domid_ = domain.domid();
  g->vcpus_ = domain.config().vcpus;
  g->ram_bytes_ = domain.config().ram_bytes;
  GPUVM_ASSIGN_OR_RETURN(g->ram_, os::DuplicateFd(domain.ram_fd()));
  g->timeout_ = timeout;
  GPUVM_ASSIGN_OR_RETURN(g->region_, os::SharedMapping::Map(domain.ioreq_fd(), 0,
                                                            kIoreqRegionPages * kPageSize, true));
  g->slots_ = std::make_unique<xen_abi::IoreqRequesterSlots>(
      g->region_.data() + kIoreqSlotsPage * kPageSize, g->vcpus_);
  GPUVM_ASSIGN_OR_RETURN(g->irq_, os::DuplicateFd(domain.irq_fd()));
  GPUVM_ASSIGN_OR_RETURN(g->physmap_, os::DuplicateFd(domain.physmap_guest_fd()));
  // Ask for the memory-range backings the server already sent (to an earlier program of this VM):
  // it sends them again (LocalIoreqServer::Housekeep). Best effort: without them accesses trap.
  const uint8_t ask = 'B';
  (void)::send(g->physmap_.get(), &ask, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  for (uint32_t v = 0; v < g->vcpus_; ++v) {
    GPUVM_ASSIGN_OR_RETURN(os::UniqueFd request, os::DuplicateFd(domain.request_fd(v)));
    GPUVM_ASSIGN_OR_RETURN(os::UniqueFd response, os::DuplicateFd(domain.response_fd(v)));
    os::UniqueFd wait(::epoll_create1(EPOLL_CLOEXEC));
    if (!wait.valid()) return Status::FromErrno(errno, "epoll_create1");
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;
    if (::epoll_ctl(wait.get(), EPOLL_CTL_ADD, response.get(), &ev) != 0) {
      return Status::FromErrno(errno, "epoll_ctl response eventfd");
    }
    g->requests_.push_back(std::move(request));
    g->responses_.push_back(std::move(response));
    g->waits_.push_back(std::move(wait));
    g->polls_.emplace_back(busy_poll);
  }
  return g;
}

bool LocalGuestIo::WatchServer() {
  const uint32_t pid = os::LoadShared(control()->server_pid, std::memory_order_acquire);
  // None named (a server that withdraws answers what is in flight first): nothing to watch.
  if (pid == 0 || watched_pid_.load(std::memory_order_acquire) == pid) return true;
  std::lock_guard lock(watch_mu_);
  if (watched_pid_.load(std::memory_order_relaxed) == pid) return true;
  Result<os::UniqueFd> pidfd = os::OpenPidFd(static_cast<int>(pid));
  if (!pidfd.ok()) {
    if (pidfd.status().code() == StatusCode::kNotFound) return false;
    server_pidfd_.Reset();  // no pidfds on this kernel: wait without watching
  } else {
    for (const os::UniqueFd& wait : waits_) {
      epoll_event ev{};
      ev.events = EPOLLIN;  // level: readable from the process's end on
      ev.data.u32 = kServerWaitTag;
      (void)::epoll_ctl(wait.get(), EPOLL_CTL_ADD, pidfd->get(), &ev);
    }
    server_pidfd_ = std::move(*pidfd);  // an old one closes, which takes it out of the sets
  }
  watched_pid_.store(pid, std::memory_order_release);
  return true;
}

Result<uint64_t> LocalGuestIo::AwaitResponse(uint32_t vcpu) {
  std::optional<uint64_t> polled;
  if (polls_[vcpu].Spin([&] { return (polled = slots_->TryCollect(vcpu)).has_value(); })) {
    return *polled;
  }
  using std::chrono::milliseconds;
  const auto start = std::chrono::steady_clock::now();
  bool noted = false;
  const auto gone = [&] {
    return Status::Unavailable(
        "the device model (pid " + std::to_string(watched_pid_.load(std::memory_order_relaxed)) +
        ") is gone; vCPU " + std::to_string(vcpu) + "'s access was not answered");
  };
  for (;;) {
    if (std::optional<uint64_t> data = slots_->TryCollect(vcpu)) {
      if (noted && note_) {
        note_("the device model answered vCPU " + std::to_string(vcpu) + " after " +
              std::to_string(
                  std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start)
                      .count()) +
              " ms");
      }
      return *data;
    }
    const auto waited =
        std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
    if (timeout_.count() > 0 && waited >= timeout_) {
      return Status::DeadlineExceeded("device model did not answer vCPU " + std::to_string(vcpu) +
                                      " within " + std::to_string(timeout_.count()) + " ms");
    }
    if (!WatchServer()) return gone();
    if (!noted && note_ && waited >= slow_note_) {
      noted = true;
      note_("the device model (pid " + std::to_string(watched_pid_.load()) +
            ") has not answered vCPU " + std::to_string(vcpu) + " for " +
            std::to_string(waited.count()) + " ms; it is alive (stopped or overloaded?): waiting");
    }
    // Wake up now and then to look at the page (a new server) and to note a slow one; the answer
    // and the server's end wake us at once.
    milliseconds slice = kWaitSlice;
    if (!noted && note_) slice = std::min(slice, slow_note_ - waited);
    if (timeout_.count() > 0) slice = std::min(slice, timeout_ - waited);
    // An edge that arrived before this wait is still queued, so a response between TryCollect and
    // here is not missed; a stale edge (a late answer we discarded) only costs one more look.
    epoll_event events[2];
    const int n = ::epoll_wait(waits_[vcpu].get(), events, 2,
                               static_cast<int>(std::max<int64_t>(slice.count(), 1)));
    if (n < 0 && errno != EINTR) return Status::FromErrno(errno, "epoll_wait for the device model");
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u32 != kServerWaitTag) continue;
      // The server's process has ended; it may have answered just before.
      if (std::optional<uint64_t> data = slots_->TryCollect(vcpu)) return *data;
      return gone();
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
  if (os::LoadShared(*polling, std::memory_order_relaxed) == 0) {
    GPUVM_RETURN_IF_ERROR(os::SignalEventFd(requests_[v].get()));
  }
  return AwaitResponse(v);
}

Result<uint64_t> LocalGuestIo::Read(uint32_t vcpu, uint64_t gpa, uint32_t size) {
  if (size != 1 && size != 2 && size != 4 && size != 8) {
    return Status::InvalidArgument("MMIO access size must be 1, 2, 4 or 8");
  }
  uint64_t direct = 0;
  if (AccessMemory(gpa, &direct, size, false)) return direct;
  if (!IsMmioClaimed(gpa, size)) return AllOnes(size);
  GPUVM_ASSIGN_OR_RETURN(
      uint64_t value, Submit(PlainAccess(vcpu, IoSpace::kMmio, IoDirection::kRead, gpa, size, 0)));
  return value & AllOnes(size);
}

Status LocalGuestIo::Write(uint32_t vcpu, uint64_t gpa, uint32_t size, uint64_t value) {
  if (size != 1 && size != 2 && size != 4 && size != 8) {
    return Status::InvalidArgument("MMIO access size must be 1, 2, 4 or 8");
  }
  uint64_t direct = value & AllOnes(size);
  if (AccessMemory(gpa, &direct, size, true)) return Status::Ok();
  if (!IsMmioClaimed(gpa, size)) return Status::Ok();
  return Submit(PlainAccess(vcpu, IoSpace::kMmio, IoDirection::kWrite, gpa, size, value)).status();
}

Result<uint32_t> LocalGuestIo::ConfigRead(uint32_t vcpu, const Sbdf& sbdf, uint32_t offset,
                                          uint32_t size) {
  if (size != 1 && size != 2 && size != 4) {
    return Status::InvalidArgument("config access size must be 1, 2 or 4");
  }
  if (!IsPciClaimed(sbdf)) return static_cast<uint32_t>(AllOnes(size));
  GPUVM_ASSIGN_OR_RETURN(
      uint64_t value,
      Submit(PlainAccess(vcpu, IoSpace::kPciConfig, IoDirection::kRead, offset, size, 0, sbdf)));
  return static_cast<uint32_t>(value & AllOnes(size));
}

Status LocalGuestIo::ConfigWrite(uint32_t vcpu, const Sbdf& sbdf, uint32_t offset, uint32_t size,
                                 uint32_t value) {
  if (size != 1 && size != 2 && size != 4) {
    return Status::InvalidArgument("config access size must be 1, 2 or 4");
  }
  if (!IsPciClaimed(sbdf)) return Status::Ok();
  return Submit(
             PlainAccess(vcpu, IoSpace::kPciConfig, IoDirection::kWrite, offset, size, value, sbdf))
      .status();
}

namespace {

// Runs `read` under the control page's seqlock until it sees a stable table. The server holds the
// lock only for a few stores; give up (false) rather than spin forever on a page someone scribbled
// on.
template <typename ReadTables>
bool ReadRouting(const LocalControlPage* page, ReadTables read) {
  for (int attempt = 0; attempt < 100000; ++attempt) {
    const uint32_t before = os::LoadShared(page->routing_seq, std::memory_order_acquire);
    if (before & 1u) {
      if (attempt > 100) std::this_thread::yield();
      continue;
    }
    const bool result = read();
    std::atomic_thread_fence(std::memory_order_acquire);
    if (os::LoadShared(page->routing_seq, std::memory_order_relaxed) == before) return result;
  }
  return false;
}

}  // namespace

bool LocalGuestIo::IsMmioClaimed(uint64_t gpa, uint64_t length) const {
  if (length == 0 || gpa + (length - 1) < gpa) return false;
  const uint64_t last = gpa + (length - 1);
  const LocalControlPage* page = control();
  return ReadRouting(page, [&] {
    const uint32_t count = std::min(
        os::LoadShared(page->mmio_range_count, std::memory_order_relaxed), kMaxClaimedMmioRanges);
    for (uint32_t i = 0; i < count; ++i) {
      const uint64_t f = os::LoadShared(page->mmio_ranges[i].first, std::memory_order_relaxed);
      const uint64_t l = os::LoadShared(page->mmio_ranges[i].last, std::memory_order_relaxed);
      // Like Xen, the whole access must lie inside one claimed range.
      if (gpa >= f && last <= l) return true;
    }
    return false;
  });
}

uint8_t* LocalGuestIo::MemoryAt(uint64_t gpa, uint64_t length) {
  if (length == 0 || gpa + (length - 1) < gpa) return nullptr;
  const uint64_t last = gpa + (length - 1);
  LocalControlPage::MemoryRange hit{};
  bool found = false;
  const LocalControlPage* page = control();
  const bool stable = ReadRouting(page, [&] {
    found = false;
    const uint32_t count = std::min(
        os::LoadShared(page->memory_range_count, std::memory_order_relaxed), kMaxMemoryRanges);
    for (uint32_t i = 0; i < count; ++i) {
      const uint64_t f = os::LoadShared(page->memory_ranges[i].first, std::memory_order_relaxed);
      const uint64_t l = os::LoadShared(page->memory_ranges[i].last, std::memory_order_relaxed);
      if (gpa >= f && last <= l) {
        hit = {f, l, os::LoadShared(page->memory_ranges[i].offset, std::memory_order_relaxed),
               os::LoadShared(page->memory_ranges[i].backing, std::memory_order_relaxed)};
        found = true;
        break;
      }
    }
    return true;
  });
  if (!stable || !found || hit.backing >= kMaxMemoryBackings) return nullptr;
  uint8_t* base = backing_base_[hit.backing].load(std::memory_order_acquire);
  if (base == nullptr) {
    std::lock_guard lock(backings_mu_);
    ReceiveBackingsLocked();
    base = backing_base_[hit.backing].load(std::memory_order_acquire);
    if (base == nullptr) return nullptr;
  }
  // The page is the server's word; the bounds are ours: never outside the mapped backing.
  const uint64_t size = backing_size_[hit.backing].load(std::memory_order_relaxed);
  const uint64_t at = hit.offset + (gpa - hit.first);
  if (at < hit.offset || at > size || length > size - at) return nullptr;
  return base + at;
}

void LocalGuestIo::ReceiveBackingsLocked() {
  for (;;) {
    Result<os::ReceivedMessage> m = os::ReceiveWithFds(physmap_.get(), 64, true);
    if (!m.ok()) return;  // nothing more waiting (or the server is gone)
    uint64_t words[2];
    if (m->bytes.size() != sizeof words || m->fds.size() != 1) continue;
    std::memcpy(words, m->bytes.data(), sizeof words);
    const uint64_t id = words[0];
    struct stat st;
    if (id >= kMaxMemoryBackings || backing_base_[id].load() != nullptr ||
        ::fstat(m->fds[0].get(), &st) != 0 || uint64_t(st.st_size) < words[1] || words[1] == 0) {
      continue;
    }
    Result<os::SharedMapping> map = os::SharedMapping::Map(m->fds[0].get(), 0, words[1], true);
    if (!map.ok()) continue;
    backing_size_[id].store(words[1], std::memory_order_relaxed);
    backing_base_[id].store(map->data(), std::memory_order_release);
    backing_maps_.push_back(std::move(*map));
  }
}

bool LocalGuestIo::FillMemory(uint64_t gpa, uint8_t byte, uint64_t length) {
  uint8_t* p = MemoryAt(gpa, length);
  if (p == nullptr) return false;
  std::memset(p, byte, length);
  memory_accesses_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool LocalGuestIo::AccessMemory(uint64_t gpa, void* buffer, uint64_t length, bool write) {
  uint8_t* p = MemoryAt(gpa, length);
  if (p == nullptr) return false;
  auto* b = static_cast<uint8_t*>(buffer);
  // Aligned bus-sized accesses are single loads/stores (no tearing), like a real BAR.
  const bool aligned = (reinterpret_cast<uintptr_t>(p) & (length - 1)) == 0;
  if (aligned && length == 4) {
    AccessWord<uint32_t>(p, b, write);
  } else if (aligned && length == 8) {
    AccessWord<uint64_t>(p, b, write);
  } else if (write) {
    std::memcpy(p, b, length);
  } else {
    std::memcpy(b, p, length);
  }
  memory_accesses_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool LocalGuestIo::IsPciClaimed(const Sbdf& sbdf) const {
  const uint64_t packed = PackSbdf(sbdf);
  const LocalControlPage* page = control();
  return ReadRouting(page, [&] {
    const uint32_t count = std::min(
        os::LoadShared(page->pci_device_count, std::memory_order_relaxed), kMaxClaimedPciDevices);
    for (uint32_t i = 0; i < count; ++i) {
      if (os::LoadShared(page->pci_devices[i], std::memory_order_relaxed) == packed) return true;
    }
    return false;
  });
}

LocalGuestIo::InterruptState LocalGuestIo::interrupts() const {
  const LocalControlPage* page = control();
  InterruptState s;
  s.msi_count = os::LoadShared(page->msi_count, std::memory_order_acquire);
  s.intx_levels = os::LoadShared(page->intx_levels, std::memory_order_acquire);
  s.last_msi_address = os::LoadShared(page->last_msi_address, std::memory_order_relaxed);
  s.last_msi_data = os::LoadShared(page->last_msi_data, std::memory_order_relaxed);
  return s;
}

Status LocalGuestIo::WaitForInterrupt(std::chrono::milliseconds timeout) {
  GPUVM_RETURN_IF_ERROR(os::WaitReadable(irq_.get(), static_cast<int>(timeout.count())));
  os::DrainEventFd(irq_.get());
  return Status::Ok();
}

}  // namespace gpuvm::hv::local
