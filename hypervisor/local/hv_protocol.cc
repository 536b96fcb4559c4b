#include "hypervisor/local/hv_protocol.h"

#include <unistd.h>

#include <cstdlib>

namespace gpuvm::hv::local {

HvWriter& HvWriter::Raw(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  bytes_.insert(bytes_.end(), b, b + n);
  return *this;
}

HvWriter& HvWriter::Str(std::string_view s) {
  U32(static_cast<uint32_t>(s.size()));
  return Raw(s.data(), s.size());
}

std::optional<std::string> HvReader::Str(size_t max_length) {
  std::optional<uint32_t> n = U32();
  if (!n || *n > max_length || *n > rest_.size()) return std::nullopt;
  std::string s(reinterpret_cast<const char*>(rest_.data()), *n);
  rest_ = rest_.subspan(*n);
  return s;
}

Result<HvMessage> ParseHvMessage(std::span<const uint8_t> bytes) {
  HvMessage m;
  if (bytes.size() < sizeof(HvHeader))
    return Status::DataLoss("hv message shorter than its header");
  std::memcpy(&m.header, bytes.data(), sizeof(HvHeader));
  if (m.header.magic != kHvMagic) return Status::DataLoss("hv message has a bad magic");
  if (m.header.reserved != 0) return Status::DataLoss("hv message has reserved bits set");
  if (m.header.length != bytes.size()) return Status::DataLoss("hv message length mismatch");
  m.payload = bytes.subspan(sizeof(HvHeader));
  return m;
}

std::vector<uint8_t> EncodeHvMessage(HvOp op, uint32_t seq, std::span<const uint8_t> payload) {
  HvHeader h{kHvMagic, static_cast<uint16_t>(op), 0, seq,
             static_cast<uint32_t>(sizeof(HvHeader) + payload.size())};
  std::vector<uint8_t> out(sizeof(h) + payload.size());
  std::memcpy(out.data(), &h, sizeof(h));
  if (!payload.empty()) std::memcpy(out.data() + sizeof(h), payload.data(), payload.size());
  return out;
}

std::vector<uint8_t> EncodeHvReply(uint32_t seq, const Status& status,
                                   std::span<const uint8_t> results) {
  HvWriter w;
  w.U32(static_cast<uint32_t>(status.code())).Str(status.message()).Bytes(results);
  const std::vector<uint8_t> payload = w.Take();
  return EncodeHvMessage(HvOp::kReply, seq, payload);
}

Result<HvReader> ParseHvReplyStatus(std::span<const uint8_t> payload) {
  HvReader r(payload);
  std::optional<uint32_t> code = r.U32();
  std::optional<std::string> message = r.Str(4096);
  if (!code || !message || *code > static_cast<uint32_t>(StatusCode::kInternal)) {
    return Status::DataLoss("malformed hv reply");
  }
  if (*code != 0) return Status(static_cast<StatusCode>(*code), *message);
  return r;
}

std::string DefaultHvSocketPath() {
  if (const char* env = std::getenv("GPUVM_LOCAL_HV"); env != nullptr && *env != '\0') return env;
  return "@gpuvm-local-hv-" + std::to_string(::getuid());
}

}  // namespace gpuvm::hv::local
