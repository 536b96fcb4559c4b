// FormatPrintfRecords (printf_format.h): device printf records -> text, trusting nothing in them.
#include "runtime/core/printf_format.h"

#include <cstdio>
#include <cstring>
#include <string_view>
#include <vector>

#include "gpu/isa/device_printf.h"

namespace gpuvm::runtime {
namespace {

using isa::PrintfSpec;
using isa::PrintfValue;

uint64_t AlignUp8(uint64_t v) { return (v + 7) & ~uint64_t{7}; }

uint32_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// The argument slots of one record, read with bounds checks.
class Payload {
 public:
  explicit Payload(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  bool Next(uint64_t* v) {
    if (bytes_.size() - at_ < 8) return false;
    *v = Load64(bytes_.data() + at_);
    at_ += 8;
    return true;
  }
  // A %s slot: the string (or "(null)").
  bool NextString(std::string* s) {
    uint64_t header;
    if (!Next(&header)) return false;
    const uint32_t len = static_cast<uint32_t>(header);
    if ((header >> 32) != 0) return false;
    if (len == isa::kPrintfNullString) {
      *s = "(null)";
      return true;
    }
    if (len > isa::kPrintfMaxStringBytes || AlignUp8(len) > bytes_.size() - at_) return false;
    s->assign(reinterpret_cast<const char*>(bytes_.data() + at_), len);
    at_ += AlignUp8(len);
    return true;
  }
  bool AtEnd() const { return at_ == bytes_.size(); }

 private:
  std::span<const uint8_t> bytes_;
  size_t at_ = 0;
};

// The flags C defines for a conversion (others are dropped: '#' with %d, '0' with %s ... are
// undefined behaviour in C).
const char* AllowedFlags(char conversion) {
  switch (conversion) {
    case 'd':
    case 'i':
      return "-+ 0";
    case 'o':
    case 'x':
    case 'X':
      return "-#0";
    case 'u':
      return "-0";
    case 'c':
    case 's':
    case 'p':
      return "-";
    default:  // floating point
      return "-+ #0";
  }
}

// snprintf with a spec built by Conversion below and a matching argument, into *out.
template <typename T>
void Snprintf(std::string* out, const std::string& spec, T arg) {
  char small[256];
  const int n = std::snprintf(small, sizeof small, spec.c_str(), arg);
  if (n < 0) return;
  if (static_cast<size_t>(n) < sizeof small) {
    out->append(small, static_cast<size_t>(n));
    return;
  }
  std::vector<char> big(static_cast<size_t>(n) + 1);
  std::snprintf(big.data(), big.size(), spec.c_str(), arg);
  out->append(big.data(), static_cast<size_t>(n));
}

int32_t Clamp(int64_t v) {
  return static_cast<int32_t>(v > isa::kPrintfMaxWidth ? isa::kPrintfMaxWidth : v);
}

// Formats one valid conversion with its slots from `payload`; false when the slots are missing or
// malformed.
bool Conversion(const PrintfSpec& s, Payload& payload, std::string* out) {
  if (s.conversion == '%') {
    out->push_back('%');
    return true;
  }
  std::string flags;
  for (const char* f = s.flags; *f != '\0'; ++f) {
    if (std::strchr(AllowedFlags(s.conversion), *f) != nullptr) flags.push_back(*f);
  }
  int32_t width = s.width;
  int32_t precision = s.precision;
  uint64_t slot;
  if (width == isa::kPrintfStar) {
    if (!payload.Next(&slot)) return false;
    const int64_t w = static_cast<int32_t>(slot);
    if (w < 0 && flags.find('-') == std::string::npos) flags.push_back('-');  // C's rule
    width = Clamp(w < 0 ? -w : w);
  }
  if (precision == isa::kPrintfStar) {
    if (!payload.Next(&slot)) return false;
    const int64_t p = static_cast<int32_t>(slot);
    precision = p < 0 ? isa::kPrintfNoNumber : Clamp(p);  // negative: as if omitted
  }
  if (s.conversion == 'c' || s.conversion == 'p') precision = isa::kPrintfNoNumber;
  std::string spec = "%" + flags;
  if (width >= 0) spec += std::to_string(width);
  if (precision >= 0) spec += "." + std::to_string(precision);

  switch (s.value) {
    case PrintfValue::kInt32: {
      if (!payload.Next(&slot)) return false;
      const std::string_view len(s.length_modifier);
      if (s.conversion != 'c') spec += len;  // "", "h" or "hh": the argument is an int
      spec.push_back(s.conversion);
      if (s.conversion == 'd' || s.conversion == 'i' || s.conversion == 'c') {
        Snprintf(out, spec, static_cast<int>(static_cast<int32_t>(slot)));
      } else {
        Snprintf(out, spec, static_cast<unsigned>(static_cast<uint32_t>(slot)));
      }
      return true;
    }
    case PrintfValue::kInt64:
      if (!payload.Next(&slot)) return false;
      spec += "ll";
      spec.push_back(s.conversion);
      if (s.conversion == 'd' || s.conversion == 'i') {
        Snprintf(out, spec, static_cast<long long>(slot));
      } else {
        Snprintf(out, spec, static_cast<unsigned long long>(slot));
      }
      return true;
    case PrintfValue::kDouble: {
      if (!payload.Next(&slot)) return false;
      double d;
      std::memcpy(&d, &slot, 8);
      spec.push_back(s.conversion);  // the length (l, L) is dropped: the value is a double
      Snprintf(out, spec, d);
      return true;
    }
    case PrintfValue::kPointer: {
      if (!payload.Next(&slot)) return false;
      char text[32];
      std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(slot));
      spec += "s";
      Snprintf(out, spec, static_cast<const char*>(text));
      return true;
    }
    case PrintfValue::kString: {
      std::string str;
      if (!payload.NextString(&str)) return false;
      // Our own NUL-terminated copy; a NUL inside (a hostile record) only ends it early.
      spec += "s";
      Snprintf(out, spec, str.c_str());
      return true;
    }
    case PrintfValue::kNone:
      break;
  }
  return false;
}

// One record's text; false (and *why) when the record is malformed.
bool FormatRecord(std::string_view format, uint32_t arg_count, Payload& payload, std::string* out,
                  std::string* why) {
  uint32_t slots = 0;
  for (size_t i = 0; i < format.size();) {
    const char c = format[i];
    if (c != '%') {
      if (c != '\0') out->push_back(c);
      ++i;
      continue;
    }
    const PrintfSpec s = isa::ParsePrintfSpec(format, i);
    i += s.length;
    if (!s.valid) {
      out->push_back('%');
      continue;
    }
    slots += s.ArgSlots();
    if (slots > arg_count || !Conversion(s, payload, out)) {
      *why = "its arguments do not match its format";
      return false;
    }
  }
  if (slots != arg_count || !payload.AtEnd()) {
    *why = "its arguments do not match its format";
    return false;
  }
  return true;
}

}  // namespace

PrintfText FormatPrintfRecords(std::span<const uint8_t> area) {
  PrintfText result;
  uint64_t off = 0;
  while (off < area.size()) {
    auto refuse = [&](const char* why) {
      result.error = why;
      result.bad_offset = off;
      return result;
    };
    const uint64_t left = area.size() - off;
    if (left < isa::kPrintfRecordHeaderBytes) return refuse("truncated record header");
    const uint8_t* r = area.data() + off;
    const uint32_t bytes = Load32(r);
    const uint32_t format_bytes = Load32(r + 4);
    const uint32_t arg_count = Load32(r + 8);
    if (bytes < isa::kPrintfRecordHeaderBytes || bytes % 8 != 0 || bytes > left) {
      return refuse("bad record size");
    }
    if (Load32(r + 12) != 0) return refuse("reserved header field is not zero");
    if (format_bytes > isa::kPrintfMaxFormatBytes ||
        AlignUp8(format_bytes) > bytes - isa::kPrintfRecordHeaderBytes) {
      return refuse("bad format length");
    }
    if (arg_count > isa::kPrintfMaxArgs) return refuse("too many arguments");
    const std::string_view format(reinterpret_cast<const char*>(r + 16), format_bytes);
    const uint64_t payload_at = isa::kPrintfRecordHeaderBytes + AlignUp8(format_bytes);
    Payload payload(std::span<const uint8_t>(r + payload_at, bytes - payload_at));
    std::string text, why;
    if (!FormatRecord(format, arg_count, payload, &text, &why)) return refuse(why.c_str());
    result.text += text;
    ++result.records;
    off += bytes;
  }
  return result;
}

}  // namespace gpuvm::runtime
