// The fast lane: an optional shared-memory path for the hot messages of the protocol (MMIO_READ,
// MMIO_WRITE and their replies), negotiated over the socket with FAST_LANE (docs/IPC.md). A unix
// socket round trip costs about twice an eventfd round trip on our machines, and every guest
// register access pays it; the lane makes the device model <-> aggregator leg as cheap as the guest
// <-> device model leg.
//
// Layout: one sealed 16 KiB memfd with two slots — requests (device model -> aggregator) at 0,
// replies (aggregator -> device model) at 8192 — each { u32 full, u32 length, length bytes of an
// encoded message }. Plus two eventfds, the doorbells. Sending: write bytes and length, then
// (release) full = 1, then ring the peer's doorbell. Receiving: see full (acquire), copy length and
// bytes out ONCE, mark the slot empty, then Decode the copy with the same strict codec as the
// socket — the peer can scribble on the page at any time, so nothing is read twice and nothing is
// trusted. One slot per direction is enough: the device model has at most one request outstanding.
//
// Polling flags: the last two cache lines of the page hold one u32 per side, "I am polling my
// incoming slot" (BeginPolling/EndPolling). While the receiver's flag is set the sender skips the
// doorbell (a system call and, for a sleeping peer, a wakeup). Dekker-style: the sender stores
// full, fences (seq_cst), reads the flag; the receiver clears the flag, fences, reads full once
// more before it blocks — so one of them sees the other and no message waits for a doorbell that
// never rings. A peer that scribbles on our flag only makes us ring (or not ring) its own doorbell.
//
// Threading: each side uses its end from one thread.
#ifndef GPUVM_IPC_FAST_LANE_H_
#define GPUVM_IPC_FAST_LANE_H_

#include <memory>
#include <optional>
#include <vector>

#include "base/os.h"
#include "ipc/protocol.h"

namespace gpuvm::ipc {

inline constexpr size_t kLaneBytes = 16384;
inline constexpr size_t kLaneReplySlot = 8192;
// The polling flags (u32 each): the device model's and the aggregator's.
inline constexpr size_t kLaneDeviceModelPolling = kLaneBytes - 128;
inline constexpr size_t kLaneAggregatorPolling = kLaneBytes - 64;

class FastLane {
 public:
  enum class Side { kDeviceModel, kAggregator };

  // The device model makes the lane ...
  static Result<std::unique_ptr<FastLane>> Create();
  // ... and passes these with FAST_LANE: [memfd, aggregator's doorbell, device model's doorbell].
  std::vector<int> fds() const;
  // The aggregator adopts them (checking the memfd's size and seals).
  static Result<std::unique_ptr<FastLane>> Adopt(std::vector<os::UniqueFd> fds);

  // Puts `message` in `from`'s outgoing slot and rings the other side. ResourceExhausted when the
  // slot is still full (the peer has not taken the previous message: a protocol violation by us, or
  // a peer that stopped).
  Status Send(Side from, const Message& message);
  // The message waiting in `at`'s incoming slot, or nullopt. DataLoss for a malformed one.
  Result<std::optional<Message>> TryReceive(Side at);
  // Between these, `at` polls its incoming slot without waiting, and the peer's Send does not ring
  // its doorbell. After EndPolling, TryReceive once more before Wait.
  void BeginPolling(Side at);
  void EndPolling(Side at);
  // Blocks up to timeout_ms (-1 forever) until `at`'s doorbell rings (edge-triggered: one system
  // call, and the doorbell is never read back). Spurious wakeups are possible.
  Status Wait(Side at, int timeout_ms);
  // The doorbell `at` waits on, for callers that register it (edge-triggered) in their own epoll
  // set.
  int doorbell(Side at) const;

  // Tests only: puts raw bytes (up to a slot's worth, any length field) in `from`'s slot, as a
  // hostile peer could, and rings the other side.
  Status SendRawForTesting(Side from, std::span<const uint8_t> bytes, uint32_t length_field);

 private:
  FastLane() = default;
  Status Init();

  os::UniqueFd memory_;
  os::UniqueFd to_aggregator_;
  os::UniqueFd to_device_model_;
  os::SharedMapping page_;
  os::UniqueFd wait_device_model_;  // edge-triggered epoll over to_device_model_
  os::UniqueFd wait_aggregator_;    // edge-triggered epoll over to_aggregator_
};

}  // namespace gpuvm::ipc

#endif  // GPUVM_IPC_FAST_LANE_H_
