// Fuzz target: the protocol parser the aggregator runs on every message a device model sends (and
// the device model on the aggregator's). Input: one byte of descriptor count, then the packet.
// Decode must never crash and must accept only canonical encodings: re-encoding an accepted message
// gives back exactly the input bytes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "ipc/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t descriptors = data[0] % 4;
  const std::span<const uint8_t> packet(data + 1, size - 1);
  auto message = gpuvm::ipc::Decode(packet, descriptors);
  if (!message.ok()) return 0;
  if (gpuvm::ipc::DescriptorCount(message->body) != descriptors) std::abort();
  auto encoded = gpuvm::ipc::Encode(*message);
  if (!encoded.ok()) std::abort();  // we accepted something we would refuse to send
  if (encoded->size() != packet.size() ||
      !std::equal(encoded->begin(), encoded->end(), packet.begin())) {
    std::abort();  // not canonical
  }
  return 0;
}
