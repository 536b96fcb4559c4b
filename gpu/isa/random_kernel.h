// Test support: random kernels that pass validation (for round-trip tests of the encoder,
// disassembler and assembler). Header-only; not linked into production code.
//
// Threading: uses only the caller's generator.
#ifndef GPUVM_GPU_ISA_RANDOM_KERNEL_H_
#define GPUVM_GPU_ISA_RANDOM_KERNEL_H_

#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gpu/isa/encoding.h"
#include "gpu/isa/opcode_table.h"

namespace gpuvm::isa {

// An instruction with random fields drawn from small plausible sets, retried until it validates
// against `header`. Branch targets are drawn below `code_size`.
inline Instruction RandomValidInstruction(std::mt19937_64& rng, const KernelHeader& header,
                                          uint32_t code_size) {
  // Every opcode of the table (opcodes.def), so a new one is round-tripped without a change here.
  const std::span<const OpcodeInfo> ops = AllOpcodes();
  auto small = [&](int n) { return static_cast<uint8_t>(rng() % n); };
  auto reg = [&]() -> uint8_t {
    return rng() % 8 == 0 ? kRegZero : small(header.reg_count ? header.reg_count : 1);
  };
  for (;;) {
    Instruction inst;
    inst.op = ops[rng() % ops.size()].op;
    inst.type = static_cast<Type>(small(kTypeCount));
    inst.d = reg();
    inst.a = reg();
    inst.b = reg();
    inst.c = reg();
    switch (rng() % 4) {
      case 0:
        inst.mod = 0;
        break;
      case 1:
        inst.mod = small(16);
        break;
      default:
        inst.mod = static_cast<uint8_t>(rng());
        break;
    }
    inst.type2 = rng() % 2 ? 0 : small(16);
    if (rng() % 3 == 0) {
      inst.guard = small(header.pred_count ? header.pred_count : 1);
      inst.guard_negated = rng() % 2;
    }
    inst.has_imm = rng() % 3 == 0;
    switch (rng() % 4) {
      case 0:
        inst.imm = rng();
        break;
      case 1:
        inst.imm = rng() & 0xffffffffu;
        break;
      case 2:
        inst.imm = static_cast<uint64_t>(-static_cast<int64_t>(rng() % 100));
        break;
      default:
        inst.imm = rng() % 64;
        break;
    }
    // Fields whose roles often need zero: zero them half of the time.
    if (rng() % 2) inst.c = 0;
    if (rng() % 2) inst.b = 0;
    if (rng() % 2) inst.d = small(header.pred_count ? header.pred_count : 1);
    if (rng() % 2) inst.a = small(kSpecialRegCount);
    if (inst.op == Opcode::kBra || inst.op == Opcode::kExit || inst.op == Opcode::kTrap ||
        inst.op == Opcode::kNop || inst.op == Opcode::kBar || inst.op == Opcode::kMembar ||
        inst.op == Opcode::kPlop || inst.op == Opcode::kPrmt || inst.op == Opcode::kShf ||
        inst.op == Opcode::kShfl || inst.op == Opcode::kVote) {
      if (rng() % 2) inst.type = Type::kU8;
      if (inst.op != Opcode::kPlop && inst.op != Opcode::kShf && inst.op != Opcode::kPrmt &&
          inst.op != Opcode::kShfl && inst.op != Opcode::kVote) {
        inst.d = inst.a = inst.b = inst.c = 0;
      }
      inst.type2 = 0;
    }
    if (inst.op == Opcode::kShfl) {
      inst.has_imm = true;
      inst.imm =
          (uint64_t{kPredTrue} << 48) | (rng() % 2 ? ((rng() % 32) | ((rng() % 32) << 32)) : 0);
      inst.mod =
          small(4) | (inst.imm & 0xffffffffu ? kShflBImm : 0) | (inst.imm >> 32 ? kShflCImm : 0);
      if (inst.mod & kShflBImm) inst.b = 0;
      if (inst.mod & kShflCImm) inst.c = 0;
    }
    if (!inst.has_imm) inst.imm = 0;
    if (inst.op == Opcode::kBra || inst.op == Opcode::kCall) {
      inst.has_imm = true;
      inst.imm = 0;
      inst.mod = 0;
      inst.a = inst.b = inst.c = 0;
      inst.type2 = 0;
      if (rng() % 2) inst.type = Type::kU8;
      if (inst.op == Opcode::kBra) inst.d = 0;
      inst.target = static_cast<uint32_t>(rng() % code_size);
    }
    if (inst.op == Opcode::kRet) {
      inst.has_imm = false;
      inst.imm = 0;
      inst.d = inst.b = inst.c = inst.mod = inst.type2 = 0;
      if (rng() % 2) inst.type = Type::kU8;
    }
    if (ValidateInstruction(inst, header).ok()) return inst;
  }
}

inline Kernel RandomValidKernel(std::mt19937_64& rng, int length) {
  Kernel k;
  k.header.reg_count = 24;
  k.header.pred_count = 6;
  k.header.shared_bytes = rng() % 4096;
  k.header.local_bytes = rng() % 256;
  k.header.param_bytes = rng() % 64;
  for (int i = 0; i < length - 1; ++i) {
    k.code.push_back(RandomValidInstruction(rng, k.header, static_cast<uint32_t>(length)));
  }
  Instruction exit;
  exit.op = Opcode::kExit;
  k.code.push_back(exit);
  return k;
}

// A random valid kernel of `length` instructions, its encoding, and that decoded again: where the
// round-trip tests start. `error` says which step refused (empty when both worked).
struct EncodedRandomKernel {
  Kernel kernel;
  std::vector<uint8_t> bytes;
  Kernel decoded;
  std::string error;
};
inline EncodedRandomKernel EncodeRandomKernel(std::mt19937_64& rng, int length) {
  EncodedRandomKernel e;
  e.kernel = RandomValidKernel(rng, length);
  Result<std::vector<uint8_t>> bytes = EncodeKernel(e.kernel);
  if (!bytes.ok()) {
    e.error = "encode: " + bytes.status().ToString();
    return e;
  }
  e.bytes = std::move(*bytes);
  Result<Kernel> decoded = DecodeKernel(e.bytes);
  if (!decoded.ok()) {
    e.error = "decode: " + decoded.status().ToString();
    return e;
  }
  e.decoded = std::move(*decoded);
  return e;
}

}  // namespace gpuvm::isa

#endif  // GPUVM_GPU_ISA_RANDOM_KERNEL_H_
