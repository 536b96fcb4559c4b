#include "base/quote.h"

namespace gpuvm {

std::string QuoteForMessage(std::string_view s) {
  constexpr size_t kMaxShown = 40;
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < kMaxShown; ++i) {
    const char c = s[i];
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  if (s.size() > kMaxShown) out += "...";
  return out + "'";
}

}  // namespace gpuvm
