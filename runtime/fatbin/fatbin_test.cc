#include "runtime/fatbin/fatbin.h"

#include <gtest/gtest.h>
#include <lz4.h>
#include <zstd.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace gpuvm::runtime::fatbin {
namespace {

std::vector<uint8_t> ReadFile(const std::string& name) {
  std::ifstream in(std::string(GPUVM_FATBIN_TESTDATA) + "/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void Put16(std::vector<uint8_t>& b, size_t at, uint16_t v) { std::memcpy(&b[at], &v, 2); }
void Put32(std::vector<uint8_t>& b, size_t at, uint32_t v) { std::memcpy(&b[at], &v, 4); }
void Put64(std::vector<uint8_t>& b, size_t at, uint64_t v) { std::memcpy(&b[at], &v, 8); }

// Builds one entry the way nvcc 13 lays them out (80-byte PTX headers, 64-byte ELF headers).
struct EntrySpec {
  EntryKind kind = EntryKind::kPtx;
  uint32_t arch = 75;
  uint64_t flags = 0x11;
  uint32_t header_bytes = 80;
  uint32_t compressed_bytes = 0;
  uint64_t uncompressed_bytes = 0;
  std::vector<uint8_t> payload;
};

std::vector<uint8_t> BuildContainer(const std::vector<EntrySpec>& specs) {
  std::vector<uint8_t> out(16);
  for (const EntrySpec& s : specs) {
    size_t at = out.size();
    std::vector<uint8_t> payload = s.payload;
    while (payload.size() % 8) payload.push_back(0);
    out.resize(at + s.header_bytes + payload.size());
    Put16(out, at, uint16_t(s.kind));
    Put16(out, at + 2, 0x0101);
    Put32(out, at + 4, s.header_bytes);
    Put64(out, at + 8, payload.size());
    Put32(out, at + 16, s.compressed_bytes);
    Put16(out, at + 26, 9);
    Put32(out, at + 28, s.arch);
    Put64(out, at + 40, s.flags);
    Put64(out, at + 56, s.uncompressed_bytes);
    std::memcpy(&out[at + s.header_bytes], payload.data(), payload.size());
  }
  Put32(out, 0, kContainerMagic);
  Put16(out, 4, 1);
  Put16(out, 6, 16);
  Put64(out, 8, out.size() - 16);
  return out;
}

const char kPtx[] =
    "\n\n.version 9.0\n.target sm_75\n.address_size 64\n\n"
    ".visible .entry k(.param .u64 p)\n{\n  ret;\n}\n";

std::vector<uint8_t> Bytes(const std::string& s) { return {s.begin(), s.end()}; }

// A PTX entry whose `uncompressed_bytes` of text are stored as `compressed` (by the codec `flag`
// names).
EntrySpec CompressedPtx(uint64_t flag, std::vector<uint8_t> compressed, size_t uncompressed_bytes) {
  EntrySpec s;
  s.flags = 0x11 | flag;
  s.compressed_bytes = uint32_t(compressed.size());
  s.uncompressed_bytes = uncompressed_bytes;
  s.payload = std::move(compressed);
  return s;
}

TEST(RuntimeFatbinWrapper, DecodesBothVersions) {
  std::vector<uint8_t> w(24);
  Put32(w, 0, kWrapperMagic);
  Put32(w, 4, 1);
  Put64(w, 8, 0x1234);
  Put64(w, 16, 0);
  auto v1 = ParseWrapper(w);
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  EXPECT_EQ(v1->version, 1u);
  EXPECT_EQ(v1->data, 0x1234u);
  Put32(w, 4, 2);
  Put64(w, 16, 0x5678);
  auto v2 = ParseWrapper(w);
  ASSERT_TRUE(v2.ok());
  EXPECT_EQ(v2->filename_or_fatbins, 0x5678u);
}

TEST(RuntimeFatbinWrapper, RejectsBadInput) {
  std::vector<uint8_t> w(24);
  EXPECT_EQ(ParseWrapper(std::span(w).first(23)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseWrapper(w).status().code(), StatusCode::kInvalidArgument);  // magic 0
  Put32(w, 0, kWrapperMagic);
  Put32(w, 4, 3);
  Put64(w, 8, 1);
  EXPECT_EQ(ParseWrapper(w).status().code(), StatusCode::kUnimplemented);
  Put32(w, 4, 1);
  Put64(w, 8, 0);
  EXPECT_EQ(ParseWrapper(w).status().code(), StatusCode::kInvalidArgument);  // null data
}

// The committed blob nvcc 13.0 produced for testdata/vadd.cu with default flags: an sm_75 ELF and a
// ZSTD-compressed compute_75 PTX entry.
TEST(RuntimeFatbinNvcc, ReadsCompressedPtxFromNvcc13Output) {
  std::vector<uint8_t> blob = ReadFile("vadd_sm75_zstd.fatbin");
  auto c = ParseContainer(blob);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->entries.size(), 2u);
  EXPECT_EQ(c->entries[0].kind, EntryKind::kElf);
  EXPECT_EQ(c->entries[0].arch, 75u);
  EXPECT_EQ(c->entries[0].header_bytes, 64u);
  const Entry& ptx = c->entries[1];
  EXPECT_EQ(ptx.kind, EntryKind::kPtx);
  EXPECT_EQ(ptx.header_bytes, 80u);
  EXPECT_TRUE(ptx.is_zstd());
  EXPECT_EQ(ptx.compressed_bytes, 397u);
  EXPECT_EQ(ptx.uncompressed_bytes, 975u);
  EXPECT_EQ(ptx.major, 9);
  EXPECT_EQ(SelectPtx(*c, 75), &ptx);
  auto text = ExtractPtx(ptx);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_NE(text->find(".version 9.0"), std::string::npos);
  EXPECT_NE(text->find(".entry _Z4vaddPKfS0_Pfi"), std::string::npos);
  EXPECT_EQ(text->find('\0'), std::string::npos);
}

TEST(RuntimeFatbinNvcc, CompressedAndPlainBlobsCarryTheSamePtx) {
  std::vector<uint8_t> zblob = ReadFile("vadd_sm75_zstd.fatbin");
  std::vector<uint8_t> pblob = ReadFile("vadd_sm75_plain.fatbin");
  auto z = ParseContainers(zblob);
  auto p = ParseContainers(pblob);
  ASSERT_TRUE(z.ok() && p.ok());
  const Entry* pe = SelectPtx(*p, 75);
  ASSERT_NE(pe, nullptr);
  EXPECT_FALSE(pe->is_zstd());
  auto zt = ExtractPtx(*SelectPtx(*z, 75));
  auto pt = ExtractPtx(*pe);
  ASSERT_TRUE(zt.ok() && pt.ok());
  EXPECT_EQ(*zt, *pt);
}

TEST(RuntimeFatbinNvcc, EveryTruncationIsRejectedCleanly) {
  std::vector<uint8_t> blob = ReadFile("vadd_sm75_zstd.fatbin");
  for (size_t n = 0; n < blob.size(); ++n) {
    std::vector<uint8_t> cut(blob.begin(), blob.begin() + n);
    auto c = ParseContainer(cut);
    EXPECT_FALSE(c.ok()) << n;
  }
}

TEST(RuntimeFatbinSynthetic, Lz4Entry) {
  std::string ptx = kPtx;
  std::vector<uint8_t> compressed(LZ4_compressBound(int(ptx.size())));
  int n = LZ4_compress_default(ptx.data(), reinterpret_cast<char*>(compressed.data()),
                               int(ptx.size()), int(compressed.size()));
  ASSERT_GT(n, 0);
  compressed.resize(n);
  EntrySpec s = CompressedPtx(kFlagCompressedLz4, compressed, ptx.size());
  s.header_bytes = 64;
  std::vector<uint8_t> blob = BuildContainer({s});
  auto c = ParseContainer(blob);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto text = ExtractPtx(c->entries[0]);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, ptx);

  // A size that disagrees with the stream is corruption, not a crash.
  std::vector<uint8_t> bad = blob;
  Put64(bad, 16 + 56, ptx.size() + 100);
  auto c2 = ParseContainer(bad);
  ASSERT_TRUE(c2.ok());
  EXPECT_EQ(ExtractPtx(c2->entries[0]).status().code(), StatusCode::kInvalidArgument);
}

TEST(RuntimeFatbinSynthetic, ZstdEntryAndCorruption) {
  std::string ptx = kPtx;
  std::vector<uint8_t> compressed(ZSTD_compressBound(ptx.size()));
  size_t n = ZSTD_compress(compressed.data(), compressed.size(), ptx.data(), ptx.size(), 3);
  ASSERT_FALSE(ZSTD_isError(n));
  compressed.resize(n);
  const EntrySpec s = CompressedPtx(kFlagCompressedZstd, compressed, ptx.size());
  std::vector<uint8_t> blob = BuildContainer({s});
  auto c = ParseContainer(blob);
  ASSERT_TRUE(c.ok());
  auto text = ExtractPtx(c->entries[0]);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, ptx);

  // Flip bytes inside the frame: an error, never a crash.
  for (size_t i = 0; i < n; ++i) {
    std::vector<uint8_t> bad = blob;
    bad[16 + 80 + i] ^= 0x5a;
    auto cb = ParseContainer(bad);
    ASSERT_TRUE(cb.ok());
    (void)ExtractPtx(cb->entries[0]);
  }
  // The header's size disagrees with the frame's.
  std::vector<uint8_t> bad = blob;
  Put64(bad, 16 + 56, ptx.size() + 1);
  EXPECT_EQ(ExtractPtx(ParseContainer(bad)->entries[0]).status().code(),
            StatusCode::kInvalidArgument);
  // A compressed size past the payload.
  bad = blob;
  Put32(bad, 16 + 16, uint32_t(n + 4096));
  EXPECT_EQ(ExtractPtx(ParseContainer(bad)->entries[0]).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(RuntimeFatbinSynthetic, LimitsAreEnforced) {
  std::string big(4096, ' ');
  EntrySpec s;
  s.payload = Bytes(big);
  std::vector<uint8_t> blob = BuildContainer({s, s, s});
  FatbinLimits limits;
  limits.max_entries = 2;
  EXPECT_EQ(ParseContainer(blob, limits).status().code(), StatusCode::kResourceExhausted);
  limits = {};
  limits.max_container_bytes = 1024;
  EXPECT_EQ(ParseContainer(blob, limits).status().code(), StatusCode::kResourceExhausted);
  limits = {};
  limits.max_uncompressed_bytes = 100;
  auto c = ParseContainer(blob, limits);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(ExtractPtx(c->entries[0], limits).status().code(), StatusCode::kResourceExhausted);

  // A compressed entry claiming a huge size is refused before any allocation.
  EntrySpec z;
  z.flags = 0x11 | kFlagCompressedZstd;
  z.payload = {0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0};
  z.compressed_bytes = 8;
  z.uncompressed_bytes = 1ull << 40;
  std::vector<uint8_t> zb = BuildContainer({z});
  auto zc = ParseContainer(zb);
  ASSERT_TRUE(zc.ok());
  EXPECT_FALSE(ExtractPtx(zc->entries[0]).ok());
}

TEST(RuntimeFatbinSynthetic, MalformedHeaders) {
  EntrySpec s;
  s.payload = Bytes(kPtx);
  std::vector<uint8_t> good = BuildContainer({s});
  ASSERT_TRUE(ParseContainer(good).ok());

  auto expect_invalid = [](std::vector<uint8_t> b, const char* what) {
    EXPECT_EQ(ParseContainer(b).status().code(), StatusCode::kInvalidArgument) << what;
  };
  std::vector<uint8_t> b = good;
  Put16(b, 16, 7);
  expect_invalid(b, "unknown kind");
  b = good;
  Put32(b, 16 + 4, 12);
  expect_invalid(b, "header smaller than 64");
  b = good;
  Put32(b, 16 + 4, 0xfffffff8);
  expect_invalid(b, "header larger than the container");
  b = good;
  Put64(b, 16 + 8, ~0ull);
  expect_invalid(b, "payload past the end");
  b = good;
  Put16(b, 6, 3);
  expect_invalid(b, "container header size not a multiple of 8");
  b = good;
  Put16(b, 4, 2);
  EXPECT_EQ(ParseContainer(b).status().code(), StatusCode::kUnimplemented);
  b = good;
  b.resize(b.size() - 8);
  expect_invalid(b, "truncated");
  // An ELF entry is no PTX.
  EntrySpec elf;
  elf.kind = EntryKind::kElf;
  elf.header_bytes = 64;
  elf.payload = {0x7f, 'E', 'L', 'F'};
  auto c = ParseContainer(BuildContainer({elf}));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(SelectPtx(*c, 75), nullptr);
  EXPECT_EQ(ExtractPtx(c->entries[0]).status().code(), StatusCode::kInvalidArgument);
}

TEST(RuntimeFatbinSynthetic, SelectsTheBestArch) {
  EntrySpec a, b, c;
  a.arch = 52;
  b.arch = 75;
  c.arch = 90;
  a.payload = b.payload = c.payload = Bytes(kPtx);
  auto cont = ParseContainer(BuildContainer({c, a, b}));
  ASSERT_TRUE(cont.ok());
  EXPECT_EQ(SelectPtx(*cont, 75)->arch, 75u);
  EXPECT_EQ(SelectPtx(*cont, 80)->arch, 75u);
  EXPECT_EQ(SelectPtx(*cont, 60)->arch, 52u);
  EXPECT_EQ(SelectPtx(*cont, 30)->arch, 52u);  // nothing at or below: the lowest above
  EXPECT_EQ(SelectPtx(*cont, 95)->arch, 90u);
}

TEST(RuntimeFatbinSynthetic, SeveralContainersWithPadding) {
  EntrySpec a, b;
  a.arch = 52;
  b.arch = 75;
  a.payload = b.payload = Bytes(kPtx);
  std::vector<uint8_t> one = BuildContainer({a});
  std::vector<uint8_t> two = BuildContainer({b});
  std::vector<uint8_t> section = one;
  section.insert(section.end(), 8, 0);
  section.insert(section.end(), two.begin(), two.end());
  auto all = ParseContainers(section);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(all->size(), 2u);
  EXPECT_EQ(SelectPtx(*all, 75)->arch, 75u);
  EXPECT_FALSE(ParseContainers(std::vector<uint8_t>(64, 0)).ok());
}

}  // namespace
}  // namespace gpuvm::runtime::fatbin
