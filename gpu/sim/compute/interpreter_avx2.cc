// The interpreter built with -mavx2 -mfma (CMakeLists.txt); only called when the CPU has both.
#define GPUVM_INTERP_NS avx2
#include "gpu/sim/compute/interpreter_impl.h"
