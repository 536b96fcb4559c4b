#include "aggregator/vm_tokens.h"

#include <gtest/gtest.h>

#include <set>

namespace gpuvm::aggregator {
namespace {

using namespace std::chrono_literals;

TEST(VmTokens, ATokenOpensOneSessionOfItsDomain) {
  VmTokens tokens;
  const auto now = VmTokens::Clock::now();
  Result<ipc::VmToken> a = tokens.Issue(7, now);
  Result<ipc::VmToken> b = tokens.Issue(7, now);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b) << "each token is fresh";
  EXPECT_EQ(tokens.outstanding(now), 2u);
  EXPECT_EQ(*tokens.Redeem(*b, now), 7);
  Result<uint16_t> again = tokens.Redeem(*b, now);
  ASSERT_FALSE(again.ok()) << "used";
  EXPECT_EQ(again.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(*tokens.Redeem(*a, now), 7);
  EXPECT_EQ(tokens.outstanding(now), 0u);
}

TEST(VmTokens, UnknownAndNearMissTokensAreRefused) {
  VmTokens tokens;
  Result<ipc::VmToken> real = tokens.Issue(3);
  ASSERT_TRUE(real.ok());
  ipc::VmToken guess = *real;
  guess.back() ^= 1;  // right but for one bit
  EXPECT_EQ(tokens.Redeem(guess).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(tokens.Redeem(ipc::VmToken{}).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(*tokens.Redeem(*real), 3) << "a failed guess costs the real holder nothing";
}

TEST(VmTokens, UnusedTokensExpire) {
  VmTokens tokens(VmTokens::Options{.capacity = 4, .ttl = 1000ms});
  const auto t0 = VmTokens::Clock::now();
  Result<ipc::VmToken> old = tokens.Issue(1, t0);
  Result<ipc::VmToken> fresh = tokens.Issue(2, t0 + 600ms);
  ASSERT_TRUE(old.ok() && fresh.ok());
  EXPECT_EQ(tokens.Redeem(*old, t0 + 1000ms).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(*tokens.Redeem(*fresh, t0 + 1500ms), 2);
}

TEST(VmTokens, AtMostCapacityAreOutstandingAndExpiryFreesRoom) {
  VmTokens tokens(VmTokens::Options{.capacity = 3, .ttl = 1000ms});
  const auto t0 = VmTokens::Clock::now();
  std::set<ipc::VmToken> issued;
  for (uint16_t d = 1; d <= 3; ++d) {
    Result<ipc::VmToken> t = tokens.Issue(d, t0);
    ASSERT_TRUE(t.ok());
    issued.insert(*t);
  }
  Result<ipc::VmToken> refused = tokens.Issue(4, t0);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(tokens.outstanding(t0), 3u) << "nobody's token was dropped for the new one";
  EXPECT_TRUE(tokens.Issue(4, t0 + 1001ms).ok());
  EXPECT_EQ(tokens.outstanding(t0 + 1001ms), 1u);
}

TEST(VmTokens, KnownTokensForFuzzersAndDomainZeroRefused) {
  VmTokens tokens;
  ipc::VmToken known{};
  known.fill(0x5a);
  ASSERT_TRUE(tokens.Add(known, 9).ok());
  EXPECT_EQ(*tokens.Redeem(known), 9);
  EXPECT_EQ(tokens.Add(known, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(tokens.Issue(0).status().code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(tokens.Add(known, 9).ok());
  tokens.Clear();
  EXPECT_EQ(tokens.Redeem(known).status().code(), StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace gpuvm::aggregator
