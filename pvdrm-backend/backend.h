// PVDRM's backend connection (docs/PVDRM.md): dom0's end of one guest's vgpu-drm device — its half
// of the XenBus handshake, the ring it maps from the guest's grant, the event channel it binds —
// and the serving loop that turns each request into a call of a RequestHandler, the port the GPU
// layer implements.
//
// Run() is the whole life of the device on one thread: it waits for the frontend's Initialised,
// maps the ring and binds the event channel, goes Connected, and serves: each request is copied
// once (RING_COPY_REQUEST), decoded and validated (codec.h), checked against the open files, and
// handed to the handler; the response goes back with RING_PUSH_RESPONSES_AND_CHECK_NOTIFY, and
// RING_FINAL_CHECK_FOR_REQUESTS re-checks before sleeping.
//
// The frontend is not trusted: a malformed request gets an error response (-EINVAL, -ENOTTY for an
// unknown op), too many of them, a request producer index that lies (more requests than slots),
// or unusable handshake keys (a bad ring grant, port, protocol or version) disconnect it — state
// Closing with an `error` key, the ring unmapped, the handler told OnDisconnect(). The frontend
// going Closing/Closed or its directory vanishing (the toolstack removes it when the domain dies)
// ends the connection the same way. Nothing a frontend writes can crash the backend or reach
// another frontend's connection (each has its own).
//
// Threading: Create() and Run() on one thread, which also makes every handler call. stats() and
// disconnect_reason() from any thread.
#ifndef GPUVM_PVDRM_BACKEND_BACKEND_H_
#define GPUVM_PVDRM_BACKEND_BACKEND_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "hypervisor/event_channels.h"
#include "hypervisor/grants.h"
#include "hypervisor/store.h"
#include "pvdrm-frontend/protocol/codec.h"
#include "pvdrm-frontend/protocol/xenbus.h"

namespace gpuvm::pvdrm {

// What a handler may do with the guest pages a request lists (GEM_NEW's backing, GEM_PUSHBUF's
// arrays).
class GuestPages {
 public:
  virtual ~GuestPages() = default;
  // Maps the list's pages contiguously, in order (its indirect pages are mapped read-only and
  // copied once). PermissionDenied/OutOfRange/NotFound as the grant layer says for a bad ref;
  // InvalidArgument for an empty list.
  virtual Result<std::unique_ptr<hv::GuestMapping>> Map(const PageList& list,
                                                        hv::Access access) = 0;
  // The file's arrays area (FILE_OPEN's persistent pages, mapped read-write once), or an empty
  // span when it has none. The guest may write it at any time: copy before deciding.
  virtual std::span<uint8_t> FileArea(uint32_t file) = 0;
};

// GEM_NEW's guest frame numbers: `count` of them read once out of the list's frame-list pages
// (mapped read-only). Errors as Map; InvalidArgument when the list has not exactly the pages
// `count` frames need or the rest of its last page is not zero.
Result<std::vector<uint32_t>> ReadFrameList(GuestPages& pages, const PageList& list,
                                            uint64_t count);

// The port the GPU layer implements. Called on the Run() thread only.
class RequestHandler {
 public:
  virtual ~RequestHandler() = default;
  // A validated request of an open file — or FILE_OPEN of a new file id (the connection refuses
  // duplicates and too many files, and has mapped the file's arrays area if it names one: -EFAULT
  // without the handler otherwise), or FILE_CLOSE (after which the connection forgets the file and
  // unmaps its area whatever the handler answers). The response's id and op are the
  // connection's to fill in.
  virtual Response Handle(const Request& request, GuestPages& pages) = 0;
  // The frontend is gone — closed, died, or disconnected for misbehaving: free everything of every
  // one of its files. No request of this connection follows.
  virtual void OnDisconnect() = 0;
  // Whether the handler has work to do when the ring is quiet (BackendConnection::Run calls
  // OnIdle once the ring has been empty for kIdleAfter), and that work. Both on Run's thread.
  virtual bool WantsIdle() const { return false; }
  virtual void OnIdle() {}
};

struct BackendOptions {
  DeviceAddress device;
  uint32_t max_files = 256;  // open DRM files per frontend (FILE_OPEN past it: -EMFILE)
  // Malformed requests answered before the frontend is disconnected (a correct frontend sends
  // none).
  uint32_t max_malformed = 64;
};

struct BackendStats {
  uint64_t requests = 0;   // slots consumed
  uint64_t malformed = 0;  // refused by the decoder
  uint64_t connects = 0;
  uint64_t disconnects = 0;
};

class BackendConnection {
 public:
  // Announces the backend (protocol-version, state InitWait) and watches the frontend's directory.
  // The mapper must outlive the connection; the channels and store become its own.
  static Result<std::unique_ptr<BackendConnection>> Create(
      hv::GrantMapper& mapper, std::unique_ptr<hv::EventChannels> channels,
      std::unique_ptr<hv::Store> store, RequestHandler& handler, const BackendOptions& options);
  ~BackendConnection();
  BackendConnection(const BackendConnection&) = delete;
  BackendConnection& operator=(const BackendConnection&) = delete;

  // How long the ring stays empty before the handler's idle work runs (RequestHandler::OnIdle).
  static constexpr int kIdleAfterMs = 2;

  // Serves the device until the frontend is Closed or gone (OK), or `stop_fd` polls readable (OK:
  // the backend disconnects and goes Closed). An error only when the store or event channels fail
  // under us. Either way the handler has heard OnDisconnect() if it was ever connected.
  Status Run(int stop_fd);

  // Why the last connection ended (empty while none did).
  std::string disconnect_reason() const;
  BackendStats stats() const;

 private:
  enum class Phase { kWaiting, kConnected, kClosing, kDone };
  class Pages;

  BackendConnection(hv::GrantMapper& mapper, RequestHandler& handler);
  Status Announce();
  // Reads the frontend's state and moves ours; may connect or tear down.
  Status FollowFrontend();
  // Maps the ring and binds the channel from the frontend's keys; an error is the frontend's fault.
  Status ConnectRing();
  // Ends a connection (or a handshake): unmaps, unbinds, tells the handler, writes `error` (when
  // the frontend is to blame) and state `next`.
  void Disconnect(const std::string& reason, bool blame_frontend, XenbusState next);
  // Serves what is in the ring; true when more may be waiting (a batch limit was hit).
  bool ServeRing();
  Response Process(const pvdrm_request& copy, uint16_t& raw_op);

  hv::GrantMapper& mapper_;
  RequestHandler& handler_;
  std::unique_ptr<Pages> pages_;
  BackendOptions options_;
  std::string front_dir_;
  std::string back_dir_;
  std::unique_ptr<hv::EventChannels> channels_;
  std::unique_ptr<hv::Store> store_;

  Phase phase_ = Phase::kWaiting;
  std::unique_ptr<hv::GuestMapping> ring_mapping_;
  pvdrm_back_ring back_{};
  hv::EvtchnPort port_ = 0;
  bool port_bound_ = false;
  std::set<uint32_t> files_;
  uint32_t malformed_this_connection_ = 0;
  mutable std::mutex reason_mu_;
  std::string disconnect_reason_;  // guarded by reason_mu_

  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> malformed_{0};
  std::atomic<uint64_t> connects_{0};
  std::atomic<uint64_t> disconnects_{0};
};

}  // namespace gpuvm::pvdrm

#endif  // GPUVM_PVDRM_BACKEND_BACKEND_H_
