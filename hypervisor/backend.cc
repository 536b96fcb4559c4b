#include "hypervisor/backend.h"

#include <string>

namespace gpuvm::hv {

Result<BackendKind> BackendKindFromName(std::string_view name) {
  if (name == "local") return BackendKind::kLocal;
  if (name == "xen") return BackendKind::kXen;
  return Status::InvalidArgument("hypervisor backend must be local or xen, not '" +
                                 std::string(name) + "'");
}

const char* BackendName(BackendKind kind) {
  switch (kind) {
    case BackendKind::kLocal:
      return "local";
    case BackendKind::kXen:
      return "xen";
  }
  return "unknown";
}

}  // namespace gpuvm::hv
