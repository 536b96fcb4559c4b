// The local backend behind the port's factory (hypervisor/backend.h): a Backend whose domains are
// LocalDomains — created here (CreateDomain), received from a launcher over an inherited socket
// (BackendOptions::local_domain_fd), or attached through the local hypervisor daemon — and whose
// objects are this folder's LocalIoreqServer, LocalGuestMemory, LocalGuestIo, LocalEventChannels,
// LocalStore and LocalGrantMapper. Dom0's own calls speak to the daemon as kControlDomain.
//
// Threading: as hv::Backend (one thread at a time). A fork()ed child inherits the domains held.
#ifndef GPUVM_HYPERVISOR_LOCAL_BACKEND_H_
#define GPUVM_HYPERVISOR_LOCAL_BACKEND_H_

#include <memory>

#include "hypervisor/backend.h"

namespace gpuvm::hv::local {

std::unique_ptr<Backend> NewBackend(const BackendOptions& options);

// The guest side of the domain a launcher hands out on `socket` (LocalDomain::RequestFrom).
Result<std::unique_ptr<GuestIo>> ReceiveGuestIo(int socket, const GuestIoOptions& options);

}  // namespace gpuvm::hv::local

#endif  // GPUVM_HYPERVISOR_LOCAL_BACKEND_H_
