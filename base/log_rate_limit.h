// A budget of log lines per second for events a peer can cause at will (refused connections, ones
// pushed out or timed out): a flood of them must not flood the log, yet the log should say that
// lines were left out.
//
// Threading: one owner thread.
#ifndef GPUVM_BASE_LOG_RATE_LIMIT_H_
#define GPUVM_BASE_LOG_RATE_LIMIT_H_

#include <chrono>
#include <cstdint>

namespace gpuvm {

class LogRateLimit {
 public:
  using Clock = std::chrono::steady_clock;
  explicit LogRateLimit(int per_second = 10) : per_second_(per_second) {}

  // Whether one more line may be written now. `*left_out` becomes how many lines were refused
  // since the last one allowed (say so in, or before, the line), else 0.
  bool Allow(uint64_t* left_out, Clock::time_point now = Clock::now()) {
    *left_out = 0;
    if (now - window_ >= std::chrono::seconds(1)) {
      window_ = now;
      used_ = 0;
    }
    if (used_ >= per_second_) {
      ++refused_;
      return false;
    }
    ++used_;
    *left_out = refused_;
    refused_ = 0;
    return true;
  }

 private:
  const int per_second_;
  Clock::time_point window_{};
  int used_ = 0;
  uint64_t refused_ = 0;
};

}  // namespace gpuvm

#endif  // GPUVM_BASE_LOG_RATE_LIMIT_H_
