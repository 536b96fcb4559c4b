// Bus's defaults (bus.h): FillBlock through WriteBlock; AllocDma and AllocDmaAt as anonymous memory
// (anywhere, or at the caller's address) made reachable with MapDma.
//
// Threading: as thread-safe as the Bus's MapDma.
#include "guest-pv-driver/bus.h"

#include <sys/mman.h>

#include <cerrno>
#include <vector>

#include "base/os.h"

namespace gpuvm::guest {
namespace {

// Anonymous memory and its DMA mapping; the mapping goes first, then the memory.
class OwnedDma final : public DmaMapping {
 public:
  OwnedDma(void* memory, uint64_t length) : memory_(memory), length_(length) {}
  ~OwnedDma() override {
    inner_.reset();
    ::munmap(memory_, length_);
  }
  void set_inner(std::unique_ptr<DmaMapping> inner) { inner_ = std::move(inner); }
  uint8_t* host() const override { return static_cast<uint8_t*>(memory_); }
  uint64_t length() const override { return length_; }
  uint64_t PageBusAddress(uint64_t offset) const override { return inner_->PageBusAddress(offset); }

 private:
  void* memory_;
  uint64_t length_;
  std::unique_ptr<DmaMapping> inner_;
};

}  // namespace

Status Bus::FillBlock(Bar bar, uint64_t offset, uint8_t byte, uint64_t length) {
  if (length == 0) return Status::Ok();
  const std::vector<uint8_t> bytes(length, byte);  // one block, as a memcpy_toio would be
  return WriteBlock(bar, offset, bytes.data(), length);
}

void Bus::WriteRegs(uint64_t offset, std::span<const uint32_t> values) {
  for (size_t i = 0; i < values.size(); ++i) Write32(Bar::k0, offset + 4 * i, values[i]);
}

Result<std::unique_ptr<DmaMapping>> Bus::AllocDma(uint64_t length) {
  return AnonymousDma(length, nullptr);
}

Result<std::unique_ptr<DmaMapping>> Bus::AllocDmaAt(uint64_t length, void* at) {
  if (at == nullptr || reinterpret_cast<uintptr_t>(at) % 4096) {
    return Status::InvalidArgument("placed DMA memory needs a 4 KiB aligned address");
  }
  return AnonymousDma(length, at);
}

Result<std::unique_ptr<DmaMapping>> Bus::AnonymousDma(uint64_t length, void* at) {
  if (length == 0 || length % 4096) {
    return Status::InvalidArgument("DMA memory must be a non-empty multiple of 4 KiB");
  }
  void* memory = nullptr;
  if (at != nullptr) {
    GPUVM_ASSIGN_OR_RETURN(memory, MapAnonymous(length, at, PROT_READ | PROT_WRITE, MAP_POPULATE));
  } else {
    // 2 MiB aligned and advised, so that where the host allows it the memory is huge pages (as a
    // VM's pinned memory is: base/os.h, "Huge pages"), then populated for write.
    Result<void*> mapped =
        os::MapHugeAligned(length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!mapped.ok()) return mapped.status().WithContext("pinned host memory");
    memory = *mapped;
    os::PopulatePages(memory, length, os::PopulateFor::kWrite);
  }
  auto owned = std::make_unique<OwnedDma>(memory, length);
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<DmaMapping> inner, MapDma(memory, length));
  owned->set_inner(std::move(inner));
  return std::unique_ptr<DmaMapping>(std::move(owned));
}

Result<void*> MapAnonymous(uint64_t length, void* at, int prot, int flags) {
  flags |= MAP_PRIVATE | MAP_ANONYMOUS;
  // Never over a mapping the process has: MAP_FIXED would silently replace it.
  if (at != nullptr) flags |= MAP_FIXED_NOREPLACE;
  void* memory = ::mmap(at, length, prot, flags, -1, 0);
  if (memory == MAP_FAILED) {
    if (at != nullptr && errno == EEXIST) {
      return Status::AlreadyExists("the host address range for placed memory is in use");
    }
    return Status::FromErrno(errno, "mmap of pinned host memory");
  }
  if (at != nullptr && memory != at) {
    // A kernel older than 4.17 takes MAP_FIXED_NOREPLACE for a hint and maps elsewhere.
    ::munmap(memory, length);
    return Status::AlreadyExists("the host address range for placed memory is in use");
  }
  return memory;
}

}  // namespace gpuvm::guest
