// Shared by the guest programs of the multi-process tests (fv_orphan_guest.cc,
// fv_vram_scan_guest.cc), which the test and the guest coordinate through files in a directory:
// waiting for a file, creating one, failing loudly.
//
// Threading: any thread (Fail ends the process).
#ifndef GPUVM_TESTS_GUEST_PROGRAM_H_
#define GPUVM_TESTS_GUEST_PROGRAM_H_

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

namespace gpuvm::guest_program {

inline bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}
// Waits up to `timeout` for `path` to exist.
inline bool WaitFor(const std::string& path, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!Exists(path)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}
inline void Touch(const std::string& path, const std::string& text) { std::ofstream(path) << text; }
// "FAILED what" on stdout, then the process ends with 1 at once (no destructors: they could talk
// to a device model that is gone).
[[noreturn]] inline int Fail(const std::string& what) {
  std::printf("FAILED %s\n", what.c_str());
  std::fflush(stdout);
  std::_Exit(1);
}

}  // namespace gpuvm::guest_program

#endif  // GPUVM_TESTS_GUEST_PROGRAM_H_
