// gpuvm-local-hvd: the local hypervisor daemon as a program (hv_daemon.h). One per local run; VM
// launchers, device models and the aggregator find it at --socket (default: DefaultHvSocketPath()).
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

#include "hypervisor/local/hv_daemon.h"

namespace {
gpuvm::hv::local::LocalHvDaemon* g_daemon = nullptr;
void OnSignal(int) {
  if (g_daemon != nullptr) g_daemon->Stop();  // writes an eventfd: async-signal-safe
}
}  // namespace

int main(int argc, char** argv) {
  std::string path = gpuvm::hv::local::DefaultHvSocketPath();
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--socket") == 0 && i + 1 < argc) {
      path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--socket PATH|@ABSTRACT]\n", argv[0]);
      return 2;
    }
  }
  auto daemon = gpuvm::hv::local::LocalHvDaemon::Create(path);
  if (!daemon.ok()) {
    std::fprintf(stderr, "gpuvm-local-hvd: %s\n", daemon.status().ToString().c_str());
    return 1;
  }
  g_daemon = daemon->get();
  (*daemon)->set_log(
      [](const std::string& line) { std::fprintf(stderr, "gpuvm-local-hvd: %s\n", line.c_str()); });
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::fprintf(stderr, "gpuvm-local-hvd: serving %s\n", path.c_str());
  const gpuvm::Status served = (*daemon)->Run();
  g_daemon = nullptr;
  if (!served.ok()) {
    std::fprintf(stderr, "gpuvm-local-hvd: %s\n", served.ToString().c_str());
    return 1;
  }
  return 0;
}
