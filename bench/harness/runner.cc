#include "bench/harness/runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/os.h"

extern char** environ;

namespace gpuvm::bench {

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int DecodeStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// The harness's environment with `overrides` (NAME=VALUE) replacing or adding entries.
std::vector<std::string> MergeEnvironment(const std::vector<std::string>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const std::string& o : overrides) {
      if (o.substr(0, o.find('=')) == name) replaced = true;
    }
    if (!replaced) env.push_back(entry);
  }
  env.insert(env.end(), overrides.begin(), overrides.end());
  return env;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Up to `limit` bytes of `path` from byte `from` on.
std::string ReadWholeFile(const std::string& path, size_t limit, uint64_t from = 0) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  if (from != 0) in.seekg(static_cast<std::streamoff>(from));
  if (!in) return "";
  std::string out(limit, '\0');
  in.read(out.data(), static_cast<std::streamsize>(limit));
  out.resize(static_cast<size_t>(in.gcount()));
  return out;
}

bool Executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

uint64_t FileSize(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  return in ? static_cast<uint64_t>(in.tellg()) : 0;
}

}  // namespace

std::vector<ProcessOutcome> RunProcesses(const std::vector<ProcessSpec>& specs, double timeout_s) {
  std::vector<ProcessOutcome> outcomes(specs.size());
  std::vector<pid_t> pids(specs.size(), -1);
  std::vector<int> pidfds(specs.size(), -1);
  std::vector<Clock::time_point> starts(specs.size());
  const pid_t harness = ::getpid();
  for (size_t i = 0; i < specs.size(); ++i) {
    // Everything the child needs is built before fork: after it, only async-signal-safe calls.
    std::vector<std::string> argv = specs[i].argv;
    std::vector<std::string> env = MergeEnvironment(specs[i].env);
    std::vector<char*> cargv = CStrings(argv);
    std::vector<char*> cenv = CStrings(env);
    const int out =
        ::open(specs[i].stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int err =
        ::open(specs[i].stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    starts[i] = Clock::now();
    const pid_t pid = (out >= 0 && err >= 0 && null >= 0) ? ::fork() : -1;
    if (pid == 0) {
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != harness) ::_exit(127);  // the harness died before the prctl
      ::dup2(null, 0);
      ::dup2(out, 1);
      ::dup2(err, 2);
      ::execve(cargv[0], cargv.data(), cenv.data());
      const char msg[] = "gpuvm-bench: exec failed\n";
      [[maybe_unused]] ssize_t ignored = ::write(2, msg, sizeof msg - 1);
      ::_exit(127);
    }
    for (int fd : {out, err, null}) {
      if (fd >= 0) ::close(fd);
    }
    if (pid < 0) continue;
    ::setpgid(pid, pid);  // also here: whichever runs first, the group exists before we kill it
    pids[i] = pid;
    outcomes[i].started = true;
    pidfds[i] = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  }

  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_s));
  auto reap = [&](size_t i, bool block) {
    int status = 0;
    const pid_t r = ::waitpid(pids[i], &status, block ? 0 : WNOHANG);
    if (r != pids[i]) return false;
    outcomes[i].exit_status = DecodeStatus(status);
    outcomes[i].wall_seconds = SecondsSince(starts[i]);
    pids[i] = -1;
    if (pidfds[i] >= 0) ::close(pidfds[i]);
    pidfds[i] = -1;
    return true;
  };
  for (;;) {
    std::vector<pollfd> fds;
    bool any_running = false, all_have_pidfd = true;
    for (size_t i = 0; i < pids.size(); ++i) {
      if (pids[i] < 0) continue;
      if (reap(i, false)) continue;
      any_running = true;
      if (pidfds[i] >= 0) {
        fds.push_back({pidfds[i], POLLIN, 0});
      } else {
        all_have_pidfd = false;
      }
    }
    if (!any_running) break;
    const auto now = Clock::now();
    if (now >= deadline) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (pids[i] < 0) continue;
        ::kill(-pids[i], SIGKILL);
        ::kill(pids[i], SIGKILL);
        reap(i, true);
        outcomes[i].timed_out = true;
      }
      break;
    }
    int wait_ms = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1);
    if (!all_have_pidfd) wait_ms = std::min(wait_ms, 1);  // no pidfd: poll the old way
    ::poll(fds.data(), fds.size(), wait_ms);
  }
  return outcomes;
}

// ------------------------------------------------------------------------------------------------
// AggregatorProcess

Result<std::unique_ptr<AggregatorProcess>> AggregatorProcess::Start(const std::string& binary,
                                                                    const std::string& log_path) {
  if (!Executable(binary)) {
    return Status::NotFound("gpuvm-aggregator is not at " + binary + " (build it first)");
  }
  const std::string socket = "@gpuvm-bench-" + std::to_string(::getpid());
  std::vector<std::string> argv = {binary, "--socket", socket};
  std::vector<char*> cargv = CStrings(argv);
  const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log < 0) return Status::FromErrno(errno, "open " + log_path);
  const pid_t harness = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log);
    return Status::FromErrno(errno, "fork");
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != harness) ::_exit(127);
    ::dup2(log, 1);
    ::dup2(log, 2);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  ::close(log);
  std::unique_ptr<AggregatorProcess> process(new AggregatorProcess(pid, socket));
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (!os::ConnectSeqpacket(socket).ok()) {
    if (!process->alive()) {
      return Status::Unavailable("gpuvm-aggregator exited at start: " + TailOfFile(log_path, 400));
    }
    if (Clock::now() > deadline) {
      return Status::DeadlineExceeded("gpuvm-aggregator did not accept connections within 30 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return process;
}

bool AggregatorProcess::alive() const {
  if (pid_ <= 0) return false;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    const_cast<AggregatorProcess*>(this)->pid_ = -1;  // reaped: never signal a reused pid
    return false;
  }
  return true;
}

AggregatorProcess::~AggregatorProcess() {
  if (pid_ <= 0 || !alive()) return;
  ::kill(pid_, SIGTERM);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
}

// ------------------------------------------------------------------------------------------------
// Runner

Runner::Runner(Options options, Paths paths, std::string rev, std::string scratch)
    : options_(std::move(options)),
      paths_(std::move(paths)),
      rev_(std::move(rev)),
      scratch_(std::move(scratch)) {}

Result<std::string> Runner::ProgramFor(const std::string& bench) const {
  const std::string driver = paths_.programs + "/gpuvm-suite-" + bench;
  const std::string runtime = driver + "-rt";
  switch (options_.api) {
    case Api::kDriver:
      if (Executable(driver)) return driver;
      return Status::NotFound("no driver-API program for " + bench + " (" + driver + ")");
    case Api::kRuntime:
      if (Executable(runtime)) return runtime;
      return Status::NotFound("no runtime-API program for " + bench + " (" + runtime +
                              "): nvcc builds them, and only the Rodinia benchmarks have one");
    case Api::kAuto:
      if (Executable(runtime)) return runtime;
      if (Executable(driver)) return driver;
      return Status::NotFound("no program for " + bench + " in " + paths_.programs);
  }
  return Status::Internal("unknown api");
}

Status Runner::Prepare() {
  bool need_aggregator = false;
  for (const std::string& name : options_.modes) {
    const ModeSpec* mode = FindMode(name);
    if (mode != nullptr && mode->in_vm) need_aggregator = true;
  }
  if (!need_aggregator || aggregator_ != nullptr) return Status::Ok();
  for (const std::string* binary : {&paths_.vm, &paths_.dm}) {
    if (!Executable(*binary)) return Status::NotFound(*binary + " is missing (build it first)");
  }
  GPUVM_ASSIGN_OR_RETURN(aggregator_,
                         AggregatorProcess::Start(paths_.aggregator, scratch_ + "/aggregator.log"));
  return Status::Ok();
}

std::vector<RunRecord> Runner::RunOnce(const std::string& bench, const ModeSpec& mode, int run) {
  std::vector<RunRecord> records;
  double load[1] = {0};
  if (::getloadavg(load, 1) < 1) load[0] = 0;
  const std::string time = UtcTimestamp();
  RunRecord base;
  base.bench = bench;
  base.mode = std::string(mode.name);
  base.vms = options_.vms;
  base.run = run;
  base.size = options_.size;
  base.rev = rev_;
  base.load = load[0];
  base.huge_pages = HostHugePages();
  base.time = time;

  auto fail_all = [&](const std::string& why) {
    for (int vm = 0; vm < options_.vms; ++vm) {
      RunRecord r = base;
      r.vm = vm;
      r.error = why;
      records.push_back(r);
    }
    return records;
  };
  Result<std::string> program = ProgramFor(bench);
  if (!program.ok()) return fail_all(program.status().message());
  const bool runtime_api = program->size() > 3 && program->substr(program->size() - 3) == "-rt";
  base.api = runtime_api ? "runtime" : "driver";
  if (mode.in_vm && (aggregator_ == nullptr || !aggregator_->alive())) {
    return fail_all("gpuvm-aggregator is not running (see " + scratch_ + "/aggregator.log)");
  }

  std::vector<ProcessSpec> specs;
  std::vector<std::string> result_paths;
  for (int vm = 0; vm < options_.vms; ++vm) {
    const std::string stem =
        scratch_ + "/" + bench + "." + std::string(mode.name) + "." + std::to_string(vm);
    ProcessSpec spec;
    spec.stdout_path = stem + ".out";
    spec.stderr_path = stem + ".err";
    result_paths.push_back(stem + ".result.json");
    std::remove(result_paths.back().c_str());
    const char* old_path = std::getenv("LD_LIBRARY_PATH");
    spec.env = {
        "GPUVM_BENCH_RESULT=" + result_paths.back(),
        "LD_LIBRARY_PATH=" + paths_.runtime_lib +
            (old_path != nullptr && old_path[0] != '\0' ? ":" + std::string(old_path) : "")};
    if (runtime_api && !paths_.preload.empty()) spec.env.push_back("LD_PRELOAD=" + paths_.preload);
    const std::vector<std::string> guest = {*program, "--size", options_.size};
    if (!mode.in_vm) {
      spec.env.push_back("GPUVM_BUS=native");
      spec.argv = guest;
    } else {
      spec.argv = {paths_.vm,
                   "--mode",
                   std::string(mode.vm_mode),
                   "--aggregator",
                   aggregator_->socket(),
                   "--dm",
                   paths_.dm,
                   "--name",
                   bench + "-" + std::to_string(vm)};
      spec.argv.insert(spec.argv.end(), mode.vm_args.begin(), mode.vm_args.end());
      spec.argv.push_back("--");
      spec.argv.insert(spec.argv.end(), guest.begin(), guest.end());
    }
    specs.push_back(std::move(spec));
  }

  // The aggregator logs each fv/pv VM's shadow counters (page-table scans, ...) when its session
  // ends, just after the VM's processes exit: the part of its log written from now on has them.
  const std::string aggregator_log = scratch_ + "/aggregator.log";
  const uint64_t log_start = mode.in_vm ? FileSize(aggregator_log) : 0;
  const std::vector<ProcessOutcome> outcomes = RunProcesses(specs, options_.timeout_s);
  std::string session_log;
  const bool shadowed = mode.vm_mode.rfind("fv", 0) == 0 || mode.vm_mode.rfind("pv", 0) == 0;
  if (shadowed) {
    const auto deadline = Clock::now() + std::chrono::seconds(2);
    for (;;) {
      session_log = ReadWholeFile(aggregator_log, 1 << 20, log_start);
      bool all = true;
      for (int vm = 0; vm < options_.vms; ++vm) {
        all &= !ParseSessionCounters(session_log, bench + "-" + std::to_string(vm)).empty();
      }
      if (all || Clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  for (int vm = 0; vm < options_.vms; ++vm) {
    const ProcessOutcome& o = outcomes[vm];
    RunRecord r = base;
    r.vm = vm;
    r.exit_status = o.exit_status;
    r.wall_seconds = o.wall_seconds;
    r.seconds = o.wall_seconds;
    const std::string report = ReadWholeFile(result_paths[vm], kMaxJsonBytes + 1);
    bool have_report = false;
    if (!report.empty()) {
      const Status applied = ApplyProgramResult(report, &r);
      if (applied.ok()) {
        have_report = true;
      } else {
        r.correct = false;
        r.error = applied.message();
      }
    }
    if (mode.in_vm) r.counters = ParseCounters(ReadWholeFile(specs[vm].stderr_path, 1 << 20));
    for (const auto& [name, value] :
         ParseSessionCounters(session_log, bench + "-" + std::to_string(vm))) {
      r.counters[name] = value;
    }
    const std::string err_tail = TailOfFile(specs[vm].stderr_path, 300);
    if (!o.started) {
      r.correct = false;
      r.error = "could not start " + specs[vm].argv[0];
    } else if (o.timed_out) {
      r.correct = false;
      r.error = "timed out after " + std::to_string(static_cast<int>(options_.timeout_s)) +
                " s and was killed";
    } else if (!have_report && r.error.empty()) {
      r.correct = false;
      r.error = "no result from the program (exit status " + std::to_string(o.exit_status) +
                "): " + err_tail;
    } else if (o.exit_status != 0 && r.correct) {
      r.correct = false;
      r.error =
          "exit status " + std::to_string(o.exit_status) + " after a correct result: " + err_tail;
    }
    records.push_back(std::move(r));
  }
  return records;
}

std::string GitRevision(const std::string& source_dir) {
  std::string rev = "unknown";
  const std::string command =
      "git -C '" + source_dir + "' describe --always --dirty --abbrev=10 2>/dev/null";
  if (source_dir.find('\'') != std::string::npos) return rev;
  if (FILE* p = ::popen(command.c_str(), "r")) {
    char buf[128] = {};
    if (std::fgets(buf, sizeof buf, p) != nullptr) rev = buf;
    ::pclose(p);
  }
  while (!rev.empty() && (rev.back() == '\n' || rev.back() == '\r')) rev.pop_back();
  return rev.empty() ? "unknown" : rev;
}

std::string TailOfFile(const std::string& path, size_t max_chars) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const std::streamoff size = in.tellg();
  const std::streamoff from = size > static_cast<std::streamoff>(max_chars)
                                  ? size - static_cast<std::streamoff>(max_chars)
                                  : 0;
  in.seekg(from);
  std::string text(static_cast<size_t>(size - from), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  std::string line;
  for (const char c : text) {
    line += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

}  // namespace gpuvm::bench
