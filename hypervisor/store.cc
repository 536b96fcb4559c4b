#include "hypervisor/store.h"

#include <string>

namespace gpuvm::hv {

Status ValidateStorePath(std::string_view path) {
  if (path.empty() || path.front() != '/') {
    return Status::InvalidArgument("store path must be absolute");
  }
  if (path.size() > kMaxStorePathLength) return Status::InvalidArgument("store path too long");
  if (path.size() > 1 && path.back() == '/') {
    return Status::InvalidArgument("store path must not end in '/'");
  }
  char previous = 0;
  for (char c : path) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '/' || c == ':' || c == '@' || c == '-';
    if (!ok) return Status::InvalidArgument("store path has a character outside [A-Za-z0-9_./:@-]");
    if (c == '/' && previous == '/')
      return Status::InvalidArgument("store path has an empty element");
    previous = c;
  }
  return Status::Ok();
}

}  // namespace gpuvm::hv
