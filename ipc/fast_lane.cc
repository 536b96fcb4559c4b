#include "ipc/fast_lane.h"

#include <sys/epoll.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "ipc/codec.h"

namespace gpuvm::ipc {
namespace {

using os::LoadShared;
using os::StoreShared;

struct SlotHeader {
  uint32_t full;
  uint32_t length;
};
constexpr size_t kSlotData = sizeof(SlotHeader);
static_assert(kSlotData + kMaxMessageSize <= kLaneReplySlot, "a message fits a slot");
static_assert(kLaneReplySlot + kSlotData + kMaxMessageSize <= kLaneDeviceModelPolling,
              "the polling flags lie past the reply slot");

size_t PollingFlag(FastLane::Side at) {
  return at == FastLane::Side::kDeviceModel ? kLaneDeviceModelPolling : kLaneAggregatorPolling;
}
FastLane::Side Peer(FastLane::Side side) {
  return side == FastLane::Side::kDeviceModel ? FastLane::Side::kAggregator
                                              : FastLane::Side::kDeviceModel;
}

size_t OutgoingSlot(FastLane::Side from) {
  return from == FastLane::Side::kDeviceModel ? 0 : kLaneReplySlot;
}
size_t IncomingSlot(FastLane::Side at) {
  return at == FastLane::Side::kDeviceModel ? kLaneReplySlot : 0;
}

}  // namespace

Result<std::unique_ptr<FastLane>> FastLane::Create() {
  std::unique_ptr<FastLane> lane(new FastLane());
  GPUVM_ASSIGN_OR_RETURN(lane->memory_, os::CreateSealedMemfd("gpuvm-fast-lane", kLaneBytes));
  GPUVM_ASSIGN_OR_RETURN(lane->to_aggregator_, os::CreateEventFd());
  GPUVM_ASSIGN_OR_RETURN(lane->to_device_model_, os::CreateEventFd());
  GPUVM_RETURN_IF_ERROR(lane->Init());
  return lane;
}

Result<std::unique_ptr<FastLane>> FastLane::Adopt(std::vector<os::UniqueFd> fds) {
  if (fds.size() != 3) return Status::InvalidArgument("a fast lane is three descriptors");
  GPUVM_RETURN_IF_ERROR(os::CheckSealedMemfd(fds[0].get(), kLaneBytes).WithContext("fast lane"));
  std::unique_ptr<FastLane> lane(new FastLane());
  lane->memory_ = std::move(fds[0]);
  lane->to_aggregator_ = std::move(fds[1]);
  lane->to_device_model_ = std::move(fds[2]);
  GPUVM_RETURN_IF_ERROR(lane->Init());
  return lane;
}

Status FastLane::Init() {
  GPUVM_ASSIGN_OR_RETURN(page_, os::SharedMapping::Map(memory_.get(), 0, kLaneBytes, true));
  for (auto [doorbell, wait] : {std::pair{to_device_model_.get(), &wait_device_model_},
                                std::pair{to_aggregator_.get(), &wait_aggregator_}}) {
    *wait = os::UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
    if (!wait->valid()) return Status::FromErrno(errno, "epoll_create1");
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;
    if (::epoll_ctl(wait->get(), EPOLL_CTL_ADD, doorbell, &ev) != 0) {
      return Status::FromErrno(errno, "epoll_ctl doorbell (not an eventfd?)");
    }
  }
  return Status::Ok();
}

std::vector<int> FastLane::fds() const {
  return {memory_.get(), to_aggregator_.get(), to_device_model_.get()};
}

int FastLane::doorbell(Side at) const {
  return at == Side::kDeviceModel ? to_device_model_.get() : to_aggregator_.get();
}

Status FastLane::Send(Side from, const Message& message) {
  GPUVM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, Encode(message));
  uint8_t* slot = page_.data() + OutgoingSlot(from);
  auto* header = reinterpret_cast<SlotHeader*>(slot);
  if (LoadShared(header->full) != 0) {
    return Status::ResourceExhausted(
        "fast lane slot still full: the peer has not taken the last message");
  }
  std::memcpy(slot + kSlotData, bytes.data(), bytes.size());
  StoreShared(header->length, static_cast<uint32_t>(bytes.size()), std::memory_order_relaxed);
  StoreShared(header->full, uint32_t{1});  // release: bytes and length first
  // The peer polls its slot: it will see `full` without a doorbell (see the header's Dekker note).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const auto* polling = reinterpret_cast<const uint32_t*>(page_.data() + PollingFlag(Peer(from)));
  if (LoadShared(*polling, std::memory_order_relaxed) != 0) return Status::Ok();
  return os::SignalEventFd(from == Side::kDeviceModel ? to_aggregator_.get()
                                                      : to_device_model_.get());
}

void FastLane::BeginPolling(Side at) {
  StoreShared(*reinterpret_cast<uint32_t*>(page_.data() + PollingFlag(at)), uint32_t{1},
              std::memory_order_relaxed);
  // Visible before the request this side sends next (its Send's release store of `full`).
}

void FastLane::EndPolling(Side at) {
  StoreShared(*reinterpret_cast<uint32_t*>(page_.data() + PollingFlag(at)), uint32_t{0},
              std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);  // before the caller's last TryReceive
}

Status FastLane::SendRawForTesting(Side from, std::span<const uint8_t> bytes,
                                   uint32_t length_field) {
  uint8_t* slot = page_.data() + OutgoingSlot(from);
  auto* header = reinterpret_cast<SlotHeader*>(slot);
  std::memcpy(slot + kSlotData, bytes.data(), std::min(bytes.size(), kLaneReplySlot - kSlotData));
  StoreShared(header->length, length_field, std::memory_order_relaxed);
  StoreShared(header->full, uint32_t{1});
  return os::SignalEventFd(from == Side::kDeviceModel ? to_aggregator_.get()
                                                      : to_device_model_.get());
}

Result<std::optional<Message>> FastLane::TryReceive(Side at) {
  uint8_t* slot = page_.data() + IncomingSlot(at);
  auto* header = reinterpret_cast<SlotHeader*>(slot);
  if (LoadShared(header->full) == 0) return std::optional<Message>();
  const uint32_t length = LoadShared(header->length, std::memory_order_relaxed);
  uint8_t copy[kMaxMessageSize];
  const bool fits = length <= kMaxMessageSize;
  if (fits) std::memcpy(copy, slot + kSlotData, length);
  StoreShared(header->full, uint32_t{0});  // the slot is the sender's again; we only use the copy
  if (!fits) return Status::DataLoss("fast lane message longer than any valid one");
  GPUVM_ASSIGN_OR_RETURN(Message message, Decode(std::span<const uint8_t>(copy, length), 0));
  return std::optional<Message>(std::move(message));
}

Status FastLane::Wait(Side at, int timeout_ms) {
  epoll_event ev;
  const int fd = at == Side::kDeviceModel ? wait_device_model_.get() : wait_aggregator_.get();
  const int n = ::epoll_wait(fd, &ev, 1, timeout_ms);
  if (n < 0 && errno != EINTR) return Status::FromErrno(errno, "fast lane wait");
  if (n == 0) return Status::DeadlineExceeded("fast lane: no doorbell in time");
  return Status::Ok();
}

}  // namespace gpuvm::ipc
