#include "gpu/sim/pushbuf.h"

#include <gtest/gtest.h>

#include <vector>

#include "gpu/hw/gpfifo.h"

namespace gpuvm::sim {
namespace {

namespace gp = gf100::gpfifo;
using R = MethodDecoder::Result;

struct Decoded {
  std::vector<MethodCall> calls;
  std::vector<R> results;
};

Decoded Feed(MethodDecoder* d, const std::vector<uint32_t>& words) {
  Decoded out;
  for (uint32_t w : words) {
    MethodCall c;
    R r = d->Feed(w, &c);
    out.results.push_back(r);
    if (r == R::kMethod) out.calls.push_back(c);
  }
  return out;
}

bool Same(const MethodCall& a, uint32_t subc, uint32_t method, uint32_t data) {
  return a.subchannel == subc && a.method == method && a.data == data;
}

TEST(SimMethodDecoderTest, IncreasingMethods) {
  MethodDecoder d;
  Decoded out = Feed(&d, {gp::IncHeader(3, 0x400, 3), 1, 2, 3});
  ASSERT_EQ(out.calls.size(), 3u);
  EXPECT_TRUE(Same(out.calls[0], 3, 0x400, 1));
  EXPECT_TRUE(Same(out.calls[1], 3, 0x404, 2));
  EXPECT_TRUE(Same(out.calls[2], 3, 0x408, 3));
  EXPECT_FALSE(d.in_method());
}

TEST(SimMethodDecoderTest, NonIncreasingIncreaseOnceAndImmediate) {
  MethodDecoder d;
  Decoded out = Feed(&d, {gp::NonIncHeader(1, 0x304, 2), 7, 8, gp::OneIncHeader(2, 0x10, 3), 4, 5,
                          6, gp::ImmediateHeader(5, 0x50, 0x1fff)});
  ASSERT_EQ(out.calls.size(), 6u);
  EXPECT_TRUE(Same(out.calls[0], 1, 0x304, 7));
  EXPECT_TRUE(Same(out.calls[1], 1, 0x304, 8));
  EXPECT_TRUE(Same(out.calls[2], 2, 0x10, 4));
  EXPECT_TRUE(Same(out.calls[3], 2, 0x14, 5));
  EXPECT_TRUE(Same(out.calls[4], 2, 0x14, 6));
  EXPECT_TRUE(Same(out.calls[5], 5, 0x50, 0x1fff));
}

TEST(SimMethodDecoderTest, DataContinuesAcrossSegmentsAndCountZeroIsEmpty) {
  MethodDecoder d;
  Decoded a = Feed(&d, {gp::IncHeader(0, 0x100, 2), 9});
  EXPECT_TRUE(d.in_method());
  Decoded b = Feed(&d, {10, gp::IncHeader(0, 0x200, 0), gp::ImmediateHeader(0, 0x20, 1)});
  ASSERT_EQ(a.calls.size() + b.calls.size(), 3u);
  EXPECT_TRUE(Same(b.calls[0], 0, 0x104, 10));
  EXPECT_TRUE(Same(b.calls[1], 0, 0x20, 1));
}

TEST(SimMethodDecoderTest, IllegalAndSpecialHeaders) {
  MethodDecoder d;
  MethodCall c;
  EXPECT_EQ(d.Feed(uint32_t(gp::SecOp::kReserved6) << gp::kSecOpShift, &c), R::kIllegal);
  EXPECT_EQ(d.Feed(0x00040100, &c), R::kIllegal);  // legacy increasing header
  EXPECT_EQ(d.Feed(uint32_t(gp::SecOp::kGrp2UseTert) << gp::kSecOpShift, &c), R::kIllegal);
  EXPECT_EQ(d.Feed(0x00010000, &c), R::kNone);  // SET_SUB_DEVICE_MASK: no effect on one GPU
  EXPECT_EQ(d.Feed(uint32_t(gp::SecOp::kEndPbSegment) << gp::kSecOpShift, &c), R::kEndSegment);
}

TEST(SimMethodDecoderTest, MethodAddressWrapsWithinTwelveBits) {
  MethodDecoder d;
  Decoded out = Feed(&d, {gp::IncHeader(0, 0x3ffc, 2), 1, 2});
  ASSERT_EQ(out.calls.size(), 2u);
  EXPECT_EQ(out.calls[1].method, 0u);
}

TEST(SimIbEntryTest, EncodeDecode) {
  const uint64_t e = gp::EncodeIbEntry(0xab12345678ull, 0x1234);
  const gp::IbEntry d = gp::DecodeIbEntry(uint32_t(e), uint32_t(e >> 32));
  EXPECT_EQ(d.address, 0xab12345678ull);
  EXPECT_EQ(d.words, 0x1234u);
  EXPECT_FALSE(d.not_main);
}

}  // namespace
}  // namespace gpuvm::sim
