// gpuvm-bench: the GPUvm benchmark suite (bench/suite/) in chosen modes — native, pt, and the
// virtualized modes as they land — N runs after a warm-up, a table of medians and ratios to
// native, and one JSON object per run in <out>/results.jsonl (docs/BENCHMARKS.md).
//
//   gpuvm-bench --bench madd,mmul --mode native,pt --runs 5 --warmup 1 --size bench
//   gpuvm-bench --list
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "bench/harness/catalog.h"
#include "bench/harness/options.h"
#include "bench/harness/runner.h"
#include "bench/harness/scale.h"
#include "bench/harness/summary.h"

#ifndef GPUVM_BENCH_SOURCE_DIR
#define GPUVM_BENCH_SOURCE_DIR "."
#endif
#ifndef GPUVM_BENCH_RUNTIME_LIB
#define GPUVM_BENCH_RUNTIME_LIB ""
#endif
#ifndef GPUVM_BENCH_AGGREGATOR
#define GPUVM_BENCH_AGGREGATOR ""
#endif
#ifndef GPUVM_BENCH_VM
#define GPUVM_BENCH_VM ""
#endif
#ifndef GPUVM_BENCH_DM
#define GPUVM_BENCH_DM ""
#endif
#ifndef GPUVM_BENCH_PRELOAD
#define GPUVM_BENCH_PRELOAD ""
#endif

namespace gpuvm::bench {
namespace {

std::string SelfDirectory() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : self.parent_path().string();
}

void PrintList() {
  std::printf(
      "benchmarks (gpuvm-suite-<name>; -rt: the runtime-API build, where nvcc made one):\n");
  for (const BenchmarkSpec& b : Benchmarks()) {
    std::printf("  %-8s %s\n", std::string(b.name).c_str(), std::string(b.what).c_str());
  }
  std::printf("modes:\n");
  for (const ModeSpec& m : Modes()) {
    std::string what = m.unavailable.empty()
                           ? (m.in_vm ? "in local VMs (gpuvm-vm --mode " + std::string(m.vm_mode) +
                                            ") served by gpuvm-aggregator"
                                      : std::string("the software GPU inside the program"))
                           : "not yet: " + std::string(m.unavailable);
    std::printf("  %-13s %s\n", std::string(m.name).c_str(), what.c_str());
  }
}

// The warm-up rounds (each record to `on_warmup`, if any), then o.runs measured rounds over the
// benchmarks and modes. A measured round rotates which mode goes first, so drift in the machine's
// load falls on every mode alike; each of its records is appended to `results` and then handed to
// `on_record` with its run index.
void RunRounds(
    Runner& runner, const Options& o, std::ofstream& results,
    const std::function<void(const std::string&, const std::string&, const RunRecord&)>& on_warmup,
    const std::function<void(int, const std::string&, const std::string&, const RunRecord&)>&
        on_record) {
  for (int w = 0; w < o.warmup; ++w) {
    for (const std::string& bench : o.benchmarks) {
      for (const std::string& m : o.modes) {
        for (const RunRecord& r : runner.RunOnce(bench, *FindMode(m), -1 - w)) {
          if (on_warmup) on_warmup(bench, m, r);
        }
      }
    }
  }
  for (int run = 0; run < o.runs; ++run) {
    for (const std::string& bench : o.benchmarks) {
      for (size_t i = 0; i < o.modes.size(); ++i) {
        const std::string& m = o.modes[(i + run) % o.modes.size()];
        for (const RunRecord& r : runner.RunOnce(bench, *FindMode(m), run)) {
          results << r.ToJson().Serialize() << "\n";
          results.flush();
          on_record(run, bench, m, r);
        }
      }
    }
  }
}

// --scale: for each VM count, a Runner (its own aggregator) does the warm-up and the runs as
// --vms K would; one table at the end. Returns the exit status.
int RunScale(const Options& options, const Paths& paths, const std::string& rev,
             const std::string& scratch, std::ofstream& results) {
  std::vector<RunRecord> all;
  int failures = 0;
  for (const int k : options.scale) {
    Options o = options;
    o.vms = k;
    const std::string dir = scratch + "/vms" + std::to_string(k);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    Runner runner(o, paths, rev, dir);
    if (const Status prepared = runner.Prepare(); !prepared.ok()) {
      std::fprintf(stderr, "gpuvm-bench: %s\n", prepared.ToString().c_str());
      return 1;
    }
    RunRounds(runner, o, results, nullptr,
              [&](int run, const std::string& bench, const std::string& m, const RunRecord& r) {
                if (!r.correct) ++failures;
                if (!options.quiet) {
                  std::printf("  %d VMs run %d/%d %-7s %-13s vm %d  %8.4f s  %s\n", k, run + 1,
                              o.runs, bench.c_str(), m.c_str(), r.vm, r.seconds,
                              r.correct ? "ok" : ("FAILED: " + r.error).c_str());
                  std::fflush(stdout);
                }
                all.push_back(r);
              });
  }
  std::printf("\n%s", RenderScale(all, options.benchmarks, options.modes, options.scale).c_str());
  return failures > 0 ? 1 : 0;
}

int Main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  Result<Options> parsed = ParseOptions(args);
  if (!parsed.ok()) {
    if (parsed.status().code() == StatusCode::kFailedPrecondition) {
      std::fputs(parsed.status().message().c_str(), stdout);
      return 0;
    }
    std::fprintf(stderr, "gpuvm-bench: %s\n(gpuvm-bench --help shows the usage)\n",
                 parsed.status().message().c_str());
    return 2;
  }
  Options options = *parsed;
  if (options.list) {
    PrintList();
    return 0;
  }
  const std::string self = SelfDirectory();
  if (options.programs.empty()) options.programs = self;
  if (options.out.empty()) options.out = self;

  std::error_code ec;
  std::filesystem::create_directories(options.out, ec);
  const std::string results_path = options.out + "/results.jsonl";
  std::ofstream results(results_path, std::ios::app);
  if (!results) {
    std::fprintf(stderr, "gpuvm-bench: cannot append to %s\n", results_path.c_str());
    return 2;
  }
  char scratch_template[] = "/tmp/gpuvm-bench-XXXXXX";
  if (::mkdtemp(scratch_template) == nullptr) {
    std::fprintf(stderr, "gpuvm-bench: cannot create a scratch directory in /tmp\n");
    return 1;
  }
  const std::string scratch = scratch_template;

  Paths paths{options.programs, GPUVM_BENCH_RUNTIME_LIB, GPUVM_BENCH_AGGREGATOR,
              GPUVM_BENCH_VM,   GPUVM_BENCH_DM,          GPUVM_BENCH_PRELOAD};
  const std::string rev = GitRevision(GPUVM_BENCH_SOURCE_DIR);
  if (!options.scale.empty()) {
    double load[1] = {0};
    if (::getloadavg(load, 1) < 1) load[0] = 0;
    std::printf(
        "gpuvm-bench scale run: revision %s, size %s, %d run%s after %d warm-up per count; load "
        "average %.1f at start on %ld CPUs\n",
        rev.c_str(), options.size.c_str(), options.runs, options.runs == 1 ? "" : "s",
        options.warmup, load[0], ::sysconf(_SC_NPROCESSORS_ONLN));
    const int rc = RunScale(options, paths, rev, scratch, results);
    std::printf("\nresults appended to %s\n", results_path.c_str());
    if (rc != 0) {
      std::printf("logs of the runs kept in %s\n", scratch.c_str());
      return rc;
    }
    std::filesystem::remove_all(scratch, ec);
    return 0;
  }
  Runner runner(options, paths, rev, scratch);
  for (const std::string& bench : options.benchmarks) {
    if (Result<std::string> program = runner.ProgramFor(bench); !program.ok()) {
      std::fprintf(stderr, "gpuvm-bench: %s\n", program.status().message().c_str());
      std::filesystem::remove_all(scratch, ec);
      return 2;
    }
  }
  if (const Status prepared = runner.Prepare(); !prepared.ok()) {
    std::fprintf(stderr, "gpuvm-bench: %s\n", prepared.ToString().c_str());
    std::filesystem::remove_all(scratch, ec);
    return 1;
  }

  double load[1] = {0};
  if (::getloadavg(load, 1) < 1) load[0] = 0;
  std::string modes_text;
  for (const std::string& m : options.modes) modes_text += (modes_text.empty() ? "" : ",") + m;
  char header[512];
  std::snprintf(header, sizeof header,
                "gpuvm-bench: revision %s, size %s, %d run%s after %d warm-up, %d VM%s per run, "
                "modes %s; load average %.1f at start on %ld CPUs; huge pages: %s",
                rev.c_str(), options.size.c_str(), options.runs, options.runs == 1 ? "" : "s",
                options.warmup, options.vms, options.vms == 1 ? "" : "s", modes_text.c_str(),
                load[0], ::sysconf(_SC_NPROCESSORS_ONLN), HostHugePages().c_str());
  if (!options.quiet) std::printf("%s\n", header);

  Summary summary;
  RunRounds(
      runner, options, results,
      [](const std::string& bench, const std::string& m, const RunRecord& r) {
        if (!r.correct) {
          std::fprintf(stderr, "gpuvm-bench: warm-up %s %s failed: %s\n", bench.c_str(), m.c_str(),
                       r.error.c_str());
        }
      },
      [&](int run, const std::string& bench, const std::string& m, const RunRecord& r) {
        summary.Add(r);
        if (!options.quiet) {
          std::printf("  run %d/%d %-7s %-7s vm %d  %8.4f s  %s\n", run + 1, options.runs,
                      bench.c_str(), m.c_str(), r.vm, r.seconds,
                      r.correct ? "ok" : ("FAILED: " + r.error).c_str());
          std::fflush(stdout);
        }
      });
  if (!results) {
    std::fprintf(stderr, "gpuvm-bench: writing %s failed\n", results_path.c_str());
  }

  std::printf("\n%s", summary.Render(header, options.benchmarks, options.modes).c_str());
  std::printf("\nresults appended to %s\n", results_path.c_str());
  if (summary.failures() > 0) {
    std::printf("logs of the runs kept in %s\n", scratch.c_str());
    return 1;
  }
  std::filesystem::remove_all(scratch, ec);
  return results ? 0 : 1;
}

}  // namespace
}  // namespace gpuvm::bench

int main(int argc, char** argv) { return gpuvm::bench::Main(argc, argv); }
