// Rounding a size or address up to a multiple of an alignment: the one AlignUp of the driver, the
// runtime, the translator and the test drivers. Any alignment works (not only powers of two); an
// alignment of 0 or 1 leaves the value as it is. The caller keeps v + a - 1 from overflowing.
//
// Header-only. Threading: a pure function.
#ifndef GPUVM_BASE_ALIGN_H_
#define GPUVM_BASE_ALIGN_H_

#include <cstdint>

namespace gpuvm {

constexpr uint64_t AlignUp(uint64_t v, uint64_t a) { return a <= 1 ? v : (v + a - 1) / a * a; }

}  // namespace gpuvm

#endif  // GPUVM_BASE_ALIGN_H_
