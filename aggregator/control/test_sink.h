// Test support for the control plane's tests (service_test.cc, control_server_test.cc): a GPU
// dispatcher's sink that refuses every submission, for tests of the control service that never run
// GPU work but need a dispatcher to set shares and policies on. Header-only; not linked into
// production code.
//
// Threading: stateless.
#ifndef GPUVM_AGGREGATOR_CONTROL_TEST_SINK_H_
#define GPUVM_AGGREGATOR_CONTROL_TEST_SINK_H_

#include "scheduler/dispatcher.h"

namespace gpuvm::control {

class RefusingSink final : public sched::SubmissionSink {
 public:
  Status Start(sched::VmId, sched::SubmissionHandle) override {
    return Status::Unimplemented("test");
  }
  Result<sched::SinkPoll> Poll(sched::VmId, sched::SubmissionHandle) override {
    return sched::SinkPoll::Done();
  }
};

}  // namespace gpuvm::control

#endif  // GPUVM_AGGREGATOR_CONTROL_TEST_SINK_H_
