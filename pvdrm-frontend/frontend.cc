#include "pvdrm-frontend/frontend.h"

#include <poll.h>
#include <xen/io/protocols.h>

#include <algorithm>
#include <cerrno>

namespace gpuvm::pvdrm {
namespace {

constexpr std::string_view kBackendToken = "pvdrm-backend";

int MillisUntil(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1000));
}

bool Gone(XenbusState state) { return state == XenbusStateClosing || state == XenbusStateClosed; }

}  // namespace

Result<std::unique_ptr<FrontendConnection>> FrontendConnection::Connect(
    hv::GrantSharer& sharer, std::unique_ptr<hv::EventChannels> channels,
    std::unique_ptr<hv::Store> store, const FrontendOptions& options) {
  if (channels == nullptr || store == nullptr) {
    return Status::InvalidArgument("pvdrm frontend needs event channels and a store");
  }
  std::unique_ptr<FrontendConnection> c(new FrontendConnection(sharer));
  GPUVM_RETURN_IF_ERROR(c->Handshake(std::move(channels), std::move(store), options));
  return c;
}

Status FrontendConnection::Handshake(std::unique_ptr<hv::EventChannels> channels,
                                     std::unique_ptr<hv::Store> store,
                                     const FrontendOptions& options) {
  options_ = options;
  channels_ = std::move(channels);
  store_ = std::move(store);
  front_dir_ = FrontendDir(options.device);
  const auto deadline = std::chrono::steady_clock::now() + options.connect_timeout;

  // The toolstack's keys say where the backend is.
  Result<std::string> back_dir = store_->Read(Key(front_dir_, kBackendKey));
  if (!back_dir.ok()) return Abandon(back_dir.status().WithContext("no vgpu-drm device here"));
  if (Status valid = hv::ValidateStorePath(*back_dir); !valid.ok()) {
    return Abandon(valid.WithContext("backend path"));
  }
  back_dir_ = *back_dir;
  Result<uint64_t> backend_id = ReadNumber(*store_, Key(front_dir_, kBackendIdKey), 0xffff);
  if (!backend_id.ok()) return Abandon(backend_id.status());
  backend_domid_ = static_cast<hv::DomainId>(*backend_id);
  if (Status s = store_->Watch(back_dir_, kBackendToken); !s.ok()) return Abandon(s);

  Result<XenbusState> ready =
      WaitForBackend([](XenbusState s) { return s == XenbusStateInitWait; }, deadline);
  if (!ready.ok()) return Abandon(ready.status());
  Result<uint64_t> version = ReadNumber(*store_, Key(back_dir_, kVersionKey), 0xffffffff);
  if (!version.ok()) return Abandon(version.status().WithContext("backend's protocol version"));
  if (*version < kProtocolVersion) {
    return Abandon(Status::Unimplemented("backend speaks pvdrm protocol " +
                                         std::to_string(*version) + ", we need " +
                                         std::to_string(kProtocolVersion)));
  }

  Result<std::unique_ptr<hv::SharedPages>> page =
      sharer_.Share(backend_domid_, 1, hv::Access::kReadWrite);
  if (!page.ok()) return Abandon(page.status().WithContext("granting the ring page"));
  ring_page_ = std::move(*page);
  auto* sring = reinterpret_cast<pvdrm_sring*>(ring_page_->bytes().data());
  SHARED_RING_INIT(sring);
  FRONT_RING_INIT(&front_, sring, kPageBytes);
  Result<hv::EvtchnPort> port = channels_->AllocUnbound(backend_domid_);
  if (!port.ok()) return Abandon(port.status().WithContext("event channel"));
  port_ = *port;
  port_bound_ = true;

  const std::pair<std::string_view, std::string> keys[] = {
      {kRingRefKey, std::to_string(ring_page_->refs()[0])},
      {kEventChannelKey, std::to_string(port_)},
      {kProtocolKey, XEN_IO_PROTO_ABI_NATIVE},
      {kVersionKey, std::to_string(kProtocolVersion)},
  };
  for (const auto& [key, value] : keys) {
    if (Status s = store_->Write(Key(front_dir_, key), value); !s.ok()) return Abandon(s);
  }
  if (Status s = WriteState(*store_, front_dir_, XenbusStateInitialised); !s.ok()) {
    return Abandon(s);
  }
  Result<XenbusState> connected =
      WaitForBackend([](XenbusState s) { return s == XenbusStateConnected; }, deadline);
  if (!connected.ok()) return Abandon(connected.status());
  if (Status s = WriteState(*store_, front_dir_, XenbusStateConnected); !s.ok()) {
    return Abandon(s);
  }
  for (os::UniqueFd* fd : {&stop_, &receiver_poke_, &poller_poke_}) {
    Result<os::UniqueFd> made = os::CreateEventFd();
    if (!made.ok()) return Abandon(made.status());
    *fd = std::move(*made);
  }
  receiver_ = std::thread([this] { Receive(); });
  return Status::Ok();
}

Result<XenbusState> FrontendConnection::WaitForBackend(
    bool (*done)(XenbusState), std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    Result<XenbusState> state = ReadState(*store_, back_dir_);
    if (state.ok() && done(*state)) return *state;
    if (!state.ok() && state.status().code() == StatusCode::kNotFound) {
      return Status::Unavailable("pvdrm backend " + back_dir_ + " is gone");
    }
    if (!state.ok()) return state.status();
    if (state.ok() && Gone(*state)) {
      Result<std::string> error = store_->Read(Key(back_dir_, kErrorKey));
      return Status::Unavailable("pvdrm backend " + back_dir_ + " is " +
                                 std::string(StateName(*state)) +
                                 (error.ok() ? ": " + *error : std::string()));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::DeadlineExceeded("pvdrm backend " + back_dir_ + " is " +
                                      std::string(StateName(*state)) + " after " +
                                      std::to_string(options_.connect_timeout.count()) + " ms");
    }
    Status waited = os::WaitReadable(store_->watch_fd(), MillisUntil(deadline));
    if (!waited.ok() && waited.code() != StatusCode::kDeadlineExceeded) return waited;
    for (;;) {
      GPUVM_ASSIGN_OR_RETURN(std::optional<hv::WatchEvent> event, store_->PollWatch());
      if (!event) break;
    }
  }
}

Status FrontendConnection::Abandon(const Status& why) {
  // Tell the backend (and the operator) why, go Closed, give everything back.
  if (store_ != nullptr) {
    (void)store_->Write(Key(front_dir_, kErrorKey), why.ToString().substr(0, 256));
    (void)WriteState(*store_, front_dir_, XenbusStateClosed);
    wrote_closed_ = true;
  }
  if (port_bound_) (void)channels_->Unbind(port_);
  port_bound_ = false;
  ring_page_.reset();
  closed_ = true;
  broken_ = why.ToString();
  return why;
}

FrontendConnection::~FrontendConnection() { (void)Close(); }

Status FrontendConnection::health() const {
  std::lock_guard lock(mu_);
  if (closed_) return Status::Unavailable("pvdrm connection closed");
  if (!broken_.empty()) return Status::Unavailable("pvdrm connection broken: " + broken_);
  return Status::Ok();
}

Result<FrontendConnection::OutstandingMap::iterator> FrontendConnection::SendLocked(
    std::unique_lock<std::mutex>& lock, uint32_t file, const RequestBody& body, Completion posted) {
  auto usable = [&]() -> Status {
    if (closed_) return Status::Unavailable("pvdrm connection closed");
    if (!broken_.empty()) return Status::Unavailable("pvdrm connection broken: " + broken_);
    return Status::Ok();
  };
  cv_.wait(lock, [&] { return !usable().ok() || !RING_FULL(&front_); });
  GPUVM_RETURN_IF_ERROR(usable());
  const uint64_t id = next_id_++;
  Request request{id, file, body};
  pvdrm_request wire;
  EncodeRequest(request, wire);
  const RING_IDX index = front_.req_prod_pvt;
  std::memcpy(RING_GET_REQUEST(&front_, index), &wire, sizeof(wire));
  ++front_.req_prod_pvt;
  auto [it, inserted] = outstanding_.emplace(
      id, Outstanding{request.op(), false, Status::Internal("no response yet"), nullptr, index});
  const bool is_posted = posted != nullptr;
  if (is_posted) {
    it->second.posted = std::move(posted);
    ++posted_;
  }
  int notify = 0;
  RING_PUSH_REQUESTS_AND_CHECK_NOTIFY(&front_, notify);
  if (notify) {
    if (Status s = channels_->Notify(port_); !s.ok()) {
      BreakLocked(s.ToString());  // completes this request too (a posted one: its Completion)
      if (!is_posted) outstanding_.erase(it);
      return Status::Unavailable("pvdrm connection broken: " + broken_);
    }
  }
  return it;
}

Result<Response> FrontendConnection::Call(uint32_t file, const RequestBody& body) {
  if (file == 0) return Status::InvalidArgument("pvdrm file 0 does not exist (files start at 1)");
  std::unique_lock lock(mu_);
  GPUVM_ASSIGN_OR_RETURN(const OutstandingMap::iterator it, SendLocked(lock, file, body, nullptr));
  while (!it->second.done) {
    if (!caller_polling_ && posted_ == 0) {
      // Nobody waits on the event channel: we do, until our own response is in.
      caller_polling_ = true;
      while (!it->second.done) PollOnceUnlocked(lock, it->second.done);
      caller_polling_ = false;
      cv_.notify_all();  // another caller may take over
      if (posted_ > 0) PokeReceiverLocked();
    } else {
      cv_.wait(lock, [&] { return it->second.done || (!caller_polling_ && posted_ == 0); });
    }
  }
  Result<Response> result = std::move(it->second.result);
  outstanding_.erase(it);
  cv_.notify_all();  // Close() may wait for the last call
  lock.unlock();
  RunCompleted();
  return result;
}

Status FrontendConnection::Post(uint32_t file, const RequestBody& body, Completion done) {
  if (file == 0) return Status::InvalidArgument("pvdrm file 0 does not exist (files start at 1)");
  if (done == nullptr) return Status::InvalidArgument("a posted request needs its completion");
  std::unique_lock lock(mu_);
  GPUVM_RETURN_IF_ERROR(SendLocked(lock, file, body, std::move(done)).status());
  if (posted_ == 1 && !caller_polling_) PokeReceiverLocked();  // it must watch the channel now
  lock.unlock();
  RunCompleted();
  return Status::Ok();
}

void FrontendConnection::PollOnceUnlocked(std::unique_lock<std::mutex>& lock, const bool& done) {
  DrainResponsesLocked();  // what came in since the last look needs no wait
  if (done || !broken_.empty()) return;
  pollfd fds[2] = {{channels_->fd(), POLLIN, 0}, {poller_poke_.get(), POLLIN, 0}};
  lock.unlock();
  const int ready = ::poll(fds, 2, -1);
  const int error = errno;
  if (ready > 0 && fds[1].revents) os::DrainEventFd(poller_poke_.get());
  lock.lock();
  if (ready < 0 && error != EINTR) {
    BreakLocked("poll: " + std::to_string(error));
    return;
  }
  if (ready > 0 && fds[0].revents) ClearEventsLocked();
  DrainResponsesLocked();
  if (!completed_.empty()) {
    lock.unlock();
    RunCompleted();
    lock.lock();
  }
}

void FrontendConnection::ClearEventsLocked() {
  // One port per wake-up: the connection binds one, and any other still pending keeps the event
  // channels' fd readable, so the next poll returns at once. Asking again until none is left
  // cost a system call per event that always came back empty.
  Result<std::optional<hv::EvtchnPort>> pending = channels_->Pending();
  if (pending.ok() && *pending) (void)channels_->Unmask(**pending);
}

void FrontendConnection::CompleteLocked(OutstandingMap::iterator call, Result<Response> result) {
  if (call->second.posted != nullptr) {
    completed_.emplace_back(std::move(call->second.posted), std::move(result));
    outstanding_.erase(call);
    --posted_;
    return;
  }
  call->second.result = std::move(result);
  call->second.done = true;
}

void FrontendConnection::RunCompleted() {
  std::unique_lock lock(mu_);
  // One thread at a time runs completions, batch after batch as the responses were consumed (in
  // ring order): with each thread running its own batch, a caller's batch and the receiver's ran
  // side by side and posted requests completed out of order (seen under ASan at load).
  if (completions_running_) return;  // that thread runs these too before it stops
  completions_running_ = true;
  completion_runner_ = std::this_thread::get_id();
  while (!completed_.empty()) {
    std::vector<std::pair<Completion, Result<Response>>> batch;
    batch.swap(completed_);
    lock.unlock();
    for (auto& [done, result] : batch) done(std::move(result));
    lock.lock();
  }
  completions_running_ = false;
  cv_.notify_all();  // Close() waits for the last completion
}

void FrontendConnection::PokeReceiverLocked() {
  if (receiver_poke_.valid()) (void)os::SignalEventFd(receiver_poke_.get());
}

void FrontendConnection::BreakLocked(const std::string& why) {
  if (broken_.empty()) broken_ = why;
  for (auto it = outstanding_.begin(); it != outstanding_.end();) {
    const auto next = std::next(it);
    if (!it->second.done) {
      CompleteLocked(it, Status::Unavailable("pvdrm connection broken: " + broken_));
    }
    it = next;
  }
  if (caller_polling_ && poller_poke_.valid()) (void)os::SignalEventFd(poller_poke_.get());
  cv_.notify_all();
}

void FrontendConnection::BlameBackendLocked(const std::string& why) {
  BreakLocked(why);
  // Ask the backend to let go (it unmaps, goes Closing); Close() finishes the handshake.
  (void)store_->Write(Key(front_dir_, kErrorKey), why.substr(0, 256));
  (void)WriteState(*store_, front_dir_, XenbusStateClosing);
}

void FrontendConnection::DrainResponsesLocked() {
  if (!broken_.empty()) return;
  for (;;) {
    const RING_IDX rp = os::LoadShared(front_.sring->rsp_prod);
    // The backend may answer only what we asked: between rsp_cons and req_prod_pvt.
    if (RING_RESPONSE_PROD_OVERFLOW(&front_, rp) ||
        rp - front_.rsp_cons > front_.req_prod_pvt - front_.rsp_cons) {
      BlameBackendLocked("backend's response producer " + std::to_string(rp) +
                         " is past our requests (consumed " + std::to_string(front_.rsp_cons) +
                         ", sent " + std::to_string(front_.req_prod_pvt) + ")");
      return;
    }
    while (front_.rsp_cons != rp) {
      pvdrm_response copy;
      RING_COPY_RESPONSE(&front_, front_.rsp_cons, &copy);
      ++front_.rsp_cons;
      auto it = outstanding_.find(copy.id);
      if (it == outstanding_.end() || it->second.done) {
        BlameBackendLocked("backend answered request " + std::to_string(copy.id) +
                           ", which is not outstanding");
        return;
      }
      Result<Response> response = DecodeResponse(copy, it->second.op);
      if (!response.ok()) {
        BlameBackendLocked(response.status().ToString());
        return;
      }
      CompleteLocked(it, std::move(response));
    }
    // RING_FINAL_CHECK_FOR_RESPONSES, batched (as ring.h invites): ask to be woken by the
    // response a synchronous caller waits for, or, with only posted requests out, when half of
    // them are answered — not by every posted pushbuffer's response.
    const RING_IDX in_flight = front_.req_prod_pvt - front_.rsp_cons;
    RING_IDX ahead = 1;
    if (in_flight > 0) {
      ahead = std::max<RING_IDX>(1, in_flight / 2);
      for (const auto& [id, call] : outstanding_) {
        if (call.posted == nullptr && !call.done) {
          ahead = std::min<RING_IDX>(ahead, call.index - front_.rsp_cons + 1);
        }
      }
    }
    front_.sring->rsp_event = front_.rsp_cons + ahead;
    xen_mb();
    const int more = RING_HAS_UNCONSUMED_RESPONSES(&front_);
    if (!more) break;
  }
  cv_.notify_all();
}

void FrontendConnection::ReactToBackendLocked() {
  Result<XenbusState> state = ReadState(*store_, back_dir_);
  const bool gone = !state.ok() || Gone(*state);
  if (!gone) return;
  BreakLocked("backend " + back_dir_ + " is " +
              (state.ok() ? std::string(StateName(*state)) : state.status().ToString()));
  // The backend let go of the ring (it goes Closing only after unmapping it): we are Closed.
  if (!wrote_closed_) {
    (void)WriteState(*store_, front_dir_, XenbusStateClosed);
    wrote_closed_ = true;
  }
}

void FrontendConnection::Receive() {
  for (;;) {
    bool watch_channel = false;
    {
      std::lock_guard lock(mu_);
      watch_channel = ReceiverWatchesChannelLocked();
    }
    pollfd fds[4] = {{stop_.get(), POLLIN, 0},
                     {watch_channel ? channels_->fd() : -1, POLLIN, 0},
                     {store_->watch_fd(), POLLIN, 0},
                     {receiver_poke_.get(), POLLIN, 0}};
    if (::poll(fds, 4, -1) < 0) {
      if (errno == EINTR) continue;
      {
        std::lock_guard lock(mu_);
        BreakLocked("poll: " + std::to_string(errno));
      }
      RunCompleted();
      return;
    }
    if (fds[0].revents & POLLIN) return;
    if (fds[3].revents) os::DrainEventFd(receiver_poke_.get());
    bool store_failed = false;
    {
      std::lock_guard lock(mu_);
      if (fds[2].revents) {
        bool event = false;
        for (;;) {
          Result<std::optional<hv::WatchEvent>> next = store_->PollWatch();
          if (!next.ok()) {
            BreakLocked(next.status().WithContext("store").ToString());
            store_failed = true;
            break;
          }
          if (!*next) break;
          event = true;
        }
        if (event) ReactToBackendLocked();
      }
      if (fds[1].revents) ClearEventsLocked();
      // Responses are checked on every wakeup while we watch: a notification suppressed by
      // rsp_event still finds its responses here.
      if (watch_channel) DrainResponsesLocked();
    }
    RunCompleted();
    if (store_failed) return;
  }
}

Status FrontendConnection::Close() {
  {
    std::unique_lock lock(mu_);
    if (closed_) return Status::Ok();
    closed_ = true;
    cv_.notify_all();
    // Outstanding calls finish (or the backend breaks) first.
    cv_.wait_for(lock, options_.close_timeout, [&] { return outstanding_.empty(); });
  }
  if (receiver_.joinable()) {
    (void)os::SignalEventFd(stop_.get());
    receiver_.join();
  }
  std::unique_lock lock(mu_);
  BreakLocked("closed");
  Status result;
  if (!wrote_closed_) {
    result = WriteState(*store_, front_dir_, XenbusStateClosing);
    const auto deadline = std::chrono::steady_clock::now() + options_.close_timeout;
    lock.unlock();
    Result<XenbusState> closed = WaitForBackend(Gone, deadline);
    lock.lock();
    if (!closed.ok() && closed.status().code() != StatusCode::kUnavailable) {
      // A backend that does not let go keeps a mapping of a page we revoke below; the grant layer
      // then never reuses that page (local: quarantined).
      if (result.ok()) result = closed.status();
    }
    Status wrote = WriteState(*store_, front_dir_, XenbusStateClosed);
    if (result.ok()) result = wrote;
    wrote_closed_ = true;
  }
  if (port_bound_) {
    Status unbound = channels_->Unbind(port_);
    if (result.ok()) result = unbound;
    port_bound_ = false;
  }
  ring_page_.reset();
  // Calls still waiting (close_timeout passed) were failed by BreakLocked; wait for them to leave.
  cv_.wait(lock, [&] { return outstanding_.empty(); });
  lock.unlock();
  RunCompleted();
  // Another thread may still be running the last completions (unless that thread is this one,
  // closing from inside a completion).
  lock.lock();
  cv_.wait(lock, [&] {
    return !completions_running_ || completion_runner_ == std::this_thread::get_id();
  });
  return result;
}

}  // namespace gpuvm::pvdrm
