// RunProcesses against /bin/sh, and gpuvm-bench end to end: the suite's programs at test size,
// natively and (where the build has the VM pieces) in a pass-through VM, with results.jsonl read
// back through the parser.
#include "bench/harness/runner.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/harness/json.h"

namespace gpuvm::bench {
namespace {

class TempDir {
 public:
  TempDir() {
    char dir[] = "/tmp/gpuvm-bench-test-XXXXXX";
    path_ = ::mkdtemp(dir) != nullptr ? dir : "/tmp";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

ProcessSpec Shell(const TempDir& dir, const std::string& script,
                  std::vector<std::string> env = {}) {
  return {{"/bin/sh", "-c", script}, std::move(env), dir.path() + "/out", dir.path() + "/err"};
}

TEST(BenchHarnessRunner, ExitStatusOutputAndEnvironment) {
  TempDir dir;
  const auto outcomes = RunProcesses(
      {Shell(dir, "echo \"$GPUVM_TEST_VALUE\"; echo oops >&2; exit 3", {"GPUVM_TEST_VALUE=42"})},
      30);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_TRUE(outcomes[0].started);
  EXPECT_FALSE(outcomes[0].timed_out);
  EXPECT_EQ(outcomes[0].exit_status, 3);
  EXPECT_EQ(Slurp(dir.path() + "/out"), "42\n");
  EXPECT_EQ(TailOfFile(dir.path() + "/err", 100), "oops");
}

TEST(BenchHarnessRunner, ASignalIsReportedAs128Plus) {
  TempDir dir;
  const auto outcomes = RunProcesses({Shell(dir, "kill -9 $$")}, 30);
  EXPECT_EQ(outcomes[0].exit_status, 128 + 9);
}

TEST(BenchHarnessRunner, ALateRunIsKilledWithItsChildren) {
  TempDir dir;
  const std::string pid_file = dir.path() + "/child";
  const auto start = std::chrono::steady_clock::now();
  // The shell starts a grandchild that would outlive a kill of the shell alone.
  const auto outcomes = RunProcesses(
      {Shell(dir, "sleep 30 & echo $! > " + pid_file + "; wait"), Shell(dir, "exit 0")}, 0.5);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(took, 10);
  EXPECT_TRUE(outcomes[0].timed_out);
  EXPECT_FALSE(outcomes[1].timed_out);
  EXPECT_EQ(outcomes[1].exit_status, 0);
  const pid_t grandchild = std::atoi(Slurp(pid_file).c_str());
  ASSERT_GT(grandchild, 0);
  // Killed with its group (it may linger a moment as a zombie of init; give it that moment).
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    std::ifstream stat("/proc/" + std::to_string(grandchild) + "/stat");
    std::string text;
    std::getline(stat, text);
    gone = !stat || text.find(") Z") != std::string::npos;
    if (!gone) usleep(10000);
  }
  EXPECT_TRUE(gone) << "the grandchild survived the timeout";
}

TEST(BenchHarnessRunner, AMissingProgramIsAFailedStartNotACrash) {
  TempDir dir;
  const auto outcomes = RunProcesses(
      {{{dir.path() + "/no-such-program"}, {}, dir.path() + "/out", dir.path() + "/err"}}, 30);
  EXPECT_EQ(outcomes[0].exit_status, 127);
}

TEST(BenchHarnessRunner, GitRevisionOfThisTree) {
  EXPECT_EQ(GitRevision("/nonexistent-dir"), "unknown");
  EXPECT_EQ(GitRevision("it's"), "unknown");
}

// ------------------------------------------------------------------------------------------------
// gpuvm-bench end to end.

struct BenchRun {
  int exit_status = -1;
  std::string output;
};

BenchRun RunBench(const std::string& args) {
  BenchRun r;
  const std::string command = std::string(GPUVM_BENCH_BIN) + " " + args + " 2>&1";
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::vector<Json> ReadResults(const std::string& path) {
  std::vector<Json> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    Result<Json> j = ParseJson(line);
    EXPECT_TRUE(j.ok()) << line << ": " << j.status().ToString();
    if (j.ok()) lines.push_back(*j);
  }
  return lines;
}

void ExpectWellFormed(const Json& j) {
  ASSERT_TRUE(j.is_object());
  const std::pair<const char*, Json::Type> fields[] = {
      {"bench", Json::Type::kString},        {"mode", Json::Type::kString},
      {"vms", Json::Type::kNumber},          {"vm", Json::Type::kNumber},
      {"run", Json::Type::kNumber},          {"api", Json::Type::kString},
      {"size", Json::Type::kString},         {"seconds", Json::Type::kNumber},
      {"wall_seconds", Json::Type::kNumber}, {"phases", Json::Type::kObject},
      {"counters", Json::Type::kObject},     {"correct", Json::Type::kBool},
      {"error", Json::Type::kString},        {"rev", Json::Type::kString},
  };
  for (const auto& [key, type] : fields) {
    const Json* v = j.Find(key);
    ASSERT_NE(v, nullptr) << key;
    EXPECT_EQ(v->type(), type) << key;
  }
  double sum = 0;
  for (const char* phase : kPhaseNames) {
    const Json* p = j.Find("phases")->Find(phase);
    ASSERT_NE(p, nullptr) << phase;
    EXPECT_GE(p->number(), 0);
    sum += p->number();
  }
  // A correct run's seconds are its phases summed; a run without a report has the wall time.
  if (j.Find("correct")->bool_value()) {
    EXPECT_NEAR(sum, j.Find("seconds")->number(), 1e-6);
  }
  EXPECT_GE(j.Find("seconds")->number(), 0);
  EXPECT_NE(j.Find("rev")->string(), "");
}

struct BenchResults {
  TempDir dir;  // --out
  BenchRun run;
  std::vector<Json> lines;  // results.jsonl
};

// Runs gpuvm-bench with `args` and `--out <out->dir>`, expects `exit_status` and `records`
// well-formed objects in results.jsonl. Call it in ASSERT_NO_FATAL_FAILURE.
void RunAndRead(BenchResults* out, const std::string& args, size_t records, int exit_status = 0) {
  const TempDir& dir = out->dir;
  out->run = RunBench(args + " --out " + dir.path());
  ASSERT_EQ(out->run.exit_status, exit_status) << out->run.output;
  out->lines = ReadResults(dir.path() + "/results.jsonl");
  ASSERT_EQ(out->lines.size(), records) << out->run.output;
  for (const Json& j : out->lines) ASSERT_NO_FATAL_FAILURE(ExpectWellFormed(j));
}

TEST(BenchHarnessEndToEnd, NativeRunsAppendOneObjectPerRun) {
  BenchResults res;
  ASSERT_NO_FATAL_FAILURE(RunAndRead(
      &res, "--bench nop,madd --mode native --runs 2 --warmup 0 --size test --api driver", 4));
  const std::string& output = res.run.output;
  EXPECT_NE(output.find("median seconds per run"), std::string::npos) << output;
  EXPECT_NE(output.find("phases, median seconds: native"), std::string::npos) << output;
  int madd = 0;
  for (const Json& j : res.lines) {
    EXPECT_EQ(j.Find("mode")->string(), "native");
    EXPECT_TRUE(j.Find("correct")->bool_value()) << j.Serialize();
    EXPECT_EQ(j.Find("size")->string(), "test");
    EXPECT_TRUE(j.Find("counters")->members().empty());
    if (j.Find("bench")->string() == "madd") {
      ++madd;
      EXPECT_GT(j.Find("phases")->Find("launch")->number(), 0);
    }
  }
  EXPECT_EQ(madd, 2);
  // Appends, never truncates.
  ASSERT_NO_FATAL_FAILURE(
      RunAndRead(&res, "--bench nop --runs 1 --warmup 0 --size test --quiet", 5));
}

TEST(BenchHarnessEndToEnd, SeveralAtOnceGiveARecordEach) {
  BenchResults res;
  ASSERT_NO_FATAL_FAILURE(RunAndRead(
      &res, "--bench nop,loop --vms 3 --runs 1 --warmup 0 --size test --api driver --quiet", 6));
  int vm_sum = 0;
  for (const Json& j : res.lines) {
    EXPECT_EQ(j.Find("vms")->number(), 3);
    EXPECT_TRUE(j.Find("correct")->bool_value()) << j.Serialize();
    vm_sum += static_cast<int>(j.Find("vm")->number());
  }
  EXPECT_EQ(vm_sum, 2 * (0 + 1 + 2));
}

TEST(BenchHarnessEndToEnd, BadInputIsAClearErrorAndNoResults) {
  TempDir dir;
  BenchRun r = RunBench("--bench nosuch --out " + dir.path());
  EXPECT_EQ(r.exit_status, 2);
  EXPECT_NE(r.output.find("gpuvm-bench: unknown benchmark 'nosuch'"), std::string::npos)
      << r.output;
  r = RunBench("--mode nosuchmode --out " + dir.path());
  EXPECT_EQ(r.exit_status, 2);
  EXPECT_NE(r.output.find("nosuchmode"), std::string::npos) << r.output;
  r = RunBench("--bench madd --programs /nonexistent --out " + dir.path());
  EXPECT_EQ(r.exit_status, 2);
  EXPECT_NE(r.output.find("no program for madd"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/results.jsonl") &&
               std::filesystem::file_size(dir.path() + "/results.jsonl") > 0);
  r = RunBench("--help");
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_NE(r.output.find("usage: gpuvm-bench"), std::string::npos);
  r = RunBench("--list");
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_NE(r.output.find("srad2"), std::string::npos);
}

TEST(BenchHarnessEndToEnd, AFailingProgramIsRecordedAsIncorrect) {
  TempDir dir;
  // A stand-in "suite" whose nop reports a wrong result, and whose madd writes garbage.
  const std::string programs = dir.path() + "/programs";
  std::filesystem::create_directories(programs);
  {
    std::ofstream nop(programs + "/gpuvm-suite-nop");
    nop << "#!/bin/sh\n"
           "echo '{\"bench\":\"nop\",\"api\":\"driver\",\"size\":\"test\",\"problem\":\"p\","
           "\"correct\":false,\"seconds\":0,\"phases\":{\"init\":0,\"htod\":0,\"launch\":0,"
           "\"dtoh\":0,\"close\":0},\"error\":\"wrong result: x\"}' > \"$GPUVM_BENCH_RESULT\"\n"
           "exit 1\n";
    std::ofstream madd(programs + "/gpuvm-suite-madd");
    madd << "#!/bin/sh\necho '{\"bench\":' > \"$GPUVM_BENCH_RESULT\"\nexit 0\n";
  }
  std::filesystem::permissions(programs + "/gpuvm-suite-nop", std::filesystem::perms::owner_all);
  std::filesystem::permissions(programs + "/gpuvm-suite-madd", std::filesystem::perms::owner_all);
  BenchResults res;
  ASSERT_NO_FATAL_FAILURE(RunAndRead(
      &res, "--bench nop,madd --runs 1 --warmup 0 --size test --programs " + programs, 2, 1));
  const BenchRun& r = res.run;
  EXPECT_NE(r.output.find("nop native: 1 of 1 failed; first: wrong result: x"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("madd native: 1 of 1 failed; first: JSON: expected"), std::string::npos)
      << r.output;
  for (const Json& j : res.lines) {
    EXPECT_FALSE(j.Find("correct")->bool_value());
    EXPECT_NE(j.Find("error")->string(), "");
  }
  // The kept logs are the harness's own scratch directory; remove it.
  const size_t at = r.output.find("logs of the runs kept in ");
  if (at != std::string::npos) {
    std::string kept = r.output.substr(at + 25);
    kept = kept.substr(0, kept.find('\n'));
    if (kept.rfind("/tmp/gpuvm-bench-", 0) == 0) std::filesystem::remove_all(kept);
  }
}

TEST(BenchHarnessEndToEnd, RuntimeApiProgramsBuiltByNvcc) {
  if (!GPUVM_BENCH_HAVE_RT) GTEST_SKIP() << "nvcc is absent: no runtime-API programs were built";
  BenchResults res;
  ASSERT_NO_FATAL_FAILURE(RunAndRead(
      &res, "--bench lud,srad2 --api runtime --runs 1 --warmup 0 --size test --quiet", 2));
  for (const Json& j : res.lines) {
    EXPECT_EQ(j.Find("api")->string(), "runtime");
    EXPECT_TRUE(j.Find("correct")->bool_value()) << j.Serialize();
  }
  // Benchmarks without a runtime-API build are refused by name, not run with the wrong API.
  const BenchRun nop = RunBench("--bench nop --api runtime --out " + res.dir.path());
  EXPECT_EQ(nop.exit_status, 2);
  EXPECT_NE(nop.output.find("no runtime-API program for nop"), std::string::npos) << nop.output;
}

TEST(BenchHarnessEndToEnd, PassThroughRecordsTrapsPerBar) {
  if (!GPUVM_BENCH_HAVE_VMS) GTEST_SKIP() << "this build has no gpuvm-vm/gpuvm-dm/aggregator";
  BenchResults res;
  ASSERT_NO_FATAL_FAILURE(RunAndRead(
      &res, "--bench nop --mode native,pt --runs 1 --warmup 0 --size test --api driver", 2));
  const std::string& output = res.run.output;
  EXPECT_NE(output.find("pt/nat"), std::string::npos) << output;
  EXPECT_NE(output.find("traps per BAR per run (median, gpuvm-dm's counters): pt"),
            std::string::npos)
      << output;
  for (const Json& j : res.lines) {
    EXPECT_TRUE(j.Find("correct")->bool_value()) << j.Serialize();
    if (j.Find("mode")->string() != "pt") continue;
    const Json& counters = *j.Find("counters");
    ASSERT_NE(counters.Find("bar0_reads"), nullptr) << j.Serialize();
    // Bringing the guest driver up reads and writes BAR0 registers, each access a trap.
    EXPECT_GT(counters.Find("bar0_reads")->number(), 0);
    EXPECT_GT(counters.Find("bar0_writes")->number(), 0);
    EXPECT_EQ(counters.Find("refused")->number(), 0);
  }
}

TEST(BenchHarnessEndToEnd, FullVirtualizationRunsSeveralVmsWithCounters) {
  if (!GPUVM_BENCH_HAVE_VMS) GTEST_SKIP() << "this build has no gpuvm-vm/gpuvm-dm/aggregator";
  BenchResults res;
  ASSERT_NO_FATAL_FAILURE(RunAndRead(
      &res, "--bench madd --mode fv-optimized --vms 2 --runs 1 --warmup 0 --size test --api driver",
      2));
  for (const Json& j : res.lines) {
    EXPECT_EQ(j.Find("mode")->string(), "fv-optimized");
    EXPECT_EQ(j.Find("vms")->number(), 2);
    EXPECT_TRUE(j.Find("correct")->bool_value()) << j.Serialize();
    const Json& counters = *j.Find("counters");
    ASSERT_NE(counters.Find("bar0_writes"), nullptr) << j.Serialize();
    EXPECT_GT(counters.Find("bar0_writes")->number(), 0);
  }
}

}  // namespace
}  // namespace gpuvm::bench
