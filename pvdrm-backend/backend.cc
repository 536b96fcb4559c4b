#include "pvdrm-backend/backend.h"

#include <poll.h>
#include <xen/io/protocols.h>

#include <cerrno>
#include <map>
#include <vector>

#include "base/os.h"

namespace gpuvm::pvdrm {
namespace {

constexpr std::string_view kFrontendToken = "pvdrm-frontend";

}  // namespace

// GuestPages over the connection's grant mapper, for the frontend's domain.
class BackendConnection::Pages : public GuestPages {
 public:
  Pages(hv::GrantMapper& mapper, hv::DomainId granter) : mapper_(mapper), granter_(granter) {}

  Result<std::unique_ptr<hv::GuestMapping>> Map(const PageList& list, hv::Access access) override {
    GPUVM_ASSIGN_OR_RETURN(const std::vector<grant_ref_t> refs, Refs(list));
    return mapper_.Map(granter_, refs, access);
  }

  std::span<uint8_t> FileArea(uint32_t file) override {
    auto it = areas_.find(file);
    return it == areas_.end() ? std::span<uint8_t>() : it->second->bytes();
  }
  // FILE_OPEN's area: mapped now, kept until DropArea.
  Status MapArea(uint32_t file, const PageList& list) {
    GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<hv::GuestMapping> area,
                           Map(list, hv::Access::kReadWrite));
    if (area->bytes().size() < uint64_t{list.nr_pages} * kPageBytes) {
      return Status::Internal("area mapped short");
    }
    areas_[file] = std::move(area);
    return Status::Ok();
  }
  void DropArea(uint32_t file) { areas_.erase(file); }
  void DropAreas() { areas_.clear(); }

 private:
  Result<std::vector<grant_ref_t>> Refs(const PageList& list) {
    if (list.nr_pages == 0 || list.indirect.size() != IndirectPagesFor(list.nr_pages)) {
      return Status::InvalidArgument("no pages listed");
    }
    std::vector<uint8_t> indirect;
    {
      GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<hv::GuestMapping> pages,
                             mapper_.Map(granter_, list.indirect, hv::Access::kReadOnly));
      // One copy: the guest may rewrite its indirect pages while we read them.
      const std::span<uint8_t> bytes = pages->bytes();
      indirect.resize(bytes.size());
      for (size_t i = 0; i < bytes.size(); ++i) indirect[i] = os::LoadShared(bytes[i]);
    }
    std::vector<grant_ref_t> entries = RefsOfIndirectPages(list, indirect);
    if (entries.size() != list.nr_pages) return Status::Internal("indirect pages too short");
    return entries;
  }

  hv::GrantMapper& mapper_;
  hv::DomainId granter_;
  std::map<uint32_t, std::unique_ptr<hv::GuestMapping>> areas_;  // by file
};

Result<std::vector<uint32_t>> ReadFrameList(GuestPages& pages, const PageList& list,
                                            uint64_t count) {
  if (count == 0 || count > kMaxGemFrames ||
      list.nr_pages != (count + kFramesPerListPage - 1) / kFramesPerListPage) {
    return Status::InvalidArgument("a frame list of " + std::to_string(list.nr_pages) +
                                   " pages for " + std::to_string(count) + " frames");
  }
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<hv::GuestMapping> mapped,
                         pages.Map(list, hv::Access::kReadOnly));
  const std::span<uint8_t> bytes = mapped->bytes();
  if (bytes.size() < uint64_t{list.nr_pages} * kPageBytes) {
    return Status::Internal("frame-list pages mapped short");
  }
  // One copy, then decide on it: the guest may rewrite its pages while we read them.
  std::vector<uint32_t> listed(uint64_t{list.nr_pages} * kFramesPerListPage);
  const auto* shared = reinterpret_cast<const uint32_t*>(bytes.data());
  for (size_t i = 0; i < listed.size(); ++i) listed[i] = os::LoadShared(shared[i]);
  for (size_t i = count; i < listed.size(); ++i) {
    if (listed[i] != 0) return Status::InvalidArgument("frame list has entries past its object");
  }
  listed.resize(count);
  return listed;
}

BackendConnection::BackendConnection(hv::GrantMapper& mapper, RequestHandler& handler)
    : mapper_(mapper), handler_(handler) {}

BackendConnection::~BackendConnection() {
  if (phase_ == Phase::kConnected) {
    Disconnect("backend destroyed", false, XenbusStateClosed);
  }
}

Result<std::unique_ptr<BackendConnection>> BackendConnection::Create(
    hv::GrantMapper& mapper, std::unique_ptr<hv::EventChannels> channels,
    std::unique_ptr<hv::Store> store, RequestHandler& handler, const BackendOptions& options) {
  if (channels == nullptr || store == nullptr) {
    return Status::InvalidArgument("pvdrm backend needs event channels and a store");
  }
  std::unique_ptr<BackendConnection> c(new BackendConnection(mapper, handler));
  c->options_ = options;
  c->channels_ = std::move(channels);
  c->store_ = std::move(store);
  c->front_dir_ = FrontendDir(options.device);
  c->back_dir_ = BackendDir(options.device);
  c->pages_ = std::make_unique<Pages>(mapper, options.device.frontend);
  GPUVM_RETURN_IF_ERROR(c->Announce());
  return c;
}

Status BackendConnection::Announce() {
  GPUVM_RETURN_IF_ERROR(store_->Watch(front_dir_, kFrontendToken));
  GPUVM_RETURN_IF_ERROR(
      store_->Write(Key(back_dir_, kVersionKey), std::to_string(kProtocolVersion)));
  return WriteState(*store_, back_dir_, XenbusStateInitWait);
}

std::string BackendConnection::disconnect_reason() const {
  std::lock_guard lock(reason_mu_);
  return disconnect_reason_;
}

BackendStats BackendConnection::stats() const {
  return {requests_.load(std::memory_order_relaxed), malformed_.load(std::memory_order_relaxed),
          connects_.load(std::memory_order_relaxed), disconnects_.load(std::memory_order_relaxed)};
}

void BackendConnection::Disconnect(const std::string& reason, bool blame_frontend,
                                   XenbusState next) {
  if (phase_ == Phase::kConnected) {
    // Unmap before we say Closing: the frontend revokes the ring's grant once it sees Closing.
    ring_mapping_.reset();
    back_ = {};
    handler_.OnDisconnect();
    files_.clear();
    pages_->DropAreas();
    disconnects_.fetch_add(1, std::memory_order_relaxed);
  }
  if (port_bound_) (void)channels_->Unbind(port_);
  port_bound_ = false;
  ring_mapping_.reset();
  {
    std::lock_guard lock(reason_mu_);
    if (phase_ != Phase::kClosing || disconnect_reason_.empty()) disconnect_reason_ = reason;
  }
  if (blame_frontend) (void)store_->Write(Key(back_dir_, kErrorKey), reason.substr(0, 256));
  (void)WriteState(*store_, back_dir_, next);
  phase_ = next == XenbusStateClosed ? Phase::kDone : Phase::kClosing;
}

Status BackendConnection::ConnectRing() {
  const hv::DomainId domid = options_.device.frontend;
  GPUVM_ASSIGN_OR_RETURN(uint64_t version,
                         ReadNumber(*store_, Key(front_dir_, kVersionKey), 0xffffffff));
  if (version != kProtocolVersion) {
    return Status::Unimplemented("frontend chose pvdrm protocol " + std::to_string(version) +
                                 "; this backend speaks " + std::to_string(kProtocolVersion));
  }
  GPUVM_ASSIGN_OR_RETURN(std::string protocol, store_->Read(Key(front_dir_, kProtocolKey)));
  if (protocol != XEN_IO_PROTO_ABI_NATIVE) {
    return Status::Unimplemented("frontend's ABI '" + protocol.substr(0, 32) + "' is not " +
                                 XEN_IO_PROTO_ABI_NATIVE);
  }
  GPUVM_ASSIGN_OR_RETURN(uint64_t ring_ref,
                         ReadNumber(*store_, Key(front_dir_, kRingRefKey), 0xffffffff));
  GPUVM_ASSIGN_OR_RETURN(uint64_t port,
                         ReadNumber(*store_, Key(front_dir_, kEventChannelKey), 0xffffffff));
  const grant_ref_t ref = static_cast<grant_ref_t>(ring_ref);
  Result<std::unique_ptr<hv::GuestMapping>> ring =
      mapper_.Map(domid, std::span<const grant_ref_t>(&ref, 1), hv::Access::kReadWrite);
  if (!ring.ok()) return ring.status().WithContext("mapping ring-ref " + std::to_string(ref));
  if ((*ring)->bytes().size() < kPageBytes) return Status::Internal("ring mapping too short");
  Result<hv::EvtchnPort> bound =
      channels_->BindInterdomain(domid, static_cast<hv::EvtchnPort>(port));
  if (!bound.ok())
    return bound.status().WithContext("binding event-channel " + std::to_string(port));
  ring_mapping_ = std::move(*ring);
  port_ = *bound;
  port_bound_ = true;
  // A fresh ring starts at index 0 (SHARED_RING_INIT); whatever the frontend's indices say is
  // checked on every pass (ServeRing).
  auto* sring = reinterpret_cast<pvdrm_sring*>(ring_mapping_->bytes().data());
  BACK_RING_INIT(&back_, sring, kPageBytes);
  files_.clear();
  pages_->DropAreas();
  malformed_this_connection_ = 0;
  phase_ = Phase::kConnected;
  connects_.fetch_add(1, std::memory_order_relaxed);
  return WriteState(*store_, back_dir_, XenbusStateConnected);
}

Status BackendConnection::FollowFrontend() {
  Result<XenbusState> state = ReadState(*store_, front_dir_);
  if (!state.ok()) {
    if (state.status().code() == StatusCode::kNotFound) {
      // The toolstack took the device away (the domain died or the device was unplugged).
      Disconnect("frontend " + front_dir_ + " vanished", false, XenbusStateClosed);
      return Status::Ok();
    }
    if (state.status().code() != StatusCode::kDataLoss) return state.status();
    if (phase_ == Phase::kWaiting || phase_ == Phase::kConnected) {
      Disconnect("frontend state unreadable: " + state.status().message(), true,
                 XenbusStateClosing);
    }
    return Status::Ok();
  }
  switch (phase_) {
    case Phase::kWaiting:
      if (*state == XenbusStateInitialised || *state == XenbusStateConnected) {
        if (Status s = ConnectRing(); !s.ok()) {
          Disconnect("frontend's handshake keys: " + s.ToString(), true, XenbusStateClosing);
        }
      } else if (*state == XenbusStateClosing || *state == XenbusStateClosed) {
        Disconnect("frontend closed before connecting", false,
                   *state == XenbusStateClosed ? XenbusStateClosed : XenbusStateClosing);
      }
      break;
    case Phase::kConnected:
      if (*state == XenbusStateClosing || *state == XenbusStateClosed) {
        Disconnect("frontend is " + std::string(StateName(*state)), false, XenbusStateClosing);
        if (*state == XenbusStateClosed) Disconnect(disconnect_reason(), false, XenbusStateClosed);
      }
      break;
    case Phase::kClosing:
      if (*state == XenbusStateClosed) Disconnect(disconnect_reason(), false, XenbusStateClosed);
      break;
    case Phase::kDone:
      break;
  }
  return Status::Ok();
}

Response BackendConnection::Process(const pvdrm_request& copy, uint16_t& raw_op) {
  raw_op = copy.op;
  auto decoded = DecodeRequest(copy);
  if (auto* error = std::get_if<RequestError>(&decoded)) {
    malformed_.fetch_add(1, std::memory_order_relaxed);
    if (++malformed_this_connection_ > options_.max_malformed) {
      Disconnect("more than " + std::to_string(options_.max_malformed) +
                     " malformed requests; the last: " + error->message,
                 true, XenbusStateClosing);
    }
    return ErrorResponse(copy.id, Op::kFileOpen, error->status);  // op: raw_op goes on the wire
  }
  const Request& request = std::get<Request>(decoded);
  const Op op = request.op();
  const bool open = files_.contains(request.file);
  if (op == Op::kFileOpen) {
    if (open) return ErrorResponse(request.id, op, -EEXIST);
    if (files_.size() >= options_.max_files) return ErrorResponse(request.id, op, -EMFILE);
  } else if (!open) {
    return ErrorResponse(request.id, op, -EBADF);
  }
  if (op == Op::kFileOpen) {
    const FileOpen& open_request = std::get<FileOpen>(request.body);
    if (open_request.area.nr_pages != 0 && !pages_->MapArea(request.file, open_request.area).ok()) {
      return ErrorResponse(request.id, op, -EFAULT);
    }
  }
  Response response = handler_.Handle(request, *pages_);
  response.id = request.id;
  response.op = op;
  if (response.status != 0) response.body = std::monostate();
  // A handler's answer the frontend would refuse (a status that is no errno, a body of another
  // op) would break the whole connection: it becomes -EIO for this request alone.
  pvdrm_response check;
  EncodeResponse(response, check);
  if (!DecodeResponse(check, op).ok()) response = ErrorResponse(request.id, op, -EIO);
  if (op == Op::kFileOpen && response.status == 0) files_.insert(request.file);
  if (op == Op::kFileOpen && response.status != 0) pages_->DropArea(request.file);
  if (op == Op::kFileClose) {
    files_.erase(request.file);
    pages_->DropArea(request.file);
  }
  return response;
}

bool BackendConnection::ServeRing() {
  // At most this many passes over the ring before the store and the stop fd get a look.
  constexpr int kPasses = 4;
  for (int pass = 0; pass < kPasses; ++pass) {
    const RING_IDX rp = os::LoadShared(back_.sring->req_prod);
    if (RING_REQUEST_PROD_OVERFLOW(&back_, rp)) {
      Disconnect("frontend's request producer " + std::to_string(rp) + " is " +
                     std::to_string(rp - back_.rsp_prod_pvt) + " past our last response (" +
                     std::to_string(kRingSlots) + " slots)",
                 true, XenbusStateClosing);
      return false;
    }
    while (back_.req_cons != rp) {
      pvdrm_request copy;
      RING_COPY_REQUEST(&back_, back_.req_cons, &copy);
      ++back_.req_cons;
      requests_.fetch_add(1, std::memory_order_relaxed);
      uint16_t raw_op = 0;
      const Response response = Process(copy, raw_op);
      if (phase_ != Phase::kConnected) return false;  // Process disconnected the frontend
      pvdrm_response wire;
      EncodeResponse(response, wire);
      wire.op = raw_op;
      std::memcpy(RING_GET_RESPONSE(&back_, back_.rsp_prod_pvt), &wire, sizeof(wire));
      ++back_.rsp_prod_pvt;
    }
    int notify = 0;
    RING_PUSH_RESPONSES_AND_CHECK_NOTIFY(&back_, notify);
    if (notify) (void)channels_->Notify(port_);
    int more = 0;
    RING_FINAL_CHECK_FOR_REQUESTS(&back_, more);
    if (!more) return false;
  }
  return true;
}

Status BackendConnection::Run(int stop_fd) {
  GPUVM_RETURN_IF_ERROR(FollowFrontend());
  bool more = false;
  while (phase_ != Phase::kDone) {
    pollfd fds[3] = {{stop_fd, POLLIN, 0},
                     {store_->watch_fd(), POLLIN, 0},
                     {port_bound_ ? channels_->fd() : -1, POLLIN, 0}};
    const int timeout = more ? 0 : handler_.WantsIdle() ? kIdleAfterMs : -1;
    const int ready = ::poll(fds, 3, timeout);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "pvdrm backend poll");
    }
    if (ready == 0 && timeout > 0) {
      handler_.OnIdle();
      continue;
    }
    if (fds[0].revents & POLLIN) {
      Disconnect("backend stopped", false, XenbusStateClosed);
      break;
    }
    if (fds[1].revents) {
      bool event = false;
      for (;;) {
        GPUVM_ASSIGN_OR_RETURN(std::optional<hv::WatchEvent> next, store_->PollWatch());
        if (!next) break;
        event = true;
      }
      if (event) GPUVM_RETURN_IF_ERROR(FollowFrontend());
    }
    if (port_bound_ && fds[2].revents) {
      // One port per wake-up (we bind one; another pending one keeps the fd readable for the
      // next poll): asking again until none is left cost a system call per event.
      GPUVM_ASSIGN_OR_RETURN(std::optional<hv::EvtchnPort> pending, channels_->Pending());
      if (pending) GPUVM_RETURN_IF_ERROR(channels_->Unmask(*pending));
    }
    more = phase_ == Phase::kConnected && ServeRing();
  }
  return Status::Ok();
}

}  // namespace gpuvm::pvdrm
