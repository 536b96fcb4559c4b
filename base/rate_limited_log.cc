#include "base/rate_limited_log.h"

#include <cstdio>
#include <utility>

namespace gpuvm {

std::string WithThousands(uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

RateLimitedLog::RateLimitedLog(Sink sink, Options options, Clock clock)
    : sink_(std::move(sink)), options_(options), clock_(std::move(clock)) {
  if (!clock_) clock_ = [] { return std::chrono::steady_clock::now(); };
}

RateLimitedLog::~RateLimitedLog() { Flush(); }

void RateLimitedLog::Write(const std::string& line) {
  ++lines_;
  if (sink_) sink_(line);
}

void RateLimitedLog::Summarize(Kind& k, std::chrono::steady_clock::time_point now) {
  const double seconds = std::chrono::duration<double>(now - k.last_line).count();
  char span[32];
  std::snprintf(span, sizeof span, "%.1f", seconds < 0 ? 0.0 : seconds);
  Write(WithThousands(k.left_out) + " more " + k.what + " in the last " + span +
        " s (only the first " + std::to_string(options_.burst) + " are logged one by one)");
  k.left_out = 0;
  k.last_line = now;
}

bool RateLimitedLog::Note(uint32_t kind, std::string_view what, uint64_t count,
                          const std::function<std::string()>& line) {
  const auto now = clock_();
  Kind& k = kinds_[kind];
  if (k.written >= options_.burst && k.left_out == 0 && now - k.last_line >= options_.refill_after) {
    k.written = 0;
  }
  if (k.written < options_.burst) {
    ++k.written;
    k.last_line = now;
    if (k.what.empty()) k.what = std::string(what);
    Write(line());
    return true;
  }
  if (k.what.empty()) k.what = std::string(what);
  k.left_out += count == 0 ? 1 : count;
  if (now - k.last_line >= options_.interval) Summarize(k, now);
  return false;
}

void RateLimitedLog::Flush() {
  const auto now = clock_();
  for (auto& [kind, k] : kinds_) {
    if (k.left_out != 0) Summarize(k, now);
  }
}

}  // namespace gpuvm
