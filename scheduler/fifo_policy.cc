#include "scheduler/fifo_policy.h"

namespace gpuvm::sched {

Choice FifoPolicy::Choose(VmViews vms, Trigger /*trigger*/, TimePoint /*now*/) {
  const std::optional<VmId> oldest = OldestWaiting(vms);
  return oldest ? Choice::Dispatch(*oldest) : Choice::Idle();
}

}  // namespace gpuvm::sched
