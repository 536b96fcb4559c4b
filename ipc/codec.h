// The codec of the device model <-> aggregator protocol (docs/IPC.md): bytes <-> Message, with
// every rule of the protocol checked in one place. Both sides link it: gpuvm-dm and
// gpuvm-aggregator. Every received message is untrusted — the aggregator cannot trust a device
// model (it serves a hostile guest and may itself be compromised) and the device model does not
// trust what arrives on a socket — so Decode accepts only the canonical encoding of a valid
// message: exact lengths, zero reserved bytes, known enums, in-range sizes and offsets. Encode
// applies the same rules, so we never send what we would refuse. Consequence (checked by
// ipc_codec_fuzz): Encode(Decode(b)) == b for every accepted b.
//
// Threading: pure functions.
#ifndef GPUVM_IPC_CODEC_H_
#define GPUVM_IPC_CODEC_H_

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "ipc/protocol.h"

namespace gpuvm::ipc {

// `descriptors`: how many file descriptors arrived with the packet (must match the message type).
// DataLoss for anything malformed, with a sentence saying what.
Result<Message> Decode(std::span<const uint8_t> bytes, size_t descriptors);
// InvalidArgument when the message breaks a protocol rule.
Result<std::vector<uint8_t>> Encode(const Message& message);
// The semantic rules alone (Decode and Encode both apply them).
Status Validate(const Message& message);

// The highest offset+size any BAR access may reach (BARs are at most 1 TiB here).
inline constexpr uint64_t kMaxBarExtent = uint64_t{1} << 40;

}  // namespace gpuvm::ipc

#endif  // GPUVM_IPC_CODEC_H_
