#include "gpu/sim/memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

namespace gpuvm::sim {

Result<std::unique_ptr<Vram>> Vram::Create(uint64_t size) {
  if (size == 0 || size % gf100::vm::kSmallPageSize != 0 || size > gf100::vm::kVaLimit) {
    return Status::InvalidArgument("VRAM size must be a non-zero multiple of 4 KiB up to 1 TiB");
  }
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
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    int err = errno;
    close(fd);
    return Status::FromErrno(err, "mmap(VRAM memfd)");
  }
  return std::unique_ptr<Vram>(new Vram(fd, static_cast<uint8_t*>(base), size));
}

Vram::~Vram() {
  munmap(base_, size_);
  close(fd_);
}

}  // namespace gpuvm::sim
