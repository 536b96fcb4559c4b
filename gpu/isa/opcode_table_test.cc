#include "gpu/isa/opcode_table.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace gpuvm::isa {
namespace {

TEST(IsaOpcodeTable, EveryEntryIsFoundByValueAndByName) {
  std::set<std::string_view> names;
  for (const OpcodeInfo& info : AllOpcodes()) {
    ASSERT_EQ(FindOpcode(info.op), &info) << info.mnemonic;
    ASSERT_EQ(FindOpcode(info.mnemonic), &info) << info.mnemonic;
    EXPECT_EQ(OpcodeName(info.op), info.mnemonic);
    EXPECT_TRUE(names.insert(info.mnemonic).second) << "duplicate mnemonic " << info.mnemonic;
  }
  EXPECT_EQ(AllOpcodes().size(), 59u);
  int missing = 0;
  for (int v = 0; v < 256; ++v) {
    if (FindOpcode(static_cast<Opcode>(v)) == nullptr) {
      ++missing;
      EXPECT_EQ(OpcodeName(static_cast<Opcode>(v)), "op?");
    }
  }
  EXPECT_EQ(missing, 256 - 59);
  EXPECT_EQ(FindOpcode("frobnicate"), nullptr);
}

TEST(IsaOpcodeTable, OperandsTextParses) {
  OperandList l = ParseOperands("d64, a32, shift=b32|imm, p(c), r(mod)");
  ASSERT_TRUE(l.valid);
  ASSERT_EQ(l.count, 5);
  EXPECT_EQ(l.items[0].field, Field::kD);
  EXPECT_EQ(l.items[0].rows, 2);
  EXPECT_EQ(l.items[0].name, "destination");
  EXPECT_EQ(l.items[1].rows, 1);
  EXPECT_EQ(l.items[2].kind, OperandKind::kRegOrImm);
  EXPECT_EQ(l.items[2].name, "shift");
  EXPECT_EQ(l.items[3].kind, OperandKind::kPred);
  EXPECT_EQ(l.items[3].field, Field::kC);
  EXPECT_EQ(l.items[4].field, Field::kMod);
  EXPECT_EQ(ParseOperands("").count, 0);
  EXPECT_EQ(ParseOperands("target").items[0].kind, OperandKind::kTarget);
  EXPECT_FALSE(ParseOperands("e").valid);
  EXPECT_FALSE(ParseOperands("d16").valid);
  EXPECT_FALSE(ParseOperands("d, a, b, c, d, a").valid);  // more than kMaxOperands
}

// The register allocator deletes pure instructions whose result is dead and splits blocks at
// targets and kernel ends: these flags must say exactly that.
TEST(IsaOpcodeTable, FlagsTheJitReliesOn) {
  auto info = [](Opcode op) { return *FindOpcode(op); };
  for (Opcode op : {Opcode::kMov, Opcode::kAdd, Opcode::kS2R, Opcode::kCvt, Opcode::kPrmt,
                    Opcode::kBfi, Opcode::kSel}) {
    EXPECT_TRUE(info(op).IsPure()) << OpcodeName(op);
  }
  for (Opcode op :
       {Opcode::kNop, Opcode::kSetp, Opcode::kPlop, Opcode::kTestp, Opcode::kLd, Opcode::kSt,
        Opcode::kAtom, Opcode::kBar, Opcode::kMembar, Opcode::kShfl, Opcode::kVote, Opcode::kBra,
        Opcode::kCall, Opcode::kRet, Opcode::kExit, Opcode::kTrap}) {
    EXPECT_FALSE(info(op).IsPure()) << OpcodeName(op);
  }
  for (const OpcodeInfo& i : AllOpcodes()) {
    EXPECT_EQ(i.HasTarget(), i.op == Opcode::kBra || i.op == Opcode::kCall) << i.mnemonic;
    EXPECT_EQ(i.Has(kEndsKernel), i.op == Opcode::kBra || i.op == Opcode::kExit ||
                                      i.op == Opcode::kTrap || i.op == Opcode::kRet)
        << i.mnemonic;
  }
}

}  // namespace
}  // namespace gpuvm::isa
