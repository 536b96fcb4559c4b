// Shared by the guest programs of the multi-process tests (fv_orphan_guest.cc,
// fv_vram_scan_guest.cc), which the test and the guest coordinate through files in a directory:
// waiting for a file, creating one, failing loudly; opening the local VM they run in by hand, with
// its control page (which the port's guest side does not show) mapped read-only; and bringing the
// unmodified guest driver up with a context.
//
// Threading: any thread (Fail ends the process).
#ifndef GPUVM_TESTS_GUEST_PROGRAM_H_
#define GPUVM_TESTS_GUEST_PROGRAM_H_

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "base/os.h"
#include "guest-pv-driver/driver.h"
#include "guest-pv-driver/local_trap_bus.h"
#include "hypervisor/backend.h"
#include "hypervisor/local/domain.h"
#include "hypervisor/local/guest_io.h"

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

// The local VM this program runs in (gpuvm-vm hands it a domain over $GPUVM_LOCAL_VM_FD), opened
// the way LocalVmGuest::FromEnvironment does, plus the local backend's control page (the ranges
// the IOREQ server published), which these guests read to see what was mapped into them.
struct LocalVmWithControlPage {
  std::unique_ptr<hv::local::LocalDomain> domain;
  std::shared_ptr<guest::LocalVmGuest> vm;
  os::SharedMapping control;  // read-only
  const hv::local::LocalControlPage* page() const {
    return reinterpret_cast<const hv::local::LocalControlPage*>(control.data());
  }
};
inline LocalVmWithControlPage OpenLocalVmWithControlPage() {
  const char* fd = std::getenv(hv::kLocalVmFdVariable);
  if (fd == nullptr) Fail("not inside gpuvm-vm");
  auto domain = hv::local::LocalDomain::RequestFrom(std::atoi(fd));
  if (!domain.ok()) Fail("domain: " + domain.status().ToString());
  auto io = hv::local::LocalGuestIo::Create(**domain);
  if (!io.ok()) Fail("guest io: " + io.status().ToString());
  (*io)->set_note(
      [](const std::string& line) { std::fprintf(stderr, "gpuvm: %s\n", line.c_str()); });
  auto vm = guest::LocalVmGuest::Create(std::move(*io));
  if (!vm.ok()) Fail("vm: " + vm.status().ToString());
  auto control = os::SharedMapping::Map(
      (*domain)->ioreq_fd(), hv::local::kControlPage * hv::kPageSize, hv::kPageSize, false);
  if (!control.ok()) Fail("control page: " + control.status().ToString());
  return {std::move(*domain), std::move(*vm), std::move(*control)};
}

// The unmodified guest driver up on `bus`, one context and its default channel (Fail otherwise).
struct GuestGpu {
  std::unique_ptr<guest::Driver> driver;
  std::unique_ptr<guest::Context> ctx;
  guest::Channel* ch = nullptr;
};
inline GuestGpu BringUp(guest::Bus* bus) {
  GuestGpu g;
  auto driver = guest::Driver::Create(bus);
  if (!driver.ok()) Fail("driver: " + driver.status().ToString());
  g.driver = std::move(*driver);
  auto ctx = g.driver->CreateContext();
  if (!ctx.ok()) Fail("context: " + ctx.status().ToString());
  g.ctx = std::move(*ctx);
  g.ch = g.ctx->default_channel();
  return g;
}
// `bytes` of the context's VRAM (Fail otherwise): their GPU virtual address.
inline uint64_t AllocDevice(GuestGpu& g, uint64_t bytes) {
  auto buffer = g.ctx->AllocDevice(bytes);
  if (!buffer.ok()) Fail("alloc: " + buffer.status().ToString());
  return buffer->va;
}

}  // namespace gpuvm::guest_program

#endif  // GPUVM_TESTS_GUEST_PROGRAM_H_
