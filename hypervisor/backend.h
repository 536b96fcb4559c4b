// The hypervisor port's factory: one place that turns a backend's name into the port's objects.
//
// Core code (the device model, the aggregator, the guest driver's trap bus, benchmarks) never names
// a backend: a program's main() picks one from its flag or environment (gpuvm-dm --backend
// local|xen; gpuvm-aggregator maps Xen domains' RAM), calls OpenBackend / BackendFromName once, and
// hands the Backend — or the objects it opened — to the code that needs them.
//
//   Backend (dom0's side: device models, the aggregator, tests and benchmarks that run VMs)
//     CreateDomain            a VM this process creates and runs itself (local only)
//     CreateIoreqServer       the device model's IOREQ server for a domain      (ioreq_server.h)
//     OpenGuestMemory         a domain's guest frames, bounds-checked           (guest_memory.h)
//     GuestRamFd              how a peer in dom0 reaches that RAM: a memfd (local) or nothing (Xen)
//     MapGuestRam             a domain's whole RAM in one range, for a device that DMAs into it
//     OpenGuestIo             the guest's side of a domain this Backend created (guest_io.h)
//     OpenEventChannels, OpenGrantSharer, OpenGrantMapper, OpenStore
//   OpenGuestIoFromEnvironment  inside a VM: the guest side of the VM this process runs in
//
// Linking: OpenBackend lives in gpuvm_hv_backends, which links both backends (the Xen one links
// libxen*). OpenGuestIoFromEnvironment lives in gpuvm_hv_guest, which links only what a guest
// program needs and no libxen* — it ends up in libcuda.so, which also runs inside Xen guests where
// the toolstack libraries are not installed. The kind names and parsers are in gpuvm_hv.
//
// Threading: a Backend belongs to one thread at a time; the objects it hands out follow their own
// headers. A Backend may be destroyed while objects it opened live on (they hold what they need).
#ifndef GPUVM_HYPERVISOR_BACKEND_H_
#define GPUVM_HYPERVISOR_BACKEND_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "hypervisor/event_channels.h"
#include "hypervisor/grants.h"
#include "hypervisor/guest_io.h"
#include "hypervisor/guest_memory.h"
#include "hypervisor/ioreq_server.h"
#include "hypervisor/store.h"
#include "hypervisor/types.h"

namespace gpuvm::hv {

enum class BackendKind { kLocal, kXen };

// "local" or "xen"; InvalidArgument for anything else.
Result<BackendKind> BackendKindFromName(std::string_view name);
const char* BackendName(BackendKind kind);

struct BackendOptions {
  // Local: the local hypervisor daemon's socket; empty: $GPUVM_LOCAL_HV, else its default.
  std::string local_hv_path;
  // Local: take the (one) domain from this inherited unix socket, where a launcher sent it
  // (gpuvm-vm passes gpuvm-dm --domain-fd), instead of attaching through the daemon. -1: none.
  // The Backend receives it on first use and refuses a domain other than the one asked for.
  int local_domain_fd = -1;
};

// A VM a process creates and runs itself (Backend::CreateDomain).
struct DomainConfig {
  DomainId domid = 1;
  uint64_t ram_bytes = 64ull << 20;  // a multiple of the page size
  uint32_t vcpus = 1;
};

struct GuestIoOptions {
  // Zero: an access waits for the device model as long as its process lives (a real vCPU waits
  // however long; a dead device model ends the wait with Unavailable). Else an access without an
  // answer after that long fails with DeadlineExceeded.
  std::chrono::milliseconds timeout{0};
  // How long a vCPU polls for the answer before it sleeps (zero: it sleeps at once). The local
  // stand-in for KVM's halt-polling (docs/IPC.md, "Waiting").
  static constexpr std::chrono::microseconds kDefaultBusyPoll{100};
  std::chrono::microseconds busy_poll = kDefaultBusyPoll;
  // Who hears of a device model slow to answer (after `slow_note`) and of its late answer; empty:
  // nobody.
  std::function<void(const std::string&)> note;
  static constexpr std::chrono::milliseconds kDefaultSlowNote{5000};
  std::chrono::milliseconds slow_note = kDefaultSlowNote;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const = 0;

  // Creates a domain whose guest is this process (or a child it starts) and keeps it: the calls
  // below find it by id. Local only (a VM is a process and its launcher makes it); Xen:
  // Unimplemented (the toolstack creates domains). AlreadyExists for an id this Backend holds.
  virtual Status CreateDomain(const DomainConfig& config) = 0;

  // The device model's side of domain `domid`.
  virtual Result<std::unique_ptr<IoreqServer>> CreateIoreqServer(DomainId domid) = 0;
  virtual Result<std::unique_ptr<GuestMemory>> OpenGuestMemory(DomainId domid) = 0;
  // How another dom0 process (the aggregator) can reach `domid`'s RAM: local, a descriptor of its
  // RAM memfd to pass over a socket (borrowed: valid while this Backend lives); Xen, -1 — the peer
  // maps the domain's frames itself (MapGuestRam).
  virtual Result<int> GuestRamFd(DomainId domid) = 0;
  // A whole guest's RAM for a device that DMAs into it (the aggregator in pt mode): frames
  // [0, frames) mapped read-write into one contiguous range. Holes in an HVM guest's physical map
  // (the VGA window, ballooned pages) are backed by private zero pages of ours, so a device access
  // there reads zeros and writes into scratch memory — never another domain, never a fault;
  // `holes`, when not null, receives their number. OutOfRange past the domain's frames.
  virtual Result<std::unique_ptr<GuestMapping>> MapGuestRam(DomainId domid, uint64_t frames,
                                                            uint64_t* holes) = 0;

  // The guest's side of a domain this Backend created (CreateDomain), for a program that plays the
  // guest itself. Xen: Unimplemented (its guests trap in hardware).
  virtual Result<std::unique_ptr<GuestIo>> OpenGuestIo(DomainId domid,
                                                       const GuestIoOptions& options) = 0;

  // This process's event channels, grants and store (as dom0).
  virtual Result<std::unique_ptr<EventChannels>> OpenEventChannels() = 0;
  virtual Result<std::unique_ptr<GrantSharer>> OpenGrantSharer() = 0;
  virtual Result<std::unique_ptr<GrantMapper>> OpenGrantMapper() = 0;
  virtual Result<std::unique_ptr<Store>> OpenStore() = 0;
};

// The factory (gpuvm_hv_backends). Opening never fails for lack of a hypervisor: the Xen backend
// opens the toolstack libraries per call, and each call answers Unavailable where there is no Xen.
std::unique_ptr<Backend> OpenBackend(BackendKind kind, const BackendOptions& options = {});
Result<std::unique_ptr<Backend>> BackendFromName(std::string_view name,
                                                 const BackendOptions& options = {});

// The environment variable a launcher sets for a program it starts inside a local VM: an inherited
// unix socket on which it hands out the domain (gpuvm-vm, tools/gpuvm-vm/launcher.h).
inline constexpr const char* kLocalVmFdVariable = "GPUVM_LOCAL_VM_FD";

// Inside a VM (gpuvm_hv_guest): the guest side of the VM this process runs in, as its launcher
// described it in the environment — $GPUVM_LOCAL_VM_FD, a local VM: a socket on which the launcher
// hands out a copy of the domain per request. FailedPrecondition when no launcher did (not inside a
// VM); InvalidArgument for a malformed value.
Result<std::unique_ptr<GuestIo>> OpenGuestIoFromEnvironment(const GuestIoOptions& options = {});

}  // namespace gpuvm::hv

#endif  // GPUVM_HYPERVISOR_BACKEND_H_
