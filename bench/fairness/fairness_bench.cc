// gpuvm-fairness-bench: GPUvm's fairness experiment (Figs 4.11-4.13) in real time, through the
// aggregator's dispatcher (scheduler/dispatcher.h) on its own dispatch thread and the monotonic
// clock, with VMs as threads that loop "submit, wait for completion, think 50 us, submit".
//
// Cases: 2, 4 and 8 VMs with equal shares, half looping madd (1 ms of GPU work per submission),
// half long-madd (15x); unequal shares 10/90 (long kernels on the 10 % VM, and on the 90 % VM) and
// 20/30/50; each under FIFO, CREDIT and BAND. Fairness is measured from the engine's exact run
// intervals (not from the scheduler's accounting): each VM's share of the GPU time delivered in
// back-to-back 500 ms and 100 ms windows, against its target; printed per case and policy: worst
// deviation per window size, each VM's mean share, Jain's index (worst window), GPU utilization;
// then the time to finish a fixed amount of GPU work per VM against FIFO (Fig 4.13), including an
// all-madd case (BAND's overhead on madd).
//
// The engines: `--engine synthetic` (default) is a timed engine: a submission occupies it for its
// nominal GPU time (+/- 10 % jitter), measured on the monotonic clock, and its completion is
// signalled like an interrupt (a thread sleeping until then calls Dispatcher::Wake); the
// dispatcher, scheduler, threads and clock are the ones the aggregator runs. `--engine fv` runs the
// real thing: gpuvm-aggregator on the software GPU and one fv gpuvm-vm per VM (its share in its
// configuration, --share) running gpuvm-fairness-guest, all VMs looping from a common start; the
// run intervals come from the aggregator's completion trace (--trace-completions: the device's own
// GPU time per submission, CHAN_BUSY_US), and windows in which a VM had nothing submitted for a
// tenth of the window are also reported left out ("VMs present": a stalled guest process is not the
// scheduler's doing). Total time (Fig 4.13) is then the first loop start to the last loop end with
// a fixed number of launches, median of --fv-repeats interleaved runs.
//
//   gpuvm-fairness-bench [--duration-s 3] [--warmup-s 0.5] [--work-ms 500] [--job-us 1000]
//                        [--case NAME] [--policy NAME] [--no-makespan] [--seed N] [--out DIR]
//                        [--control-demo] [--engine synthetic|fv] [--hold-us US] [--quantum-us US]
//                        [--band-lag-us US] [--band-threshold-us US]
//                        [--band-buffering idle|preempt]
//                        [--fv-mode optimized] [--fv-n 128] [--fv-setup-s S] [--fv-launches 500]
//                        [--fv-repeats 5]
// --out DIR: per case, policy and window size a CSV of every VM's share per window
// (<case>-<policy>-<window>ms.csv), a gnuplot script and PNG per case (<case>.png: shares over
// time, one panel per policy, targets dashed), and summary.csv.
// --control-demo: the operator's view (make run): four VMs with shares 10/20/30/40 under BAND, the
// 10 % VM raised to 40 % and the 40 % one lowered to 10 % halfway through (live, through the same
// control service gpuvm-ctl talks to; with --engine fv on real VMs over the control socket), target
// and achieved share printed per 500 ms window.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "aggregator/control/protocol.h"
#include "aggregator/control/service.h"
#include "scheduler/dispatcher.h"
#include "scheduler/sim/fairness.h"
#include "scheduler/sim/simulator.h"
#include "tools/gpuvm-ctl/ctl.h"

namespace gpuvm::sched::bench {
namespace {

using sim::SimResult;
using sim::SimRun;
using sim::SimVm;

struct Args {
  double duration_s = 3;
  double warmup_s = -1;  // not measured at the start; -1: 0.5 s (synthetic), 1 s (fv: first
                         // launches fault in shadow page tables and code)
  int64_t work_ms = 500;
  int64_t job_us = 1000;
  std::string only_case;
  std::string only_policy;
  bool makespan = true;
  uint64_t seed = 1;
  std::string out;
  std::string engine = "synthetic";
  bool control_demo = false;
  // BAND's hold_max. Gdev's 500 us assumes an in-kernel resubmission path; through threads (and,
  // in the aggregator, traps) a madd VM's gap from completion to its next submission is longer.
  int64_t hold_us = 5000;
  int64_t quantum_us = 1000;  // fv: the aggregator's --quantum-us (0: non-preemptive dispatch)
  // BAND's preempt_lag and credit threshold (the aggregator's --band-lag-us, --band-threshold-us);
  // -1: their defaults (BandOptions).
  int64_t lag_us = -1;
  int64_t threshold_us = -1;
  // BAND's buffering (the aggregator's --band-buffering): "idle" (Gdev's holds, the default) or
  // "preempt" (work-conserving where the engine preempts at arrivals).
  std::string buffering = "idle";
  // --engine fv: the VMs' fv mode, their set-up time before the common start (0: 1 s + 0.4 s per
  // VM), and the madd launches per madd VM of the total-time runs.
  std::string fv_mode = "optimized";
  double fv_setup_s = 0;
  uint64_t fv_launches = 500;
  int fv_n = 128;      // madd's matrix side (long-madd: x sqrt(15))
  int fv_repeats = 5;  // total-time and eater runs per policy or case (median; 3 left single
                       // ratios +-10 % apart on the 2-core host, 2026-11-28)
};

// The timed engine (see the file comment). Thread-safe: Start/Poll on the dispatch thread, the
// interrupt thread, and the workload threads registering lengths.
class TimedEngine final : public SubmissionSink {
 public:
  explicit TimedEngine(MonotonicClock* clock) : clock_(clock) {
    interrupt_ = std::thread([this] { InterruptLoop(); });
  }
  ~TimedEngine() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    interrupt_.join();
  }
  void set_dispatcher(Dispatcher* d) { dispatcher_ = d; }

  void SetLength(SubmissionHandle h, Duration length, size_t vm_index) {
    std::lock_guard lock(mu_);
    pending_[h] = {length, vm_index};
  }

  Status Start(VmId, SubmissionHandle h) override {
    std::lock_guard lock(mu_);
    auto it = pending_.find(h);
    if (it == pending_.end()) return Status::NotFound("unknown submission");
    const TimePoint now = clock_->Now();
    running_ = Run{h, it->second.second, now, now + it->second.first};
    pending_.erase(it);
    cv_.notify_all();
    return Status::Ok();
  }

  Result<SinkPoll> Poll(VmId, SubmissionHandle h) override {
    std::lock_guard lock(mu_);
    if (!running_ || running_->handle != h) return Status::Internal("not running");
    if (clock_->Now() < running_->end) return SinkPoll::Running();
    runs_.push_back(SimRun{running_->start - origin_, running_->end - origin_, running_->vm_index});
    const Duration ran = running_->end - running_->start;
    running_.reset();
    return SinkPoll::Done(ran);
  }

  void set_origin(TimePoint t) {
    std::lock_guard lock(mu_);
    origin_ = t;
  }
  std::vector<SimRun> TakeRuns() {
    std::lock_guard lock(mu_);
    return std::move(runs_);
  }

 private:
  struct Run {
    SubmissionHandle handle;
    size_t vm_index;
    TimePoint start, end;
  };

  // The engine's "interrupt": wakes the dispatcher when the running submission's time is up.
  void InterruptLoop() {
    std::unique_lock lock(mu_);
    while (!stop_) {
      if (!running_ || signalled_ == running_->handle) {
        cv_.wait(lock);
        continue;
      }
      const TimePoint end = running_->end;
      const SubmissionHandle h = running_->handle;
      if (clock_->Now() < end) {
        cv_.wait_until(lock, std::chrono::steady_clock::time_point(
                                 std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                     end.time_since_epoch())));
        continue;
      }
      signalled_ = h;
      lock.unlock();
      if (dispatcher_ != nullptr) dispatcher_->Wake();
      lock.lock();
    }
  }

  MonotonicClock* const clock_;
  Dispatcher* dispatcher_ = nullptr;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<SubmissionHandle, std::pair<Duration, size_t>> pending_;
  std::optional<Run> running_;
  std::optional<SubmissionHandle> signalled_;
  std::vector<SimRun> runs_;
  TimePoint origin_{};
  bool stop_ = false;
  std::thread interrupt_;
};

struct Case {
  std::string name;
  std::vector<SimVm> vms;
};

SimVm Vm(const std::string& name, double share, Duration job) {
  SimVm vm;
  vm.name = name;
  vm.share_percent = share;
  vm.job = job;
  return vm;
}

std::vector<Case> Cases(const Args& args) {
  const Duration job = std::chrono::microseconds(args.job_us);
  const Duration longer = job * 15;
  std::vector<Case> cases;
  for (int n : {2, 4, 8}) {
    Case c{std::to_string(n) + "vm", {}};
    for (int i = 0; i < n; ++i) {
      c.vms.push_back(i % 2 == 0 ? Vm("madd", 100.0 / n, job) : Vm("long-madd", 100.0 / n, longer));
    }
    cases.push_back(c);
  }
  cases.push_back({"10-90-long10", {Vm("long-madd", 10, longer), Vm("madd", 90, job)}});
  cases.push_back({"10-90-long90", {Vm("madd", 10, job), Vm("long-madd", 90, longer)}});
  cases.push_back(
      {"20-30-50",
       {Vm("long-madd", 20, longer), Vm("madd", 30, job), Vm("long-madd", 50, longer)}});
  // The GPU eater (docs/SCHEDULER.md, "Preemption"): a kernel that never ends in a VM at 10 %,
  // madd in three VMs at 30 %. On the synthetic engine (which cannot suspend work) its "kernel" is
  // an hour long.
  cases.push_back({"endless",
                   {Vm("endless", 10, std::chrono::hours(1)), Vm("madd", 30, job),
                    Vm("madd", 30, job), Vm("madd", 30, job)}});
  // The same three madd VMs without the eater: what they get when it is absent.
  cases.push_back(
      {"endless-absent",
       {Vm("madd", 100.0 / 3, job), Vm("madd", 100.0 / 3, job), Vm("madd", 100.0 / 3, job)}});
  return cases;
}

// A share change during a run.
struct LiveChange {
  Duration at{0};
  std::function<Status(Dispatcher&)> apply;
};

struct RunResult {
  SimResult result;
  Duration makespan{0};  // with max_jobs: when the last VM finished
  DispatcherStats stats;
  std::vector<Duration> gaps;  // every VM's completion-to-next-submission times
};

// Runs `vms` on the real dispatcher for `duration` (or, with work > 0, until every VM has had that
// much GPU time), VM i as VM id i + 1.
Result<RunResult> RunReal(const Args& args, const std::vector<SimVm>& vms, PolicyKind policy,
                          Duration duration, Duration work,
                          const std::vector<LiveChange>& changes = {}) {
  const uint64_t seed = args.seed;
  MonotonicClock clock;
  TimedEngine engine(&clock);
  std::mutex mu;
  std::condition_variable cv;
  std::map<SubmissionHandle, TimePoint> done;  // completion time as the dispatcher saw it
  DispatcherOptions options;
  options.scheduler.policy = policy;
  // The engine signals completions (TimedEngine's interrupt thread); polling is the fallback.
  options.poll_interval = 1ms;
  if (args.hold_us >= 0) options.scheduler.band.hold_max = std::chrono::microseconds(args.hold_us);
  if (args.lag_us >= 0) options.scheduler.band.preempt_lag = std::chrono::microseconds(args.lag_us);
  options.scheduler.band.work_conserving = args.buffering != "idle";
  if (args.threshold_us >= 0) {
    options.scheduler.band.threshold = std::chrono::microseconds(args.threshold_us);
  }
  options.on_done = [&](const SubmissionDone& d) {
    {
      std::lock_guard lock(mu);
      done[d.handle] = clock.Now();
    }
    cv.notify_all();
  };
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<Dispatcher> dispatcher,
                         Dispatcher::Create(&clock, &engine, options));
  engine.set_dispatcher(dispatcher.get());
  for (size_t i = 0; i < vms.size(); ++i) {
    GPUVM_RETURN_IF_ERROR(dispatcher->AddVm(static_cast<VmId>(i + 1), vms[i].share_percent));
  }
  const TimePoint start = clock.Now();
  engine.set_origin(start);
  std::atomic<bool> stop{false};
  std::vector<TimePoint> finished(vms.size(), start);
  std::vector<std::vector<Duration>> gaps(vms.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < vms.size(); ++i) {
    threads.emplace_back([&, i] {
      std::mt19937_64 rng(seed * 1000003 + i);
      std::uniform_real_distribution<double> jitter(1 - vms[i].jitter, 1 + vms[i].jitter);
      Duration used{0};
      std::optional<TimePoint> completed;
      for (uint64_t n = 0; !stop.load(); ++n) {
        if (work > Duration(0) && used >= work) break;
        const SubmissionHandle h = (static_cast<uint64_t>(i + 1) << 40) | n;
        const Duration length = std::chrono::duration_cast<Duration>(vms[i].job * jitter(rng));
        engine.SetLength(h, length, i);
        if (completed) gaps[i].push_back(clock.Now() - *completed);
        if (!dispatcher->Submit(static_cast<VmId>(i + 1), h).ok()) break;
        {
          std::unique_lock lock(mu);
          cv.wait(lock, [&] { return done.contains(h) || stop.load(); });
          if (auto it = done.find(h); it != done.end()) {
            completed = it->second;
            done.erase(it);
          }
        }
        used += length;
        std::this_thread::sleep_for(
            std::chrono::duration_cast<Duration>(vms[i].think * jitter(rng)));
      }
      finished[i] = clock.Now();
    });
  }
  if (work > Duration(0)) {
    for (std::thread& t : threads) t.join();
  } else {
    for (const LiveChange& c : changes) {
      std::this_thread::sleep_until(std::chrono::steady_clock::time_point(
          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
              (start + c.at).time_since_epoch())));
      GPUVM_RETURN_IF_ERROR(c.apply(*dispatcher));
    }
    std::this_thread::sleep_until(std::chrono::steady_clock::time_point(
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            (start + duration).time_since_epoch())));
    stop = true;
    cv.notify_all();
    for (std::thread& t : threads) t.join();
  }
  RunResult r;
  r.stats = dispatcher->Stats();
  dispatcher.reset();  // the dispatch thread stops before the engine goes
  r.result.runs = engine.TakeRuns();
  r.result.end =
      work > Duration(0) ? *std::max_element(finished.begin(), finished.end()) - start : duration;
  r.makespan = r.result.end;
  for (const auto& g : gaps) r.gaps.insert(r.gaps.end(), g.begin(), g.end());
  std::sort(r.gaps.begin(), r.gaps.end());
  return r;
}

double Percentile(const std::vector<Duration>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t i = std::min(sorted.size() - 1, static_cast<size_t>(p * sorted.size()));
  return std::chrono::duration<double, std::micro>(sorted[i]).count();
}

// The median of `v` (the upper one of an even count).
double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string Pct(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", fraction * 100);
  return buf;
}

void WriteCsv(const std::string& path, const std::vector<SimVm>& vms,
              const std::vector<sim::Window>& windows, const std::vector<double>& targets) {
  std::ofstream out(path);
  out << "window_start_ms";
  for (size_t i = 0; i < vms.size(); ++i) out << ",vm" << i + 1 << "_" << vms[i].name << "_share";
  for (size_t i = 0; i < vms.size(); ++i) out << ",vm" << i + 1 << "_target";
  out << ",busy_ms\n";
  for (const sim::Window& w : windows) {
    out << std::chrono::duration<double, std::milli>(w.start).count();
    for (double s : w.share) out << "," << s;
    for (double t : targets) out << "," << t;
    out << "," << std::chrono::duration<double, std::milli>(w.busy).count() << "\n";
  }
}

// A gnuplot script: one panel per policy, each VM's share per 500 ms window, targets dashed.
void WritePlot(const std::string& dir, const Case& c, const std::vector<std::string>& policies) {
  const std::string script = dir + "/" + c.name + ".gp";
  std::ofstream gp(script);
  gp << "set terminal pngcairo size 900," << 260 * policies.size() << " font ',9'\n";
  gp << "set output '" << dir << "/" << c.name << ".png'\n";
  gp << "set datafile separator ','\nset key outside right\nset yrange [0:100]\n";
  gp << "set ylabel 'GPU share (%)'\nset xlabel 'time (s)'\n";
  gp << "set multiplot layout " << policies.size() << ",1\n";
  for (const std::string& p : policies) {
    gp << "set title '" << c.name << " - " << p << " (500 ms windows)'\n";
    gp << "plot ";
    const size_t n = c.vms.size();
    for (size_t i = 0; i < n; ++i) {
      const std::string csv = dir + "/" + c.name + "-" + p + "-500ms.csv";
      gp << (i ? ", " : "") << "'" << csv << "' skip 1 using ($1/1000):($" << i + 2
         << "*100) with linespoints lc " << i + 1 << " title 'vm" << i + 1 << " " << c.vms[i].name
         << "', '' skip 1 using ($1/1000):($" << n + i + 2 << "*100) with lines dt 2 lc " << i + 1
         << " notitle";
    }
    gp << "\n";
  }
  gp << "unset multiplot\n";
  gp.close();
  const std::string command = "gnuplot '" + script + "' 2>/dev/null";
  if (std::system(command.c_str()) != 0) {
    std::printf("(gnuplot failed or is missing: %s not written)\n", (c.name + ".png").c_str());
  }
}

// The measured run of one case under one policy, on either engine: the GPU's run intervals (from
// `origin`), the stretch in which every VM was looping, and the total time with a fixed amount of
// work per VM.
struct Measured {
  SimResult result;
  Duration from{0}, to{0};  // the measured stretch
  Duration makespan{0};     // with fixed work: first loop start to last loop end
  // fv, with fixed work: the GPU time the device reported inside the makespan (every VM's runs,
  // clipped to it). makespan - device_busy is the time the GPU stood idle (holds, gaps, start-up);
  // device_busy itself moves from run to run with the CPU time the software GPU gets.
  Duration device_busy{0};
  std::string note;  // e.g. resubmission gaps, failed VMs
  // fv: per VM, the stretches (> kAbsence) in which it had nothing submitted (its process was
  // descheduled, or it trapped): no scheduler can give a VM GPU time it does not ask for.
  std::vector<std::vector<std::pair<Duration, Duration>>> absent;
};

constexpr Duration kAbsence = 20ms;

// Fairness over the windows of one size, optionally leaving out the windows in which some VM was
// absent for at least a tenth of the window.
struct Fairness {
  double worst = 0, jain_min = 1;
  std::vector<double> mean, max_dev;
  size_t windows = 0, left_out = 0;
};

Fairness Judge(const Measured& m, const std::vector<double>& targets, Duration window,
               bool skip_absent) {
  const size_t n = targets.size();
  Fairness f;
  f.mean.assign(n, 0);
  f.max_dev.assign(n, 0);
  for (const sim::Window& w : sim::Windows(m.result, n, window, m.from, m.to, window)) {
    bool absent = false;
    for (const auto& stretches : m.absent) {
      Duration overlap{0};
      for (const auto& [a, b] : stretches) {
        overlap += std::max(Duration(0), std::min(b, w.start + window) - std::max(a, w.start));
      }
      absent = absent || overlap * 10 >= window;
    }
    if (w.busy <= Duration(0) || (skip_absent && absent)) {
      ++f.left_out;
      continue;
    }
    ++f.windows;
    double sum = 0, sum_sq = 0;
    for (size_t v = 0; v < n; ++v) {
      f.mean[v] += w.share[v];
      f.max_dev[v] = std::max(f.max_dev[v], std::abs(w.share[v] - targets[v]));
      f.worst = std::max(f.worst, f.max_dev[v]);
      const double x = targets[v] > 0 ? w.share[v] / targets[v] : 0;
      sum += x;
      sum_sq += x * x;
    }
    if (sum_sq > 0) f.jain_min = std::min(f.jain_min, sum * sum / (double(n) * sum_sq));
  }
  for (double& x : f.mean) x = f.windows > 0 ? x / double(f.windows) : 0;
  return f;
}

// --- --engine fv: real fv VMs through gpuvm-aggregator -------------------------------------------

pid_t Spawn(std::vector<std::string> argv, const std::string& log) {
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    FILE* f = std::fopen(log.c_str(), "w");
    if (f != nullptr) {
      ::dup2(fileno(f), 1);
      ::dup2(fileno(f), 2);
    }
    ::setpgid(0, 0);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  return pid;
}

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

int64_t Field(const std::string& text, const std::string& key) {
  const size_t p = text.find(key + "=");
  return p == std::string::npos ? -1 : std::atoll(text.c_str() + p + key.size() + 1);
}

// Runs the case on real VMs: gpuvm-aggregator (`--trace-completions`), one gpuvm-vm per VM in
// fv-<args.fv_mode> with its share in its configuration (`--share`, so in the VM's name), each
// looping `gpuvm-fairness-guest madd|long-madd` from a common start time. With `launches` > 0 every
// madd VM runs that many launches and every long-madd VM a fifteenth of them (the same work).
Result<Measured> RunFv(
    const Args& args, const std::vector<SimVm>& vms, PolicyKind policy, const std::string& dir,
    const std::string& tag, uint64_t launches,
    const std::vector<std::pair<Duration, control::SetShareRequest>>& changes = {}) {
  ::mkdir(dir.c_str(), 0755);
  const std::string socket = "@gpuvm-fairness-" + std::to_string(::getpid());
  const std::string trace = dir + "/trace-" + tag + ".csv";
  std::vector<std::string> argv = {GPUVM_AGGREGATOR_BIN,
                                   "--socket",
                                   socket,
                                   "--vram-mib",
                                   "2048",
                                   "--quiet",
                                   "--scheduler",
                                   std::string(PolicyKindName(policy)),
                                   "--trace-completions",
                                   trace,
                                   "--band-hold-us",
                                   std::to_string(args.hold_us),
                                   "--quantum-us",
                                   std::to_string(args.quantum_us)};
  if (args.lag_us >= 0) argv.insert(argv.end(), {"--band-lag-us", std::to_string(args.lag_us)});
  argv.insert(argv.end(), {"--band-buffering", args.buffering});
  if (args.threshold_us >= 0) {
    argv.insert(argv.end(), {"--band-threshold-us", std::to_string(args.threshold_us)});
  }
  const pid_t aggregator = Spawn(argv, dir + "/aggregator-" + tag + ".log");
  const std::string control = socket + "-control";
  for (int i = 0; i < 2000 && !ctl::Call(control, control::ListRequest{}).ok(); ++i) {
    int status = 0;
    if (::waitpid(aggregator, &status, WNOHANG) == aggregator) {
      return Status::Internal("gpuvm-aggregator exited: " +
                              ReadFile(dir + "/aggregator-" + tag + ".log"));
    }
    ::usleep(5000);
  }
  // Every VM's set-up (context, module, buffers: trap-bound) ends before this; then they loop.
  const double setup_s = args.fv_setup_s > 0 ? args.fv_setup_s : 1.0 + 0.4 * vms.size();
  const int64_t start_at = SteadyNs() + int64_t(setup_s * 1e9);
  const double seconds = launches > 0 ? 120 : args.duration_s;
  std::vector<pid_t> guests;
  for (size_t i = 0; i < vms.size(); ++i) {
    const bool is_long = vms[i].job > std::chrono::microseconds(args.job_us);
    const bool endless = vms[i].name == "endless";
    std::vector<std::string> argv = {GPUVM_VM_BIN,
                                     "--aggregator",
                                     socket,
                                     "--dm",
                                     GPUVM_DM_BIN,
                                     "--mode",
                                     "fv-" + args.fv_mode,
                                     "--name",
                                     "vm" + std::to_string(i + 1),
                                     "--share",
                                     std::to_string(int(vms[i].share_percent)),
                                     "--ram-mib",
                                     "256",
                                     "--",
                                     GPUVM_FAIRNESS_GUEST_BIN,
                                     endless   ? "endless"
                                     : is_long ? "long-madd"
                                               : "madd",
                                     std::to_string(seconds),
                                     std::to_string(args.fv_n),
                                     "--start-at",
                                     std::to_string(start_at)};
    if (launches > 0 && !endless) {
      argv.push_back("--launches");
      argv.push_back(std::to_string(is_long ? std::max<uint64_t>(1, launches / 15) : launches));
    }
    guests.push_back(Spawn(argv, dir + "/vm" + std::to_string(i + 1) + "-" + tag + ".log"));
  }
  // VM ids by name, while the VMs are there.
  std::map<uint32_t, size_t> index_of;
  size_t next_change = 0;
  Measured m;
  int failed = 0;
  std::vector<int64_t> loop_start(vms.size(), -1), loop_end(vms.size(), -1);
  for (size_t g = 0; g < guests.size(); ++g) {
    int status = 0;
    for (int i = 0; i < 30000 && ::waitpid(guests[g], &status, WNOHANG) == 0; ++i) {
      // Live share changes, as `gpuvm-ctl set-share` sends them, at their time.
      while (next_change < changes.size() &&
             SteadyNs() >= start_at + changes[next_change].first.count()) {
        const control::SetShareRequest& c = changes[next_change++].second;
        Result<control::Reply> reply = ctl::Call(control, c);
        m.note += " set-share " + c.vm + " " + Pct(c.percent / 100) + ": " +
                  (reply.ok() ? (reply->status.ok() ? std::string("ok") : reply->status.ToString())
                              : reply.status().ToString()) +
                  ";";
      }
      if (index_of.size() < vms.size() && i % 20 == 0) {
        Result<control::Reply> reply = ctl::Call(control, control::ListRequest{});
        if (reply.ok() && reply->status.ok()) {
          if (Result<control::ListReply> list = control::ParseList(reply->body); list.ok()) {
            for (const control::VmRow& v : list->vms) {
              for (size_t k = 0; k < vms.size(); ++k) {
                if (v.name == "vm" + std::to_string(k + 1)) index_of[v.id] = k;
              }
            }
          }
        }
      }
      ::usleep(10000);
    }
    if (::waitpid(guests[g], &status, WNOHANG) == 0) {
      ::kill(-guests[g], SIGKILL);
      ::waitpid(guests[g], &status, 0);
    }
    const std::string log = ReadFile(dir + "/vm" + std::to_string(g + 1) + "-" + tag + ".log");
    loop_start[g] = Field(log, "loop_start_ns");
    loop_end[g] = Field(log, "loop_end_ns");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || loop_end[g] < 0 ||
        log.find("PASSED") == std::string::npos) {
      ++failed;
    }
    if (log.find("outlasted --start-at") != std::string::npos)
      m.note += " vm" + std::to_string(g + 1) + "-late";
  }
  ::kill(aggregator, SIGTERM);
  int status = 0;
  ::waitpid(aggregator, &status, 0);
  if (failed > 0) m.note += " " + std::to_string(failed) + " VM(s) FAILED (logs in " + dir + ")";
  // The run intervals, from the common start, and when each VM had nothing submitted.
  std::istringstream in(ReadFile(trace));
  std::string line;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> demand(vms.size());  // [submit, end)
  // A slice line ("...,0,slice") is a charge of a submission still outstanding (running or
  // suspended, docs/SCHEDULER.md "Preemption"): its VM has wanted the GPU since its last line.
  std::vector<int64_t> last_line(vms.size(), 0);
  std::vector<std::vector<int64_t>> completed_at(vms.size());  // non-slice lines: completions
  std::vector<std::pair<int64_t, int64_t>> busy;  // [GPU start, end) of every charge, absolute
  while (std::getline(in, line)) {
    unsigned vm = 0;
    long long end = 0, gpu = 0, waited = 0;
    if (std::sscanf(line.c_str(), "%u,%lld,%lld,%lld", &vm, &end, &gpu, &waited) != 4) continue;
    auto it = index_of.find(vm);
    if (it == index_of.end()) continue;
    const bool slice = line.find(",slice") != std::string::npos;
    const int64_t submit = slice ? std::min<int64_t>(last_line[it->second], end - gpu - start_at)
                                 : end - gpu - waited - start_at;
    demand[it->second].push_back({submit, end - start_at});
    last_line[it->second] = end - start_at;
    if (!slice) completed_at[it->second].push_back(end - start_at);
    busy.push_back({end - gpu, end});
    if (end - gpu < start_at) continue;
    m.result.runs.push_back(
        SimRun{Duration(end - gpu - start_at), Duration(end - start_at), it->second});
  }
  m.absent.resize(vms.size());
  for (size_t v = 0; v < vms.size(); ++v) {
    std::sort(demand[v].begin(), demand[v].end());
    int64_t busy_until = 0;  // the common start: every VM is expected from then on
    for (const auto& [submit, end] : demand[v]) {
      if (submit - busy_until > kAbsence.count()) {
        m.absent[v].push_back({Duration(busy_until), Duration(submit)});
      }
      busy_until = std::max(busy_until, end);
    }
  }
  std::sort(m.result.runs.begin(), m.result.runs.end(),
            [](const SimRun& a, const SimRun& b) { return a.start < b.start; });
  int64_t first_end = INT64_MAX, last_end = 0, first_start = INT64_MAX;
  for (size_t v = 0; v < vms.size(); ++v) {
    if (loop_end[v] < 0) continue;
    first_end = std::min(first_end, loop_end[v]);
    last_end = std::max(last_end, loop_end[v]);
    first_start = std::min(first_start, loop_start[v]);
  }
  if (first_end == INT64_MAX) return Status::Internal("no VM ran (logs in " + dir + ")");
  m.from = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(args.warmup_s));
  m.to = Duration(first_end - start_at);  // every VM was looping until the first one stopped
  m.result.end = m.to;
  // Submissions each VM completed in the measured stretch (its throughput, with to - from).
  m.result.completed.assign(vms.size(), 0);
  for (size_t v = 0; v < vms.size(); ++v) {
    for (const int64_t end : completed_at[v]) {
      if (end >= m.from.count() && end < m.to.count()) ++m.result.completed[v];
    }
  }
  m.makespan = Duration(last_end - first_start);
  int64_t busy_ns = 0;
  for (const auto& [begin, end] : busy) {
    busy_ns += std::max<int64_t>(0, std::min(end, last_end) - std::max(begin, first_start));
  }
  m.device_busy = Duration(busy_ns);
  return m;
}

Result<Measured> RunSynthetic(const Args& args, const std::vector<SimVm>& vms, PolicyKind policy,
                              Duration duration, Duration work) {
  GPUVM_ASSIGN_OR_RETURN(RunResult r, RunReal(args, vms, policy, duration, work));
  Measured m;
  m.result = std::move(r.result);
  m.from = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(args.warmup_s));
  m.to = duration;
  m.makespan = r.makespan;
  char gap[48];
  std::snprintf(gap, sizeof gap, "gap %.0f/%.0f us", Percentile(r.gaps, 0.5),
                Percentile(r.gaps, 0.9));
  m.note = gap;
  return m;
}

int ControlDemo(const Args& args) {
  // Four VMs, alternately madd and long-madd, shares 10/20/30/40 under BAND; halfway, the shares of
  // VM 1 and VM 4 swap (10 -> 40, 40 -> 10) in one all-or-nothing change.
  const Duration job = std::chrono::microseconds(args.job_us);
  std::vector<SimVm> vms = {Vm("madd", 10, job), Vm("long-madd", 20, job * 15), Vm("madd", 30, job),
                            Vm("long-madd", 40, job * 15)};
  const Duration duration =
      std::chrono::duration_cast<Duration>(std::chrono::duration<double>(args.duration_s));
  const Duration half = duration / 2;
  std::printf(
      "operator view (%s): 4 VMs under BAND, shares 10/20/30/40; at %.1f s the operator swaps "
      "VM 1 and VM 4 (gpuvm-ctl set-share vm4 10; gpuvm-ctl set-share vm1 40)\n",
      args.engine == "fv" ? "real fv VMs" : "synthetic engine",
      std::chrono::duration<double>(half).count());
  // The change goes through the control service, as `gpuvm-ctl set-share` does.
  class Directory final : public control::VmDirectory {
   public:
    std::vector<control::VmDescription> Vms() override {
      return {{1, "vm1", "fv", 0, 0},
              {2, "vm2", "fv", 0, 0},
              {3, "vm3", "fv", 0, 0},
              {4, "vm4", "fv", 0, 0}};
    }
  };
  Directory directory;
  const auto swap = [&directory](Dispatcher& d) -> Status {
    control::ControlService service(&directory, &d, {});
    for (const char* request : {"set-share 4 10", "set-share vm1 40"}) {
      const std::string reply = service.Handle(request);
      std::printf("  gpuvm-ctl %s -> %s", request, reply.c_str());
      if (reply.rfind("ok", 0) != 0) return Status::Internal("refused: " + reply);
    }
    return Status::Ok();
  };
  SimResult result;
  if (args.engine == "fv") {
    // Real VMs: each VM's share is in its configuration (gpuvm-vm --share); the swap goes over the
    // control socket, exactly as `gpuvm-ctl set-share vm4 10; gpuvm-ctl set-share vm1 40` sends it.
    Result<Measured> m = RunFv(
        args, vms, PolicyKind::kBand, args.out.empty() ? "/tmp" : args.out, "operator-view", 0,
        {{half, control::SetShareRequest{"vm4", 10}}, {half, control::SetShareRequest{"vm1", 40}}});
    if (!m.ok()) {
      std::fprintf(stderr, "%s\n", m.status().ToString().c_str());
      return 1;
    }
    std::printf("  real fv VMs (fv-%s, madd %dx%d): gpuvm-ctl%s\n", args.fv_mode.c_str(), args.fv_n,
                args.fv_n, m->note.c_str());
    result = std::move(m->result);
    if (m->note.find("FAILED") != std::string::npos) return 1;
  } else {
    Result<RunResult> r =
        RunReal(args, vms, PolicyKind::kBand, duration, Duration(0), {LiveChange{half, swap}});
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
      return 1;
    }
    result = std::move(r->result);
  }
  const std::vector<sim::Window> windows =
      sim::Windows(result, vms.size(), 500ms, Duration(0), duration, 500ms);
  std::printf("%8s", "t (s)");
  for (size_t i = 0; i < vms.size(); ++i) std::printf("   vm%zu target/got", i + 1);
  std::printf("\n");
  std::vector<std::vector<double>> targets_per_window;
  for (const sim::Window& w : windows) {
    std::vector<double> t = {10, 20, 30, 40};
    if (w.start >= half) t = {40, 20, 30, 10};
    std::printf("%8.1f", std::chrono::duration<double>(w.start).count());
    for (size_t i = 0; i < vms.size(); ++i) {
      std::printf("   %5.0f%% /%5s%%", t[i], Pct(w.share[i]).c_str());
    }
    std::printf("\n");
    targets_per_window.push_back(t);
  }
  if (!args.out.empty()) {
    ::mkdir(args.out.c_str(), 0755);
    const std::string csv = args.out + "/operator-view.csv";
    std::ofstream out(csv);
    out << "window_start_ms";
    for (size_t i = 0; i < vms.size(); ++i) out << ",vm" << i + 1 << "_share";
    for (size_t i = 0; i < vms.size(); ++i) out << ",vm" << i + 1 << "_target";
    out << "\n";
    for (size_t k = 0; k < windows.size(); ++k) {
      out << std::chrono::duration<double, std::milli>(windows[k].start).count();
      for (double s : windows[k].share) out << "," << s;
      for (double t : targets_per_window[k]) out << "," << t / 100;
      out << "\n";
    }
    out.close();
    Case c{"operator-view", vms};
    const std::string script = args.out + "/operator-view.gp";
    std::ofstream gp(script);
    gp << "set terminal pngcairo size 900,360 font ',9'\nset output '" << args.out
       << "/operator-view.png'\nset datafile separator ','\nset key outside right\n"
       << "set yrange [0:100]\nset ylabel 'GPU share (%)'\nset xlabel 'time (s)'\n"
       << "set title 'BAND, shares 10/20/30/40, VM 1 and VM 4 swapped live at "
       << std::chrono::duration<double>(half).count() << " s'\nplot ";
    for (size_t i = 0; i < vms.size(); ++i) {
      gp << (i ? ", " : "") << "'" << csv << "' skip 1 using ($1/1000):($" << i + 2
         << "*100) with linespoints lc " << i + 1 << " title 'vm" << i + 1 << " " << vms[i].name
         << "', '' skip 1 using ($1/1000):($" << vms.size() + i + 2 << "*100) with lines dt 2 lc "
         << i + 1 << " notitle";
    }
    gp << "\n";
    gp.close();
    if (std::system(("gnuplot '" + script + "' 2>/dev/null").c_str()) == 0) {
      std::printf("plot: %s/operator-view.png\n", args.out.c_str());
    }
  }
  return 0;
}

// The endless-kernel case's throughput bar (docs/SCHEDULER.md): what the three madd VMs complete
// beside the eater (10 % share, a kernel that never ends; they have 30 % each) against what they
// complete without it (33.3 % each), scaled by their shares (30 / 33.3 = 0.9). Both cases under
// BAND, interleaved --fv-repeats times, the median throughput per VM of each: the two cases then
// see the same host (run minutes apart, they did not: 84-112 % over three runs).
int EaterThroughput(const Args& args, const std::string& out, std::ofstream& summary) {
  const std::vector<Case> cases = Cases(args);
  const auto find = [&](const std::string& name) -> const Case* {
    for (const Case& c : cases) {
      if (c.name == name) return &c;
    }
    return nullptr;
  };
  const Case* with = find("endless");
  const Case* without = find("endless-absent");
  // The eater is VM 1 of `with`; the others are `without`'s VMs, in the same order.
  if (with == nullptr || without == nullptr || with->vms.size() != without->vms.size() + 1) {
    return 0;
  }
  const size_t others = without->vms.size();
  std::printf(
      "\nthe eater's cost to the others (BAND, median of %d interleaved runs per case): madd "
      "completions per second in the measured stretch\n",
      args.fv_repeats);
  std::vector<std::vector<double>> rate_with(others), rate_without(others);  // per other VM
  std::vector<double> eater_share;
  for (int rep = 0; rep < args.fv_repeats; ++rep) {
    for (const Case* c : {with, without}) {
      Result<Measured> r = RunFv(args, c->vms, PolicyKind::kBand, out,
                                 c->name + "-band-rate" + std::to_string(rep + 1), 0);
      if (!r.ok()) {
        std::fprintf(stderr, "%s: %s\n", c->name.c_str(), r.status().ToString().c_str());
        return 1;
      }
      if (r->note.find("FAILED") != std::string::npos) {
        std::printf("(%s:%s)\n", c->name.c_str(), r->note.c_str());
      }
      const double seconds = std::chrono::duration<double>(r->to - r->from).count();
      if (seconds <= 0 || r->result.completed.size() != c->vms.size()) {
        std::fprintf(stderr, "%s: no measured stretch\n", c->name.c_str());
        return 1;
      }
      const size_t first = c == with ? 1 : 0;
      for (size_t k = 0; k < others; ++k) {
        (c == with ? rate_with : rate_without)[k].push_back(double(r->result.completed[first + k]) /
                                                            seconds);
      }
      if (c == with) {
        const std::vector<double> targets = sim::TargetShares(c->vms);
        eater_share.push_back(
            sim::Evaluate(r->result, targets, 500ms, r->from, r->to, 500ms).mean_share[0]);
      }
    }
  }
  double worst = 1e9;
  std::printf("%-6s %14s %14s %16s\n", "vm", "with eater /s", "without /s", "ratio / shares");
  for (size_t k = 0; k < others; ++k) {
    // Their share beside the eater over their share without it (30 / 33.3 in the cases above).
    const double scale = with->vms[k + 1].share_percent / without->vms[k].share_percent;
    const double w = Median(rate_with[k]), wo = Median(rate_without[k]);
    const double ratio = wo > 0 ? w / wo / scale : 0;
    worst = std::min(worst, ratio);
    std::printf("madd%-2zu %14.1f %14.1f %15.1f%%\n", k + 1, w, wo, 100 * ratio);
  }
  const std::string eater = Pct(Median(eater_share));
  const std::string target = Pct(with->vms[0].share_percent / 100);
  std::printf(
      "the eater's share (500 ms windows, mean): %s%% (target %s%%); the others' worst: %.1f%% "
      "(bar: >= 95%%)\n",
      eater.c_str(), target.c_str(), 100 * worst);
  if (summary.is_open()) {
    summary << "endless,band,throughput_ratio_pct," << 100 * worst << ",,," << eater << ","
            << target << ",\n";
  }
  std::fflush(stdout);
  return 0;
}

int Main(const Args& args) {
  if (args.control_demo) return ControlDemo(args);
  const bool fv = args.engine == "fv";
  const std::vector<std::pair<std::string, PolicyKind>> policies = {
      {"fifo", PolicyKind::kFifo}, {"credit", PolicyKind::kCredit}, {"band", PolicyKind::kBand}};
  const Duration duration =
      std::chrono::duration_cast<Duration>(std::chrono::duration<double>(args.duration_s));
  const std::string out = !args.out.empty() ? args.out : fv ? "/tmp/gpuvm-fairness-fv" : "";
  if (!out.empty()) ::mkdir(out.c_str(), 0755);
  std::ofstream summary;
  if (!out.empty()) {
    summary.open(out + "/summary.csv");
    summary << "case,policy,window_ms,worst_deviation_pct,jain_min,utilization,mean_shares_pct,"
               "targets_pct,max_deviation_per_vm_pct\n";
  }
  if (fv) {
    std::printf(
        "engine: fv — gpuvm-aggregator on the software GPU, one fv-%s VM per VM (gpuvm-vm, "
        "gpuvm-dm; share in the VM's configuration) looping madd (%dx%d) or long-madd (15x the "
        "elements) from a common start; shares from the GPU's run intervals "
        "(--trace-completions: device-measured GPU time per submission); %.1f s per run, first "
        "%.1f s not measured\n",
        args.fv_mode.c_str(), args.fv_n, args.fv_n, args.duration_s, args.warmup_s);
  } else {
    std::printf(
        "engine: synthetic timed engine (see --help); dispatcher thread + monotonic clock; "
        "%.1f s per run, first %.1f s not measured; madd %lld us, long-madd 15x\n",
        args.duration_s, args.warmup_s, static_cast<long long>(args.job_us));
  }
  std::printf(
      "BAND hold_max %lld us (buffering: %s), preempt_lag %s, threshold %s; fv quantum %lld us "
      "(0: non-preemptive); dev = worst |share - target| over all VMs and windows\n",
      static_cast<long long>(args.hold_us), args.buffering.c_str(),
      args.lag_us >= 0 ? (std::to_string(args.lag_us) + " us").c_str() : "default",
      args.threshold_us >= 0 ? (std::to_string(args.threshold_us) + " us").c_str() : "default",
      static_cast<long long>(args.quantum_us));
  std::printf("%-14s %-7s %9s %9s %8s %8s %6s  %s\n", "case", "policy", "dev500ms", "dev100ms",
              "jain500", "jain100", "util", "mean share % (target) [max dev 500ms]");
  for (const Case& c : Cases(args)) {
    if (!args.only_case.empty() && c.name != args.only_case) continue;
    std::vector<std::string> ran;
    for (const auto& [pname, policy] : policies) {
      if (!args.only_policy.empty() && pname != args.only_policy) continue;
      Result<Measured> r = fv ? RunFv(args, c.vms, policy, out, c.name + "-" + pname, 0)
                              : RunSynthetic(args, c.vms, policy, duration, Duration(0));
      if (!r.ok()) {
        std::fprintf(stderr, "%s/%s: %s\n", c.name.c_str(), pname.c_str(),
                     r.status().ToString().c_str());
        return 1;
      }
      ran.push_back(pname);
      const std::vector<double> targets = sim::TargetShares(c.vms);
      const sim::FairnessReport w500 =
          sim::Evaluate(r->result, targets, 500ms, r->from, r->to, 500ms);
      const sim::FairnessReport w100 =
          sim::Evaluate(r->result, targets, 100ms, r->from, r->to, 100ms);
      std::string shares;
      for (size_t i = 0; i < c.vms.size(); ++i) {
        shares += Pct(w500.mean_share[i]) + " (" + Pct(targets[i]) + ") [" +
                  Pct(w500.max_deviation[i]) + "] ";
      }
      std::printf("%-14s %-7s %9s %9s %8.3f %8.3f %5s%%  %s %s\n", c.name.c_str(), pname.c_str(),
                  Pct(w500.worst_deviation).c_str(), Pct(w100.worst_deviation).c_str(),
                  w500.jain_min, w100.jain_min, Pct(w500.utilization).c_str(), shares.c_str(),
                  r->note.c_str());
      if (fv) {
        // The same, leaving out the windows in which a VM was absent (had nothing submitted for
        // more than a tenth of the window).
        const Fairness f500 = Judge(*r, targets, 500ms, true);
        const Fairness f100 = Judge(*r, targets, 100ms, true);
        std::string present;
        for (size_t i = 0; i < c.vms.size(); ++i) {
          present += Pct(f500.mean[i]) + " [" + Pct(f500.max_dev[i]) + "] ";
        }
        std::printf(
            "%-14s %-7s %9s %9s %8.3f %8.3f %6s  %s(windows left out: %zu/%zu of 500 ms, "
            "%zu/%zu of 100 ms)\n",
            "  VMs present", pname.c_str(), Pct(f500.worst).c_str(), Pct(f100.worst).c_str(),
            f500.jain_min, f100.jain_min, "", present.c_str(), f500.left_out,
            f500.left_out + f500.windows, f100.left_out, f100.left_out + f100.windows);
        if (summary.is_open()) {
          summary << c.name << "," << pname << ",500-present," << Pct(f500.worst) << ","
                  << f500.jain_min << ",,,,\n"
                  << c.name << "," << pname << ",100-present," << Pct(f100.worst) << ","
                  << f100.jain_min << ",,,,\n";
        }
      }
      std::fflush(stdout);
      if (!out.empty()) {
        for (const auto& [window, report] : {std::pair{500ms, &w500}, std::pair{100ms, &w100}}) {
          WriteCsv(
              out + "/" + c.name + "-" + pname + "-" + std::to_string(window.count()) + "ms.csv",
              c.vms, sim::Windows(r->result, c.vms.size(), window, r->from, r->to, window),
              targets);
          std::string means, target_list, devs;
          for (size_t i = 0; i < c.vms.size(); ++i) {
            means += (i ? " " : "") + Pct(report->mean_share[i]);
            target_list += (i ? " " : "") + Pct(targets[i]);
            devs += (i ? " " : "") + Pct(report->max_deviation[i]);
          }
          summary << c.name << "," << pname << "," << window.count() << ","
                  << Pct(report->worst_deviation) << "," << report->jain_min << ","
                  << report->utilization << "," << means << "," << target_list << "," << devs
                  << "\n";
        }
      }
    }
    if (!out.empty() && !ran.empty()) WritePlot(out, c, ran);
  }
  if (fv && (args.only_case.empty() || args.only_case == "endless") &&
      (args.only_policy.empty() || args.only_policy == "band")) {
    if (int failed = EaterThroughput(args, out, summary); failed != 0) return failed;
  }
  if (!args.makespan) return 0;
  // Fig 4.13: the same GPU work per VM under each policy; total time against FIFO.
  const Duration work = std::chrono::milliseconds(args.work_ms);
  if (fv) {
    std::printf(
        "\ntotal time for %llu madd launches per madd VM and %llu long-madd launches per "
        "long-madd VM (first loop start to last loop end), against FIFO:\n",
        static_cast<unsigned long long>(args.fv_launches),
        static_cast<unsigned long long>(std::max<uint64_t>(1, args.fv_launches / 15)));
  } else {
    std::printf("\ntotal time for %lld ms of GPU work per VM, against FIFO:\n",
                static_cast<long long>(args.work_ms));
  }
  std::printf("%-10s %10s %10s %10s   (median of %d runs each, policies interleaved)%s\n", "case",
              "fifo (s)", "credit", "band", fv ? args.fv_repeats : 1,
              fv ? "; then the GPU's busy time in it, median s, and the runs' total times" : "");
  std::vector<Case> makespan_cases;
  for (const Case& c : Cases(args)) {
    if (c.name == "2vm" || c.name == "4vm" || c.name == "8vm") makespan_cases.push_back(c);
  }
  Case madd{"4vm-madd", {}};
  for (int i = 0; i < 4; ++i)
    madd.vms.push_back(Vm("madd", 25, std::chrono::microseconds(args.job_us)));
  makespan_cases.push_back(madd);
  for (const Case& c : makespan_cases) {
    if (!args.only_case.empty() && c.name != args.only_case) continue;
    // Policies interleaved, `repeats` times; the median per policy (the host's load drifts).
    std::map<std::string, std::vector<double>> runs, busy;
    const int repeats = fv ? args.fv_repeats : 1;
    for (int rep = 0; rep < repeats; ++rep) {
      for (const auto& [pname, policy] : policies) {
        Result<Measured> r =
            fv ? RunFv(args, c.vms, policy, out, c.name + "-" + pname + "-total", args.fv_launches)
               : RunSynthetic(args, c.vms, policy, Duration(0), work);
        if (!r.ok()) {
          std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
          return 1;
        }
        runs[pname].push_back(std::chrono::duration<double>(r->makespan).count());
        busy[pname].push_back(std::chrono::duration<double>(r->device_busy).count());
        if (fv && r->note.find("FAILED") != std::string::npos) {
          std::printf("(%s/%s:%s)\n", c.name.c_str(), pname.c_str(), r->note.c_str());
        }
      }
    }
    std::map<std::string, double> seconds, busy_s;
    for (const auto& [pname, v] : runs) seconds[pname] = Median(v);
    for (const auto& [pname, v] : busy) busy_s[pname] = Median(v);
    std::printf("%-10s %10.3f %10.3f %10.3f\n", c.name.c_str(), seconds["fifo"],
                seconds["credit"] / seconds["fifo"], seconds["band"] / seconds["fifo"]);
    if (fv) {
      // Whether a policy's extra time is the GPU standing idle (holds, resubmission gaps) or the
      // software GPU running the same work slower (it shares the host's CPUs with the guests).
      for (const auto& [pname, v] : runs) {
        std::printf("  %-8s busy %.3f s (%.1f %% of its total time); totals", pname.c_str(),
                    busy_s[pname], 100 * busy_s[pname] / seconds[pname]);
        for (const double t : v) std::printf(" %.3f", t);
        std::printf("\n");
      }
    }
    std::fflush(stdout);
    if (summary.is_open()) {
      summary << c.name << ",makespan_s," << seconds["fifo"] << "," << seconds["credit"] << ","
              << seconds["band"] << ",,,,\n";
      if (fv) {
        summary << c.name << ",device_busy_s," << busy_s["fifo"] << "," << busy_s["credit"] << ","
                << busy_s["band"] << ",,,,\n";
      }
    }
  }
  return 0;
}

bool ParseArgs(int argc, char** argv, Args* args) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (flag == "--no-makespan") {
      args->makespan = false;
    } else if (flag == "--control-demo") {
      args->control_demo = true;
    } else if ((v = next()) == nullptr) {
      return false;
    } else if (flag == "--duration-s") {
      args->duration_s = std::atof(v);
    } else if (flag == "--warmup-s") {
      args->warmup_s = std::atof(v);
    } else if (flag == "--work-ms") {
      args->work_ms = std::atoll(v);
    } else if (flag == "--job-us") {
      args->job_us = std::atoll(v);
    } else if (flag == "--case") {
      args->only_case = v;
    } else if (flag == "--policy") {
      args->only_policy = v;
    } else if (flag == "--hold-us") {
      args->hold_us = std::atoll(v);
    } else if (flag == "--quantum-us") {
      args->quantum_us = std::atoll(v);
    } else if (flag == "--band-lag-us") {
      args->lag_us = std::atoll(v);
    } else if (flag == "--band-threshold-us") {
      args->threshold_us = std::atoll(v);
    } else if (flag == "--band-buffering") {
      if (std::string(v) != "preempt" && std::string(v) != "idle") return false;
      args->buffering = v;
    } else if (flag == "--fv-mode") {
      args->fv_mode = v;
    } else if (flag == "--fv-setup-s") {
      args->fv_setup_s = std::atof(v);
    } else if (flag == "--fv-repeats") {
      args->fv_repeats = std::max(1, std::atoi(v));
    } else if (flag == "--fv-n") {
      args->fv_n = std::atoi(v);
    } else if (flag == "--fv-launches") {
      args->fv_launches = std::strtoull(v, nullptr, 10);
    } else if (flag == "--seed") {
      args->seed = std::strtoull(v, nullptr, 10);
    } else if (flag == "--out") {
      args->out = v;
    } else if (flag == "--engine") {
      args->engine = v;
      if (args->engine != "synthetic" && args->engine != "fv") return false;
    } else {
      return false;
    }
  }
  if (args->warmup_s < 0) args->warmup_s = args->engine == "fv" ? 1.0 : 0.5;
  return args->duration_s > args->warmup_s && args->warmup_s >= 0 && args->duration_s <= 600 &&
         args->job_us >= 10 && args->job_us <= 1'000'000 && args->work_ms > 0;
}

}  // namespace
}  // namespace gpuvm::sched::bench

int main(int argc, char** argv) {
  gpuvm::sched::bench::Args args;
  if (!gpuvm::sched::bench::ParseArgs(argc, argv, &args)) {
    std::fprintf(
        stderr,
        "usage: gpuvm-fairness-bench [--engine synthetic] [--duration-s 3] [--warmup-s 0.5]\n"
        "                            [--work-ms 500] [--job-us 1000] [--case NAME]\n"
        "                            [--policy fifo|credit|band] [--no-makespan] [--seed N]\n"
        "                            [--out DIR] [--control-demo] [--hold-us US]\n"
        "                            [--quantum-us US] [--band-lag-us US] [--band-threshold-us "
        "US]\n"
        "                            [--band-buffering idle|preempt]\n"
        "                            [--engine fv [--fv-mode naive|lazy|bar-remap|optimized]\n"
        "                             [--fv-setup-s S] [--fv-launches K] [--fv-repeats 5]]\n");
    return 2;
  }
  return gpuvm::sched::bench::Main(args);
}
