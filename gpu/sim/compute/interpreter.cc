// Picks the interpreter variant for this CPU.
#include "gpu/sim/compute/exec_state.h"

namespace gpuvm::sim::compute {
namespace generic {
WarpStop RunWarp(ExecContext& ctx, Warp& w, int64_t* budget);
}
#if defined(GPUVM_COMPUTE_HAVE_AVX2)
namespace avx2 {
WarpStop RunWarp(ExecContext& ctx, Warp& w, int64_t* budget);
}
#endif

RunWarpFn SelectRunWarp(InterpreterVariant variant, const char** name) {
#if defined(GPUVM_COMPUTE_HAVE_AVX2)
  static const bool cpu_has_avx2 =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt");
  if (variant != InterpreterVariant::kGeneric && cpu_has_avx2) {
    if (name) *name = "avx2";
    return &avx2::RunWarp;
  }
#else
  (void)variant;
#endif
  if (name) *name = "generic";
  return &generic::RunWarp;
}

}  // namespace gpuvm::sim::compute
