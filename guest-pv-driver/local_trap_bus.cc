#include "guest-pv-driver/local_trap_bus.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gpu/hw/pci.h"
#include "guest-pv-driver/range_allocator.h"
#include "hypervisor/backend.h"

namespace gpuvm::guest {
namespace {

constexpr uint64_t kPage = 4096;
// Xen's emulator performs at most this many repetitions of a rep string instruction per ioreq
// (hvmemul_linear_to_phys); the guest's instruction then continues with what is left.
constexpr uint64_t kMaxRepCount = 4096;

// PCI configuration space, type 0 header (PCI Local Bus Specification 3.0, section 6.1).
constexpr uint32_t kVendorId = 0x00;
constexpr uint32_t kDeviceId = 0x02;
constexpr uint32_t kCommand = 0x04;
constexpr uint32_t kRevision = 0x08;  // class code in the upper 24 bits of the same dword
constexpr uint32_t kBar0 = 0x10;
constexpr uint32_t kBar1 = 0x14;  // 64-bit: 0x14/0x18
constexpr uint32_t kBar3 = 0x1c;  // 64-bit: 0x1c/0x20
constexpr uint16_t kCommandMemory = 1u << 1;
constexpr uint16_t kCommandBusMaster = 1u << 2;
constexpr uint32_t kBarFlagsMask = 0xf;  // memory BARs: type and prefetchable bits

// How often the interrupt thread looks at the line while it is asserted: deassertion is not
// signalled by the local backend (edges only), and the driver only needs to stop decoding soon.
constexpr auto kAssertedPoll = std::chrono::microseconds(200);

std::shared_ptr<LocalVmGuest>& ProcessVm() {
  static auto* vm = new std::shared_ptr<LocalVmGuest>();
  return *vm;
}
std::mutex& ProcessVmMutex() {
  static auto* mu = new std::mutex();
  return *mu;
}

}  // namespace

// ---- LocalVmGuest: frames
// ------------------------------------------------------------------------

Result<std::shared_ptr<LocalVmGuest>> LocalVmGuest::Create(std::unique_ptr<hv::GuestIo> io,
                                                           const LocalVmGuestOptions& options) {
  if (io == nullptr) return Status::InvalidArgument("no guest side of a domain");
  std::shared_ptr<LocalVmGuest> vm(new LocalVmGuest());
  vm->options_ = options;
  vm->io_ = std::move(io);
  const uint64_t ram_bytes = vm->io_->ram_bytes();
  const uint64_t frames = ram_bytes / kPage;
  const uint64_t reserved = (options.reserved_low_bytes + kPage - 1) / kPage;
  const uint64_t reserved_high = (options.reserved_high_bytes + kPage - 1) / kPage;
  if (frames <= reserved + reserved_high + 16) {
    return Status::InvalidArgument("guest RAM too small for a GPU driver's DMA buffers");
  }
  GPUVM_ASSIGN_OR_RETURN(vm->ram_, os::SharedMapping::Map(vm->io_->ram_fd(), 0, ram_bytes, true));
  vm->free_frames_[reserved] = frames - reserved - reserved_high;
  for (uint32_t v = 0; v < vm->io_->vcpu_count(); ++v) {
    auto vcpu = std::make_unique<Vcpu>();
    GPUVM_ASSIGN_OR_RETURN(std::vector<uint64_t> bounce, vm->AllocateFrames(1));
    vcpu->bounce_gpa = bounce[0] * kPage;
    vm->vcpus_.push_back(std::move(vcpu));
  }
  GPUVM_ASSIGN_OR_RETURN(vm->irq_stop_, os::CreateEventFd());
  return vm;
}

Result<std::shared_ptr<LocalVmGuest>> LocalVmGuest::FromEnvironment() {
  std::lock_guard lock(ProcessVmMutex());
  if (ProcessVm() != nullptr) return ProcessVm();
  // A slow device model is waited for, with a line on stderr (hv::GuestIoOptions::note).
  hv::GuestIoOptions options;
  options.note = [](const std::string& line) { std::fprintf(stderr, "gpuvm: %s\n", line.c_str()); };
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<hv::GuestIo> io, hv::OpenGuestIoFromEnvironment(options));
  GPUVM_ASSIGN_OR_RETURN(ProcessVm(), Create(std::move(io)));
  return ProcessVm();
}

LocalVmGuest::~LocalVmGuest() { (void)SetInterruptHandler(nullptr); }

uint64_t LocalVmGuest::free_frames() const {
  std::lock_guard lock(frames_mu_);
  uint64_t n = 0;
  for (const auto& [first, count] : free_frames_) n += count;
  return n;
}

Result<std::vector<uint64_t>> LocalVmGuest::AllocateFrames(uint64_t count) {
  std::lock_guard lock(frames_mu_);
  std::vector<uint64_t> frames;
  frames.reserve(count);
  // One contiguous run when there is one (fewer mappings), else whatever is free, lowest first.
  auto fit = free_frames_.begin();
  while (fit != free_frames_.end() && fit->second < count) ++fit;
  if (fit != free_frames_.end()) {
    const auto [first, have] = *fit;
    free_frames_.erase(fit);
    if (have > count) free_frames_[first + count] = have - count;
    for (uint64_t i = 0; i < count; ++i) frames.push_back(first + i);
    return frames;
  }
  uint64_t total = 0;
  for (const auto& [first, have] : free_frames_) total += have;
  if (total < count) {
    return Status::ResourceExhausted("guest RAM exhausted: " + std::to_string(count) +
                                     " pages wanted, " + std::to_string(total) + " free");
  }
  while (frames.size() < count) {
    auto it = free_frames_.begin();
    const auto [first, have] = *it;
    const uint64_t take = std::min<uint64_t>(have, count - frames.size());
    free_frames_.erase(it);
    if (have > take) free_frames_[first + take] = have - take;
    for (uint64_t i = 0; i < take; ++i) frames.push_back(first + i);
  }
  return frames;
}

bool LocalVmGuest::WriteFrames(uint64_t gpa, const uint8_t* src, uint64_t length) {
  if (gpa > ram_.length() || length > ram_.length() - gpa) return false;
  while (length > 0) {
    const ssize_t n = ::pwrite(io_->ram_fd(), src, length, static_cast<off_t>(gpa));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;  // the caller copies the whole range through the RAM view
    src += n;
    gpa += static_cast<uint64_t>(n);
    length -= static_cast<uint64_t>(n);
  }
  return true;
}

void LocalVmGuest::FreeFrames(const std::vector<uint64_t>& frames) {
  std::lock_guard lock(frames_mu_);
  // One map update per run of consecutive frames (a 64 MiB buffer is one run, not 16384 frames).
  for (size_t k = 0; k < frames.size();) {
    size_t end = k + 1;
    while (end < frames.size() && frames[end] == frames[end - 1] + 1) ++end;
    InsertFreeRange(free_frames_, frames[k], end - k);
    k = end;
  }
}

template <typename F>
auto LocalVmGuest::OnVcpu(F f) {
  // A thread keeps coming back to the vCPU it used last; if that one is busy, any free one will do;
  // if all are busy, wait for ours.
  thread_local uint32_t hint = 0;
  const uint32_t n = static_cast<uint32_t>(vcpus_.size());
  uint32_t v = hint % n;
  std::unique_lock<std::mutex> lock(vcpus_[v]->mu, std::try_to_lock);
  for (uint32_t i = 1; !lock.owns_lock() && i < n; ++i) {
    const uint32_t other = (v + i) % n;
    lock = std::unique_lock<std::mutex>(vcpus_[other]->mu, std::try_to_lock);
    if (lock.owns_lock()) v = other;
  }
  if (!lock.owns_lock()) lock = std::unique_lock<std::mutex>(vcpus_[v]->mu);
  hint = v;
  return f(v);
}

// ---- LocalVmGuest: DMA
// ---------------------------------------------------------------------------

class LocalVmGuest::DmaPages final : public DmaMapping {
 public:
  DmaPages(std::shared_ptr<LocalVmGuest> vm, uint8_t* host, uint64_t length,
           std::vector<uint64_t> frames, bool registered, bool owned = false)
      : vm_(std::move(vm)),
        host_(host),
        length_(length),
        frames_(std::move(frames)),
        registered_(registered),
        owned_(owned) {}
  ~DmaPages() override {
    if (registered_) vm_->UnmapDma(reinterpret_cast<uintptr_t>(host_), length_ / kPage, owned_);
    if (owned_) ::munmap(host_, length_);
  }
  uint8_t* host() const override { return host_; }
  uint64_t length() const override { return length_; }
  uint64_t PageBusAddress(uint64_t offset) const override {
    return frames_[offset / kPage] * kPage;
  }

 private:
  std::shared_ptr<LocalVmGuest> vm_;  // the VM outlives its mappings
  uint8_t* host_;
  uint64_t length_;
  std::vector<uint64_t> frames_;  // per page
  bool registered_;               // false: the memory was guest RAM already (our RAM view)
  bool owned_;                    // AllocDma memory: unmapped with the mapping
};

Result<std::unique_ptr<DmaMapping>> LocalVmGuest::AllocDma(uint64_t length, void* at) {
  if (length == 0 || length % kPage || length > ram_.length()) {
    return Status::InvalidArgument("DMA memory must be a non-empty multiple of 4 KiB within RAM");
  }
  if (reinterpret_cast<uintptr_t>(at) % kPage) {
    return Status::InvalidArgument("placed DMA memory needs a 4 KiB aligned address");
  }
  const uint64_t pages = length / kPage;
  // Frames, then address space for them (where the caller asked, never over another mapping; else
  // at an address congruent to the first frame's guest-physical address modulo 2 MiB, so that where
  // the host gives shared memory huge pages a whole 2 MiB block of guest RAM is one page-table
  // entry here as in the aggregator's view: base/os.h, "Huge pages"), then the frames over it, one
  // run of consecutive frames per mmap, each run populated for write at once instead of a fault
  // per page on first touch (pinned memory is written by the program; PopulatePages says why not
  // MAP_POPULATE).
  GPUVM_ASSIGN_OR_RETURN(std::vector<uint64_t> frames, AllocateFrames(pages));
  Result<void*> reserved = at != nullptr ? MapAnonymous(length, at, PROT_NONE, MAP_NORESERVE)
                                         : os::ReserveHugeAligned(length, frames[0] * kPage);
  if (!reserved.ok()) {
    FreeFrames(frames);
    return reserved.status().WithContext("address space for pinned memory");
  }
  void* const base = *reserved;
  auto* host = static_cast<uint8_t*>(base);
  for (uint64_t k = 0; k < pages;) {
    uint64_t end = k + 1;
    while (end < pages && frames[end] == frames[end - 1] + 1) ++end;
    // Free frames may hold an earlier user's bytes (freed frames are not scrubbed, see
    // UnmapDmaLocked; a process of this VM may have exited holding DMA memory): a punch of a hole
    // makes the memory zero.
    const off_t gpa = static_cast<off_t>(frames[k] * kPage);
    if (::fallocate(io_->ram_fd(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, gpa,
                    static_cast<off_t>((end - k) * kPage)) != 0) {
      std::memset(ram_.data() + gpa, 0, (end - k) * kPage);
    }
    if (::mmap(host + k * kPage, (end - k) * kPage, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
               io_->ram_fd(), gpa) == MAP_FAILED) {
      const Status s = Status::FromErrno(errno, "mapping guest RAM as pinned memory");
      ::munmap(base, length);
      FreeFrames(frames);
      return s;
    }
    os::AdviseHugePages(host + k * kPage, (end - k) * kPage);
    os::PopulatePages(host + k * kPage, (end - k) * kPage, os::PopulateFor::kWrite);
    k = end;
  }
  {
    // Registered like moved pages, so a later MapDma of them finds their frames.
    std::lock_guard lock(dma_mu_);
    for (uint64_t i = 0; i < pages; ++i) {
      dma_pages_.At(reinterpret_cast<uintptr_t>(host) + i * kPage) = {frames[i], 1};
    }
  }
  return std::unique_ptr<DmaMapping>(
      new DmaPages(shared_from_this(), host, length, std::move(frames), true, true));
}

Result<std::unique_ptr<DmaMapping>> LocalVmGuest::MapDma(void* host, uint64_t length) {
  const auto addr = reinterpret_cast<uintptr_t>(host);
  if (host == nullptr || length == 0 || addr % kPage || length % kPage || addr + length < addr) {
    return Status::InvalidArgument("DMA mappings need 4 KiB aligned, non-empty host memory");
  }
  const uint64_t pages = length / kPage;
  // Memory that already is guest RAM (our own view of it) needs no moving.
  const auto ram_begin = reinterpret_cast<uintptr_t>(ram_.data());
  if (addr >= ram_begin && addr + length <= ram_begin + ram_.length()) {
    std::vector<uint64_t> frames(pages);
    for (uint64_t i = 0; i < pages; ++i) frames[i] = (addr - ram_begin) / kPage + i;
    return std::unique_ptr<DmaMapping>(new DmaPages(shared_from_this(), static_cast<uint8_t*>(host),
                                                    length, std::move(frames), false));
  }

  std::lock_guard lock(dma_mu_);
  std::vector<uint64_t> frames(pages);
  std::vector<uint64_t> fresh;  // page indices that need a frame
  for (uint64_t i = 0; i < pages; ++i) {
    if (const DmaPageTable::Entry* e = dma_pages_.Find(addr + i * kPage)) {
      frames[i] = e->frame;
    } else {
      fresh.push_back(i);
    }
  }
  if (!fresh.empty()) {
    GPUVM_ASSIGN_OR_RETURN(std::vector<uint64_t> got, AllocateFrames(fresh.size()));
    for (size_t k = 0; k < fresh.size(); ++k) frames[fresh[k]] = got[k];
    // Move the bytes into the frames and map the frames over them, one run of consecutive pages on
    // consecutive frames at a time.
    size_t done = 0;
    Status failure;
    for (size_t k = 0; k < fresh.size();) {
      size_t end = k + 1;
      while (end < fresh.size() && fresh[end] == fresh[end - 1] + 1 &&
             frames[fresh[end]] == frames[fresh[end - 1]] + 1) {
        ++end;
      }
      uint8_t* run = static_cast<uint8_t*>(host) + fresh[k] * kPage;
      const uint64_t run_bytes = (end - k) * kPage;
      const uint64_t gpa = frames[fresh[k]] * kPage;
      // One write into the memfd allocates the frames' pages in bulk; copying through our RAM view
      // instead took a page fault (and a clear_page) per 4 KiB. The whole run is then populated
      // for write (the program goes on writing its memory) rather than faulted page by page.
      if (!WriteFrames(gpa, run, run_bytes)) std::memcpy(ram_.data() + gpa, run, run_bytes);
      if (::mmap(run, run_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, io_->ram_fd(),
                 static_cast<off_t>(gpa)) == MAP_FAILED) {
        failure = Status::FromErrno(errno, "mapping guest RAM over DMA memory");
        break;
      }
      os::PopulatePages(run, run_bytes, os::PopulateFor::kWrite);
      done = end;
      k = end;
    }
    for (size_t k = 0; k < done; ++k)
      dma_pages_.At(addr + fresh[k] * kPage) = {frames[fresh[k]], 0};
    if (!failure.ok()) {
      // Give back what moved (refs 0: restored below) and the frames that never got used.
      std::vector<uint64_t> unused;
      for (size_t k = done; k < fresh.size(); ++k) unused.push_back(frames[fresh[k]]);
      FreeFrames(unused);
      for (size_t k = 0; k < done; ++k) {
        ++dma_pages_.At(addr + fresh[k] * kPage).refs;
        UnmapDmaLocked(addr + fresh[k] * kPage, 1);
      }
      return failure;
    }
  }
  for (uint64_t i = 0; i < pages; ++i) ++dma_pages_.At(addr + i * kPage).refs;
  return std::unique_ptr<DmaMapping>(new DmaPages(shared_from_this(), static_cast<uint8_t*>(host),
                                                  length, std::move(frames), true));
}

void LocalVmGuest::UnmapDma(uintptr_t first_page, uint64_t pages, bool discard) {
  std::lock_guard lock(dma_mu_);
  UnmapDmaLocked(first_page, pages, discard);
}

void LocalVmGuest::UnmapDmaLocked(uintptr_t first_page, uint64_t pages, bool discard) {
  std::vector<std::pair<uintptr_t, uint64_t>> released;  // host page, frame
  for (uint64_t i = 0; i < pages; ++i) {
    const uintptr_t page = first_page + i * kPage;
    DmaPageTable::Entry* e = dma_pages_.Find(page);
    if (e == nullptr) continue;
    // Discarded pages go now even if another mapping still counts them (its owner freed the memory
    // under it, against the Bus contract): that mapping then finds nothing to give back.
    if (discard) e->refs = 1;
    if (--e->refs == 0) {
      released.emplace_back(page, e->frame);
      dma_pages_.Erase(page);
    }
  }
  // Give the pages back their own anonymous memory with the same bytes (an atomic replacement by
  // mremap: the range is never unmapped in between), then free the frames.
  std::vector<uint64_t> frames;
  for (size_t k = 0; k < released.size();) {
    size_t end = k + 1;
    if (discard) {
      frames.push_back(released[k].second);
      k = end;
      continue;
    }
    while (end < released.size() && released[end].first == released[end - 1].first + kPage) ++end;
    auto* run = reinterpret_cast<uint8_t*>(released[k].first);
    const uint64_t run_bytes = (end - k) * kPage;
    void* fresh = ::mmap(nullptr, run_bytes, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (fresh != MAP_FAILED) {
      std::memcpy(fresh, run, run_bytes);
      if (::mremap(fresh, run_bytes, run_bytes, MREMAP_MAYMOVE | MREMAP_FIXED, run) == MAP_FAILED) {
        ::munmap(fresh, run_bytes);  // the pages stay shared guest RAM: correct, only not private
      }
    }
    for (size_t i = k; i < end; ++i) frames.push_back(released[i].second);
    k = end;
  }
  // The frames go back to the free list as they are, as a guest OS's freed pages stay the VM's RAM:
  // every reuse starts clean anyway (AllocDma punches the frames it takes, MapDma overwrites whole
  // pages). Punching here too gave the memory back to the host only for the next allocation to take
  // it again, and each punch unmaps the range from every process mapping guest RAM (the device
  // model, the aggregator) with a TLB shootdown: pincpy's close in fv-optimized 29 -> 8 ms.
  FreeFrames(frames);
}

// ---- LocalVmGuest: interrupts
// --------------------------------------------------------------------

Status LocalVmGuest::SetInterruptHandler(std::function<void(bool)> handler) {
  if (irq_thread_.joinable()) {
    (void)os::SignalEventFd(irq_stop_.get());
    irq_thread_.join();
    os::DrainEventFd(irq_stop_.get());
  }
  std::lock_guard lock(irq_mu_);
  irq_handler_ = std::move(handler);
  if (!irq_handler_) return Status::Ok();
  irq_handler_((io_->interrupts().intx_levels & 1u) != 0);
  irq_thread_ = std::thread([this] { InterruptLoop(); });
  return Status::Ok();
}

void LocalVmGuest::InterruptLoop() {
  bool reported = (io_->interrupts().intx_levels & 1u) != 0;
  for (;;) {
    pollfd fds[2] = {{irq_stop_.get(), POLLIN, 0}, {io_->irq_fd(), POLLIN, 0}};
    // Asserted: look again soon (deassertion has no signal). Deasserted: sleep until an edge.
    const timespec poll_for{0, std::chrono::nanoseconds(kAssertedPoll).count()};
    const int n = ::ppoll(fds, 2, reported ? &poll_for : nullptr, nullptr);
    if (n < 0 && errno != EINTR) return;
    if (fds[0].revents & POLLIN) return;
    if (fds[1].revents & POLLIN) os::DrainEventFd(io_->irq_fd());
    const bool level = (io_->interrupts().intx_levels & 1u) != 0;
    // An edge while we already reported asserted (deasserted and asserted again in between) is
    // still worth telling: the driver decodes once more.
    if (level != reported || (level && (fds[1].revents & POLLIN))) {
      std::lock_guard lock(irq_mu_);
      if (irq_handler_) irq_handler_(level);
      reported = level;
    }
  }
}

// ---- LocalTrapBus
// --------------------------------------------------------------------------------

Result<std::unique_ptr<LocalTrapBus>> LocalTrapBus::Create(std::shared_ptr<LocalVmGuest> vm,
                                                           const LocalTrapBusOptions& options) {
  if (vm == nullptr) return Status::InvalidArgument("no VM");
  std::unique_ptr<LocalTrapBus> bus(new LocalTrapBus(std::move(vm), options));
  GPUVM_RETURN_IF_ERROR(bus->Enumerate());
  return bus;
}

Result<std::unique_ptr<LocalTrapBus>> LocalTrapBus::FromEnvironment() {
  GPUVM_ASSIGN_OR_RETURN(std::shared_ptr<LocalVmGuest> vm, LocalVmGuest::FromEnvironment());
  return Create(std::move(vm));
}

LocalTrapBus::~LocalTrapBus() {
  if (interrupts_installed_) (void)vm_->SetInterruptHandler(nullptr);
}

Status LocalTrapBus::Enumerate() {
  hv::GuestIo& io = *vm_->io_;
  const hv::Sbdf& f = options_.sbdf;
  return vm_->OnVcpu([&](uint32_t v) -> Status {
    auto read = [&](uint32_t offset, uint32_t size) { return io.ConfigRead(v, f, offset, size); };
    auto write = [&](uint32_t offset, uint32_t size, uint32_t value) {
      return io.ConfigWrite(v, f, offset, size, value);
    };
    if (!io.IsPciClaimed(f)) {
      return Status::NotFound("no device at " + f.ToString() +
                              " (is the VM's device model running?)");
    }
    GPUVM_ASSIGN_OR_RETURN(uint32_t vendor, read(kVendorId, 2));
    GPUVM_ASSIGN_OR_RETURN(uint32_t device, read(kDeviceId, 2));
    GPUVM_ASSIGN_OR_RETURN(uint32_t revision_class, read(kRevision, 4));
    if (vendor != gf100::pci::kVendorId || (revision_class >> 24) != 0x03) {
      char text[96];
      std::snprintf(text, sizeof(text), "%s is %04x:%04x class %06x, not an NVIDIA GPU",
                    f.ToString().c_str(), vendor, device, revision_class >> 8);
      return Status::FailedPrecondition(text);
    }
    pci_.vendor_id = static_cast<uint16_t>(vendor);
    pci_.device_id = static_cast<uint16_t>(device);
    pci_.revision = static_cast<uint8_t>(revision_class);
    pci_.class_code = revision_class >> 8;

    // Size the BARs with decoding off, as an OS does, then assign the unassigned ones.
    GPUVM_ASSIGN_OR_RETURN(uint32_t command, read(kCommand, 2));
    GPUVM_RETURN_IF_ERROR(write(kCommand, 2, command & ~uint32_t{kCommandMemory}));
    struct BarSlot {
      uint32_t reg;
      bool is64;
      uint64_t fallback;
      uint64_t* address;
      uint64_t* size;
    } slots[] = {{kBar0, false, options_.bar0_address, &bar0_, &pci_.bar0_size},
                 {kBar1, true, options_.bar1_address, &bar1_, &pci_.bar1_size},
                 {kBar3, true, options_.bar3_address, &bar3_, &pci_.bar3_size}};
    for (BarSlot& s : slots) {
      GPUVM_ASSIGN_OR_RETURN(uint32_t low, read(s.reg, 4));
      uint32_t high = 0;
      if (s.is64) {
        GPUVM_ASSIGN_OR_RETURN(high, read(s.reg + 4, 4));
      }
      GPUVM_RETURN_IF_ERROR(write(s.reg, 4, 0xffffffff));
      if (s.is64) GPUVM_RETURN_IF_ERROR(write(s.reg + 4, 4, 0xffffffff));
      GPUVM_ASSIGN_OR_RETURN(uint32_t mask_low, read(s.reg, 4));
      uint32_t mask_high = s.is64 ? 0 : 0xffffffff;
      if (s.is64) {
        GPUVM_ASSIGN_OR_RETURN(mask_high, read(s.reg + 4, 4));
      }
      const uint64_t mask = uint64_t{mask_high} << 32 | (mask_low & ~kBarFlagsMask);
      const uint64_t size = ~mask + 1;
      if (mask_low == 0 || (size & (size - 1)) != 0 || size < kPage) {
        return Status::FailedPrecondition("BAR at config offset " + std::to_string(s.reg) +
                                          " does not size like a memory BAR");
      }
      uint64_t address = (uint64_t{high} << 32 | low) & ~uint64_t{kBarFlagsMask};
      if (address == 0) address = s.fallback;  // unassigned: the firmware's job, ours here
      if (address % size != 0) {
        return Status::InvalidArgument("BAR address " + Hex(address) +
                                       " is not aligned to its size " + Hex(size));
      }
      GPUVM_RETURN_IF_ERROR(
          write(s.reg, 4, static_cast<uint32_t>(address) | (low & kBarFlagsMask)));
      if (s.is64) GPUVM_RETURN_IF_ERROR(write(s.reg + 4, 4, static_cast<uint32_t>(address >> 32)));
      *s.address = address;
      *s.size = size;
    }
    GPUVM_RETURN_IF_ERROR(write(kCommand, 2, command | kCommandMemory | kCommandBusMaster));
    if (!io.IsMmioClaimed(bar0_, pci_.bar0_size)) {
      return Status::FailedPrecondition("the device model did not map BAR0 at " + Hex(bar0_));
    }
    return Status::Ok();
  });
}

uint64_t LocalTrapBus::bar_address(Bar bar) const {
  return bar == Bar::k0 ? bar0_ : bar == Bar::k1 ? bar1_ : bar3_;
}

bool LocalTrapBus::Fits(Bar bar, uint64_t offset, uint64_t length) const {
  const uint64_t size = pci_.BarSize(bar);
  return offset <= size && length <= size - offset;
}

void LocalTrapBus::Failed(const Status& why) {
  if (failed_.fetch_add(1, std::memory_order_relaxed) == 0) {
    std::fprintf(stderr,
                 "gpuvm: the virtual GPU stopped answering (%s); every access reads all-ones from "
                 "now on\n",
                 why.ToString().c_str());
  }
}

uint64_t LocalTrapBus::Read(Bar bar, uint64_t offset, Width width) {
  const uint32_t size = static_cast<uint32_t>(width);
  const uint64_t all_ones = size == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * size)) - 1;
  if (!Fits(bar, offset, size)) return 0;  // nothing there (bus.h: a dead register reads 0)
  if (failed_.load(std::memory_order_relaxed) != 0) return all_ones;
  Result<uint64_t> value =
      vm_->OnVcpu([&](uint32_t v) { return vm_->io_->Read(v, bar_address(bar) + offset, size); });
  if (!value.ok()) {
    Failed(value.status());
    return all_ones;
  }
  return *value;
}

void LocalTrapBus::Write(Bar bar, uint64_t offset, Width width, uint64_t value) {
  const uint32_t size = static_cast<uint32_t>(width);
  if (!Fits(bar, offset, size) || failed_.load(std::memory_order_relaxed) != 0) return;
  Status s = vm_->OnVcpu(
      [&](uint32_t v) { return vm_->io_->Write(v, bar_address(bar) + offset, size, value); });
  if (!s.ok()) Failed(s);
}

std::vector<RepPiece> SplitRepTransfer(uint64_t gpa, uint64_t length, uint32_t whole) {
  // Whole elements where the BAR offset allows, single bytes for a ragged head and tail: one trap
  // per piece. Where 8-byte elements would need a separate trap for a 4-byte head or tail and
  // 4-byte ones would not (movsd instead of movsq: 12 bytes at offset 4, 20 at offset 0), the
  // transfer goes as 4-byte elements: one trap fewer, for a small copy's usual shape.
  std::vector<RepPiece> pieces;
  uint64_t done = 0;
  while (done < length) {
    const uint64_t at = gpa + done;
    const uint64_t left = length - done;
    uint32_t element = whole;
    uint64_t bytes = left & ~uint64_t{whole - 1};
    if (whole == 8 && left >= 4 && (at % 8 == 4 || (at % 8 == 0 && left % 8 == 4))) {
      element = 4;
      bytes = left & ~uint64_t{3};
    } else if (at % whole != 0 || bytes == 0) {
      element = 1;
      bytes = std::min<uint64_t>(left, at % whole != 0 ? whole - at % whole : left);
    }
    pieces.push_back({done, element, uint32_t(bytes / element)});
    done += bytes;
  }
  return pieces;
}

Status LocalTrapBus::RepTransfer(uint32_t vcpu, bool read, uint64_t gpa, uint64_t length,
                                 uint32_t whole) {
  const uint64_t bounce = vm_->vcpus_[vcpu]->bounce_gpa;
  for (const RepPiece& piece : SplitRepTransfer(gpa, length, whole)) {
    hv::IoRequest r;
    r.vcpu = vcpu;
    r.space = hv::IoSpace::kMmio;
    r.dir = read ? hv::IoDirection::kRead : hv::IoDirection::kWrite;
    r.addr = gpa + piece.offset;
    r.size = piece.element;
    r.count = piece.count;
    r.data_is_ptr = true;
    r.data = bounce + piece.offset;
    Result<uint64_t> result = vm_->io_->Submit(r);
    if (!result.ok()) return result.status();
  }
  return Status::Ok();
}

Status LocalTrapBus::ReadBlock(Bar bar, uint64_t offset, void* dst, uint64_t length) {
  if (bar == Bar::k0) return Status::InvalidArgument("block transfers go through BAR1 or BAR3");
  if (!Fits(bar, offset, length)) return Status::OutOfRange("block transfer past the BAR's end");
  auto* out = static_cast<uint8_t*>(dst);
  // Remapped (BAR remap): one copy, no trap.
  if (failed_.load(std::memory_order_relaxed) == 0 &&
      vm_->io_->AccessMemory(bar_address(bar) + offset, out, length, false)) {
    return Status::Ok();
  }
  for (uint64_t done = 0; done < length;) {
    const uint64_t chunk = std::min<uint64_t>(kPage, length - done);
    if (failed_.load(std::memory_order_relaxed) == 0 &&
        vm_->io_->AccessMemory(bar_address(bar) + offset + done, out + done, chunk, false)) {
      done += chunk;
      continue;
    }
    if (failed_.load(std::memory_order_relaxed) != 0) {
      std::memset(out + done, 0xff, length - done);
      return Status::Ok();
    }
    Status s = vm_->OnVcpu([&](uint32_t v) -> Status {
      GPUVM_RETURN_IF_ERROR(RepTransfer(v, true, bar_address(bar) + offset + done, chunk));
      std::memcpy(out + done, vm_->ram_.data() + vm_->vcpus_[v]->bounce_gpa, chunk);
      return Status::Ok();
    });
    if (!s.ok()) {
      Failed(s);
      continue;  // the rest reads all-ones
    }
    done += chunk;
  }
  return Status::Ok();
}

Status LocalTrapBus::WriteBlock(Bar bar, uint64_t offset, const void* src, uint64_t length) {
  if (bar == Bar::k0) return Status::InvalidArgument("block transfers go through BAR1 or BAR3");
  if (!Fits(bar, offset, length)) return Status::OutOfRange("block transfer past the BAR's end");
  const auto* in = static_cast<const uint8_t*>(src);
  // Remapped (BAR remap): one copy, no trap.
  if (failed_.load(std::memory_order_relaxed) == 0 &&
      vm_->io_->AccessMemory(bar_address(bar) + offset, const_cast<uint8_t*>(in), length, true)) {
    return Status::Ok();
  }
  for (uint64_t done = 0; done < length;) {
    if (failed_.load(std::memory_order_relaxed) != 0) return Status::Ok();  // dropped
    const uint64_t chunk = std::min<uint64_t>(kPage, length - done);
    if (vm_->io_->AccessMemory(bar_address(bar) + offset + done, const_cast<uint8_t*>(in + done),
                               chunk, true)) {
      done += chunk;
      continue;
    }
    Status s = vm_->OnVcpu([&](uint32_t v) -> Status {
      std::memcpy(vm_->ram_.data() + vm_->vcpus_[v]->bounce_gpa, in + done, chunk);
      return RepTransfer(v, false, bar_address(bar) + offset + done, chunk);
    });
    if (!s.ok()) Failed(s);
    done += chunk;
  }
  return Status::Ok();
}

void LocalTrapBus::WriteRegs(uint64_t offset, std::span<const uint32_t> values) {
  const uint64_t length = values.size() * 4;
  if (length == 0 || offset % 4 != 0 || !Fits(Bar::k0, offset, length)) {
    Bus::WriteRegs(offset, values);  // what single writes would do with it
    return;
  }
  const auto* in = reinterpret_cast<const uint8_t*>(values.data());
  for (uint64_t done = 0; done < length;) {
    if (failed_.load(std::memory_order_relaxed) != 0) return;  // dropped
    // Up to the next page boundary of BAR0: a rep transfer never crosses one.
    const uint64_t chunk = std::min(kPage - (offset + done) % kPage, length - done);
    Status s = vm_->OnVcpu([&](uint32_t v) -> Status {
      std::memcpy(vm_->ram_.data() + vm_->vcpus_[v]->bounce_gpa, in + done, chunk);
      return RepTransfer(v, false, bar0_ + offset + done, chunk, 4);
    });
    if (!s.ok()) Failed(s);
    done += chunk;
  }
}

Status LocalTrapBus::FillBlock(Bar bar, uint64_t offset, uint8_t byte, uint64_t length) {
  if (bar == Bar::k0) return Status::InvalidArgument("block transfers go through BAR1 or BAR3");
  if (!Fits(bar, offset, length)) return Status::OutOfRange("block transfer past the BAR's end");
  hv::GuestIo& io = *vm_->io_;
  const uint64_t base = bar_address(bar) + offset;
  // Remapped (BAR remap): one memset, no trap.
  if (length == 0 ||
      (failed_.load(std::memory_order_relaxed) == 0 && io.FillMemory(base, byte, length))) {
    return Status::Ok();
  }
  const uint64_t pattern = uint64_t{byte} * 0x0101010101010101ull;
  for (uint64_t done = 0; done < length;) {
    if (failed_.load(std::memory_order_relaxed) != 0) return Status::Ok();  // dropped
    const uint64_t gpa = base + done;
    const uint64_t piece = std::min(kPage - gpa % kPage, length - done);
    if (io.FillMemory(gpa, byte, piece)) {
      done += piece;
      continue;
    }
    // One rep stos: 8-byte elements where aligned, single bytes for a ragged head and tail, at most
    // kMaxRepCount elements, and only over pages that trap.
    uint32_t element = 8;
    uint64_t bytes = std::min((length - done) & ~uint64_t{7}, kMaxRepCount * 8);
    if (gpa % 8 != 0 || bytes == 0) {
      element = 1;
      bytes = std::min<uint64_t>(length - done, gpa % 8 != 0 ? 8 - gpa % 8 : length - done);
    }
    for (uint64_t page = piece; page < bytes; page += kPage) {
      if (io.IsMemory(gpa + page, 1)) {
        bytes = page;
        break;
      }
    }
    hv::IoRequest r;
    r.space = hv::IoSpace::kMmio;
    r.dir = hv::IoDirection::kWrite;
    r.addr = gpa;
    r.size = element;
    r.count = static_cast<uint32_t>(bytes / element);
    r.data_is_ptr = false;
    r.data = element == 8 ? pattern : byte;
    Status s = vm_->OnVcpu([&](uint32_t v) {
      r.vcpu = v;
      return io.Submit(r).status();
    });
    if (!s.ok()) Failed(s);
    done += bytes;
  }
  return Status::Ok();
}

Result<std::unique_ptr<DmaMapping>> LocalTrapBus::MapDma(void* host, uint64_t length) {
  return vm_->MapDma(host, length);
}

Result<std::unique_ptr<DmaMapping>> LocalTrapBus::AllocDma(uint64_t length) {
  return vm_->AllocDma(length);
}

Result<std::unique_ptr<DmaMapping>> LocalTrapBus::AllocDmaAt(uint64_t length, void* at) {
  if (at == nullptr) return Status::InvalidArgument("placed DMA memory needs an address");
  return vm_->AllocDma(length, at);
}

Status LocalTrapBus::SetInterruptHandler(std::function<void(bool asserted)> handler) {
  interrupts_installed_ = static_cast<bool>(handler);
  return vm_->SetInterruptHandler(std::move(handler));
}

}  // namespace gpuvm::guest
