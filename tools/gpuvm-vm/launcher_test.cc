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

// What gpuvm-dm is told: the mode, and the name with the options it carries (base/vm_name.h).
TEST(GpuvmVmArgsTest, TheDeviceModelGetsTheNameWithItsOptions) {
  const struct {
    std::vector<std::string> args;
    const char* mode;
    const char* name;
  } cases[] = {
      {{"--name", "web", "p"}, "pt", "web"},
      {{"--name", "web", "--share", "30", "p"}, "pt", "web@share30"},
      {{"--mode", "fv", "--name", "a", "p"}, "fv", "a"},
      {{"--mode", "fv-naive", "--name", "a", "p"}, "fv", "a@naive"},
      {{"--mode", "fv-lazy", "--name", "a", "--vram-mib", "256", "p"}, "fv", "a@lazy,256"},
      {{"--mode", "fv-bar-remap", "--name", "a", "p"}, "fv", "a@remap"},
      {{"--mode", "fv-optimized", "--name", "a", "--share", "12.5", "p"}, "fv", "a@opt,share12.5"},
      {{"--mode", "fv", "--share", "33.333", "p"}, "fv", "vm7@share33.333"},
      {{"--mode", "pv-naive", "--name", "a", "p"}, "pv", "a@naive"},
      {{"--mode", "pv-multicall", "--name", "a", "--vram-mib", "64", "p"}, "pv", "a@mc,64"},
      {{"--mode", "pv", "--name", "a", "p"}, "pv", "a"},
  };
  for (const auto& c : cases) {
    Result<VmOptions> o = ParseArgs(c.args);
    ASSERT_TRUE(o.ok()) << testing::PrintToString(c.args) << ": " << o.status().ToString();
    EXPECT_EQ(DeviceModelMode(*o), c.mode);
    Result<std::string> name = DeviceModelName(*o, 7);
    ASSERT_TRUE(name.ok()) << name.status().ToString();
    EXPECT_EQ(*name, c.name);
  }
}

// Names are refused, never cut: a 25- and a 31-character name with "@opt..." options used to end up
// as the same 21-character name.
TEST(GpuvmVmArgsTest, NamesAreRefusedWithTheReasonNeverCut) {
  const struct {
    std::vector<std::string> args;
    const char* says;
  } cases[] = {
      {{"--name", "a@300", "--mode", "fv-optimized", "p"}, "--name: VM name 'a@300' has '@' at 2"},
      {{"--name", "a,b", "p"}, "has ','"},
      {{"--name", "guest one", "p"}, "has ' ' at 6"},
      {{"--name", std::string(32, 'n'), "p"}, "is 32 characters; at most 31"},
      {{"--name", std::string(25, 'n'), "--mode", "fv-lazy", "--vram-mib", "128", "p"},
       "use a name of at most 22 characters"},
      {{"--name", std::string(31, 'n'), "--mode", "fv-optimized", "p"},
       "use a name of at most 27 characters"},
      {{"--vram-mib", "64", "p"}, "--vram-mib is for fv and pv VMs"},
  };
  for (const auto& c : cases) {
    Result<VmOptions> o = ParseArgs(c.args);
    ASSERT_FALSE(o.ok()) << testing::PrintToString(c.args);
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(o.status().message().find(c.says), std::string::npos) << o.status().message();
  }
  EXPECT_TRUE(ParseArgs({"--name", std::string(31, 'n'), "p"}).ok());
  EXPECT_TRUE(
      ParseArgs({"--name", std::string(22, 'n'), "--mode", "fv-lazy", "--vram-mib", "128", "p"})
          .ok());
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
