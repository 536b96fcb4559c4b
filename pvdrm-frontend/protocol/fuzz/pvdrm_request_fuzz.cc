// Fuzz target: what a PVDRM backend runs on every request slot a guest's frontend fills
// (docs/PVDRM.md). Input: the request slot's 120 bytes (shorter inputs are zero-padded), then
// optionally a pushbuf's data pages. Checked, for every input:
//   - DecodeRequest never crashes, and accepts only canonical requests: the accepted value,
//     encoded again, gives back exactly the input slot; a refused one carries the slot's id and
//     op, -EINVAL or -ENOTTY, and says why;
//   - an accepted pushbuf's arrays are copied out of the rest of the input without crashing, and
//     accepted arrays written again give back the same bytes;
//   - the same bytes read as a response to every op decode without crashing, canonically.
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <variant>

#include "pvdrm-frontend/protocol/codec.h"

namespace pvdrm = gpuvm::pvdrm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pvdrm::pvdrm_request slot{};
  std::memcpy(&slot, data, std::min(size, sizeof(slot)));
  const std::span<const uint8_t> rest =
      size > sizeof(slot) ? std::span<const uint8_t>(data + sizeof(slot), size - sizeof(slot))
                          : std::span<const uint8_t>();

  auto decoded = pvdrm::DecodeRequest(slot);
  if (auto* request = std::get_if<pvdrm::Request>(&decoded)) {
    pvdrm::pvdrm_request again;
    pvdrm::EncodeRequest(*request, again);
    if (std::memcmp(&again, &slot, sizeof(slot)) != 0) std::abort();
    if (auto* pushbuf = std::get_if<pvdrm::GemPushbuf>(&request->body)) {
      gpuvm::Result<pvdrm::PushbufArrays> arrays = pvdrm::CopyPushbufArrays(pushbuf->arg, rest);
      if (arrays.ok()) {
        const pvdrm::PushbufLayout layout = pvdrm::LayoutPushbuf(
            pushbuf->arg.nr_buffers, pushbuf->arg.nr_relocs, pushbuf->arg.nr_push);
        std::vector<uint8_t> written(layout.bytes);
        pvdrm::WritePushbufArrays(*arrays, written);
        // Bytes between the relocs and the 8-aligned push array are padding, written as zero.
        const size_t relocs_end = layout.relocs_offset + arrays->relocs.size() * 28;
        for (size_t i = 0; i < layout.bytes; ++i) {
          if (i >= relocs_end && i < layout.push_offset) continue;
          if (written[i] != rest[i]) std::abort();
        }
      }
    }
  } else {
    const auto& error = std::get<pvdrm::RequestError>(decoded);
    if (error.id != slot.id || error.raw_op != slot.op || error.message.empty()) std::abort();
    if (error.status != -EINVAL && error.status != -ENOTTY) std::abort();
  }

  pvdrm::pvdrm_response response;
  static_assert(sizeof(response) == sizeof(slot));
  std::memcpy(&response, &slot, sizeof(response));
  for (uint16_t raw = 0; raw < 0x300; ++raw) {
    const std::optional<pvdrm::Op> op = pvdrm::OpFromWire(raw);
    if (!op) continue;
    gpuvm::Result<pvdrm::Response> back = pvdrm::DecodeResponse(response, *op);
    if (!back.ok()) continue;
    pvdrm::pvdrm_response again;
    pvdrm::EncodeResponse(*back, again);
    if (std::memcmp(&again, &response, sizeof(response)) != 0) std::abort();
  }
  return 0;
}
