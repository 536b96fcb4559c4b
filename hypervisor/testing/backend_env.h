// One test body, every backend (CONTRIBUTING.md, "Tests"): what a typed GoogleTest suite needs
// from a hypervisor backend, and the two implementations.
//
// LocalBackend::Open() builds a whole local world in-process: a local hypervisor daemon on a
// private abstract socket, and guest domain 1 (2 vCPUs, 16 MiB) registered with it. It always
// works. XenBackend::Open() needs dom0 of a running Xen; elsewhere it returns Unavailable and the
// suites GTEST_SKIP. On Xen, the event-channel, store and grant tests loop back within dom0; tests
// that need a guest domain read its id from $GPUVM_XEN_TEST_DOMID (the Xen test bed sets it) and
// skip without it; tests that need to play the guest's own accesses (CreateGuest) skip on Xen,
// where a real guest makes them (the test bed runs its guest-side program).
//
// Threading: a BackendEnv belongs to the test thread; the objects it opens follow their own rules.
#ifndef GPUVM_HYPERVISOR_TESTING_BACKEND_ENV_H_
#define GPUVM_HYPERVISOR_TESTING_BACKEND_ENV_H_

#include <gtest/gtest.h>

#include <memory>
#include <span>

#include "hypervisor/event_channels.h"
#include "hypervisor/grants.h"
#include "hypervisor/guest_io.h"
#include "hypervisor/guest_memory.h"
#include "hypervisor/ioreq_server.h"
#include "hypervisor/store.h"

namespace gpuvm::hv::testing {

class BackendEnv {
 public:
  virtual ~BackendEnv() = default;

  // The guest domain the IOREQ server and guest-memory tests use.
  virtual DomainId guest_domid() const = 0;
  // The two domains the event-channel and grant tests connect (a granter shares with a mapper).
  virtual DomainId peer_domid() const = 0;
  virtual DomainId backend_domid() const { return kControlDomain; }

  virtual Result<std::unique_ptr<IoreqServer>> CreateIoreqServer() = 0;
  virtual Result<std::unique_ptr<GuestMemory>> OpenGuestMemory() = 0;
  // The guest's own side of the guest domain (the port's GuestIo: its accesses, interrupt lines).
  virtual Result<std::unique_ptr<GuestIo>> CreateGuest() = 0;
  // The guest's own view of its RAM (valid while the env lives; empty where CreateGuest fails).
  virtual std::span<uint8_t> guest_ram() = 0;
  virtual Result<std::unique_ptr<EventChannels>> OpenEventChannels(DomainId as) = 0;
  virtual Result<std::unique_ptr<Store>> OpenStore(DomainId as) = 0;
  // Shares from peer_domid() ...
  virtual Result<std::unique_ptr<GrantSharer>> OpenGrantSharer() = 0;
  // ... to backend_domid().
  virtual Result<std::unique_ptr<GrantMapper>> OpenGrantMapper() = 0;
  // A store directory this test run may scribble in, writable by backend_domid().
  virtual std::string scratch_store_path() const = 0;
};

struct LocalBackend {
  static constexpr const char* kName = "local";
  static Result<std::unique_ptr<BackendEnv>> Open();
};

struct XenBackend {
  static constexpr const char* kName = "xen";
  static Result<std::unique_ptr<BackendEnv>> Open();
};

// The fixture of a typed suite over the backends: SetUp opens env_, or skips the test where the
// backend is not available.
template <typename Backend>
class BackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto env = Backend::Open();
    if (!env.ok()) GTEST_SKIP() << Backend::kName << " backend: " << env.status().ToString();
    env_ = std::move(*env);
  }

  std::unique_ptr<BackendEnv> env_;
};

// For TYPED_TEST_SUITE: names instantiations "local" and "xen".
struct BackendName {
  template <typename T>
  static std::string GetName(int) {
    return T::kName;
  }
};

}  // namespace gpuvm::hv::testing

// Inside a test: assigns from a Result, or skips the test when the backend says Unavailable /
// Unimplemented (not possible here), or fails it on any other error.
#define GPUVM_ASSIGN_OR_SKIP(lhs, expr) \
  GPUVM_ASSIGN_OR_SKIP_IMPL_(GPUVM_CONCAT_(gpuvm_skip_, __LINE__), lhs, expr)
#define GPUVM_ASSIGN_OR_SKIP_IMPL_(tmp, lhs, expr)                    \
  auto tmp = (expr);                                                  \
  if (!tmp.ok()) {                                                    \
    if (tmp.status().code() == ::gpuvm::StatusCode::kUnavailable ||   \
        tmp.status().code() == ::gpuvm::StatusCode::kUnimplemented) { \
      GTEST_SKIP() << tmp.status().ToString();                        \
    }                                                                 \
    FAIL() << #expr << ": " << tmp.status().ToString();               \
  }                                                                   \
  lhs = std::move(tmp).value()

#endif  // GPUVM_HYPERVISOR_TESTING_BACKEND_ENV_H_
