// Unit tests of the driver's small parts: the pushbuffer builder (decoded by the software GPU's own
// decoder, so both sides of the header format are checked against each other), the range
// allocator, and the page-table geometry.
#include <gtest/gtest.h>

#include <vector>

#include "gpu/hw/gpfifo.h"
#include "gpu/sim/pushbuf.h"
#include "guest-pv-driver/pushbuf.h"
#include "guest-pv-driver/range_allocator.h"
#include "guest-pv-driver/vm_geometry.h"

namespace gpuvm::guest {
namespace {

namespace gp = gf100::gpfifo;

std::vector<sim::MethodCall> Decode(const PushBuffer& pb) {
  sim::MethodDecoder decoder;
  std::vector<sim::MethodCall> calls;
  for (uint32_t w : pb.words()) {
    sim::MethodCall call;
    const auto r = decoder.Feed(w, &call);
    EXPECT_NE(r, sim::MethodDecoder::Result::kIllegal);
    if (r == sim::MethodDecoder::Result::kMethod) calls.push_back(call);
  }
  EXPECT_FALSE(decoder.in_method());
  return calls;
}

TEST(GuestDriverPushBuffer, HeaderKinds) {
  PushBuffer pb;
  pb.Inc(2, 0x238, {1, 2, 3});
  EXPECT_EQ(pb.words()[0], gp::IncHeader(2, 0x238, 3));
  pb.Clear();
  const uint32_t two[] = {7, 8};
  pb.NonInc(4, 0x304, two);
  EXPECT_EQ(pb.words()[0], gp::NonIncHeader(4, 0x304, 2));
  pb.Clear();
  pb.Method(1, 0x1698, 1);
  ASSERT_EQ(pb.size(), 1u) << "a small value goes in the header";
  EXPECT_EQ(pb.words()[0], gp::ImmediateHeader(1, 0x1698, 1));
  pb.Clear();
  pb.Method(1, 0x0000, 0x90c0);
  ASSERT_EQ(pb.size(), 2u) << "a value past 13 bits needs a data word";
}

TEST(GuestDriverPushBuffer, DecodesToTheIntendedCalls) {
  PushBuffer pb;
  pb.Inc(2, 0x238, {10, 11});
  const uint32_t three[] = {20, 21, 22};
  pb.NonInc(3, 0x304, three);
  const uint32_t one_inc[] = {30, 31, 32};
  pb.OneInc(5, 0x2390, one_inc);
  pb.Method(7, 0x1694, 0x1fff);
  pb.Method(7, 0x1694, 0x2000);
  const std::vector<sim::MethodCall> expected = {
      {2, 0x238, 10},  {2, 0x23c, 11},  {3, 0x304, 20},  {3, 0x304, 21},      {3, 0x304, 22},
      {5, 0x2390, 30}, {5, 0x2394, 31}, {5, 0x2394, 32}, {7, 0x1694, 0x1fff}, {7, 0x1694, 0x2000}};
  const auto calls = Decode(pb);
  ASSERT_EQ(calls.size(), expected.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].subchannel, expected[i].subchannel) << i;
    EXPECT_EQ(calls[i].method, expected[i].method) << i;
    EXPECT_EQ(calls[i].data, expected[i].data) << i;
  }
}

TEST(GuestDriverPushBuffer, LongRunsAreSplitAcrossHeaders) {
  std::vector<uint32_t> data(20000);
  for (uint32_t i = 0; i < data.size(); ++i) data[i] = i;
  PushBuffer inc, non_inc;
  inc.Inc(1, 0x100, data);
  non_inc.NonInc(1, 0x304, data);
  const auto a = Decode(inc);
  const auto b = Decode(non_inc);
  ASSERT_EQ(a.size(), data.size());
  ASSERT_EQ(b.size(), data.size());
  for (uint32_t i = 0; i < data.size(); i += 997) {
    EXPECT_EQ(a[i].method, (0x100 + 4 * i) & 0x3ffc) << "the 12-bit method field wraps";
    EXPECT_EQ(a[i].data, i);
    EXPECT_EQ(b[i].method, 0x304u);
    EXPECT_EQ(b[i].data, i);
  }
  EXPECT_EQ(inc.size(), data.size() + 3) << "three headers of at most 8191 words";
}

TEST(GuestDriverRangeAllocator, FirstFitAlignedAndCoalesced) {
  RangeAllocator r(0x1000, 0x10000);
  auto a = r.Allocate(0x100, 0x1000);
  auto b = r.Allocate(0x2000, 0x4000);
  auto c = r.Allocate(0x100, 0x10);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, 0x1000u);
  EXPECT_EQ(*b, 0x4000u);
  EXPECT_EQ(*c, 0x1100u) << "first fit fills the gap before b";
  uint64_t start = 0, size = 0;
  EXPECT_TRUE(r.Lookup(0x5fff, &start, &size));
  EXPECT_EQ(start, 0x4000u);
  EXPECT_FALSE(r.Lookup(0x6000, &start, &size));
  EXPECT_EQ(r.Free(0x1234).code(), StatusCode::kNotFound);
  ASSERT_TRUE(r.Free(*a).ok());
  ASSERT_TRUE(r.Free(*b).ok());
  ASSERT_TRUE(r.Free(*c).ok());
  EXPECT_EQ(r.free_bytes(), 0x10000u);
  auto whole = r.Allocate(0x10000, 0x1000);
  ASSERT_TRUE(whole.ok()) << "freed ranges coalesce back into one";
  EXPECT_EQ(r.Allocate(1, 1).status().code(), StatusCode::kResourceExhausted);
}

TEST(GuestDriverRangeAllocator, ReserveAndBadArguments) {
  RangeAllocator r(0, 0x10000);
  ASSERT_TRUE(r.Reserve(0x2000, 0x1000).ok());
  EXPECT_EQ(r.Reserve(0x2800, 0x1000).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.Allocate(0, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Allocate(1, 3).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Allocate(~0ull, 1).status().code(), StatusCode::kResourceExhausted);
  auto a = r.Allocate(0x2000, 0x1000);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, 0u);
  auto b = r.Allocate(0x1000, 0x1000);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, 0x3000u);
}

TEST(GuestDriverVmGeometry, TablesShrinkToTheLimit) {
  const int pde_shift = gf100::vm::kPdeShift(gf100::vm::kLargePageShift128K);  // 128 MiB
  EXPECT_EQ(PtSizeFor(0, (128u << 20) - 1, pde_shift), 0u);
  EXPECT_EQ(PtSizeFor(0, (64u << 20) - 1, pde_shift), 1u);
  EXPECT_EQ(PtSizeFor(0, (16u << 20) - 1, pde_shift), 3u);
  EXPECT_EQ(PtSizeFor(0, (1u << 20) - 1, pde_shift), 3u);
  EXPECT_EQ(PtSizeFor(1, (1ull << 40) - 1, pde_shift), 0u);
  EXPECT_EQ(SmallTableEntries(gf100::vm::kLargePageShift128K, 1), 16384u);
  EXPECT_EQ(LargeTableEntries(3), 128u);
}

}  // namespace
}  // namespace gpuvm::guest
