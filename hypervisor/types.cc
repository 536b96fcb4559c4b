#include "hypervisor/types.h"

#include <charconv>
#include <cstdio>

#include "base/enum_names.h"
#include "base/hex.h"

namespace gpuvm::hv {
namespace {

// Parses exactly `text` as hex into `out`, rejecting empty input, junk and values above `max`.
bool ParseHex(std::string_view text, uint32_t max, uint32_t* out) {
  if (text.empty() || text.size() > 8) return false;
  uint32_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
  if (ec != std::errc() || end != text.data() + text.size() || value > max) return false;
  *out = value;
  return true;
}

}  // namespace

std::string Sbdf::ToString() const {
  char text[32];
  std::snprintf(text, sizeof(text), "%04x:%02x:%02x.%x", segment, bus, device, function);
  return text;
}

Result<Sbdf> Sbdf::Parse(std::string_view text) {
  const std::string_view original = text;
  auto bad = [&] {
    return Status::InvalidArgument("not a PCI address (want ssss:bb:dd.f): '" +
                                   std::string(original) + "'");
  };
  Sbdf sbdf;
  uint32_t value = 0;
  const size_t dot = text.rfind('.');
  if (dot == std::string_view::npos) return bad();
  if (!ParseHex(text.substr(dot + 1), 7, &value)) return bad();
  sbdf.function = static_cast<uint8_t>(value);
  text = text.substr(0, dot);
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return bad();
  if (!ParseHex(text.substr(colon + 1), 31, &value)) return bad();
  sbdf.device = static_cast<uint8_t>(value);
  text = text.substr(0, colon);
  colon = text.rfind(':');
  if (colon != std::string_view::npos) {
    if (!ParseHex(text.substr(0, colon), 0xffff, &value)) return bad();
    sbdf.segment = static_cast<uint16_t>(value);
    text = text.substr(colon + 1);
  }
  if (!ParseHex(text, 0xff, &value)) return bad();
  sbdf.bus = static_cast<uint8_t>(value);
  return sbdf;
}

std::string_view IoSpaceName(IoSpace space) {
  static constexpr EnumName<IoSpace> kNames[] = {{IoSpace::kMmio, "mmio"},
                                                 {IoSpace::kPciConfig, "pci-config"},
                                                 {IoSpace::kPort, "port"},
                                                 {IoSpace::kTimeOffset, "time-offset"},
                                                 {IoSpace::kInvalidate, "invalidate"},
                                                 {IoSpace::kUnknown, "unknown"}};
  return NameOf(kNames, space, "unknown");
}

std::string Describe(const IoRequest& r) {
  char text[192];
  std::snprintf(text, sizeof(text), "vcpu %u %s %s addr=0x%llx size=%u count=%u data=0x%llx%s%s%s",
                r.vcpu, std::string(IoSpaceName(r.space)).c_str(),
                r.dir == IoDirection::kRead ? "read" : "write",
                static_cast<unsigned long long>(r.addr), r.size, r.count,
                static_cast<unsigned long long>(r.data), r.data_is_ptr ? " ptr" : "",
                r.df ? " df" : "", r.buffered ? " buffered" : "");
  std::string out = text;
  if (r.space == IoSpace::kPciConfig) out += " sbdf=" + r.sbdf.ToString();
  return out;
}

}  // namespace gpuvm::hv
