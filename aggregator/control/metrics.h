// The aggregator's figures in the Prometheus text exposition format (version 0.0.4): what
// `gpuvm-ctl metrics` prints and a Prometheus scrape reads. Every series names its VM by id, name
// and mode labels; counters end in _total; times are seconds, memory bytes, shares and usage ratios
// 0..1. The metric names and their meaning are listed in docs/CONTROL.md ("metrics").
//
// Threading: a pure function of its arguments.
#ifndef GPUVM_AGGREGATOR_CONTROL_METRICS_H_
#define GPUVM_AGGREGATOR_CONTROL_METRICS_H_

#include <string>
#include <string_view>
#include <vector>

#include "aggregator/control/service.h"
#include "scheduler/dispatcher.h"

namespace gpuvm::control {

std::string PrometheusText(const sched::DispatcherStats& stats,
                           const std::vector<VmDescription>& vms);

// The scheduler's figures of VM `id`, or null when the scheduler does not know it (also `stats`
// and `list` use this).
const sched::VmStats* FindVmStats(const sched::SchedulerStats& stats, uint32_t id);

// A label value as the format wants it: backslash, double quote and newline escaped.
std::string PrometheusLabelValue(std::string_view value);

}  // namespace gpuvm::control

#endif  // GPUVM_AGGREGATOR_CONTROL_METRICS_H_
