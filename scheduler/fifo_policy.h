// FIFO: the GPU serves submissions in the order they arrived, whoever sent them. The baseline of
// GPUvm's fairness experiment: it favours VMs with long kernels, since every submission counts the
// same however long it runs.
//
// Threading: called only by its Scheduler, under the Scheduler's lock.
#ifndef GPUVM_SCHEDULER_FIFO_POLICY_H_
#define GPUVM_SCHEDULER_FIFO_POLICY_H_

#include "scheduler/policy.h"

namespace gpuvm::sched {

class FifoPolicy final : public Policy {
 public:
  PolicyKind kind() const override { return PolicyKind::kFifo; }
  Choice Choose(VmViews vms, Trigger trigger, TimePoint now) override;
};

}  // namespace gpuvm::sched

#endif  // GPUVM_SCHEDULER_FIFO_POLICY_H_
