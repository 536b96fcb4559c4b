#include "aggregator/control/service.h"

#include <gtest/gtest.h>

#include "aggregator/control/test_sink.h"

namespace gpuvm::control {
namespace {

class FakeDirectory final : public VmDirectory {
 public:
  std::vector<VmDescription> Vms() override { return vms; }
  Result<std::string> IssueVmToken(uint16_t domid) override {
    if (!issue_tokens) return VmDirectory::IssueVmToken(domid);
    return "token-for-" + std::to_string(domid);
  }
  std::vector<VmDescription> vms;
  bool issue_tokens = true;
};

struct Fixture {
  explicit Fixture(ServiceOptions options = {}) {
    sched::DispatcherOptions o;
    o.own_thread = false;
    dispatcher = std::move(sched::Dispatcher::Create(&clock, &sink, o)).value();
    options.log = [this](const std::string& line) { log.push_back(line); };
    service = std::make_unique<ControlService>(&directory, dispatcher.get(), std::move(options));
  }
  Reply Run(std::string_view request) {
    Result<Reply> r = ParseReply(service->Handle(request));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : Reply{Status::Internal("unparsable"), ""};
  }
  ListReply List() {
    Reply r = Run("list");
    EXPECT_TRUE(r.status.ok()) << r.status.ToString();
    Result<ListReply> l = ParseList(r.body);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    return l.ok() ? *l : ListReply{};
  }

  sched::ManualClock clock;
  RefusingSink sink;
  std::unique_ptr<sched::Dispatcher> dispatcher;
  FakeDirectory directory;
  std::vector<std::string> log;
  std::unique_ptr<ControlService> service;
};

TEST(ControlServiceTest, ListsVmsWithConfiguredShares) {
  ServiceOptions options;
  options.shares = {{"a", 30}, {"b", 50}};
  options.default_share = 5;
  Fixture f(options);
  f.directory.vms = {{1, "a", "fv-lazy", 256 << 20, 8},
                     {2, "b", "fv", 512 << 20, 16},
                     {3, "c", "fv", 64 << 20, 4}};
  ListReply list = f.List();
  EXPECT_EQ(list.policy, sched::PolicyKind::kBand);
  ASSERT_EQ(list.vms.size(), 3u);
  EXPECT_EQ(list.vms[0].name, "a");
  EXPECT_EQ(list.vms[0].mode, "fv-lazy");
  EXPECT_EQ(list.vms[0].share_percent, 30);
  EXPECT_EQ(list.vms[0].channels, 8u);
  EXPECT_EQ(list.vms[1].share_percent, 50);
  EXPECT_EQ(list.vms[2].share_percent, 5);
  EXPECT_TRUE(list.vms[2].scheduled);
}

TEST(ControlServiceTest, AVmsOwnConfigurationGivesItsShareUnlessTheOperatorSetOne) {
  ServiceOptions options;
  options.shares = {{"b", 40}};
  options.default_share = 5;
  Fixture f(options);
  VmDescription a{{1, "a", "fv-lazy", 0, 0}}, b{{2, "b", "fv-lazy", 0, 0}},
      c{{3, "share25", "fv-lazy", 0, 0}};
  a.requested_share = 25;  // VM_CONFIG's share field
  b.requested_share = 10;
  f.directory.vms = {a, b, c};  // c's name says share25, and a name is only a name
  ListReply list = f.List();
  ASSERT_EQ(list.vms.size(), 3u);
  EXPECT_EQ(list.vms[0].share_percent, 25);  // its configuration
  EXPECT_EQ(list.vms[1].share_percent, 40);  // the operator's --vm-share wins
  EXPECT_EQ(list.vms[2].share_percent, 5);   // none asked for: the default
}

TEST(ControlServiceTest, AConfiguredShareThatDoesNotFitStartsBestEffort) {
  ServiceOptions options;
  options.default_share = 60;
  Fixture f(options);
  f.directory.vms = {{1, "a", "fv", 0, 0}, {2, "b", "fv", 0, 0}};
  ListReply list = f.List();
  ASSERT_EQ(list.vms.size(), 2u);
  EXPECT_EQ(list.vms[0].share_percent, 60);
  EXPECT_EQ(list.vms[1].share_percent, 0);
  ASSERT_FALSE(f.log.empty());
  EXPECT_NE(f.log[0].find("best effort"), std::string::npos);
  EXPECT_EQ(f.log[0].find("level=warn vm=2 name=b msg="), 0u) << f.log[0];
}

TEST(ControlServiceTest, SetShareByIdOrNameIsLive) {
  Fixture f;
  f.directory.vms = {{4, "a", "fv-lazy", 0, 0}, {9, "b", "fv", 0, 0}};
  EXPECT_TRUE(f.Run("set-share 4 40").status.ok());
  EXPECT_TRUE(f.Run("set-share a 45").status.ok());
  EXPECT_TRUE(f.Run("set-share b 55%").status.ok());
  ListReply list = f.List();
  EXPECT_EQ(list.vms[0].share_percent, 45);
  EXPECT_EQ(list.vms[1].share_percent, 55);
}

TEST(ControlServiceTest, InvalidRequestsChangeNothing) {
  Fixture f;
  f.directory.vms = {{1, "a", "fv", 0, 0}, {2, "b", "fv", 0, 0}, {3, "c", "fv", 0, 0}};
  ASSERT_TRUE(f.Run("set-share 1 60").status.ok());
  ASSERT_TRUE(f.Run("set-share 2 30").status.ok());
  const ListReply before = f.List();
  EXPECT_EQ(f.Run("set-share 2 41").status.code(), StatusCode::kInvalidArgument);  // 101 %
  Reply past = f.Run("set-share 3 11");
  EXPECT_NE(past.status.message().find("past 100%"), std::string::npos) << past.status.ToString();
  EXPECT_EQ(f.Run("set-share 7 1").status.code(), StatusCode::kNotFound);
  EXPECT_EQ(f.Run("set-share nobody 1").status.code(), StatusCode::kNotFound);
  EXPECT_EQ(f.Run("set-share 1 -1").status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f.Run("set-share 1 x").status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f.Run("set-scheduler lottery").status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f.Run("\x01\x02").status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f.List(), before);
  EXPECT_EQ(f.dispatcher->policy(), sched::PolicyKind::kBand);
}

TEST(ControlServiceTest, PauseResumeKillAndKernelLimitByIdOrName) {
  Fixture f;
  f.directory.vms = {{1, "a", "fv", 0, 0}, {2, "b", "pv-naive", 0, 0}};
  EXPECT_TRUE(f.Run("pause a").status.ok());
  ListReply list = f.List();
  EXPECT_TRUE(list.vms[0].paused);
  EXPECT_FALSE(list.vms[1].paused);
  EXPECT_NE(f.log.back().find("vm=1"), std::string::npos) << f.log.back();
  EXPECT_NE(f.log.back().find("paused"), std::string::npos) << f.log.back();
  EXPECT_TRUE(f.Run("resume 1").status.ok());
  EXPECT_FALSE(f.List().vms[0].paused);
  EXPECT_TRUE(f.Run("set-kernel-limit b 1500").status.ok());
  EXPECT_EQ(f.List().vms[1].kernel_limit_ms, 1500u);
  Reply killed = f.Run("kill-work b");
  EXPECT_TRUE(killed.status.ok()) << killed.status.ToString();
  EXPECT_EQ(killed.body, "killed=0\n");  // nothing of it was queued
  const std::string stats = f.Run("stats").body;
  EXPECT_NE(stats.find("\"paused\":false,\"kernel_limit_ms\":1500,\"killed\":0"), std::string::npos)
      << stats;
}

TEST(ControlServiceTest, RefusedControlsChangeNothing) {
  Fixture f;
  f.directory.vms = {{1, "a", "fv", 0, 0}, {2, "gpu", "pt", 0, 0}};
  ASSERT_TRUE(f.Run("set-kernel-limit a 100").status.ok());
  const ListReply before = f.List();
  EXPECT_EQ(f.Run("pause nobody").status.code(), StatusCode::kNotFound);
  EXPECT_EQ(f.Run("kill-work 9").status.code(), StatusCode::kNotFound);
  EXPECT_EQ(f.Run("resume a").status.code(), StatusCode::kFailedPrecondition);  // not paused
  Reply pt = f.Run("pause gpu");
  EXPECT_EQ(pt.status.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(pt.status.message().find("pass-through"), std::string::npos);
  EXPECT_EQ(f.Run("kill-work gpu").status.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(f.Run("set-kernel-limit a -1").status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f.Run("set-kernel-limit a 4294967296").status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f.List(), before);
  ASSERT_TRUE(f.Run("pause a").status.ok());
  const ListReply paused = f.List();
  Reply twice = f.Run("pause a");
  EXPECT_EQ(twice.status.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(twice.status.message().find("already paused"), std::string::npos);
  EXPECT_EQ(f.List(), paused);
}

TEST(ControlServiceTest, AmbiguousNamesNeedAnId) {
  Fixture f;
  f.directory.vms = {{1, "b", "fv-lazy", 0, 0}, {2, "b", "fv-naive", 0, 0}};
  Reply r = f.Run("set-share b 10");
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status.message().find("use the id"), std::string::npos);
  EXPECT_TRUE(f.Run("set-share 1 10").status.ok());
}

TEST(ControlServiceTest, SetSchedulerIsLive) {
  Fixture f;
  EXPECT_TRUE(f.Run("set-scheduler fifo").status.ok());
  EXPECT_EQ(f.dispatcher->policy(), sched::PolicyKind::kFifo);
  EXPECT_EQ(f.List().policy, sched::PolicyKind::kFifo);
}

TEST(ControlServiceTest, VmTokensAreIssuedAndOnlyTheDomainIsLogged) {
  Fixture f;
  Reply r = f.Run("vm-token 12");
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.body, "token-for-12\n");
  ASSERT_FALSE(f.log.empty());
  EXPECT_EQ(f.log.back(), "level=info domid=12 msg=\"VM token issued\"");
  f.directory.issue_tokens = false;
  EXPECT_EQ(f.Run("vm-token 12").status.code(), StatusCode::kUnimplemented);
}

TEST(ControlServiceTest, VmsThatLeaveAreForgottenAndTheirShareFreed) {
  Fixture f;
  f.directory.vms = {{1, "a", "fv", 0, 0}};
  ASSERT_TRUE(f.Run("set-share 1 90").status.ok());
  f.directory.vms = {{2, "b", "fv", 0, 0}};
  EXPECT_TRUE(f.Run("set-share 2 90").status.ok());
  EXPECT_EQ(f.dispatcher->Stats().scheduler.vms.size(), 1u);
}

TEST(ControlServiceTest, StatsIsJsonWithEveryVm) {
  Fixture f;
  f.directory.vms = {{1, "quote\"name", "fv", 1, 2}};
  Reply r = f.Run("stats");
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.body.front(), '{');
  EXPECT_NE(r.body.find("\"policy\":\"band\""), std::string::npos);
  EXPECT_NE(r.body.find("\"name\":\"quote\\\"name\""), std::string::npos);
  EXPECT_NE(r.body.find("\"usage_500ms\":"), std::string::npos);
  // The dispatcher's preemption counters (what a context switch costs is told by how often).
  EXPECT_NE(r.body.find("\"slices\":0,\"preemptions\":0,\"suspend_errors\":0,"), std::string::npos)
      << r.body;
}

}  // namespace
}  // namespace gpuvm::control
