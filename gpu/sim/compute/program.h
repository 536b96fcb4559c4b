// The compute engine's internal form of a validated GVISA kernel: one fixed-size `Op` per
// instruction, specialised by opcode and type into a flat handler number, with every operand turned
// into a row index of the warp's register file. Immediates become "constant rows" (the value
// broadcast to 32 lanes, copied into each warp's register file when its block starts), so handlers
// only ever read rows and the hot loops are the same for register and immediate operands.
//
// A warp's register file (rows of 32 lanes x 4 bytes = 128 bytes; a 64-bit value spans two rows):
//   [0, reg_rows)            the kernel's registers r0..r(reg_count-1)
//   zero_row (2 rows)        RZ as a source: always zero
//   sink_row (2 rows)        RZ as a destination: written, never read
//   scratch_row (2 rows)     immediates beyond the constant-row budget are broadcast here on use
//   [const_begin, total)     constant rows
//
// Threading: a Program is immutable once built and shared (shared_ptr<const Program>) between the
// code cache, jobs and worker threads.
#ifndef GPUVM_GPU_SIM_COMPUTE_PROGRAM_H_
#define GPUVM_GPU_SIM_COMPUTE_PROGRAM_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "gpu/isa/encoding.h"

namespace gpuvm::sim::compute {

inline constexpr int kLanes = 32;
inline constexpr uint32_t kFullMask = 0xffffffffu;
inline constexpr uint32_t kRowBytes = kLanes * 4;
// Distinct immediates that get their own constant row; further ones use the scratch row (slower).
inline constexpr uint32_t kMaxConstRows = 256;

// clang-format off
#define GPUVM_COMPUTE_HANDLERS(X)                                                                         \
  X(Nop) X(Mov32) X(Mov64) X(Sel32) X(Sel64) X(S2R) X(Pack) X(Hi32)                                       \
  X(AddI32) X(AddI64) X(AddF32) X(AddF64) X(AddSatS32) X(SubI32) X(SubI64) X(SubF32) X(SubF64)            \
  X(SubSatS32) X(MulI32) X(MulI64) X(MulF32) X(MulF64) X(MulHiU32) X(MulHiS32) X(MulHiU64) X(MulHiS64)    \
  X(MulWideU32) X(MulWideS32) X(MadI32) X(MadI64) X(FmaF32) X(FmaF64) X(MadWideU32) X(MadWideS32)         \
  X(DivU32) X(DivS32) X(DivU64) X(DivS64) X(DivF32) X(DivF64) X(RemU32) X(RemS32) X(RemU64) X(RemS64)     \
  X(MinU32) X(MinS32) X(MinU64) X(MinS64) X(MinF32) X(MinF64)                                             \
  X(MaxU32) X(MaxS32) X(MaxU64) X(MaxS64) X(MaxF32) X(MaxF64)                                             \
  X(AbsS32) X(AbsS64) X(AbsF32) X(AbsF64) X(NegS32) X(NegS64) X(NegF32) X(NegF64)                         \
  X(And32) X(And64) X(Or32) X(Or64) X(Xor32) X(Xor64) X(Not32) X(Not64)                                   \
  X(Shl32) X(Shl64) X(ShrU32) X(ShrS32) X(ShrU64) X(ShrS64)                                               \
  X(Popc32) X(Popc64) X(Clz32) X(Clz64) X(Brev32) X(Brev64)                                               \
  X(BfeU32) X(BfeS32) X(BfeU64) X(BfeS64) X(Bfi32) X(Bfi64) X(Prmt) X(Shf)                                \
  X(SqrtF32) X(SqrtF64) X(RsqrtF32) X(RsqrtF64) X(RcpF32) X(RcpF64) X(Ex2F32) X(Ex2F64)                   \
  X(Lg2F32) X(Lg2F64) X(SinF32) X(SinF64) X(CosF32) X(CosF64) X(TanhF32) X(TanhF64)                       \
  X(CopysignF32) X(CopysignF64) X(TestpF32) X(TestpF64) X(FloatSlow)                                      \
  X(SetpU32) X(SetpS32) X(SetpU64) X(SetpS64) X(SetpF32) X(SetpF64) X(Plop)                               \
  X(CvtU64U32) X(CvtS64S32) X(CvtU32U64) X(CvtF32S32) X(CvtF32U32) X(CvtS32F32) X(CvtF64F32)              \
  X(CvtF32F64) X(CvtF64S32) X(Cvt)                                                                        \
  X(LdGlobal) X(LdShared) X(LdLocal) X(LdConst) X(LdGeneric)                                              \
  X(StGlobal) X(StShared) X(StLocal) X(StGeneric)                                                         \
  X(Atom) X(Vprintf) X(Membar) X(Shfl) X(Vote) X(ImmScratch)                                              \
  /* control handlers (from Bar on) run even when no lane executes */                                    \
  X(Bar) X(Bra) X(Exit) X(Trap) X(Call) X(Ret)
// clang-format on

enum class Handler : uint16_t {
#define GPUVM_HANDLER_ENUM(name) k##name,
  GPUVM_COMPUTE_HANDLERS(GPUVM_HANDLER_ENUM)
#undef GPUVM_HANDLER_ENUM
      kCount
};

// How a load/store moves data between memory (MemT) and a register row (32- or 64-bit).
enum class AccessKind : uint8_t {
  kU8R32,
  kS8R32,
  kU16R32,
  kS16R32,
  kB32R32,
  kU8R64,
  kS8R64,
  kU16R64,
  kS16R64,
  kU32R64,
  kS32R64,
  kB64R64,
  kPair128,  // isa::kModPair: two u64 (d and b loaded, b and c stored), atomic per lane
};

// Bits of Op::aux for memory handlers.
inline constexpr uint32_t kAuxKindMask = 0x0f;  // AccessKind
inline constexpr uint32_t kAuxAddr64 = 0x10;    // address operand is 64-bit
inline constexpr int kAuxBankShift = 8;         // constant bank (kLdConst), 4 bits
inline constexpr int kAuxAtomOpShift = 8;       // isa::AtomOp (kAtom), 4 bits
inline constexpr int kAuxAtomTypeShift = 12;    // isa::Type (kAtom), 4 bits
inline constexpr int kAuxAtomSpaceShift = 16;   // isa::Space (kAtom), 3 bits

// Op::flags
inline constexpr uint8_t kOpScratch64 = 0x01;  // kImmScratch: the immediate is 64-bit

struct Op {
  Handler h = Handler::kNop;
  uint8_t guard = isa::kPredTrue;  // predicate index; preds[kPredTrue] is all ones
  uint8_t flags = 0;
  uint32_t guard_xor = 0;               // ~0 when the guard is negated
  uint16_t d = 0, a = 0, b = 0, c = 0;  // rows (predicate indices for predicate operands)
  uint32_t aux =
      0;  // handler-specific: compare, target pc, access kind, packed opcode/types/modifier
  Handler h2 = Handler::kNop;  // kImmScratch: the handler to run once the scratch row is filled
  uint16_t pad = 0;
  uint64_t imm = 0;  // memory offset; kImmScratch: the immediate; kShfl: predicate destination
};
static_assert(sizeof(Op) == 32);

struct Program {
  isa::KernelHeader header;
  std::vector<Op> ops;
  std::vector<isa::Instruction> source;  // for fault messages and disassembly
  std::vector<int32_t> op_of_word;  // word offset -> op index (-1 inside an instruction); for ret
  uint32_t reg_rows = 0;
  uint32_t zero_row = 0;
  uint32_t sink_row = 0;
  uint32_t scratch_row = 0;
  uint32_t const_begin = 0;
  uint32_t total_rows = 0;
  // Initial bytes of rows [zero_row, total_rows) (zero, sink, scratch, constants).
  std::vector<uint8_t> init_rows;
  uint16_t const_banks_used = 0;  // bit per bank read by ld.const
  bool reads_shared_window = false;
  bool reads_local_window = false;
  bool uses_barriers = false;

  size_t RegisterFileBytes() const { return size_t{total_rows} * kRowBytes; }
};

// Lowers a validated kernel. Fails only on limits of the engine (none today beyond validation),
// never on anything DecodeKernel accepted... except the ones it names.
Result<std::shared_ptr<const Program>> LowerKernel(const isa::Kernel& kernel);

const char* HandlerName(Handler h);

}  // namespace gpuvm::sim::compute

#endif  // GPUVM_GPU_SIM_COMPUTE_PROGRAM_H_
