#include "bench/harness/options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/harness/catalog.h"

namespace gpuvm::bench {
namespace {

Result<Options> Parse(std::vector<std::string> args) { return ParseOptions(args); }

TEST(BenchHarnessOptions, DefaultsRunTheWholeSuiteNatively) {
  Result<Options> o = Parse({});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->benchmarks.size(), 14u);  // the GPUvm suite; the compat corpus only when asked
  EXPECT_EQ(o->benchmarks.front(), "nop");
  EXPECT_EQ(o->benchmarks.back(), "srad2");
  EXPECT_EQ(o->modes, std::vector<std::string>{"native"});
  EXPECT_EQ(o->runs, 5);
  EXPECT_EQ(o->warmup, 1);
  EXPECT_EQ(o->size, "bench");
  EXPECT_EQ(o->vms, 1);
  EXPECT_EQ(o->api, Api::kAuto);
}

TEST(BenchHarnessOptions, CompatNamesTheCompatibilityCorpus) {
  Result<Options> o = Parse({"--bench", "compat"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->benchmarks,
            (std::vector<std::string>{"gdev", "rtapi", "shneg", "warpsz", "longk", "churn",
                                      "thrust", "printf", "half", "managed", "graphs", "pools"}));
  o = Parse({"--bench", "churn,nop"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->benchmarks, (std::vector<std::string>{"nop", "churn"}));
  o = Parse({"--bench", "all,compat"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->benchmarks.size(), Benchmarks().size());
}

TEST(BenchHarnessOptions, TheIssuesCommandLine) {
  Result<Options> o = Parse({"--bench", "mmul,madd", "--mode", "native,pt", "--runs", "3",
                             "--warmup", "0", "--size", "test", "--vms", "1", "--api", "driver",
                             "--out", "/tmp/x", "--timeout", "60", "--quiet"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  // The catalog's order, whatever the command line's.
  EXPECT_EQ(o->benchmarks, (std::vector<std::string>{"madd", "mmul"}));
  EXPECT_EQ(o->modes, (std::vector<std::string>{"native", "pt"}));
  EXPECT_EQ(o->runs, 3);
  EXPECT_EQ(o->warmup, 0);
  EXPECT_EQ(o->size, "test");
  EXPECT_EQ(o->api, Api::kDriver);
  EXPECT_EQ(o->out, "/tmp/x");
  EXPECT_EQ(o->timeout_s, 60);
  EXPECT_TRUE(o->quiet);
}

TEST(BenchHarnessOptions, AllAndDuplicatesCollapse) {
  Result<Options> o = Parse({"--bench", "madd,all,madd"});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->benchmarks.size(), 14u);
}

struct BadCase {
  std::vector<std::string> args;
  std::string message;  // a piece of the expected sentence
};

TEST(BenchHarnessOptions, BadInputGetsASentence) {
  const std::vector<BadCase> cases = {
      {{"--bench", "nosuch"}, "unknown benchmark 'nosuch' (the suite: nop, loop"},
      {{"--bench", ","}, "--bench names no benchmark"},
      {{"--mode", "warp"}, "unknown mode 'warp' (modes: native, pt"},
      {{"--mode", "native,native"}, "mode native is named twice"},
      {{"--runs", "0"}, "--runs must be between 1 and 1000, not 0"},
      {{"--runs", "many"}, "--runs wants a whole number, not 'many'"},
      {{"--runs", "5x"}, "--runs wants a whole number, not '5x'"},
      {{"--runs", "99999999999999"}, "--runs wants a whole number"},
      {{"--warmup", "-1"}, "--warmup must be between 0 and 1000"},
      {{"--vms", "0"}, "--vms must be between 1 and 64"},
      {{"--size", "huge"}, "--size must be test or bench, not 'huge'"},
      {{"--api", "opencl"}, "--api must be auto, driver or runtime"},
      {{"--runs"}, "--runs needs a value"},
      {{"--frobnicate", "1"}, "unknown option '--frobnicate'"},
      {{"madd"}, "unexpected argument 'madd'"},
      {{"--mode", "pt", "--vms", "2"}, "mode pt runs at most 1 VM at a time"},
      {{"--out", ""}, "--out needs a directory"},
  };
  for (const BadCase& c : cases) {
    Result<Options> o = Parse(c.args);
    ASSERT_FALSE(o.ok()) << c.args.front();
    EXPECT_NE(o.status().message().find(c.message), std::string::npos)
        << "got: " << o.status().message() << "\nwant a piece: " << c.message;
  }
}

TEST(BenchHarnessOptions, ModesOfLaterIssuesSayWhyTheyCannotRun) {
  for (const ModeSpec& m : Modes()) {
    Result<Options> o = Parse({"--mode", std::string(m.name)});
    if (m.unavailable.empty()) {
      EXPECT_TRUE(o.ok()) << m.name << ": " << o.status().ToString();
    } else {
      ASSERT_FALSE(o.ok()) << m.name;
      EXPECT_EQ(o.status().code(), StatusCode::kUnimplemented);
      EXPECT_NE(o.status().message().find("cannot run yet"), std::string::npos);
    }
  }
  // The paper's ten configurations are all named (docs/GPUVM-RESULTS.md).
  for (const char* name : {"native", "pt", "fv-naive", "fv-lazy", "fv-bar-remap", "fv-optimized",
                           "pv-naive", "pv-multicall", "pvdrm", "pvdrm-pool"}) {
    EXPECT_NE(FindMode(name), nullptr) << name;
  }
}

TEST(BenchHarnessOptions, EveryVmModeIsPassedToTheVmByItsOwnName) {
  // gpuvm-vm --mode fv-lazy etc.: enabling a mode later needs no mapping table.
  for (const ModeSpec& m : Modes()) {
    if (!m.in_vm) continue;
    EXPECT_EQ(m.vm_mode, m.name);
    EXPECT_GE(m.max_vms, 1);
    EXPECT_LE(m.max_vms, kMaxVms);
  }
  EXPECT_FALSE(FindMode("native")->in_vm);
}

TEST(BenchHarnessOptions, HelpIsNotAnError) {
  Result<Options> o = Parse({"--help"});
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(o.status().message().find("usage: gpuvm-bench"), std::string::npos);
}

}  // namespace
}  // namespace gpuvm::bench
