#include "qemu-device/testing/fake_aggregator.h"

#include <utility>

namespace gpuvm::dm::testing {

uint8_t FakePatternByte(BarIndex bar, uint64_t offset) {
  return static_cast<uint8_t>((offset * 7) ^ (static_cast<uint8_t>(bar) * 0x40) ^ 0x5a);
}

FakeAggregator::FakeAggregator() {
  auto fd = os::CreateEventFd();
  if (fd.ok()) events_fd_ = std::move(*fd);
}

Result<uint64_t> FakeAggregator::Read(BarIndex bar, uint64_t offset, uint32_t size, uint32_t vcpu) {
  std::lock_guard<std::mutex> lock(mu_);
  overtaken_ |= posted_.has_value();
  if (fail_) return Status::Unavailable("fake aggregator told to fail");
  uint64_t value = 0;
  for (uint32_t i = 0; i < size; ++i) {
    auto it = bytes_.find({bar, offset + i});
    const uint8_t b = it != bytes_.end() ? it->second : FakePatternByte(bar, offset + i);
    value |= uint64_t{b} << (8 * i);
  }
  accesses_.push_back({false, bar, offset, size, value, vcpu});
  return value;
}

Status FakeAggregator::Write(BarIndex bar, uint64_t offset, uint32_t size, uint64_t value,
                             uint32_t vcpu) {
  std::lock_guard<std::mutex> lock(mu_);
  overtaken_ |= posted_.has_value();
  return WriteLocked(bar, offset, size, value, vcpu);
}

Status FakeAggregator::WriteLocked(BarIndex bar, uint64_t offset, uint32_t size, uint64_t value,
                                   uint32_t vcpu) {
  if (fail_) return Status::Unavailable("fake aggregator told to fail");
  for (uint32_t i = 0; i < size; ++i) {
    bytes_[{bar, offset + i}] = static_cast<uint8_t>(value >> (8 * i));
  }
  accesses_.push_back({true, bar, offset, size, value, vcpu});
  return Status::Ok();
}

Status FakeAggregator::PostWrite(BarIndex bar, uint64_t offset, uint32_t size, uint64_t value,
                                 uint32_t vcpu) {
  std::lock_guard<std::mutex> lock(mu_);
  overtaken_ |= posted_.has_value();
  posted_ = RecordedAccess{true, bar, offset, size, value, vcpu};
  return Status::Ok();
}

Status FakeAggregator::Settle() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!posted_) return Status::Ok();
  const RecordedAccess w = *std::exchange(posted_, std::nullopt);
  ++settles_;
  return WriteLocked(w.bar, w.offset, w.size, w.value, w.vcpu);
}

std::optional<RecordedAccess> FakeAggregator::posted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return posted_;
}

uint64_t FakeAggregator::settles() const {
  std::lock_guard<std::mutex> lock(mu_);
  return settles_;
}

bool FakeAggregator::overtaken() const {
  std::lock_guard<std::mutex> lock(mu_);
  return overtaken_;
}

Result<std::optional<AggregatorEvent>> FakeAggregator::PollEvent() {
  std::lock_guard<std::mutex> lock(mu_);
  if (events_.empty()) {
    if (events_fd_.valid()) os::DrainEventFd(events_fd_.get());
    return std::optional<AggregatorEvent>();
  }
  AggregatorEvent event = events_.front();
  events_.pop_front();
  return std::optional<AggregatorEvent>(event);
}

Status FakeAggregator::AnswerBarRequest(uint32_t seq, const Status& result) {
  std::lock_guard<std::mutex> lock(mu_);
  bar_answers_.emplace_back(seq, result);
  return Status::Ok();
}

void FakeAggregator::PushEvent(const AggregatorEvent& event) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(event);
  if (events_fd_.valid()) (void)os::SignalEventFd(events_fd_.get());
}

void FakeAggregator::FailAccesses(bool fail) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_ = fail;
}

std::vector<RecordedAccess> FakeAggregator::accesses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return accesses_;
}

std::vector<std::pair<uint32_t, Status>> FakeAggregator::bar_answers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bar_answers_;
}

void FakeAggregator::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  accesses_.clear();
  bytes_.clear();
}

}  // namespace gpuvm::dm::testing
