// gpuvm-vm: runs a program inside a local VM whose virtual GPU is served by gpuvm-aggregator
// (launcher.h; docs/AGGREGATOR.md).
//
//   gpuvm-aggregator &                                  # owns the GPU
//   gpuvm-vm --mode pt -- ./my_cuda_program args...     # LD_LIBRARY_PATH=<build>/runtime/lib
//
// Exit status: the program's (128 + signal if a signal ended it); 1 when the VM could not start
// or its device model died; 2 for a bad command line.
#include <cstdio>
#include <string>
#include <vector>

#include "tools/gpuvm-vm/launcher.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(gpuvm::vm::Usage().c_str(), stdout);
    return 0;
  }
  auto options = gpuvm::vm::ParseArgs(args);
  if (!options.ok()) {
    std::fprintf(stderr, "gpuvm-vm: %s\n%s", options.status().message().c_str(),
                 gpuvm::vm::Usage().c_str());
    return 2;
  }
  auto result = gpuvm::vm::RunVm(*options);
  if (!result.ok()) {
    std::fprintf(stderr, "gpuvm-vm: %s\n", result.status().ToString().c_str());
    return 1;
  }
  return *result;
}
