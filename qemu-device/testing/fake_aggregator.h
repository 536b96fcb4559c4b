// An in-process stand-in for the aggregator, for device-model tests and the benchmark: BAR space is
// a sparse memory (a write is read back; unwritten bytes read as a fixed pattern), every access is
// recorded, failures and events can be injected.
//
// Threading: the device model thread calls the AggregatorConnection methods; the test thread may
// call everything else concurrently (a mutex guards the state).
#ifndef GPUVM_QEMU_DEVICE_TESTING_FAKE_AGGREGATOR_H_
#define GPUVM_QEMU_DEVICE_TESTING_FAKE_AGGREGATOR_H_

#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "base/os.h"
#include "qemu-device/aggregator_connection.h"

namespace gpuvm::dm::testing {

struct RecordedAccess {
  bool write = false;
  BarIndex bar = BarIndex::kBar0;
  uint64_t offset = 0;
  uint32_t size = 0;
  uint64_t value = 0;
  uint32_t vcpu = 0;
  friend bool operator==(const RecordedAccess&, const RecordedAccess&) = default;
};

// The byte an unwritten BAR byte reads as: depends on BAR and offset so misrouted reads show.
uint8_t FakePatternByte(BarIndex bar, uint64_t offset);

class FakeAggregator : public AggregatorConnection {
 public:
  FakeAggregator();

  Result<uint64_t> Read(BarIndex bar, uint64_t offset, uint32_t size, uint32_t vcpu) override;
  Status Write(BarIndex bar, uint64_t offset, uint32_t size, uint64_t value,
               uint32_t vcpu) override;
  // A posted write is only remembered; Settle() performs it (so a test sees that the guest's write
  // completed before the "aggregator" acted on it, and what came next). Any other access while one
  // is outstanding is an ordering violation, recorded (overtaken()).
  Status PostWrite(BarIndex bar, uint64_t offset, uint32_t size, uint64_t value,
                   uint32_t vcpu) override;
  Status Settle() override;
  int event_fd() const override { return events_fd_.get(); }
  Result<std::optional<AggregatorEvent>> PollEvent() override;
  Status AnswerBarRequest(uint32_t seq, const Status& result) override;

  // Test side.
  void PushEvent(const AggregatorEvent& event);
  void FailAccesses(bool fail);
  std::vector<RecordedAccess> accesses() const;  // performed ones, in order
  std::optional<RecordedAccess> posted() const;  // posted and not settled yet
  uint64_t settles() const;                      // Settle() calls that performed a write
  bool overtaken() const;  // an access came while a posted write was outstanding
  std::vector<std::pair<uint32_t, Status>> bar_answers() const;
  void Clear();

 private:
  Status WriteLocked(BarIndex bar, uint64_t offset, uint32_t size, uint64_t value, uint32_t vcpu);

  mutable std::mutex mu_;
  std::map<std::pair<BarIndex, uint64_t>, uint8_t> bytes_;
  std::vector<RecordedAccess> accesses_;
  std::deque<AggregatorEvent> events_;
  std::vector<std::pair<uint32_t, Status>> bar_answers_;
  bool fail_ = false;
  std::optional<RecordedAccess> posted_;
  uint64_t settles_ = 0;
  bool overtaken_ = false;
  os::UniqueFd events_fd_;
};

}  // namespace gpuvm::dm::testing

#endif  // GPUVM_QEMU_DEVICE_TESTING_FAKE_AGGREGATOR_H_
