#include "hypervisor/xen_abi/ioreq_page.h"

#include <atomic>
#include <cassert>
#include <cstring>
#include <string>

namespace gpuvm::hv::xen_abi {
namespace {

constexpr uint8_t kStateMask = 0x0f;

uint8_t* SlotBytes(void* page, uint32_t vcpu) {
  return static_cast<uint8_t*>(page) + size_t{vcpu} * sizeof(ioreq_t);
}
const uint8_t* SlotBytes(const void* page, uint32_t vcpu) {
  return static_cast<const uint8_t*>(page) + size_t{vcpu} * sizeof(ioreq_t);
}

// Shared memory is only ever touched through these, so every access is a single load or store the
// compiler can neither tear, repeat nor elide.
uint64_t Load64(const uint8_t* p, std::memory_order order = std::memory_order_relaxed) {
  return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(reinterpret_cast<const uint64_t*>(p)))
      .load(order);
}
void Store64(uint8_t* p, uint64_t v, std::memory_order order = std::memory_order_relaxed) {
  std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(p)).store(v, order);
}
uint8_t Load8(const uint8_t* p, std::memory_order order) {
  return std::atomic_ref<uint8_t>(*const_cast<uint8_t*>(p)).load(order);
}
void Store8(uint8_t* p, uint8_t v, std::memory_order order) {
  std::atomic_ref<uint8_t>(*p).store(v, order);
}

// The state byte's flag bits (data_is_ptr, dir, df) with a new state nibble.
uint8_t WithState(uint8_t state_byte, uint8_t state) {
  return static_cast<uint8_t>((state_byte & ~kStateMask) | (state & kStateMask));
}

IoSpace SpaceOf(uint8_t type) {
  switch (type) {
    case IOREQ_TYPE_PIO:
      return IoSpace::kPort;
    case IOREQ_TYPE_COPY:
      return IoSpace::kMmio;
    case IOREQ_TYPE_PCI_CONFIG:
      return IoSpace::kPciConfig;
    case IOREQ_TYPE_TIMEOFFSET:
      return IoSpace::kTimeOffset;
    case IOREQ_TYPE_INVALIDATE:
      return IoSpace::kInvalidate;
    default:
      return IoSpace::kUnknown;
  }
}

uint8_t TypeOf(const IoRequest& r) {
  switch (r.space) {
    case IoSpace::kPort:
      return IOREQ_TYPE_PIO;
    case IoSpace::kMmio:
      return IOREQ_TYPE_COPY;
    case IoSpace::kPciConfig:
      return IOREQ_TYPE_PCI_CONFIG;
    case IoSpace::kTimeOffset:
      return IOREQ_TYPE_TIMEOFFSET;
    case IoSpace::kInvalidate:
      return IOREQ_TYPE_INVALIDATE;
    case IoSpace::kUnknown:
      return r.raw_type;
  }
  return r.raw_type;
}

}  // namespace

uint64_t PciConfigAddress(const Sbdf& sbdf, uint32_t offset) {
  return (uint64_t{sbdf.segment} << 48) | (uint64_t{sbdf.bus} << 40) |
         (uint64_t{sbdf.device & 0x1fu} << 35) | (uint64_t{sbdf.function & 0x7u} << 32) | offset;
}

IoRequest FromXen(const ioreq_t& x, uint32_t vcpu) {
  IoRequest r;
  r.vcpu = vcpu;
  r.raw_type = x.type;
  r.space = SpaceOf(x.type);
  r.dir = x.dir == IOREQ_READ ? IoDirection::kRead : IoDirection::kWrite;
  r.data_is_ptr = x.data_is_ptr;
  r.df = x.df;
  r.data = x.data;
  r.size = x.size;
  r.count = x.count;
  if (r.space == IoSpace::kPciConfig) {
    r.sbdf.segment = static_cast<uint16_t>(x.addr >> 48);
    r.sbdf.bus = static_cast<uint8_t>(x.addr >> 40);
    r.sbdf.device = static_cast<uint8_t>((x.addr >> 35) & 0x1f);
    r.sbdf.function = static_cast<uint8_t>((x.addr >> 32) & 0x7);
    r.addr = x.addr & 0xffffffffu;
  } else {
    r.addr = x.addr;
  }
  return r;
}

ioreq_t ToXen(const IoRequest& r) {
  ioreq_t x;
  std::memset(&x, 0, sizeof(x));
  x.addr = r.space == IoSpace::kPciConfig ? PciConfigAddress(r.sbdf, static_cast<uint32_t>(r.addr))
                                          : r.addr;
  x.data = r.data;
  x.count = r.count;
  x.size = r.size;
  x.vp_eport = 0;
  x.state = STATE_IOREQ_NONE;
  x.data_is_ptr = r.data_is_ptr;
  x.dir = r.dir == IoDirection::kRead ? IOREQ_READ : IOREQ_WRITE;
  x.df = r.df;
  x.type = TypeOf(r);
  return x;
}

ioreq_t LoadSlot(const void* page, uint32_t vcpu) {
  const uint8_t* slot = SlotBytes(page, vcpu);
  uint64_t words[4];
  for (int i = 0; i < 4; ++i) words[i] = Load64(slot + 8 * i);
  ioreq_t copy;
  static_assert(sizeof(words) == sizeof(copy));
  std::memcpy(&copy, words, sizeof(copy));
  return copy;
}

uint8_t LoadState(const void* page, uint32_t vcpu) {
  return Load8(SlotBytes(page, vcpu) + kStateByteOffset, std::memory_order_acquire) & kStateMask;
}

IoreqServerSlots::IoreqServerSlots(void* page, uint32_t vcpus) : page_(page), vcpus_(vcpus) {
  assert(vcpus <= kMaxVcpusPerPage);
}

std::optional<ioreq_t> IoreqServerSlots::TryTake(uint32_t vcpu) {
  if (vcpu >= vcpus_) return std::nullopt;
  // Acquire: seeing READY means the requester's field writes are visible (Xen: rmb after the
  // check).
  if (LoadState(page_, vcpu) != STATE_IOREQ_READY) return std::nullopt;
  ioreq_t copy = LoadSlot(page_, vcpu);
  uint8_t* state_byte = SlotBytes(page_, vcpu) + kStateByteOffset;
  Store8(state_byte, WithState(Load8(state_byte, std::memory_order_relaxed), STATE_IOREQ_INPROCESS),
         std::memory_order_relaxed);
  return copy;
}

void IoreqServerSlots::Respond(uint32_t vcpu, std::optional<uint64_t> data) {
  if (vcpu >= vcpus_) return;
  uint8_t* slot = SlotBytes(page_, vcpu);
  if (data) Store64(slot + offsetof(ioreq_t, data), *data);
  // Release: the data is visible before IORESP_READY is (Xen: wmb before the state update).
  Store8(slot + kStateByteOffset,
         WithState(Load8(slot + kStateByteOffset, std::memory_order_relaxed), STATE_IORESP_READY),
         std::memory_order_release);
}

uint32_t IoreqServerSlots::event_port(uint32_t vcpu) const {
  if (vcpu >= vcpus_) return 0;
  return static_cast<uint32_t>(Load64(SlotBytes(page_, vcpu) + 24, std::memory_order_acquire));
}

IoreqRequesterSlots::IoreqRequesterSlots(void* page, uint32_t vcpus) : page_(page), vcpus_(vcpus) {
  assert(vcpus <= kMaxVcpusPerPage);
}

Status IoreqRequesterSlots::Submit(uint32_t vcpu, const ioreq_t& request) {
  if (vcpu >= vcpus_) return Status::OutOfRange("no vCPU " + std::to_string(vcpu));
  const uint8_t current = LoadState(page_, vcpu);
  if (current != STATE_IOREQ_NONE) {
    return Status::FailedPrecondition("vCPU " + std::to_string(vcpu) + " ioreq slot busy (state " +
                                      std::to_string(current) + ")");
  }
  ioreq_t filled = request;
  filled.state = STATE_IOREQ_NONE;
  uint64_t words[4];
  std::memcpy(words, &filled, sizeof(words));
  uint8_t* slot = SlotBytes(page_, vcpu);
  for (int i = 0; i < 4; ++i) Store64(slot + 8 * i, words[i]);
  const uint8_t state_byte = reinterpret_cast<const uint8_t*>(&filled)[kStateByteOffset];
  // Release: every field above is visible before READY is.
  Store8(slot + kStateByteOffset, WithState(state_byte, STATE_IOREQ_READY),
         std::memory_order_release);
  return Status::Ok();
}

std::optional<uint64_t> IoreqRequesterSlots::TryCollect(uint32_t vcpu) {
  if (vcpu >= vcpus_) return std::nullopt;
  if (LoadState(page_, vcpu) != STATE_IORESP_READY) return std::nullopt;
  uint8_t* slot = SlotBytes(page_, vcpu);
  const uint64_t data = Load64(slot + offsetof(ioreq_t, data));
  Store8(slot + kStateByteOffset,
         WithState(Load8(slot + kStateByteOffset, std::memory_order_relaxed), STATE_IOREQ_NONE),
         std::memory_order_release);
  return data;
}

void IoreqRequesterSlots::Reset(uint32_t vcpu) {
  if (vcpu >= vcpus_) return;
  uint8_t* state_byte = SlotBytes(page_, vcpu) + kStateByteOffset;
  Store8(state_byte, WithState(Load8(state_byte, std::memory_order_relaxed), STATE_IOREQ_NONE),
         std::memory_order_release);
}

namespace {

// read_pointer and write_pointer, loaded together: with HVM_IOREQSRV_BUFIOREQ_ATOMIC Xen rebases
// both in one 64-bit update, so separate loads could pair an old read pointer with a rebased write
// pointer.
struct RingPointers {
  uint32_t read;
  uint32_t write;
};
RingPointers LoadPointers(void* page) {
  const uint64_t both = Load64(static_cast<uint8_t*>(page), std::memory_order_acquire);
  return {static_cast<uint32_t>(both), static_cast<uint32_t>(both >> 32)};
}
std::atomic_ref<uint32_t> PointerRef(void* page, int index) {
  return std::atomic_ref<uint32_t>(*(reinterpret_cast<uint32_t*>(page) + index));
}
constexpr size_t kFirstSlotOffset = offsetof(buffered_iopage_t, buf_ioreq);

buf_ioreq_t LoadBufSlot(void* page, uint32_t index) {
  const uint64_t word = Load64(static_cast<uint8_t*>(page) + kFirstSlotOffset +
                               8 * size_t{index % IOREQ_BUFFER_SLOT_NUM});
  buf_ioreq_t slot;
  std::memcpy(&slot, &word, sizeof(slot));
  return slot;
}

}  // namespace

Result<std::optional<IoRequest>> BufferedIoreqRing::Pop() {
  const RingPointers p = LoadPointers(page_);
  const uint32_t outstanding = p.write - p.read;
  if (outstanding == 0) return std::optional<IoRequest>();
  if (outstanding > IOREQ_BUFFER_SLOT_NUM) {
    PointerRef(page_, 0).fetch_add(outstanding, std::memory_order_release);
    return Status::DataLoss("buffered ioreq ring claims " + std::to_string(outstanding) +
                            " entries; skipped them");
  }
  const buf_ioreq_t first = LoadBufSlot(page_, p.read);
  IoRequest r;
  r.buffered = true;
  r.vcpu = 0;
  r.raw_type = first.type;
  r.space = SpaceOf(first.type);
  r.dir = first.dir == IOREQ_READ ? IoDirection::kRead : IoDirection::kWrite;
  r.addr = first.addr;
  r.size = 1u << first.size;
  r.count = 1;
  r.data = first.data;
  uint32_t used = 1;
  if (r.size == 8) {
    if (outstanding < 2) {
      PointerRef(page_, 0).fetch_add(outstanding, std::memory_order_release);
      return Status::DataLoss("buffered 8-byte write without its second half; skipped it");
    }
    r.data |= uint64_t{LoadBufSlot(page_, p.read + 1).data} << 32;
    used = 2;
  }
  // An add, not a store: Xen may rebase the pointers concurrently (see LoadPointers).
  PointerRef(page_, 0).fetch_add(used, std::memory_order_release);
  return std::optional<IoRequest>(r);
}

IoreqDispatcher::IoreqDispatcher(void* slots_page, void* buffered_page, uint32_t vcpus)
    : slots_(slots_page, vcpus), in_flight_(vcpus, false) {
  if (buffered_page != nullptr) buffered_.emplace(buffered_page);
}

Result<std::optional<IoRequest>> IoreqDispatcher::Next() {
  if (buffered_) {
    auto posted = buffered_->Pop();
    if (!posted.ok() || posted->has_value()) return posted;
  }
  const uint32_t n = slots_.vcpus();
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t v = (next_vcpu_ + i) % n;
    if (in_flight_[v]) continue;
    std::optional<ioreq_t> copy = slots_.TryTake(v);
    if (!copy) continue;
    in_flight_[v] = true;
    next_vcpu_ = (v + 1) % n;
    return std::optional<IoRequest>(FromXen(*copy, v));
  }
  return std::optional<IoRequest>();
}

Result<bool> IoreqDispatcher::Complete(const IoRequest& request, uint64_t read_value) {
  if (request.buffered) return false;
  const uint32_t v = request.vcpu;
  if (v >= slots_.vcpus() || !in_flight_[v]) {
    return Status::FailedPrecondition("no request outstanding on vCPU " + std::to_string(v));
  }
  // Reads return data in the slot; writes and data_is_ptr requests leave it alone (for the latter
  // the server already copied the data to or from guest memory).
  const bool returns_data = request.dir == IoDirection::kRead && !request.data_is_ptr;
  slots_.Respond(v, returns_data ? std::optional<uint64_t>(read_value) : std::nullopt);
  in_flight_[v] = false;
  return true;
}

std::vector<uint32_t> IoreqDispatcher::AbandonInFlight() {
  std::vector<uint32_t> answered;
  for (uint32_t v = 0; v < slots_.vcpus(); ++v) {
    if (!in_flight_[v]) continue;
    slots_.Respond(v, ~uint64_t{0});
    in_flight_[v] = false;
    answered.push_back(v);
  }
  return answered;
}

Status PushBuffered(void* page, const IoRequest& write) {
  uint32_t size_code;
  switch (write.size) {
    case 1:
      size_code = 0;
      break;
    case 2:
      size_code = 1;
      break;
    case 4:
      size_code = 2;
      break;
    case 8:
      size_code = 3;
      break;
    default:
      return Status::InvalidArgument("buffered write size must be 1, 2, 4 or 8");
  }
  const uint32_t needed = write.size == 8 ? 2 : 1;
  const RingPointers p = LoadPointers(page);
  if (p.write - p.read + needed > IOREQ_BUFFER_SLOT_NUM) {
    return Status::ResourceExhausted("buffered ioreq ring full");
  }
  buf_ioreq_t slot;
  std::memset(&slot, 0, sizeof(slot));
  slot.type = TypeOf(write);
  slot.dir = write.dir == IoDirection::kRead ? IOREQ_READ : IOREQ_WRITE;
  slot.size = size_code & 3;
  slot.addr = write.addr & 0xfffff;
  slot.data = static_cast<uint32_t>(write.data);
  auto store_slot = [&](uint32_t index, const buf_ioreq_t& s) {
    uint64_t word;
    std::memcpy(&word, &s, sizeof(word));
    Store64(
        static_cast<uint8_t*>(page) + kFirstSlotOffset + 8 * size_t{index % IOREQ_BUFFER_SLOT_NUM},
        word);
  };
  store_slot(p.write, slot);
  if (needed == 2) {
    buf_ioreq_t high = slot;
    high.data = static_cast<uint32_t>(write.data >> 32);
    store_slot(p.write + 1, high);
  }
  PointerRef(page, 1).fetch_add(needed, std::memory_order_release);
  return Status::Ok();
}

}  // namespace gpuvm::hv::xen_abi
