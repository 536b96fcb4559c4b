// gpuvm-vm's command line and its refusal to start without what a VM needs (the multi-process
// behaviour is tested in tests/pt_integration_test.cc).
#include <gtest/gtest.h>

#include "tools/gpuvm-vm/launcher.h"

namespace gpuvm::vm {
namespace {

TEST(GpuvmVmArgsTest, ParsesEveryFlagAndTheProgram) {
  auto o = ParseArgs({"--mode", "pt", "--aggregator", "@agg", "--ram-mib", "512", "--vcpus", "4",
                      "--domid", "7", "--name", "guest one", "--dm", "/bin/dm", "--pid-file",
                      "/tmp/p", "--verbose", "--", "./prog", "--flag", "x"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->mode, "pt");
  EXPECT_EQ(o->aggregator, "@agg");
  EXPECT_EQ(o->ram_bytes, 512ull << 20);
  EXPECT_EQ(o->vcpus, 4u);
  EXPECT_EQ(o->domid, 7);
  EXPECT_EQ(o->name, "guest one");
  EXPECT_EQ(o->dm_path, "/bin/dm");
  EXPECT_EQ(o->pid_file, "/tmp/p");
  EXPECT_TRUE(o->verbose);
  EXPECT_EQ(o->argv, (std::vector<std::string>{"./prog", "--flag", "x"}));
}

TEST(GpuvmVmArgsTest, AnFvVmsShareIsPartOfItsConfiguration) {
  auto o = ParseArgs({"--mode", "fv-lazy", "--share", "30", "--", "./prog"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->share, 30u);
  EXPECT_GT(ParseArgs({"./prog"})->share, 100u);  // not given
}

TEST(GpuvmVmArgsTest, TheProgramMayFollowWithoutDashes) {
  auto o = ParseArgs({"./prog", "--flag"});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->argv, (std::vector<std::string>{"./prog", "--flag"}));
}

TEST(GpuvmVmArgsTest, RefusesBadValues) {
  const std::vector<std::vector<std::string>> bad = {
      {},
      {"--"},
      {"--mode", "xx", "--", "p"},
      {"--ram-mib", "8", "--", "p"},
      {"--ram-mib", "4096", "--", "p"},  // above the 32-bit BAR0
      {"--ram-mib", "12abc", "--", "p"},
      {"--vcpus", "0", "--", "p"},
      {"--vcpus", "33", "--", "p"},
      {"--domid", "0", "--", "p"},
      {"--domid", "40000", "--", "p"},
      {"--name", "", "--", "p"},
      {"--name", "a\tb", "--", "p"},
      {"--bogus", "1", "--", "p"},
      {"--share", "101", "--", "p"},
      {"--share", "-5", "--", "p"},
      {"--ram-mib"},
  };
  for (const auto& args : bad) {
    auto o = ParseArgs(args);
    EXPECT_FALSE(o.ok()) << testing::PrintToString(args);
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(GpuvmVmRunTest, AMissingDeviceModelIsReportedNotHung) {
  VmOptions o;
  o.dm_path = "/nonexistent/gpuvm-dm";
  o.ram_bytes = 64ull << 20;
  o.argv = {"/bin/true"};
  auto result = RunVm(o);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kUnavailable) << result.status().ToString();
  EXPECT_NE(result.status().message().find("exited before the VM started"), std::string::npos);
}

}  // namespace
}  // namespace gpuvm::vm
