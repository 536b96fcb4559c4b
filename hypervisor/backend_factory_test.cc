// The port's factory (backend.h): names, the local Backend's three ways to a domain (created here,
// received from a launcher, attached through the daemon) and what it hands out for each, the Xen
// Backend's answers without Xen, and the guest side a program inside a local VM opens from its
// environment.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "base/os.h"
#include "hypervisor/backend.h"
#include "hypervisor/local/domain.h"
#include "hypervisor/local/hv_client.h"
#include "hypervisor/local/hv_daemon.h"

namespace gpuvm::hv {
namespace {

constexpr uint64_t kRamBytes = 16ull << 20;

TEST(BackendFactory, NamesRoundTripAndAnythingElseIsRefused) {
  for (BackendKind kind : {BackendKind::kLocal, BackendKind::kXen}) {
    auto parsed = BackendKindFromName(BackendName(kind));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, kind);
    auto backend = BackendFromName(BackendName(kind));
    ASSERT_TRUE(backend.ok());
    EXPECT_EQ((*backend)->kind(), kind);
  }
  for (const char* bad : {"", "kvm", "Local", "xen "}) {
    EXPECT_EQ(BackendKindFromName(bad).status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(BackendFromName(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

// A domain created through the Backend, its device model's server and the guest side from the same
// Backend: one trapped read answered by the server, and guest RAM the same bytes through every
// view.
TEST(LocalBackendTest, ACreatedDomainTrapsAndSharesItsRam) {
  auto backend = OpenBackend(BackendKind::kLocal);
  ASSERT_TRUE(backend->CreateDomain({.domid = 5, .ram_bytes = kRamBytes, .vcpus = 2}).ok());
  EXPECT_EQ(backend->CreateDomain({.domid = 5, .ram_bytes = kRamBytes, .vcpus = 2}).code(),
            StatusCode::kAlreadyExists);

  auto server = backend->CreateIoreqServer(5);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_EQ((*server)->vcpu_count(), 2u);
  ASSERT_TRUE((*server)->MapMmioRange(0xf0000000, 0xf0000fff).ok());
  GuestIoOptions io_options;
  io_options.timeout = std::chrono::seconds(5);
  auto guest = backend->OpenGuestIo(5, io_options);
  ASSERT_TRUE(guest.ok()) << guest.status().ToString();
  EXPECT_EQ((*guest)->domid(), 5);
  EXPECT_EQ((*guest)->vcpu_count(), 2u);
  EXPECT_EQ((*guest)->ram_bytes(), kRamBytes);
  EXPECT_TRUE((*guest)->IsMmioClaimed(0xf0000000, 4));
  EXPECT_FALSE((*guest)->IsMmioClaimed(0xf0001000, 4));

  std::thread device_model([&] {
    auto request = WaitForIoreq(**server, std::chrono::seconds(5));
    ASSERT_TRUE(request.ok() && request->has_value());
    EXPECT_EQ((*request)->addr, 0xf0000010u);
    EXPECT_EQ((*request)->vcpu, 1u);
    ASSERT_TRUE((*server)->Complete(**request, 0x1234).ok());
  });
  auto value = (*guest)->Read(1, 0xf0000010, 4);
  device_model.join();
  ASSERT_TRUE(value.ok()) << value.status().ToString();
  EXPECT_EQ(*value, 0x1234u);

  // Guest RAM: written by the device model's GuestMemory, seen by the guest's RAM file, by the
  // aggregator's whole-RAM mapping and by the descriptor a device model would pass it.
  auto memory = backend->OpenGuestMemory(5);
  ASSERT_TRUE(memory.ok());
  EXPECT_EQ((*memory)->frame_count(), kRamBytes >> kPageShift);
  const char kHello[] = "hello";
  ASSERT_TRUE((*memory)->Write(0x3000, {reinterpret_cast<const uint8_t*>(kHello), 6}).ok());
  char seen[6] = {};
  ASSERT_EQ(::pread((*guest)->ram_fd(), seen, 6, 0x3000), 6);
  EXPECT_STREQ(seen, kHello);
  uint64_t holes = 99;
  auto whole = backend->MapGuestRam(5, kRamBytes >> kPageShift, &holes);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(holes, 0u);
  EXPECT_EQ(std::memcmp((*whole)->bytes().data() + 0x3000, kHello, 6), 0);
  auto fd = backend->GuestRamFd(5);
  ASSERT_TRUE(fd.ok());
  ASSERT_EQ(::pread(*fd, seen, 6, 0x3000), 6);
  EXPECT_STREQ(seen, kHello);
  EXPECT_EQ(backend->MapGuestRam(5, (kRamBytes >> kPageShift) + 1, nullptr).status().code(),
            StatusCode::kOutOfRange);
}

TEST(LocalBackendTest, AnUnknownDomainWithNoDaemonIsAnError) {
  auto backend = OpenBackend(BackendKind::kLocal,
                             {.local_hv_path = "@gpuvm-no-such-hv-" + std::to_string(::getpid())});
  EXPECT_FALSE(backend->OpenGuestMemory(9).ok());
  EXPECT_FALSE(backend->CreateIoreqServer(9).ok());
  EXPECT_FALSE(backend->OpenGuestIo(9, {}).ok());
}

// gpuvm-dm --domain-fd: the launcher's domain arrives once; asking for another id is refused, and
// the received domain stays usable.
// A new local domain sent over a socket pair, as gpuvm-vm hands it to the programs it starts:
// `theirs` is the receiving end. domain is null (and the test failed) when any step went wrong.
struct SentDomain {
  std::unique_ptr<local::LocalDomain> domain;
  os::UniqueFd ours, theirs;
};
SentDomain SendNewDomain(DomainId domid, uint32_t vcpus) {
  SentDomain sent;
  auto domain =
      local::LocalDomain::Create({.domid = domid, .ram_bytes = kRamBytes, .vcpus = vcpus});
  int sockets[2];
  if (!domain.ok() || ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sockets) != 0) {
    ADD_FAILURE() << "no domain or no socket pair";
    return sent;
  }
  sent.ours = os::UniqueFd(sockets[0]);
  sent.theirs = os::UniqueFd(sockets[1]);
  if (Status s = (*domain)->SendTo(sent.ours.get()); !s.ok()) {
    ADD_FAILURE() << s.ToString();
    return sent;
  }
  sent.domain = std::move(*domain);
  return sent;
}

TEST(LocalBackendTest, TheLaunchersDomainIsReceivedOnceAndMustBeTheOneAskedFor) {
  const SentDomain sent = SendNewDomain(4, 1);
  ASSERT_NE(sent.domain, nullptr);
  const os::UniqueFd& theirs = sent.theirs;
  BackendOptions options;
  options.local_domain_fd = theirs.get();
  auto backend = OpenBackend(BackendKind::kLocal, options);
  EXPECT_EQ(backend->OpenGuestMemory(6).status().code(), StatusCode::kInvalidArgument);
  auto memory = backend->OpenGuestMemory(4);
  ASSERT_TRUE(memory.ok()) << memory.status().ToString();
  EXPECT_EQ((*memory)->domain(), 4);
  auto server = backend->CreateIoreqServer(4);
  EXPECT_TRUE(server.ok()) << server.status().ToString();
}

// The way gpuvm-dm finds a domain without a launcher's socket, and dom0's store, event channels and
// grants, all through the local hypervisor daemon.
TEST(LocalBackendTest, ADomainRegisteredWithTheDaemonIsAttached) {
  const std::string path = "@gpuvm-factory-test-hv-" + std::to_string(::getpid());
  auto daemon = local::LocalHvDaemon::Create(path);
  ASSERT_TRUE(daemon.ok());
  ASSERT_TRUE((*daemon)->Start().ok());
  auto domain = local::LocalDomain::Create({.domid = 3, .ram_bytes = kRamBytes, .vcpus = 1});
  ASSERT_TRUE(domain.ok());
  auto launcher = local::LocalHvClient::Connect(path, kControlDomain);
  ASSERT_TRUE(launcher.ok());
  ASSERT_TRUE(local::RegisterDomain(**launcher, **domain).ok());

  auto backend = OpenBackend(BackendKind::kLocal, {.local_hv_path = path});
  auto memory = backend->OpenGuestMemory(3);
  ASSERT_TRUE(memory.ok()) << memory.status().ToString();
  EXPECT_EQ((*memory)->frame_count(), kRamBytes >> kPageShift);
  EXPECT_FALSE(backend->OpenGuestMemory(8).ok());  // not registered

  auto store = backend->OpenStore();
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*store)->Write("/local/domain/0/factory-test", "yes").ok());
  auto read = (*store)->Read("/local/domain/0/factory-test");
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read, "yes");
  auto channels = backend->OpenEventChannels();
  ASSERT_TRUE(channels.ok()) << channels.status().ToString();
  EXPECT_TRUE((*channels)->AllocUnbound(3).ok());
  EXPECT_TRUE(backend->OpenGrantMapper().ok());
  EXPECT_EQ(backend->OpenGrantSharer().status().code(), StatusCode::kUnimplemented);
}

TEST(XenBackendTest, WithoutXenEveryCallAnswersAndNothingCrashes) {
  auto backend = OpenBackend(BackendKind::kXen);
  if (backend->OpenEventChannels().ok()) GTEST_SKIP() << "this is dom0 of a running Xen";
  EXPECT_EQ(backend->CreateDomain({}).code(), StatusCode::kUnimplemented);
  EXPECT_EQ(backend->OpenGuestIo(1, {}).status().code(), StatusCode::kUnimplemented);
  auto fd = backend->GuestRamFd(1);
  ASSERT_TRUE(fd.ok());
  EXPECT_EQ(*fd, -1);
  EXPECT_EQ(backend->OpenGuestMemory(1).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(backend->MapGuestRam(1, 16, nullptr).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(backend->CreateIoreqServer(1).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(backend->OpenStore().status().code(), StatusCode::kUnavailable);
}

// A program gpuvm-vm starts: the domain on the descriptor in $GPUVM_LOCAL_VM_FD.
TEST(GuestFromEnvironment, NeedsTheLaunchersDescriptorAndOpensItsDomain) {
  ASSERT_EQ(::unsetenv(kLocalVmFdVariable), 0);
  EXPECT_EQ(OpenGuestIoFromEnvironment().status().code(), StatusCode::kFailedPrecondition);
  for (const char* bad : {"x", "3x", "-1"}) {
    ASSERT_EQ(::setenv(kLocalVmFdVariable, bad, 1), 0);
    EXPECT_EQ(OpenGuestIoFromEnvironment().status().code(), StatusCode::kInvalidArgument) << bad;
  }

  const SentDomain sent = SendNewDomain(2, 3);
  ASSERT_NE(sent.domain, nullptr);
  const os::UniqueFd& theirs = sent.theirs;
  ASSERT_TRUE(::pwrite(sent.domain->ram_fd(), "vm", 2, 0x5000) == 2);
  ASSERT_EQ(::setenv(kLocalVmFdVariable, std::to_string(theirs.get()).c_str(), 1), 0);
  auto guest = OpenGuestIoFromEnvironment();
  ::unsetenv(kLocalVmFdVariable);
  ASSERT_TRUE(guest.ok()) << guest.status().ToString();
  EXPECT_EQ((*guest)->domid(), 2);
  EXPECT_EQ((*guest)->vcpu_count(), 3u);
  EXPECT_EQ((*guest)->ram_bytes(), kRamBytes);
  char seen[2] = {};
  ASSERT_EQ(::pread((*guest)->ram_fd(), seen, 2, 0x5000), 2);
  EXPECT_EQ(std::memcmp(seen, "vm", 2), 0);
  // Nothing claimed yet: an access reads all-ones, as on a PC, without waiting for anyone.
  auto value = (*guest)->Read(0, 0xf0000000, 4);
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, 0xffffffffu);
}

}  // namespace
}  // namespace gpuvm::hv
