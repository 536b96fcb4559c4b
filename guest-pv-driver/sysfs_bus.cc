#include "guest-pv-driver/sysfs_bus.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gpu/hw/pci.h"
#include "gpu/mmio.h"

namespace gpuvm::guest {
namespace {

constexpr uint64_t kPage = 4096;

// /proc/<pid>/pagemap (Documentation/admin-guide/mm/pagemap.rst): one little-endian u64 per virtual
// page; bit 63 "page present", bits 0-54 the page frame number (zero without CAP_SYS_ADMIN).
constexpr uint64_t kPagemapPresent = 1ull << 63;
constexpr uint64_t kPagemapPfnMask = (1ull << 55) - 1;

// Linux's IORESOURCE_MEM flag in the third column of the sysfs `resource` file
// (include/linux/ioport.h).
constexpr uint64_t kIoresourceMem = 0x00000200;

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

Result<std::string> ReadSmallFile(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return Status::FromErrno(errno, "open " + path);
  char buf[4096];
  ssize_t n = ::read(fd.get(), buf, sizeof(buf) - 1);
  if (n < 0) return Status::FromErrno(errno, "read " + path);
  return std::string(buf, size_t(n));
}

// sysfs numbers: "0x10de\n".
Result<uint64_t> ReadHexFile(const std::string& path) {
  GPUVM_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path));
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 16);
  if (errno != 0 || end == text.c_str() || (*end != '\0' && *end != '\n')) {
    return Status::DataLoss(path + " does not hold a number: '" + text + "'");
  }
  return uint64_t(v);
}

struct Resource {
  uint64_t start = 0, end = 0, flags = 0;
  uint64_t size() const { return start == 0 && end == 0 ? 0 : end - start + 1; }
};

// The `resource` file: one line "0x<start> 0x<end> 0x<flags>" per resource (BARs 0-5 first).
Result<std::vector<Resource>> ReadResources(const std::string& path) {
  GPUVM_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path));
  std::vector<Resource> out;
  const char* p = text.c_str();
  while (*p != '\0') {
    Resource r;
    char* end = nullptr;
    r.start = std::strtoull(p, &end, 16);
    if (end == p) break;
    p = end;
    r.end = std::strtoull(p, &end, 16);
    if (end == p) return Status::DataLoss(path + ": truncated line");
    p = end;
    r.flags = std::strtoull(p, &end, 16);
    if (end == p) return Status::DataLoss(path + ": truncated line");
    p = end;
    if (r.end < r.start) return Status::DataLoss(path + ": a resource ends before it starts");
    out.push_back(r);
    while (*p == '\n' || *p == ' ') ++p;
  }
  return out;
}

bool Fits(uint64_t offset, uint64_t length, uint64_t size) {
  return length <= size && offset <= size - length;
}

// Block copies as `rep movs`: 8-byte elements for the bulk, then bytes. Against MMIO in an HVM
// guest Xen emulates each instruction as ioreqs of up to a page with data_is_ptr (one trap to the
// device model per page) instead of one trap per element. `volatile`-free on purpose: this is the
// instruction a device driver's memcpy_toio would use; the asm clobbers memory so the compiler
// keeps it where it is.
void RepMovs(void* dst, const void* src, uint64_t length) {
  uint64_t quads = length / 8;
  uint64_t bytes = length % 8;
  asm volatile("cld\n\trep movsq" : "+D"(dst), "+S"(src), "+c"(quads) : : "memory");
  asm volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(bytes) : : "memory");
}

// memset of MMIO as string instructions: `rep stosq` of the byte pattern, then `rep stosb` for a
// tail. Xen emulates it as ioreqs without a buffer (the value in the ioreq) of up to 4096
// repetitions each.
void RepStos(void* dst, uint8_t byte, uint64_t length) {
  uint64_t quads = length / 8;
  uint64_t bytes = length % 8;
  const uint64_t pattern = uint64_t{byte} * 0x0101010101010101ull;
  asm volatile("cld\n\trep stosq" : "+D"(dst), "+c"(quads) : "a"(pattern) : "memory");
  asm volatile("rep stosb" : "+D"(dst), "+c"(bytes) : "a"(pattern) : "memory");
}

// One volatile access per 8 bytes (then per byte): the slow path, kept to compare and as a
// fallback.
void WordCopy(void* dst, const void* src, uint64_t length) {
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  uint64_t i = 0;
  // Bytes until the device side is 8-aligned: an 8-byte access must be naturally aligned (MMIO
  // splits or faults otherwise, and C++ says it is undefined).
  for (; i < length && reinterpret_cast<uintptr_t>(d + i) % 8 != 0; ++i) {
    *reinterpret_cast<volatile uint8_t*>(d + i) = s[i];
  }
  for (; i + 8 <= length; i += 8) {
    uint64_t v;
    std::memcpy(&v, s + i, 8);
    // One 8-byte store/load either way; which side is MMIO does not matter to the instruction.
    *reinterpret_cast<volatile uint64_t*>(d + i) = *reinterpret_cast<const volatile uint64_t*>(&v);
  }
  for (; i < length; ++i) {
    *reinterpret_cast<volatile uint8_t*>(d + i) = *reinterpret_cast<const volatile uint8_t*>(s + i);
  }
}

void WordCopyFromIo(void* dst, const void* src, uint64_t length) {
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  uint64_t i = 0;
  for (; i < length && reinterpret_cast<uintptr_t>(s + i) % 8 != 0; ++i) {
    d[i] = *reinterpret_cast<const volatile uint8_t*>(s + i);
  }
  for (; i + 8 <= length; i += 8) {
    const uint64_t v = *reinterpret_cast<const volatile uint64_t*>(s + i);
    std::memcpy(d + i, &v, 8);
  }
  for (; i < length; ++i) d[i] = *reinterpret_cast<const volatile uint8_t*>(s + i);
}

}  // namespace

// ---- DMA mappings
// ---------------------------------------------------------------------------------

class SysfsBus::Pages final : public DmaMapping {
 public:
  Pages(SysfsBus* bus, uint8_t* host, uint64_t length, std::vector<uint64_t> frames)
      : bus_(bus), host_(host), length_(length), frames_(std::move(frames)) {}
  ~Pages() override { bus_->Unlock(reinterpret_cast<uintptr_t>(host_), length_ / kPage); }
  uint8_t* host() const override { return host_; }
  uint64_t length() const override { return length_; }
  uint64_t PageBusAddress(uint64_t offset) const override {
    return offset < length_ ? frames_[offset / kPage] * kPage : 0;
  }

 private:
  SysfsBus* bus_;  // the bus outlives its mappings (the driver destroys them first)
  uint8_t* host_;
  uint64_t length_;
  std::vector<uint64_t> frames_;
};

// ---- creation
// -------------------------------------------------------------------------------------

Result<std::unique_ptr<SysfsBus>> SysfsBus::Create(const SysfsBusOptions& options) {
  std::unique_ptr<SysfsBus> bus(new SysfsBus(options));
  GPUVM_RETURN_IF_ERROR(bus->Open());
  return bus;
}

Result<std::unique_ptr<SysfsBus>> SysfsBus::FromEnvironment() {
  SysfsBusOptions options;
  if (const char* address = std::getenv(kSysfsDeviceVariable); address != nullptr) {
    options.address = address;
  }
  if (const char* block = std::getenv(kSysfsBlockVariable); block != nullptr && *block != '\0') {
    const std::string value = block;
    if (value == "rep") {
      options.block_transfer = SysfsBusOptions::BlockTransfer::kRepMovs;
    } else if (value == "words") {
      options.block_transfer = SysfsBusOptions::BlockTransfer::kWords;
    } else {
      return Status::InvalidArgument(std::string("$") + kSysfsBlockVariable + "='" + value +
                                     "' is not rep or words");
    }
  }
  return Create(options);
}

Status SysfsBus::Open() {
  const std::string& dir = options_.devices_dir;
  // An explicit address must not escape the devices directory.
  if (options_.address.find('/') != std::string::npos || options_.address == "." ||
      options_.address == "..") {
    return Status::InvalidArgument("'" + options_.address + "' is not a PCI address");
  }
  if (!options_.address.empty()) {
    address_ = options_.address;
  } else {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return Status::FromErrno(errno, "opendir " + dir);
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      auto vendor = ReadHexFile(dir + "/" + name + "/vendor");
      auto device = ReadHexFile(dir + "/" + name + "/device");
      if (vendor.ok() && device.ok() && *vendor == options_.vendor_id &&
          *device == options_.device_id) {
        address_ = name;
        break;
      }
    }
    if (address_.empty()) {
      char id[16];
      std::snprintf(id, sizeof(id), "%04x:%04x", options_.vendor_id, options_.device_id);
      return Status::NotFound(std::string("no PCI function ") + id + " under " + dir);
    }
  }
  const std::string fn = dir + "/" + address_;

  GPUVM_ASSIGN_OR_RETURN(uint64_t vendor, ReadHexFile(fn + "/vendor"));
  GPUVM_ASSIGN_OR_RETURN(uint64_t device, ReadHexFile(fn + "/device"));
  GPUVM_ASSIGN_OR_RETURN(uint64_t class_code, ReadHexFile(fn + "/class"));
  pci_.vendor_id = uint16_t(vendor);
  pci_.device_id = uint16_t(device);
  pci_.class_code = uint32_t(class_code & 0xffffff);
  if (auto revision = ReadHexFile(fn + "/revision"); revision.ok()) {
    pci_.revision = uint8_t(*revision);
  }

  GPUVM_ASSIGN_OR_RETURN(std::vector<Resource> resources, ReadResources(fn + "/resource"));
  struct Want {
    Bar bar;
    int index;
    Window* window;
    uint64_t min_size;
  } wants[] = {{Bar::k0, 0, &bar0_, gf100::pci::kBar0Size},
               {Bar::k1, 1, &bar1_, kPage},
               {Bar::k3, 3, &bar3_, kPage}};
  for (const Want& w : wants) {
    if (size_t(w.index) >= resources.size() || resources[w.index].size() == 0 ||
        !(resources[w.index].flags & kIoresourceMem)) {
      return Status::FailedPrecondition(fn + ": BAR" + std::to_string(w.index) +
                                        " is not a memory BAR");
    }
    if (resources[w.index].size() < w.min_size) {
      return Status::FailedPrecondition(fn + ": BAR" + std::to_string(w.index) + " is too small");
    }
    w.window->address = resources[w.index].start;
    w.window->size = resources[w.index].size();
  }
  pci_.bar0_size = bar0_.size;
  pci_.bar1_size = bar1_.size;
  pci_.bar3_size = bar3_.size;

  if (options_.enable) {
    // Memory decoding on (pci_enable_device). Not fatal: a bound driver or the firmware may have
    // enabled it already, and a test directory has no such attribute.
    Fd enable(::open((fn + "/enable").c_str(), O_WRONLY | O_CLOEXEC));
    if (enable.get() >= 0 && ::write(enable.get(), "1", 1) != 1) {
      std::fprintf(stderr, "gpuvm sysfs bus: %s/enable: %s (continuing)\n", fn.c_str(),
                   std::strerror(errno));
    }
  }

  for (const Want& w : wants) {
    const std::string path = fn + "/resource" + std::to_string(w.index);
    // O_SYNC: the kernel maps resourceN uncached either way; it documents the intent.
    Fd fd(::open(path.c_str(), O_RDWR | O_SYNC | O_CLOEXEC));
    if (fd.get() < 0) return Status::FromErrno(errno, "open " + path);
    void* p = ::mmap(nullptr, w.window->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (p == MAP_FAILED) return Status::FromErrno(errno, "mmap " + path);
    w.window->base = static_cast<uint8_t*>(p);
  }
  return Status::Ok();
}

SysfsBus::~SysfsBus() {
  for (Window* w : {&bar0_, &bar1_, &bar3_}) {
    if (w->base != nullptr) ::munmap(w->base, w->size);
  }
  std::lock_guard lock(dma_mu_);
  for (const auto& [page, refs] : locked_) ::munlock(reinterpret_cast<void*>(page), kPage);
}

const SysfsBus::Window& SysfsBus::window(Bar bar) const {
  switch (bar) {
    case Bar::k1:
      return bar1_;
    case Bar::k3:
      return bar3_;
    case Bar::k0:
      break;
  }
  return bar0_;
}

uint64_t SysfsBus::bar_address(Bar bar) const { return window(bar).address; }

// ---- single accesses
// ------------------------------------------------------------------------------

uint64_t SysfsBus::Read(Bar bar, uint64_t offset, Width width) {
  const Window& w = window(bar);
  const uint64_t size = uint64_t(width);
  if (!Fits(offset, size, w.size) || offset % size != 0) {
    bad_accesses_.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  return gpu::LoadMmio(w.base + offset, width);
}

void SysfsBus::Write(Bar bar, uint64_t offset, Width width, uint64_t value) {
  const Window& w = window(bar);
  const uint64_t size = uint64_t(width);
  if (!Fits(offset, size, w.size) || offset % size != 0) {
    bad_accesses_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  gpu::StoreMmio(w.base + offset, width, value);
}

// ---- blocks
// ---------------------------------------------------------------------------------------

Result<uint8_t*> SysfsBus::BlockTarget(Bar bar, uint64_t offset, uint64_t length) const {
  if (bar == Bar::k0) return Status::InvalidArgument("block transfers go through BAR1 or BAR3");
  const Window& w = window(bar);
  if (!Fits(offset, length, w.size)) {
    return Status::OutOfRange("block of " + std::to_string(length) + " bytes at " +
                              std::to_string(offset) + " runs past BAR" + std::to_string(int(bar)));
  }
  return w.base + offset;
}

namespace {

// A block transfer's checks, in order (the range, nothing to do, a buffer), then `copy(io)` with io
// the mapped BAR address of the block.
template <typename Copy>
Status BlockTransfer(Result<uint8_t*> target, uint64_t length, const void* buffer,
                     const char* no_buffer, Copy copy) {
  GPUVM_ASSIGN_OR_RETURN(uint8_t * io, std::move(target));
  if (length == 0) return Status::Ok();
  if (buffer == nullptr) return Status::InvalidArgument(no_buffer);
  copy(io);
  return Status::Ok();
}

}  // namespace

Status SysfsBus::ReadBlock(Bar bar, uint64_t offset, void* dst, uint64_t length) {
  const bool rep_movs = options_.block_transfer == SysfsBusOptions::BlockTransfer::kRepMovs;
  return BlockTransfer(
      BlockTarget(bar, offset, length), length, dst, "no destination buffer",
      [&](uint8_t* io) { rep_movs ? RepMovs(dst, io, length) : WordCopyFromIo(dst, io, length); });
}

Status SysfsBus::WriteBlock(Bar bar, uint64_t offset, const void* src, uint64_t length) {
  const bool rep_movs = options_.block_transfer == SysfsBusOptions::BlockTransfer::kRepMovs;
  return BlockTransfer(
      BlockTarget(bar, offset, length), length, src, "no source buffer",
      [&](uint8_t* io) { rep_movs ? RepMovs(io, src, length) : WordCopy(io, src, length); });
}

Status SysfsBus::FillBlock(Bar bar, uint64_t offset, uint8_t byte, uint64_t length) {
  if (options_.block_transfer != SysfsBusOptions::BlockTransfer::kRepMovs) {
    return Bus::FillBlock(bar, offset, byte, length);  // word by word, through WriteBlock
  }
  GPUVM_ASSIGN_OR_RETURN(uint8_t * io, BlockTarget(bar, offset, length));
  if (length != 0) RepStos(io, byte, length);
  return Status::Ok();
}

// ---- DMA
// ------------------------------------------------------------------------------------------

Result<std::unique_ptr<DmaMapping>> SysfsBus::MapDma(void* host, uint64_t length) {
  const auto addr = reinterpret_cast<uintptr_t>(host);
  if (host == nullptr || length == 0 || addr % kPage || length % kPage || addr + length < addr) {
    return Status::InvalidArgument("DMA mappings need 4 KiB aligned, non-empty host memory");
  }
  const uint64_t pages = length / kPage;

  std::lock_guard lock(dma_mu_);
  // Lock (and fault in) the pages not locked yet, one run at a time.
  std::vector<uintptr_t> newly;
  for (uint64_t i = 0; i < pages; ++i) {
    const uintptr_t page = addr + i * kPage;
    if (locked_.count(page)) continue;
    if (::mlock(reinterpret_cast<void*>(page), kPage) != 0) {
      const int err = errno;
      for (uintptr_t p : newly) ::munlock(reinterpret_cast<void*>(p), kPage);
      return Status::FromErrno(err,
                               "mlock (DMA memory must be locked; is RLIMIT_MEMLOCK too small?)");
    }
    newly.push_back(page);
  }
  auto undo = [&] {
    for (uintptr_t p : newly) ::munlock(reinterpret_cast<void*>(p), kPage);
  };
  // mlock faults the pages in — except where it is intercepted: ASan makes mlock a no-op, and an
  // absent page has no frame in pagemap. Populate them writable explicitly (Linux 5.14+; older
  // kernels say EINVAL, and there mlock has done it).
#ifndef MADV_POPULATE_WRITE
  constexpr int MADV_POPULATE_WRITE = 23;
#endif
  if (::madvise(host, length, MADV_POPULATE_WRITE) != 0 && errno != EINVAL) {
    const int err = errno;
    undo();
    return Status::FromErrno(err, "fault in DMA memory (madvise MADV_POPULATE_WRITE)");
  }

  std::vector<uint64_t> entries(pages);
  {
    Fd pagemap(::open(options_.pagemap_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (pagemap.get() < 0) {
      undo();
      return Status::FromErrno(errno, "open " + options_.pagemap_path);
    }
    const off_t at = off_t(addr / kPage * sizeof(uint64_t));
    const size_t bytes = pages * sizeof(uint64_t);
    const ssize_t n = ::pread(pagemap.get(), entries.data(), bytes, at);
    if (n != ssize_t(bytes)) {
      const int err = n < 0 ? errno : EIO;
      undo();
      return Status::FromErrno(err, "read " + options_.pagemap_path);
    }
  }
  std::vector<uint64_t> frames(pages);
  for (uint64_t i = 0; i < pages; ++i) {
    const uint64_t pfn = entries[i] & kPagemapPfnMask;
    if (!(entries[i] & kPagemapPresent) || pfn == 0) {
      undo();
      return Status::FailedPrecondition(
          "the kernel does not tell this process its page frames (pagemap needs CAP_SYS_ADMIN: "
          "run the guest program as root)");
    }
    frames[i] = pfn;
  }
  for (uint64_t i = 0; i < pages; ++i) ++locked_[addr + i * kPage];
  return std::unique_ptr<DmaMapping>(
      new Pages(this, static_cast<uint8_t*>(host), length, std::move(frames)));
}

void SysfsBus::Unlock(uintptr_t first_page, uint64_t pages) {
  std::lock_guard lock(dma_mu_);
  for (uint64_t i = 0; i < pages; ++i) {
    auto it = locked_.find(first_page + i * kPage);
    if (it == locked_.end()) continue;
    if (--it->second == 0) {
      ::munlock(reinterpret_cast<void*>(it->first), kPage);
      locked_.erase(it);
    }
  }
}

uint64_t SysfsBus::locked_pages() const {
  std::lock_guard lock(dma_mu_);
  return locked_.size();
}

Status SysfsBus::SetInterruptHandler(std::function<void(bool asserted)> handler) {
  if (!handler) return Status::Ok();
  return Status::Unimplemented("sysfs gives user space no interrupt line; the driver polls");
}

}  // namespace gpuvm::guest
