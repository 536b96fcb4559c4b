#include "qemu-device/ipc_aggregator_connection.h"

#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

namespace gpuvm::dm {
namespace {

ipc::Bar ToWire(BarIndex bar) { return static_cast<ipc::Bar>(static_cast<uint8_t>(bar)); }
BarIndex FromWire(ipc::Bar bar) { return static_cast<BarIndex>(static_cast<uint8_t>(bar)); }

Status FromError(const ipc::Error& e) { return Status(e.code, "aggregator: " + e.text); }

// The aggregator's own requests: numbered in its own seq space, so never a reply to ours even when
// their seq is the one we wait for (docs/IPC.md: replies match by direction and seq).
bool IsAggregatorRequest(const ipc::Body& body) {
  return std::holds_alternative<ipc::BarMap>(body) || std::holds_alternative<ipc::BarUnmap>(body) ||
         std::holds_alternative<ipc::Teardown>(body) || std::holds_alternative<ipc::Ping>(body);
}

}  // namespace

Result<std::unique_ptr<IpcAggregatorConnection>> IpcAggregatorConnection::Connect(
    const IpcConnectOptions& options) {
  if (!options.token) {
    return Status::FailedPrecondition(
        "no VM token: the launcher or toolstack that starts a device model hands it its VM's "
        "token (gpuvm-dm --token-fd or --token-file, docs/SECURITY.md)");
  }
  for (int attempt = 1;; ++attempt) {
    bool authenticated = false;
    Result<std::unique_ptr<IpcAggregatorConnection>> c = ConnectOnce(options, &authenticated);
    // Pushed out before AUTH got through: the token was not used, so try again.
    if (c.ok() || authenticated || attempt == 3 ||
        c.status().code() != StatusCode::kResourceExhausted) {
      return c;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20 * attempt));
  }
}

Result<std::unique_ptr<IpcAggregatorConnection>> IpcAggregatorConnection::ConnectOnce(
    const IpcConnectOptions& options, bool* authenticated) {
  GPUVM_ASSIGN_OR_RETURN(ipc::Channel channel, ipc::Channel::Connect(options.path));
  std::unique_ptr<IpcAggregatorConnection> c(
      new IpcAggregatorConnection(std::move(channel), options));
  GPUVM_RETURN_IF_ERROR(c->Init());

  // HELLO and AUTH back to back: the aggregator finds both in one read of a fresh connection, so a
  // flood of idle connections has no time to push ours out (aggregator/server.h). Only version 5
  // has AUTH, and we offer no other.
  GPUVM_ASSIGN_OR_RETURN(
      const uint32_t hello_seq,
      c->SendRequest(ipc::Hello{ipc::kMinProtocolVersion, ipc::kProtocolVersion, "gpuvm-dm"}));
  Result<uint32_t> auth_seq = c->SendRequest(ipc::Auth{*options.token});
  GPUVM_ASSIGN_OR_RETURN(ipc::Message hello_reply, c->AwaitReply(hello_seq, "HELLO"));
  const auto* ack = std::get_if<ipc::HelloAck>(&hello_reply.body);
  if (ack == nullptr || ack->version < ipc::kMinProtocolVersion ||
      ack->version > ipc::kProtocolVersion) {
    return c->Break(Status::DataLoss("aggregator answered HELLO with something else"));
  }
  c->version_ = ack->version;
  if (!auth_seq.ok()) return auth_seq.status();
  GPUVM_ASSIGN_OR_RETURN(ipc::Message auth_reply, c->AwaitReply(*auth_seq, "AUTH"));
  if (!std::holds_alternative<ipc::AuthAck>(auth_reply.body)) {
    return c->Break(Status::DataLoss("aggregator answered AUTH with something else"));
  }
  *authenticated = true;
  ipc::VmConfig config = options.vm;
  if (config.variant == ipc::VgpuVariant::kPvDrm && c->version_ < ipc::kPvdrmProtocolVersion) {
    // An aggregator of version 6 knows no pvdrm: the same session as pv-multicall, listed so.
    config.variant = ipc::VgpuVariant::kPvMulticall;
  }
  GPUVM_ASSIGN_OR_RETURN(ipc::Message config_reply, c->Call(config));
  const auto* accept = std::get_if<ipc::VmAccept>(&config_reply.body);
  if (accept == nullptr) {
    return c->Break(Status::DataLoss("aggregator answered VM_CONFIG with something else"));
  }
  c->accepted_ = *accept;
  if (options.use_fast_lane && (accept->flags & ipc::kAcceptFastLane)) {
    GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<ipc::FastLane> lane, ipc::FastLane::Create());
    const std::vector<int> fds = lane->fds();
    GPUVM_ASSIGN_OR_RETURN(ipc::Message lane_reply, c->Call(ipc::FastLaneOffer{1}, fds));
    if (!std::holds_alternative<ipc::FastLaneAck>(lane_reply.body)) {
      return c->Break(Status::DataLoss("aggregator answered FAST_LANE with something else"));
    }
    c->lane_wait_ = os::UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
    if (!c->lane_wait_.valid()) return Status::FromErrno(errno, "epoll_create1");
    for (auto [fd, events] :
         {std::pair{lane->doorbell(ipc::FastLane::Side::kDeviceModel), uint32_t{EPOLLIN | EPOLLET}},
          std::pair{c->channel_.fd(), uint32_t{EPOLLIN}}}) {
      epoll_event ev{};
      ev.events = events;
      ev.data.fd = fd;
      if (::epoll_ctl(c->lane_wait_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
        return Status::FromErrno(errno, "epoll_ctl (fast lane wait)");
      }
    }
    c->lane_ = std::move(lane);
  }
  return c;
}

Status IpcAggregatorConnection::Init() {
  GPUVM_ASSIGN_OR_RETURN(queued_, os::CreateEventFd());
  epoll_ = os::UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_.valid()) return Status::FromErrno(errno, "epoll_create1");
  for (int fd : {channel_.fd(), queued_.get()}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      return Status::FromErrno(errno, "epoll_ctl");
    }
  }
  return Status::Ok();
}

IpcAggregatorConnection::~IpcAggregatorConnection() {
  if (broken_.ok() && !torn_down_) (void)Teardown(ipc::TeardownReason::kNormal);
}

uint32_t IpcAggregatorConnection::NextSeq() {
  const uint32_t seq = next_seq_++;
  if (next_seq_ == 0) next_seq_ = 1;  // 0 is reserved for notifications
  return seq;
}

Status IpcAggregatorConnection::Break(Status why) {
  if (broken_.ok()) broken_ = why;
  return broken_;
}

Result<int> IpcAggregatorConnection::NextWait(ReplyWait& wait) {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  const auto waited = duration_cast<milliseconds>(std::chrono::steady_clock::now() - wait.start);
  if (timeout_.count() > 0 && waited >= timeout_) {
    return Break(Status::DeadlineExceeded(
        "the aggregator did not answer " + std::string(wait.what) + " within " +
        std::to_string(timeout_.count()) + " ms (its socket is still open)"));
  }
  if (!wait.noted && note_ && waited >= slow_note_) {
    wait.noted = true;
    note_("the aggregator has not answered " + std::string(wait.what) + " for " +
          std::to_string(waited.count()) +
          " ms; its socket is open (stopped or overloaded?): waiting");
  }
  // Sleep until the next thing to do: the note, the deadline, or (neither) a message.
  milliseconds next = milliseconds::max();
  if (!wait.noted && note_) next = slow_note_ - waited;
  if (timeout_.count() > 0) next = std::min(next, timeout_ - waited);
  if (next == milliseconds::max()) return -1;
  return static_cast<int>(std::clamp<int64_t>(next.count(), 1, 1 << 30));
}

void IpcAggregatorConnection::Answered(const ReplyWait& wait) {
  if (!wait.noted || !note_) return;
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - wait.start);
  note_("the aggregator answered " + std::string(wait.what) + " after " +
        std::to_string(waited.count()) + " ms");
}

Status IpcAggregatorConnection::PeerGone(Status why) {
  if (why.code() == StatusCode::kUnavailable) {
    // What is still queued, in order; a refusal is the last thing the aggregator sends.
    for (int i = 0; i < 8; ++i) {
      Result<ipc::Channel::Received> last = channel_.ReceiveParting();
      if (!last.ok()) break;
      if (const auto* error = std::get_if<ipc::Error>(&last->message.body)) {
        return FromError(*error).WithContext("the aggregator hung up");
      }
    }
  }
  return why.WithContext("the aggregator's socket");
}

Result<ipc::Message> IpcAggregatorConnection::Call(ipc::Body request, std::span<const int> fds) {
  const std::string_view what = ipc::MessageTypeName(ipc::TypeOf(request));
  GPUVM_ASSIGN_OR_RETURN(const uint32_t seq, SendRequest(std::move(request), fds));
  return AwaitReply(seq, what);
}

Result<uint32_t> IpcAggregatorConnection::SendRequest(ipc::Body request, std::span<const int> fds) {
  SettlePosted();  // at most one request of ours outstanding
  GPUVM_RETURN_IF_ERROR(broken_);
  const uint32_t seq = NextSeq();
  const Status sent = channel_.Send(ipc::Message{seq, std::move(request)}, fds);
  if (!sent.ok()) {
    // Our own encoding refused it: the caller's mistake, not the connection's.
    if (sent.code() == StatusCode::kInvalidArgument) return sent;
    return Break(PeerGone(sent));
  }
  return seq;
}

Result<ipc::Message> IpcAggregatorConnection::AwaitReply(uint32_t seq, std::string_view what) {
  GPUVM_RETURN_IF_ERROR(broken_);
  ReplyWait wait{what};
  for (;;) {
    GPUVM_ASSIGN_OR_RETURN(const int wait_ms, NextWait(wait));
    Result<ipc::Channel::Received> received = channel_.Receive(wait_ms);
    if (!received.ok()) {
      if (received.status().code() == StatusCode::kDeadlineExceeded) continue;  // NextWait decides
      return Break(PeerGone(received.status()));
    }
    if (received->message.seq == seq && !IsAggregatorRequest(received->message.body)) {
      Answered(wait);
      if (!received->fds.empty()) return Break(Status::DataLoss("reply carried descriptors"));
      if (const auto* error = std::get_if<ipc::Error>(&received->message.body)) {
        return FromError(*error);
      }
      return std::move(received->message);
    }
    GPUVM_RETURN_IF_ERROR(Dispatch(std::move(*received)));
  }
}

Result<ipc::Message> IpcAggregatorConnection::LaneCall(ipc::Body request) {
  GPUVM_ASSIGN_OR_RETURN(const uint32_t seq, LaneSend(request));
  return LaneAwait(seq, ipc::MessageTypeName(ipc::TypeOf(request)));
}

Result<uint32_t> IpcAggregatorConnection::LaneSend(const ipc::Body& request) {
  SettlePosted();  // at most one request of ours outstanding
  GPUVM_RETURN_IF_ERROR(broken_);
  const uint32_t seq = NextSeq();
  constexpr auto kUs = ipc::FastLane::Side::kDeviceModel;
  // The flag is up before the request goes out, so the aggregator's reply skips our doorbell when
  // we are about to poll for it (LaneAwait).
  if (busy_poll_.enabled() && !lane_polling_) {
    lane_->BeginPolling(kUs);
    lane_polling_ = true;
  }
  const Status sent = lane_->Send(kUs, ipc::Message{seq, request});
  if (!sent.ok()) {
    if (lane_polling_) lane_->EndPolling(kUs);
    lane_polling_ = false;
    return sent.code() == StatusCode::kInvalidArgument ? sent : Break(sent);
  }
  return seq;
}

Result<ipc::Message> IpcAggregatorConnection::LaneAwait(uint32_t seq, std::string_view what) {
  GPUVM_RETURN_IF_ERROR(broken_);
  constexpr auto kUs = ipc::FastLane::Side::kDeviceModel;
  // Poll the reply slot for a few microseconds first (the aggregator's Send skips our doorbell
  // meanwhile); only then sleep.
  Result<std::optional<ipc::Message>> polled = std::optional<ipc::Message>();
  if (lane_polling_) {
    busy_poll_.Spin([&] {
      polled = lane_->TryReceive(kUs);
      return !polled.ok() || polled->has_value();
    });
    lane_->EndPolling(kUs);
    lane_polling_ = false;
  }
  std::optional<ReplyWait> wait;  // from the first sleep on
  for (;;) {
    Result<std::optional<ipc::Message>> reply =
        !polled.ok() || polled->has_value() ? std::move(polled) : lane_->TryReceive(kUs);
    polled = std::optional<ipc::Message>();
    if (!reply.ok()) return Break(reply.status());
    if (reply->has_value()) {
      ipc::Message& m = **reply;
      const bool answers = std::holds_alternative<ipc::MmioReadReply>(m.body) ||
                           std::holds_alternative<ipc::MmioWriteAck>(m.body) ||
                           std::holds_alternative<ipc::MmioReadBlockReply>(m.body) ||
                           std::holds_alternative<ipc::Error>(m.body);
      if (m.seq != seq || !answers) {
        return Break(Status::DataLoss("the fast lane carried something other than our reply"));
      }
      if (wait) Answered(*wait);
      if (const auto* error = std::get_if<ipc::Error>(&m.body)) return FromError(*error);
      return std::move(m);
    }
    if (!wait) wait = ReplyWait{what};
    GPUVM_ASSIGN_OR_RETURN(const int wait_ms, NextWait(*wait));
    // The doorbell, or the socket: a notification to queue, or the aggregator gone (closed).
    epoll_event events[2];
    const int n = ::epoll_wait(lane_wait_.get(), events, 2, wait_ms);
    if (n < 0 && errno != EINTR) return Break(Status::FromErrno(errno, "fast lane wait"));
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd != channel_.fd()) continue;
      Result<ipc::Channel::Received> received = channel_.Receive(0);
      if (!received.ok()) {
        if (received.status().code() == StatusCode::kDeadlineExceeded) continue;
        return Break(received.status().WithContext("the aggregator's socket"));
      }
      GPUVM_RETURN_IF_ERROR(Dispatch(std::move(*received)));
    }
  }
}

Status IpcAggregatorConnection::PostWrite(BarIndex bar, uint64_t offset, uint32_t size,
                                          uint64_t value, uint32_t vcpu) {
  ipc::Body request = ipc::MmioWrite{ToWire(bar), static_cast<uint8_t>(size), vcpu, offset, value};
  if (lane_) {
    GPUVM_ASSIGN_OR_RETURN(const uint32_t seq, LaneSend(request));
    // Keep the flag up until we settle: nobody waits on the doorbell meanwhile, and LaneAwait looks
    // at the slot before it sleeps (docs/IPC.md, "Fast lane").
    if (!lane_polling_) {
      lane_->BeginPolling(ipc::FastLane::Side::kDeviceModel);
      lane_polling_ = true;
    }
    posted_ = Posted{seq, true};
  } else {
    GPUVM_ASSIGN_OR_RETURN(const uint32_t seq, SendRequest(std::move(request)));
    posted_ = Posted{seq, false};
  }
  return Status::Ok();
}

void IpcAggregatorConnection::SettlePosted() {
  if (!posted_) return;
  const Posted posted = *posted_;
  posted_.reset();
  // The session is over (the aggregator sent TEARDOWN, or we did): the VM is gone, and an
  // aggregator that dropped it need not answer what was still in the lane. Nothing to wait for.
  if (torn_down_) return;
  PostedAnswered(posted.on_lane ? LaneAwait(posted.seq, "MMIO_WRITE (posted)")
                                : AwaitReply(posted.seq, "MMIO_WRITE (posted)"));
}

void IpcAggregatorConnection::PostedAnswered(const Result<ipc::Message>& reply) {
  Status result = reply.status();
  if (reply.ok() && !std::holds_alternative<ipc::MmioWriteAck>(reply->body)) {
    result = Break(Status::DataLoss("MMIO_WRITE answered with something else"));
  }
  if (posted_result_.ok()) posted_result_ = result;
}

Status IpcAggregatorConnection::Settle() {
  SettlePosted();
  return std::exchange(posted_result_, Status::Ok());
}

Status IpcAggregatorConnection::Dispatch(ipc::Channel::Received received) {
  const ipc::Message& m = received.message;
  auto queue = [this](AggregatorEvent event) {
    events_.push_back(std::move(event));
    return os::SignalEventFd(queued_.get());
  };
  if (const auto* irq = std::get_if<ipc::Interrupt>(&m.body)) {
    return queue(InterruptLevel{irq->asserted});
  }
  if (const auto* map = std::get_if<ipc::BarMap>(&m.body)) {
    // The codec guarantees exactly one descriptor; kept open until the request is answered.
    int memory_fd = -1;
    if (!received.fds.empty()) {
      memory_fd = received.fds[0].get();
      bar_memory_[m.seq] = std::move(received.fds[0]);
    }
    return queue(BarMapRequest{m.seq, FromWire(map->bar), map->offset, map->length,
                               map->backing_offset, memory_fd});
  }
  if (const auto* unmap = std::get_if<ipc::BarUnmap>(&m.body)) {
    return queue(BarUnmapRequest{m.seq, FromWire(unmap->bar), unmap->offset, unmap->length});
  }
  if (std::holds_alternative<ipc::Teardown>(m.body)) {
    (void)channel_.Send(ipc::Message{m.seq, ipc::TeardownAck{}});
    torn_down_ = true;
    return queue(TeardownRequest{m.seq});
  }
  if (const auto* ping = std::get_if<ipc::Ping>(&m.body)) {
    const Status sent = channel_.Send(ipc::Message{m.seq, ipc::Pong{ping->nonce}});
    return sent.ok() ? sent : Break(sent);
  }
  if (const auto* error = std::get_if<ipc::Error>(&m.body); error != nullptr && m.seq == 0) {
    return Break(FromError(*error).WithContext("fatal"));
  }
  return Break(Status::DataLoss(std::string("unexpected ") +
                                std::string(ipc::MessageTypeName(ipc::TypeOf(m.body))) +
                                " from the aggregator"));
}

Result<uint64_t> IpcAggregatorConnection::Read(BarIndex bar, uint64_t offset, uint32_t size,
                                               uint32_t vcpu) {
  ipc::Body request = ipc::MmioRead{ToWire(bar), static_cast<uint8_t>(size), vcpu, offset};
  GPUVM_ASSIGN_OR_RETURN(ipc::Message reply, lane_ ? LaneCall(request) : Call(request));
  const auto* value = std::get_if<ipc::MmioReadReply>(&reply.body);
  if (value == nullptr) return Break(Status::DataLoss("MMIO_READ answered with something else"));
  return value->value;
}

Status IpcAggregatorConnection::Write(BarIndex bar, uint64_t offset, uint32_t size, uint64_t value,
                                      uint32_t vcpu) {
  ipc::Body request = ipc::MmioWrite{ToWire(bar), static_cast<uint8_t>(size), vcpu, offset, value};
  GPUVM_ASSIGN_OR_RETURN(ipc::Message reply, lane_ ? LaneCall(request) : Call(request));
  if (!std::holds_alternative<ipc::MmioWriteAck>(reply.body)) {
    return Break(Status::DataLoss("MMIO_WRITE answered with something else"));
  }
  return Status::Ok();
}

Status IpcAggregatorConnection::WriteElements(BarIndex bar, uint64_t offset, uint32_t size,
                                              std::span<const uint8_t> data, uint32_t vcpu) {
  if (version_ < ipc::kBlockProtocolVersion || size == 0) {
    return AggregatorConnection::WriteElements(bar, offset, size, data, vcpu);
  }
  const size_t per_message = BlockBytes() / size * size;
  for (size_t at = 0; at + size <= data.size(); at += per_message) {
    const size_t bytes = std::min(per_message, data.size() / size * size - at);
    ipc::Body request =
        ipc::MmioWriteBlock{ToWire(bar),
                            static_cast<uint8_t>(size),
                            static_cast<uint16_t>(bytes / size),
                            vcpu,
                            offset + at,
                            std::vector<uint8_t>(data.begin() + at, data.begin() + at + bytes)};
    GPUVM_ASSIGN_OR_RETURN(ipc::Message reply, lane_ ? LaneCall(request) : Call(request));
    if (!std::holds_alternative<ipc::MmioWriteAck>(reply.body)) {
      return Break(Status::DataLoss("MMIO_WRITE_BLOCK answered with something else"));
    }
  }
  return Status::Ok();
}

Status IpcAggregatorConnection::FillElements(BarIndex bar, uint64_t offset, uint32_t size,
                                             uint64_t value, uint32_t count, uint32_t vcpu) {
  if (version_ < ipc::kFillProtocolVersion) {
    return AggregatorConnection::FillElements(bar, offset, size, value, count, vcpu);
  }
  const uint64_t mask = size >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * size)) - 1;
  for (uint64_t done = 0; done < count;) {
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(count - done, ipc::kMaxFillCount));
    ipc::Body request = ipc::MmioWriteFill{ToWire(bar), static_cast<uint8_t>(size), n,
                                           vcpu,        offset + done * size,       value & mask};
    GPUVM_ASSIGN_OR_RETURN(ipc::Message reply, lane_ ? LaneCall(request) : Call(request));
    if (!std::holds_alternative<ipc::MmioWriteAck>(reply.body)) {
      return Break(Status::DataLoss("MMIO_WRITE_FILL answered with something else"));
    }
    done += n;
  }
  return Status::Ok();
}

Status IpcAggregatorConnection::ReadElements(BarIndex bar, uint64_t offset, uint32_t size,
                                             std::span<uint8_t> out, uint32_t vcpu) {
  if (version_ < ipc::kBlockProtocolVersion || size == 0) {
    return AggregatorConnection::ReadElements(bar, offset, size, out, vcpu);
  }
  const size_t per_message = BlockBytes() / size * size;
  for (size_t at = 0; at + size <= out.size(); at += per_message) {
    const size_t bytes = std::min(per_message, out.size() / size * size - at);
    ipc::Body request = ipc::MmioReadBlock{ToWire(bar), static_cast<uint8_t>(size),
                                           static_cast<uint16_t>(bytes / size), vcpu, offset + at};
    GPUVM_ASSIGN_OR_RETURN(ipc::Message reply, lane_ ? LaneCall(request) : Call(request));
    const auto* data = std::get_if<ipc::MmioReadBlockReply>(&reply.body);
    if (data == nullptr || data->data.size() != bytes) {
      return Break(Status::DataLoss("MMIO_READ_BLOCK answered with something else"));
    }
    std::memcpy(out.data() + at, data->data.data(), bytes);
  }
  return Status::Ok();
}

Result<std::optional<AggregatorEvent>> IpcAggregatorConnection::PollEvent() {
  GPUVM_RETURN_IF_ERROR(broken_);
  while (events_.empty()) {
    Result<ipc::Channel::Received> received = channel_.Receive(0);
    if (!received.ok()) {
      if (received.status().code() == StatusCode::kDeadlineExceeded) {
        return std::optional<AggregatorEvent>();
      }
      return Break(received.status().WithContext("the aggregator's socket"));
    }
    if (posted_ && !posted_->on_lane && received->message.seq == posted_->seq &&
        !IsAggregatorRequest(received->message.body)) {
      // The posted write's acknowledgement (or refusal), on the socket: collected now, reported
      // by the next Settle().
      posted_.reset();
      Result<ipc::Message> reply = std::move(received->message);
      if (!received->fds.empty()) {
        reply = Break(Status::DataLoss("reply carried descriptors"));
      } else if (const auto* error = std::get_if<ipc::Error>(&reply->body)) {
        reply = FromError(*error);
      }
      PostedAnswered(reply);
      continue;
    }
    if (received->message.seq != 0 && !IsAggregatorRequest(received->message.body)) {
      return Break(Status::DataLoss("a reply nobody asked for"));
    }
    GPUVM_RETURN_IF_ERROR(Dispatch(std::move(*received)));
  }
  AggregatorEvent event = std::move(events_.front());
  events_.pop_front();
  if (events_.empty()) os::DrainEventFd(queued_.get());
  return std::optional<AggregatorEvent>(std::move(event));
}

Status IpcAggregatorConnection::AnswerBarRequest(uint32_t seq, const Status& result) {
  bar_memory_.erase(seq);  // mapped by now, or refused
  GPUVM_RETURN_IF_ERROR(broken_);
  ipc::Message answer{seq, ipc::BarMapAck{}};
  if (!result.ok())
    answer.body = ipc::Error{result.code(), result.message().substr(0, ipc::kMaxErrorText)};
  const Status sent = channel_.Send(answer);
  return sent.ok() ? sent : Break(sent);
}

Status IpcAggregatorConnection::SendGuestMemory(ipc::GuestMemoryKind kind, uint64_t bytes,
                                                int memfd) {
  const int fds[1] = {memfd};
  const bool with_fd = kind == ipc::GuestMemoryKind::kLocalMemfd;
  GPUVM_ASSIGN_OR_RETURN(ipc::Message reply,
                         Call(ipc::GuestMemory{kind, bytes},
                              with_fd ? std::span<const int>(fds) : std::span<const int>()));
  if (!std::holds_alternative<ipc::GuestMemoryAck>(reply.body)) {
    return Break(Status::DataLoss("GUEST_MEMORY answered with something else"));
  }
  return Status::Ok();
}

Status IpcAggregatorConnection::Teardown(ipc::TeardownReason reason) {
  if (torn_down_) return Status::Ok();
  SettlePosted();  // before torn_down_, which would skip it
  torn_down_ = true;
  Result<ipc::Message> reply = Call(ipc::Teardown{reason});
  if (!reply.ok()) return reply.status();
  if (!std::holds_alternative<ipc::TeardownAck>(reply->body)) {
    return Break(Status::DataLoss("TEARDOWN answered with something else"));
  }
  return Status::Ok();
}

}  // namespace gpuvm::dm
