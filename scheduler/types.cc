#include "scheduler/types.h"

#include <string>

namespace gpuvm::sched {

std::string_view PolicyKindName(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::kFifo:
      return "fifo";
    case PolicyKind::kCredit:
      return "credit";
    case PolicyKind::kBand:
      return "band";
  }
  return "unknown";
}

Result<PolicyKind> ParsePolicyKind(std::string_view name) {
  for (PolicyKind kind : {PolicyKind::kFifo, PolicyKind::kCredit, PolicyKind::kBand}) {
    if (name == PolicyKindName(kind)) return kind;
  }
  return Status::InvalidArgument("unknown scheduler policy '" + std::string(name) +
                                 "' (expected fifo, credit or band)");
}

std::string ToString(const Decision& d) {
  switch (d.action) {
    case Decision::Action::kNothing:
      return "nothing";
    case Decision::Action::kDispatch:
      return "dispatch vm " + std::to_string(d.vm) + " submission " + std::to_string(d.submission);
    case Decision::Action::kHold:
      return "hold until " + std::to_string(d.until.time_since_epoch().count()) + " ns";
    case Decision::Action::kContinue:
      return "continue";
    case Decision::Action::kPreempt:
      return "preempt";
  }
  return "?";
}

}  // namespace gpuvm::sched
