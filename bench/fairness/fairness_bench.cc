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
// The engine: `--engine synthetic` (the only one today) is a timed engine: a submission occupies it
// for its nominal GPU time (+/- 10 % jitter), measured on the monotonic clock, and its completion
// is signalled like an interrupt (a thread sleeping until then calls Dispatcher::Wake). It stands
// in for the physical channel until the fv submission path (guest IB_PUT writes on shadow channels)
// can feed the dispatcher from real VMs; the dispatcher, scheduler, threads and clock are the ones
// the aggregator runs.
//
//   gpuvm-fairness-bench [--duration-s 3] [--warmup-s 0.5] [--work-ms 500] [--job-us 1000]
//                        [--case NAME] [--policy NAME] [--no-makespan] [--seed N] [--out DIR]
//                        [--control-demo]
// --out DIR: per case, policy and window size a CSV of every VM's share per window
// (<case>-<policy>-<window>ms.csv), a gnuplot script and PNG per case (<case>.png: shares over
// time, one panel per policy, targets dashed), and summary.csv.
// --control-demo: the operator's view (make run): four VMs with shares 10/20/30/40 under BAND, the
// 10 % VM raised to 40 % and the 40 % one lowered to 10 % halfway through (live, through the same
// control service gpuvm-ctl talks to), target and achieved share printed per 500 ms window.
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
#include <map>
#include <mutex>
#include <optional>
#include <random>
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
  double warmup_s = 0.5;
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
      "operator view: 4 VMs under BAND, shares 10/20/30/40; at %.1f s the operator swaps "
      "VM 1 and VM 4 (gpuvm-ctl set-share 1 40; set-share 4 10, applied together)\n",
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
  Result<RunResult> r =
      RunReal(args, vms, PolicyKind::kBand, duration, Duration(0), {LiveChange{half, swap}});
  if (!r.ok()) {
    std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
    return 1;
  }
  const std::vector<sim::Window> windows =
      sim::Windows(r->result, vms.size(), 500ms, Duration(0), duration, 500ms);
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

// name (before '@') -> gpu_time_ns, from the stats JSON.
std::map<std::string, double> GpuTimes(const std::string& json) {
  std::map<std::string, double> out;
  size_t pos = 0;
  while ((pos = json.find("\"name\":\"", pos)) != std::string::npos) {
    pos += 8;
    const size_t end = json.find('"', pos);
    if (end == std::string::npos) break;
    std::string name = json.substr(pos, end - pos);
    name = name.substr(0, name.find('@'));
    const size_t g = json.find("\"gpu_time_ns\":", end);
    const size_t next = json.find("\"name\":\"", end);
    if (g == std::string::npos || (next != std::string::npos && g > next)) continue;
    out[name] = std::atof(json.c_str() + g + 14);
  }
  return out;
}

struct FvRun {
  std::vector<double> t_ms;               // sample times
  std::vector<std::vector<double>> used;  // per sample, per VM: cumulative GPU ns
  int failed_vms = 0;
};

Result<FvRun> RunFv(const Args& args, const std::vector<SimVm>& vms, PolicyKind policy,
                    const std::string& dir) {
  const std::string socket = "@gpuvm-fairness-" + std::to_string(::getpid());
  std::vector<std::string> agg = {GPUVM_AGGREGATOR_BIN,
                                  "--socket",
                                  socket,
                                  "--vram-mib",
                                  "2048",
                                  "--quiet",
                                  "--scheduler",
                                  std::string(PolicyKindName(policy))};
  for (size_t i = 0; i < vms.size(); ++i) {
    char share[32];
    std::snprintf(share, sizeof share, "vm%zu=%.3f", i + 1, vms[i].share_percent);
    agg.push_back("--vm-share");
    agg.push_back(share);
  }
  const pid_t aggregator = Spawn(agg, dir + "/aggregator.log");
  const std::string control = socket + "-control";
  for (int i = 0; i < 2000 && !ctl::Call(control, control::ListRequest{}).ok(); ++i) ::usleep(5000);
  const double seconds = args.duration_s + 1.5;  // start-up, then the measured stretch
  std::vector<pid_t> guests;
  for (size_t i = 0; i < vms.size(); ++i) {
    const bool is_long = vms[i].job > std::chrono::microseconds(args.job_us);
    guests.push_back(
        Spawn({GPUVM_VM_BIN, "--aggregator", socket, "--dm", GPUVM_DM_BIN, "--mode", "fv-lazy",
               "--name", "vm" + std::to_string(i + 1), "--ram-mib", "256", "--",
               GPUVM_FAIRNESS_GUEST_BIN, is_long ? "long-madd" : "madd", std::to_string(seconds)},
              dir + "/vm" + std::to_string(i + 1) + ".log"));
  }
  FvRun run;
  const auto start = std::chrono::steady_clock::now();
  const auto until = start + std::chrono::duration<double>(seconds - 0.3);
  for (auto next = start; std::chrono::steady_clock::now() < until; next += 100ms) {
    std::this_thread::sleep_until(next);
    Result<control::Reply> reply = ctl::Call(control, control::StatsRequest{});
    if (!reply.ok() || !reply->status.ok()) continue;
    const std::map<std::string, double> times = GpuTimes(reply->body);
    std::vector<double> row;
    for (size_t i = 0; i < vms.size(); ++i) {
      auto it = times.find("vm" + std::to_string(i + 1));
      row.push_back(it == times.end() ? 0 : it->second);
    }
    run.t_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    run.used.push_back(row);
  }
  for (pid_t g : guests) {
    int status = 0;
    for (int i = 0; i < 6000 && ::waitpid(g, &status, WNOHANG) == 0; ++i) ::usleep(10000);
    if (::waitpid(g, &status, WNOHANG) == 0) {
      ::kill(-g, SIGKILL);
      ::waitpid(g, &status, 0);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++run.failed_vms;
  }
  ::kill(aggregator, SIGTERM);
  int status = 0;
  ::waitpid(aggregator, &status, 0);
  return run;
}

// Shares per window of `k` samples (100 ms each) between `from_ms` and the last sample in which
// every VM was running; returns the per-window shares.
std::vector<std::vector<double>> FvWindows(const FvRun& run, size_t k, double from_ms,
                                           double to_ms) {
  std::vector<std::vector<double>> windows;
  size_t first = 0;
  while (first < run.t_ms.size() && run.t_ms[first] < from_ms) ++first;
  for (size_t a = first; a + k < run.t_ms.size() && run.t_ms[a + k] <= to_ms; a += k) {
    std::vector<double> delta;
    double total = 0;
    for (size_t v = 0; v < run.used[a].size(); ++v) {
      delta.push_back(run.used[a + k][v] - run.used[a][v]);
      total += delta.back();
    }
    if (total <= 0) continue;
    for (double& d : delta) d /= total;
    windows.push_back(delta);
  }
  return windows;
}

int MainFv(const Args& args) {
  const std::vector<std::pair<std::string, PolicyKind>> policies = {
      {"fifo", PolicyKind::kFifo}, {"credit", PolicyKind::kCredit}, {"band", PolicyKind::kBand}};
  const std::string dir = args.out.empty() ? "/tmp/gpuvm-fairness-fv" : args.out;
  ::mkdir(dir.c_str(), 0755);
  std::printf(
      "engine: fv — gpuvm-aggregator on the software GPU, one fv-lazy VM per VM (gpuvm-vm, "
      "gpuvm-dm) looping madd (256x256) or long-madd (15x the elements); GPU time per VM "
      "sampled over the control socket every 100 ms; %.1f s measured after 1 s\n",
      args.duration_s);
  std::printf("%-14s %-7s %9s %9s %8s %8s %6s  %s\n", "case", "policy", "dev500ms", "dev100ms",
              "jain500", "jain100", "util", "mean share % (target)");
  for (const Case& c : Cases(args)) {
    if (!args.only_case.empty() && c.name != args.only_case) continue;
    const std::vector<double> targets = sim::TargetShares(c.vms);
    for (const auto& [pname, policy] : policies) {
      if (!args.only_policy.empty() && pname != args.only_policy) continue;
      Result<FvRun> run = RunFv(args, c.vms, policy, dir);
      if (!run.ok()) {
        std::fprintf(stderr, "%s\n", run.status().ToString().c_str());
        return 1;
      }
      const double to_ms = 1000 + args.duration_s * 1000;
      std::string means;
      double dev[2] = {0, 0}, jain[2] = {1, 1};
      int w = 0;
      for (size_t k : {size_t(5), size_t(1)}) {
        const auto windows = FvWindows(*run, k, 1000, to_ms);
        std::vector<double> mean(c.vms.size(), 0);
        std::ofstream csv(dir + "/" + c.name + "-" + pname + "-" + std::to_string(k * 100) +
                          "ms.csv");
        csv << "window";
        for (size_t v = 0; v < c.vms.size(); ++v) csv << ",vm" << v + 1 << "_" << c.vms[v].name;
        csv << "\n";
        for (size_t i = 0; i < windows.size(); ++i) {
          csv << i;
          double sum = 0, sum_sq = 0;
          for (size_t v = 0; v < c.vms.size(); ++v) {
            csv << "," << windows[i][v];
            mean[v] += windows[i][v] / windows.size();
            dev[w] = std::max(dev[w], std::abs(windows[i][v] - targets[v]));
            const double x = windows[i][v] / targets[v];
            sum += x;
            sum_sq += x * x;
          }
          csv << "\n";
          jain[w] = std::min(jain[w], sum * sum / (c.vms.size() * sum_sq));
        }
        if (k == 5) {
          for (size_t v = 0; v < c.vms.size(); ++v) {
            means += Pct(mean[v]) + " (" + Pct(targets[v]) + ") ";
          }
        }
        ++w;
      }
      // How contended the GPU was: GPU time charged over wall time in the measured stretch.
      double util = 0;
      {
        size_t a = 0, b = 0;
        for (size_t i = 0; i < run->t_ms.size(); ++i) {
          if (run->t_ms[i] < 1000) a = i + 1;
          if (run->t_ms[i] <= to_ms) b = i;
        }
        if (b > a && a < run->t_ms.size()) {
          double busy = 0;
          for (size_t v = 0; v < c.vms.size(); ++v) busy += run->used[b][v] - run->used[a][v];
          util = busy / 1e6 / (run->t_ms[b] - run->t_ms[a]);
        }
      }
      std::printf("%-14s %-7s %9s %9s %8.3f %8.3f %5s%%  %s%s\n", c.name.c_str(), pname.c_str(),
                  Pct(dev[0]).c_str(), Pct(dev[1]).c_str(), jain[0], jain[1], Pct(util).c_str(),
                  means.c_str(), run->failed_vms ? " (SOME VMS FAILED, see logs)" : "");
      std::fflush(stdout);
    }
  }
  return 0;
}

int Main(const Args& args) {
  if (args.control_demo) return ControlDemo(args);
  if (args.engine == "fv") return MainFv(args);
  const std::vector<std::pair<std::string, PolicyKind>> policies = {
      {"fifo", PolicyKind::kFifo}, {"credit", PolicyKind::kCredit}, {"band", PolicyKind::kBand}};
  const Duration duration =
      std::chrono::duration_cast<Duration>(std::chrono::duration<double>(args.duration_s));
  const Duration warmup =
      std::chrono::duration_cast<Duration>(std::chrono::duration<double>(args.warmup_s));
  if (!args.out.empty()) ::mkdir(args.out.c_str(), 0755);
  std::ofstream summary;
  if (!args.out.empty()) {
    summary.open(args.out + "/summary.csv");
    summary << "case,policy,window_ms,worst_deviation_pct,jain_min,utilization,mean_shares_pct,"
               "targets_pct\n";
  }
  std::printf(
      "engine: synthetic timed engine (see --help); dispatcher thread + monotonic clock; "
      "%.1f s per run, first %.1f s not measured; madd %lld us, long-madd 15x\n",
      args.duration_s, args.warmup_s, static_cast<long long>(args.job_us));
  std::printf(
      "BAND hold_max %lld us; 'gap': a VM's time from completion to its next submission "
      "(median/p90, us)\n",
      static_cast<long long>(args.hold_us));
  std::printf("%-14s %-7s %9s %9s %8s %8s %6s %12s  %s\n", "case", "policy", "dev500ms", "dev100ms",
              "jain500", "jain100", "util", "gap", "mean share % (target)");
  for (const Case& c : Cases(args)) {
    if (!args.only_case.empty() && c.name != args.only_case) continue;
    std::vector<std::string> ran;
    for (const auto& [pname, policy] : policies) {
      if (!args.only_policy.empty() && pname != args.only_policy) continue;
      Result<RunResult> r = RunReal(args, c.vms, policy, duration, Duration(0));
      if (!r.ok()) {
        std::fprintf(stderr, "%s/%s: %s\n", c.name.c_str(), pname.c_str(),
                     r.status().ToString().c_str());
        return 1;
      }
      ran.push_back(pname);
      const std::vector<double> targets = sim::TargetShares(c.vms);
      const sim::FairnessReport w500 =
          sim::Evaluate(r->result, targets, 500ms, warmup, duration, 500ms);
      const sim::FairnessReport w100 =
          sim::Evaluate(r->result, targets, 100ms, warmup, duration, 100ms);
      std::string shares;
      for (size_t i = 0; i < c.vms.size(); ++i) {
        shares += Pct(w500.mean_share[i]) + " (" + Pct(targets[i]) + ") ";
      }
      char gap[32];
      std::snprintf(gap, sizeof gap, "%.0f/%.0f", Percentile(r->gaps, 0.5),
                    Percentile(r->gaps, 0.9));
      std::printf("%-14s %-7s %9s %9s %8.3f %8.3f %5s%% %12s  %s\n", c.name.c_str(), pname.c_str(),
                  Pct(w500.worst_deviation).c_str(), Pct(w100.worst_deviation).c_str(),
                  w500.jain_min, w100.jain_min, Pct(w500.utilization).c_str(), gap, shares.c_str());
      std::fflush(stdout);
      if (!args.out.empty()) {
        for (const auto& [window, report] : {std::pair{500ms, &w500}, std::pair{100ms, &w100}}) {
          WriteCsv(args.out + "/" + c.name + "-" + pname + "-" + std::to_string(window.count()) +
                       "ms.csv",
                   c.vms,
                   sim::Windows(r->result, c.vms.size(), window, Duration(0), duration, window),
                   targets);
          std::string means, target_list;
          for (size_t i = 0; i < c.vms.size(); ++i) {
            means += (i ? " " : "") + Pct(report->mean_share[i]);
            target_list += (i ? " " : "") + Pct(targets[i]);
          }
          summary << c.name << "," << pname << "," << window.count() << ","
                  << Pct(report->worst_deviation) << "," << report->jain_min << ","
                  << report->utilization << "," << means << "," << target_list << "\n";
        }
      }
    }
    if (!args.out.empty() && !ran.empty()) WritePlot(args.out, c, ran);
  }
  if (!args.makespan) return 0;
  // Fig 4.13: the same GPU work per VM under each policy; total time against FIFO.
  const Duration work = std::chrono::milliseconds(args.work_ms);
  std::printf("\ntotal time for %lld ms of GPU work per VM, against FIFO:\n",
              static_cast<long long>(args.work_ms));
  std::printf("%-10s %10s %10s %10s\n", "case", "fifo (s)", "credit", "band");
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
    std::map<std::string, double> seconds;
    for (const auto& [pname, policy] : policies) {
      Result<RunResult> r = RunReal(args, c.vms, policy, Duration(0), work);
      if (!r.ok()) {
        std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
        return 1;
      }
      seconds[pname] = std::chrono::duration<double>(r->makespan).count();
    }
    std::printf("%-10s %10.3f %10.3f %10.3f\n", c.name.c_str(), seconds["fifo"],
                seconds["credit"] / seconds["fifo"], seconds["band"] / seconds["fifo"]);
    if (summary.is_open()) {
      summary << c.name << ",makespan_s," << seconds["fifo"] << "," << seconds["credit"] << ","
              << seconds["band"] << ",,,\n";
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
        "                            [--out DIR] [--control-demo]\n");
    return 2;
  }
  return gpuvm::sched::bench::Main(args);
}
