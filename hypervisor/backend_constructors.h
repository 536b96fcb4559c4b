// Each backend's constructor, defined in the backend's own folder (local/backend.cc,
// xen/backend.cc) so that the factory (backends.cc, guest_backends.cc) reaches the backends through
// this header alone and nothing outside hypervisor/local includes a local/ header. Only the factory
// calls these; everyone else uses backend.h (OpenBackend, BackendFromName,
// OpenGuestIoFromEnvironment).
//
// Threading: as backend.h.
#ifndef GPUVM_HYPERVISOR_BACKEND_CONSTRUCTORS_H_
#define GPUVM_HYPERVISOR_BACKEND_CONSTRUCTORS_H_

#include <memory>

#include "base/status.h"
#include "hypervisor/backend.h"

namespace gpuvm::hv {

// The local backend (a VM is a process; local/backend.h).
std::unique_ptr<Backend> NewLocalBackend(const BackendOptions& options);
// The guest side of a local VM: the trapping GuestIo of the domain the launcher hands over on the
// socket `socket`.
Result<std::unique_ptr<GuestIo>> ReceiveLocalGuestIo(int socket, const GuestIoOptions& options);
// The Xen backend (libxen*; xen/xen_backend.h).
std::unique_ptr<Backend> NewXenBackend();

}  // namespace gpuvm::hv

#endif  // GPUVM_HYPERVISOR_BACKEND_CONSTRUCTORS_H_
