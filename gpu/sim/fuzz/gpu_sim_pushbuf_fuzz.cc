// libFuzzer target: the GPFIFO/pushbuffer path. The input is cut into pushbuffer segments (and
// sometimes raw IB entries) that a channel executes; whatever the words say — any header, any
// method of any class, copies and semaphores over mapped, read-only, supervisor-only, SYSRAM and
// unmapped addresses — the device must neither crash nor touch memory it does not own, and must
// stay usable.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gpu/sim/fuzz/fuzz_world.h"

using gpuvm::sim::fuzz::World;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  World world;
  auto* ch = world.channel;
  // Control byte: bits 0-2 segments - 1, bit 3: also submit a raw IB entry from the next 8 bytes.
  const uint8_t control = data[0];
  size_t pos = 1;
  const int segments = (control & 7) + 1;
  if ((control & 8) && size >= pos + 8) {
    uint32_t w0, w1;
    std::memcpy(&w0, data + pos, 4);
    std::memcpy(&w1, data + pos + 4, 4);
    pos += 8;
    ch->SubmitIbEntry(uint64_t(w0) | (uint64_t(w1 & 0xff) << 32), (w1 >> 10) & 0x1fffff);
  }
  std::vector<uint32_t> words((size - pos) / 4);
  if (!words.empty()) std::memcpy(words.data(), data + pos, words.size() * 4);
  const size_t per_segment = words.size() / segments + 1;
  for (size_t i = 0; i < words.size(); i += per_segment) {
    for (size_t j = i; j < words.size() && j < i + per_segment; ++j) ch->Raw(words[j]);
    ch->Submit();
  }
  world.device->RunUntilIdle(256);
  // The device answers registers afterwards and a fresh channel still works.
  (void)world.device->ReadReg(0x2100);
  (void)world.device->channel_error(1);
  return 0;
}
