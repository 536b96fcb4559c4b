// Every PTX file nvcc produced for the kernel corpus (bench/kernels/*.ptx) parses, prints back to
// PTX that parses to the same module, and contains what the corpus is meant to exercise.
#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ptx/instruction_set.h"
#include "ptx/parser.h"
#include "ptx/printer.h"

namespace gpuvm::ptx {
namespace {

std::vector<std::string> PtxFilesIn(const char* path) {
  std::vector<std::string> files;
  if (DIR* dir = opendir(path)) {
    while (dirent* e = readdir(dir)) {
      std::string name = e->d_name;
      if (name.size() > 4 && name.ends_with(".ptx")) files.push_back(name);
    }
    closedir(dir);
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::string> CorpusFiles() { return PtxFilesIn(GPUVM_KERNELS_DIR); }

std::string Read(const std::string& name, const char* dir = GPUVM_KERNELS_DIR) {
  std::ifstream in(std::string(dir) + "/" + name, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(PtxCorpusTest, EveryFileParsesAndRoundTrips) {
  const std::vector<std::string> files = CorpusFiles();
  ASSERT_GE(files.size(), 20u) << GPUVM_KERNELS_DIR;
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    const std::string text = Read(file);
    auto module = ParseModule(text);
    ASSERT_TRUE(module.ok()) << module.status().ToString();
    EXPECT_EQ(module->target, "sm_75");
    EXPECT_EQ(module->version_major, 9u);
    const std::string printed = PrintModule(*module);
    auto again = ParseModule(printed);
    ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << printed;
    EXPECT_EQ(PrintModule(*again), printed);
    ASSERT_EQ(again->functions.size(), module->functions.size());
    for (size_t i = 0; i < module->functions.size(); ++i) {
      const Function& a = module->functions[i];
      const Function& b = again->functions[i];
      EXPECT_EQ(a.name, b.name);
      ASSERT_EQ(a.body.size(), b.body.size()) << a.name;
      for (size_t k = 0; k < a.body.size(); ++k) {
        EXPECT_EQ(InstructionMnemonic(a.body[k]), InstructionMnemonic(b.body[k]));
        EXPECT_EQ(a.body[k].operands.size(), b.body[k].operands.size());
      }
    }
  }
}

// The fuzz seeds include modules built with -lineinfo and -G (.loc with inlined_at, .file, DWARF
// .section blocks): they parse too.
TEST(PtxCorpusTest, DebugBuildsParse) {
  const std::vector<std::string> files = PtxFilesIn(GPUVM_PTX_SEEDS_DIR);
  ASSERT_TRUE(std::find(files.begin(), files.end(), "calls_debug.ptx") != files.end());
  ASSERT_TRUE(std::find(files.begin(), files.end(), "calls_lineinfo.ptx") != files.end());
  for (const std::string& file : files) {
    auto module = ParseModule(Read(file, GPUVM_PTX_SEEDS_DIR));
    EXPECT_TRUE(module.ok()) << file << ": " << module.status().ToString();
  }
}

// The corpus is there to cover the instruction set: check that what the issue lists really occurs.
TEST(PtxCorpusTest, CorpusCoversTheListedInstructions) {
  std::set<std::string> mnemonics;
  std::set<Opcode> opcodes;
  std::set<SpecialRegister> sregs;
  std::set<StateSpace> local_spaces;
  bool has_call = false, has_extern_shared = false, has_guard = false, has_pair = false;
  for (const std::string& file : CorpusFiles()) {
    auto module = ParseModule(Read(file));
    ASSERT_TRUE(module.ok()) << file;
    for (const Variable& g : module->globals) has_extern_shared |= g.unsized;
    for (const Function& f : module->functions) {
      for (const Variable& v : f.locals) local_spaces.insert(v.space);
      for (const Instruction& inst : f.body) {
        mnemonics.insert(InstructionMnemonic(inst));
        opcodes.insert(inst.opcode);
        has_call |= inst.opcode == Opcode::kCall;
        has_guard |= inst.guard.present();
        for (const Operand& op : inst.operands) {
          if (op.kind == OperandKind::kSpecial) sregs.insert(op.sreg);
          has_pair |= op.kind == OperandKind::kRegisterPair;
        }
      }
    }
  }
  for (Opcode op :
       {Opcode::kAdd,      Opcode::kSub,        Opcode::kMul,  Opcode::kMad,    Opcode::kDiv,
        Opcode::kRem,      Opcode::kAbs,        Opcode::kNeg,  Opcode::kMin,    Opcode::kMax,
        Opcode::kFma,      Opcode::kRcp,        Opcode::kSqrt, Opcode::kRsqrt,  Opcode::kEx2,
        Opcode::kLg2,      Opcode::kSin,        Opcode::kCos,  Opcode::kPopc,   Opcode::kClz,
        Opcode::kBfind,    Opcode::kBrev,       Opcode::kBfe,  Opcode::kBfi,    Opcode::kPrmt,
        Opcode::kLop3,     Opcode::kShf,        Opcode::kShl,  Opcode::kShr,    Opcode::kAnd,
        Opcode::kOr,       Opcode::kXor,        Opcode::kNot,  Opcode::kSetp,   Opcode::kSelp,
        Opcode::kMov,      Opcode::kCvt,        Opcode::kCvta, Opcode::kLd,     Opcode::kSt,
        Opcode::kAtom,     Opcode::kRed,        Opcode::kBar,  Opcode::kMembar, Opcode::kShfl,
        Opcode::kVote,     Opcode::kActivemask, Opcode::kBra,  Opcode::kCall,   Opcode::kRet,
        Opcode::kCopysign, Opcode::kTestp,      Opcode::kAddc, Opcode::kMul24,  Opcode::kSad,
        Opcode::kDp4a,     Opcode::kNanosleep}) {
    EXPECT_TRUE(opcodes.contains(op)) << OpcodeName(op);
  }
  for (const char* m : {"atom.global.add.u32",
                        "atom.global.min.s32",
                        "atom.global.max.s32",
                        "atom.global.inc.u32",
                        "atom.global.dec.u32",
                        "atom.global.cas.b32",
                        "atom.global.exch.b32",
                        "atom.global.and.b32",
                        "atom.global.or.b32",
                        "atom.global.xor.b32",
                        "atom.shared.add.u32",
                        "atom.shared.min.s32",
                        "atom.shared.max.s32",
                        "atom.shared.inc.u32",
                        "atom.shared.dec.u32",
                        "atom.shared.cas.b32",
                        "atom.shared.exch.b32",
                        "atom.shared.and.b32",
                        "atom.shared.or.b32",
                        "atom.shared.xor.b32",
                        "atom.global.add.f32",
                        "atom.global.add.f64",
                        "atom.global.cas.b64",
                        "red.global.add.u32",
                        "red.shared.xor.b32",
                        "cvt.rni.s32.f32",
                        "cvt.rzi.s32.f32",
                        "cvt.rmi.s32.f32",
                        "cvt.rpi.s32.f32",
                        "cvt.rn.f32.s32",
                        "cvt.rz.f32.s32",
                        "cvt.rm.f32.s32",
                        "cvt.rp.f32.s32",
                        "cvt.rn.f32.f64",
                        "cvt.f64.f32",
                        "cvt.sat.f32.f32",
                        "cvt.rn.f16.f32",
                        "cvt.f32.f16",
                        "mul.wide.s32",
                        "mul.hi.u32",
                        "add.cc.s64",
                        "bar.sync",
                        "bar.warp.sync",
                        "bar.red.popc.u32",
                        "ld.global.nc.f32",
                        "ld.local.u32",
                        "st.local.u32",
                        "ld.shared.f32",
                        "st.shared.u32",
                        "shfl.sync.down.b32",
                        "shfl.sync.up.b32",
                        "shfl.sync.bfly.b32",
                        "shfl.sync.idx.b32",
                        "vote.sync.ballot.b32",
                        "vote.sync.all.pred",
                        "vote.sync.any.pred",
                        "div.rn.f64",
                        "sqrt.rn.f64",
                        "fma.rn.f64"}) {
    EXPECT_TRUE(mnemonics.contains(m)) << m;
  }
  for (SpecialRegister s :
       {SpecialRegister::kTid, SpecialRegister::kNtid, SpecialRegister::kCtaid,
        SpecialRegister::kNctaid, SpecialRegister::kLaneid, SpecialRegister::kWarpid,
        SpecialRegister::kClock, SpecialRegister::kClock64}) {
    EXPECT_TRUE(sregs.contains(s)) << SpecialRegisterName(s);
  }
  EXPECT_TRUE(local_spaces.contains(StateSpace::kLocal));
  EXPECT_TRUE(local_spaces.contains(StateSpace::kShared));
  EXPECT_TRUE(local_spaces.contains(StateSpace::kParam));
  EXPECT_TRUE(has_call);
  EXPECT_TRUE(has_extern_shared);
  EXPECT_TRUE(has_guard);
  EXPECT_TRUE(has_pair);
}

}  // namespace
}  // namespace gpuvm::ptx
