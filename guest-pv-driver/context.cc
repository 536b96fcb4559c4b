// Context: one GPU address space with its allocations (VRAM, pinned, managed and registered host
// memory, code), report slots, channels and events.

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/align.h"
#include "gpu/hw/vm.h"
#include "guest-pv-driver/driver_impl.h"
#include "guest-pv-driver/vm_geometry.h"

namespace gpuvm::guest {

namespace vm = gf100::vm;

namespace {

// (our choice) single allocations are capped at 256 GiB: far beyond any VRAM we model, and it keeps
// every size computation below far from overflow.
constexpr uint64_t kMaxAllocation = 256ull << 30;
// (our choice) ranges of the managed window tried for one allocation whose host pages turn out to
// be in use, before it fails.
constexpr int kManagedPlacementAttempts = 8;

bool IsPowerOfTwo(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

static_assert(kManagedLimit == vm::kVaLimit, "the managed window ends where GPU addresses do");
static_assert(kLargeHeapBase < kManagedBase, "device memory stays below the managed window");

// The managed window's allocator. One per process, not per driver or context: the window's
// addresses are host addresses too, and a process has one address space (tests run several
// drivers in one process). Never destroyed: records in a driver's quarantine release their range
// when that driver goes, which may be late in the process's exit.
class ManagedWindow {
 public:
  static ManagedWindow& Get() {
    static ManagedWindow* const window = new ManagedWindow();
    return *window;
  }
  Result<uint64_t> Reserve(uint64_t bytes) {
    std::lock_guard lock(mu_);
    Result<uint64_t> va = ranges_.Allocate(bytes, kPage);
    if (!va.ok()) return Status::ResourceExhausted("the managed memory window is full");
    return va;
  }
  void Release(uint64_t va) {
    std::lock_guard lock(mu_);
    (void)ranges_.Free(va);
  }

 private:
  std::mutex mu_;
  RangeAllocator ranges_{kManagedBase, kManagedLimit - kManagedBase};  // guarded by mu_
};

}  // namespace

// ---- AllocRecord
// ----------------------------------------------------------------------------------------

AllocRecord::~AllocRecord() {
  if (driver_->drm() != nullptr) {  // the object was closed at Free, or goes with the file
    driver_->drm_vram_used.fetch_sub(drm_vram_bytes, std::memory_order_relaxed);
    dma.reset();
    return;
  }
  if (kind == MemoryKind::kManaged) {
    // The host pages first: once the range is back in the window, another allocation may place
    // its pages there.
    dma.reset();
    if (va != 0) ManagedWindow::Get().Release(va);
    return;
  }
  if (in_bar1) driver_->ReleaseBar1(bar1);
  if (vram != 0) driver_->vram()->Free(vram);
  if (va != 0) context_->ReleaseVa(map_va(), large);
  dma.reset();
}

// ---- Context::Impl: lifecycle
// ---------------------------------------------------------------------------

Result<std::unique_ptr<Context>> Context::Impl::Create(Driver::Impl* driver,
                                                       const ContextOptions& options) {
  if (options.ib_entries < 2 || options.ib_entries > 32768 || !IsPowerOfTwo(options.ib_entries)) {
    return Status::InvalidArgument("IB entries must be a power of two from 2 to 32768");
  }
  if (options.pushbuffer_bytes < (64 << 10) || options.pushbuffer_bytes > (1ull << 30)) {
    return Status::InvalidArgument("the pushbuffer must be 64 KiB to 1 GiB");
  }
  if (options.staging_bytes < (64 << 10) || options.staging_bytes > (1ull << 30)) {
    return Status::InvalidArgument("staging buffers must be 64 KiB to 1 GiB");
  }
  if (options.bar1_copy_threshold > kBar1MapMax) {
    return Status::InvalidArgument("the BAR1 copy threshold is at most 8 MiB");
  }
  if (options.default_timeout.count() <= 0 || options.setup_timeout.count() <= 0) {
    return Status::InvalidArgument("the wait limits must be positive");
  }
  if (options.copy_engine != CopyEngine::kPcopy && options.copy_engine != CopyEngine::kM2mf) {
    return Status::InvalidArgument("unknown copy engine");
  }
  std::unique_ptr<Impl> impl(new Impl(driver, options));
  Impl* raw = impl.get();
  std::unique_ptr<Context> context(new Context(std::move(impl)));
  raw->owner_ = context.get();
  driver->live_contexts.fetch_add(1);
  GPUVM_RETURN_IF_ERROR(raw->Init());
  return context;
}

Status Context::Impl::Init() {
  if (DrmDevice* drm = driver_->drm()) {
    // The kernel keeps the address space: a DRM file is one.
    GPUVM_ASSIGN_OR_RETURN(drm_file_, drm->OpenFile());
    GPUVM_ASSIGN_OR_RETURN(report_page_, AllocPinned(kReportPageBytes, /*internal=*/true));
    slot_used_.assign(kReportPageBytes / kReportSlotBytes, false);
    GPUVM_ASSIGN_OR_RETURN(default_channel_, CreateChannel());
    return Status::Ok();
  }
  const int shift = driver_->large_page_shift();
  GPUVM_ASSIGN_OR_RETURN(
      space_, VmSpace::Create(driver_->instmem(), driver_->writer(), vm::kVaLimit - 1, shift));
  small_heap_ = RangeAllocator(kSmallHeapBase, kSmallHeapSize);
  large_heap_ = RangeAllocator(kLargeHeapBase, kManagedBase - kLargeHeapBase);
  GPUVM_ASSIGN_OR_RETURN(report_page_, AllocPinned(kReportPageBytes, /*internal=*/true));
  slot_used_.assign(kReportPageBytes / kReportSlotBytes, false);
  GPUVM_ASSIGN_OR_RETURN(default_channel_, CreateChannel());
  return Status::Ok();
}

Context::Impl::~Impl() {
  const auto drain =
      std::min<std::chrono::nanoseconds>(options_.default_timeout, std::chrono::seconds(5));
  if (Synchronize(drain).code() == StatusCode::kDeadlineExceeded) {
    abandoning_.store(true, std::memory_order_release);
  } else {
    idle_teardown_.store(true, std::memory_order_release);
  }
  std::vector<std::unique_ptr<Channel>> channels;
  std::vector<std::unique_ptr<Event>> events;
  {
    std::lock_guard lock(objects_mu_);
    channels.swap(channels_);
    events.swap(events_);
  }
  while (!channels.empty()) channels.pop_back();  // newest first; each leaves PFIFO
  events.clear();
  std::map<uint64_t, std::shared_ptr<AllocRecord>> allocs;
  {
    std::lock_guard lock(alloc_mu_);
    allocs.swap(allocs_);
    host_index_.clear();
    // Recycled allocations are mapped like live ones and go the same way.
    for (auto& [key, record] : recycled_) allocs[record->va] = std::move(record);
    recycled_.clear();
    driver_->recycled_vram.fetch_sub(recycled_bytes_, std::memory_order_relaxed);
    recycled_bytes_ = 0;
  }
  for (auto& [va, record] : allocs) {
    if (record->in_bar1) driver_->UnmapBar1(record->bar1, record->mapped);
  }
  // The GPU must forget this space's translations (host pages among them) before the memory goes:
  // one flush for everything the channels' teardown unmapped and everything still mapped.
  if (space_ != nullptr) (void)space_->Flush();
  for (auto& [va, record] : allocs) Retire(std::move(record));
  allocs.clear();
  if (report_page_ != nullptr) Retire(std::move(report_page_));
  space_.reset();
  // DRM: closing the file frees every object of it in the kernel.
  if (drm_file_ != 0) driver_->drm()->CloseFile(drm_file_);
  driver_->live_contexts.fetch_sub(1);
}

Status Context::Impl::PollDrm() {
  DrmDevice* drm = driver_->drm();
  if (drm == nullptr || report_page_ == nullptr) return Status::Ok();
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  int64_t last = drm_polled_ns_.load(std::memory_order_relaxed);
  if (now - last < std::chrono::nanoseconds(kDrmHealthInterval).count() ||
      !drm_polled_ns_.compare_exchange_strong(last, now)) {
    return status();
  }
  const Status health = drm->Health(drm_file_, report_page_->gem);
  if (health.code() == StatusCode::kAborted) {
    GpuFault fault;
    fault.kind = GpuFault::Kind::kCommandError;
    fault.message = "the kernel driver stopped this context after a GPU error (" +
                    std::string(health.message()) + ")";
    SetFault(fault);
  } else if (health.code() == StatusCode::kUnavailable) {
    return health;
  }
  return status();
}

// ---- faults
// ---------------------------------------------------------------------------------------------

void Context::Impl::SetFault(const GpuFault& fault) {
  std::lock_guard lock(fault_mu_);
  if (fault_.has_value()) return;
  fault_ = fault;
  faulted_.store(true, std::memory_order_release);
}

Status Context::Impl::status() const {
  if (!faulted()) return Status::Ok();
  std::lock_guard lock(fault_mu_);
  return Status::Aborted(fault_->message);
}

std::optional<GpuFault> Context::Impl::fault() const {
  std::lock_guard lock(fault_mu_);
  return fault_;
}

// ---- memory
// ---------------------------------------------------------------------------------------------

Result<uint64_t> Context::Impl::ReserveVa(uint64_t bytes, bool large) {
  std::lock_guard lock(va_mu_);
  RangeAllocator& heap = large ? large_heap_ : small_heap_;
  Result<uint64_t> va = heap.Allocate(bytes, large ? space_->large_page_size() : kPage);
  if (!va.ok()) return Status::ResourceExhausted("the context's GPU address space is full");
  return va;
}

void Context::Impl::ReleaseVa(uint64_t va, bool large) {
  std::lock_guard lock(va_mu_);
  (void)(large ? large_heap_ : small_heap_).Free(va);
}

Status Context::Impl::MapRecord(AllocRecord* r) {
  std::vector<uint64_t> ptes;
  if (r->is_vram()) {
    const uint64_t page = r->large ? space_->large_page_size() : kPage;
    ptes.resize(r->mapped / page);
    for (size_t i = 0; i < ptes.size(); ++i) ptes[i] = vm::pte::Make(r->vram + i * page);
  } else {
    ptes.resize(r->mapped / kPage);
    vm::pte::Flags flags;
    flags.target = vm::Target::kSysramSnooped;  // cached host memory, as nouveau maps GART
    for (size_t i = 0; i < ptes.size(); ++i) {
      uint64_t bus = 0;
      if (i == 0 && r->borrows[0]) {
        bus = r->borrowed_bus[0];
      } else if (i + 1 == ptes.size() && r->borrows[1]) {
        bus = r->borrowed_bus[1];
      } else {
        bus = r->dma->PageBusAddress((i - r->dma_first_page) * kPage);
      }
      ptes[i] = vm::pte::Make(bus, flags);
    }
  }
  Status s = space_->Map(r->map_va(), ptes, r->large);
  if (s.ok()) s = space_->Flush();
  if (!s.ok()) (void)UnmapRecord(r);
  return s;
}

Status Context::Impl::UnmapRecord(AllocRecord* r) {
  if (DrmDevice* drm = driver_->drm()) {
    const uint32_t handle = std::exchange(r->gem, 0);
    if (handle == 0) return Status::Ok();
    return drm->Close(drm_file_, handle);
  }
  const uint64_t page = r->large ? space_->large_page_size() : kPage;
  Status s = space_->Unmap(r->map_va(), r->mapped / page, r->large);
  Status f = idle_teardown_.load(std::memory_order_acquire) ? Status::Ok() : space_->Flush();
  if (r->in_bar1) driver_->UnmapBar1(r->bar1, r->mapped);
  return s.ok() ? f : s;
}

Result<std::shared_ptr<AllocRecord>> Context::Impl::AllocVram(uint64_t size, MemoryKind kind,
                                                              bool internal) {
  if (size == 0) return Status::InvalidArgument("allocation of 0 bytes");
  if (size > kMaxAllocation) return Status::ResourceExhausted("allocation larger than 256 GiB");
  const bool large = size >= kLargePageThreshold;
  const uint64_t page = large ? uint64_t{1} << driver_->large_page_shift() : kPage;
  const uint64_t mapped = AlignUp(size, page);
  if (kind == MemoryKind::kDevice && !internal) {
    // A recycled allocation of this mapped size: already mapped, no page-table traffic.
    std::lock_guard lock(alloc_mu_);
    auto it = recycled_.find({large, mapped});
    if (it != recycled_.end()) {
      std::shared_ptr<AllocRecord> r = std::move(it->second);
      recycled_.erase(it);
      recycled_bytes_ -= mapped;
      driver_->recycled_vram.fetch_sub(mapped, std::memory_order_relaxed);
      r->size = size;
      r->freed = false;
      allocs_[r->va] = r;
      return r;
    }
  }
  auto r = std::make_shared<AllocRecord>(driver_, this);
  r->kind = kind;
  r->internal = internal;
  r->size = size;
  r->large = large;
  r->mapped = mapped;
  if (DrmDevice* drm = driver_->drm()) {
    Result<DrmDevice::Object> object = drm->NewVram(drm_file_, mapped, page);
    if (!object.ok() && DrainRecycled()) object = drm->NewVram(drm_file_, mapped, page);
    if (!object.ok()) return object.status();
    r->gem = object->handle;
    r->va = object->va;
    r->drm_vram_bytes = mapped;
    driver_->drm_vram_used.fetch_add(mapped, std::memory_order_relaxed);
    std::lock_guard lock(alloc_mu_);
    allocs_[r->va] = r;
    return r;
  }
  Result<uint64_t> vram = driver_->vram()->Allocate(r->mapped, page);
  if (!vram.ok() && DrainRecycled()) vram = driver_->vram()->Allocate(r->mapped, page);
  if (!vram.ok()) return vram.status();
  r->vram = *vram;
  GPUVM_ASSIGN_OR_RETURN(r->va, ReserveVa(r->mapped, r->large));
  GPUVM_RETURN_IF_ERROR(MapRecord(r.get()));
  std::lock_guard lock(alloc_mu_);
  allocs_[r->va] = r;
  return r;
}

Result<std::shared_ptr<AllocRecord>> Context::Impl::AllocPinned(uint64_t size, bool internal) {
  if (size == 0) return Status::InvalidArgument("allocation of 0 bytes");
  if (size > kMaxAllocation) return Status::ResourceExhausted("allocation larger than 256 GiB");
  auto r = std::make_shared<AllocRecord>(driver_, this);
  r->kind = MemoryKind::kHost;
  r->internal = internal;
  r->size = size;
  r->mapped = AlignUp(size, kPage);
  if (DrmDevice* drm = driver_->drm()) {
    GPUVM_ASSIGN_OR_RETURN(DrmDevice::Object object, drm->NewGart(drm_file_, r->mapped));
    r->gem = object.handle;
    r->va = object.va;
    r->host = object.host;
    r->drm_backing = std::move(object.backing);
  } else {
    // The mapping owns the memory (the bus puts it where its DMA reaches: a VM's RAM).
    GPUVM_ASSIGN_OR_RETURN(r->dma, driver_->bus()->AllocDma(r->mapped));
    r->host = r->dma->host();
    GPUVM_ASSIGN_OR_RETURN(r->va, ReserveVa(r->mapped, false));
    GPUVM_RETURN_IF_ERROR(MapRecord(r.get()));
  }
  std::lock_guard lock(alloc_mu_);
  allocs_[r->va] = r;
  host_index_[reinterpret_cast<uintptr_t>(r->host)] = r->va;
  return r;
}

Result<std::shared_ptr<AllocRecord>> Context::Impl::Register(void* host, uint64_t size) {
  const auto addr = reinterpret_cast<uintptr_t>(host);
  if (host == nullptr || size == 0) return Status::InvalidArgument("null or empty host range");
  if (size > kMaxAllocation || addr + size < addr || addr + size > UINTPTR_MAX - kPage) {
    return Status::InvalidArgument("registered host range too large");
  }
  // CUDA registers any range: the pages covering it are mapped, and the device address of the
  // caller's first byte is its offset into the first of them.
  const uintptr_t first_page = addr & ~uintptr_t(kPage - 1);
  const uintptr_t end_page = AlignUp(uint64_t(addr + size), kPage);
  const uint64_t pages = (end_page - first_page) / kPage;
  const uintptr_t last_page = end_page - kPage;
  // One registration at a time: two neighbours registered at once must not both map their shared
  // page (each would find the other's not yet recorded).
  std::lock_guard registering(register_mu_);
  auto r = std::make_shared<AllocRecord>(driver_, this);
  r->kind = MemoryKind::kRegisteredHost;
  r->size = size;
  r->mapped = end_page - first_page;
  r->map_offset = addr - first_page;
  r->host = static_cast<uint8_t*>(host);
  {
    // Bytes registered twice are refused (CUDA: HOST_MEMORY_ALREADY_REGISTERED). A page at either
    // end that a neighbouring registration already maps is shared: its mapping is borrowed, never
    // made again (a bus may move a page it maps, a second mapping would undo the first).
    std::lock_guard lock(alloc_mu_);
    auto it = host_index_.upper_bound(addr + size - 1);
    if (it != host_index_.begin()) {
      --it;
      auto a = allocs_.find(it->second);
      if (a != allocs_.end() && it->first + a->second->size > addr) {
        return Status::AlreadyExists("host range overlaps memory already known to the context");
      }
    }
    for (int end = 0; end < 2; ++end) {
      const uintptr_t page = end == 0 ? first_page : last_page;
      if (end == 1 && last_page == first_page) {
        r->borrows[1] = r->borrows[0];
        r->borrowed_bus[1] = r->borrowed_bus[0];
        break;
      }
      auto shared = boundary_pages_.find(page);
      if (shared == boundary_pages_.end()) continue;
      std::shared_ptr<DmaMapping> mapping = shared->second.mapping.lock();
      if (mapping == nullptr) {
        boundary_pages_.erase(shared);
        continue;
      }
      r->borrows[end] = true;
      r->borrowed_bus[end] = mapping->PageBusAddress(shared->second.offset);
      r->borrowed.push_back(std::move(mapping));
    }
  }
  if (DrmDevice* drm = driver_->drm()) {
    // The kernel maps the whole pages (a page two registrations share is wrapped twice: the
    // memory's owner keeps one frame for it).
    GPUVM_ASSIGN_OR_RETURN(
        DrmDevice::Object object,
        drm->WrapHost(drm_file_, reinterpret_cast<void*>(first_page), end_page - first_page));
    r->gem = object.handle;
    r->va = object.va + r->map_offset;
    r->drm_backing = std::move(object.backing);
    r->borrows = {false, false};
    r->borrowed.clear();
    std::lock_guard lock(alloc_mu_);
    allocs_[r->va] = r;
    host_index_[addr] = r->va;
    return r;
  }
  const uint64_t own_first = r->borrows[0] ? 1 : 0;
  const uint64_t own_end = r->borrows[1] ? pages - 1 : pages;
  r->dma_first_page = own_first;
  if (own_end > own_first) {
    GPUVM_ASSIGN_OR_RETURN(
        r->dma, driver_->bus()->MapDma(reinterpret_cast<void*>(first_page + own_first * kPage),
                                       (own_end - own_first) * kPage));
  }
  GPUVM_ASSIGN_OR_RETURN(const uint64_t base, ReserveVa(r->mapped, false));
  r->va = base + r->map_offset;
  GPUVM_RETURN_IF_ERROR(MapRecord(r.get()));
  std::lock_guard lock(alloc_mu_);
  allocs_[r->va] = r;
  host_index_[addr] = r->va;
  for (const uintptr_t page : {first_page, last_page}) {
    if (boundary_pages_.count(page) != 0 && !boundary_pages_[page].mapping.expired()) continue;
    if (r->dma == nullptr) continue;
    const uint64_t own_begin = first_page + r->dma_first_page * kPage;
    if (page < own_begin || page >= own_begin + r->dma->length()) continue;
    boundary_pages_[page] = {r->dma, page - own_begin};
  }
  return r;
}

Result<std::shared_ptr<AllocRecord>> Context::Impl::AllocManaged(uint64_t size) {
  if (driver_->drm() != nullptr) {
    return Status::Unimplemented(
        "managed memory needs a GPU address equal to a host address, and a DRM kernel driver "
        "picks the addresses of its objects itself");
  }
  if (size == 0) return Status::InvalidArgument("allocation of 0 bytes");
  if (size > kMaxAllocation) return Status::ResourceExhausted("allocation larger than 256 GiB");
  auto r = std::make_shared<AllocRecord>(driver_, this);
  r->kind = MemoryKind::kManaged;
  r->size = size;
  r->mapped = AlignUp(size, kPage);
  // The bus puts the pages at the range's very host address, where its DMA reaches them (a VM's
  // RAM). A range whose host pages the program already uses (it may map memory anywhere) is
  // skipped: it stays reserved while the next ones are tried, a few times, then goes back.
  std::vector<uint64_t> skipped;
  Status placed = Status::ResourceExhausted("the host addresses of the managed window are in use");
  for (int attempt = 0; attempt < kManagedPlacementAttempts; ++attempt) {
    Result<uint64_t> va = ManagedWindow::Get().Reserve(r->mapped);
    if (!va.ok()) {
      placed = va.status();
      break;
    }
    Result<std::unique_ptr<DmaMapping>> dma =
        driver_->bus()->AllocDmaAt(r->mapped, reinterpret_cast<void*>(*va));
    if (dma.ok()) {
      // The record owns the range from here on (its destructor gives it back, after the pages).
      r->va = *va;
      r->dma = std::move(*dma);
      placed = Status::Ok();
      break;
    }
    if (dma.status().code() != StatusCode::kAlreadyExists) {
      ManagedWindow::Get().Release(*va);
      placed = dma.status();
      break;
    }
    skipped.push_back(*va);
  }
  for (const uint64_t va : skipped) ManagedWindow::Get().Release(va);
  GPUVM_RETURN_IF_ERROR(placed);
  r->host = r->dma->host();
  GPUVM_RETURN_IF_ERROR(MapRecord(r.get()));
  std::lock_guard lock(alloc_mu_);
  allocs_[r->va] = r;
  host_index_[reinterpret_cast<uintptr_t>(r->host)] = r->va;
  return r;
}

Status Context::Impl::Free(uint64_t va, bool internal, bool wait) {
  std::shared_ptr<AllocRecord> r;
  {
    std::lock_guard lock(alloc_mu_);
    auto it = allocs_.find(va);
    if (it == allocs_.end() || it->second->internal != internal) {
      return Status::NotFound("no allocation starts at " + std::to_string(va));
    }
    r = it->second;
  }
  // cuMemFree semantics: the GPU may still use the memory; wait until it is done.
  if (!internal && wait) {
    Status s = Synchronize(options_.default_timeout);
    if (s.code() == StatusCode::kDeadlineExceeded) return s;
  }
  {
    std::lock_guard lock(alloc_mu_);
    auto it = allocs_.find(va);
    if (it == allocs_.end() || it->second != r) return Status::NotFound("freed concurrently");
    allocs_.erase(it);
    if (r->host != nullptr) host_index_.erase(reinterpret_cast<uintptr_t>(r->host));
    r->freed = true;  // from here on in_bar1 cannot change
    if (r->kind == MemoryKind::kDevice && !internal && !abandoning() &&
        r->mapped <= kRecycleMaxMapped && recycled_bytes_ + r->mapped <= options_.recycle_bytes) {
      recycled_bytes_ += r->mapped;
      driver_->recycled_vram.fetch_add(r->mapped, std::memory_order_relaxed);
      recycled_.emplace(std::pair{r->large, r->mapped}, std::move(r));
      return Status::Ok();
    }
  }
  Status s = UnmapRecord(r.get());
  if (r->kind == MemoryKind::kCode) BumpCodeEpoch();
  Retire(std::move(r));
  return s;  // the memory itself goes with the last reference
}

bool Context::Impl::DrainRecycled() {
  std::multimap<std::pair<bool, uint64_t>, std::shared_ptr<AllocRecord>> drained;
  {
    std::lock_guard lock(alloc_mu_);
    drained.swap(recycled_);
    driver_->recycled_vram.fetch_sub(recycled_bytes_, std::memory_order_relaxed);
    recycled_bytes_ = 0;
  }
  for (auto& [key, record] : drained) {
    (void)UnmapRecord(record.get());
    Retire(std::move(record));
  }
  return !drained.empty();
}

void Context::Impl::Retire(std::shared_ptr<AllocRecord> record) {
  if (!abandoning() || record == nullptr || record->is_vram())
    return;  // released with the last ref
  if (record->kind != MemoryKind::kManaged) {
    // The space dies with the context; the record outlives it in the quarantine. (A managed
    // record's range is the process's, not the space's: it goes back after its host pages.)
    ReleaseVa(record->map_va(), record->large);
    record->va = 0;
  }
  driver_->Quarantine(std::move(record));
}

Result<std::shared_ptr<AllocRecord>> Context::Impl::Lookup(uint64_t va, uint64_t bytes,
                                                           bool allow_internal) {
  std::lock_guard lock(alloc_mu_);
  auto it = allocs_.upper_bound(va);
  if (it == allocs_.begin()) {
    return Status::NotFound("address " + std::to_string(va) + " is not in an allocation");
  }
  --it;
  const std::shared_ptr<AllocRecord>& r = it->second;
  if (va - r->va >= r->size || (r->internal && !allow_internal)) {
    return Status::NotFound("address " + std::to_string(va) + " is not in an allocation");
  }
  if (bytes > r->size - (va - r->va)) {
    return Status::OutOfRange("range of " + std::to_string(bytes) +
                              " bytes runs past the end of its allocation");
  }
  return r;
}

std::shared_ptr<AllocRecord> Context::Impl::LookupHost(const void* host, uint64_t bytes) {
  const auto addr = reinterpret_cast<uintptr_t>(host);
  std::lock_guard lock(alloc_mu_);
  auto it = host_index_.upper_bound(addr);
  if (it == host_index_.begin()) return nullptr;
  --it;
  auto a = allocs_.find(it->second);
  if (a == allocs_.end()) return nullptr;
  const std::shared_ptr<AllocRecord>& r = a->second;
  const uint64_t off = addr - reinterpret_cast<uintptr_t>(r->host);
  if (off >= r->size || bytes > r->size - off || r->internal) return nullptr;
  return r;
}

uint64_t Context::Impl::EnsureBar1(AllocRecord* r) {
  if (driver_->drm() != nullptr) return 0;  // user space has no BAR1 of its own
  if (!r->is_vram() || r->mapped > kBar1MapMax) return 0;
  std::lock_guard lock(alloc_mu_);
  if (r->freed) return 0;
  if (r->in_bar1) return r->bar1;
  Result<uint64_t> offset = driver_->MapBar1(r->vram, r->mapped);
  if (!offset.ok()) return 0;  // BAR1 full: DMA instead
  r->bar1 = *offset;
  r->in_bar1 = true;
  return r->bar1;
}

// ---- report slots
// ---------------------------------------------------------------------------------------

Result<ReportSlot> Context::Impl::AllocateSlot() {
  std::lock_guard lock(slot_mu_);
  for (uint32_t i = 0; i < slot_used_.size(); ++i) {
    if (slot_used_[i]) continue;
    slot_used_[i] = true;
    ReportSlot slot{report_page_->host + i * kReportSlotBytes,
                    report_page_->va + i * kReportSlotBytes, i};
    // Not cleared: a slot's payload only moves forward, whoever owns it. A freed event's slot may
    // still be the target of a queued semaphore acquire (cuStreamWaitEvent then cuEventDestroy);
    // zeroing it would make that acquire wait for the next owner. Owners continue from the
    // payload they find (Event::Impl, Channel::Impl::Init).
    return slot;
  }
  return Status::ResourceExhausted("no free report slot (fences and events) in the context");
}

void Context::Impl::FreeSlot(const ReportSlot& slot) {
  std::lock_guard lock(slot_mu_);
  if (slot.index < slot_used_.size()) slot_used_[slot.index] = false;
}

// ---- channels and events
// --------------------------------------------------------------------------------

Result<Channel*> Context::Impl::CreateChannel() {
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<Channel> channel, Channel::Impl::Create(this));
  std::lock_guard lock(objects_mu_);
  channels_.push_back(std::move(channel));
  return channels_.back().get();
}

Status Context::Impl::DestroyChannel(Channel* channel) {
  {
    std::lock_guard lock(objects_mu_);
    auto it = std::find_if(channels_.begin(), channels_.end(),
                           [&](const std::unique_ptr<Channel>& c) { return c.get() == channel; });
    if (it == channels_.end() || dying_.contains(channel)) {
      return Status::NotFound("not a channel of this context");
    }
    if (channel == default_channel_) {
      return Status::FailedPrecondition("the default channel lives as long as its context");
    }
    dying_.insert(channel);
  }
  // Drain while the channel is still listed, so that a concurrent Context::Synchronize (or Free)
  // keeps waiting for its work too. The teardown in ~Impl waits again, bounded, if this one fails.
  if (!abandoning()) {
    (void)channel->impl()->Synchronize(
        std::min<std::chrono::nanoseconds>(options_.default_timeout, kChannelDrainWait));
  }
  std::unique_ptr<Channel> doomed;
  {
    std::unique_lock lock(objects_mu_);
    auto it = std::find_if(channels_.begin(), channels_.end(),
                           [&](const std::unique_ptr<Channel>& c) { return c.get() == channel; });
    doomed = std::move(*it);
    channels_.erase(it);
    dying_.erase(channel);
    // Unlisted: no new pins. Threads waiting on it now finish quickly (it is idle or timed out).
    unpinned_.wait(lock, [&] { return !pins_.contains(channel); });
  }
  doomed.reset();
  return Status::Ok();
}

std::vector<Channel*> Context::Impl::ChannelsSnapshot() {
  std::lock_guard lock(objects_mu_);
  std::vector<Channel*> out;
  for (auto& c : channels_) out.push_back(c.get());
  return out;
}

bool Context::Impl::Pin(Channel* channel) {
  std::lock_guard lock(objects_mu_);
  auto it = std::find_if(channels_.begin(), channels_.end(),
                         [&](const std::unique_ptr<Channel>& c) { return c.get() == channel; });
  if (it == channels_.end()) return false;
  ++pins_[channel];
  return true;
}

void Context::Impl::Unpin(Channel* channel) {
  std::lock_guard lock(objects_mu_);
  auto it = pins_.find(channel);
  if (--it->second == 0) {
    pins_.erase(it);
    unpinned_.notify_all();
  }
}

Result<Event*> Context::Impl::CreateEvent() {
  GPUVM_ASSIGN_OR_RETURN(ReportSlot slot, AllocateSlot());
  std::unique_ptr<Event> event(new Event(std::make_unique<Event::Impl>(this, slot)));
  std::lock_guard lock(objects_mu_);
  events_.push_back(std::move(event));
  return events_.back().get();
}

Status Context::Impl::DestroyEvent(Event* event) {
  std::unique_ptr<Event> doomed;
  {
    std::lock_guard lock(objects_mu_);
    auto it = std::find_if(events_.begin(), events_.end(),
                           [&](const std::unique_ptr<Event>& e) { return e.get() == event; });
    if (it == events_.end()) return Status::NotFound("not an event of this context");
    doomed = std::move(*it);
    events_.erase(it);
  }
  return Status::Ok();
}

Status Context::Impl::Synchronize(std::chrono::nanoseconds timeout) {
  // One clock for every channel: the timeout is for the whole wait, stalls not counted.
  WaitClock clock(driver());
  for (Channel* c : ChannelsSnapshot()) {
    // Another thread may destroy the channel meanwhile: the pin keeps it alive while we wait on it.
    // One already gone was drained by its DestroyChannel.
    if (!Pin(c)) continue;
    Status s = c->impl()->Synchronize(timeout, clock);
    Unpin(c);
    GPUVM_RETURN_IF_ERROR(s);
  }
  return status();
}

// ---- Event::Impl
// ----------------------------------------------------------------------------------------

Event::Impl::~Impl() {
  // A release still in flight would land in a reused slot and complete someone else's event
  // early: a pending event's slot stays reserved until the context goes.
  if (Complete()) ctx_->FreeSlot(slot_);
}

uint32_t Event::Impl::NextSequence() {
  std::lock_guard lock(mu_);
  if (++next_ == 0) next_ = 1;
  return next_;
}

bool Event::Impl::Complete() const {
  const uint32_t t = target();
  return t == 0 || int32_t(slot_.Payload() - t) >= 0;
}

Result<bool> Event::Impl::Query() {
  GPUVM_RETURN_IF_ERROR(ctx_->status());
  if (Complete()) return true;
  ctx_->driver()->MaybeService();
  GPUVM_RETURN_IF_ERROR(ctx_->PollDrm());
  return false;
}

Status Event::Impl::Wait(std::chrono::nanoseconds timeout) {
  WaitClock clock(ctx_->driver());
  Backoff backoff;
  for (;;) {
    if (Complete()) return ctx_->status();
    GPUVM_RETURN_IF_ERROR(ctx_->status());
    ctx_->driver()->MaybeService();
    GPUVM_RETURN_IF_ERROR(ctx_->PollDrm());
    GPUVM_ASSIGN_OR_RETURN(const bool expired, clock.Expired(timeout));
    if (expired) {
      ctx_->driver()->ServiceInterrupts();
      GPUVM_RETURN_IF_ERROR(ctx_->status());
      if (Complete()) return Status::Ok();
      return Status::DeadlineExceeded("event not reached before the timeout");
    }
    backoff.Pause();
  }
}

Result<uint64_t> Event::Impl::TimestampNs() {
  if (target() == 0) return Status::FailedPrecondition("the event was never recorded");
  if (!Complete()) return Status::Unavailable("the event has not completed yet");
  return slot_.Timestamp();
}

// ---- Context
// --------------------------------------------------------------------------------------------

Context::Context(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Context::~Context() = default;

Status Context::status() const { return impl_->status(); }
std::optional<GpuFault> Context::fault() const { return impl_->fault(); }

Result<Allocation> Context::AllocDevice(uint64_t size) {
  GPUVM_RETURN_IF_ERROR(impl_->status());
  GPUVM_ASSIGN_OR_RETURN(auto r, impl_->AllocVram(size, MemoryKind::kDevice, false));
  return r->Describe();
}

Result<Allocation> Context::AllocHost(uint64_t size) {
  GPUVM_RETURN_IF_ERROR(impl_->status());
  GPUVM_ASSIGN_OR_RETURN(auto r, impl_->AllocPinned(size, false));
  return r->Describe();
}

Result<Allocation> Context::RegisterHost(void* host, uint64_t size) {
  GPUVM_RETURN_IF_ERROR(impl_->status());
  GPUVM_ASSIGN_OR_RETURN(auto r, impl_->Register(host, size));
  return r->Describe();
}

Result<Allocation> Context::AllocManaged(uint64_t size) {
  GPUVM_RETURN_IF_ERROR(impl_->status());
  GPUVM_ASSIGN_OR_RETURN(auto r, impl_->AllocManaged(size));
  return r->Describe();
}

Status Context::Free(uint64_t va) { return impl_->Free(va, false); }
Status Context::FreeIdle(uint64_t va) { return impl_->Free(va, false, /*wait=*/false); }

Result<Allocation> Context::Find(uint64_t va) const {
  GPUVM_ASSIGN_OR_RETURN(auto r, impl_->Lookup(va, 0, false));
  return r->Describe();
}

Result<Allocation> Context::FindHost(const void* host) const {
  auto r = impl_->LookupHost(host, 0);
  if (r == nullptr) return Status::NotFound("not in a pinned or registered host allocation");
  return r->Describe();
}

Result<Allocation> Context::LoadCode(std::span<const uint8_t> image) {
  GPUVM_RETURN_IF_ERROR(impl_->status());
  if (image.empty()) return Status::InvalidArgument("empty code image");
  GPUVM_ASSIGN_OR_RETURN(auto r, impl_->AllocVram(image.size(), MemoryKind::kCode, false));
  Status s = impl_->default_channel()->CopyHostToDevice(r->va, image.data(), image.size());
  if (!s.ok()) {
    (void)impl_->Free(r->va, false);
    return s;
  }
  impl_->BumpCodeEpoch();
  return r->Describe();
}

Channel* Context::default_channel() { return impl_->default_channel(); }
Result<Channel*> Context::CreateChannel() {
  GPUVM_RETURN_IF_ERROR(impl_->status());
  return impl_->CreateChannel();
}
Status Context::DestroyChannel(Channel* channel) { return impl_->DestroyChannel(channel); }
Result<Event*> Context::CreateEvent() {
  GPUVM_RETURN_IF_ERROR(impl_->status());
  return impl_->CreateEvent();
}
Status Context::DestroyEvent(Event* event) { return impl_->DestroyEvent(event); }
Status Context::Synchronize() { return impl_->Synchronize(impl_->options().default_timeout); }
Status Context::Synchronize(std::chrono::nanoseconds timeout) {
  return impl_->Synchronize(timeout);
}
uint64_t Context::va_limit() const { return vm::kVaLimit - 1; }
const ContextOptions& Context::options() const { return impl_->options(); }

// ---- Event
// ----------------------------------------------------------------------------------------------

Event::Event(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Event::~Event() = default;
Result<bool> Event::Query() { return impl_->Query(); }
Status Event::Wait(std::chrono::nanoseconds timeout) { return impl_->Wait(timeout); }
Result<uint64_t> Event::TimestampNs() { return impl_->TimestampNs(); }

uint32_t Event::ArmForHost() {
  const uint32_t target = impl_->NextSequence();
  impl_->Recorded(target);
  return target;
}

void Event::ReleaseFromHost(uint32_t target) {
  // The payload a semaphore release would write (the GPU's acquire compares >= this).
  __atomic_store_n(reinterpret_cast<uint32_t*>(impl_->slot().host), target, __ATOMIC_RELEASE);
}

}  // namespace gpuvm::guest
