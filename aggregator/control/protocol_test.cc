#include "aggregator/control/protocol.h"

#include <gtest/gtest.h>

#include "base/testing/refusals.h"

namespace gpuvm::control {
namespace {

TEST(ControlProtocolTest, ParsesEveryCommand) {
  EXPECT_EQ(*ParseRequest("list"), Request(ListRequest{}));
  EXPECT_EQ(*ParseRequest("list\n"), Request(ListRequest{}));
  EXPECT_EQ(*ParseRequest("stats"), Request(StatsRequest{}));
  EXPECT_EQ(*ParseRequest("set-share 3 25"), Request(SetShareRequest{"3", 25}));
  EXPECT_EQ(*ParseRequest("set-share vm-a 12.5%"), Request(SetShareRequest{"vm-a", 12.5}));
  EXPECT_EQ(*ParseRequest("set-share a.b_c-9 0"), Request(SetShareRequest{"a.b_c-9", 0}));
  EXPECT_EQ(*ParseRequest("set-scheduler credit"),
            Request(SetSchedulerRequest{sched::PolicyKind::kCredit}));
  EXPECT_EQ(*ParseRequest("vm-token 7"), Request(VmTokenRequest{7}));
  EXPECT_EQ(*ParseRequest("vm-token 32751"), Request(VmTokenRequest{32751}));
}

TEST(ControlProtocolTest, RefusesGarbageWithAClearMessage) {
  const auto error = [](std::string_view text) {
    Result<Request> r = ParseRequest(text);
    EXPECT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << text;
    return r.ok() ? std::string() : r.status().message();
  };
  testing::ExpectRefusals(ParseRequest,
                          {
                              {"lst", "unknown command 'lst'"},
                              {"set-share 1 -5", "negative"},
                              {"set-share 1 101", "above 100%"},
                              {"set-share 1 abc", "not a percentage"},
                              {"set-share 1", "takes 2 arguments"},
                              {"set-scheduler rr", "choose fifo, credit or band"},
                              {"vm-token 0", "not a guest's domain id"},
                          },
                          StatusCode::kInvalidArgument);
  for (std::string_view bad : {"vm-token", "vm-token 32752", "vm-token 65536", "vm-token 07",
                               "vm-token -1", "vm-token x", "vm-token 7 8"}) {
    error(bad);
  }
  for (std::string_view bad : {"",
                               "\n",
                               " list",
                               "list ",
                               "list  x",
                               "list x",
                               "stats 1",
                               "set-share 1  5",
                               "set-share 1 5 6",
                               "set-share 1 1e2",
                               "set-share 1 0x10",
                               "set-share 1 nan",
                               "set-share 1 inf",
                               "set-share 1 5.",
                               "set-share 1 .5",
                               "set-share 1 1.2345",
                               "set-share 1 1000",
                               "set-share 1 %",
                               "set-share 1 5%%",
                               "set-share a/b 5",
                               "set-share a\tb 5",
                               "set-scheduler BAND",
                               "set-scheduler",
                               "list\n\n",
                               "li\0st"}) {
    error(bad);
  }
  EXPECT_NE(error(std::string(300, 'a')).find("longer than"), std::string::npos);
  EXPECT_NE(error("set-share \xff 5").find("non-ASCII"), std::string::npos);
}

// The share and the VM name are read by the parsers every gpuvm tool uses (base/share.h,
// base/vm_name.h): the same syntax and the same messages as gpuvm-vm --share and --name.
TEST(ControlProtocolTest, SharesAndNamesAreReadLikeEverywhereElse) {
  EXPECT_EQ(*ParseRequest("set-share 1 100.000"), Request(SetShareRequest{"1", 100}));
  EXPECT_EQ(*ParseRequest("set-share 1 33.333"), Request(SetShareRequest{"1", 33.333}));
  const auto error = [](std::string_view text) {
    Result<Request> r = ParseRequest(text);
    return r.ok() ? std::string("(accepted)") : r.status().message();
  };
  EXPECT_EQ(error("set-share 1 -5"), "share '-5' is negative; shares are 0-100%");
  EXPECT_EQ(error("set-share 1 100.001"), "share '100.001' is above 100%");
  EXPECT_NE(error("set-share a@opt 5").find("is neither an id nor a VM name: VM name 'a@opt'"),
            std::string::npos);
  EXPECT_NE(error("set-share " + std::string(32, 'n') + " 5").find("32 characters"),
            std::string::npos);
  EXPECT_NE(error("set-share a,b 5").find("has ','"), std::string::npos);
}

TEST(ControlProtocolTest, ParsesTheRunawayWorkCommands) {
  EXPECT_EQ(*ParseRequest("pause 3"), Request(PauseRequest{"3"}));
  EXPECT_EQ(*ParseRequest("resume eater"), Request(ResumeRequest{"eater"}));
  EXPECT_EQ(*ParseRequest("kill-work eater\n"), Request(KillWorkRequest{"eater"}));
  EXPECT_EQ(*ParseRequest("set-kernel-limit 2 2000"), Request(SetKernelLimitRequest{"2", 2000}));
  EXPECT_EQ(*ParseRequest("set-kernel-limit web 0"), Request(SetKernelLimitRequest{"web", 0}));
  EXPECT_EQ(*ParseRequest("set-kernel-limit web 86400000"),
            Request(SetKernelLimitRequest{"web", 86400000}));
  testing::ExpectRefusals(ParseRequest,
                          {
                              {"pause", "pause takes 1 argument: pause VM"},
                              {"resume 1 2", "resume takes 1 argument"},
                              {"kill-work", "kill-work takes 1 argument"},
                              {"kill-work a/b", "is neither an id nor a VM name"},
                              {"set-kernel-limit 1", "takes 2 arguments"},
                              {"set-kernel-limit 1 -5", "kernel limit '-5' is negative"},
                              {"set-kernel-limit 1 86400001", "past 24 h"},
                              {"set-kernel-limit 1 99999999999999999999", "past 24 h"},
                              {"set-kernel-limit 1 999999999999999999999", "past 24 h"},
                              {"set-kernel-limit 1 1.5", "not a whole number"},
                              {"set-kernel-limit 1 1e3", "not a whole number"},
                              {"set-kernel-limit 1 +5", "not a whole number"},
                              {"set-kernel-limit 1 0x10", "not a whole number"},
                              {"set-kernel-limit 1 5ms", "not a whole number"},
                              {"set-kernel-limit a@b 5", "is neither an id nor a VM name"},
                          },
                          StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseKernelLimitMs("250").value(), 250u);
  EXPECT_FALSE(ParseKernelLimitMs("").ok());
}

TEST(ControlProtocolTest, RequestsRoundTrip) {
  for (const Request& r :
       {Request(ListRequest{}), Request(StatsRequest{}), Request(SetShareRequest{"7", 33.333}),
        Request(SetShareRequest{"x", 100}), Request(SetSchedulerRequest{sched::PolicyKind::kFifo}),
        Request(VmTokenRequest{42}), Request(PauseRequest{"a"}), Request(ResumeRequest{"4"}),
        Request(KillWorkRequest{"b"}), Request(SetKernelLimitRequest{"c", 1500})}) {
    Result<Request> back = ParseRequest(FormatRequest(r));
    ASSERT_TRUE(back.ok()) << FormatRequest(r);
    EXPECT_EQ(*back, r);
  }
}

TEST(ControlProtocolTest, RepliesRoundTrip) {
  Result<Reply> ok = ParseReply(FormatReply(Reply{Status::Ok(), "body\n"}));
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(ok->status.ok());
  EXPECT_EQ(ok->body, "body\n");
  Result<Reply> err =
      ParseReply(FormatReply(Reply{Status::NotFound("no VM\nnamed 'x'"), "ignored"}));
  ASSERT_TRUE(err.ok());
  EXPECT_EQ(err->status.code(), StatusCode::kNotFound);
  EXPECT_EQ(err->status.message(), "no VM named 'x'");
  EXPECT_FALSE(ParseReply("").ok());
  EXPECT_FALSE(ParseReply("maybe\n").ok());
  EXPECT_FALSE(ParseReply("error Bogus: x\n").ok());
}

TEST(ControlProtocolTest, ListRoundTrips) {
  ListReply list;
  list.policy = sched::PolicyKind::kCredit;
  VmRow a;
  a.id = 1;
  a.name = "web tier %1";
  a.mode = "pt";
  a.vram_bytes = 1ull << 30;
  a.vram_used_bytes = 3ull << 20;
  a.channels = 128;
  a.traps = 123456789012ull;
  a.share_percent = 12.5;
  a.scheduled = true;
  a.usage_100ms = 0.25;
  a.usage_500ms = 0.5;
  a.usage_10s = 0.125;
  a.queued = 3;
  a.gpu_ms = 1234.5;
  a.standing = "under";
  a.paused = true;
  a.kernel_limit_ms = 2000;
  a.killed = 7;
  VmRow b;
  b.id = 2;
  list.vms = {a, b};
  Result<ListReply> back = ParseList(FormatList(list));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, list);
  // An older aggregator's list has no paused / kernel_limit_ms / killed: still read (defaults).
  Result<ListReply> old = ParseList(
      "scheduler policy=band\nvm id=1 name=a mode=fv vram=1 vram_used=1 channels=8 traps=0 "
      "share=25.000 scheduled=1 usage100=0.0000 usage500=0.0000 usage10s=0.0000 queued=0 "
      "gpu_ms=1.000 standing=at\n");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_FALSE(old->vms[0].paused);
  EXPECT_EQ(old->vms[0].kernel_limit_ms, 0u);
  EXPECT_FALSE(ParseList("scheduler policy=band\nvm id=1 name=a mode=fv vram=1 vram_used=1 "
                         "channels=8 traps=0 share=25.000 scheduled=1 usage100=0.0000 "
                         "usage500=0.0000 usage10s=0.0000 queued=0 gpu_ms=1.000 standing=at "
                         "paused=2\n")
                   .ok());
  EXPECT_FALSE(ParseList("vm id=1\n").ok());
  EXPECT_FALSE(ParseList("scheduler policy=band\nvm id=x\n").ok());
  EXPECT_FALSE(ParseList("scheduler policy=band").ok());
}

TEST(ControlProtocolTest, JsonStringEscapes) {
  EXPECT_EQ(JsonString("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
  // A VM name in UTF-8 stays one character per code point (not \u00XX per byte).
  EXPECT_EQ(JsonString("gr\xc3\xbcn"), "\"gr\xc3\xbcn\"");
}

}  // namespace
}  // namespace gpuvm::control
