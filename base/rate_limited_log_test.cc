#include "base/rate_limited_log.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpuvm {
namespace {

using namespace std::chrono_literals;

class RateLimitedLogTest : public ::testing::Test {
 protected:
  RateLimitedLog::Clock FakeClock() {
    return [this] { return now_; };
  }
  std::vector<std::string> lines_;
  std::chrono::steady_clock::time_point now_{};
};

TEST_F(RateLimitedLogTest, AFloodCostsTheBurstAndOneSummaryPerInterval) {
  RateLimitedLog log([this](const std::string& l) { lines_.push_back(l); }, {3, 1s}, FakeClock());
  int built = 0;
  // 4,000 events over 2 s (one every 0.5 ms).
  for (int i = 0; i < 4000; ++i) {
    log.Note(7, "refused BAR0 writes", [&] {
      ++built;
      return "refused write " + std::to_string(i);
    });
    now_ += 500us;
  }
  EXPECT_EQ(built, 3);  // the caller's line is built only when written
  ASSERT_GE(lines_.size(), 4u);
  EXPECT_EQ(lines_[0], "refused write 0");
  EXPECT_EQ(lines_[2], "refused write 2");
  // The fourth line is the first summary: events 3..2002 (2,000 of them), due at 1 s.
  EXPECT_EQ(lines_[3],
            "2,000 more refused BAR0 writes in the last 1.0 s (only the first 3 are logged one by "
            "one)");
  EXPECT_EQ(lines_.size(), 4u);  // the next is not due yet (0.9995 s since)
  log.Flush();
  ASSERT_EQ(lines_.size(), 5u);
  EXPECT_EQ(lines_[4].rfind("1,997 more refused BAR0 writes in the last 1.0 s", 0), 0u)
      << lines_[4];
  EXPECT_EQ(log.lines(), 5u);
  log.Flush();  // nothing left out: nothing written
  EXPECT_EQ(lines_.size(), 5u);
}

TEST_F(RateLimitedLogTest, KindsAreLimitedApartAndCountsAddUp) {
  RateLimitedLog log([this](const std::string& l) { lines_.push_back(l); }, {2, 1s}, FakeClock());
  for (int i = 0; i < 5; ++i) log.Note(1, "playlists", [] { return std::string("p"); });
  for (int i = 0; i < 2; ++i) log.Note(2, "faults", [] { return std::string("f"); });
  EXPECT_EQ(lines_, (std::vector<std::string>{"p", "p", "f", "f"}));
  // A batch counts as its size (e.g. 4,096 page-table entries dropped by one rescan).
  EXPECT_FALSE(log.Note(2, "faults", 4096, [] { return std::string("f"); }));
  now_ += 2s;
  EXPECT_FALSE(log.Note(1, "playlists", [] { return std::string("p"); }));
  ASSERT_EQ(lines_.size(), 5u);
  EXPECT_EQ(lines_[4].rfind("4 more playlists in the last 2.0 s", 0), 0u) << lines_[4];
  log.Flush();
  ASSERT_EQ(lines_.size(), 6u);
  EXPECT_EQ(lines_[5].rfind("4,096 more faults in the last 2.0 s", 0), 0u) << lines_[5];
}

TEST_F(RateLimitedLogTest, DestructionWritesWhatWasLeftOutAndAnEmptySinkIsFine) {
  {
    RateLimitedLog log([this](const std::string& l) { lines_.push_back(l); }, {1, 1s}, FakeClock());
    log.Note(0, "things", [] { return std::string("a"); });
    log.Note(0, "things", [] { return std::string("b"); });
  }
  ASSERT_EQ(lines_.size(), 2u);
  EXPECT_EQ(lines_[1].rfind("1 more things in the last 0.0 s", 0), 0u) << lines_[1];
  RateLimitedLog quiet(nullptr, {1, 1s}, FakeClock());
  EXPECT_TRUE(quiet.Note(0, "x", [] { return std::string("x"); }));
  EXPECT_FALSE(quiet.Note(0, "x", [] { return std::string("x"); }));
  EXPECT_EQ(quiet.lines(), 1u);
}

// A server's occasional refusals after a quiet spell are logged in full again; a flood that never
// lets up is not.
TEST_F(RateLimitedLogTest, AQuietKindGetsItsBurstBack) {
  RateLimitedLog log([this](const std::string& l) { lines_.push_back(l); }, {2, 1s, 5s},
                     FakeClock());
  auto note = [&](const char* line) { return log.Note(0, "refused peers", [=] { return line; }); };
  EXPECT_TRUE(note("a"));
  EXPECT_TRUE(note("b"));
  EXPECT_FALSE(note("c"));  // left out
  now_ += 1s;
  EXPECT_FALSE(note("d"));  // the summary of c and d
  ASSERT_EQ(lines_.size(), 3u);
  EXPECT_EQ(lines_[2].rfind("2 more refused peers", 0), 0u) << lines_[2];
  for (int i = 0; i < 10; ++i) {  // a flood: never 5 s quiet, so no burst again
    now_ += 1s;
    EXPECT_FALSE(note("flood"));  // each one summarized (1 s since the last line)
  }
  now_ += 4s;
  EXPECT_FALSE(note("e"));  // 4 s quiet: not enough (e is summarized at once)
  now_ += 1s;
  EXPECT_FALSE(note("f"));  // 1 s after e's summary: not enough either
  now_ += 5s;               // 5 s quiet since f's summary, nothing left out
  EXPECT_TRUE(note("g"));
  EXPECT_EQ(lines_.back(), "g");
}

TEST(WithThousandsTest, GroupsDigits) {
  EXPECT_EQ(WithThousands(0), "0");
  EXPECT_EQ(WithThousands(999), "999");
  EXPECT_EQ(WithThousands(1000), "1,000");
  EXPECT_EQ(WithThousands(3990), "3,990");
  EXPECT_EQ(WithThousands(1234567890), "1,234,567,890");
}

}  // namespace
}  // namespace gpuvm
