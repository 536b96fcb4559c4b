#include "gpu/isa/assembler.h"

#include <gtest/gtest.h>

#include <random>

#include "base/testing/refusals.h"
#include "gpu/isa/disassembler.h"
#include "gpu/isa/random_kernel.h"

namespace gpuvm::isa {
namespace {

TEST(IsaAssembler, ParsesFieldsAndFitsCounts) {
  Result<Kernel> k = AssembleKernel(R"(
    .shared 256
    loop:
      s2r.u32 r0, %tid.x             // comment
      ld.global.a64.f32 r3, [r4+16]
      setp.lt.u32 p2, r0, 16; add.f32 r1, r1, 1.5
    @!p2 bra loop
      atom.shared.cas.u32 r5, [r0-4], r6, r7
      cvt.rni.sat.s32.f64 r8, r10
      exit
  )");
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_EQ(k->header.reg_count, 12);  // r10 is 64-bit: rows 10 and 11
  EXPECT_EQ(k->header.pred_count, 3);
  EXPECT_EQ(k->header.shared_bytes, 256u);
  ASSERT_EQ(k->code.size(), 8u);
  const Instruction& ld = k->code[1];
  EXPECT_EQ(ld.op, Opcode::kLd);
  EXPECT_EQ(ld.mod, static_cast<uint8_t>(Space::kGlobal) | kModAddr64);
  EXPECT_EQ(ld.imm, 16u);
  EXPECT_EQ(k->code[3].imm, 0x3fc00000u);
  EXPECT_EQ(k->code[4].op, Opcode::kBra);
  EXPECT_EQ(k->code[4].target, 0u);
  EXPECT_TRUE(k->code[4].guard_negated);
  EXPECT_EQ(k->code[5].imm, static_cast<uint64_t>(-4));
  EXPECT_EQ(k->code[6].mod, static_cast<uint8_t>(Rounding::kRni) | kModSat);
  EXPECT_EQ(k->code[6].type2, static_cast<uint8_t>(Type::kF64));
}

TEST(IsaAssembler, ErrorsNameTheLine) {
  testing::ExpectRefusals(AssembleKernel, {
                                              {"exit\nfrobnicate r1\n", "line 2"},
                                              {"add.u32 r1, r2\nexit", "operands"},
                                              {"bra nowhere", "unknown label"},
                                              {"add.f32 r1, r2, 3\nexit", "immediate"},
                                              {"ld.const.u32 r1, [r2]\nexit", ".cN"},
                                              {".regs 2\nadd.u32 r1, r2, r3\nexit", "registers"},
                                              {"add.u32 r1, r2, r3", "last instruction"},
                                          });
}

TEST(IsaAssembler, DisassemblyRoundTripsRandomKernels) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 300; ++round) {
    const EncodedRandomKernel e = EncodeRandomKernel(rng, 30);
    ASSERT_EQ(e.error, "");
    std::string text = DisassembleKernel(e.decoded);
    Result<std::vector<uint8_t>> again = Assemble(text);
    ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << text;
    EXPECT_EQ(*again, e.bytes) << text;
  }
}

}  // namespace
}  // namespace gpuvm::isa
