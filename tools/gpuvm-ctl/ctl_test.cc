#include "tools/gpuvm-ctl/ctl.h"

#include <gtest/gtest.h>

namespace gpuvm::ctl {
namespace {

TEST(GpuvmCtlTest, ParsesCommandLines) {
  Result<Invocation> inv = ParseCommandLine({"--socket", "@x", "set-share", "vm1", "25%"});
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->socket, "@x");
  EXPECT_EQ(inv->request, control::Request(control::SetShareRequest{"vm1", 25}));
  inv = ParseCommandLine({"stats", "--json"});
  ASSERT_TRUE(inv.ok());
  EXPECT_TRUE(inv->json);
}

TEST(GpuvmCtlTest, ParsesTheRunawayWorkCommands) {
  EXPECT_EQ(ParseCommandLine({"pause", "eater"})->request,
            control::Request(control::PauseRequest{"eater"}));
  EXPECT_EQ(ParseCommandLine({"resume", "3"})->request,
            control::Request(control::ResumeRequest{"3"}));
  EXPECT_EQ(ParseCommandLine({"kill-work", "eater"})->request,
            control::Request(control::KillWorkRequest{"eater"}));
  EXPECT_EQ(ParseCommandLine({"set-kernel-limit", "eater", "2000"})->request,
            control::Request(control::SetKernelLimitRequest{"eater", 2000}));
  // Checked before anything is sent: a typo never reaches the aggregator.
  for (const std::vector<std::string>& bad :
       std::vector<std::vector<std::string>>{{"pause"},
                                             {"pause", "a", "b"},
                                             {"resume", ""},
                                             {"kill-work", "a b"},
                                             {"set-kernel-limit", "a"},
                                             {"set-kernel-limit", "a", "-1"},
                                             {"set-kernel-limit", "a", "86400001"},
                                             {"set-kernel-limit", "a", "18446744073709551617"},
                                             {"set-kernel-limit", "a", "2s"},
                                             {"pause", "a", "--json"}}) {
    EXPECT_FALSE(ParseCommandLine(bad).ok()) << bad.back();
  }
}

TEST(GpuvmCtlTest, ListShowsPausedVmsAndKernelLimits) {
  control::ListReply list;
  control::VmRow v;
  v.id = 3;
  v.name = "eater";
  v.mode = "fv";
  v.scheduled = true;
  v.paused = true;
  v.kernel_limit_ms = 2000;
  v.killed = 2;
  list.vms.push_back(v);
  v.id = 4;
  v.name = "web";
  v.paused = false;
  v.kernel_limit_ms = 0;
  v.killed = 0;
  list.vms.push_back(v);
  const std::string table = RenderList(list);
  const std::string eater = table.substr(table.find("eater"));
  EXPECT_NE(eater.find("2000 ms"), std::string::npos) << table;
  EXPECT_NE(eater.find("paused (2 killed)"), std::string::npos) << table;
  const std::string web = table.substr(table.find("web"));
  EXPECT_NE(web.find("running"), std::string::npos) << table;
}

TEST(GpuvmCtlTest, TopIsListAgainAndAgain) {
  Result<Invocation> inv = ParseCommandLine({"top", "--interval-ms", "250", "--iterations", "3"});
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_TRUE(inv->top);
  EXPECT_EQ(inv->interval_ms, 250);
  EXPECT_EQ(inv->iterations, 3);
  EXPECT_EQ(inv->request, control::Request(control::ListRequest{}));
  inv = ParseCommandLine({"top"});
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->interval_ms, 1000);
  EXPECT_EQ(inv->iterations, 0);
  for (const std::vector<std::string>& bad :
       std::vector<std::vector<std::string>>{{"top", "--interval-ms", "10"},  // too fast
                                             {"top", "--interval-ms", "-1"},
                                             {"top", "--iterations", "x"},
                                             {"top", "--iterations"},
                                             {"top", "extra"},
                                             {"list", "--iterations", "2"}}) {
    EXPECT_FALSE(ParseCommandLine(bad).ok()) << bad.back();
  }
}

// Rates come from two frames: GPU use over the interval from the GPU time, traps per second; a VM
// new in this frame has none yet.
TEST(GpuvmCtlTest, TopShowsRatesBetweenFrames) {
  control::ListReply before, now;
  control::VmRow a;
  a.id = 1;
  a.name = "web";
  a.mode = "fv-opt";
  a.scheduled = true;
  a.share_percent = 50;
  a.vram_bytes = 256ull << 20;
  a.vram_used_bytes = 64ull << 20;
  a.gpu_ms = 1000;
  a.traps = 5000;
  before.vms = {a};
  a.gpu_ms = 1300;   // 300 ms of GPU in 0.5 s: 60 %
  a.traps = 6000;    // 1000 in 0.5 s: 2000/s
  control::VmRow b;  // appears now
  b.id = 2;
  b.name = "batch";
  b.mode = "pt";
  now.vms = {a, b};
  const std::string first = RenderTop(now, nullptr, 0.5);
  EXPECT_NE(first.find("rates from the next frame"), std::string::npos) << first;
  const std::string frame = RenderTop(now, &before, 0.5);
  EXPECT_NE(frame.find("rates over 0.5 s"), std::string::npos) << frame;
  const size_t web = frame.find("web");
  const size_t batch = frame.find("batch");
  ASSERT_NE(web, std::string::npos);
  ASSERT_NE(batch, std::string::npos);
  const std::string web_line = frame.substr(web, frame.find('\n', web) - web);
  EXPECT_NE(web_line.find("60.0%"), std::string::npos) << web_line;
  EXPECT_NE(web_line.find("2000"), std::string::npos) << web_line;
  EXPECT_NE(web_line.find("64 MiB / 256 MiB"), std::string::npos) << web_line;
  const std::string batch_line = frame.substr(batch, frame.find('\n', batch) - batch);
  EXPECT_NE(batch_line.find("(not scheduled)"), std::string::npos) << batch_line;
}

TEST(GpuvmCtlTest, RefusesBadCommandLinesLocally) {
  for (const std::vector<std::string>& bad :
       std::vector<std::vector<std::string>>{{},
                                             {"lst"},
                                             {"set-share", "1", "-5"},
                                             {"set-share", "1", "150"},
                                             {"set-share", "1"},
                                             {"set-share", "a b", "5"},
                                             {"set-scheduler", "rr"},
                                             {"list", "--json"},
                                             {"--socket"}}) {
    EXPECT_FALSE(ParseCommandLine(bad).ok());
  }
}

TEST(GpuvmCtlTest, CannotReachIsUnavailable) {
  Result<control::Reply> r = Call("@gpuvm-ctl-test-nobody-listens", control::ListRequest{});
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
}

TEST(GpuvmCtlTest, RendersUnscheduledVms) {
  control::ListReply list;
  control::VmRow v;
  v.id = 3;
  v.name = "a";
  v.mode = "pt";
  list.vms.push_back(v);
  const std::string table = RenderList(list);
  EXPECT_NE(table.find("scheduler: band"), std::string::npos);
  EXPECT_NE(table.find("(not scheduled)"), std::string::npos);
}

}  // namespace
}  // namespace gpuvm::ctl
