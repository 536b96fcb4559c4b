#include "gpu/isa/module.h"

#include <gtest/gtest.h>

#include <random>

#include "gpu/isa/assembler.h"

namespace gpuvm::isa {
namespace {

Module Sample() {
  Module m;
  Result<std::vector<uint8_t>> k1 = Assemble(".params 16\nld.const.c0.u64 r0, [rz+8]\nexit");
  Result<std::vector<uint8_t>> k2 = Assemble("exit");
  EXPECT_TRUE(k1.ok() && k2.ok());
  m.kernels.push_back({"first", *k1, {{0, 8, 8}, {8, 8, 8}}});
  m.kernels.push_back({"_Z6secondv", *k2, {}});
  m.globals.push_back({"table", 64, 16, {1, 2, 3}, {}});
  m.globals.push_back({"ptrs", 16, 8, {}, {{0, 8, 0, 4}, {8, 4, 1, 0}}});
  m.const_image = {9, 8, 7, 6};
  return m;
}

TEST(IsaModule, RoundTrip) {
  Module m = Sample();
  Result<std::vector<uint8_t>> bytes = EncodeModule(m);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  Result<Module> back = DecodeModule(*bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->kernels.size(), 2u);
  EXPECT_EQ(back->kernels[1].name, "_Z6secondv");
  EXPECT_EQ(back->kernels[0].image, m.kernels[0].image);
  ASSERT_EQ(back->kernels[0].params.size(), 2u);
  EXPECT_EQ(back->kernels[0].params[1].offset, 8u);
  EXPECT_EQ(back->globals[0].init, (std::vector<uint8_t>{1, 2, 3}));
  ASSERT_EQ(back->globals[1].relocations.size(), 2u);
  EXPECT_EQ(back->globals[1].relocations[0].addend, 4);
  EXPECT_EQ(back->globals[1].relocations[1].size, 4u);
  EXPECT_EQ(back->const_image, m.const_image);
  EXPECT_NE(back->FindKernel("first"), nullptr);
  EXPECT_EQ(back->FindKernel("third"), nullptr);
}

TEST(IsaModule, RejectsBadContents) {
  Module m = Sample();
  m.kernels[0].image[0] ^= 1;  // kernel magic
  EXPECT_FALSE(EncodeModule(m).ok());
  m = Sample();
  m.globals[1].relocations[0].target = 7;
  EXPECT_FALSE(EncodeModule(m).ok());
  m = Sample();
  m.globals[0].align = 3;
  EXPECT_FALSE(EncodeModule(m).ok());
}

TEST(IsaModule, CorruptImagesFailCleanly) {
  Result<std::vector<uint8_t>> bytes = EncodeModule(Sample());
  ASSERT_TRUE(bytes.ok());
  std::mt19937 rng(5);
  int ok = 0;
  for (int i = 0; i < 3000; ++i) {
    std::vector<uint8_t> b = *bytes;
    int flips = 1 + rng() % 4;
    for (int f = 0; f < flips; ++f) b[rng() % b.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
    if (rng() % 10 == 0) b.resize(rng() % b.size());
    if (DecodeModule(b).ok()) ++ok;
  }
  EXPECT_LT(ok, 3000);  // most corruptions are caught; none crashes (ASan checks the rest)
}

}  // namespace
}  // namespace gpuvm::isa
