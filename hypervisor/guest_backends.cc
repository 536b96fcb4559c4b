// The factory's guest half (gpuvm_hv_guest): what a program inside a VM links. No libxen*: an HVM
// guest's accesses trap in hardware, so only the local backend has a guest side here.
#include <cstdlib>
#include <string>

#include "hypervisor/backend.h"
#include "hypervisor/backend_constructors.h"

namespace gpuvm::hv {

Result<std::unique_ptr<GuestIo>> OpenGuestIoFromEnvironment(const GuestIoOptions& options) {
  const char* value = std::getenv(kLocalVmFdVariable);
  if (value == nullptr || *value == '\0') {
    return Status::FailedPrecondition(std::string("$") + kLocalVmFdVariable +
                                      " is not set: this process is not inside a local VM "
                                      "(start it with gpuvm-vm)");
  }
  char* end = nullptr;
  const long fd = std::strtol(value, &end, 10);
  if (*end != '\0' || fd < 0 || fd > 1 << 20) {
    return Status::InvalidArgument(std::string("$") + kLocalVmFdVariable + "='" + value +
                                   "' is not a descriptor");
  }
  return ReceiveLocalGuestIo(static_cast<int>(fd), options);
}

}  // namespace gpuvm::hv
