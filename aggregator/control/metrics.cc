#include "aggregator/control/metrics.h"

#include <chrono>
#include <functional>

#include "base/json_number.h"

namespace gpuvm::control {
namespace {

double Seconds(sched::Duration d) { return std::chrono::duration<double>(d).count(); }

// Writes one metric family: its HELP and TYPE lines, then a sample per VM that has a value.
class Writer {
 public:
  explicit Writer(std::string* out) : out_(out) {}
  void Family(std::string_view name, std::string_view type, std::string_view help) {
    *out_ += "# HELP " + std::string(name) + " " + std::string(help) + "\n";
    *out_ += "# TYPE " + std::string(name) + " " + std::string(type) + "\n";
  }
  void Sample(std::string_view name, std::string_view labels, double value) {
    *out_ += std::string(name);
    if (!labels.empty()) *out_ += "{" + std::string(labels) + "}";
    *out_ += " " + JsonNumber(value) + "\n";  // digits or the shortest round-trip decimal
  }

 private:
  std::string* out_;
};

std::string VmLabels(const VmDescription& vm) {
  return "id=\"" + std::to_string(vm.id) + "\",vm=\"" + PrometheusLabelValue(vm.name) +
         "\",mode=\"" + PrometheusLabelValue(vm.mode) + "\"";
}

}  // namespace

const sched::VmStats* FindVmStats(const sched::SchedulerStats& stats, uint32_t id) {
  for (const sched::VmStats& v : stats.vms) {
    if (v.vm == id) return &v;
  }
  return nullptr;
}

std::string PrometheusLabelValue(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string PrometheusText(const sched::DispatcherStats& stats,
                           const std::vector<VmDescription>& vms) {
  std::string out;
  Writer w(&out);
  const sched::SchedulerStats& s = stats.scheduler;
  w.Family("gpuvm_scheduler_policy", "gauge", "The scheduling policy in force (1 for it).");
  w.Sample("gpuvm_scheduler_policy",
           "policy=\"" + std::string(sched::PolicyKindName(s.policy)) + "\"", 1);
  w.Family("gpuvm_scheduler_seconds_total", "counter",
           "The scheduler's own time while the GPU ran nothing.");
  w.Sample("gpuvm_scheduler_seconds_total", "", Seconds(s.scheduler_time));
  const std::pair<const char*, uint64_t> dispatcher[] = {
      {"gpuvm_dispatcher_started_total", stats.started},
      {"gpuvm_dispatcher_completed_total", stats.completed},
      {"gpuvm_dispatcher_start_errors_total", stats.start_errors},
      {"gpuvm_dispatcher_poll_errors_total", stats.poll_errors}};
  for (const auto& [name, value] : dispatcher) {
    w.Family(name, "counter", "Submissions the dispatcher started, completed, or failed to.");
    w.Sample(name, "", double(value));
  }
  w.Family("gpuvm_vms", "gauge", "VMs admitted.");
  w.Sample("gpuvm_vms", "", double(vms.size()));

  // Per VM. A family's samples follow its HELP/TYPE; a VM the scheduler does not know (a pt VM, or
  // one that has not submitted yet) has no scheduling samples.
  struct PerVm {
    const char* name;
    const char* type;
    const char* help;
    std::function<bool(const VmDescription&, const sched::VmStats*, double*)> value;
  };
  const auto scheduled = [](auto get) {
    return [get](const VmDescription&, const sched::VmStats* v, double* out) {
      if (v == nullptr) return false;
      *out = get(*v);
      return true;
    };
  };
  const auto described = [](auto get) {
    return [get](const VmDescription& d, const sched::VmStats*, double* out) {
      *out = double(get(d));
      return true;
    };
  };
  const PerVm per_vm[] = {
      {"gpuvm_vm_vram_bytes", "gauge", "VRAM the VM sees.",
       described([](const VmDescription& d) { return d.vram_bytes; })},
      {"gpuvm_vm_vram_used_bytes", "gauge", "VRAM the VM holds now (fv's dynamic VRAM grows).",
       described([](const VmDescription& d) { return d.vram_used_bytes; })},
      {"gpuvm_vm_channels", "gauge", "GPU channels the VM may use.",
       described([](const VmDescription& d) { return d.channels; })},
      {"gpuvm_vm_traps_total", "counter", "BAR accesses of the VM that trapped (reads + writes).",
       described([](const VmDescription& d) { return d.traps; })},
      {"gpuvm_vm_share_ratio", "gauge", "The VM's configured share of GPU time (0 = none set).",
       scheduled([](const sched::VmStats& v) { return v.share_percent / 100; })},
      {"gpuvm_vm_gpu_seconds_total", "counter", "GPU time the VM's submissions used.",
       scheduled([](const sched::VmStats& v) { return Seconds(v.gpu_time); })},
      {"gpuvm_vm_submissions_total", "counter", "Submissions of the VM completed.",
       scheduled([](const sched::VmStats& v) { return double(v.completed); })},
      {"gpuvm_vm_queued_submissions", "gauge", "Submissions of the VM waiting for the GPU.",
       scheduled([](const sched::VmStats& v) { return double(v.queue_depth); })},
      {"gpuvm_vm_wait_seconds_total", "counter",
       "Time the VM's submissions waited from arrival to dispatch.",
       scheduled([](const sched::VmStats& v) { return Seconds(v.wait_total); })},
      {"gpuvm_vm_paused", "gauge", "1 while the operator has the VM's GPU work paused.",
       scheduled([](const sched::VmStats& v) { return v.paused ? 1.0 : 0.0; })},
  };
  for (const PerVm& m : per_vm) {
    w.Family(m.name, m.type, m.help);
    for (const VmDescription& vm : vms) {
      double value = 0;
      if (m.value(vm, FindVmStats(s, vm.id), &value)) w.Sample(m.name, VmLabels(vm), value);
    }
  }
  // Work failed by the operator's kill-work or the VM's kernel limit (VMs the dispatcher knows).
  w.Family("gpuvm_vm_killed_submissions_total", "counter",
           "Submissions of the VM failed by kill-work or its kernel limit.");
  for (const VmDescription& vm : vms) {
    if (auto it = stats.killed_by_vm.find(vm.id); it != stats.killed_by_vm.end()) {
      w.Sample("gpuvm_vm_killed_submissions_total", VmLabels(vm), double(it->second));
    }
  }
  // Usage over the scheduler's windows, one series per window.
  w.Family("gpuvm_vm_gpu_usage_ratio", "gauge",
           "Fraction of wall-clock time the VM used the GPU within the window.");
  for (const VmDescription& vm : vms) {
    const sched::VmStats* v = FindVmStats(s, vm.id);
    if (v == nullptr) continue;
    const std::pair<const char*, double> windows[] = {
        {"100ms", v->usage_100ms}, {"500ms", v->usage_500ms}, {"10s", v->usage_10s}};
    for (const auto& [window, usage] : windows) {
      w.Sample("gpuvm_vm_gpu_usage_ratio", VmLabels(vm) + ",window=\"" + window + "\"", usage);
    }
  }
  // What the aggregator refused of the VM, per kind: the hostile-guest view (faults of the guest).
  w.Family("gpuvm_vm_refused_total", "counter",
           "Accesses and requests of the VM the aggregator refused, per kind.");
  for (const VmDescription& vm : vms) {
    for (const auto& [kind, count] : vm.refused) {
      w.Sample("gpuvm_vm_refused_total",
               VmLabels(vm) + ",kind=\"" + PrometheusLabelValue(kind) + "\"", double(count));
    }
  }
  return out;
}

}  // namespace gpuvm::control
