// The control service: executes control requests (protocol.h) against the aggregator's VMs and its
// GPU dispatcher (scheduler/dispatcher.h), independent of any socket so it can be tested and fuzzed
// without one.
//
//  - The VMs come from a VmDirectory (the aggregator implements it on its control blocks).
//  Reconcile()
//    makes the dispatcher know exactly those VMs: a new VM gets the share its operator configured
//    for its name (ServiceOptions::shares, --vm-share), else the share its own configuration asks
//    for (VM_CONFIG's share field, docs/IPC.md: VmDescription::requested_share), else the
//    default; a VM whose configured share would push the sum past 100 % starts best effort (0)
//    and the reason is logged. A VM that left is removed.
//  - set-share resolves the VM by id or by name, then changes its share live; shares summing
//    past 100 %, negative values, unknown VMs and ambiguous names are refused with a clear error
//    and change nothing.
//  - set-scheduler switches the policy live; list and stats report.
//  - pause, resume, kill-work and set-kernel-limit resolve the VM likewise and act on its GPU
//    work through the dispatcher (docs/SCHEDULER.md "Pause, kernel limit, kill-work"); a pt VM
//    (nothing of it is scheduled) is refused; each change is logged with the VM's id and name.
//  - vm-token issues a one-time token for a domain's device model (docs/SECURITY.md); the log
//    says for which domain, never the token.
//
// Threading: one thread calls Reconcile/Handle/Execute (the aggregator's server thread, where the
// directory may be read); the dispatcher itself is thread-safe.
#ifndef GPUVM_AGGREGATOR_CONTROL_SERVICE_H_
#define GPUVM_AGGREGATOR_CONTROL_SERVICE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "aggregator/control/protocol.h"
#include "scheduler/dispatcher.h"

namespace gpuvm::control {

struct VmDescription : VmIdentity {
  // What the aggregator refused of the VM, per kind, in a fixed order (aggregator/refusals.h:
  // "mmio", "registers", ...); `stats` shows them as the VM's "refused" object.
  std::vector<std::pair<std::string, uint64_t>> refused = {};
  // The share (percent) the VM's own configuration asks for, if any.
  std::optional<double> requested_share = std::nullopt;
};

class VmDirectory {
 public:
  virtual ~VmDirectory() = default;
  // The VMs that exist now, by id ascending.
  virtual std::vector<VmDescription> Vms() = 0;
  // A one-time token for domain `domid`'s device model (aggregator/vm_tokens.h), as 64 hex digits.
  virtual Result<std::string> IssueVmToken(uint16_t domid) {
    (void)domid;
    return Status::Unimplemented("this aggregator issues no VM tokens");
  }
};

struct ServiceOptions {
  // Share (percent) by VM name.
  std::map<std::string, double> shares;
  double default_share = 0;
  // Lines for the aggregator's log, as base/log.h's LogEvent bodies (a VM's start with its
  // "vm=<id> name=<name>"); may be empty.
  std::function<void(const std::string&)> log;
};

class ControlService {
 public:
  // `vms` and `dispatcher` must outlive the service.
  ControlService(VmDirectory* vms, sched::Dispatcher* dispatcher, ServiceOptions options);

  // See the file comment. Called before every request, and by the aggregator when VMs come and go.
  void Reconcile();
  // A raw request in, a formatted reply out (never fails: errors are replies).
  std::string Handle(std::string_view raw_request);
  Reply Execute(const Request& request);

 private:
  Result<uint32_t> ResolveVm(const std::vector<VmDescription>& vms, std::string_view ref) const;
  double ConfiguredShare(const VmDescription& vm) const;
  ListReply List(const std::vector<VmDescription>& vms) const;
  std::string StatsJson(const std::vector<VmDescription>& vms) const;
  // pause, resume, kill-work, set-kernel-limit.
  Reply ControlWork(const std::vector<VmDescription>& vms, const Request& request);
  void Log(const std::string& line) const;

  VmDirectory* const vms_;
  sched::Dispatcher* const dispatcher_;
  const ServiceOptions options_;
  std::set<uint32_t> known_;  // VMs this service added to the dispatcher
};

}  // namespace gpuvm::control

#endif  // GPUVM_AGGREGATOR_CONTROL_SERVICE_H_
