// PVDRM's frontend connection (docs/PVDRM.md): the guest's end of one vgpu-drm device — the ring
// page it grants, the event channel it offers, its half of the XenBus handshake — and a
// synchronous Call() that any number of threads (one per open DRM file, usually) may use at once.
//
// Connect() runs the handshake: it waits for the backend's InitWait, shares one zeroed page with
// the backend domain and initialises Xen's ring in it, allocates an unbound event channel for the
// backend domain, writes ring-ref / event-channel / protocol / protocol-version, goes Initialised,
// waits for the backend's Connected and goes Connected. Responses are copied once
// (RING_COPY_RESPONSE), matched to an outstanding request by id and handed to its caller, with a
// re-check by RING_FINAL_CHECK_FOR_RESPONSES before anyone sleeps. Who waits on the event channel:
// a synchronous caller itself while no posted request is outstanding (one of them at a time, the
// "poller"; the others wait for it), so a round trip costs two thread switches, not three; the
// receiver thread while posted requests are outstanding and no caller polls. The receiver also
// follows the backend's state in the store.
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
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

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

  // Sends `body` as Call does but does not wait for its response (a posted request, e.g. a
  // pushbuffer whose outcome the caller learns later): `done` runs exactly once with the response
  // or the connection's failure, without the connection's lock held, on whichever thread runs
  // completions then — one thread at a time, in the order of the requests on the ring. Requests
  // keep their order on the ring either way. Waits only for a free ring slot.
  // Unavailable (and `done` is not run) when the connection is closed or broken.
  using Completion = std::function<void(Result<Response>)>;
  Status Post(uint32_t file, const RequestBody& body, Completion done);

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
    Completion posted;   // set: a posted request, completed through completed_
    RING_IDX index = 0;  // its slot's ring index (its response's too)
  };
  using OutstandingMap = std::map<uint64_t, Outstanding>;

  explicit FrontendConnection(hv::GrantSharer& sharer) : sharer_(sharer) {}
  Status Handshake(std::unique_ptr<hv::EventChannels> channels, std::unique_ptr<hv::Store> store,
                   const FrontendOptions& options);
  // Waits for the backend's state to satisfy `done`; fails when it goes Closing/Closed/vanishes
  // first (unless `done` accepts that) or the deadline passes.
  Result<XenbusState> WaitForBackend(bool (*done)(XenbusState),
                                     std::chrono::steady_clock::time_point deadline);
  void Receive();
  // Waits for a free slot, puts the request on the ring and notifies the backend if it asks to be.
  Result<OutstandingMap::iterator> SendLocked(std::unique_lock<std::mutex>& lock, uint32_t file,
                                              const RequestBody& body, Completion posted);
  // One turn as the poller (mu_ held on entry and exit): consumes responses, and unless `done`
  // then is true waits on the event channel (or a poke) without the lock and consumes again.
  void PollOnceUnlocked(std::unique_lock<std::mutex>& lock, const bool& done);
  // Takes the pending event-channel notification and re-arms the port (the responses themselves
  // are read by DrainResponsesLocked).
  void ClearEventsLocked();
  // Marks `call` done with `result`; a posted one moves to completed_ and leaves outstanding_.
  void CompleteLocked(OutstandingMap::iterator call, Result<Response> result);
  // Runs the completions of posted requests gathered so far, unless another thread is running
  // completions (it runs these too). Call without mu_ held.
  void RunCompleted();
  // Wakes the receiver to reconsider what it polls.
  void PokeReceiverLocked();
  bool ReceiverWatchesChannelLocked() const { return posted_ > 0 && !caller_polling_; }
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
  OutstandingMap outstanding_;
  uint64_t posted_ = 0;          // posted requests outstanding
  bool caller_polling_ = false;  // a Call() thread waits on the event channel
  std::vector<std::pair<Completion, Result<Response>>> completed_;
  bool completions_running_ = false;     // a thread is in RunCompleted's loop
  std::thread::id completion_runner_{};  // which one (valid while completions_running_)
  std::string broken_;                   // nonempty: no more calls
  bool closed_ = false;                  // Close() ran
  bool wrote_closed_ = false;

  os::UniqueFd stop_;
  os::UniqueFd receiver_poke_;  // the receiver re-decides whether it watches the event channel
  os::UniqueFd poller_poke_;    // the polling caller looks again (the connection broke)
  std::thread receiver_;
};

}  // namespace gpuvm::pvdrm

#endif  // GPUVM_PVDRM_FRONTEND_FRONTEND_H_
