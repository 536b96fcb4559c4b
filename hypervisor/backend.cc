#include "hypervisor/backend.h"

#include <string>

#include "base/enum_names.h"

namespace gpuvm::hv {

namespace {

constexpr EnumName<BackendKind> kBackendNames[] = {{BackendKind::kLocal, "local"},
                                                   {BackendKind::kXen, "xen"}};

}  // namespace

Result<BackendKind> BackendKindFromName(std::string_view name) {
  if (std::optional<BackendKind> kind = ValueNamed(kBackendNames, name)) return *kind;
  return Status::InvalidArgument("hypervisor backend must be local or xen, not '" +
                                 std::string(name) + "'");
}

const char* BackendName(BackendKind kind) { return NameOf(kBackendNames, kind, "unknown"); }

}  // namespace gpuvm::hv
