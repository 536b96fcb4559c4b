// The seam between full virtualization and GPU scheduling. Under fv a guest's write of IB_PUT to
// its USER page (BAR1) never reaches the GPU directly: the aggregator turns it into a Submission
// and hands it to a SubmissionQueue, which decides when to forward it to the physical channel (by
// calling the forwarder it was built with). FifoSubmissionQueue forwards every submission at once,
// in the order they arrive (GPUvm's FIFO). The scheduler engineer's dispatcher (scheduler/,
// BAND/CREDIT) replaces it by implementing this interface; docs/FULL-VIRTUALIZATION.md, "Submission
// queue".
//
// Rules an implementation keeps: a VM's submissions reach the GPU in the order the VM made them
// (per physical channel, IB_PUT values only move forward in the guest's ring order; forwarding a
// later value covers the earlier ones); after ForgetVm nothing of that VM is forwarded.
//
// Threading: the aggregator's owner thread calls Submit and ForgetVm; the forwarder runs on
// whichever thread the implementation forwards from (FIFO: inside Submit).
#ifndef GPUVM_AGGREGATOR_SUBMISSION_QUEUE_H_
#define GPUVM_AGGREGATOR_SUBMISSION_QUEUE_H_

#include <cstdint>
#include <functional>

#include "base/status.h"

namespace gpuvm::aggregator {

struct Submission {
  uint32_t vm = 0;                // aggregator VM id
  uint32_t physical_channel = 0;  // the shadow channel's physical id
  uint32_t ib_put = 0;            // the value the guest wrote (already range-checked)
};

using SubmissionForwarder = std::function<void(const Submission&)>;

class SubmissionQueue {
 public:
  virtual ~SubmissionQueue() = default;
  // Not OK when the submission is refused (a full queue: the doorbell is dropped; the caller
  // counts and logs it as the VM's refusal).
  virtual Status Submit(const Submission& submission) = 0;
  virtual void ForgetVm(uint32_t vm) = 0;
  // Submitted and not yet forwarded.
  virtual uint64_t pending() const = 0;
  virtual uint64_t forwarded() const = 0;
};

class FifoSubmissionQueue final : public SubmissionQueue {
 public:
  explicit FifoSubmissionQueue(SubmissionForwarder forward) : forward_(std::move(forward)) {}
  Status Submit(const Submission& submission) override {
    forward_(submission);
    ++forwarded_;
    return Status::Ok();
  }
  void ForgetVm(uint32_t) override {}
  uint64_t pending() const override { return 0; }
  uint64_t forwarded() const override { return forwarded_; }

 private:
  SubmissionForwarder forward_;
  uint64_t forwarded_ = 0;
};

}  // namespace gpuvm::aggregator

#endif  // GPUVM_AGGREGATOR_SUBMISSION_QUEUE_H_
