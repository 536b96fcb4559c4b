#include "scheduler/types.h"

#include <string>

#include "base/enum_names.h"
namespace gpuvm::sched {

namespace {

constexpr EnumName<PolicyKind> kPolicyNames[] = {
    {PolicyKind::kFifo, "fifo"}, {PolicyKind::kCredit, "credit"}, {PolicyKind::kBand, "band"}};

}  // namespace

std::string_view PolicyKindName(PolicyKind kind) { return NameOf(kPolicyNames, kind, "unknown"); }

Result<PolicyKind> ParsePolicyKind(std::string_view name) {
  if (std::optional<PolicyKind> kind = ValueNamed(kPolicyNames, name)) return *kind;
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
