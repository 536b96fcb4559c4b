#include "runtime/core/managed_advice.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace gpuvm::runtime {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kBase = 0x7000'0000'0000;

// Every page's advice as Visit reports it, [first, first + pages) pages from kBase.
std::vector<PageAdvice> Pages(const ManagedAdvice& a, uint64_t first, uint64_t pages) {
  std::vector<PageAdvice> out;
  // Visit reports runs, not pages: walk one page at a time.
  for (uint64_t p = first; p < first + pages; ++p) {
    int calls = 0;
    a.Visit(kBase + p * kPage, kBase + (p + 1) * kPage, [&](const PageAdvice& v) {
      out.push_back(v);
      ++calls;
    });
    EXPECT_EQ(calls, 1);
  }
  return out;
}

TEST(ManagedAdviceTest, AdviceLandsOnThePagesAskedAndOnlyThere) {
  ManagedAdvice a;
  a.Apply(kBase + 2 * kPage, kBase + 5 * kPage, [](PageAdvice& p) { p.read_mostly = true; });
  a.Apply(kBase + 4 * kPage, kBase + 8 * kPage, [](PageAdvice& p) {
    p.preferred = {1 /*device*/, 0};
  });
  const std::vector<PageAdvice> pages = Pages(a, 0, 10);
  for (uint64_t p = 0; p < 10; ++p) {
    EXPECT_EQ(pages[p].read_mostly, p >= 2 && p < 5) << p;
    EXPECT_EQ(pages[p].preferred.type, (p >= 4 && p < 8) ? 1 : 0) << p;
  }
  // A visit of the whole range: runs in order, gaps as the default.
  std::vector<PageAdvice> runs;
  a.Visit(kBase, kBase + 10 * kPage, [&](const PageAdvice& v) { runs.push_back(v); });
  ASSERT_EQ(runs.size(), 5u);  // none, RM, RM+pref, pref, none
  EXPECT_EQ(runs[0], PageAdvice{});
  EXPECT_TRUE(runs[2].read_mostly && runs[2].preferred.type == 1);
  EXPECT_EQ(runs[4], PageAdvice{});
}

TEST(ManagedAdviceTest, UndoneAndForgottenAdviceTakesNoRoom) {
  ManagedAdvice a;
  a.Apply(kBase, kBase + 64 * kPage, [](PageAdvice& p) { p.accessed_by_device = true; });
  EXPECT_EQ(a.runs(), 1u);
  a.Apply(kBase + 10 * kPage, kBase + 20 * kPage, [](PageAdvice& p) { p.read_mostly = true; });
  EXPECT_EQ(a.runs(), 3u);
  a.Apply(kBase + 10 * kPage, kBase + 20 * kPage, [](PageAdvice& p) { p.read_mostly = false; });
  EXPECT_EQ(a.runs(), 1u) << "equal neighbours merge again";
  a.Forget(kBase + 32 * kPage, kBase + 64 * kPage);
  EXPECT_EQ(Pages(a, 31, 2)[1], PageAdvice{});
  EXPECT_TRUE(Pages(a, 31, 1)[0].accessed_by_device);
  a.Apply(kBase, kBase + 32 * kPage, [](PageAdvice& p) { p.accessed_by_device = false; });
  EXPECT_EQ(a.runs(), 0u);
}

TEST(ManagedAdviceTest, AgreesWithAPageArrayOverRandomOperations) {
  ManagedAdvice a;
  constexpr uint64_t kPages = 96;
  std::vector<PageAdvice> model(kPages);
  std::mt19937_64 rng(11);
  for (int step = 0; step < 3000; ++step) {
    const uint64_t x = rng() % (kPages + 1), y = rng() % (kPages + 1);
    const uint64_t lo = std::min(x, y), hi = std::max(x, y);
    const int what = int(rng() % 5);
    const int id = int(rng() % 3);
    auto change = [&](PageAdvice& p) {
      switch (what) {
        case 0:
          p.read_mostly = !p.read_mostly;
          break;
        case 1:
          p.preferred = {id, 0};
          break;
        case 2:
          p.accessed_by_host = id != 0;
          break;
        case 3:
          p.last_prefetch = {id, 0};
          break;
        default:
          break;
      }
    };
    if (what == 4) {
      a.Forget(kBase + lo * kPage, kBase + hi * kPage);
      for (uint64_t p = lo; p < hi; ++p) model[p] = PageAdvice{};
    } else {
      a.Apply(kBase + lo * kPage, kBase + hi * kPage, change);
      for (uint64_t p = lo; p < hi; ++p) change(model[p]);
    }
    if (step % 100 == 0) {
      ASSERT_EQ(Pages(a, 0, kPages), model) << step;
      // Runs are maximal: no more than the model's changes of advice, plus one.
      size_t changes = 0;
      for (uint64_t p = 0; p < kPages; ++p) {
        if (!(model[p] == PageAdvice{}) && (p == 0 || !(model[p] == model[p - 1]))) ++changes;
      }
      EXPECT_EQ(a.runs(), changes) << step;
    }
  }
}

}  // namespace
}  // namespace gpuvm::runtime
