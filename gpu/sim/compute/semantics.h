// Per-value semantics of the GVISA operations that are too rare or too irregular for the vectorised
// fast handlers: conversions with every rounding mode, float arithmetic with directed rounding or
// saturation, and atomics. Compiled once (with -frounding-math so fesetround is honoured) and
// called per lane by both interpreter variants.
//
// Values travel as raw bits: 32-bit types in the low half of a uint64_t (8/16-bit integers extended
// to 32 bits by their signedness, the engine's canonical register form), 64-bit types in all of it.
//
// Threading: pure functions; atomics are atomic with respect to every other thread.
#ifndef GPUVM_GPU_SIM_COMPUTE_SEMANTICS_H_
#define GPUVM_GPU_SIM_COMPUTE_SEMANTICS_H_

#include <cstdint>

#include "gpu/isa/isa.h"

namespace gpuvm::sim::compute {

// CVT: `packed` = dst type | src type << 4 | mod << 8 (Op::aux of the cvt handlers).
uint64_t ConvertValue(uint32_t packed, uint64_t src_bits);

// Float add/sub/mul/fma/div/sqrt/rcp with any rounding and optional saturation. `packed` = opcode |
// type << 8 | mod << 16 (Op::aux of kFloatSlow).
uint64_t FloatSlowOp(uint32_t packed, uint64_t a, uint64_t b, uint64_t c);

// An atomic read-modify-write of the naturally aligned value at `p` (host memory that other threads
// may touch concurrently). Returns the old value (bits, canonical form).
uint64_t AtomicRmw(uint8_t* p, isa::AtomOp op, isa::Type type, uint64_t b, uint64_t c);

}  // namespace gpuvm::sim::compute

#endif  // GPUVM_GPU_SIM_COMPUTE_SEMANTICS_H_
