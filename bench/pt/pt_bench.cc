// gpuvm-pt-bench: what pass-through costs. Each case runs as a whole CUDA program
// (gpuvm-pt-guest) natively (GPUVM_BUS=native: the software GPU in the program's process) and in a
// local VM (gpuvm-vm: every BAR access of the same, unmodified guest driver traps through gpuvm-dm
// to gpuvm-aggregator, which owns an identical software GPU), alternating, several times, in one
// run. Xen's real PCI pass-through would not trap at all: pt minus native is the price of trapping.
//
//   gpuvm-pt-bench --out DIR [--runs N] [--cases a,b,c]
//
// Per case: median kernel time (the program's launches + synchronize, the compute-heavy part) and
// median whole-program time (start-up, JIT, driver bring-up through traps, copies), native and pt,
// their ratios, and the traps per BAR the pt run took (gpuvm-dm's counters). A table on stdout and
// DIR/pt.json.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/os.h"

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "gpuvm-pt-bench: %s\n", what.c_str());
  std::exit(1);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Run {
  int status = -1;
  double wall_s = 0;
  std::string out, err;
};

// Runs argv with `env` added, output into files under `dir`.
Run Execute(const std::vector<std::string>& argv, const std::vector<std::string>& env,
            const std::string& dir) {
  const std::string out_path = dir + "/run.out", err_path = dir + "/run.err";
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (std::string& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const auto start = Clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) Die("fork");
  if (pid == 0) {
    for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  Run r;
  ::waitpid(pid, &r.status, 0);
  r.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  r.out = ReadFile(out_path);
  r.err = ReadFile(err_path);
  return r;
}

double KernelSeconds(const Run& r, const std::string& what) {
  std::smatch m;
  if (r.status != 0 || !std::regex_search(r.out, m, std::regex("PASSED \\S+ kernels ([0-9.]+) s"))) {
    Die(what + " failed:\n" + r.out + r.err);
  }
  return std::stod(m[1]);
}

// gpuvm-dm's exit line: "BAR0 r=55 w=148 | BAR1 r=0 w=66064 | BAR3 r=0 w=94626 | config ...".
std::vector<uint64_t> TrapCounts(const std::string& err) {
  std::smatch m;
  const std::regex counters("BAR0 r=(\\d+) w=(\\d+) \\| BAR1 r=(\\d+) w=(\\d+) \\| BAR3 r=(\\d+) w=(\\d+)");
  if (!std::regex_search(err, m, counters)) return {};
  std::vector<uint64_t> v;
  for (int i = 1; i <= 6; ++i) v.push_back(std::stoull(m[i]));
  return v;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string Revision() {
  std::string rev = "unknown";
  if (FILE* p = ::popen("git rev-parse --short HEAD 2>/dev/null", "r")) {
    char buf[64] = {};
    if (std::fgets(buf, sizeof(buf), p) != nullptr) rev = buf;
    ::pclose(p);
  }
  while (!rev.empty() && (rev.back() == '\n' || rev.back() == '\r')) rev.pop_back();
  return rev;
}

struct CaseFigures {
  std::string name;
  std::vector<double> native_kernel, pt_kernel, native_wall, pt_wall;
  std::vector<uint64_t> traps;  // of the last pt run
};

int Main(int argc, char** argv) {
  std::string out = ".";
  int runs = 3;
  // Compute-heavy cases of the corpus (the paper's figure: pt within 1.00-1.06 of native).
  std::vector<std::string> cases = {"madd", "mmul", "fmmul", "backprop", "hotspot", "srad"};
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--out" && i + 1 < argc) {
      out = argv[++i];
    } else if (flag == "--runs" && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (flag == "--cases" && i + 1 < argc) {
      cases.clear();
      std::stringstream list(argv[++i]);
      for (std::string c; std::getline(list, c, ',');) {
        if (!c.empty()) cases.push_back(c);
      }
    } else {
      std::fprintf(stderr, "usage: gpuvm-pt-bench --out DIR [--runs N] [--cases a,b,c]\n");
      return 2;
    }
  }
  char scratch_template[] = "/tmp/gpuvm-pt-bench-XXXXXX";
  const char* scratch_dir = ::mkdtemp(scratch_template);
  if (scratch_dir == nullptr) Die("mkdtemp");
  const std::string scratch = scratch_dir;

  // The aggregator: the same software GPU the native runs build in-process (1 GiB VRAM, one compute
  // worker per core).
  const std::string socket = "@gpuvm-pt-bench-" + std::to_string(::getpid());
  const pid_t aggregator = ::fork();
  if (aggregator < 0) Die("fork");
  if (aggregator == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 2);
    ::execl(GPUVM_AGGREGATOR_BIN, GPUVM_AGGREGATOR_BIN, "--socket", socket.c_str(), "--quiet",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  for (int i = 0; !gpuvm::os::ConnectSeqpacket(socket).ok(); ++i) {
    if (i > 3000) Die("gpuvm-aggregator did not come up");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  std::vector<CaseFigures> figures;
  for (const std::string& c : cases) figures.push_back({c, {}, {}, {}, {}, {}});
  for (int run = 0; run < runs; ++run) {
    for (CaseFigures& f : figures) {
      // Alternate which goes first, so drift in the machine's load falls on both alike.
      for (int k = 0; k < 2; ++k) {
        const bool pt = (k + run) % 2 == 1;
        const std::vector<std::string> guest = {GPUVM_GUEST_BIN, "case", f.name, "bench"};
        if (pt) {
          std::vector<std::string> argv = {GPUVM_VM_BIN, "--aggregator", socket, "--dm",
                                           GPUVM_DM_BIN, "--"};
          argv.insert(argv.end(), guest.begin(), guest.end());
          Run r = Execute(argv, {}, scratch);
          f.pt_kernel.push_back(KernelSeconds(r, "pt " + f.name));
          f.pt_wall.push_back(r.wall_s);
          f.traps = TrapCounts(r.err);
        } else {
          Run r = Execute(guest, {"GPUVM_BUS=native"}, scratch);
          f.native_kernel.push_back(KernelSeconds(r, "native " + f.name));
          f.native_wall.push_back(r.wall_s);
        }
      }
    }
  }
  ::kill(aggregator, SIGTERM);
  ::waitpid(aggregator, nullptr, 0);
  std::remove((scratch + "/run.out").c_str());
  std::remove((scratch + "/run.err").c_str());
  ::rmdir(scratch.c_str());

  const std::string revision = Revision();
  std::printf("gpuvm-pt-bench (revision %s, %d runs per case, medians; pt = gpuvm-vm -> gpuvm-dm -> "
              "gpuvm-aggregator, every BAR access trapped)\n",
              revision.c_str(), runs);
  std::printf("%-10s %11s %11s %7s | %10s %10s %7s | %22s %22s\n", "case", "native s", "pt s",
              "pt/nat", "native all", "pt all", "pt/nat", "traps BAR0 r/w", "traps BAR1 w / BAR3 w");
  std::ofstream json(out + "/pt.json");
  json << "{\n  \"benchmark\": \"gpuvm-pt-bench\",\n  \"revision\": \"" << revision
       << "\",\n  \"runs\": " << runs << ",\n  \"cases\": [\n";
  for (size_t i = 0; i < figures.size(); ++i) {
    const CaseFigures& f = figures[i];
    const double nk = Median(f.native_kernel), pk = Median(f.pt_kernel);
    const double nw = Median(f.native_wall), pw = Median(f.pt_wall);
    const std::vector<uint64_t> t = f.traps.size() == 6 ? f.traps : std::vector<uint64_t>(6, 0);
    std::printf("%-10s %11.4f %11.4f %7.3f | %10.3f %10.3f %7.2f | %10llu / %-10llu %10llu / %-10llu\n",
                f.name.c_str(), nk, pk, nk > 0 ? pk / nk : 0, nw, pw, nw > 0 ? pw / nw : 0,
                (unsigned long long)t[0], (unsigned long long)t[1], (unsigned long long)t[3],
                (unsigned long long)t[5]);
    json << "    {\"name\": \"" << f.name << "\", \"native_kernel_s\": " << nk
         << ", \"pt_kernel_s\": " << pk << ", \"kernel_ratio\": " << (nk > 0 ? pk / nk : 0)
         << ", \"native_wall_s\": " << nw << ", \"pt_wall_s\": " << pw
         << ", \"wall_ratio\": " << (nw > 0 ? pw / nw : 0) << ", \"traps\": {\"bar0_reads\": "
         << t[0] << ", \"bar0_writes\": " << t[1] << ", \"bar1_reads\": " << t[2]
         << ", \"bar1_writes\": " << t[3] << ", \"bar3_reads\": " << t[4]
         << ", \"bar3_writes\": " << t[5] << "}}" << (i + 1 < figures.size() ? "," : "") << "\n";
  }
  json << "  ]\n}\n";
  if (!json) Die("could not write " + out + "/pt.json");
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
