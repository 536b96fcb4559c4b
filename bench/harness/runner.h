// How gpuvm-bench runs a benchmark: processes with a deadline, the aggregator that serves the VMs,
// and one run of one benchmark in one mode on K VMs at once.
//
//   native  GPUVM_BUS=native <program> --size S                   (K programs side by side)
//   VM mode gpuvm-vm --mode M --aggregator SOCK --dm DM [mode args] -- <program> --size S
//           (K VMs side by side; one gpuvm-aggregator for the whole harness run)
//
// Each program reports itself through $GPUVM_BENCH_RESULT (bench/suite/report.h); gpuvm-vm's
// stderr carries the device model's trap counters (results.h ParseCounters).
//
// Threading: one Runner on the main thread. It forks; children get a process group of their own
// (a timed-out run is killed as a group) and die with the harness (parent-death signal).
#ifndef GPUVM_BENCH_HARNESS_RUNNER_H_
#define GPUVM_BENCH_HARNESS_RUNNER_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/harness/catalog.h"
#include "bench/harness/options.h"
#include "bench/harness/results.h"

namespace gpuvm::bench {

struct ProcessSpec {
  std::vector<std::string> argv;  // argv[0] is a path
  std::vector<std::string> env;   // NAME=VALUE, added to (or replacing in) the harness's own
  std::string stdout_path, stderr_path;
};

struct ProcessOutcome {
  int exit_status = -1;  // exit code, or 128 + signal
  bool timed_out = false;
  bool started = false;  // false: fork failed (exit_status stays -1)
  double wall_seconds = 0;
};

// Starts every process at once and waits for all of them, at most `timeout_s` from the start;
// the late ones are killed (SIGKILL to their process group) and marked timed out.
std::vector<ProcessOutcome> RunProcesses(const std::vector<ProcessSpec>& specs, double timeout_s);

// Where the harness finds its programs.
struct Paths {
  std::string programs;     // the suite's programs (gpuvm-suite-<name>[-rt])
  std::string runtime_lib;  // libcuda.so.1 / libcudart.so.13 (LD_LIBRARY_PATH)
  std::string aggregator, vm, dm;
  std::string preload;  // LD_PRELOAD for programs nvcc built (sanitizer builds), or empty
};

// gpuvm-aggregator on a private abstract socket, for the harness's lifetime.
class AggregatorProcess {
 public:
  // Starts it and waits (up to 30 s) until it accepts connections. Its log goes to `log_path`.
  static Result<std::unique_ptr<AggregatorProcess>> Start(const std::string& binary,
                                                          const std::string& log_path);
  ~AggregatorProcess();  // SIGTERM, then SIGKILL after 10 s
  AggregatorProcess(const AggregatorProcess&) = delete;
  AggregatorProcess& operator=(const AggregatorProcess&) = delete;

  const std::string& socket() const { return socket_; }
  bool alive() const;

 private:
  AggregatorProcess(pid_t pid, std::string socket) : pid_(pid), socket_(std::move(socket)) {}
  pid_t pid_;
  std::string socket_;
};

class Runner {
 public:
  // `scratch` is a private directory for result files and logs (the caller removes it).
  Runner(Options options, Paths paths, std::string rev, std::string scratch);

  // The program that runs `bench` under the --api choice; NotFound saying why when there is none.
  Result<std::string> ProgramFor(const std::string& bench) const;

  // Starts the aggregator if a mode needs one (once).
  Status Prepare();

  // One run of `bench` in `mode` on options.vms VMs at once: a record per VM.
  std::vector<RunRecord> RunOnce(const std::string& bench, const ModeSpec& mode, int run);

 private:
  Options options_;
  Paths paths_;
  std::string rev_, scratch_;
  std::unique_ptr<AggregatorProcess> aggregator_;
};

// `git describe --always --dirty` of `source_dir`, or "unknown".
std::string GitRevision(const std::string& source_dir);

// The last `max_chars` characters of a file, on one line ("" if unreadable).
std::string TailOfFile(const std::string& path, size_t max_chars);

}  // namespace gpuvm::bench

#endif  // GPUVM_BENCH_HARNESS_RUNNER_H_
