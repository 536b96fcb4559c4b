#include "gpu/sim/memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/os.h"

namespace gpuvm::sim {
namespace {

Status CheckSize(uint64_t size) {
  if (size == 0 || size % gf100::vm::kSmallPageSize != 0 || size > gf100::vm::kVaLimit) {
    return Status::InvalidArgument("VRAM size must be a non-zero multiple of 4 KiB up to 1 TiB");
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Vram>> Vram::Create(uint64_t size) {
  GPUVM_RETURN_IF_ERROR(CheckSize(size));
  int fd = memfd_create("gpuvm-vram", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return Status::FromErrno(errno, "memfd_create(gpuvm-vram)");
  if (ftruncate(fd, off_t(size)) != 0) {
    int err = errno;
    close(fd);
    return Status::FromErrno(err, "ftruncate(VRAM memfd)");
  }
  // Sealed against resizing: processes that map slices of it (BAR remap hands pages to device
  // models and guests) can never make our mapping fault by truncating it.
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    int err = errno;
    close(fd);
    return Status::FromErrno(err, "sealing the VRAM memfd");
  }
  // 2 MiB aligned and advised: where the host gives shared memory huge pages, a 2 MiB block of
  // VRAM is one page-table entry to install (base/os.h, "Huge pages"). Every remap of a range below
  // advises it again (a MAP_FIXED mapping starts without the advice).
  Result<void*> base = os::MapHugeAligned(size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (!base.ok()) {
    close(fd);
    return base.status().WithContext("mapping the VRAM memfd");
  }
  return std::unique_ptr<Vram>(new Vram(fd, static_cast<uint8_t*>(*base), size, true));
}

Result<std::unique_ptr<Vram>> Vram::Open(const std::string& path, uint64_t size) {
  GPUVM_RETURN_IF_ERROR(CheckSize(size));
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "open(" + path + ")");
  // A sysfs resourceN file reports its BAR's size; a regular file its length.
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return Status::FromErrno(err, "fstat(" + path + ")");
  }
  if (uint64_t(st.st_size) < size) {
    close(fd);
    return Status::InvalidArgument(path + " holds " + std::to_string(uint64_t(st.st_size) >> 20) +
                                   " MiB, less than the " + std::to_string(size >> 20) +
                                   " MiB of VRAM asked for");
  }
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    int err = errno;
    close(fd);
    return Status::FromErrno(err, "mmap(" + path + ")");
  }
  // Power-on VRAM reads zero, and whatever an earlier user (another run, the owner before a reset)
  // left there must not reach the next one. 8-byte stores, not memset: glibc's memset of a large
  // region is `rep stosb`, which an emulator (the Xen test bed's dom0 runs under QEMU's TCG) runs a
  // byte per iteration.
  uint8_t* const bytes = static_cast<uint8_t*>(base);
  for (uint64_t at = 0; at < size; at += 8) Store64(bytes + at, 0);
  return std::unique_ptr<Vram>(new Vram(fd, static_cast<uint8_t*>(base), size, false));
}

Status Vram::CheckRange(uint64_t address, uint64_t length) const {
  constexpr uint64_t kPage = gf100::vm::kSmallPageSize;
  if (length == 0 || address % kPage != 0 || length % kPage != 0 || address > size_ ||
      length > size_ - address) {
    return Status::InvalidArgument("a VRAM backing range is whole pages inside VRAM");
  }
  if (!rebindable_) {
    return Status::FailedPrecondition(
        "VRAM in a file (machine frames) cannot be backed by other memory");
  }
  return Status::Ok();
}

void Vram::ForgetPrefaults(uint64_t address, uint64_t length) {
  const uint64_t end = std::min(size_, address + length);
  for (uint64_t block = address / kPrefaultBlock; block * kPrefaultBlock < end; ++block) {
    tried_[block / 64].fetch_and(~(1ull << (block % 64)), std::memory_order_relaxed);
  }
}

Status Vram::Back(uint64_t address, uint64_t length, int fd, uint64_t offset, bool populate) {
  GPUVM_RETURN_IF_ERROR(CheckRange(address, length));
  if (offset % gf100::vm::kSmallPageSize != 0) {
    return Status::InvalidArgument("a VRAM backing's offset is whole pages");
  }
  void* at = base_ + address;
  // Populated at once: see the header (one call instead of a fault per page on engine threads);
  // without it, the GPU's first reach of each block prefaults it.
  if (mmap(at, length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, off_t(offset)) == at) {
    os::AdviseHugePages(at, length);
    if (!populate || !os::PopulatePages(at, length, os::PopulateFor::kWrite)) {
      ForgetPrefaults(address, length);
    }
    return Status::Ok();
  }
  const int err = errno;
  // The kernel refuses (a full map count, say) before it touches the old mapping; should a failed
  // MAP_FIXED have taken the old pages away, VRAM's own memory goes back there (what a range to be
  // backed showed).
  if (msync(at, length, MS_ASYNC) != 0 &&
      mmap(at, length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd_, off_t(address)) != at) {
    // A hole in the view would fault the engine thread at its next access to it.
    std::fprintf(stderr, "gpuvm: VRAM view lost at %#llx (mmap: %s)\n", (unsigned long long)address,
                 std::strerror(errno));
    std::abort();
  }
  return Status::FromErrno(err, "mmap(VRAM backing)");
}

void Vram::Prefault(uint64_t address) {
  if (!rebindable_ || address >= size_) return;
  const uint64_t block = address / kPrefaultBlock;
  std::atomic<uint64_t>& word = tried_[block / 64];
  const uint64_t bit = 1ull << (block % 64);
  if (word.load(std::memory_order_relaxed) & bit) return;
  if (word.fetch_or(bit, std::memory_order_relaxed) & bit) return;  // another thread took it
  const uint64_t begin = block * kPrefaultBlock;
  const uint64_t length = std::min(kPrefaultBlock, size_ - begin);
  // A failure (an old kernel without MADV_POPULATE_WRITE, memory pressure) only means the pages
  // fault in one by one, as before.
  if (os::PopulatePages(base_ + begin, length, os::PopulateFor::kWrite)) {
    prefaulted_.fetch_add(1, std::memory_order_relaxed);
  }
}

Status Vram::Restore(uint64_t address, uint64_t length) {
  GPUVM_RETURN_IF_ERROR(CheckRange(address, length));
  void* at = base_ + address;
  if (mmap(at, length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd_, off_t(address)) != at) {
    return Status::FromErrno(errno, "mmap(VRAM's own memory)");
  }
  os::AdviseHugePages(at, length);
  ForgetPrefaults(address, length);  // punched below: the next owner's first reach brings it in
  // Zeroed (whatever VRAM's own memory held under the backing, or before it), and nothing resident.
  if (fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off_t(address), off_t(length)) !=
      0) {
    std::memset(at, 0, length);
  }
  return Status::Ok();
}

Vram::~Vram() {
  munmap(base_, size_);
  close(fd_);
}

}  // namespace gpuvm::sim
