// The printf format walk shared by the vprintf instruction and the host formatter
// (device_printf.h).
#include "gpu/isa/device_printf.h"

#include <cstring>

namespace gpuvm::isa {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Reads a decimal number at format[*pos]; false when it passes kPrintfMaxWidth (the caller then
// treats the spec as invalid). Leaves *pos after the digits.
bool ReadNumber(std::string_view format, size_t* pos, int32_t* out) {
  int64_t v = 0;
  while (*pos < format.size() && IsDigit(format[*pos])) {
    v = v * 10 + (format[*pos] - '0');
    if (v > kPrintfMaxWidth) return false;
    ++*pos;
  }
  *out = static_cast<int32_t>(v);
  return true;
}

}  // namespace

uint32_t PrintfValueBytes(PrintfValue v) {
  switch (v) {
    case PrintfValue::kNone:
      return 0;
    case PrintfValue::kInt32:
      return 4;
    case PrintfValue::kInt64:
    case PrintfValue::kDouble:
    case PrintfValue::kPointer:
    case PrintfValue::kString:
      return 8;
  }
  return 0;
}

PrintfSpec ParsePrintfSpec(std::string_view format, size_t pos) {
  PrintfSpec invalid;  // covers the '%' alone
  PrintfSpec s;
  size_t i = pos + 1;
  auto at_end = [&] { return i >= format.size(); };
  // Flags, each kept once.
  size_t nflags = 0;
  while (!at_end() && std::strchr("-+ #0", format[i]) != nullptr && format[i] != '\0') {
    if (std::memchr(s.flags, format[i], nflags) == nullptr) s.flags[nflags++] = format[i];
    ++i;
  }
  // Width.
  if (!at_end() && format[i] == '*') {
    s.width = kPrintfStar;
    ++i;
  } else if (!at_end() && IsDigit(format[i])) {
    if (!ReadNumber(format, &i, &s.width)) return invalid;
  }
  // Precision ("." alone means 0).
  if (!at_end() && format[i] == '.') {
    ++i;
    if (!at_end() && format[i] == '*') {
      s.precision = kPrintfStar;
      ++i;
    } else if (!ReadNumber(format, &i, &s.precision)) {
      return invalid;
    }
  }
  // Length modifier.
  size_t nlen = 0;
  if (!at_end() && std::strchr("hljztL", format[i]) != nullptr && format[i] != '\0') {
    s.length_modifier[nlen++] = format[i++];
    if (!at_end() && (format[i] == 'h' || format[i] == 'l') && format[i] == s.length_modifier[0]) {
      s.length_modifier[nlen++] = format[i++];
    }
  }
  if (at_end()) return invalid;
  const char c = format[i++];
  const std::string_view len(s.length_modifier, nlen);
  const bool wide = len == "l" || len == "ll" || len == "j" || len == "z" || len == "t";
  switch (c) {
    case 'd':
    case 'i':
    case 'o':
    case 'u':
    case 'x':
    case 'X':
      if (len == "L") return invalid;
      s.value = wide ? PrintfValue::kInt64 : PrintfValue::kInt32;
      break;
    case 'c':
      if (!len.empty()) return invalid;  // %lc takes a wide character
      s.value = PrintfValue::kInt32;
      break;
    case 'f':
    case 'F':
    case 'e':
    case 'E':
    case 'g':
    case 'G':
    case 'a':
    case 'A':
      if (!len.empty() && len != "l" && len != "L") return invalid;
      s.value = PrintfValue::kDouble;
      break;
    case 's':
      if (!len.empty()) return invalid;  // %ls takes a wide string
      s.value = PrintfValue::kString;
      break;
    case 'p':
      if (!len.empty()) return invalid;
      s.value = PrintfValue::kPointer;
      break;
    case '%':
      // "%%" (flags or a width in between change nothing; '*' would still consume an argument in
      // C, which is too odd to follow: such a spec is invalid).
      if (s.width == kPrintfStar || s.precision == kPrintfStar || !len.empty()) return invalid;
      s.value = PrintfValue::kNone;
      break;
    default:  // %n and anything unknown
      return invalid;
  }
  s.conversion = c;
  s.valid = true;
  s.length = static_cast<uint32_t>(i - pos);
  return s;
}

}  // namespace gpuvm::isa
