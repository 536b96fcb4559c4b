#include "scheduler/policy.h"

#include "scheduler/band_policy.h"
#include "scheduler/credit_policy.h"
#include "scheduler/fifo_policy.h"

namespace gpuvm::sched {

std::unique_ptr<Policy> MakePolicy(PolicyKind kind, const SchedulerOptions& options) {
  switch (kind) {
    case PolicyKind::kFifo:
      return std::make_unique<FifoPolicy>();
    case PolicyKind::kCredit:
      return std::make_unique<CreditPolicy>(options.credit);
    case PolicyKind::kBand:
      return std::make_unique<BandPolicy>(options.band);
  }
  return std::make_unique<FifoPolicy>();
}

const VmView* FindView(VmViews vms, VmId vm) {
  for (const VmView& v : vms) {
    if (v.id == vm) return &v;
  }
  return nullptr;
}

std::optional<VmId> OldestWaiting(VmViews vms) {
  std::optional<VmId> best;
  uint64_t best_seq = 0;
  for (const VmView& v : vms) {
    if (v.queued == 0) continue;
    if (!best || v.head_seq < best_seq) {
      best = v.id;
      best_seq = v.head_seq;
    }
  }
  return best;
}

void ActiveWeights(VmViews vms, const std::vector<bool>& active, std::vector<double>* weights) {
  weights->assign(vms.size(), 0.0);
  double total = 0;
  size_t count = 0;
  for (size_t i = 0; i < vms.size(); ++i) {
    if (!active[i]) continue;
    total += vms[i].share;
    ++count;
  }
  for (size_t i = 0; i < vms.size(); ++i) {
    if (!active[i]) continue;
    (*weights)[i] = total > 0 ? vms[i].share / total : 1.0 / static_cast<double>(count);
  }
}

}  // namespace gpuvm::sched
