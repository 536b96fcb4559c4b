// The interpreter built for baseline x86-64 (or whatever the target's baseline is).
#define GPUVM_INTERP_NS generic
#include "gpu/sim/compute/interpreter_impl.h"
