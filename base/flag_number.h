// A command-line flag's whole-number value, checked against its range, with one message for every
// gpuvm program ("--vcpus wants a number from 1 to 32, not '0'").
//
// Threading: a pure function.
#ifndef GPUVM_BASE_FLAG_NUMBER_H_
#define GPUVM_BASE_FLAG_NUMBER_H_

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "base/status.h"

namespace gpuvm {

// `value` as a decimal number in [min, max]; InvalidArgument naming `flag` for anything else
// (empty, trailing characters, out of range, past 64 bits).
inline Result<uint64_t> ParseFlagNumber(const std::string& flag, const std::string& value,
                                        uint64_t min, uint64_t max) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(value.c_str(), &end, 10);
  if (value.empty() || value[0] == '-' || *end != '\0' || errno != 0 || v < min || v > max) {
    return Status::InvalidArgument(flag + " wants a number from " + std::to_string(min) + " to " +
                                   std::to_string(max) + ", not '" + value + "'");
  }
  return static_cast<uint64_t>(v);
}

}  // namespace gpuvm

#endif  // GPUVM_BASE_FLAG_NUMBER_H_
