#include "aggregator/control/control_plane.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "aggregator/fv_gpu.h"
#include "base/log.h"
#include "base/share.h"
#include "base/vm_name.h"
#include "gpu/hw/pfifo.h"

namespace gpuvm::control {

class ControlPlane::AggregatorDirectory final : public VmDirectory {
 public:
  explicit AggregatorDirectory(aggregator::Aggregator* aggregator) : aggregator_(aggregator) {}

  std::vector<VmDescription> Vms() override {
    std::vector<VmDescription> out;
    for (aggregator::VmId id : aggregator_->vm_ids()) {
      const aggregator::VmControlBlock* vm = aggregator_->Find(id);
      if (vm == nullptr) continue;
      VmDescription d;
      d.id = id;
      d.name = vm->config.name;
      if (vm->config.share_milli != ipc::kNoShare) {
        d.requested_share = vm->config.share_milli / 1000.0;
      }
      const ipc::VmMode mode = vm->vgpu ? vm->vgpu->mode() : vm->config.mode;
      d.mode = mode == ipc::VmMode::kPassThrough          ? "pt"
               : mode == ipc::VmMode::kFullVirtualization ? "fv"
                                                          : "pv";
      d.vram_bytes = vm->vgpu ? vm->vgpu->vram_bytes() : 0;
      d.vram_used_bytes = d.vram_bytes;
      for (size_t bar = 0; bar < vm->counters.reads.size(); ++bar) {
        d.traps += vm->counters.reads[bar] + vm->counters.writes[bar];
      }
      // A pt VM owns every channel of the GPU; an fv VM its partition's range.
      d.channels = mode == ipc::VmMode::kPassThrough ? gf100::pfifo::kChannels : 0;
      if (const auto* fv = dynamic_cast<const aggregator::FullVirtGpu*>(vm->vgpu.get())) {
        d.channels = fv->partition().channels;
        if (const aggregator::VramMap* map = fv->vram_map())
          d.vram_used_bytes = map->assigned_bytes();
        // Which flavour: fv-naive ... fv-optimized, pv-naive or pv-multicall (the aggregator's
        // default filled in where the VM's configuration left it to us).
        d.mode =
            vm->config.variant == ipc::VgpuVariant::kPvDrm ? "pvdrm" : FvModeName(fv->fv_mode());
      }
      const aggregator::RefusalCounts refused = vm->refusals();
      for (size_t k = 0; k < refused.size(); ++k) {
        d.refused.emplace_back(aggregator::RefusalKey(aggregator::Refusal(k)), refused[k]);
      }
      out.push_back(std::move(d));
    }
    return out;
  }

  Result<std::string> IssueVmToken(uint16_t domid) override {
    GPUVM_ASSIGN_OR_RETURN(ipc::VmToken token, aggregator_->vm_tokens().Issue(domid));
    return ipc::FormatVmToken(token);
  }

 private:
  aggregator::Aggregator* const aggregator_;
};

namespace {

// A whole number of `unit` from `min` to `max` for `flag`.
Result<int64_t> ParseWhole(std::string_view flag, std::string_view value, int64_t min, int64_t max,
                           const char* unit) {
  const std::string v(value);
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || end != v.c_str() + v.size() || n < min || n > max) {
    return Status::InvalidArgument(std::string(flag) + " wants " + std::to_string(min) + " to " +
                                   std::to_string(max) + " " + unit + ", not '" + v + "'");
  }
  return int64_t{n};
}

// The flags that take a whole number in a range, each into its field of ControlOptions.
struct WholeFlag {
  std::string_view flag;
  int64_t ControlOptions::*field;
  int64_t min;
  int64_t max;
  const char* unit;
};
constexpr WholeFlag kWholeFlags[] = {
    {"--band-hold-us", &ControlOptions::band_hold_us, 0, 1'000'000, "microseconds"},
    {"--band-lag-us", &ControlOptions::band_lag_us, 0, 1'000'000, "microseconds"},
    // Below a millisecond a VM could not be owed even one quantum.
    {"--band-threshold-us", &ControlOptions::band_threshold_us, 1000, 10'000'000, "microseconds"},
    {"--max-run-ms", &ControlOptions::max_run_ms, 1, 3'600'000, "milliseconds"},
    {"--quantum-us", &ControlOptions::quantum_us, 0, 1'000'000, "microseconds"},
};

}  // namespace

Result<bool> ConsumeControlFlag(std::string_view flag, std::string_view value,
                                ControlOptions* options) {
  for (const WholeFlag& f : kWholeFlags) {
    if (flag != f.flag) continue;
    GPUVM_ASSIGN_OR_RETURN(options->*f.field, ParseWhole(flag, value, f.min, f.max, f.unit));
    return true;
  }
  if (flag == "--control-socket") {
    if (value.empty()) return Status::InvalidArgument("--control-socket wants a path");
    options->socket_path = std::string(value);
    return true;
  }
  if (flag == "--scheduler") {
    Result<sched::PolicyKind> kind = sched::ParsePolicyKind(value);
    if (!kind.ok()) {
      return Status::InvalidArgument("--scheduler wants fifo, credit or band, not '" +
                                     std::string(value) + "'");
    }
    options->policy = *kind;
    return true;
  }
  if (flag == "--vm-share") {
    const size_t eq = value.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return Status::InvalidArgument("--vm-share wants NAME=PERCENT, not '" + std::string(value) +
                                     "'");
    }
    // NAME as VMs are named (base/vm_name.h).
    GPUVM_RETURN_IF_ERROR(CheckVmName(value.substr(0, eq)).WithContext("--vm-share"));
    GPUVM_ASSIGN_OR_RETURN(double percent, ParseSharePercent(value.substr(eq + 1)));
    double sum = percent;
    for (const auto& [name, share] : options->shares) {
      if (name != value.substr(0, eq)) sum += share;
    }
    if (sum > 100 + 1e-6) {
      return Status::InvalidArgument("--vm-share: the configured shares sum past 100%");
    }
    options->shares[std::string(value.substr(0, eq))] = percent;
    return true;
  }
  if (flag == "--trace-completions") {
    if (value.empty()) return Status::InvalidArgument("--trace-completions wants a file");
    options->trace_path = std::string(value);
    return true;
  }
  if (flag == "--band-buffering") {
    if (value != "preempt" && value != "idle") {
      return Status::InvalidArgument("--band-buffering wants idle or preempt, not '" +
                                     std::string(value) + "'");
    }
    options->band_buffering_idle = value == "idle";
    return true;
  }
  if (flag == "--kernel-limit-ms") {
    Result<uint32_t> ms = ParseKernelLimitMs(value);
    if (!ms.ok()) return ms.status().WithContext("--kernel-limit-ms");
    options->kernel_limit_ms = *ms;
    return true;
  }
  if (flag == "--metrics-listen") {
    GPUVM_ASSIGN_OR_RETURN(options->metrics_listen, ParseListenAddress(value));
    return true;
  }
  if (flag == "--default-share") {
    GPUVM_ASSIGN_OR_RETURN(options->default_share, ParseSharePercent(value));
    return true;
  }
  return false;
}

Result<std::unique_ptr<ControlPlane>> ControlPlane::Create(aggregator::AggregatorServer& server,
                                                           const ControlOptions& options,
                                                           FILE* log) {
  std::unique_ptr<ControlPlane> p(new ControlPlane());
  p->server_ = &server;
  p->log_ = log;
  p->sink_ =
      std::make_unique<aggregator::FvEngineSink>(std::chrono::milliseconds(options.max_run_ms));
  sched::DispatcherOptions dispatch;
  dispatch.scheduler.policy = options.policy;
  // Completion is polled when the GPU does not say a channel ran dry (FvEngineSink::SetWake below;
  // the software GPU does); 250 us keeps the dispatch thread's own CPU use low on a host that also
  // runs the software GPU and the VMs.
  dispatch.poll_interval = std::chrono::microseconds(250);
  // A guest's resubmission gap through traps and the device model is longer than Gdev's in-kernel
  // 500 us; BAND waits at most twice the gap it learned, never more than this.
  dispatch.scheduler.band.hold_max = std::chrono::microseconds(options.band_hold_us);
  dispatch.scheduler.band.preempt_lag = std::chrono::microseconds(options.band_lag_us);
  dispatch.scheduler.band.work_conserving = !options.band_buffering_idle;
  if (options.band_threshold_us > 0) {
    dispatch.scheduler.band.threshold = std::chrono::microseconds(options.band_threshold_us);
  } else if (options.quantum_us > 0) {
    dispatch.scheduler.band.threshold = std::chrono::milliseconds(5);
  }
  dispatch.quantum = std::chrono::microseconds(options.quantum_us);
  dispatch.kernel_limit = std::chrono::milliseconds(options.kernel_limit_ms);
  if (!options.trace_path.empty()) {
    p->trace_ = std::fopen(options.trace_path.c_str(), "w");
    if (p->trace_ == nullptr) {
      return Status::InvalidArgument("--trace-completions: cannot write " + options.trace_path);
    }
    FILE* trace = p->trace_;
    sched::MonotonicClock* clock = &p->clock_;
    dispatch.on_done = [trace, clock](const sched::SubmissionDone& d) {
      std::fprintf(trace, "%u,%lld,%lld,%lld\n", unsigned(d.vm),
                   static_cast<long long>(clock->Now().time_since_epoch().count()),
                   static_cast<long long>(d.gpu_time.count()),
                   static_cast<long long>(d.waited.count()));
      std::fflush(trace);  // the aggregator may end by a signal
    };
    dispatch.on_slice = [trace, clock](const sched::SubmissionDone& d) {
      std::fprintf(trace, "%u,%lld,%lld,0,slice\n", unsigned(d.vm),
                   static_cast<long long>(clock->Now().time_since_epoch().count()),
                   static_cast<long long>(d.gpu_time.count()));
      std::fflush(trace);
    };
  }
  GPUVM_ASSIGN_OR_RETURN(p->dispatcher_,
                         sched::Dispatcher::Create(&p->clock_, p->sink_.get(), dispatch));
  // The software GPU says when a channel runs dry: completion is seen then, not at the next poll,
  // and the next submission starts on the GPU's engine thread (PollNow) without a thread hand-off.
  p->sink_->SetWake([d = p->dispatcher_.get()] { (void)d->PollNow(); });
  p->directory_ = std::make_unique<AggregatorDirectory>(&server.aggregator());
  ServiceOptions service;
  service.shares = options.shares;
  service.default_share = options.default_share;
  ControlServerOptions socket;
  socket.group = server.socket_group();
  if (log != nullptr) {
    service.log = [log](const std::string& line) {
      WriteLogLine(log, "gpuvm-aggregator.control", line);
    };
    socket.log = service.log;
  }
  p->service_ = std::make_unique<ControlService>(p->directory_.get(), p->dispatcher_.get(),
                                                 std::move(service));
  const std::string path =
      options.socket_path.empty() ? ControlSocketPathFor(server.path()) : options.socket_path;
  GPUVM_ASSIGN_OR_RETURN(p->control_server_,
                         ControlServer::Create(path, p->service_.get(), std::move(socket)));
  ControlPlane* plane = p.get();
  server.aggregator().SetSubmissionQueueFactory([plane](aggregator::FvHost* host) {
    return std::unique_ptr<aggregator::SubmissionQueue>(new aggregator::DispatchedSubmissionQueue(
        host, plane->dispatcher_.get(), plane->sink_.get(),
        [plane] { plane->service_->Reconcile(); }));
  });
  ControlServer* control = p->control_server_.get();
  GPUVM_RETURN_IF_ERROR(server.AddWatch(control->fd(), [control] { control->Serve(); }));
  if (log != nullptr) {
    WriteLogLine(log, "gpuvm-aggregator",
                 LogEvent("control socket " + path + ", scheduler " +
                          std::string(sched::PolicyKindName(options.policy))));
  }
  return p;
}

Status ControlPlane::ServeMetrics(const ListenAddress& address) {
  ControlService* service = service_.get();
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<MetricsHttpServer> http,
                         MetricsHttpServer::Create(address, [service] {
                           // As `gpuvm-ctl metrics` asks: on the server thread, where the VM
                           // directory may be read.
                           return service->Execute(MetricsRequest{}).body;
                         }));
  MetricsHttpServer* watched = http.get();
  GPUVM_RETURN_IF_ERROR(server_->AddWatch(watched->fd(), [watched] { watched->Serve(); }));
  metrics_http_ = std::move(http);
  if (log_ != nullptr) {
    WriteLogLine(log_, "gpuvm-aggregator",
                 LogEvent(LogLevel::kInfo, LogField("url", metrics_http_->url()).substr(1),
                          "metrics on " + metrics_http_->url()));
  }
  return Status::Ok();
}

ControlPlane::~ControlPlane() {
  if (server_ != nullptr) server_->aggregator().SetSubmissionQueueFactory(nullptr);
  // The dispatcher's thread stops before the sink it calls goes; the GPU stops waking it first.
  if (sink_ != nullptr) sink_->SetWake(nullptr);
  dispatcher_.reset();
  if (trace_ != nullptr) std::fclose(trace_);
}

}  // namespace gpuvm::control
