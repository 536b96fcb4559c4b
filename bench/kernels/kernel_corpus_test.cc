#include "bench/kernels/kernel_corpus.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <set>

#include "bench/kernels/reference.h"
#include "ptx/parser.h"

namespace gpuvm::kernels {
namespace {

TEST(KernelCorpusTest, EveryPtxFileIsEmbeddedAndParses) {
  ASSERT_GE(PtxFiles().size(), 20u);
  for (const std::string& file : PtxFiles()) {
    std::string_view text = PtxSource(file);
    ASSERT_FALSE(text.empty()) << file;
    auto module = ptx::ParseModule(text);
    EXPECT_TRUE(module.ok()) << file << ": " << module.status().ToString();
  }
  EXPECT_TRUE(PtxSource("no_such.ptx").empty());
}

TEST(KernelCorpusTest, UnknownCaseIsNotFound) {
  auto c = MakeCase("no_such_kernel");
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
}

// Every launch names an entry of its module and passes arguments that fit its .param list, so a
// harness that lays the arguments out by Arg::Size/Align matches what the kernel reads.
TEST(KernelCorpusTest, LaunchesMatchTheirKernelsParameters) {
  std::set<std::string> covered_files;
  for (const std::string& name : CaseNames()) {
    auto c = MakeCase(name);
    ASSERT_TRUE(c.ok()) << name << ": " << c.status().ToString();
    covered_files.insert(c->ptx_file);
    auto module = ptx::ParseModule(c->ptx);
    ASSERT_TRUE(module.ok()) << name;
    ASSERT_FALSE(c->launches.empty()) << name;
    EXPECT_GT(c->threads, 0u) << name;
    for (const Launch& launch : c->launches) {
      const int index = module->FindFunction(launch.kernel);
      ASSERT_GE(index, 0) << name << ": no kernel " << launch.kernel;
      const ptx::Function& f = module->functions[index];
      ASSERT_TRUE(f.is_entry) << launch.kernel;
      ASSERT_EQ(launch.args.size(), f.params.size()) << launch.kernel;
      for (size_t i = 0; i < f.params.size(); ++i) {
        EXPECT_EQ(launch.args[i].Size(), f.params[i].SizeBytes()) << launch.kernel << " arg " << i;
        EXPECT_EQ(launch.args[i].Align(), f.params[i].Alignment()) << launch.kernel << " arg " << i;
        if (launch.args[i].kind != Arg::Kind::kValue) {
          EXPECT_LT(launch.args[i].buffer, c->buffers.size()) << launch.kernel << " arg " << i;
        }
      }
      for (int d = 0; d < 3; ++d) {
        EXPECT_GT(launch.grid[d], 0u);
        EXPECT_GT(launch.block[d], 0u);
      }
      EXPECT_LE(launch.block[0] * launch.block[1] * launch.block[2], 1024u);
      // A kernel with an extern shared array gets dynamic shared memory, and only then.
      bool uses_dynamic = false;
      for (const ptx::Variable& g : module->globals) {
        uses_dynamic = uses_dynamic || (g.space == ptx::StateSpace::kShared && g.unsized);
      }
      if (launch.dynamic_shared > 0) {
        EXPECT_TRUE(uses_dynamic) << launch.kernel;
      }
    }
  }
  // Every committed module is used by at least one case.
  for (const std::string& file : PtxFiles()) EXPECT_TRUE(covered_files.contains(file)) << file;
}

TEST(KernelCorpusTest, ExpectedContentsVerify) {
  for (const std::string& name : CaseNames()) {
    auto c = MakeCase(name);
    ASSERT_TRUE(c.ok()) << name;
    // A run that produced exactly the expected contents passes. (Custom checks get the initial
    // contents, which they must reject: the kernel has not run.)
    std::vector<std::vector<uint8_t>> contents;
    bool has_custom = false;
    for (const Buffer& b : c->buffers) {
      ASSERT_FALSE(b.initial.empty()) << name << " " << b.name;
      if (b.check == Check::kCustom) {
        has_custom = true;
        contents.push_back(b.initial);
        EXPECT_FALSE(b.custom(b.initial).empty()) << name << " " << b.name;
      } else if (b.check == Check::kNone) {
        contents.push_back(b.initial);
      } else {
        ASSERT_EQ(b.expected.size(), b.initial.size()) << name << " " << b.name;
        contents.push_back(b.expected);
      }
    }
    if (!has_custom) {
      EXPECT_TRUE(c->Verify(contents).ok()) << name;
    }
  }
}

TEST(KernelCorpusTest, VerifyNamesTheWrongElement) {
  auto c = MakeCase("vector_add");
  ASSERT_TRUE(c.ok());
  std::vector<std::vector<uint8_t>> contents;
  for (const Buffer& b : c->buffers) {
    contents.push_back(b.check == Check::kNone ? b.initial : b.expected);
  }
  ASSERT_TRUE(c->Verify(contents).ok());
  // One ulp off in element 7 of c (exact tolerance).
  float v;
  std::memcpy(&v, contents[2].data() + 7 * 4, 4);
  v = std::nextafter(v, INFINITY);
  std::memcpy(contents[2].data() + 7 * 4, &v, 4);
  Status s = c->Verify(contents);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("vector_add: buffer 'c' element 7"), std::string::npos) << s.message();
  contents.pop_back();
  EXPECT_EQ(c->Verify(contents).code(), StatusCode::kInvalidArgument);
}

TEST(KernelCorpusTest, ToleranceAppliesPerColumn) {
  auto c = MakeCase("f64_math");
  ASSERT_TRUE(c.ok());
  std::vector<std::vector<uint8_t>> contents;
  for (const Buffer& b : c->buffers)
    contents.push_back(b.check == Check::kNone ? b.initial : b.expected);
  std::vector<uint8_t>& out = contents.back();
  auto nudge = [&](size_t index, double rel) {
    double v;
    std::memcpy(&v, out.data() + index * 8, 8);
    v *= 1 + rel;
    std::memcpy(out.data() + index * 8, &v, 8);
  };
  nudge(10, 1e-15);  // exp column: within 1e-14
  EXPECT_TRUE(c->Verify(contents).ok());
  nudge(12 + 1, 1e-15);  // a*b column: exact
  EXPECT_FALSE(c->Verify(contents).ok());
}

TEST(KernelCorpusTest, CasesAreDeterministicPerSeed) {
  auto a = MakeCase("fmmul", Size::kTest, 7);
  auto b = MakeCase("fmmul", Size::kTest, 7);
  auto d = MakeCase("fmmul", Size::kTest, 8);
  ASSERT_TRUE(a.ok() && b.ok() && d.ok());
  EXPECT_EQ(a->buffers[0].initial, b->buffers[0].initial);
  EXPECT_NE(a->buffers[0].initial, d->buffers[0].initial);
}

// The references, checked against values worked out by hand.
TEST(ReferenceTest, SmallMatrixProducts) {
  const int32_t a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
  int32_t c[4];
  ref::Mmul(a, b, c, 2);
  EXPECT_EQ(c[0], 19);
  EXPECT_EQ(c[1], 22);
  EXPECT_EQ(c[2], 43);
  EXPECT_EQ(c[3], 50);
  const float fa[4] = {1, 2, 3, 4}, fb[4] = {0.5f, 0, 0, 2};
  float fc[4];
  ref::Fmmul(fa, fb, fc, 2);
  EXPECT_EQ(fc[0], 0.5f);
  EXPECT_EQ(fc[3], 8.0f);
}

TEST(ReferenceTest, AtomicWrapSemantics) {
  EXPECT_EQ(ref::AtomicIncRepeat(0, 3, 4), 0u);  // 1 2 3 0
  EXPECT_EQ(ref::AtomicIncRepeat(0, 3, 5), 1u);
  EXPECT_EQ(ref::AtomicDecRepeat(0, 3, 1), 3u);  // 0 -> wrap
  EXPECT_EQ(ref::AtomicDecRepeat(0, 3, 4), 0u);  // 3 2 1 0
  EXPECT_EQ(ref::AtomicDecRepeat(9, 3, 1), 3u);  // above the limit -> wrap
}

TEST(ReferenceTest, RoundingHelpers) {
  const double third = 1.0 / 3.0;
  const float rn = ref::RoundDoubleToFloat(third, 0);
  ASSERT_EQ(std::bit_cast<uint32_t>(rn), 0x3eaaaaabu);  // nearest is above 1/3
  EXPECT_EQ(ref::RoundDoubleToFloat(third, 2), std::nextafter(rn, 0.0f));
  EXPECT_EQ(ref::RoundDoubleToFloat(third, 3), rn);
  EXPECT_EQ(ref::RoundDoubleToFloat(third, 1), std::nextafter(rn, 0.0f));
  EXPECT_EQ(ref::RoundDoubleToFloat(-third, 1), -std::nextafter(rn, 0.0f));
  EXPECT_EQ(ref::RoundDoubleToFloat(-third, 2), -rn);
  EXPECT_EQ(ref::RoundDoubleToFloat(16777217.0, 0), 16777216.0f);  // tie to even
  EXPECT_EQ(ref::RoundDoubleToFloat(16777217.0, 3), 16777218.0f);
  EXPECT_EQ(ref::FloatToHalfRn(1.0f), 0x3c00);
  EXPECT_EQ(ref::FloatToHalfRn(-2.0f), 0xc000);
  EXPECT_EQ(ref::FloatToHalfRn(65504.0f), 0x7bff);
  EXPECT_EQ(ref::FloatToHalfRn(1e6f), 0x7c00);
  EXPECT_EQ(ref::FloatToHalfRn(1.0f + 1.0f / 2048), 0x3c00);     // tie to even
  EXPECT_EQ(ref::FloatToHalfRn(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(ref::HalfToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(ref::HalfToFloat(0x0001), std::ldexp(1.0f, -24));
}

TEST(ReferenceTest, BitopsKnownValues) {
  const uint32_t a[1] = {0x000000f0u}, b[1] = {0x00000004u};
  uint32_t o[30];
  ref::Bitops(a, b, o, 1);
  EXPECT_EQ(o[0], 4u);           // popc
  EXPECT_EQ(o[1], 24u);          // clz
  EXPECT_EQ(o[2], 0x0f000000u);  // brev
  EXPECT_EQ(o[3], 5u);           // ffs
  EXPECT_EQ(o[5], 0x00000040u);  // funnel left by 4 of hi:lo = 4:0xf0 -> upper word 0x40
  EXPECT_EQ(o[7], 0u);           // umulhi
  EXPECT_EQ(o[10], 0xf0u - 4 + 7);
  EXPECT_EQ(o[13], 0xfu);    // 0xf0 >> 4
  EXPECT_EQ(o[24], 0x0fu);   // bfe.u32 a, 4, 8
  EXPECT_EQ(o[25], 0xfu);    // bfe.s32 a, 4, 12 (bit 15 clear)
  EXPECT_EQ(o[26], 0x4f0u);  // bfi: b's low 12 bits at 8
  EXPECT_EQ(o[28], 0x3c0u);  // mul24
  EXPECT_EQ(o[29], 1u);      // a's bits are a finite float
}

TEST(ReferenceTest, WarpShuffleSegments) {
  std::vector<int32_t> in(32), out(4 * 32);
  for (int i = 0; i < 32; ++i) in[i] = 100 + i;
  ref::WarpShuffle(in.data(), out.data(), 32);
  EXPECT_EQ(out[4 * 0 + 0], 100);  // up 3: lanes 0-2 keep their own
  EXPECT_EQ(out[4 * 5 + 0], 102);
  EXPECT_EQ(out[4 * 1 + 1], 104);  // xor 5
  EXPECT_EQ(out[4 * 6 + 3], 107);  // down 1 in segments of 8
  EXPECT_EQ(out[4 * 7 + 3], 107);  // last lane of a segment keeps its own
}

}  // namespace
}  // namespace gpuvm::kernels
