// Encoding and decoding of GVISA kernels (isa.h has the facts, docs/ISA.md the prose).
//
// `Instruction` is the structured form every tool works on. EncodeKernel turns a header and a list
// of instructions into the binary image; DecodeKernel copies nothing it has not validated: it
// checks the header, every field of every instruction against the header's register/predicate
// counts, branch targets, and that control can never run off the end of the code. A binary that
// passes DecodeKernel can be executed without further checks of its static properties (dynamic ones
// — addresses, alignment — are the engine's).
//
// Threading: pure functions over values; safe from any thread.
#ifndef GPUVM_GPU_ISA_ENCODING_H_
#define GPUVM_GPU_ISA_ENCODING_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "gpu/isa/isa.h"

namespace gpuvm::isa {

struct Instruction {
  Opcode op = Opcode::kNop;
  Type type = Type::kU8;  // 0 when the opcode has no type
  uint8_t type2 = 0;      // CVT source type, constant bank, atomic op
  uint8_t mod = 0;
  uint8_t d = 0, a = 0, b = 0, c = 0;
  uint8_t guard = kPredTrue;
  bool guard_negated = false;
  bool has_imm = false;
  uint64_t imm = 0;
  // kBra only: the target as an instruction index (EncodeKernel reads it; DecodeKernel fills it;
  // imm then holds the target's word offset).
  uint32_t target = 0;

  int words() const { return has_imm ? 2 : 1; }
  friend bool operator==(const Instruction&, const Instruction&) = default;
};

struct Kernel {
  KernelHeader header;
  std::vector<Instruction> code;
};

// Checks one instruction's static properties against the header (registers, predicates, types,
// modifiers, unused fields zero). Branch targets are checked by DecodeKernel/EncodeKernel, which
// know the layout.
Status ValidateInstruction(const Instruction& inst, const KernelHeader& header);

// Checks a header's fields on its own (magic, version, sizes, limits). Reserved bytes are checked
// by DecodeKernelHeader, which sees them.
Status ValidateHeader(const KernelHeader& header);

// Reads the 64-byte header from `bytes` (at least kKernelHeaderBytes long) and validates it.
Result<KernelHeader> DecodeKernelHeader(std::span<const uint8_t> bytes);

// Decodes and validates a whole kernel image: header plus exactly header.code_words words (extra
// trailing bytes are an error). Branch targets come back as instruction indices in
// Instruction::target.
Result<Kernel> DecodeKernel(std::span<const uint8_t> bytes);

// Encodes a kernel. header.code_words is computed; everything else is taken from `kernel.header`.
// Fails with the first invalid instruction (same rules as DecodeKernel), so an encoded kernel
// always decodes.
Result<std::vector<uint8_t>> EncodeKernel(const Kernel& kernel);

// The 64-bit words of one instruction (1 or 2), branch imm as given.
void AppendInstructionWords(const Instruction& inst, std::vector<uint64_t>* words);

// Header bytes <-> struct (no validation).
void WriteHeader(const KernelHeader& header, uint8_t out[kKernelHeaderBytes]);
KernelHeader ReadHeader(const uint8_t in[kKernelHeaderBytes]);

}  // namespace gpuvm::isa

#endif  // GPUVM_GPU_ISA_ENCODING_H_
