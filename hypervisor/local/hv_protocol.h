// Wire format between local-backend clients and the local hypervisor daemon (hv_daemon.h). Internal
// to the local backend; docs/HYPERVISOR.md describes it.
//
// Transport: a SOCK_SEQPACKET unix socket, one message per packet, descriptors by SCM_RIGHTS.
// Message: HvHeader (16 bytes, little endian) + payload. Requests carry a sequence number the reply
// echoes. Replies start with a status (u32 code, string message) followed by op-specific results.
// Strings are u32 length + bytes. Every message is untrusted: a guest VM process talks to the
// daemon too (its store and event channels), so the daemon parses with bounds checks and drops a
// client that sends garbage.
//
// Threading: plain functions and values.
#ifndef GPUVM_HYPERVISOR_LOCAL_HV_PROTOCOL_H_
#define GPUVM_HYPERVISOR_LOCAL_HV_PROTOCOL_H_

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpuvm::hv::local {

inline constexpr uint32_t kHvMagic = 0x56485047;  // "GPHV"
inline constexpr size_t kHvMaxMessage = 16384;

enum class HvOp : uint16_t {
  kHello = 1,                // u16 domid                          -> (nothing)
  kReply = 2,                // (daemon -> client) status + results
  kWatchEvent = 3,           // (daemon -> client) string path, string token
  kStoreRead = 10,           // string path                        -> string value
  kStoreWrite = 11,          // string path, string value          -> (nothing)
  kStoreRemove = 12,         // string path                        -> (nothing)
  kStoreList = 13,           // string path                        -> u32 n, n strings
  kStoreWatch = 14,          // string path, string token          -> (nothing)
  kStoreUnwatch = 15,        // string path, string token          -> (nothing)
  kDomainRegister = 20,      // bytes domain header + fds          -> (nothing)     (dom0 only)
  kDomainAttach = 21,        // u16 domid                          -> bytes header + fds (dom0 only)
  kDomainUnregister = 22,    // u16 domid                       -> (nothing)
  kEvtchnAllocUnbound = 30,  // u16 remote                    -> u32 port + fds [notify, wait]
  kEvtchnBind = 31,          // u16 remote, u32 remote port        -> u32 port + fds [notify, wait]
  kEvtchnClose = 32,         // u32 port                           -> (nothing)
};

struct HvHeader {
  uint32_t magic;
  uint16_t op;
  uint16_t reserved;  // zero
  uint32_t seq;
  uint32_t length;  // whole message, header included
};
static_assert(sizeof(HvHeader) == 16);

// Builds a payload.
class HvWriter {
 public:
  HvWriter& U16(uint16_t v) { return Raw(&v, sizeof(v)); }
  HvWriter& U32(uint32_t v) { return Raw(&v, sizeof(v)); }
  HvWriter& U64(uint64_t v) { return Raw(&v, sizeof(v)); }
  HvWriter& Str(std::string_view s);
  HvWriter& Bytes(std::span<const uint8_t> b) { return Raw(b.data(), b.size()); }
  std::vector<uint8_t> Take() { return std::move(bytes_); }

 private:
  HvWriter& Raw(const void* p, size_t n);
  std::vector<uint8_t> bytes_;
};

// Reads a message's payload; every getter fails (nullopt) past the end, and Done() checks that
// nothing is left over.
class HvReader {
 public:
  explicit HvReader(std::span<const uint8_t> payload) : rest_(payload) {}
  std::optional<uint16_t> U16() { return Fixed<uint16_t>(); }
  std::optional<uint32_t> U32() { return Fixed<uint32_t>(); }
  std::optional<uint64_t> U64() { return Fixed<uint64_t>(); }
  std::optional<std::string> Str(size_t max_length);
  bool Done() const { return rest_.empty(); }
  std::span<const uint8_t> rest() const { return rest_; }

 private:
  template <typename T>
  std::optional<T> Fixed() {
    if (rest_.size() < sizeof(T)) return std::nullopt;
    T v;
    std::memcpy(&v, rest_.data(), sizeof(T));
    rest_ = rest_.subspan(sizeof(T));
    return v;
  }
  std::span<const uint8_t> rest_;
};

// Splits a received message into header and payload. DataLoss on a bad magic, reserved field or
// length.
struct HvMessage {
  HvHeader header;
  std::span<const uint8_t> payload;
};
Result<HvMessage> ParseHvMessage(std::span<const uint8_t> bytes);

// Header + payload.
std::vector<uint8_t> EncodeHvMessage(HvOp op, uint32_t seq, std::span<const uint8_t> payload);
// A reply: status first, then `results` (a payload built with HvWriter).
std::vector<uint8_t> EncodeHvReply(uint32_t seq, const Status& status,
                                   std::span<const uint8_t> results = {});
// Parses a reply's status; on OK returns the reader positioned at the results.
Result<HvReader> ParseHvReplyStatus(std::span<const uint8_t> payload);

// Where clients find the daemon: $GPUVM_LOCAL_HV if set, else "@gpuvm-local-hv-<uid>" (a name in
// the abstract unix socket namespace; a leading '@' means abstract everywhere in the local
// backend).
std::string DefaultHvSocketPath();

}  // namespace gpuvm::hv::local

#endif  // GPUVM_HYPERVISOR_LOCAL_HV_PROTOCOL_H_
