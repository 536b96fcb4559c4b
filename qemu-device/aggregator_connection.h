// The device model's view of the GPU Access Aggregator: where decoded BAR accesses go, and where
// interrupts and mapping requests come from. gpuvm-dm talks to the real aggregator over the IPC
// protocol (IpcAggregatorConnection, docs/IPC.md); tests use an in-process fake (testing/).
//
// Threading: one owner thread (the device model's).
#ifndef GPUVM_QEMU_DEVICE_AGGREGATOR_CONNECTION_H_
#define GPUVM_QEMU_DEVICE_AGGREGATOR_CONNECTION_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <utility>
#include <variant>

#include "base/status.h"
#include "qemu-device/virtual_gpu.h"

namespace gpuvm::dm {

// The aggregator drives the device's interrupt line.
struct InterruptLevel {
  bool asserted = false;
};
// fv-bar-remap: map [offset, offset+length) of a BAR straight to memory the aggregator provides
// (`memory` from `backing_offset`: on the local backend a memfd of the software GPU's VRAM), so
// guest accesses there stop trapping; and the way back. Answered with AnswerBarRequest(seq,
// status).
struct BarMapRequest {
  uint32_t seq = 0;
  BarIndex bar = BarIndex::kBar1;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t backing_offset = 0;
  // The descriptor that came with BAR_MAP, -1 if none; the connection keeps it open until the
  // request is answered.
  int memory_fd = -1;
};
struct BarUnmapRequest {
  uint32_t seq = 0;
  BarIndex bar = BarIndex::kBar1;
  uint64_t offset = 0;
  uint64_t length = 0;
};
// The aggregator ends this VM's session (it is shutting down, or refuses the VM from now on).
struct TeardownRequest {
  uint32_t seq = 0;
};
using AggregatorEvent =
    std::variant<InterruptLevel, BarMapRequest, BarUnmapRequest, TeardownRequest>;

class AggregatorConnection {
 public:
  virtual ~AggregatorConnection() = default;

  // One decoded guest access: BAR, offset inside it, size 1/2/4/8 (BAR0: naturally aligned), and
  // the vCPU it came from. Blocks until the aggregator answered.
  virtual Result<uint64_t> Read(BarIndex bar, uint64_t offset, uint32_t size, uint32_t vcpu) = 0;
  virtual Status Write(BarIndex bar, uint64_t offset, uint32_t size, uint64_t value,
                       uint32_t vcpu) = 0;

  // A posted write (docs/IPC.md, "Posted writes"): sent now, but the device model need not wait
  // for its acknowledgement before it completes the guest's write. The acknowledgement is collected
  // by Settle(), which the caller must call before the VM's next access of any kind; every other
  // call that talks to the aggregator settles first too (so at most one request is ever
  // outstanding). What a posted write fails with is what Settle() returns. The default performs
  // the write at once (a connection that cannot post is simply never behind).
  virtual Status PostWrite(BarIndex bar, uint64_t offset, uint32_t size, uint64_t value,
                           uint32_t vcpu) {
    const Status written = Write(bar, offset, size, value, vcpu);
    if (posted_result_.ok()) posted_result_ = written;
    return Status::Ok();
  }
  // Waits for the acknowledgement of the posted write, if one is outstanding, and returns how the
  // posted writes since the last Settle() ended: Ok, or the first failure (the aggregator's
  // refusal, or the connection's break). Ok when nothing was posted.
  virtual Status Settle() { return std::exchange(posted_result_, Status::Ok()); }

  // data.size() / size consecutive elements from `offset` upwards (one rep transfer of the guest),
  // in order: exactly what that many Write/Read calls do, which is what these default to. A
  // connection that can move them in fewer messages overrides them. On failure, elements before
  // the failed one may have been performed.
  virtual Status WriteElements(BarIndex bar, uint64_t offset, uint32_t size,
                               std::span<const uint8_t> data, uint32_t vcpu) {
    for (size_t at = 0; at + size <= data.size(); at += size) {
      uint64_t value = 0;
      std::memcpy(&value, data.data() + at, size);
      GPUVM_RETURN_IF_ERROR(Write(bar, offset + at, size, value, vcpu));
    }
    return Status::Ok();
  }
  virtual Status ReadElements(BarIndex bar, uint64_t offset, uint32_t size, std::span<uint8_t> out,
                              uint32_t vcpu) {
    for (size_t at = 0; at + size <= out.size(); at += size) {
      GPUVM_ASSIGN_OR_RETURN(uint64_t value, Read(bar, offset + at, size, vcpu));
      std::memcpy(out.data() + at, &value, size);
    }
    return Status::Ok();
  }

  // `count` elements of `size` bytes, each `value`, from `offset` upwards (a guest's rep stos):
  // what WriteElements does with that data, which is the default (a page of elements at a time). A
  // connection that can send the value once overrides it.
  virtual Status FillElements(BarIndex bar, uint64_t offset, uint32_t size, uint64_t value,
                              uint32_t count, uint32_t vcpu) {
    if (size == 0 || size > 8) return Status::InvalidArgument("element size must be 1 to 8");
    uint8_t page[4096];
    const uint64_t total = uint64_t{count} * size;
    const uint64_t chunk = std::min<uint64_t>(total, sizeof(page) / size * size);
    for (uint64_t at = 0; at < chunk; at += size) std::memcpy(page + at, &value, size);
    for (uint64_t done = 0; done < total; done += chunk) {
      const uint64_t n = std::min(chunk, total - done);
      GPUVM_RETURN_IF_ERROR(WriteElements(bar, offset + done, size, {page, n}, vcpu));
    }
    return Status::Ok();
  }

  // Polls readable when PollEvent() may have something; -1 when the connection never has events.
  virtual int event_fd() const = 0;
  virtual Result<std::optional<AggregatorEvent>> PollEvent() = 0;
  virtual Status AnswerBarRequest(uint32_t seq, const Status& result) = 0;

 protected:
  // The first failure of a posted write not yet returned by Settle().
  Status posted_result_;
};

}  // namespace gpuvm::dm

#endif  // GPUVM_QEMU_DEVICE_AGGREGATOR_CONNECTION_H_
