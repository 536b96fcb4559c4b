// libFuzzer target: arbitrary bytes as a control request, then as a reply and a list body. The
// request goes through the whole service (parse, resolve, change shares/policy, pause, resume,
// kill-work, kernel limits, format) against three VMs and a driven dispatcher. Checked: nothing
// crashes; a request that parses re-parses to itself after formatting; the shares never sum past
// 100 % and never go negative; the reply is one this protocol can read back.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "aggregator/control/protocol.h"
#include "aggregator/control/service.h"

namespace {

using namespace gpuvm;

class ThreeVms final : public control::VmDirectory {
 public:
  std::vector<control::VmDescription> Vms() override {
    return {{1, "a", "fv", 1 << 28, 8}, {2, "b", "fv-lazy", 1 << 28, 8}, {3, "c", "pt", 0, 128}};
  }
};

class Sink final : public sched::SubmissionSink {
 public:
  Status Start(sched::VmId, sched::SubmissionHandle) override { return Status::Ok(); }
  Result<sched::SinkPoll> Poll(sched::VmId, sched::SubmissionHandle) override {
    return sched::SinkPoll::Done();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  static sched::ManualClock clock;
  static Sink sink;
  static ThreeVms vms;
  static std::unique_ptr<sched::Dispatcher> dispatcher = [] {
    sched::DispatcherOptions o;
    o.own_thread = false;
    return std::move(sched::Dispatcher::Create(&clock, &sink, o)).value();
  }();
  static control::ControlService service(&vms, dispatcher.get(), {});

  Result<control::Request> request = control::ParseRequest(text);
  if (request.ok()) {
    Result<control::Request> again = control::ParseRequest(control::FormatRequest(*request));
    if (!again.ok() || !(*again == *request)) std::abort();
  }
  const std::string reply = service.Handle(text);
  if (!control::ParseReply(reply).ok()) std::abort();
  double sum = 0;
  for (const sched::VmStats& s : dispatcher->Stats().scheduler.vms) {
    if (s.share_percent < 0) std::abort();
    sum += s.share_percent;
  }
  if (sum > 100 + 1e-6) std::abort();

  (void)control::ParseReply(text);
  (void)control::ParseList(text);
  return 0;
}
