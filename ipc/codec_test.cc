#include "ipc/codec.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <functional>

#include "gtest/gtest.h"

namespace gpuvm::ipc {
namespace {

VmToken TestToken() {
  VmToken t;
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<uint8_t>(0xf0 ^ (i * 37));
  return t;
}

std::vector<Message> OneOfEach() {
  return {
      {1, Hello{1, 1, "gpuvm-dm"}},
      {1, HelloAck{1}},
      {2, VmConfig{7, VmMode::kPassThrough, Backend::kXen, 4, 256ull << 20, 16ull << 20,
                   128ull << 20, 64ull << 20, "guest-7"}},
      {2, VmConfig{8, VmMode::kFullVirtualization, Backend::kLocal, 2, 64ull << 20, 16ull << 20,
                   128ull << 20, 64ull << 20, "web", VgpuVariant::kFvLazy, 256, 8, 12500}},
      {2, VmConfig{9, VmMode::kParaVirtualization, Backend::kLocal, 1, 64ull << 20, 16ull << 20,
                   128ull << 20, 64ull << 20, "p", VgpuVariant::kPvNaive, 0, 0, kNoShare}},
      {2, VmAccept{3, kAcceptWantsGuestMemory, 1ull << 30}},
      {3, GuestMemory{GuestMemoryKind::kXenDomain, 256ull << 20}},
      {3, GuestMemoryAck{}},
      {4, MmioRead{Bar::kBar0, 4, 1, 0x1700}},
      {4, MmioReadReply{0xdeadbeefcafef00d}},
      {5, MmioWrite{Bar::kBar1, 8, 0, 0x1234567, 0x0102030405060708}},
      {5, MmioWriteAck{}},
      {0, Interrupt{true}},
      {6, BarUnmap{Bar::kBar3, 0x2000, 0x1000}},
      {6, BarMapAck{}},
      {7, Error{StatusCode::kFailedPrecondition, "pass-through GPU already owned"}},
      {0, Error{StatusCode::kInternal, ""}},
      {8, Teardown{TeardownReason::kGuestGone}},
      {8, TeardownAck{}},
      {9, Ping{42}},
      {9, Pong{42}},
      {10, MmioWriteBlock{Bar::kBar3, 8, 2, 1, 0x10, std::vector<uint8_t>(16, 0xab)}},
      {10, MmioWriteBlock{Bar::kBar1, 1, kMaxBlockBytes, 0, 0x3,
                          std::vector<uint8_t>(kMaxBlockBytes, 7)}},
      {11, MmioReadBlock{Bar::kBar0, 4, 120, 0, 0x700000}},
      {12, MmioWriteFill{Bar::kBar3, 8, kMaxFillCount, 1, 0x2000, 0x0102030405060708ull}},
      {12, MmioWriteFill{Bar::kBar0, 4, 3, 0, 0x700010, 0xffffffff}},
      {11, MmioReadBlockReply{std::vector<uint8_t>(480, 1)}},
      {13, Auth{TestToken()}},
      {13, AuthAck{}},
  };
}

TEST(IpcCodec, EveryMessageRoundTrips) {
  for (const Message& m : OneOfEach()) {
    auto bytes = Encode(m);
    ASSERT_TRUE(bytes.ok()) << MessageTypeName(TypeOf(m.body)) << ": " << bytes.status().ToString();
    EXPECT_LE(bytes->size(), kMaxMessageSize);
    auto back = Decode(*bytes, DescriptorCount(m.body));
    ASSERT_TRUE(back.ok()) << MessageTypeName(TypeOf(m.body)) << ": " << back.status().ToString();
    EXPECT_EQ(*back, m) << MessageTypeName(TypeOf(m.body));
    auto again = Encode(*back);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, *bytes) << "canonical encoding";
  }
}

TEST(IpcCodec, MessagesWithADescriptorNeedExactlyOne) {
  const Message map{10, BarMap{Bar::kBar1, 0x10000, 0x4000, 0}};
  auto bytes = Encode(map);
  ASSERT_TRUE(bytes.ok());
  EXPECT_TRUE(Decode(*bytes, 1).ok());
  EXPECT_FALSE(Decode(*bytes, 0).ok());
  EXPECT_FALSE(Decode(*bytes, 2).ok());
  const Message memfd{11, GuestMemory{GuestMemoryKind::kLocalMemfd, 1 << 20}};
  auto memfd_bytes = Encode(memfd);
  ASSERT_TRUE(memfd_bytes.ok());
  EXPECT_TRUE(Decode(*memfd_bytes, 1).ok());
  EXPECT_FALSE(Decode(*memfd_bytes, 0).ok());
  auto read = Encode({4, MmioRead{Bar::kBar0, 4, 0, 0}});
  EXPECT_FALSE(Decode(*read, 1).ok()) << "a descriptor where none belongs";
  const Message lane{12, FastLaneOffer{1}};
  auto lane_bytes = Encode(lane);
  ASSERT_TRUE(lane_bytes.ok());
  EXPECT_EQ(*Decode(*lane_bytes, 3), lane);
  EXPECT_FALSE(Decode(*lane_bytes, 1).ok());
  EXPECT_FALSE(Encode({12, FastLaneOffer{2}}).ok()) << "unknown lane version";
  EXPECT_TRUE(Encode({12, FastLaneAck{}}).ok());
  EXPECT_TRUE(Encode({2, VmAccept{1, kAcceptWantsGuestMemory | kAcceptFastLane, 0}}).ok());
}

// One way to damage a valid encoding, and what the damage is.
struct Damage {
  std::function<void(std::vector<uint8_t>&)> mutate;
  const char* what;
};

// For each damage: takes a valid encoding of `m`, damages it, and expects Decode to refuse.
void ExpectRefused(const Message& m, const std::vector<Damage>& damages) {
  for (const auto& [mutate, what] : damages) {
    auto bytes = Encode(m);
    ASSERT_TRUE(bytes.ok()) << what;
    mutate(*bytes);
    auto decoded = Decode(*bytes, DescriptorCount(m.body));
    EXPECT_FALSE(decoded.ok()) << what;
    if (!decoded.ok()) {
      EXPECT_EQ(decoded.status().code(), StatusCode::kDataLoss) << what;
    }
  }
}

void Put32(std::vector<uint8_t>& b, size_t at, uint32_t v) { std::memcpy(&b[at], &v, 4); }

TEST(IpcCodec, RefusesDamagedHeaders) {
  const Message read{4, MmioRead{Bar::kBar0, 4, 0, 0x100}};
  ExpectRefused(read, {
                          {[](auto& b) { b[0] ^= 1; }, "magic"},
                          {[](auto& b) { b[6] = 1; }, "flags"},
                          {[](auto& b) { Put32(b, 12, 31); }, "length field"},
                          {[](auto& b) { b.pop_back(); }, "short packet"},
                          {[](auto& b) { b.push_back(0); }, "long packet"},
                          {[](auto& b) { b[4] = 0x99; }, "unknown type"},
                          {[](auto& b) { b[4] = 0x13; }, "type with another payload length"},
                      });
  EXPECT_FALSE(Decode(std::vector<uint8_t>(3, 0), 0).ok());
  EXPECT_FALSE(Decode(std::vector<uint8_t>(kMaxMessageSize + 1, 0), 0).ok());
  EXPECT_FALSE(Decode({}, 0).ok());
}

TEST(IpcCodec, RefusesBadAccesses) {
  const Message read{4, MmioRead{Bar::kBar0, 4, 0, 0x100}};
  ExpectRefused(read, {
                          {[](auto& b) { b[16] = 2; }, "BAR2 does not exist"},
                          {[](auto& b) { b[17] = 3; }, "size 3"},
                          {[](auto& b) { b[17] = 16; }, "size 16"},
                          {[](auto& b) { b[18] = 1; }, "reserved"},
                          {[](auto& b) { b[24] = 0x02; }, "unaligned BAR0 access"},
                          {[](auto& b) { b[31] = 0x80; }, "offset beyond any BAR"},
                          {[](auto& b) { Put32(b, 8, 0); }, "request with sequence 0"},
                      });
  // Unaligned is fine in the apertures.
  EXPECT_TRUE(Encode({4, MmioRead{Bar::kBar1, 8, 0, 0x1003}}).ok());
  EXPECT_FALSE(Encode({4, MmioRead{Bar::kBar0, 8, 0, 0x1004}}).ok());
  EXPECT_FALSE(Encode({4, MmioWrite{Bar::kBar0, 2, 0, 0x10, 0x10000}}).ok()) << "value too wide";
  EXPECT_FALSE(Encode({4, MmioRead{Bar::kBar3, 4, 0, kMaxBarExtent - 2}}).ok());
  EXPECT_TRUE(Encode({0, Interrupt{true}}).ok()) << "notifications use seq 0";
  EXPECT_FALSE(Encode({5, Interrupt{true}}).ok());
  const Message irq{0, Interrupt{false}};
  ExpectRefused(irq, {{[](auto& b) { b[16] = 2; }, "interrupt level 2"}});
}

TEST(IpcCodec, RefusesBadBlocks) {
  const std::vector<Message> bad = {
      {1, MmioWriteBlock{Bar::kBar1, 8, 0, 0, 0, {}}},                          // no elements
      {1, MmioWriteBlock{Bar::kBar1, 8, 2, 0, 0, std::vector<uint8_t>(8, 0)}},  // short data
      {1, MmioWriteBlock{Bar::kBar1, 3, 1, 0, 0, std::vector<uint8_t>(3, 0)}},  // element size
      {1,
       MmioWriteBlock{Bar::kBar0, 4, 2, 0, 0x102, std::vector<uint8_t>(8, 0)}},   // BAR0 unaligned
      {1, MmioReadBlock{Bar::kBar1, 8, uint16_t{kMaxBlockBytes / 8 + 1}, 0, 0}},  // too large
      {1, MmioReadBlock{Bar::kBar3, 8, 2, 0, kMaxBarExtent - 8}},                 // beyond 2^40
      {1, MmioReadBlock{static_cast<Bar>(2), 8, 1, 0, 0}},                        // no BAR2
      {1, MmioReadBlockReply{}},                                                  // empty
      {1, MmioWriteFill{Bar::kBar3, 8, 0, 0, 0, 0}},                              // no elements
      {1, MmioWriteFill{Bar::kBar3, 8, kMaxFillCount + 1, 0, 0, 0}},              // too many
      {1, MmioWriteFill{Bar::kBar3, 2, 1, 0, 0, 0x10000}},                        // wide value
      {1, MmioWriteFill{Bar::kBar0, 4, 2, 0, 0x102, 0}},                          // unaligned
      {1, MmioWriteFill{Bar::kBar3, 8, 2, 0, kMaxBarExtent - 8, 0}},              // beyond 2^40
      {1, MmioWriteFill{Bar::kBar1, 3, 1, 0, 0, 0}},                              // element size
      {0, MmioReadBlock{Bar::kBar1, 8, 1, 0, 0}},                                 // seq 0
  };
  for (const Message& m : bad) EXPECT_FALSE(Encode(m).ok()) << MessageTypeName(TypeOf(m.body));
  // On the wire: a count that disagrees with the data that came.
  auto bytes = Encode({1, MmioWriteBlock{Bar::kBar1, 4, 2, 0, 0, std::vector<uint8_t>(8, 0)}});
  ASSERT_TRUE(bytes.ok());
  (*bytes)[18] = 3;  // count 3, still 8 bytes of data
  EXPECT_FALSE(Decode(*bytes, 0).ok());
  auto reply = Encode({1, MmioReadBlockReply{std::vector<uint8_t>(8, 0)}});
  ASSERT_TRUE(reply.ok());
  (*reply)[16] = 9;  // says 9 bytes, carries 8
  EXPECT_FALSE(Decode(*reply, 0).ok());
}

TEST(IpcCodec, RefusesBadNamesSizesAndEnums) {
  const Message config{2, VmConfig{7, VmMode::kPassThrough, Backend::kLocal, 1, 1 << 20, 1 << 24,
                                   1 << 27, 1 << 26, "vm"}};
  // name field at payload offset 40 -> packet offset 56
  ExpectRefused(config, {
                            {[](auto& b) { b[60] = 'x'; }, "junk after the terminating NUL"},
                            {[](auto& b) { std::memset(&b[56], 'a', 32); }, "no terminator"},
                            {[](auto& b) { b[56] = 0x07; }, "unprintable"},
                            {[](auto& b) { b[18] = 9; }, "unknown mode"},
                            {[](auto& b) { b[19] = 0; }, "unknown backend"},
                            {[](auto& b) { Put32(b, 20, 0); }, "zero vCPUs"},
                            {[](auto& b) { b[24] = 1; }, "RAM not whole pages"},
                            {[](auto& b) { b[32] = 1; }, "BAR0 size not a power of two"},
                        });
  VmConfig long_name = std::get<VmConfig>(config.body);
  long_name.name = std::string(kNameSize, 'n');
  EXPECT_FALSE(Encode({2, long_name}).ok());
  EXPECT_FALSE(Encode({1, Hello{2, 1, "x"}}).ok()) << "inverted version range";
  EXPECT_FALSE(Encode({1, VmAccept{1, 0x80, 0}}).ok()) << "unknown flags";
  EXPECT_FALSE(Encode({1, BarMap{Bar::kBar1, 0x100, 0x1000, 0}}).ok()) << "not page aligned";
  EXPECT_FALSE(Encode({1, BarMap{Bar::kBar1, 0, 0, 0}}).ok()) << "empty";
}

// Version 6: the VM's options are typed fields after the name (payload +72), each checked against
// its range and the VM's mode; the name is only a name.
TEST(IpcCodec, RefusesBadTypedConfiguration) {
  const Message fv{2, VmConfig{7, VmMode::kFullVirtualization, Backend::kLocal, 1, 1 << 20, 1 << 24,
                               1 << 27, 1 << 26, "vm", VgpuVariant::kFvOptimized, 96, 4, 50000}};
  // variant at packet offset 88, reserved 89, channels 90, VRAM MiB 92, share 96, reserved 100.
  ExpectRefused(fv, {
                        {[](auto& b) { b[88] = 7; }, "unknown variant"},
                        {[](auto& b) { b[88] = 5; }, "a pv variant for an fv VM"},
                        {[](auto& b) { b[89] = 1; }, "reserved byte"},
                        {[](auto& b) { b[90] = 129; }, "129 channels"},
                        {[](auto& b) { Put32(b, 92, (1u << 20) + 1); }, "VRAM past 1 TiB"},
                        {[](auto& b) { Put32(b, 96, 100001); }, "share past 100 percent"},
                        {[](auto& b) { b[100] = 1; }, "reserved word"},
                        {[](auto& b) { b[57] = '@'; }, "options in the name"},
                    });
  VmConfig pv = std::get<VmConfig>(fv.body);
  pv.mode = VmMode::kParaVirtualization;
  EXPECT_FALSE(Encode({2, pv}).ok()) << "an fv variant for a pv VM";
  pv.variant = VgpuVariant::kPvMulticall;
  EXPECT_TRUE(Encode({2, pv}).ok());
  pv.variant = VgpuVariant::kPvDrm;  // version 7
  Result<std::vector<uint8_t>> pvdrm = Encode({2, pv});
  ASSERT_TRUE(pvdrm.ok());
  Result<Message> back = Decode(*pvdrm, 0);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(std::get<VmConfig>(back->body).variant, VgpuVariant::kPvDrm);
  pv.variant = VgpuVariant(8);
  EXPECT_FALSE(Encode({2, pv}).ok()) << "no variant 8";
  VmConfig fv_pvdrm = std::get<VmConfig>(fv.body);
  fv_pvdrm.variant = VgpuVariant::kPvDrm;
  EXPECT_FALSE(Encode({2, fv_pvdrm}).ok()) << "pvdrm is a pv variant";
  VmConfig pt = std::get<VmConfig>(fv.body);
  pt.mode = VmMode::kPassThrough;
  pt.variant = VgpuVariant::kDefault;
  EXPECT_FALSE(Encode({2, pt}).ok()) << "a pt VM with VRAM and channels";
  pt.vram_mib = 0;
  pt.channels = 0;
  EXPECT_TRUE(Encode({2, pt}).ok()) << "a pt VM may carry a share";
  pt.name = "a@lazy";
  EXPECT_FALSE(Encode({2, pt}).ok()) << "options in the name";
}

TEST(IpcCodec, VariantWordsParseForTheirModeOnly) {
  EXPECT_EQ(*ParseVgpuVariant(VmMode::kFullVirtualization, "opt"), VgpuVariant::kFvOptimized);
  EXPECT_EQ(*ParseVgpuVariant(VmMode::kFullVirtualization, "bar-remap"), VgpuVariant::kFvBarRemap);
  EXPECT_EQ(*ParseVgpuVariant(VmMode::kParaVirtualization, "mc"), VgpuVariant::kPvMulticall);
  EXPECT_EQ(*ParseVgpuVariant(VmMode::kParaVirtualization, "naive"), VgpuVariant::kPvNaive);
  EXPECT_FALSE(ParseVgpuVariant(VmMode::kParaVirtualization, "lazy").ok());
  EXPECT_FALSE(ParseVgpuVariant(VmMode::kPassThrough, "naive").ok());
  EXPECT_STREQ(VgpuVariantName(VgpuVariant::kFvBarRemap), "bar-remap");
  EXPECT_STREQ(VgpuVariantName(VgpuVariant::kPvMulticall), "multicall");
  EXPECT_EQ(*ParseVgpuVariant(VmMode::kParaVirtualization, "pvdrm"), VgpuVariant::kPvDrm);
  EXPECT_FALSE(ParseVgpuVariant(VmMode::kFullVirtualization, "pvdrm").ok());
  EXPECT_STREQ(VgpuVariantName(VgpuVariant::kPvDrm), "pvdrm");
}

TEST(IpcCodec, RefusesBadErrors) {
  const Message error{7, Error{StatusCode::kNotFound, "abc"}};
  ExpectRefused(error, {
                           {[](auto& b) { b[20] = 4; }, "text length disagrees"},
                           {[](auto& b) { Put32(b, 16, 0); }, "OK is not an error"},
                           {[](auto& b) { Put32(b, 16, 999); }, "unknown code"},
                           {[](auto& b) { b[24] = 0x01; }, "unprintable text"},
                       });
  EXPECT_FALSE(Encode({7, Error{StatusCode::kNotFound, std::string(kMaxErrorText + 1, 'e')}}).ok());
  const Message teardown{8, Teardown{TeardownReason::kNormal}};
  ExpectRefused(teardown, {{[](auto& b) { b[16] = 9; }, "unknown teardown reason"}});
}

TEST(IpcCodec, AuthCarriesExactlyOneToken) {
  const Message auth{1, Auth{TestToken()}};
  auto bytes = Encode(auth);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->size(), kHeaderSize + kVmTokenSize);
  const VmToken token = TestToken();
  EXPECT_TRUE(std::equal(token.begin(), token.end(), bytes->begin() + kHeaderSize));
  ExpectRefused(auth, {
                          {[](auto& b) { b.pop_back(); }, "a token one byte short"},
                          {[](auto& b) { b.push_back(0); }, "a token one byte long"},
                          {[](auto& b) { Put32(b, 8, 0); }, "AUTH with sequence 0"},
                      });
  EXPECT_FALSE(Decode(*bytes, 1).ok()) << "AUTH carries no descriptor";
  ExpectRefused({1, AuthAck{}}, {{[](auto& b) { b.push_back(0); }, "AUTH_ACK is empty"}});
}

TEST(IpcCodec, TokensAsTextRoundTripAndRefuseEverythingElse) {
  const VmToken t = TestToken();
  const std::string text = FormatVmToken(t);
  EXPECT_EQ(text.size(), 2 * kVmTokenSize);
  EXPECT_EQ(text.substr(0, 4), "f0d5");
  EXPECT_EQ(*ParseVmToken(text), t);
  EXPECT_EQ(*ParseVmToken(text + "\n"), t) << "a token file ends with a newline";
  std::string upper = text;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(*ParseVmToken(upper), t);
  for (const std::string& bad :
       {std::string(), text.substr(1), text + "0", text + "\n\n", text + " ", " " + text,
        "g" + text.substr(1), text.substr(0, 63) + "\n" + "0"}) {
    Result<VmToken> parsed = ParseVmToken(bad);
    EXPECT_FALSE(parsed.ok()) << "'" << bad << "'";
    if (!parsed.ok()) {
      EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(parsed.status().message().find(text.substr(0, 8)), std::string::npos)
          << "the message must not echo a secret";
    }
  }
}

}  // namespace
}  // namespace gpuvm::ipc
