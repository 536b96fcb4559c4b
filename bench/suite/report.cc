#include "bench/suite/report.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "base/enum_names.h"
#include "base/json_number.h"
#include "base/json_string.h"

namespace gpuvm::suite {

const char* PhaseName(Phase phase) {
  static constexpr EnumName<Phase> kNames[] = {{Phase::kInit, "init"},
                                               {Phase::kHtoD, "htod"},
                                               {Phase::kLaunch, "launch"},
                                               {Phase::kDtoH, "dtoh"},
                                               {Phase::kClose, "close"}};
  return NameOf(kNames, phase, "?");
}

Size ParseCommandLine(int argc, char** argv, const char* bench) {
  Size size = Size::kBench;
  if (const char* env = std::getenv("GPUVM_BENCH_SIZE"); env != nullptr && env[0] != '\0') {
    if (std::strcmp(env, "test") == 0) {
      size = Size::kTest;
    } else if (std::strcmp(env, "bench") != 0) {
      std::fprintf(stderr, "%s: GPUVM_BENCH_SIZE must be test or bench, not '%s'\n", bench, env);
      std::exit(2);
    }
  }
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--size" && i + 1 < argc) {
      const std::string value = argv[++i];
      if (value == "test") {
        size = Size::kTest;
        continue;
      }
      if (value == "bench") {
        size = Size::kBench;
        continue;
      }
    }
    std::fprintf(
        stderr,
        "usage: %s [--size test|bench]\n"
        "  One program of gpuvm's GPUvm benchmark suite (docs/BENCHMARKS.md): runs, checks\n"
        "  its result, prints `GPUVM-BENCH {json}` with the phase times, and writes the same\n"
        "  object to $GPUVM_BENCH_RESULT when set. Exit 0 when the result is correct.\n",
        argv[0]);
    std::exit(2);
  }
  return size;
}

Report::Report(std::string bench, std::string api, Size size, std::string problem)
    : bench_(std::move(bench)), api_(std::move(api)), problem_(std::move(problem)), size_(size) {}

void Report::Enter(Phase phase) {
  End();
  current_ = static_cast<int>(phase);
  since_ = Clock::now();
}

void Report::End() {
  if (current_ < 0) return;
  seconds_[current_] += std::chrono::duration<double>(Clock::now() - since_).count();
  current_ = -1;
}

void Report::Fail(const std::string& what) {
  if (error_.empty()) error_ = what.empty() ? "failed" : what;
}

void Report::Verify(const std::string& problem) {
  if (!problem.empty()) Fail("wrong result: " + problem);
}

std::string JsonString(const std::string& text) {
  std::string out;
  AppendJsonString(out, text);
  return out;
}

std::string Report::Json() const {
  double total = 0;
  for (double s : seconds_) total += s;
  std::string out = "{\"bench\":" + JsonString(bench_) + ",\"api\":" + JsonString(api_) +
                    ",\"size\":" + JsonString(size_ == Size::kTest ? "test" : "bench") +
                    ",\"problem\":" + JsonString(problem_) +
                    ",\"correct\":" + (error_.empty() ? "true" : "false");
  out += ",\"seconds\":";
  AppendJsonNumber(out, total);  // exact: gpuvm-bench reads back the same double
  out += ",\"phases\":{";
  for (int i = 0; i < kPhaseCount; ++i) {
    out += std::string(i ? "," : "") + "\"" + PhaseName(static_cast<Phase>(i)) + "\":";
    AppendJsonNumber(out, seconds_[i]);
  }
  out += "},\"error\":" + JsonString(error_);
  if (iterations_ > 0) out += ",\"iterations\":" + std::to_string(iterations_);
  out += "}";
  return out;
}

int Report::Finish() {
  End();
  const std::string json = Json();
  std::printf("GPUVM-BENCH %s\n", json.c_str());
  if (const char* path = std::getenv("GPUVM_BENCH_RESULT"); path != nullptr && path[0] != '\0') {
    std::ofstream file(path, std::ios::trunc);
    file << json << "\n";
    file.close();
    if (!file) {
      std::fprintf(stderr, "%s: could not write $GPUVM_BENCH_RESULT (%s)\n", bench_.c_str(), path);
      if (error_.empty()) error_ = "could not write the result file";
    }
  }
  if (error_.empty()) {
    std::printf("PASSED %s\n", bench_.c_str());
  } else {
    std::printf("FAILED %s: %s\n", bench_.c_str(), error_.c_str());
  }
  std::fflush(stdout);
  return error_.empty() ? 0 : 1;
}

}  // namespace gpuvm::suite
