// A log that stays bounded when one kind of line comes in a flood: a hostile guest can make the
// aggregator refuse something thousands of times a second, and one line per refusal filled its
// log (3,999 lines, 435 KB in 7 s). Each line belongs to a kind, a small key the caller chooses
// (the aggregator: one RateLimitedLog per VM, one kind per kind of refusal). The first `burst`
// lines of a kind are written as they come; after that its events are only counted, and at most
// one summary per kind and `interval` says how many were left out:
//
//   3,990 more refused BAR0 writes in the last 1.0 s (only the first 10 are logged one by one)
//
// The summary is written by the first event at least `interval` after the kind's last line, and by
// Flush() (call it when the source ends: a VM leaving); so a kind costs at most `burst` lines plus
// one per interval, whatever the rate. A kind quiet for `refill_after` gets its burst back. The caller's line is only built when it will be written.
// Counting the events for statistics is the caller's business (this only decides what to write).
//
// Threading: not thread-safe; one owner thread (the sink is called on it).
#ifndef GPUVM_BASE_RATE_LIMITED_LOG_H_
#define GPUVM_BASE_RATE_LIMITED_LOG_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

namespace gpuvm {

class RateLimitedLog {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  using Sink = std::function<void(const std::string&)>;
  struct Options {
    uint64_t burst = 10;  // lines of a kind written one by one
    std::chrono::steady_clock::duration interval = std::chrono::seconds(1);  // between summaries
    // A kind quiet this long after its last line (nothing left out since) gets its burst back, so
    // a long-running server still logs an occasional event in full; a steady flood never does.
    std::chrono::steady_clock::duration refill_after = std::chrono::seconds(60);
  };

  // `clock` defaults to std::chrono::steady_clock::now (tests pass a fake one). An empty sink
  // writes nothing (the events are still rate-limited the same way).
  explicit RateLimitedLog(Sink sink) : RateLimitedLog(std::move(sink), Options{}) {}
  RateLimitedLog(Sink sink, Options options, Clock clock = {});
  ~RateLimitedLog();  // Flush()
  RateLimitedLog(const RateLimitedLog&) = delete;
  RateLimitedLog& operator=(const RateLimitedLog&) = delete;

  // `count` (>= 1) events of `kind`; `what` names such events, plural, for the summary ("refused
  // BAR0 writes"). Writes line() when the kind is within its burst and returns true; else counts
  // the events (and writes a summary when it is due) and returns false.
  bool Note(uint32_t kind, std::string_view what, uint64_t count,
            const std::function<std::string()>& line);
  bool Note(uint32_t kind, std::string_view what, const std::function<std::string()>& line) {
    return Note(kind, what, 1, line);
  }
  // Writes the summary of every kind with events left out since its last line.
  void Flush();

  // Lines written so far (the caller's and summaries).
  uint64_t lines() const { return lines_; }

 private:
  struct Kind {
    std::string what;
    uint64_t written = 0;                             // the caller's lines written
    uint64_t left_out = 0;                            // events since the last line, not written
    std::chrono::steady_clock::time_point last_line;  // of this kind (the caller's or a summary)
  };
  void Write(const std::string& line);
  void Summarize(Kind& k, std::chrono::steady_clock::time_point now);

  Sink sink_;
  const Options options_;
  Clock clock_;
  std::map<uint32_t, Kind> kinds_;
  uint64_t lines_ = 0;
};

// "3990" -> "3,990": counts in log lines.
std::string WithThousands(uint64_t n);

}  // namespace gpuvm

#endif  // GPUVM_BASE_RATE_LIMITED_LOG_H_
