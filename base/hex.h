// Numbers in messages: the project's one hexadecimal form ("0x1f": lowercase, no padding), for
// addresses, registers and frames in errors and logs.
//
// Header-only, so that every layer (the software GPU, the ISA, the hypervisor port, the guest
// driver, the runtime) can use it without a link dependency. Threading: a pure function.
#ifndef GPUVM_BASE_HEX_H_
#define GPUVM_BASE_HEX_H_

#include <cstdint>
#include <cstdio>
#include <string>

namespace gpuvm {

inline std::string Hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace gpuvm

#endif  // GPUVM_BASE_HEX_H_
