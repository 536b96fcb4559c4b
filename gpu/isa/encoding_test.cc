#include "gpu/isa/encoding.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "gpu/isa/disassembler.h"
#include "gpu/isa/random_kernel.h"

namespace gpuvm::isa {
namespace {

KernelHeader Header(uint16_t regs = 16, uint8_t preds = 4) {
  KernelHeader h;
  h.reg_count = regs;
  h.pred_count = preds;
  return h;
}

Instruction Exit() {
  Instruction i;
  i.op = Opcode::kExit;
  return i;
}

Instruction Alu(Opcode op, Type t, uint8_t d, uint8_t a, uint8_t b) {
  Instruction i;
  i.op = op;
  i.type = t;
  i.d = d;
  i.a = a;
  i.b = b;
  return i;
}

std::vector<uint8_t> MustEncode(const Kernel& k) {
  Result<std::vector<uint8_t>> r = EncodeKernel(k);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<uint8_t>{};
}

TEST(IsaEncoding, HeaderRoundTrip) {
  KernelHeader h = Header(33, 7);
  h.code_words = 12;
  h.shared_bytes = 4096;
  h.local_bytes = 64;
  h.param_bytes = 24;
  h.max_threads = 256;
  uint8_t bytes[kKernelHeaderBytes];
  WriteHeader(h, bytes);
  KernelHeader back = ReadHeader(bytes);
  EXPECT_EQ(memcmp(&h, &back, sizeof h), 0);
  Result<KernelHeader> decoded = DecodeKernelHeader(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->reg_count, 33);
}

TEST(IsaEncoding, SimpleKernelRoundTrip) {
  Kernel k{Header(), {Alu(Opcode::kAdd, Type::kU32, 1, 2, 3), Exit()}};
  k.code[0].has_imm = false;
  Instruction imm = Alu(Opcode::kAdd, Type::kF32, 4, 5, 0);
  imm.has_imm = true;
  imm.imm = 0x3f800000;
  k.code.insert(k.code.begin() + 1, imm);
  std::vector<uint8_t> bytes = MustEncode(k);
  EXPECT_EQ(bytes.size(), kKernelHeaderBytes + 4 * 8);  // 1 + 2 + 1 words
  Result<Kernel> back = DecodeKernel(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->code.size(), 3u);
  EXPECT_EQ(back->code[0], k.code[0]);
  EXPECT_EQ(back->code[1], k.code[1]);
  EXPECT_EQ(back->header.code_words, 4u);
}

TEST(IsaEncoding, BranchTargetsAreWordOffsets) {
  Instruction mov = Alu(Opcode::kMov, Type::kU64, 0, 0, 0);
  mov.has_imm = true;
  mov.imm = 0x123456789ull;
  Instruction bra;
  bra.op = Opcode::kBra;
  bra.target = 2;
  bra.guard = 0;
  Kernel k{Header(), {mov, bra, Exit()}};
  std::vector<uint8_t> bytes = MustEncode(k);
  Result<Kernel> back = DecodeKernel(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->code[1].target, 2u);
  EXPECT_EQ(back->code[1].imm, 4u);  // mov (2 words) + bra (2 words)
}

TEST(IsaEncoding, RejectsBadHeaders) {
  Kernel k{Header(), {Exit()}};
  std::vector<uint8_t> good = MustEncode(k);
  ASSERT_TRUE(DecodeKernel(good).ok());

  auto corrupt = [&](size_t offset, uint8_t value) {
    std::vector<uint8_t> b = good;
    b[offset] = value;
    return DecodeKernel(b).status();
  };
  EXPECT_EQ(corrupt(0, 'X').code(), StatusCode::kInvalidArgument);      // magic
  EXPECT_EQ(corrupt(4, 2).code(), StatusCode::kInvalidArgument);        // version
  EXPECT_EQ(corrupt(6, 32).code(), StatusCode::kInvalidArgument);       // header size
  EXPECT_EQ(corrupt(8, 2).code(), StatusCode::kInvalidArgument);        // code words vs image size
  EXPECT_EQ(corrupt(0x0c, 0).code(), StatusCode::kOk);                  // no registers used: fine
  EXPECT_EQ(corrupt(0x0f, 1).code(), StatusCode::kInvalidArgument);     // flags
  EXPECT_EQ(corrupt(0x30, 1).code(), StatusCode::kInvalidArgument);     // reserved
  EXPECT_EQ(corrupt(0x13, 0xff).code(), StatusCode::kInvalidArgument);  // shared size huge

  std::vector<uint8_t> trailing = good;
  trailing.push_back(0);
  EXPECT_FALSE(DecodeKernel(trailing).ok());
  EXPECT_FALSE(DecodeKernel(std::span<const uint8_t>(good.data(), 10)).ok());
}

TEST(IsaEncoding, RejectsOutOfRangeOperands) {
  KernelHeader h = Header(8, 2);
  EXPECT_TRUE(ValidateInstruction(Alu(Opcode::kAdd, Type::kU32, 7, 0, kRegZero), h).ok());
  EXPECT_FALSE(ValidateInstruction(Alu(Opcode::kAdd, Type::kU32, 8, 0, 0), h).ok());
  // A 64-bit register needs two rows: r7 would straddle the end.
  EXPECT_TRUE(ValidateInstruction(Alu(Opcode::kAdd, Type::kU64, 6, 0, 2), h).ok());
  EXPECT_FALSE(ValidateInstruction(Alu(Opcode::kAdd, Type::kU64, 7, 0, 2), h).ok());
  Instruction setp = Alu(Opcode::kSetp, Type::kS32, 2, 0, 1);
  EXPECT_FALSE(ValidateInstruction(setp, h).ok());  // p2 with 2 predicates
  setp.d = kPredTrue;
  EXPECT_FALSE(ValidateInstruction(setp, h).ok());  // PT is not a destination
  setp.d = 1;
  EXPECT_TRUE(ValidateInstruction(setp, h).ok());
  setp.guard = 5;
  EXPECT_FALSE(ValidateInstruction(setp, h).ok());
  setp.guard = kPredTrue;
  setp.guard_negated = true;
  EXPECT_FALSE(ValidateInstruction(setp, h).ok());  // @!pt would never run: reject
}

TEST(IsaEncoding, RejectsJunkFields) {
  KernelHeader h = Header();
  Instruction add = Alu(Opcode::kAdd, Type::kU32, 1, 2, 3);
  add.c = 4;  // unused by add
  EXPECT_FALSE(ValidateInstruction(add, h).ok());
  add.c = 0;
  add.type2 = 1;
  EXPECT_FALSE(ValidateInstruction(add, h).ok());
  add.type2 = 0;
  add.mod = kModSat;  // .sat only for s32
  EXPECT_FALSE(ValidateInstruction(add, h).ok());
  add.type = Type::kS32;
  EXPECT_TRUE(ValidateInstruction(add, h).ok());
  add.type = Type::kU16;  // no 16-bit ALU
  EXPECT_FALSE(ValidateInstruction(add, h).ok());
  Instruction unknown;
  unknown.op = static_cast<Opcode>(0xee);
  EXPECT_FALSE(ValidateInstruction(unknown, h).ok());
  Instruction imm32 = Alu(Opcode::kMov, Type::kU32, 1, 0, 0);
  imm32.has_imm = true;
  imm32.imm = 0x100000000ull;
  EXPECT_FALSE(ValidateInstruction(imm32, h).ok());
  imm32.imm = 0xffffffff80000000ull;  // sign-extended: fine
  EXPECT_TRUE(ValidateInstruction(imm32, h).ok());
  Instruction trap;
  trap.op = Opcode::kTrap;
  EXPECT_TRUE(ValidateInstruction(trap, h).ok());
  trap.mod = uint8_t(TrapCode::kAssert);
  EXPECT_TRUE(ValidateInstruction(trap, h).ok());
  trap.mod = 2;  // no such trap code
  EXPECT_FALSE(ValidateInstruction(trap, h).ok());
}

TEST(IsaEncoding, MemoryRules) {
  KernelHeader h = Header();
  Instruction st;
  st.op = Opcode::kSt;
  st.type = Type::kU32;
  st.mod = static_cast<uint8_t>(Space::kConst);
  EXPECT_FALSE(ValidateInstruction(st, h).ok());  // constant space is read-only
  Instruction ld = st;
  ld.op = Opcode::kLd;
  ld.type2 = 16;
  EXPECT_FALSE(ValidateInstruction(ld, h).ok());  // bank 16
  ld.type2 = 3;
  EXPECT_TRUE(ValidateInstruction(ld, h).ok());
  ld.mod = static_cast<uint8_t>(Space::kGlobal) | kModAddr64;
  EXPECT_FALSE(ValidateInstruction(ld, h).ok());  // bank outside constant space
  ld.type2 = 0;
  ld.a = 15;  // 64-bit address in r15:r16 with 16 registers
  EXPECT_FALSE(ValidateInstruction(ld, h).ok());
  ld.a = 14;
  EXPECT_TRUE(ValidateInstruction(ld, h).ok());
  ld.mod |= kModWideReg;
  ld.type = Type::kU64;
  EXPECT_FALSE(ValidateInstruction(ld, h).ok());  // wide flag on a 64-bit access
  // A 16-byte pair: u64 only, global or generic, both destinations (d, b) in range.
  Instruction pair = ld;
  pair.mod = static_cast<uint8_t>(Space::kGlobal) | kModAddr64 | kModPair;
  pair.d = 2;
  pair.b = 4;
  EXPECT_TRUE(ValidateInstruction(pair, h).ok()) << ValidateInstruction(pair, h).ToString();
  EXPECT_EQ(Disassemble(pair), "ld.global.a64.pair.u64 r2, r4, [r14]");
  pair.b = 15;  // r15:r16 with 16 registers
  EXPECT_FALSE(ValidateInstruction(pair, h).ok());
  pair.b = 4;
  pair.type = Type::kU32;
  EXPECT_FALSE(ValidateInstruction(pair, h).ok());
  pair.type = Type::kU64;
  pair.mod = static_cast<uint8_t>(Space::kShared) | kModPair;
  EXPECT_FALSE(ValidateInstruction(pair, h).ok());
  Instruction pair_store = pair;
  pair_store.op = Opcode::kSt;
  pair_store.mod = static_cast<uint8_t>(Space::kGeneric) | kModAddr64 | kModPair;
  pair_store.d = 0;
  pair_store.c = 6;
  EXPECT_TRUE(ValidateInstruction(pair_store, h).ok())
      << ValidateInstruction(pair_store, h).ToString();
  EXPECT_EQ(Disassemble(pair_store), "st.generic.a64.pair.u64 [r14], r4, r6");
  pair_store.c = 15;
  EXPECT_FALSE(ValidateInstruction(pair_store, h).ok());
  Instruction atom;
  atom.op = Opcode::kAtom;
  atom.type = Type::kU32;
  atom.type2 = static_cast<uint8_t>(AtomOp::kInc);
  atom.mod = static_cast<uint8_t>(Space::kLocal);
  EXPECT_FALSE(ValidateInstruction(atom, h).ok());  // no local atomics
  atom.mod = static_cast<uint8_t>(Space::kShared);
  EXPECT_TRUE(ValidateInstruction(atom, h).ok());
  atom.type = Type::kF32;
  EXPECT_FALSE(ValidateInstruction(atom, h).ok());  // inc is u32 only
}

TEST(IsaEncoding, RejectsBadControlFlow) {
  Instruction bra;
  bra.op = Opcode::kBra;
  bra.target = 0;
  // Conditional last instruction: control could fall off the end.
  Instruction guarded_exit = Exit();
  guarded_exit.guard = 0;
  EXPECT_FALSE(EncodeKernel(Kernel{Header(), {guarded_exit}}).ok());
  EXPECT_TRUE(EncodeKernel(Kernel{Header(), {guarded_exit, bra}}).ok());
  bra.target = 9;
  EXPECT_FALSE(EncodeKernel(Kernel{Header(), {bra}}).ok());

  // A branch into the middle of a two-word instruction.
  Instruction mov = Alu(Opcode::kMov, Type::kU32, 0, 0, 0);
  mov.has_imm = true;
  bra.target = 0;
  std::vector<uint8_t> bytes = MustEncode(Kernel{Header(), {mov, bra}});
  uint64_t w;
  memcpy(&w, bytes.data() + kKernelHeaderBytes + 3 * 8, 8);  // bra's extension word
  w = 1;
  memcpy(bytes.data() + kKernelHeaderBytes + 3 * 8, &w, 8);
  Result<Kernel> r = DecodeKernel(bytes);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("branch target"), std::string::npos) << r.status().ToString();

  // An extension bit on the last word.
  std::vector<uint8_t> one = MustEncode(Kernel{Header(), {Exit()}});
  one[kKernelHeaderBytes + 5] |= 0x80;  // bit 47
  EXPECT_FALSE(DecodeKernel(one).ok());
}

// Random words: decoding either fails cleanly or gives a kernel that re-encodes to the same bytes
// (the encoding is canonical: every bit is either meaningful or required to be zero).
TEST(IsaEncoding, RandomWordsDecodeCanonically) {
  std::mt19937_64 rng(1234);
  int decoded = 0;
  for (int round = 0; round < 20000; ++round) {
    Kernel k;
    k.header = Header(static_cast<uint16_t>(rng() % 256), static_cast<uint8_t>(rng() % 64));
    int words = 1 + rng() % 6;
    std::vector<uint8_t> bytes(kKernelHeaderBytes + words * 8);
    k.header.code_words = words;
    WriteHeader(k.header, bytes.data());
    for (int i = 0; i < words; ++i) {
      uint64_t w = rng();
      // Bias towards plausible words so some of them decode.
      if (rng() % 2) w &= 0x00ff3fff0f0f0fffull;
      if (i == words - 1)
        w = (rng() % 4) ? 0x0000'3f00'0000'0051ull : w;  // often an exit at the end
      memcpy(bytes.data() + kKernelHeaderBytes + i * 8, &w, 8);
    }
    Result<Kernel> r = DecodeKernel(bytes);
    if (!r.ok()) {
      EXPECT_FALSE(r.status().message().empty());
      continue;
    }
    ++decoded;
    Result<std::vector<uint8_t>> again = EncodeKernel(*r);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(*again, bytes);
  }
  EXPECT_GT(decoded, 100);
}

TEST(IsaEncoding, RandomValidKernelsRoundTrip) {
  std::mt19937_64 rng(99);
  for (int round = 0; round < 200; ++round) {
    const EncodedRandomKernel e = EncodeRandomKernel(rng, 40);
    ASSERT_EQ(e.error, "");
    const Kernel& k = e.kernel;
    const Kernel& back = e.decoded;
    ASSERT_EQ(back.code.size(), k.code.size());
    for (size_t i = 0; i < k.code.size(); ++i) {
      Instruction expected = k.code[i];
      if (expected.op == Opcode::kBra || expected.op == Opcode::kCall) {
        expected.imm = back.code[i].imm;  // filled by the encoder
      }
      EXPECT_EQ(back.code[i], expected) << "instruction " << i;
    }
  }
}

}  // namespace
}  // namespace gpuvm::isa
