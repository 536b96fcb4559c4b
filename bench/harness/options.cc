#include "bench/harness/options.h"

#include <algorithm>
#include <charconv>
#include <sstream>

#include "bench/harness/catalog.h"

namespace gpuvm::bench {

std::string Usage() {
  return "usage: gpuvm-bench [--bench LIST|all|compat] [--mode LIST] [--runs N] [--warmup N]\n"
         "                   [--size test|bench] [--vms K | --scale K,...] [--api "
         "auto|driver|runtime]\n"
         "                   [--out DIR] [--programs DIR] [--timeout SECONDS] [--list] [--quiet]\n"
         "\n"
         "Runs programs of the GPUvm benchmark suite in chosen modes: a warm-up, then N runs,\n"
         "alternating the modes. Prints the median time per benchmark and mode, the ratio to\n"
         "native, the phase breakdown and the traps per BAR; appends one JSON object per run\n"
         "(and per VM) to DIR/results.jsonl. Exit 1 if any run failed or computed a wrong result.\n"
         "\n"
         "  --bench LIST    comma-separated benchmarks (default: all, the GPUvm suite; compat:\n"
         "                  the CUDA compatibility corpus; --list shows them)\n"
         "  --mode LIST     comma-separated modes (default: native; --list shows them)\n"
         "  --runs N        measured runs per benchmark and mode (default 5)\n"
         "  --warmup N      unrecorded runs first (default 1)\n"
         "  --size S        problem scale: test (seconds in all) or bench (default)\n"
         "  --vms K         K VMs (native: K programs) run the benchmark at once (default 1)\n"
         "  --scale LIST    the scale run (GPUvm Fig 4.10): for each count K in LIST, as --vms K,\n"
         "                  one after another; prints median seconds per VM by K and mode\n"
         "  --api A         driver-API programs, runtime-API ones built by nvcc, or auto (the\n"
         "                  runtime-API build where it exists; default)\n"
         "  --out DIR       where results.jsonl goes (default: gpuvm-bench's directory)\n"
         "  --programs DIR  where the suite programs are (default: gpuvm-bench's directory)\n"
         "  --timeout S     a run taking longer is killed and recorded as failed (default 300)\n";
}

namespace {

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream list(text);
  for (std::string item; std::getline(list, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

Result<int> ParseCount(const std::string& flag, const std::string& value, int lo, int hi) {
  int v = 0;
  const char* end = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(value.data(), end, v);
  if (value.empty() || ec != std::errc() || ptr != end) {
    return Status::InvalidArgument(flag + " wants a whole number, not '" + value + "'");
  }
  if (v < lo || v > hi) {
    return Status::InvalidArgument(flag + " must be between " + std::to_string(lo) + " and " +
                                   std::to_string(hi) + ", not " + value);
  }
  return v;
}

std::string Names(bool benchmarks) {
  std::string out;
  if (benchmarks) {
    for (const BenchmarkSpec& b : Benchmarks())
      out += (out.empty() ? "" : ", ") + std::string(b.name);
  } else {
    for (const ModeSpec& m : Modes()) out += (out.empty() ? "" : ", ") + std::string(m.name);
  }
  return out;
}

}  // namespace

Result<Options> ParseOptions(const std::vector<std::string>& args) {
  Options o;
  std::vector<std::string> benchmarks = {"all"};
  std::vector<std::string> modes = {"native"};
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--help" || flag == "-h") return Status::FailedPrecondition(Usage());
    if (flag == "--list") {
      o.list = true;
      continue;
    }
    if (flag == "--quiet") {
      o.quiet = true;
      continue;
    }
    if (flag.rfind("--", 0) != 0) {
      return Status::InvalidArgument("unexpected argument '" + flag + "'");
    }
    if (i + 1 >= args.size()) return Status::InvalidArgument(flag + " needs a value");
    const std::string& value = args[++i];
    if (flag == "--bench") {
      benchmarks = SplitList(value);
      if (benchmarks.empty()) return Status::InvalidArgument("--bench names no benchmark");
    } else if (flag == "--mode") {
      modes = SplitList(value);
      if (modes.empty()) return Status::InvalidArgument("--mode names no mode");
    } else if (flag == "--runs") {
      GPUVM_ASSIGN_OR_RETURN(o.runs, ParseCount(flag, value, 1, kMaxRuns));
    } else if (flag == "--warmup") {
      GPUVM_ASSIGN_OR_RETURN(o.warmup, ParseCount(flag, value, 0, kMaxRuns));
    } else if (flag == "--vms") {
      GPUVM_ASSIGN_OR_RETURN(o.vms, ParseCount(flag, value, 1, kMaxVms));
    } else if (flag == "--scale") {
      o.scale.clear();
      for (const std::string& item : SplitList(value)) {
        GPUVM_ASSIGN_OR_RETURN(const int k, ParseCount(flag, item, 1, kMaxVms));
        o.scale.push_back(k);
      }
      if (o.scale.empty()) return Status::InvalidArgument("--scale names no VM count");
      o.vms = *std::max_element(o.scale.begin(), o.scale.end());
    } else if (flag == "--size") {
      if (value != "test" && value != "bench") {
        return Status::InvalidArgument("--size must be test or bench, not '" + value + "'");
      }
      o.size = value;
    } else if (flag == "--api") {
      if (value == "auto") {
        o.api = Api::kAuto;
      } else if (value == "driver") {
        o.api = Api::kDriver;
      } else if (value == "runtime") {
        o.api = Api::kRuntime;
      } else {
        return Status::InvalidArgument("--api must be auto, driver or runtime, not '" + value +
                                       "'");
      }
    } else if (flag == "--out") {
      if (value.empty()) return Status::InvalidArgument("--out needs a directory");
      o.out = value;
    } else if (flag == "--programs") {
      if (value.empty()) return Status::InvalidArgument("--programs needs a directory");
      o.programs = value;
    } else if (flag == "--timeout") {
      GPUVM_ASSIGN_OR_RETURN(const int seconds, ParseCount(flag, value, 1, 24 * 3600));
      o.timeout_s = seconds;
    } else {
      return Status::InvalidArgument("unknown option '" + flag + "'");
    }
  }

  // Benchmarks: "all" (the suite), "compat" (the compatibility corpus), or known names; kept in
  // the catalog's order, each once.
  auto named = [&](std::string_view name) {
    return std::find(benchmarks.begin(), benchmarks.end(), name) != benchmarks.end();
  };
  for (const std::string& name : benchmarks) {
    if (name != "all" && name != "compat" && FindBenchmark(name) == nullptr) {
      return Status::InvalidArgument("unknown benchmark '" + name + "' (the suite: " + Names(true) +
                                     ")");
    }
  }
  for (const BenchmarkSpec& b : Benchmarks()) {
    if (named(b.compat ? "compat" : "all") || named(b.name)) o.benchmarks.emplace_back(b.name);
  }

  for (const std::string& name : modes) {
    const ModeSpec* mode = FindMode(name);
    if (mode == nullptr) {
      return Status::InvalidArgument("unknown mode '" + name + "' (modes: " + Names(false) + ")");
    }
    if (!mode->unavailable.empty()) {
      return Status::Unimplemented("mode " + name +
                                   " cannot run yet: " + std::string(mode->unavailable));
    }
    if (std::find(o.modes.begin(), o.modes.end(), name) != o.modes.end()) {
      return Status::InvalidArgument("mode " + name + " is named twice");
    }
    if (o.vms > mode->max_vms) {
      return Status::InvalidArgument(
          "mode " + name + " runs at most " + std::to_string(mode->max_vms) +
          (mode->max_vms == 1 ? " VM at a time (the GPU is passed through to one VM)"
                              : " VMs at a time") +
          "; --vms " + std::to_string(o.vms) + " asks for more");
    }
    o.modes.push_back(name);
  }
  return o;
}

}  // namespace gpuvm::bench
