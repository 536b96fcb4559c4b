// What every program of the GPUvm benchmark suite (bench/suite/, docs/BENCHMARKS.md) reports, and
// how: the wall time of its five phases, whether its result was right, and a one-line JSON object
// that gpuvm-bench (bench/harness/) collects.
//
// The phases are those of GPUvm's evaluation (Gdev's test programs):
//   init    cuInit / context creation, module load (the PTX JIT), device (and pinned) allocations
//   htod    host-to-device copies
//   launch  kernel launches up to the synchronize that ends them (with any host steps in between)
//   dtoh    device-to-host copies of the results
//   close   frees, module unload, context destruction
// Verification against the CPU reference happens after close and is not timed.
//
// Output: one line `GPUVM-BENCH {json}` on stdout, and the same object (one line) written to the
// file named by $GPUVM_BENCH_RESULT when it is set — the harness reads the file, a person reads
// stdout. The object: {"bench", "api" ("driver"|"runtime"), "size" ("test"|"bench"), "problem"
// (a human description of the scale), "correct", "seconds" (sum of the phases), "phases" {init,
// htod, launch, dtoh, close}, "error" (empty when none), and "iterations" when the program set
// it}.
//
// This file is plain C++17 without project dependencies: nvcc compiles it into the runtime-API
// programs too.
//
// Threading: a Report belongs to the program's main thread.
#ifndef GPUVM_BENCH_SUITE_REPORT_H_
#define GPUVM_BENCH_SUITE_REPORT_H_

#include <array>
#include <chrono>
#include <string>

namespace gpuvm::suite {

enum class Phase { kInit = 0, kHtoD, kLaunch, kDtoH, kClose };
inline constexpr int kPhaseCount = 5;
const char* PhaseName(Phase phase);  // "init", "htod", "launch", "dtoh", "close"

// The problem scale a program runs at: kTest for `make test` (well under a second natively), kBench
// for the figures (0.05-2 s natively on the development machine; docs/BENCHMARKS.md).
enum class Size { kTest, kBench };

// Parses the common command line of a suite program: `[--size test|bench]` (default bench; the
// environment variable GPUVM_BENCH_SIZE supplies the default when set). Prints usage and exits 2
// on anything else.
Size ParseCommandLine(int argc, char** argv, const char* bench);

class Report {
 public:
  // `api` is "driver" or "runtime".
  Report(std::string bench, std::string api, Size size, std::string problem);

  // Starts timing `phase`; the previous phase (if any) ends now. Phases may be entered in any
  // order and more than once: time adds up.
  void Enter(Phase phase);
  // Ends the current phase (time between End and the next Enter is not counted).
  void End();

  // Records a failure (the first one wins); the program is then reported incorrect.
  void Fail(const std::string& what);
  // The verdict of a result check: "" when right, else what is wrong (recorded as a failure).
  void Verify(const std::string& problem);
  bool failed() const { return !error_.empty(); }
  // A program made of repeated steps says how many (> 0): the report then carries "iterations",
  // and gpuvm-bench shows its counters per iteration too.
  void SetIterations(long long iterations) { iterations_ = iterations; }

  // Ends timing, prints the result line (and writes $GPUVM_BENCH_RESULT) with `correct` = no
  // failure recorded, then "PASSED <bench>" or "FAILED <bench>: <error>". Returns the process exit
  // status: 0 when correct, 1 otherwise.
  int Finish();

  // The JSON object (one line) Finish would print; exposed for tests.
  std::string Json() const;

 private:
  using Clock = std::chrono::steady_clock;
  std::string bench_, api_, problem_;
  Size size_;
  std::array<double, kPhaseCount> seconds_{};
  int current_ = -1;
  Clock::time_point since_{};
  std::string error_;
  long long iterations_ = 0;
};

// A JSON string literal (quotes included) for `text`, escaping what JSON requires.
std::string JsonString(const std::string& text);

}  // namespace gpuvm::suite

// Both APIs' programs check each CUDA call the same way: when `result` is not `ok`, records
// `describe(result, text)` (text: the call as written) in `report` as the failure and returns from
// the enclosing void function. GPUVM_SUITE_CU (driver.h) and GPUVM_SUITE_RT (rt/rt.h) pass the
// call's text themselves, so it reads as written, not as the API's macros rename it (cuMemAlloc,
// not cuMemAlloc_v2).
#define GPUVM_SUITE_CHECK(report, result, text, ok, describe) \
  do {                                                        \
    const auto suite_result_ = (result);                      \
    if (suite_result_ != (ok)) {                              \
      (report).Fail(describe(suite_result_, text));           \
      return;                                                 \
    }                                                         \
  } while (0)

#endif  // GPUVM_BENCH_SUITE_REPORT_H_
