#include "qemu-device/vm_token_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "base/os.h"

namespace gpuvm::dm {

Result<ipc::VmToken> ReadVmTokenFromFd(int fd) {
  char buffer[129];
  size_t got = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buffer + got, sizeof buffer - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "reading the VM token");
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
    if (got == sizeof buffer) return Status::InvalidArgument("the VM token is too long");
  }
  Result<ipc::VmToken> token = ipc::ParseVmToken(std::string_view(buffer, got));
  if (!token.ok()) return token.status().WithContext("VM token");
  return token;
}

Result<ipc::VmToken> ReadVmTokenFromFile(const std::string& path) {
  os::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd.valid()) return Status::FromErrno(errno, "VM token file " + path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrno(errno, "VM token file " + path);
  if (!S_ISREG(st.st_mode)) {
    return Status::PermissionDenied("VM token file " + path + " is not a regular file");
  }
  if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    return Status::PermissionDenied("VM token file " + path + " belongs to uid " +
                                    std::to_string(st.st_uid) + ", neither us nor root");
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status::PermissionDenied("VM token file " + path + " may be read by others (mode " +
                                    mode + "): make it 0600 or 0400");
  }
  return ReadVmTokenFromFd(fd.get());
}

Result<ipc::VmToken> ReadVmToken(int fd, const std::string& path) {
  if (fd < 0) return ReadVmTokenFromFile(path);
  Result<ipc::VmToken> token = ReadVmTokenFromFd(fd);
  ::close(fd);
  return token;
}

}  // namespace gpuvm::dm
