// gpuvm-compute-bench: how fast the software GPU's compute engine runs real kernels.
//
//   gpuvm-compute-bench [--out DIR] [--quick] [--repeat N] [--filter SUBSTRING]
//
// Figures, measured in one run:
//   1. thread-instructions per second for fmmul_tiled and madd on 1 worker and on all workers
//   (median of
//      --repeat runs), both per wall-clock second and per CPU-second of the process (the per-core
//      figure that stays meaningful when other processes share the machine), and the all/1 scaling
//      ratio;
//   2. kernel time of every corpus kernel (bench/kernels) on all workers, with its JIT time.
// Every run is verified against the CPU reference; a wrong result fails the program.
// Machine-readable results go to DIR/compute.json.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/compute/corpus_runner.h"
#include "bench/kernels/kernel_corpus.h"
#include "gpu/sim/compute/simt_engine.h"
#include "ptx/translator/translator.h"

#ifndef GPUVM_REVISION
#define GPUVM_REVISION "unknown"
#endif

namespace gpuvm::compute_bench {
namespace {

struct Options {
  std::string out;
  bool quick = false;
  int repeat = 3;
  std::string filter;
};

struct Sample {
  double wall = 0, cpu = 0;
  uint64_t thread_instructions = 0;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string Json(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

int Main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) {
      opt.out = argv[++i];
    } else if (a == "--quick") {
      opt.quick = true;
      opt.repeat = 1;
    } else if (a == "--repeat" && i + 1 < argc) {
      opt.repeat = std::max(1, atoi(argv[++i]));
    } else if (a == "--filter" && i + 1 < argc) {
      opt.filter = argv[++i];
    } else {
      fprintf(stderr, "usage: %s [--out DIR] [--quick] [--repeat N] [--filter SUBSTRING]\n",
              argv[0]);
      return 2;
    }
  }
  const kernels::Size size = opt.quick ? kernels::Size::kTest : kernels::Size::kBench;
  const int all = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto one_engine = sim::compute::SimtEngine::Create({.workers = 1});
  auto all_engine = sim::compute::SimtEngine::Create({.workers = all});
  printf(
      "gpuvm-compute-bench: revision %s, interpreter %s, %d hardware threads, %s sizes, median of "
      "%d\n",
      GPUVM_REVISION, one_engine->interpreter_name(), all, opt.quick ? "test" : "bench",
      opt.repeat);
  std::string json = "{\"revision\": " + Json(GPUVM_REVISION) +
                     ", \"interpreter\": " + Json(one_engine->interpreter_name()) +
                     ", \"hardware_threads\": " + std::to_string(all) +
                     ", \"size\": " + Json(opt.quick ? "test" : "bench") + ",\n \"headline\": [";

  // 1. Thread-instruction rates.
  printf("\n%-12s %7s %12s %14s %12s %9s\n", "kernel", "workers", "Mthr-inst/s", "M per CPU-s",
         "kernel ms", "scaling");
  bool first = true;
  for (const char* name : {"fmmul_tiled", "madd"}) {
    Result<kernels::Case> c = kernels::MakeCase(name, size, 1);
    if (!c.ok()) {
      fprintf(stderr, "%s: %s\n", name, c.status().ToString().c_str());
      return 1;
    }
    Result<isa::Module> m = ptx::CompilePtx(c->ptx);
    if (!m.ok()) {
      fprintf(stderr, "%s: %s\n", name, m.status().ToString().c_str());
      return 1;
    }
    double one_rate = 0;
    for (int workers : {1, all}) {
      if (workers == all && all == 1 && !first) break;
      sim::compute::SimtEngine& engine = workers == 1 ? *one_engine : *all_engine;
      std::vector<double> rate, cpu_rate, ms;
      uint64_t insts = 0;
      for (int r = 0; r < opt.repeat; ++r) {
        Result<CaseResult> res = RunTranslatedCase(*c, *m, engine);
        if (!res.ok()) {
          fprintf(stderr, "%s: %s\n", name, res.status().ToString().c_str());
          return 1;
        }
        insts = res->thread_instructions;
        rate.push_back(res->thread_instructions / res->kernel_seconds / 1e6);
        cpu_rate.push_back(res->thread_instructions / res->cpu_seconds / 1e6);
        ms.push_back(res->kernel_seconds * 1e3);
      }
      const double med = Median(rate);
      if (workers == 1) one_rate = med;
      const double scaling = one_rate > 0 ? med / one_rate : 0;
      printf("%-12s %7d %12.1f %14.1f %12.2f %8.2fx\n", name, workers, med, Median(cpu_rate),
             Median(ms), scaling);
      json += std::string(first ? "" : ",") + "\n  {\"kernel\": " + Json(name) +
              ", \"workers\": " + std::to_string(workers) +
              ", \"thread_instructions\": " + std::to_string(insts) +
              ", \"mthread_inst_per_s\": " + std::to_string(med) +
              ", \"mthread_inst_per_cpu_s\": " + std::to_string(Median(cpu_rate)) +
              ", \"kernel_ms\": " + std::to_string(Median(ms)) +
              ", \"scaling\": " + std::to_string(scaling) + "}";
      first = false;
      if (all == 1) break;
    }
  }
  json += "\n ],\n \"kernels\": [";

  // 2. Every corpus kernel.
  printf("\n%-20s %10s %10s %14s %12s %8s\n", "case", "kernel ms", "CPU ms", "Mthread-inst",
         "Mthr-inst/s", "JIT ms");
  first = true;
  for (const std::string& name : kernels::CaseNames()) {
    if (!opt.filter.empty() && name.find(opt.filter) == std::string::npos) continue;
    Result<kernels::Case> c = kernels::MakeCase(name, size, 1);
    if (!c.ok()) {
      fprintf(stderr, "%s: %s\n", name.c_str(), c.status().ToString().c_str());
      return 1;
    }
    std::vector<double> ms, cpu_ms;
    CaseResult last;
    for (int r = 0; r < std::max(1, opt.repeat / 2); ++r) {
      Result<CaseResult> res = RunCase(*c, *all_engine);
      if (!res.ok()) {
        fprintf(stderr, "%s: %s\n", name.c_str(), res.status().ToString().c_str());
        return 1;
      }
      last = *res;
      ms.push_back(res->kernel_seconds * 1e3);
      cpu_ms.push_back(res->cpu_seconds * 1e3);
    }
    const double kms = Median(ms);
    printf("%-20s %10.2f %10.2f %14.2f %12.1f %8.2f\n", name.c_str(), kms, Median(cpu_ms),
           last.thread_instructions / 1e6, last.thread_instructions / (kms * 1e3),
           last.jit_seconds * 1e3);
    fflush(stdout);
    json += std::string(first ? "" : ",") + "\n  {\"case\": " + Json(name) +
            ", \"kernel_ms\": " + std::to_string(kms) +
            ", \"cpu_ms\": " + std::to_string(Median(cpu_ms)) +
            ", \"thread_instructions\": " + std::to_string(last.thread_instructions) +
            ", \"launches\": " + std::to_string(last.launches) +
            ", \"jit_ms\": " + std::to_string(last.jit_seconds * 1e3) + "}";
    first = false;
  }
  json += "\n ]\n}\n";
  if (!opt.out.empty()) {
    std::string path = opt.out + "/compute.json";
    std::ofstream f(path);
    f << json;
    if (!f) {
      fprintf(stderr, "cannot write %s\n", path.c_str());
      return 1;
    }
    printf("\nresults: %s\n", path.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace gpuvm::compute_bench

int main(int argc, char** argv) { return gpuvm::compute_bench::Main(argc, argv); }
