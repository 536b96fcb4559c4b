// AggregatorConnection over the IPC protocol (docs/IPC.md): what gpuvm-dm uses. Connect() performs
// the handshake — HELLO and AUTH (the VM's one-time token, docs/SECURITY.md) back to back, then
// VM_CONFIG; each BAR access is then one request and one reply on the VM's connection. When the
// aggregator refuses us and hangs up (another user, a stale token, too many connections), the
// ERROR it sent before hanging up is what Connect returns, not the broken pipe; a connection
// pushed out before it authenticated (a flood of others, aggregator/server.h) is tried again,
// twice. Notifications and requests from the aggregator that arrive while we wait for a reply
// (INTERRUPT, BAR_MAP, TEARDOWN) are queued for PollEvent(); PING is answered on the spot.
//
// Waiting for a reply: as long as the aggregator's socket is open, we wait — a stopped or
// overloaded aggregator (SIGSTOP, a debugger, a starved host) is slow, not gone, and its VMs resume
// where they were when it comes back. The aggregator gone is its socket closing (the kernel closes
// it when the process dies), which every wait watches, the fast lane's included: that ends the wait
// at once (Unavailable). After `slow_note` without a reply `note` is told once (which request, for
// how long), and again when the reply comes. An optional hard `timeout` (gpuvm-dm
// --reply-timeout-ms) turns a long wait into DeadlineExceeded instead.
//
// A reply that does not come within that timeout, a closed socket, or anything that breaks the
// protocol, breaks the connection for good: every later call fails with that error and the device
// model shuts the VM's device down (a late reply could otherwise be taken for the answer to a newer
// request).
//
// Posted writes (docs/IPC.md, "Posted writes"): PostWrite sends an MMIO_WRITE and returns without
// its acknowledgement; the acknowledgement (or the aggregator's ERROR) is collected before the
// next request of any kind goes out, by Settle(), or by PollEvent when it arrives on the socket.
// So the wire still carries at most one request of ours at a time and nothing about it changes.
// While a posted write is outstanding on the fast lane our polling flag stays up (the aggregator
// need not ring a doorbell nobody waits on: the reply is picked up from the slot at the latest
// when we settle, which looks before it sleeps).
//
// Threading: one owner thread (the device model's).
#ifndef GPUVM_IPC_AGGREGATOR_CONNECTION_H_
#define GPUVM_IPC_AGGREGATOR_CONNECTION_H_

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/busy_poll.h"
#include "ipc/channel.h"
#include "ipc/fast_lane.h"
#include "ipc/protocol.h"
#include "qemu-device/aggregator_connection.h"

namespace gpuvm::dm {

struct IpcConnectOptions {
  std::string path = ipc::DefaultAggregatorSocketPath();
  ipc::VmConfig vm;
  // The VM's one-time token (required: Connect fails without one).
  std::optional<ipc::VmToken> token;
  // A reply not there after this long breaks the connection (DeadlineExceeded). Zero, the default:
  // wait while the aggregator's socket is open, however long.
  std::chrono::milliseconds timeout{0};
  // After this long without a reply, `note` hears of it (once per request), and again when the
  // reply comes; empty `note`: nobody is told.
  std::chrono::milliseconds slow_note = std::chrono::seconds(5);
  std::function<void(const std::string&)> note = nullptr;
  // Move MMIO to the shared-memory fast lane when the aggregator offers it (ipc/fast_lane.h).
  bool use_fast_lane = true;
  // On the fast lane, poll the reply slot for up to this long before sleeping on the doorbell (and
  // let the aggregator skip ringing it meanwhile); adaptive, see base/busy_poll.h.
  // Zero: always sleep.
  std::chrono::microseconds busy_poll = std::chrono::microseconds(10);
};

class IpcAggregatorConnection : public AggregatorConnection {
 public:
  // Unavailable when no aggregator listens; the aggregator's refusal (its ERROR) as that Status.
  static Result<std::unique_ptr<IpcAggregatorConnection>> Connect(const IpcConnectOptions& options);
  ~IpcAggregatorConnection() override;

  const ipc::VmAccept& accepted() const { return accepted_; }
  bool on_fast_lane() const { return lane_ != nullptr; }
  // Offers the guest's memory (a local VM's RAM memfd, or a Xen domain id the aggregator maps
  // itself).
  Status SendGuestMemory(ipc::GuestMemoryKind kind, uint64_t bytes, int memfd);
  // Ends the session politely (TEARDOWN, wait for TEARDOWN_ACK). The destructor does it too.
  Status Teardown(ipc::TeardownReason reason);

  Result<uint64_t> Read(BarIndex bar, uint64_t offset, uint32_t size, uint32_t vcpu) override;
  Status Write(BarIndex bar, uint64_t offset, uint32_t size, uint64_t value,
               uint32_t vcpu) override;
  Status PostWrite(BarIndex bar, uint64_t offset, uint32_t size, uint64_t value,
                   uint32_t vcpu) override;
  Status Settle() override;
  // Whether a posted write's acknowledgement is outstanding.
  bool write_posted() const { return posted_.has_value(); }
  // With protocol version 2: MMIO_WRITE_BLOCK / MMIO_READ_BLOCK, up to BlockBytes() each (480
  // bytes; a page from version 3).
  Status WriteElements(BarIndex bar, uint64_t offset, uint32_t size, std::span<const uint8_t> data,
                       uint32_t vcpu) override;
  Status ReadElements(BarIndex bar, uint64_t offset, uint32_t size, std::span<uint8_t> out,
                      uint32_t vcpu) override;
  // With protocol version 4: MMIO_WRITE_FILL, up to ipc::kMaxFillCount elements each.
  Status FillElements(BarIndex bar, uint64_t offset, uint32_t size, uint64_t value, uint32_t count,
                      uint32_t vcpu) override;
  // The protocol version the aggregator chose.
  uint16_t version() const { return version_; }
  int event_fd() const override { return epoll_.get(); }
  Result<std::optional<AggregatorEvent>> PollEvent() override;
  Status AnswerBarRequest(uint32_t seq, const Status& result) override;

 private:
  IpcAggregatorConnection(ipc::Channel channel, const IpcConnectOptions& options)
      : channel_(std::move(channel)),
        timeout_(options.timeout),
        slow_note_(options.slow_note),
        note_(options.note),
        busy_poll_(options.busy_poll) {}
  Status Init();
  // One attempt at the handshake; `authenticated` tells whether AUTH got through.
  static Result<std::unique_ptr<IpcAggregatorConnection>> ConnectOnce(
      const IpcConnectOptions& options, bool* authenticated);
  // Sends a request and returns its reply, queueing whatever else arrives meanwhile.
  Result<ipc::Message> Call(ipc::Body request, std::span<const int> fds = {});
  // Call's halves, for requests sent back to back; `what` names the request for note_.
  Result<uint32_t> SendRequest(ipc::Body request, std::span<const int> fds = {});
  Result<ipc::Message> AwaitReply(uint32_t seq, std::string_view what);
  // The peer hung up (`why`): what it said last, if it was an ERROR; else `why`.
  Status PeerGone(Status why);
  // An MMIO request through the fast lane: its reply comes back there too. LaneSend and LaneAwait
  // are its halves (a posted write's reply is awaited later).
  Result<ipc::Message> LaneCall(ipc::Body request);
  Result<uint32_t> LaneSend(const ipc::Body& request);
  Result<ipc::Message> LaneAwait(uint32_t seq, std::string_view what);
  // Collects the posted write's reply, if one is outstanding, into posted_result_.
  void SettlePosted();
  // The posted write's reply arrived (`reply`: the reply, or why none will come).
  void PostedAnswered(const Result<ipc::Message>& reply);
  // Handles a message that is not the reply being waited for. Breaks the connection on violations.
  Status Dispatch(ipc::Channel::Received received);
  Status Break(Status why);
  // One reply being waited for: how long to sleep next (-1: until something arrives), telling
  // note_ once when it gets slow; DeadlineExceeded (the connection broken) past timeout_.
  struct ReplyWait {
    std::string_view what;  // the request's type name
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    bool noted = false;
  };
  Result<int> NextWait(ReplyWait& wait);
  // The reply came: tells note_ if it had been told the wait was slow.
  void Answered(const ReplyWait& wait);
  // The most one block message carries in this session's protocol version.
  size_t BlockBytes() const {
    return version_ >= ipc::kPageBlockProtocolVersion ? ipc::kMaxBlockBytes
                                                      : ipc::kVersion2MaxBlockBytes;
  }
  uint32_t NextSeq();

  ipc::Channel channel_;
  std::unique_ptr<ipc::FastLane> lane_;
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds slow_note_;
  std::function<void(const std::string&)> note_;
  BusyPoll busy_poll_;  // the lane's reply slot
  uint32_t next_seq_ = 1;
  uint16_t version_ = ipc::kMinProtocolVersion;
  ipc::VmAccept accepted_;
  std::deque<AggregatorEvent> events_;
  os::UniqueFd queued_;  // signalled while events_ is not empty
  os::UniqueFd epoll_;   // socket + queued_
  // While a lane call waits: our doorbell (edge-triggered) and the socket (the aggregator's
  // notifications, and its end: a closed socket).
  os::UniqueFd lane_wait_;
  Status broken_;
  bool torn_down_ = false;
  bool lane_polling_ = false;  // our lane flag is up
  // The posted write whose reply has not been collected: its seq and whether it went by the lane.
  struct Posted {
    uint32_t seq = 0;
    bool on_lane = false;
  };
  std::optional<Posted> posted_;
  std::map<uint32_t, os::UniqueFd> bar_memory_;  // BAR_MAP descriptors by seq, until answered
};

}  // namespace gpuvm::dm

#endif  // GPUVM_IPC_AGGREGATOR_CONNECTION_H_
