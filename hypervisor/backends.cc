// The factory's dom0 half (gpuvm_hv_backends): the only code that knows both backends.
#include "hypervisor/backend.h"
#include "hypervisor/backend_constructors.h"

namespace gpuvm::hv {

std::unique_ptr<Backend> OpenBackend(BackendKind kind, const BackendOptions& options) {
  switch (kind) {
    case BackendKind::kLocal:
      return NewLocalBackend(options);
    case BackendKind::kXen:
      return NewXenBackend();
  }
  return nullptr;
}

Result<std::unique_ptr<Backend>> BackendFromName(std::string_view name,
                                                 const BackendOptions& options) {
  GPUVM_ASSIGN_OR_RETURN(BackendKind kind, BackendKindFromName(name));
  return OpenBackend(kind, options);
}

}  // namespace gpuvm::hv
