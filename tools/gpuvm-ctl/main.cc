// gpuvm-ctl: the operator's command line for a running gpuvm-aggregator (tools/gpuvm-ctl/ctl.h,
// docs/CONTROL.md).
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "tools/gpuvm-ctl/ctl.h"

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  std::vector<std::string> args(argv + 1, argv + argc);
  gpuvm::Result<gpuvm::ctl::Invocation> inv = gpuvm::ctl::ParseCommandLine(args);
  if (!inv.ok()) {
    if (inv.status().message() != "help") {
      std::fprintf(stderr, "gpuvm-ctl: %s\n", inv.status().message().c_str());
    }
    std::fputs(gpuvm::ctl::kUsage, stderr);
    return 2;
  }
  return gpuvm::ctl::Run(*inv);
}
