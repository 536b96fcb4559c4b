// The aggregator's control plane: the GPU dispatcher (scheduler/dispatcher.h) with its clock and
// engine port, the control service over the aggregator's VMs, and the control socket, put together
// for gpuvm-aggregator's main() in a few lines:
//
//   ControlOptions control;                        // ConsumeControlFlag() for each flag
//   GPUVM_ASSIGN_OR_RETURN(auto plane, ControlPlane::Create(server, control));
//
// The socket is served on the aggregator's server thread (AggregatorServer::AddWatch), where the
// VM list is read. fv VMs' submissions (IB_PUT writes on shadow channels) go through the dispatcher
// (fv_dispatch.h: installed with Aggregator::SetSubmissionQueueFactory); pt VMs own the GPU and
// bypass the scheduler, so their shares can be set and listed but their usage stays 0.
//
// Threading: created and destroyed on the thread that owns the AggregatorServer, before Run() /
// after it returned.
#ifndef GPUVM_AGGREGATOR_CONTROL_CONTROL_PLANE_H_
#define GPUVM_AGGREGATOR_CONTROL_CONTROL_PLANE_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "aggregator/control/control_server.h"
#include "aggregator/control/metrics_http_server.h"
#include "aggregator/control/service.h"
#include "aggregator/fv_dispatch.h"
#include "aggregator/server.h"
#include "scheduler/clock.h"
#include "scheduler/dispatcher.h"

namespace gpuvm::control {

struct ControlOptions {
  std::string socket_path;  // empty: the aggregator's socket path + "-control"
  sched::PolicyKind policy = sched::PolicyKind::kBand;
  std::map<std::string, double> shares;  // --vm-share NAME=PERCENT
  double default_share = 0;              // --default-share PERCENT
  // --trace-completions FILE: one line per completed submission, "vm,end_ns,gpu_ns,waited_ns" (end
  // on the monotonic clock, CLOCK_MONOTONIC; the GPU ran it during about [end - gpu, end); it was
  // queued `waited` before it started), for the fairness experiment (bench/fairness) to measure
  // shares from run intervals and to see when a VM had nothing submitted. A submission still
  // running is also charged slice by slice (the dispatcher's quantum): one line per slice,
  // "vm,end_ns,gpu_ns,0,slice", and its completion line has what was charged after its last slice.
  std::string trace_path;
  // --band-hold-us: BAND's longest hold (BandOptions::hold_max) for a VM about to resubmit.
  int64_t band_hold_us = 5000;
  // --band-buffering idle|preempt: idle (the default) holds the GPU for a VM about to resubmit, as
  // Gdev and GPUvm did; preempt (with a quantum) runs another VM meanwhile and preempts it when
  // that VM arrives (BandOptions::work_conserving): the GPU never idles for a hold, but the
  // awaited VM's gaps go to the others (docs/SCHEDULER.md "Buffering: idle or preempt").
  bool band_buffering_idle = true;
  // --band-lag-us: how far over its share (BandOptions::preempt_lag) a running VM may be before a
  // VM owed clearly more (twice as far) switches it out at a quantum boundary. 500 us, not
  // BandOptions' 2 ms: with 1 ms quanta it lowered BAND's worst 100 ms deviation on real fv VMs
  // (docs/results/2026-11-28-band-100ms.md); a switch costs the software GPU 15-175 us.
  int64_t band_lag_us = 500;
  // --band-threshold-us: the bound of BAND's credits (BandOptions::threshold): the most GPU time a
  // VM can be owed, or owe, at once — so the most one VM's payback can take from the others in a
  // window. 0 (the default): 5 ms when there is a quantum (no charge is then longer than about one
  // quantum), BandOptions' 50 ms without (a whole long kernel is charged at once, and a smaller
  // bound would forgive most of its debt).
  int64_t band_threshold_us = 0;
  // --max-run-ms: how long one submission may keep the engine from other VMs before the dispatcher
  // moves on (FvEngineSink's max_run; counted in time the aggregator ran, not wall time).
  int64_t max_run_ms = 5000;
  // --quantum-us: the dispatcher's preemption quantum (DispatcherOptions::quantum): a VM over its
  // share is switched out within about this long of GPU time when another waits. 0: GPUvm's
  // non-preemptive dispatch (a submission runs until it completes or max_run).
  int64_t quantum_us = 1000;
  // --kernel-limit-ms: every VM's kernel run-time limit when it is admitted (gpuvm-ctl
  // set-kernel-limit changes it per VM): a kernel charged more GPU time fails with its VM's other
  // work (docs/SCHEDULER.md "Pause, kernel limit, kill-work"). 0: none (the default).
  uint32_t kernel_limit_ms = 0;
  // --metrics-listen ADDR:PORT: serve `GET /metrics` over HTTP there (metrics_http_server.h); off
  // when unset. Only parsed here: ControlPlane::ServeMetrics binds it.
  std::optional<ListenAddress> metrics_listen;
};

// The control flags gpuvm-aggregator takes, for its usage text.
inline constexpr const char* kControlFlagsUsage =
    "[--control-socket PATH] [--scheduler fifo|credit|band]\n"
    "                        [--vm-share NAME=PERCENT]... [--default-share PERCENT]\n"
    "                        [--trace-completions FILE] [--band-hold-us US] [--band-lag-us US]\n"
    "                        [--band-buffering idle|preempt]\n"
    "                        [--band-threshold-us US] [--max-run-ms MS] [--quantum-us US]\n"
    "                        [--kernel-limit-ms MS] [--metrics-listen ADDR:PORT]";

// true when `flag` (with `value`) is one of ours and was applied; false when it is not ours;
// InvalidArgument for a bad value.
Result<bool> ConsumeControlFlag(std::string_view flag, std::string_view value,
                                ControlOptions* options);

class ControlPlane {
 public:
  static Result<std::unique_ptr<ControlPlane>> Create(aggregator::AggregatorServer& server,
                                                      const ControlOptions& options,
                                                      FILE* log = stderr);
  ~ControlPlane();

  sched::Dispatcher& dispatcher() { return *dispatcher_; }
  ControlService& service() { return *service_; }
  const std::string& socket_path() const { return control_server_->path(); }

  // Serves the metrics over HTTP on `address` (the server thread answers, like the control
  // socket; logs "metrics on http://ADDR:PORT/metrics" with the bound port). Before the server's
  // Run(); an error (port in use, an address not of this host) leaves nothing listening.
  Status ServeMetrics(const ListenAddress& address);
  MetricsHttpServer* metrics_http() { return metrics_http_.get(); }

 private:
  class AggregatorDirectory;
  ControlPlane() = default;

  aggregator::AggregatorServer* server_ = nullptr;
  FILE* log_ = nullptr;
  sched::MonotonicClock clock_;
  FILE* trace_ = nullptr;  // --trace-completions (written on the dispatch thread)
  std::unique_ptr<aggregator::FvEngineSink> sink_;
  std::unique_ptr<sched::Dispatcher> dispatcher_;
  std::unique_ptr<AggregatorDirectory> directory_;
  std::unique_ptr<ControlService> service_;
  std::unique_ptr<ControlServer> control_server_;
  std::unique_ptr<MetricsHttpServer> metrics_http_;
};

}  // namespace gpuvm::control

#endif  // GPUVM_AGGREGATOR_CONTROL_CONTROL_PLANE_H_
