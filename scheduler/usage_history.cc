#include "scheduler/usage_history.h"

#include <algorithm>

namespace gpuvm::sched {
namespace {

int64_t FloorDiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

}  // namespace

UsageHistory::UsageHistory(Duration bucket, Duration horizon)
    : bucket_(bucket.count() > 0 ? bucket : Duration(1)),
      horizon_(std::max(horizon, bucket_)),
      ring_(static_cast<size_t>(horizon_.count() / bucket_.count()) + 2) {}

int64_t UsageHistory::BucketOf(TimePoint t) const {
  return FloorDiv(t.time_since_epoch().count(), bucket_.count());
}

UsageHistory::Bucket& UsageHistory::Slot(int64_t index) {
  const auto size = static_cast<int64_t>(ring_.size());
  Bucket& b = ring_[static_cast<size_t>(((index % size) + size) % size)];
  if (b.index != index) {
    b.index = index;
    b.used_ns = 0;
  }
  return b;
}

const UsageHistory::Bucket* UsageHistory::Find(int64_t index) const {
  const auto size = static_cast<int64_t>(ring_.size());
  const Bucket& b = ring_[static_cast<size_t>(((index % size) + size) % size)];
  return b.index == index ? &b : nullptr;
}

void UsageHistory::AddEndingAt(TimePoint end, Duration amount) {
  int64_t left = amount.count();
  if (left <= 0) return;
  const int64_t width = bucket_.count();
  const int64_t stop = end.time_since_epoch().count();
  const int64_t newest = FloorDiv(stop, width);
  // Never reach back past the horizon, nor into a slot that holds a newer bucket.
  int64_t oldest = FloorDiv(stop - horizon_.count(), width);
  if (newest_ >= 0) oldest = std::max(oldest, newest_ - static_cast<int64_t>(ring_.size()) + 1);
  oldest = std::max(oldest, newest - static_cast<int64_t>(ring_.size()) + 1);
  for (int64_t index = newest; index >= oldest && left > 0; --index) {
    const int64_t spans = index == newest ? stop - index * width : width;
    const Bucket* existing = Find(index);
    const int64_t room = spans - (existing != nullptr ? existing->used_ns : 0);
    if (room <= 0) continue;
    const int64_t piece = std::min(room, left);
    Slot(index).used_ns += piece;
    newest_ = std::max(newest_, index);
    left -= piece;
  }
}

Duration UsageHistory::UsedWithin(TimePoint now, Duration window) const {
  window = std::min(window, horizon_);
  if (window.count() <= 0) return Duration(0);
  const int64_t width = bucket_.count();
  const int64_t from = (now - window).time_since_epoch().count();
  const int64_t to = now.time_since_epoch().count();
  double used = 0;
  for (int64_t index = FloorDiv(from, width); index * width < to; ++index) {
    const Bucket* b = Find(index);
    if (b == nullptr || b->used_ns == 0) continue;
    const int64_t lo = std::max(from, index * width);
    const int64_t hi = std::min(to, (index + 1) * width);
    if (hi <= lo) continue;
    used +=
        static_cast<double>(b->used_ns) * static_cast<double>(hi - lo) / static_cast<double>(width);
  }
  return Duration(static_cast<int64_t>(used + 0.5));
}

}  // namespace gpuvm::sched
