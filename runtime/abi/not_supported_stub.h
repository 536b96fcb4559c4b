// The exported stub of each function a not-supported list (runtime/abi/*_not_supported.def) names,
// shared by libcuda.so.1 and libcudart.so.13: it says once on stderr that the function is not
// supported and returns its library's answer. The includer defines
// `int NotSupported(const char* name, std::atomic<bool>* said)` (SayNotSupportedOnce, then its
// library's error), includes this header and then its .def list, and #undefs GPUVM_NOT_SUPPORTED.
//
// Threading: any thread; each function's "said it" flag is an atomic.
#ifndef GPUVM_RUNTIME_ABI_NOT_SUPPORTED_STUB_H_
#define GPUVM_RUNTIME_ABI_NOT_SUPPORTED_STUB_H_

#include <atomic>
#include <cstdio>

namespace gpuvm::runtime {

// "gpuvm: NAME is not supported (ERROR)" on stderr, the first time `said` comes here.
inline void SayNotSupportedOnce(const char* name, const char* error, std::atomic<bool>* said) {
  if (!said->exchange(true, std::memory_order_relaxed)) {
    std::fprintf(stderr, "gpuvm: %s is not supported (%s)\n", name, error);
  }
}

}  // namespace gpuvm::runtime

#define GPUVM_NOT_SUPPORTED(name)                                \
  extern "C" __attribute__((visibility("default"))) int name() { \
    static std::atomic<bool> said{false};                        \
    return NotSupported(#name, &said);                           \
  }

#endif  // GPUVM_RUNTIME_ABI_NOT_SUPPORTED_STUB_H_
