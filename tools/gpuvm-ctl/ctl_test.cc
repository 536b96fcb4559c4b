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
