#include "base/share.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <system_error>

#include "base/quote.h"

namespace gpuvm {

Result<double> ParseSharePercent(std::string_view text) {
  std::string_view s = text;
  if (!s.empty() && s.back() == '%') s.remove_suffix(1);
  if (!s.empty() && s.front() == '-') {
    return Status::InvalidArgument("share " + QuoteForMessage(text) +
                                   " is negative; shares are 0-100%");
  }
  const size_t dot = s.find('.');
  const std::string_view whole = s.substr(0, dot);
  const std::string_view fraction = dot == std::string_view::npos ? "" : s.substr(dot + 1);
  bool ok = !whole.empty() && whole.size() <= 3;
  for (char c : whole) ok &= IsAsciiDigit(c);
  if (dot != std::string_view::npos) {
    ok &= !fraction.empty() && fraction.size() <= 3;
    for (char c : fraction) ok &= IsAsciiDigit(c);
  }
  if (!ok) {
    return Status::InvalidArgument("share " + QuoteForMessage(text) +
                                   " is not a percentage (0-100, at most 3 decimals, e.g. 25 or "
                                   "12.5)");
  }
  double value = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(value)) {
    return Status::InvalidArgument("share " + QuoteForMessage(text) + " is not a number");
  }
  if (value > 100)
    return Status::InvalidArgument("share " + QuoteForMessage(text) + " is above 100%");
  return value;
}

std::string FormatSharePercent(double percent) {
  if (!std::isfinite(percent) || percent < 0) percent = 0;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", percent);
  std::string p = buf;
  while (p.back() == '0') p.pop_back();
  if (p.back() == '.') p.pop_back();
  return p;
}

}  // namespace gpuvm
