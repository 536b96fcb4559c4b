// Fuzzes the scheduler's whole interface with arbitrary sequences of events and operator actions,
// valid and invalid, on a manual clock, and checks the protocol the owner relies on: nothing is
// dispatched onto a busy GPU, only submissions that were queued are dispatched (each once, or again
// after a preemption), nothing of a paused VM is dispatched, errors change nothing observable, and
// the per-VM counters always add up.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>

#include "scheduler/scheduler.h"

namespace gpuvm::sched {
namespace {

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint16_t Word() { return static_cast<uint16_t>(Byte() | (Byte() << 8)); }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Aborts with the broken condition, so a crash report names the invariant.
#define Check(condition)                                                               \
  do {                                                                                 \
    if (!(condition)) {                                                                \
      std::fprintf(stderr, "invariant broken at line %d: %s\n", __LINE__, #condition); \
      std::abort();                                                                    \
    }                                                                                  \
  } while (0)

struct Model {
  std::optional<SubmissionHandle> running;
  std::set<SubmissionHandle> queued;  // accepted and not yet dispatched (or preempted)
  std::map<SubmissionHandle, VmId> owner;
  std::set<SubmissionHandle> orphaned;  // running when its VM was removed: never requeued
  std::set<VmId> paused;                // the operator's pause (SetPaused)
};

void Act(const Decision& d, Model& m) {
  switch (d.action) {
    case Decision::Action::kDispatch:
      Check(!m.running);
      Check(m.queued.erase(d.submission) == 1);
      Check(m.owner.at(d.submission) == d.vm);
      Check(!m.paused.contains(d.vm));
      m.running = d.submission;
      break;
    case Decision::Action::kHold:
      Check(!m.running);
      break;
    case Decision::Action::kContinue:
    case Decision::Action::kPreempt:
      Check(false);  // only OnSliceEnd may answer these
      break;
    case Decision::Action::kNothing:
      break;
  }
}

}  // namespace
}  // namespace gpuvm::sched

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpuvm::sched;
  Reader in(data, size);
  ManualClock clock;
  SchedulerOptions options;
  const uint8_t policy_byte = in.Byte();
  options.policy = static_cast<PolicyKind>(policy_byte % 3);
  options.band.work_conserving = (policy_byte / 3) % 2 == 1;
  options.max_queue_depth = 1 + in.Byte() % 8;
  options.band.hold_max = std::chrono::microseconds(in.Byte() * 4);
  auto created = Scheduler::Create(&clock, options);
  Check(created.ok());
  Scheduler& s = **created;
  Model m;
  SubmissionHandle next_handle = 1;

  while (!in.empty()) {
    const uint8_t op = in.Byte();
    const VmId vm = in.Byte() % 6;
    switch (op % 13) {
      case 0:
        (void)s.AddVm(vm, static_cast<double>(in.Byte()) - 20);  // some negative, some past 100
        break;
      case 1: {
        auto dropped = s.RemoveVm(vm);
        if (dropped.ok()) {
          for (SubmissionHandle h : *dropped) Check(m.queued.erase(h) == 1);
          if (m.running && m.owner.at(*m.running) == vm) m.orphaned.insert(*m.running);
          m.paused.erase(vm);
        }
        break;
      }
      case 2:
        (void)s.SetShare(vm, static_cast<double>(in.Byte()) - 20);
        break;
      case 3: {
        // The policy, and whether the owner can preempt at arrivals (BAND's work-conserving
        // buffering depends on it), from one byte.
        const uint8_t b = in.Byte();
        s.SetPolicy(static_cast<PolicyKind>(b % 3));
        s.SetArrivalPreemption((b / 3) % 2 == 1);
        break;
      }
      case 4:
      case 5: {
        // Mostly fresh handles, sometimes a reused one (must be refused while it is held).
        const SubmissionHandle h =
            (in.Byte() % 4 == 0) ? 1 + in.Byte() % next_handle : next_handle++;
        const bool known = m.owner.contains(h) && (m.queued.contains(h) || m.running == h);
        auto d = s.OnSubmit(vm, h);
        if (d.ok()) {
          Check(!known);
          m.queued.insert(h);
          m.owner[h] = vm;
          if (m.running) Check(d->action == Decision::Action::kNothing);
          Act(*d, m);
        }
        break;
      }
      case 6: {
        const SubmissionHandle h = m.running && in.Byte() % 8 ? *m.running : in.Word();
        auto d =
            s.OnComplete(h, std::chrono::microseconds(in.Word()) - std::chrono::microseconds(100));
        if (d.ok()) {
          Check(m.running == h);
          m.running.reset();
          m.orphaned.erase(h);
          Act(*d, m);
        }
        break;
      }
      case 7: {
        const SubmissionHandle h = m.running && in.Byte() % 8 ? *m.running : in.Word();
        auto d = s.OnSliceEnd(h, std::chrono::microseconds(in.Word()));
        if (d.ok()) {
          Check(m.running == h);
          if (d->action == Decision::Action::kPreempt) {
            m.running.reset();
            // Back at the head of its VM's queue, unless its VM was removed.
            if (!m.orphaned.erase(h)) m.queued.insert(h);
          } else {
            Check(d->action == Decision::Action::kContinue);
          }
        }
        break;
      }
      case 8: {
        auto d = s.OnGpuIdle();
        Check(d.ok() == !m.running.has_value());
        if (d.ok()) Act(*d, m);
        break;
      }
      case 9: {
        const Decision d = s.OnTimer();
        if (m.running) Check(d.action == Decision::Action::kNothing);
        Act(d, m);
        break;
      }
      case 10:
        clock.Advance(std::chrono::microseconds(in.Word()) * (op >> 4));
        clock.set_read_cost(std::chrono::nanoseconds(in.Byte()));
        break;
      case 11: {
        const bool pause = in.Byte() % 2 == 0;
        const bool was = m.paused.contains(vm);
        const gpuvm::Status st = s.SetPaused(vm, pause);
        if (st.ok()) {
          Check(was != pause);
          if (pause) {
            m.paused.insert(vm);
          } else {
            m.paused.erase(vm);
          }
        }
        break;
      }
      case 12: {
        auto dropped = s.DropQueued(vm);
        if (dropped.ok()) {
          for (SubmissionHandle h : *dropped) {
            Check(m.queued.erase(h) == 1);
            Check(m.owner.at(h) == vm);
          }
        }
        break;
      }
    }
    for (const VmStats& v : s.Stats().vms) Check(v.paused == m.paused.contains(v.vm));
    // The counters add up for every VM, and queued work is exactly what the model holds.
    uint64_t queued_total = 0;
    for (const VmStats& v : s.Stats().vms) {
      queued_total += v.queue_depth;
      Check(v.usage_100ms >= 0 && v.usage_100ms <= 1.0001);
    }
    Check(queued_total == m.queued.size());
  }
  return 0;
}
