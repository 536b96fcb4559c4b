// One device model's session with the aggregator: the protocol of docs/IPC.md as a state machine,
// independent of sockets (the server moves the bytes; the fuzz target and the tests drive it
// directly).
//
//   await HELLO --HELLO--> await AUTH --AUTH, a valid token--> await VM_CONFIG
//     --VM_CONFIG of the token's domain, admitted--> active --TEARDOWN--> closed
//
// Authentication (docs/SECURITY.md): AUTH carries the one-time token the aggregator issued for
// one domain (Aggregator::vm_tokens()); nothing is charged to the device model before it — no VM
// control block, channel or VRAM — and VM_CONFIG must name the token's domain. A missing, wrong,
// used or expired token, or VM_CONFIG before AUTH, is PermissionDenied and closes the session.
// The session is `established` once its guest memory is attached (GUEST_MEMORY): the server keeps
// its handshake deadline until then, so a device model that was admitted and went silent does not
// hold its channels and VRAM.
//
// In `active`: GUEST_MEMORY (once), FAST_LANE (once), MMIO_READ / MMIO_WRITE, MMIO_WRITE_BLOCK /
// MMIO_READ_BLOCK and MMIO_WRITE_FILL (on the socket or the lane), PING at any time. Every message
// is untrusted: the codec has checked the wire rules; the session checks the conversation (what may
// come when, what was already given) and the virtual GPU the VM-specific bounds. What each
// violation costs:
//   - an MMIO access the VM may not make (past its BAR, unknown vCPU): ERROR with the request's
//     seq, counted; the session goes on (the device model answers the guest all-ones);
//   - a request out of turn, a refused VM, unusable memory or lane: ERROR with its seq, then close;
//   - something only the aggregator may send (replies, INTERRUPT, BAR_MAP, ...): fatal ERROR
//     (seq 0), then close. BAR_MAP_ACK and ERROR are accepted only as answers to our own BAR
//     remap requests (TakeBarRequests), in the order they were sent.
// Closing the session removes the VM (pt: the GPU is reset for the next owner).
//
// Threading: one owner thread (the server's).
#ifndef GPUVM_AGGREGATOR_SESSION_H_
#define GPUVM_AGGREGATOR_SESSION_H_

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "aggregator/aggregator.h"
#include "base/os.h"
#include "ipc/fast_lane.h"
#include "ipc/protocol.h"

namespace gpuvm::aggregator {

class Session {
 public:
  enum class State { kAwaitHello, kAwaitAuth, kAwaitConfig, kActive, kClosed };

  Session(Aggregator* aggregator, std::string peer) : aggregator_(aggregator), peer_(peer) {}
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  struct Output {
    std::vector<ipc::Message> send;  // to the device model's socket, in order
    bool close = false;              // after sending
    bool lane_opened = false;        // lane() now exists: watch its doorbell
  };
  // A message from the socket (with the descriptors that came with it).
  Output OnMessage(const ipc::Message& message, std::vector<os::UniqueFd> fds);
  // A message from the fast lane: the reply to put back into the lane, or the reason the session
  // must close (anything but MMIO in the lane breaks the protocol).
  Result<ipc::Message> OnLaneMessage(const ipc::Message& message);
  // The socket broke or the lane carried garbage: remove the VM now.
  void Close(std::string reason);

  // BAR remap: BAR_MAP (with the descriptor to pass, borrowed) and BAR_UNMAP requests the VM's
  // virtual GPU wants sent now; their answers come back through OnMessage.
  struct Request {
    ipc::Message message;
    int fd = -1;
  };
  std::vector<Request> TakeBarRequests();
  // An INTERRUPT to send when the VM's line differs from what the device model last heard.
  std::optional<ipc::Message> InterruptUpdate();
  // Our own TEARDOWN (the aggregator is exiting); the session is closed after it.
  ipc::Message Teardown(ipc::TeardownReason reason);

  State state() const { return state_; }
  // AUTH succeeded (and the session has not closed).
  bool authenticated() const { return state_ == State::kAwaitConfig || state_ == State::kActive; }
  // Admitted and its guest memory attached: the handshake is over.
  bool established() const { return state_ == State::kActive && guest_memory_; }
  // How far the handshake got: 0 before HELLO, 1 before AUTH, 2 before VM_CONFIG, 3 before
  // GUEST_MEMORY, 4 established (and after the session closed).
  int handshake_step() const {
    if (state_ == State::kActive) return guest_memory_ ? 4 : 3;
    return state_ == State::kClosed ? 4 : static_cast<int>(state_);
  }
  uint16_t version() const { return version_; }
  ipc::FastLane* lane() const { return lane_.get(); }
  const VmControlBlock* vm() const { return vm_; }
  const std::string& peer() const { return peer_; }
  // Why the session closed (for the log), once it has.
  const std::string& close_reason() const { return close_reason_; }
  // The status of removing the VM (pt: of resetting the GPU).
  const Status& teardown_status() const { return teardown_status_; }
  // Who the VM was and what it did, kept when the session closes (for the log).
  struct Summary {
    bool had_vm = false;
    std::string vm;          // VmControlBlock::Describe()
    std::string log_fields;  // VmControlBlock::LogFields()
    VmCounters counters;
    std::string detail;        // VirtualGpu::DescribeCounters() (fv: traps, scans, shadow entries)
    RefusalCounts refusals{};  // VmControlBlock::refusals()
  };
  const Summary& summary() const { return summary_; }

 private:
  // MMIO_READ / MMIO_WRITE, the block messages and the fill.
  bool IsMmio(const ipc::Body& body) const;
  // An MMIO request's answer; a refused access is counted (VmCounters::refused).
  Result<ipc::Body> Mmio(const ipc::Body& request);
  Result<ipc::Body> MmioAccess(const ipc::Body& request);
  // InvalidArgument for a vCPU the VM does not have.
  Status CheckVcpu(uint32_t vcpu) const;
  void Fail(Output& out, uint32_t seq, const Status& status, bool fatal);

  Aggregator* const aggregator_;
  const std::string peer_;
  State state_ = State::kAwaitHello;
  uint16_t version_ = 0;          // negotiated in HELLO
  uint16_t domid_ = 0;            // the domain AUTH's token was issued for
  bool guest_memory_ = false;     // GUEST_MEMORY attached
  VmControlBlock* vm_ = nullptr;  // owned by the aggregator while state_ == kActive
  std::unique_ptr<ipc::FastLane> lane_;
  bool interrupt_sent_ = false;
  uint32_t next_seq_ = 1;
  std::deque<std::pair<uint32_t, bool>> bar_requests_;  // (seq, is a map) sent, not yet answered
  std::string close_reason_;
  Status teardown_status_;
  Summary summary_;
};

}  // namespace gpuvm::aggregator

#endif  // GPUVM_AGGREGATOR_SESSION_H_
