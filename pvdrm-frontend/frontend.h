// PVDRM's frontend connection (docs/PVDRM.md): the guest's end of one vgpu-drm device — the ring
// page it grants, the event channel it offers, its half of the XenBus handshake — and a
// synchronous Call() that any number of threads (one per open DRM file, usually) may use at once.
//
// Connect() runs the handshake: it waits for the backend's InitWait, shares one zeroed page with
// the backend domain and initialises Xen's ring in it, allocates an unbound event channel for the
// backend domain, writes ring-ref / event-channel / protocol / protocol-version, goes Initialised,
// waits for the backend's Connected and goes Connected. A receiver thread then waits on the event
// channel and the store: it copies each response once (RING_COPY_RESPONSE), matches it to an
// outstanding request by id and hands it to its caller, and re-checks with
// RING_FINAL_CHECK_FOR_RESPONSES before it sleeps.
//
// The backend is trusted no further than needed: a response to no outstanding request, a producer
// index past what we asked for, or a non-canonical response breaks the connection (every call
// fails with Unavailable naming why; the frontend writes `error` and goes Closing), as does the
// backend going Closing/Closed or vanishing.
//
// Threading: Call() from any thread. Connect/Close and the destructor from the owner thread. The
// GrantSharer stays the caller's (it must outlive the connection and is used only in Connect and
// Close); the event channels and store become the connection's (its lock guards them).
#ifndef GPUVM_PVDRM_FRONTEND_FRONTEND_H_
#define GPUVM_PVDRM_FRONTEND_FRONTEND_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/os.h"
#include "hypervisor/event_channels.h"
#include "hypervisor/grants.h"
#include "hypervisor/store.h"
#include "pvdrm-frontend/protocol/codec.h"
#include "pvdrm-frontend/protocol/xenbus.h"

namespace gpuvm::pvdrm {

struct FrontendOptions {
  DeviceAddress device;  // device.frontend is our own domain
  // How long Connect waits for the backend (its InitWait, then its Connected).
  std::chrono::milliseconds connect_timeout{30000};
  // How long Close waits for outstanding calls, then for the backend to let go of the ring.
  std::chrono::milliseconds close_timeout{5000};
};

class FrontendConnection {
 public:
  static Result<std::unique_ptr<FrontendConnection>> Connect(
      hv::GrantSharer& sharer, std::unique_ptr<hv::EventChannels> channels,
      std::unique_ptr<hv::Store> store, const FrontendOptions& options);
  ~FrontendConnection();
  FrontendConnection(const FrontendConnection&) = delete;
  FrontendConnection& operator=(const FrontendConnection&) = delete;

  // Sends `body` on behalf of DRM file `file` (nonzero; FILE_OPEN first) and waits for the
  // response. The response's status is the ioctl's (0 or -errno). Unavailable when the connection
  // is closed or broken.
  Result<Response> Call(uint32_t file, const RequestBody& body);

  // Waits (up to close_timeout) for outstanding calls, goes Closing, waits for the backend to
  // close (up to close_timeout), goes Closed, unbinds the event channel and revokes the ring's
  // grant. Idempotent.
  Status Close();

  // OK while calls can be made; else why not.
  Status health() const;
  hv::DomainId backend_domain() const { return backend_domid_; }

 private:
  struct Outstanding {
    Op op;
    bool done = false;
    Result<Response> result = Status::Internal("no response yet");
  };

  explicit FrontendConnection(hv::GrantSharer& sharer) : sharer_(sharer) {}
  Status Handshake(std::unique_ptr<hv::EventChannels> channels, std::unique_ptr<hv::Store> store,
                   const FrontendOptions& options);
  // Waits for the backend's state to satisfy `done`; fails when it goes Closing/Closed/vanishes
  // first (unless `done` accepts that) or the deadline passes.
  Result<XenbusState> WaitForBackend(bool (*done)(XenbusState),
                                     std::chrono::steady_clock::time_point deadline);
  void Receive();
  void DrainResponsesLocked();
  void ReactToBackendLocked();
  // Fails every outstanding and later call with `why`; the first reason sticks.
  void BreakLocked(const std::string& why);
  // BreakLocked for a backend that lied: also tells it why and goes Closing.
  void BlameBackendLocked(const std::string& why);
  Status Abandon(const Status& why);

  hv::GrantSharer& sharer_;
  FrontendOptions options_;
  std::string front_dir_;
  std::string back_dir_;
  hv::DomainId backend_domid_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unique_ptr<hv::EventChannels> channels_;
  std::unique_ptr<hv::Store> store_;
  std::unique_ptr<hv::SharedPages> ring_page_;
  pvdrm_front_ring front_{};
  hv::EvtchnPort port_ = 0;
  bool port_bound_ = false;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Outstanding> outstanding_;
  std::string broken_;   // nonempty: no more calls
  bool closed_ = false;  // Close() ran
  bool wrote_closed_ = false;

  os::UniqueFd stop_;
  std::thread receiver_;
};

}  // namespace gpuvm::pvdrm

#endif  // GPUVM_PVDRM_FRONTEND_FRONTEND_H_
