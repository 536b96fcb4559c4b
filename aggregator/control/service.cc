#include "aggregator/control/service.h"

#include <algorithm>
#include <cstdlib>
#include <optional>

#include "aggregator/control/metrics.h"
#include "base/json_number.h"
#include "base/log.h"
#include "base/share.h"
#include "base/vm_name.h"

namespace gpuvm::control {
namespace {

std::string Ns(sched::Duration d) { return std::to_string(d.count()); }

}  // namespace

ControlService::ControlService(VmDirectory* vms, sched::Dispatcher* dispatcher,
                               ServiceOptions options)
    : vms_(vms), dispatcher_(dispatcher), options_(std::move(options)) {}

void ControlService::Log(const std::string& line) const {
  if (options_.log) options_.log(line);
}

double ControlService::ConfiguredShare(const VmDescription& vm) const {
  // The operator's --vm-share first, then what the VM's configuration asks for, then the default.
  if (auto it = options_.shares.find(vm.name); it != options_.shares.end()) return it->second;
  if (vm.requested_share) return *vm.requested_share;
  return options_.default_share;
}

void ControlService::Reconcile() {
  const std::vector<VmDescription> vms = vms_->Vms();
  std::set<uint32_t> present;
  for (const VmDescription& vm : vms) {
    present.insert(vm.id);
    if (known_.contains(vm.id)) continue;
    const double share = ConfiguredShare(vm);
    Status added = dispatcher_->AddVm(vm.id, share);
    if (added.code() == StatusCode::kAlreadyExists) {
      // Someone else (the fv submission path) registered it already: fine.
    } else if (!added.ok()) {
      Log(LogEvent(LogLevel::kWarn, VmLogFields(vm.id, vm.name),
                   "configured share refused (" + added.message() +
                       "); it runs best effort (0%) until set-share"));
      added = dispatcher_->AddVm(vm.id, 0);
      if (!added.ok() && added.code() != StatusCode::kAlreadyExists) {
        Log(LogEvent(LogLevel::kError, VmLogFields(vm.id, vm.name),
                     "not scheduled: " + added.ToString()));
        continue;
      }
    }
    known_.insert(vm.id);
  }
  for (auto it = known_.begin(); it != known_.end();) {
    if (present.contains(*it)) {
      ++it;
      continue;
    }
    (void)dispatcher_->RemoveVm(*it);  // NotFound: someone else removed it already
    it = known_.erase(it);
  }
}

Result<uint32_t> ControlService::ResolveVm(const std::vector<VmDescription>& vms,
                                           std::string_view ref) const {
  const bool numeric = !ref.empty() && std::all_of(ref.begin(), ref.end(),
                                                   [](char c) { return c >= '0' && c <= '9'; });
  if (numeric) {
    for (const VmDescription& vm : vms) {
      if (std::to_string(vm.id) == ref) return vm.id;
    }
    return Status::NotFound("no VM with id " + std::string(ref));
  }
  std::vector<uint32_t> found;
  for (const VmDescription& vm : vms) {
    if (vm.name == ref) found.push_back(vm.id);
  }
  if (found.empty()) return Status::NotFound("no VM named '" + std::string(ref) + "'");
  if (found.size() > 1) {
    return Status::InvalidArgument(std::to_string(found.size()) + " VMs are named '" +
                                   std::string(ref) + "'; use the id");
  }
  return found[0];
}

ListReply ControlService::List(const std::vector<VmDescription>& vms) const {
  const sched::DispatcherStats stats = dispatcher_->Stats();
  ListReply list;
  list.policy = stats.scheduler.policy;
  for (const VmDescription& vm : vms) {
    VmRow row;
    static_cast<VmIdentity&>(row) = vm;
    if (const sched::VmStats* s = FindVmStats(stats.scheduler, vm.id)) {
      row.scheduled = true;
      row.share_percent = s->share_percent;
      row.usage_100ms = s->usage_100ms;
      row.usage_500ms = s->usage_500ms;
      row.usage_10s = s->usage_10s;
      row.queued = s->queue_depth;
      row.gpu_ms = std::chrono::duration<double, std::milli>(s->gpu_time).count();
      row.standing = s->standing;
      row.paused = s->paused;
    }
    if (auto it = stats.kernel_limits.find(vm.id); it != stats.kernel_limits.end()) {
      row.kernel_limit_ms = static_cast<uint32_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(it->second).count());
    }
    if (auto it = stats.killed_by_vm.find(vm.id); it != stats.killed_by_vm.end()) {
      row.killed = it->second;
    }
    list.vms.push_back(std::move(row));
  }
  return list;
}

std::string ControlService::StatsJson(const std::vector<VmDescription>& vms) const {
  const sched::DispatcherStats d = dispatcher_->Stats();
  const sched::SchedulerStats& s = d.scheduler;
  std::string j = "{\"policy\":" + JsonString(sched::PolicyKindName(s.policy));
  j += ",\"now_ns\":" + Ns(s.now.time_since_epoch());
  j += ",\"scheduler_time_ns\":" + Ns(s.scheduler_time);
  j += ",\"holds\":" + std::to_string(s.holds);
  j += ",\"policy_errors\":" + std::to_string(s.policy_errors);
  j += ",\"dispatcher\":{\"started\":" + std::to_string(d.started) +
       ",\"completed\":" + std::to_string(d.completed) +
       ",\"start_errors\":" + std::to_string(d.start_errors) +
       ",\"poll_errors\":" + std::to_string(d.poll_errors) +
       ",\"polls\":" + std::to_string(d.polls) + ",\"slices\":" + std::to_string(d.slices) +
       ",\"preemptions\":" + std::to_string(d.preemptions) +
       ",\"suspend_errors\":" + std::to_string(d.suspend_errors) +
       ",\"killed\":" + std::to_string(d.killed) +
       ",\"limit_kills\":" + std::to_string(d.limit_kills) + "}";
  j += ",\"vms\":[";
  bool first = true;
  for (const VmDescription& vm : vms) {
    if (!first) j += ",";
    first = false;
    j += "{\"id\":" + std::to_string(vm.id) + ",\"name\":" + JsonString(vm.name) +
         ",\"mode\":" + JsonString(vm.mode) + ",\"vram_bytes\":" + std::to_string(vm.vram_bytes) +
         ",\"vram_used_bytes\":" + std::to_string(vm.vram_used_bytes) +
         ",\"channels\":" + std::to_string(vm.channels) + ",\"traps\":" + std::to_string(vm.traps);
    j += ",\"refused\":{";
    for (size_t i = 0; i < vm.refused.size(); ++i) {
      j += (i ? "," : "") + JsonString(vm.refused[i].first) + ":" +
           std::to_string(vm.refused[i].second);
    }
    j += "}";
    const sched::VmStats* v = FindVmStats(s, vm.id);
    j += ",\"scheduled\":" + std::string(v != nullptr ? "true" : "false");
    if (v != nullptr) {
      j += ",\"share\":" + JsonNumber(v->share_percent) +
           ",\"queued\":" + std::to_string(v->queue_depth) +
           ",\"running\":" + (v->running ? "true" : "false") +
           ",\"submitted\":" + std::to_string(v->submitted) +
           ",\"dispatched\":" + std::to_string(v->dispatched) +
           ",\"completed\":" + std::to_string(v->completed) +
           ",\"preempted\":" + std::to_string(v->preempted) +
           ",\"gpu_time_ns\":" + Ns(v->gpu_time) + ",\"wait_total_ns\":" + Ns(v->wait_total) +
           ",\"wait_max_ns\":" + Ns(v->wait_max) +
           ",\"usage_100ms\":" + JsonNumber(v->usage_100ms) +
           ",\"usage_500ms\":" + JsonNumber(v->usage_500ms) +
           ",\"usage_10s\":" + JsonNumber(v->usage_10s) + ",\"credit_ns\":" + Ns(v->credit) +
           ",\"standing\":" + JsonString(v->standing) +
           ",\"scheduler_time_charged_ns\":" + Ns(v->scheduler_time_charged) +
           ",\"paused\":" + (v->paused ? "true" : "false");
      const auto limit = d.kernel_limits.find(vm.id);
      const auto killed = d.killed_by_vm.find(vm.id);
      j += ",\"kernel_limit_ms\":" +
           std::to_string(
               limit == d.kernel_limits.end()
                   ? 0
                   : std::chrono::duration_cast<std::chrono::milliseconds>(limit->second).count()) +
           ",\"killed\":" + std::to_string(killed == d.killed_by_vm.end() ? 0 : killed->second);
    }
    j += "}";
  }
  j += "]}\n";
  return j;
}

Reply ControlService::Execute(const Request& request) {
  Reconcile();
  const std::vector<VmDescription> vms = vms_->Vms();
  if (std::holds_alternative<ListRequest>(request)) {
    return Reply{Status::Ok(), FormatList(List(vms))};
  }
  if (std::holds_alternative<StatsRequest>(request)) {
    return Reply{Status::Ok(), StatsJson(vms)};
  }
  if (std::holds_alternative<MetricsRequest>(request)) {
    return Reply{Status::Ok(), PrometheusText(dispatcher_->Stats(), vms)};
  }
  if (const auto* set = std::get_if<SetShareRequest>(&request)) {
    Result<uint32_t> vm = ResolveVm(vms, set->vm);
    if (!vm.ok()) return Reply{vm.status(), ""};
    Status changed = dispatcher_->SetShare(*vm, set->percent);
    if (!changed.ok()) return Reply{changed, ""};
    std::string name;
    for (const VmDescription& d : vms) {
      if (d.id == *vm) name = d.name;
    }
    Log(LogEvent(LogLevel::kInfo, VmLogFields(*vm, name),
                 "share set to " + FormatSharePercent(set->percent) + "%"));
    return Reply{Status::Ok(), ""};
  }
  if (std::holds_alternative<PauseRequest>(request) ||
      std::holds_alternative<ResumeRequest>(request) ||
      std::holds_alternative<KillWorkRequest>(request) ||
      std::holds_alternative<SetKernelLimitRequest>(request)) {
    return ControlWork(vms, request);
  }
  if (const auto* token = std::get_if<VmTokenRequest>(&request)) {
    Result<std::string> issued = vms_->IssueVmToken(token->domid);
    if (!issued.ok()) return Reply{issued.status(), ""};
    Log(LogEvent(LogLevel::kInfo, "domid=" + std::to_string(token->domid), "VM token issued"));
    return Reply{Status::Ok(), *issued + "\n"};
  }
  const auto& set = std::get<SetSchedulerRequest>(request);
  dispatcher_->SetPolicy(set.policy);
  Log(LogEvent("scheduler set to " + std::string(sched::PolicyKindName(set.policy))));
  return Reply{Status::Ok(), ""};
}

Reply ControlService::ControlWork(const std::vector<VmDescription>& vms, const Request& request) {
  std::string ref;
  std::visit(
      [&](const auto& r) {
        if constexpr (requires { r.vm; }) ref = r.vm;
      },
      request);
  Result<uint32_t> vm = ResolveVm(vms, ref);
  if (!vm.ok()) return Reply{vm.status(), ""};
  const VmDescription* d = nullptr;
  for (const VmDescription& v : vms) {
    if (v.id == *vm) d = &v;
  }
  if (d == nullptr) return Reply{Status::NotFound("no VM with id " + std::to_string(*vm)), ""};
  if (d->mode == "pt") {
    // A pass-through VM owns the GPU: none of its work goes through the dispatcher.
    return Reply{Status::FailedPrecondition(
                     "VM " + std::to_string(*vm) +
                     " is pass-through: it owns the GPU and nothing of it is scheduled"),
                 ""};
  }
  const std::string fields = VmLogFields(*vm, d->name);
  if (std::holds_alternative<PauseRequest>(request)) {
    Status s = dispatcher_->Pause(*vm);
    if (!s.ok()) return Reply{s, ""};
    Log(LogEvent(LogLevel::kInfo, fields, "paused by the operator: its GPU work is switched out"));
    return Reply{Status::Ok(), ""};
  }
  if (std::holds_alternative<ResumeRequest>(request)) {
    Status s = dispatcher_->Resume(*vm);
    if (!s.ok()) return Reply{s, ""};
    Log(LogEvent(LogLevel::kInfo, fields, "resumed by the operator"));
    return Reply{Status::Ok(), ""};
  }
  if (const auto* limit = std::get_if<SetKernelLimitRequest>(&request)) {
    Status s = dispatcher_->SetKernelLimit(*vm, std::chrono::milliseconds(limit->ms));
    if (!s.ok()) return Reply{s, ""};
    Log(LogEvent(LogLevel::kInfo, fields,
                 limit->ms == 0
                     ? std::string("kernel limit off")
                     : "kernel limit set to " + std::to_string(limit->ms) + " ms of GPU time"));
    return Reply{Status::Ok(), ""};
  }
  Result<size_t> killed =
      dispatcher_->KillWork(*vm, Status::Aborted("killed by the operator (kill-work)"));
  if (!killed.ok()) return Reply{killed.status(), ""};
  Log(LogEvent(LogLevel::kWarn, fields,
               "kill-work: " + std::to_string(*killed) + " submissions failed by the operator"));
  return Reply{Status::Ok(), "killed=" + std::to_string(*killed) + "\n"};
}

std::string ControlService::Handle(std::string_view raw_request) {
  Result<Request> request = ParseRequest(raw_request);
  if (!request.ok()) return FormatReply(Reply{request.status(), ""});
  return FormatReply(Execute(*request));
}

}  // namespace gpuvm::control
