// One run of one benchmark in one mode on one VM, as gpuvm-bench records it: what the program
// reported about itself (phases, correctness — bench/suite/report.h), what the harness saw (exit
// status, wall time, timeouts), and the counters of the virtualization layer (traps per BAR from
// the VM's gpuvm-dm). Each record becomes one line of results.jsonl (docs/BENCHMARKS.md lists the
// fields).
//
// Everything a program or a VM prints is untrusted: ApplyProgramResult checks every field and
// turns a malformed report into a failed run with the reason, never a crash.
//
// Threading: values and pure functions.
#ifndef GPUVM_BENCH_HARNESS_RESULTS_H_
#define GPUVM_BENCH_HARNESS_RESULTS_H_

#include <array>
#include <map>
#include <string>
#include <string_view>

#include "base/status.h"
#include "bench/harness/json.h"

namespace gpuvm::bench {

inline constexpr int kPhaseCount = 5;
inline constexpr std::array<const char*, kPhaseCount> kPhaseNames = {"init", "htod", "launch",
                                                                     "dtoh", "close"};

struct RunRecord {
  std::string bench, mode, api, size, problem;
  int vms = 1, vm = 0, run = 0;
  double seconds = 0;  // the program's own total (sum of its phases); wall time without one
  double wall_seconds =
      0;  // the process as the harness saw it (in a VM: VM start and teardown too)
  std::array<double, kPhaseCount> phases{};
  std::map<std::string, double> counters;  // empty in native mode
  double iterations = 0;  // the program's repeated steps when it reports them (churn), else 0
  bool correct = false;
  std::string error;       // empty when correct
  int exit_status = -1;    // the program's (or gpuvm-vm's) exit status; 128 + signal if killed
  std::string rev;         // git revision of the tree the harness was built from
  double load = 0;         // the machine's 1-minute load average when the run started
  std::string huge_pages;  // the host's huge-page settings (HostHugePages)
  std::string time;        // UTC start time, ISO 8601

  Json ToJson() const;
};

// The host's transparent huge-page settings, which decide whether pinned memory, guest RAM and
// VRAM get huge pages (base/os.h, "Huge pages"): "private P, shared S" with the selected word of
// /sys/kernel/mm/transparent_hugepage/enabled and .../shmem_enabled ("?" where unreadable).
std::string HostHugePages();

// Copies the program's report (its one-line JSON object) into `record`: phases, seconds,
// correctness, its error, api and problem. The bench name must be `record->bench`. Malformed
// reports give InvalidArgument saying which field is wrong; `record` is then left unchanged.
Status ApplyProgramResult(std::string_view text, RunRecord* record);

// The counters gpuvm-dm prints when its VM ends ("BAR0 r=.. w=.. | BAR1 r=.. w=.. | BAR3 r=.. w=..
// | config r=.. w=.. | refused: none" or "refused: reason=n ..."), and any line
// "gpuvm-counters: name=value ..." (a hook for later layers: page-table scans, para-virtual
// calls), from the VM's stderr. The last occurrence of each wins. Keys: bar0_reads, bar0_writes,
// bar1_*, bar3_*, config_reads, config_writes, refused (the total), refused_<reason>, and the
// hook's names as given.
std::map<std::string, double> ParseCounters(std::string_view vm_stderr);

// The fv counters in the aggregator's end-of-session line for the VM named `vm_name` (as given to
// gpuvm-vm --name; the aggregator shows it with gpuvm-vm's "@<mode>" tag)
// (FullVirtGpu::DescribeCounters: "... TLB flushes N, scans N (tables N, ...), shadow entries
// written N ...") in `log`, the part of the aggregator's log written during the run: scans,
// tables_scanned, tlb_flushes, shadow_entries_written. Empty when there is no such line (other
// modes; the line not written yet). The last line for the VM wins.
std::map<std::string, double> ParseSessionCounters(std::string_view log,
                                                   const std::string& vm_name);

// "2025-01-31T12:34:56Z".
std::string UtcTimestamp();

}  // namespace gpuvm::bench

#endif  // GPUVM_BENCH_HARNESS_RESULTS_H_
