// gpuvm-vm's command line and its refusal to start without what a VM needs (the multi-process
// behaviour is tested in tests/pt_integration_test.cc).
#include "tools/gpuvm-vm/launcher.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <thread>

#include "base/os.h"

namespace gpuvm::vm {
namespace {

TEST(GpuvmVmArgsTest, ParsesEveryFlagAndTheProgram) {
  auto o = ParseArgs({"--mode",    "pt",      "--aggregator", "@agg",
                      "--ram-mib", "512",     "--vcpus",      "4",
                      "--domid",   "7",       "--name",       "guest.one_1-a",
                      "--dm",      "/bin/dm", "--pid-file",   "/tmp/p",
                      "--verbose", "--",      "./prog",       "--flag",
                      "x"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->mode, "pt");
  EXPECT_EQ(o->aggregator, "@agg");
  EXPECT_EQ(o->ram_bytes, 512ull << 20);
  EXPECT_EQ(o->vcpus, 4u);
  EXPECT_EQ(o->domid, 7);
  EXPECT_EQ(o->name, "guest.one_1-a");
  EXPECT_EQ(o->dm_path, "/bin/dm");
  EXPECT_EQ(o->pid_file, "/tmp/p");
  EXPECT_TRUE(o->verbose);
  EXPECT_EQ(o->argv, (std::vector<std::string>{"./prog", "--flag", "x"}));
}

TEST(GpuvmVmArgsTest, AVmsShareIsPartOfItsConfiguration) {
  auto o = ParseArgs({"--mode", "fv-lazy", "--share", "30", "--", "./prog"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->share, 30.0);
  EXPECT_FALSE(ParseArgs({"./prog"})->share.has_value());  // not given
  // The share syntax of gpuvm-ctl set-share and gpuvm-aggregator --vm-share (base/share.h).
  o = ParseArgs({"--share", "12.5%", "--", "./prog"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->share, 12.5);
  EXPECT_NE(ParseArgs({"--share", "-5", "--", "p"})
                .status()
                .message()
                .find("--share: share '-5' is negative; shares are 0-100%"),
            std::string::npos);
}

// What gpuvm-dm is told: the mode, the name, and the VM's options as options of their own
// (VM_CONFIG carries them as typed fields, docs/IPC.md).
TEST(GpuvmVmArgsTest, TheDeviceModelGetsTheNameAndTypedOptions) {
  using Args = std::vector<std::string>;
  const struct {
    Args args;
    Args dm;
  } cases[] = {
      {{"--name", "web", "p"}, {"--mode", "pt", "--name", "web"}},
      {{"--name", "web", "--share", "30", "p"}, {"--mode", "pt", "--name", "web", "--share", "30"}},
      {{"--mode", "fv", "--name", "a", "p"}, {"--mode", "fv", "--name", "a"}},
      {{"--mode", "fv-naive", "--name", "a", "p"},
       {"--mode", "fv", "--name", "a", "--variant", "naive"}},
      {{"--mode", "fv-lazy", "--name", "a", "--vram-mib", "256", "--channels", "8", "p"},
       {"--mode", "fv", "--name", "a", "--variant", "lazy", "--vram-mib", "256", "--channels",
        "8"}},
      {{"--mode", "fv-bar-remap", "--name", "a", "p"},
       {"--mode", "fv", "--name", "a", "--variant", "bar-remap"}},
      {{"--mode", "fv-optimized", "--name", "a", "--share", "12.5", "p"},
       {"--mode", "fv", "--name", "a", "--variant", "optimized", "--share", "12.5"}},
      {{"--mode", "fv", "--share", "33.333", "p"},
       {"--mode", "fv", "--name", "vm7", "--share", "33.333"}},
      {{"--mode", "pv-naive", "--name", "a", "p"},
       {"--mode", "pv", "--name", "a", "--variant", "naive"}},
      {{"--mode", "pv-multicall", "--name", "a", "--vram-mib", "64", "p"},
       {"--mode", "pv", "--name", "a", "--variant", "multicall", "--vram-mib", "64"}},
      {{"--mode", "pv", "--name", "a", "p"}, {"--mode", "pv", "--name", "a"}},
      // The longest name with every option: nothing has to fit one 31-character field any more.
      {{"--mode", "fv-optimized", "--name", std::string(31, 'n'), "--vram-mib", "128", "--share",
        "12.5", "p"},
       {"--mode", "fv", "--name", std::string(31, 'n'), "--variant", "optimized", "--vram-mib",
        "128", "--share", "12.5"}},
  };
  for (const auto& c : cases) {
    Result<VmOptions> o = ParseArgs(c.args);
    ASSERT_TRUE(o.ok()) << testing::PrintToString(c.args) << ": " << o.status().ToString();
    EXPECT_EQ(DeviceModelVmArgs(*o, 7), c.dm) << testing::PrintToString(c.args);
  }
}

// Names are refused, never cut; options have flags of their own.
TEST(GpuvmVmArgsTest, NamesAreRefusedWithTheReasonNeverCut) {
  const struct {
    std::vector<std::string> args;
    const char* says;
  } cases[] = {
      {{"--name", "a@300", "--mode", "fv-optimized", "p"}, "--name: VM name 'a@300' has '@' at 2"},
      {{"--name", "a,b", "p"}, "has ','"},
      {{"--name", "guest one", "p"}, "has ' ' at 6"},
      {{"--name", std::string(32, 'n'), "p"}, "is 32 characters; at most 31"},
      {{"--vram-mib", "64", "p"}, "--vram-mib is for fv and pv VMs"},
      {{"--channels", "4", "p"}, "--channels is for fv and pv VMs"},
  };
  for (const auto& c : cases) {
    Result<VmOptions> o = ParseArgs(c.args);
    ASSERT_FALSE(o.ok()) << testing::PrintToString(c.args);
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(o.status().message().find(c.says), std::string::npos) << o.status().message();
  }
  EXPECT_TRUE(ParseArgs({"--name", std::string(31, 'n'), "p"}).ok());
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
      {"--share", "1e2", "--", "p"},
      {"--name", "a@lazy", "--", "p"},
      {"--mode", "fv", "--channels", "129", "--", "p"},
      {"--mode", "fv", "--channels", "0", "--", "p"},
      {"--ram-mib"},
  };
  for (const auto& args : bad) {
    auto o = ParseArgs(args);
    EXPECT_FALSE(o.ok()) << testing::PrintToString(args);
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument);
  }
}

// Answers one `vm-token` request on `aggregator` + "-control", as the aggregator's control socket
// does; what it was asked for goes to `request`.
std::thread ControlSocketIssuingOneToken(const std::string& aggregator, std::string* request) {
  auto listen = os::ListenSeqpacket(aggregator + "-control");
  EXPECT_TRUE(listen.ok());
  return std::thread([fd = std::make_shared<os::UniqueFd>(std::move(*listen)), request] {
    if (!os::WaitReadable(fd->get(), 10000).ok()) return;
    os::UniqueFd client(::accept4(fd->get(), nullptr, nullptr, SOCK_CLOEXEC));
    char buffer[300];
    if (!os::WaitReadable(client.get(), 10000).ok()) return;
    const ssize_t n = ::recv(client.get(), buffer, sizeof buffer, 0);
    if (n > 0) request->assign(buffer, static_cast<size_t>(n));
    const std::string reply = "ok\n" + std::string(64, 'a') + "\n";
    (void)::send(client.get(), reply.data(), reply.size(), MSG_NOSIGNAL);
  });
}

// A VM whose device model does not exist, against the aggregator at `aggregator`.
VmOptions WithoutADeviceModel(const std::string& aggregator) {
  VmOptions o;
  o.aggregator = aggregator;
  o.domid = 77;
  o.dm_path = "/nonexistent/gpuvm-dm";
  o.ram_bytes = 64ull << 20;
  o.argv = {"/bin/true"};
  return o;
}

TEST(GpuvmVmRunTest, NoTokenFromTheAggregatorMeansNoDeviceModel) {
  auto result = RunVm(WithoutADeviceModel("@gpuvm-vm-test-nobody-" + std::to_string(::getpid())));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kUnavailable) << result.status().ToString();
  EXPECT_NE(result.status().message().find("cannot get the VM's token"), std::string::npos)
      << result.status().ToString();
}

TEST(GpuvmVmRunTest, AMissingDeviceModelIsReportedNotHung) {
  const VmOptions o = WithoutADeviceModel("@gpuvm-vm-test-" + std::to_string(::getpid()));
  std::string request;
  std::thread control = ControlSocketIssuingOneToken(o.aggregator, &request);
  auto result = RunVm(o);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kUnavailable) << result.status().ToString();
  EXPECT_NE(result.status().message().find("exited before the VM started"), std::string::npos);
  control.join();
  EXPECT_EQ(request, "vm-token 77");
}

}  // namespace
}  // namespace gpuvm::vm
