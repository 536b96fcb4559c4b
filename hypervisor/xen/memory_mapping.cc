#include "hypervisor/xen/memory_mapping.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace gpuvm::hv::xen {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kMaxFrame = uint64_t{1} << 40;
constexpr uint64_t kMaxFramesPerCall = uint64_t{1} << 20;
constexpr uint64_t kIoResourceIo = 0x100;   // Linux's IORESOURCE_IO
constexpr uint64_t kIoResourceMem = 0x200;  // IORESOURCE_MEM

// N of ".../resourceN" or ".../resourceN_wc", or -1.
int ResourceIndex(const std::string& name) {
  const std::string prefix = "resource";
  if (name.size() < prefix.size() + 1 || name.compare(0, prefix.size(), prefix) != 0) return -1;
  const char n = name[prefix.size()];
  if (n < '0' || n > '5') return -1;
  const std::string rest = name.substr(prefix.size() + 1);
  return rest.empty() || rest == "_wc" ? n - '0' : -1;
}

}  // namespace

Result<MemoryMappingPlan> PlanMemoryMapping(uint64_t first, uint64_t last,
                                            const MemoryBacking& backing) {
  if (first > last || first % kPage != 0 || (last + 1) % kPage != 0) {
    return Status::InvalidArgument("a memory range is whole pages");
  }
  if (backing.fd >= 0) {
    return Status::Unimplemented("a descriptor backing is resolved to machine frames first");
  }
  if (backing.machine_address % kPage != 0) {
    return Status::InvalidArgument("machine address not page aligned");
  }
  MemoryMappingPlan plan;
  plan.first_gfn = first / kPage;
  plan.first_mfn = backing.machine_address / kPage;
  plan.frames = (last - first + 1) / kPage;
  if (plan.frames > kMaxFramesPerCall || plan.first_gfn + plan.frames > kMaxFrame ||
      plan.first_mfn + plan.frames > kMaxFrame) {
    return Status::OutOfRange("memory range beyond what one Xen mapping call takes");
  }
  return plan;
}

Result<MemoryBacking> MachineBackingOfFile(const std::string& path, uint64_t offset,
                                           uint64_t length) {
  const size_t slash = path.rfind('/');
  const int bar = ResourceIndex(slash == std::string::npos ? path : path.substr(slash + 1));
  if (slash == std::string::npos || bar < 0) {
    return Status::Unimplemented(
        "Xen backs guest frames with machine frames (a GPU's BAR aperture, or device memory named "
        "by a PCI resource file); " +
        path +
        " is neither (a dom0 memfd is dom0 RAM, which cannot enter a guest's p2m), so the "
        "range keeps trapping");
  }
  const std::string table = path.substr(0, slash + 1) + "resource";
  std::ifstream in(table);
  if (!in) return Status::Unimplemented(path + " has no " + table + ": not a PCI device's file");
  std::string line;
  for (int i = 0; i <= bar; ++i) {
    if (!std::getline(in, line)) {
      return Status::FailedPrecondition(table + " has no line for BAR " + std::to_string(bar));
    }
  }
  uint64_t start = 0, end = 0, flags = 0;
  if (std::sscanf(line.c_str(), "%" SCNx64 " %" SCNx64 " %" SCNx64, &start, &end, &flags) != 3) {
    return Status::FailedPrecondition(table + ": unreadable line '" + line + "'");
  }
  if ((flags & kIoResourceIo) != 0 || (flags & kIoResourceMem) == 0 || start == 0 || end < start) {
    return Status::FailedPrecondition("BAR " + std::to_string(bar) + " of " + table +
                                      " is not an assigned memory BAR");
  }
  const uint64_t size = end - start + 1;
  if (length == 0 || offset > size || length > size - offset) {
    return Status::OutOfRange("range past the end of BAR " + std::to_string(bar) + " (" +
                              std::to_string(size) + " bytes) of " + table);
  }
  MemoryBacking machine;
  machine.machine_address = start + offset;
  return machine;
}

Result<MemoryBacking> MachineBackingOfFd(int fd, uint64_t offset, uint64_t length) {
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  char target[4096];
  const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
  if (n < 0) return Status::FromErrno(errno, "readlink " + link);
  const std::string path(target, size_t(n));
  // The descriptor must still be that file (not a deleted or replaced one).
  struct stat by_fd, by_path;
  if (fstat(fd, &by_fd) != 0 || stat(path.c_str(), &by_path) != 0 ||
      by_fd.st_dev != by_path.st_dev || by_fd.st_ino != by_path.st_ino) {
    return Status::Unimplemented("the backing descriptor (" + path +
                                 ") is not a file of a PCI device: it cannot back guest frames");
  }
  return MachineBackingOfFile(path, offset, length);
}

}  // namespace gpuvm::hv::xen
