#include "aggregator/control/control_server.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include "aggregator/control/test_sink.h"

namespace gpuvm::control {
namespace {

class OneVm final : public VmDirectory {
 public:
  std::vector<VmDescription> Vms() override { return {{1, "a", "pt", 1 << 30, 128}}; }
  Result<std::string> IssueVmToken(uint16_t domid) override {
    return std::string(64, static_cast<char>('0' + domid % 10));
  }
};

// Sends `request` and serves until the reply arrives.
std::string Exchange(ControlServer& server, int fd, std::string_view request) {
  EXPECT_EQ(::send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  std::string reply(kMaxReplyBytes, '\0');
  for (int i = 0; i < 1000; ++i) {
    server.Serve();
    const ssize_t n = ::recv(fd, reply.data(), reply.size(), MSG_DONTWAIT);
    if (n > 0) return reply.substr(0, static_cast<size_t>(n));
    if (n == 0) return "<closed>";
    ::usleep(1000);
  }
  return "<no reply>";
}

TEST(ControlServerTest, AnswersOverTheSocket) {
  sched::ManualClock clock;
  RefusingSink sink;
  sched::DispatcherOptions o;
  o.own_thread = false;
  auto dispatcher = std::move(sched::Dispatcher::Create(&clock, &sink, o)).value();
  OneVm vms;
  ControlService service(&vms, dispatcher.get(), {});
  const std::string path = "@gpuvm-control-test-" + std::to_string(::getpid());
  Result<std::unique_ptr<ControlServer>> server = ControlServer::Create(path, &service);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  Result<os::UniqueFd> client = os::ConnectSeqpacket(path);
  ASSERT_TRUE(client.ok());
  const int fd = client->get();

  std::string reply = Exchange(**server, fd, "set-share a 40");
  EXPECT_EQ(reply, "ok\n");
  reply = Exchange(**server, fd, "list");
  ASSERT_EQ(reply.substr(0, 3), "ok\n");
  Result<ListReply> list = ParseList(reply.substr(3));
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->vms.size(), 1u);
  EXPECT_EQ(list->vms[0].share_percent, 40);
  EXPECT_EQ(Exchange(**server, fd, "set-share a 140").substr(0, 22), "error InvalidArgument:");
  // An oversized request is refused whole, not cut to a valid prefix.
  const std::string huge = "list" + std::string(kMaxRequestBytes * 4, ' ');
  EXPECT_NE(Exchange(**server, fd, huge).find("longer than"), std::string::npos);
  EXPECT_EQ((*server)->requests(), 4u);
}

class ControlServerLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sched::DispatcherOptions o;
    o.own_thread = false;
    dispatcher_ = std::move(sched::Dispatcher::Create(&clock_, &sink_, o)).value();
    service_ = std::make_unique<ControlService>(&vms_, dispatcher_.get(), ServiceOptions{});
    path_ = "@gpuvm-control-limits-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  sched::ManualClock clock_;
  RefusingSink sink_;
  std::unique_ptr<sched::Dispatcher> dispatcher_;
  OneVm vms_;
  std::unique_ptr<ControlService> service_;
  std::string path_;
};

// 16 slots; 40 connections that never send anything cannot keep the operator out: each newcomer
// takes the slot of the client idle longest, and one with its request in is answered at once.
TEST_F(ControlServerLimitsTest, IdleClientsCannotLockTheOperatorOut) {
  Result<std::unique_ptr<ControlServer>> server = ControlServer::Create(path_, service_.get());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  std::vector<os::UniqueFd> idle;
  for (int i = 0; i < 40; ++i) {
    Result<os::UniqueFd> c = os::ConnectSeqpacket(path_);
    ASSERT_TRUE(c.ok()) << i;
    idle.push_back(std::move(*c));
    (*server)->Serve();
  }
  Result<os::UniqueFd> op = os::ConnectSeqpacket(path_);
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(Exchange(**server, op->get(), "list").substr(0, 3), "ok\n");
  EXPECT_GE((*server)->evicted_clients(), 24u);
  // The ones pushed out see their connection closed (not left hanging).
  size_t closed = 0;
  for (const os::UniqueFd& c : idle) {
    char byte;
    closed += ::recv(c.get(), &byte, 1, MSG_DONTWAIT) == 0;
  }
  EXPECT_GE(closed, 24u);
}

ControlServerOptions QuickToIdle() {
  ControlServerOptions o;
  o.idle_timeout = std::chrono::milliseconds(20);
  return o;
}

TEST_F(ControlServerLimitsTest, ClientsIdlePastTheTimeoutAreClosed) {
  Result<std::unique_ptr<ControlServer>> server =
      ControlServer::Create(path_, service_.get(), QuickToIdle());
  ASSERT_TRUE(server.ok());
  Result<os::UniqueFd> idle = os::ConnectSeqpacket(path_);
  ASSERT_TRUE(idle.ok());
  (*server)->Serve();
  ::usleep(40'000);
  Result<os::UniqueFd> op = os::ConnectSeqpacket(path_);
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(Exchange(**server, op->get(), "vm-token 7"), "ok\n" + std::string(64, '7') + "\n");
  char byte;
  EXPECT_EQ(::recv(idle->get(), &byte, 1, MSG_DONTWAIT), 0) << "the idle client was closed";
  EXPECT_EQ((*server)->evicted_clients(), 1u);
}

}  // namespace
}  // namespace gpuvm::control
