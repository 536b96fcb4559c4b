// libFuzzer target: the aggregator's handling of what device models send — one Session (the
// protocol state machine) over a pass-through virtual GPU on the software GPU, fed a sequence of
// raw packets through the same codec the server uses, on the socket and on the fast lane, with real
// descriptors where a message takes them. Checks: no crash, no UB, no leak (ASan/UBSan), every
// reply encodable, and when the session ends the VM is gone.
//
// Input: records of [u8 op][u16 length LE][length bytes]:
//   op % 4 == 0  a socket packet without descriptors
//   op % 4 == 1  a socket packet with the descriptors its type wants (a sealed memfd of the size
//                GUEST_MEMORY announces — or of a wrong size when op & 4 — or a fresh fast lane)
//   op % 4 == 2  bytes put into the fast lane's request slot (length field = length, or garbage
//                when op & 4), then the lane drained as the server does
//   op % 4 == 3  the GPU runs a few time slices; the interrupt level is forwarded
// Before each input the aggregator holds one VM token, 32 bytes of 0x5a for domain 1 (what the
// seeds' AUTH carries), so inputs reach past authentication; a guessed token, another domain's
// VM_CONFIG or MMIO before AUTH are part of what is fuzzed.
// Seeds: aggregator/fuzz/aggregator_session_fuzz/ (make_seeds.py).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "aggregator/aggregator.h"
#include "aggregator/session.h"
#include "aggregator/sim_gpu.h"
#include "ipc/codec.h"
#include "ipc/fast_lane.h"

namespace {

using gpuvm::aggregator::Aggregator;
using gpuvm::aggregator::Session;
using gpuvm::aggregator::SimGpu;
using gpuvm::os::UniqueFd;

Aggregator* TheAggregator(SimGpu** sim) {
  static SimGpu* sim_gpu = nullptr;
  static Aggregator* aggregator = [] {
    gpuvm::aggregator::SimGpuOptions o;
    o.vram_bytes = 64ull << 20;
    o.threaded = false;
    o.compute_engine = false;
    auto gpu = SimGpu::Create(o);
    if (!gpu.ok()) std::abort();
    sim_gpu = gpu->get();
    auto a = Aggregator::Create(std::move(*gpu));
    if (!a.ok()) std::abort();
    return a->release();
  }();
  *sim = sim_gpu;
  return aggregator;
}

void CheckEncodable(const gpuvm::ipc::Message& m) {
  if (!gpuvm::ipc::Encode(m).ok()) std::abort();  // we must never produce what we would refuse
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  SimGpu* sim = nullptr;
  Aggregator* aggregator = TheAggregator(&sim);
  std::unique_ptr<gpuvm::ipc::FastLane> dm_lane;  // the device model's end of an offered lane
  gpuvm::ipc::VmToken token;
  token.fill(0x5a);
  aggregator->vm_tokens().Clear();
  if (!aggregator->vm_tokens().Add(token, 1).ok()) std::abort();
  {
    Session session(aggregator, "fuzz");
    size_t at = 0;
    int records = 0;
    while (at + 3 <= size && records++ < 256 && session.state() != Session::State::kClosed) {
      const uint8_t op = data[at];
      const size_t length =
          std::min<size_t>(data[at + 1] | size_t{data[at + 2]} << 8, size - at - 3);
      const std::span<const uint8_t> bytes(data + at + 3, length);
      at += 3 + length;
      switch (op % 4) {
        case 0:
        case 1: {
          std::vector<UniqueFd> fds;
          size_t descriptors = 0;
          if (op % 4 == 1 && bytes.size() >= 6) {
            const uint16_t type = bytes[4] | uint16_t(bytes[5]) << 8;
            if (type == uint16_t(gpuvm::ipc::MessageType::kGuestMemory) && bytes.size() >= 32) {
              uint64_t announced = 0;
              for (int i = 0; i < 8; ++i) announced |= uint64_t(bytes[24 + i]) << (8 * i);
              const uint64_t memfd_bytes = (op & 4) ? 4096 : announced;
              if (memfd_bytes > 0 && memfd_bytes <= (64ull << 20) && memfd_bytes % 4096 == 0) {
                auto fd = gpuvm::os::CreateSealedMemfd("fuzz-ram", memfd_bytes);
                if (fd.ok()) fds.push_back(std::move(*fd));
              }
            } else if (type == uint16_t(gpuvm::ipc::MessageType::kFastLane)) {
              auto lane = gpuvm::ipc::FastLane::Create();
              if (lane.ok()) {
                for (int fd : (*lane)->fds()) {
                  auto dup = gpuvm::os::DuplicateFd(fd);
                  if (dup.ok()) fds.push_back(std::move(*dup));
                }
                dm_lane = std::move(*lane);
              }
            }
            descriptors = fds.size();
          }
          auto message = gpuvm::ipc::Decode(bytes, descriptors);
          if (!message.ok()) {
            session.Close("malformed packet");  // what the server does
            break;
          }
          Session::Output out = session.OnMessage(*message, std::move(fds));
          for (const auto& m : out.send) CheckEncodable(m);
          if (out.close && session.state() != Session::State::kClosed) std::abort();
          break;
        }
        case 2: {
          if (dm_lane == nullptr || session.lane() == nullptr) break;
          const uint32_t length_field =
              (op & 4) ? 0xfffffff0u ^ uint32_t(length) : uint32_t(length);
          if (!dm_lane
                   ->SendRawForTesting(gpuvm::ipc::FastLane::Side::kDeviceModel, bytes,
                                       length_field)
                   .ok()) {
            break;
          }
          auto m = session.lane()->TryReceive(gpuvm::ipc::FastLane::Side::kAggregator);
          if (!m.ok()) {
            session.Close("fast lane garbage");
            break;
          }
          if (!m->has_value()) break;
          auto reply = session.OnLaneMessage(**m);
          if (!reply.ok()) {
            session.Close("fast lane violation");
            break;
          }
          CheckEncodable(*reply);
          if (!session.lane()->Send(gpuvm::ipc::FastLane::Side::kAggregator, *reply).ok()) {
            session.Close("lane full");
            break;
          }
          (void)dm_lane->TryReceive(gpuvm::ipc::FastLane::Side::kDeviceModel);
          break;
        }
        case 3:
          if (session.state() == Session::State::kActive) {
            sim->sim_device()->RunUntilIdle(2);
            if (auto irq = session.InterruptUpdate()) CheckEncodable(*irq);
          }
          break;
      }
    }
  }
  if (aggregator->vm_count() != 0) std::abort();  // a closed session left its VM behind
  return 0;
}
