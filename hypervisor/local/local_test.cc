// What only the local backend has: its process model (a domain's descriptors crossing processes),
// the daemon's defences, grant lifetimes, and a guest's view of a slow or dead device model.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "hypervisor/local/domain.h"
#include "hypervisor/local/event_channels.h"
#include "hypervisor/local/grants.h"
#include "hypervisor/local/guest_io.h"
#include "hypervisor/local/guest_memory.h"
#include "hypervisor/local/hv_client.h"
#include "hypervisor/local/hv_daemon.h"
#include "hypervisor/local/ioreq_server.h"
#include "hypervisor/local/store.h"
#include "hypervisor/xen_abi/ioreq_page.h"

namespace gpuvm::hv::local {
namespace {

std::string UniqueDaemonPath() {
  static std::atomic<int> n{0};
  return "@gpuvm-local-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
}

std::unique_ptr<LocalDomain> NewDomain(DomainId id = 3, uint32_t vcpus = 1) {
  auto d = LocalDomain::Create({id, 1 << 20, vcpus});
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return std::move(*d);
}

TEST(LocalDomain, RejectsBadConfigs) {
  EXPECT_EQ(LocalDomain::Create({1, 4097, 1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(LocalDomain::Create({1, 0, 1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(LocalDomain::Create({1, 4096, 0}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(LocalDomain::Create({1, 4096, kMaxLocalVcpus + 1}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(LocalDomain, GuestRamCannotBeShrunkUnderUs) {
  auto d = NewDomain();
  EXPECT_NE(::ftruncate(d->ram_fd(), 0), 0) << "sealed memfds refuse to shrink";
  EXPECT_NE(::ftruncate(d->ioreq_fd(), 0), 0);
  EXPECT_NE(::ftruncate(d->grant_fd(), 0), 0);
}

TEST(LocalDomain, AReceiverRefusesUnsealedOrMissingDescriptors) {
  auto d = NewDomain();
  std::vector<os::UniqueFd> fds;
  for (int fd : d->fds()) fds.push_back(*os::DuplicateFd(fd));
  // Swap guest RAM for an unsealed memfd of the right size.
  os::UniqueFd unsealed(::memfd_create("unsealed", MFD_CLOEXEC));
  ASSERT_EQ(::ftruncate(unsealed.get(), 1 << 20), 0);
  fds[0] = std::move(unsealed);
  EXPECT_EQ(LocalDomain::FromWire(d->EncodeHeader(), std::move(fds)).status().code(),
            StatusCode::kPermissionDenied);

  std::vector<os::UniqueFd> too_few;
  too_few.push_back(*os::DuplicateFd(d->ram_fd()));
  EXPECT_EQ(LocalDomain::FromWire(d->EncodeHeader(), std::move(too_few)).status().code(),
            StatusCode::kDataLoss);
  std::vector<uint8_t> garbage(24, 0xab);
  EXPECT_EQ(LocalDomain::FromWire(garbage, {}).status().code(), StatusCode::kDataLoss);
}

// Forks a device-model process that receives `d` over a socket pair, claims 0xf0000000-0xf0000fff
// and answers `requests` requests (-1: until killed) with the request's address plus its vCPU;
// exit status 0 once done, 10-13 where it failed. Returns its pid after handing it the domain.
pid_t ForkDeviceModel(const LocalDomain& d, int requests) {
  int sockets[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sockets) != 0) return -1;
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(sockets[0]);
    auto received = LocalDomain::ReceiveFrom(sockets[1]);
    if (!received.ok()) ::_exit(10);
    auto server = LocalIoreqServer::Create(**received);
    if (!server.ok() || !(*server)->MapMmioRange(0xf0000000, 0xf0000fff).ok()) ::_exit(11);
    for (int served = 0; requests < 0 || served < requests;) {
      auto next = WaitForIoreq(**server, std::chrono::seconds(requests < 0 ? 60 : 5));
      if (!next.ok() || (requests >= 0 && !next->has_value())) ::_exit(12);
      if (!next->has_value()) continue;
      const IoRequest& r = **next;
      if (!(*server)->Complete(r, r.addr + r.vcpu).ok()) ::_exit(13);
      ++served;
    }
    ::_exit(0);
  }
  ::close(sockets[1]);
  if (child > 0 && !d.SendTo(sockets[0]).ok()) ADD_FAILURE() << "handing over the domain";
  ::close(sockets[0]);
  return child;
}

// The whole local process model in miniature: the VM process creates the domain and hands it to a
// device-model process, which claims a range and serves it; the VM traps into it.
TEST(LocalDomain, ADeviceModelInAnotherProcessServesTheGuest) {
  auto d = NewDomain(4, 2);
  const pid_t child = ForkDeviceModel(*d, 50);
  ASSERT_GT(child, 0);
  auto guest = LocalGuestIo::Create(*d, std::chrono::seconds(5));
  ASSERT_TRUE(guest.ok());
  for (int i = 0; i < 500 && !(*guest)->IsMmioClaimed(0xf0000000, 4); ++i) ::usleep(2000);
  ASSERT_TRUE((*guest)->IsMmioClaimed(0xf0000000, 4));
  for (uint64_t i = 0; i < 50; ++i) {
    auto value = (*guest)->Read(i % 2, 0xf0000000 + 4 * i, 4);
    ASSERT_TRUE(value.ok()) << value.status().ToString();
    EXPECT_EQ(*value, 0xf0000000 + 4 * i + i % 2);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// Sends `sig` to `pid` after `delay`, from a thread of its own (the caller joins it).
std::thread SignalAfter(pid_t pid, std::chrono::milliseconds delay, int sig) {
  return std::thread([=] {
    std::this_thread::sleep_for(delay);
    ::kill(pid, sig);
  });
}

// A domain with its ioreq server (the device model's side), the MMIO page at `mmio` mapped to it
// (none when 0), and a guest side whose accesses give up after `timeout`. guest is null (and the
// test has failed) when any part could not be made.
struct IoBed {
  std::unique_ptr<LocalDomain> d;
  std::unique_ptr<LocalIoreqServer> server;
  std::unique_ptr<LocalGuestIo> guest;
};
IoBed NewIoBed(std::chrono::milliseconds timeout, uint64_t mmio = 0) {
  IoBed bed;
  bed.d = NewDomain();
  if (bed.d == nullptr) return bed;
  auto server = LocalIoreqServer::Create(*bed.d);
  if (!server.ok()) {
    ADD_FAILURE() << server.status().ToString();
    return bed;
  }
  bed.server = std::move(*server);
  if (mmio != 0) {
    EXPECT_TRUE(bed.server->MapMmioRange(mmio, mmio + 0xfff).ok());
  }
  auto guest = LocalGuestIo::Create(*bed.d, timeout);
  if (!guest.ok()) {
    ADD_FAILURE() << guest.status().ToString();
    return bed;
  }
  bed.guest = std::move(*guest);
  return bed;
}

TEST(LocalGuestIo, ASilentDeviceModelTimesOutAndItsLateAnswerIsDiscarded) {
  auto [d, server, guest] = NewIoBed(std::chrono::milliseconds(50), 0x1000000);
  ASSERT_NE(guest, nullptr);
  EXPECT_EQ(guest->Read(0, 0x1000000, 4).status().code(), StatusCode::kDeadlineExceeded);
  // The server answers late; the guest's next access throws that answer away and gets its own.
  auto late = server->Poll();
  ASSERT_TRUE(late.ok() && late->has_value());
  std::thread server_thread([&] {
    ASSERT_TRUE(server->Complete(**late, 111).ok());
    auto next = WaitForIoreq(*server, std::chrono::seconds(5));
    ASSERT_TRUE(next.ok() && next->has_value());
    ASSERT_TRUE(server->Complete(**next, 222).ok());
  });
  auto value = guest->Read(0, 0x1000004, 4);
  server_thread.join();
  ASSERT_TRUE(value.ok()) << value.status().ToString();
  EXPECT_EQ(*value, 222u);
}

// Without a timeout a vCPU waits for its device model as long as that process lives — a stopped
// (SIGSTOP) one included, which is slow, not gone — says so once it is slow, and gets its answer
// when the device model continues.
TEST(LocalGuestIo, AStoppedDeviceModelIsWaitedForAndADeadOneEndsTheWaitAtOnce) {
  auto d = NewDomain(5, 1);
  const pid_t child = ForkDeviceModel(*d, -1);
  ASSERT_GT(child, 0);
  auto guest = LocalGuestIo::Create(*d);  // no timeout
  ASSERT_TRUE(guest.ok());
  std::vector<std::string> notes;
  std::mutex notes_mu;
  (*guest)->set_note(
      [&](const std::string& line) {
        std::lock_guard lock(notes_mu);
        notes.push_back(line);
      },
      std::chrono::milliseconds(200));
  for (int i = 0; i < 500 && !(*guest)->IsMmioClaimed(0xf0000000, 4); ++i) ::usleep(2000);
  ASSERT_TRUE((*guest)->IsMmioClaimed(0xf0000000, 4));
  ASSERT_EQ(*(*guest)->Read(0, 0xf0000010, 4), 0xf0000010u);

  // Stopped for longer than the note's 200 ms: the access waits, and is answered after the SIGCONT.
  ASSERT_EQ(::kill(child, SIGSTOP), 0);
  std::thread resume = SignalAfter(child, std::chrono::milliseconds(800), SIGCONT);
  Result<uint64_t> late = (*guest)->Read(0, 0xf0000020, 4);
  resume.join();
  ASSERT_TRUE(late.ok()) << late.status().ToString();
  EXPECT_EQ(*late, 0xf0000020u);
  {
    std::lock_guard lock(notes_mu);
    ASSERT_EQ(notes.size(), 2u);
    EXPECT_NE(notes[0].find("has not answered vCPU 0"), std::string::npos) << notes[0];
    EXPECT_NE(notes[0].find("pid " + std::to_string(child)), std::string::npos) << notes[0];
    EXPECT_NE(notes[1].find("answered vCPU 0 after"), std::string::npos) << notes[1];
  }

  // Killed while the access waits (stopped first, so the access cannot be answered before): the
  // wait ends with Unavailable, naming the device model — no timer involved.
  ASSERT_EQ(::kill(child, SIGSTOP), 0);
  std::thread killer = SignalAfter(child, std::chrono::milliseconds(200), SIGKILL);
  Result<uint64_t> dead = (*guest)->Read(0, 0xf0000030, 4);
  killer.join();
  EXPECT_EQ(dead.status().code(), StatusCode::kUnavailable) << dead.status().ToString();
  EXPECT_NE(dead.status().message().find("is gone"), std::string::npos);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
}

TEST(LocalIoreqServer, AGuestRemarkingItsSlotReadyGetsNothingTwice) {
  auto d = NewDomain();
  auto server = LocalIoreqServer::Create(*d);
  ASSERT_TRUE(server.ok());
  auto region = os::SharedMapping::Map(d->ioreq_fd(), 0, kIoreqRegionPages * kPageSize, true);
  ASSERT_TRUE(region.ok());
  xen_abi::IoreqRequesterSlots slots(region->data(), 1);
  IoRequest r;
  r.space = IoSpace::kMmio;
  r.size = 4;
  r.count = 1;
  ASSERT_TRUE(slots.Submit(0, xen_abi::ToXen(r)).ok());
  auto first = (*server)->Poll();
  ASSERT_TRUE(first.ok() && first->has_value());
  // Scribble READY back into the slot while the request is in flight.
  region->data()[xen_abi::kStateByteOffset] = STATE_IOREQ_READY;
  auto second = (*server)->Poll();
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->has_value());
  EXPECT_TRUE((*server)->Complete(**first, 0).ok());
  EXPECT_EQ((*server)->Complete(**first, 0).code(), StatusCode::kFailedPrecondition);
}

TEST(LocalIoreqServer, WhileTheServerBusyPollsGuestsSkipTheDoorbellAndNothingIsLost) {
  auto [d, server, guest] = NewIoBed(std::chrono::seconds(5), 0x1000000);
  ASSERT_NE(guest, nullptr);
  auto doorbell_rung = [&] {
    pollfd p{server->wait_fd(), POLLIN, 0};
    return ::poll(&p, 1, 0) == 1;
  };
  server->BeginBusyPoll();
  std::thread quiet([&] { EXPECT_TRUE(guest->Write(0, 0x1000000, 4, 5).ok()); });
  std::optional<IoRequest> got;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!got && std::chrono::steady_clock::now() < give_up) {
    auto r = server->Poll();
    ASSERT_TRUE(r.ok());
    got = *r;
  }
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->data, 5u);
  EXPECT_FALSE(doorbell_rung()) << "the guest saw the server polling and did not ring";
  ASSERT_TRUE(server->Complete(*got, 0).ok());
  quiet.join();
  server->EndBusyPoll();
  // Polling over: the guest rings again, and a sleeping server wakes for it.
  std::thread rung([&] { EXPECT_TRUE(guest->Write(0, 0x1000004, 4, 6).ok()); });
  auto next = WaitForIoreq(*server, std::chrono::seconds(5));
  ASSERT_TRUE(next.ok() && next->has_value());
  EXPECT_EQ((*next)->data, 6u);
  ASSERT_TRUE(server->Complete(**next, 0).ok());
  rung.join();
}

TEST(LocalIoreqServer, AScribbledControlPageOnlyConfusesTheGuestsOwnRouting) {
  auto [d, server, guest] = NewIoBed(std::chrono::milliseconds(200), 0x2000000);
  ASSERT_NE(guest, nullptr);
  auto region = os::SharedMapping::Map(d->ioreq_fd(), 0, kIoreqRegionPages * kPageSize, true);
  ASSERT_TRUE(region.ok());
  auto* control = reinterpret_cast<LocalControlPage*>(region->data() + kControlPage * kPageSize);
  control->mmio_range_count = 0xffffffff;  // clamped by the reader
  control->pci_device_count = 0xffffffff;
  EXPECT_FALSE(guest->IsPciClaimed(Sbdf{0, 0, 9, 0}));
  control->routing_seq = 1;  // a writer that never finishes: the reader gives up, "unclaimed"
  EXPECT_FALSE(guest->IsMmioClaimed(0x2000000, 4));
  // The server republishes from its own copy, healing the page.
  ASSERT_TRUE(server->MapMmioRange(0x3000000, 0x3000fff).ok());
  EXPECT_TRUE(guest->IsMmioClaimed(0x2000000, 4));
  EXPECT_TRUE(guest->IsMmioClaimed(0x3000ffc, 4));
}

// --- the daemon
// -----------------------------------------------------------------------------------------

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = UniqueDaemonPath();
    auto daemon = LocalHvDaemon::Create(path_);
    ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
    daemon_ = std::move(*daemon);
    ASSERT_TRUE(daemon_->Start().ok());
  }
  std::unique_ptr<LocalHvClient> Client(DomainId as) {
    auto c = LocalHvClient::Connect(path_, as);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }
  std::string path_;
  std::unique_ptr<LocalHvDaemon> daemon_;
};

// Who may connect: only the daemon's user and root (docs/SECURITY.md). A daemon that serves
// somebody else shows what any other user sees: the reason, not a reset.
TEST(DaemonPeersTest, OtherUsersAreRefusedWithTheReason) {
  HvDaemonLimits limits;
  limits.allowed_uids = {::geteuid() + 1};
  auto daemon = LocalHvDaemon::Create(UniqueDaemonPath(), limits);
  ASSERT_TRUE(daemon.ok());
  ASSERT_TRUE((*daemon)->Start().ok());
  auto client = LocalHvClient::Connect((*daemon)->path(), 0);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kPermissionDenied) << client.status().ToString();
  EXPECT_NE(client.status().message().find("uid " + std::to_string(::geteuid()) +
                                           " may not use this local hypervisor daemon"),
            std::string::npos)
      << client.status().ToString();
}

// Connections that never say hello are closed after hello_timeout (told so), and no more than
// max_pending wait at once: they cannot fill the slots VMs and device models need.
TEST(DaemonPeersTest, SilentConnectionsAreDroppedAndCannotCrowdOutClients) {
  HvDaemonLimits limits;
  limits.max_clients = 24;
  limits.max_pending = 4;
  limits.hello_timeout = std::chrono::milliseconds(300);
  auto daemon = LocalHvDaemon::Create(UniqueDaemonPath(), limits);
  ASSERT_TRUE(daemon.ok());
  ASSERT_TRUE((*daemon)->Start().ok());
  std::vector<os::UniqueFd> silent;
  for (int i = 0; i < 40; ++i) {
    auto c = os::ConnectSeqpacket((*daemon)->path());
    ASSERT_TRUE(c.ok());
    silent.push_back(std::move(*c));
  }
  auto store = LocalStore::Connect((*daemon)->path(), 0);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*store)->Write("/peers", "ok").ok());
  for (os::UniqueFd& c : silent) {
    ASSERT_TRUE(os::WaitReadable(c.get(), 10000).ok());
    Result<os::ReceivedMessage> notice = os::ReceivePartingMessage(c.get(), kHvMaxMessage);
    ASSERT_TRUE(notice.ok()) << notice.status().ToString();
    Result<HvMessage> parsed = ParseHvMessage(notice->bytes);
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(parsed->header.seq, 0u);
    const StatusCode code = ParseHvReplyStatus(parsed->payload).status().code();
    EXPECT_TRUE(code == StatusCode::kResourceExhausted || code == StatusCode::kDeadlineExceeded)
        << StatusCodeName(code);
  }
  EXPECT_EQ(*(*store)->Read("/peers"), "ok") << "the client that said hello is still served";
}

TEST_F(DaemonTest, ASecondDaemonOnTheSamePathIsRefused) {
  EXPECT_EQ(LocalHvDaemon::Create(path_).status().code(), StatusCode::kAlreadyExists);
}

TEST_F(DaemonTest, GarbageDisconnectsOnlyTheSender) {
  auto store = LocalStore::Connect(path_, 0);
  ASSERT_TRUE(store.ok());
  auto raw = os::ConnectSeqpacket(path_);
  ASSERT_TRUE(raw.ok());
  const uint8_t junk[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17};
  ASSERT_TRUE(os::SendWithFds(raw->get(), junk, {}).ok());
  auto reply = os::ReceiveWithFds(raw->get(), 4096, false);
  EXPECT_EQ(reply.status().code(), StatusCode::kUnavailable) << "the daemon hung up on us";
  // A request before hello is refused the same way.
  auto rude = os::ConnectSeqpacket(path_);
  ASSERT_TRUE(rude.ok());
  HvWriter w;
  w.Str("/x");
  const std::vector<uint8_t> payload = w.Take();
  const std::vector<uint8_t> read = EncodeHvMessage(HvOp::kStoreRead, 1, payload);
  ASSERT_TRUE(os::SendWithFds(rude->get(), read, {}).ok());
  EXPECT_EQ(os::ReceiveWithFds(rude->get(), 4096, false).status().code(), StatusCode::kUnavailable);
  // Everyone else carries on.
  EXPECT_TRUE((*store)->Write("/still/here", "yes").ok());
  EXPECT_EQ(*(*store)->Read("/still/here"), "yes");
}

TEST_F(DaemonTest, GuestsWriteOnlyTheirOwnStoreSubtree) {
  auto guest = LocalStore::Connect(path_, 7);
  auto dom0 = LocalStore::Connect(path_, 0);
  ASSERT_TRUE(guest.ok() && dom0.ok());
  EXPECT_TRUE((*guest)->Write("/local/domain/7/device/vgpu/0/state", "1").ok());
  EXPECT_EQ((*guest)->Write("/local/domain/8/x", "1").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ((*guest)->Write("/local/domain/70/x", "1").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ((*guest)->Write("/vm", "1").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ((*guest)->Remove("/local").code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE((*dom0)->Write("/local/domain/0/backend/vgpu/7/0/state", "2").ok());
  EXPECT_EQ(*(*guest)->Read("/local/domain/0/backend/vgpu/7/0/state"), "2") << "reads are open";
  EXPECT_EQ(
      (*guest)->Write("/local/domain/7/big", std::string(kMaxStoreValueLength + 1, 'x')).code(),
      StatusCode::kInvalidArgument);
}

TEST_F(DaemonTest, OnlyDom0UsesTheDomainRegistryAndOwnersTakeDomainsWithThem) {
  auto d = NewDomain(9);
  auto launcher = Client(0);
  auto guest = Client(9);
  EXPECT_EQ(RegisterDomain(*guest, *d).code(), StatusCode::kPermissionDenied);
  ASSERT_TRUE(RegisterDomain(*launcher, *d).ok());
  EXPECT_EQ(RegisterDomain(*launcher, *d).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(AttachDomain(*guest, 9).status().code(), StatusCode::kPermissionDenied);
  auto dm = Client(0);
  auto attached = AttachDomain(*dm, 9);
  ASSERT_TRUE(attached.ok()) << attached.status().ToString();
  EXPECT_EQ((*attached)->config().ram_bytes, d->config().ram_bytes);
  EXPECT_EQ(AttachDomain(*dm, 10).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(UnregisterDomain(*dm, 9).code(), StatusCode::kPermissionDenied);
  launcher.reset();  // the VM's creator went away: so did the domain
  for (int i = 0; i < 100 && AttachDomain(*dm, 9).ok(); ++i) ::usleep(5000);
  EXPECT_EQ(AttachDomain(*dm, 9).status().code(), StatusCode::kNotFound);
}

TEST_F(DaemonTest, PortsBindOnlyForTheDomainTheyWereOfferedTo) {
  auto backend = LocalEventChannels::Connect(path_, 0);
  auto intruder = LocalEventChannels::Connect(path_, 6);
  auto frontend = LocalEventChannels::Connect(path_, 5);
  ASSERT_TRUE(backend.ok() && intruder.ok() && frontend.ok());
  auto port = (*backend)->AllocUnbound(5);
  ASSERT_TRUE(port.ok());
  EXPECT_EQ((*intruder)->BindInterdomain(0, *port).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE((*frontend)->BindInterdomain(0, *port).ok());
  EXPECT_EQ((*frontend)->Unbind(12345).code(), StatusCode::kNotFound);
}

TEST_F(DaemonTest, AWatcherThatNeverReadsIsDisconnectedNotWaitedFor) {
  auto writer = LocalStore::Connect(path_, 0);
  auto sleeper = LocalStore::Connect(path_, 0);
  ASSERT_TRUE(writer.ok() && sleeper.ok());
  ASSERT_TRUE((*sleeper)->Watch("/flood", "t").ok());
  for (int i = 0; i < 5000; ++i) ASSERT_TRUE((*writer)->Write("/flood", std::to_string(i)).ok());
  // The sleeper's queue overflowed long ago; the daemon dropped it and stayed responsive.
  bool disconnected = false;
  for (int i = 0; i < 20000 && !disconnected; ++i) {
    auto e = (*sleeper)->PollWatch();
    disconnected = !e.ok();
    if (e.ok() && !e->has_value()) break;
  }
  EXPECT_TRUE(disconnected);
  EXPECT_EQ(*(*writer)->Read("/flood"), "4999");
}

// --- grants
// ---------------------------------------------------------------------------------------------

TEST(LocalGrants, AGrantStillMappedCannotBeEndedAndIsQuarantined) {
  auto d = NewDomain(2);
  std::shared_ptr<const LocalDomain> shared(std::move(d));
  auto sharer = LocalGrantSharer::Create(*shared, 200, 16);
  ASSERT_TRUE(sharer.ok());
  LocalGrantMapper mapper(0, [&](DomainId id) -> Result<std::shared_ptr<const LocalDomain>> {
    if (id != 2) return Status::NotFound("no such domain");
    return shared;
  });
  auto pages = (*sharer)->Share(0, 1, Access::kReadWrite);
  ASSERT_TRUE(pages.ok());
  const GrantRef ref = (*pages)->refs()[0];
  auto mapping = mapper.Map(2, (*pages)->refs(), Access::kReadWrite);
  ASSERT_TRUE(mapping.ok());
  auto table = LocalGrantTable::Create(*shared);
  ASSERT_TRUE(table.ok());
  EXPECT_EQ((*table)->EndGrant(ref).code(), StatusCode::kFailedPrecondition);

  pages->reset();  // revoke while mapped: the frame is quarantined, the mapping stays valid
  EXPECT_EQ((*sharer)->quarantined_frames(), 1u);
  (*mapping)->bytes()[0] = 1;
  const GrantRef refs[] = {ref};
  EXPECT_EQ(mapper.Map(2, refs, Access::kReadOnly).status().code(), StatusCode::kPermissionDenied)
      << "no new mappings of a revoked grant";
  mapping->reset();  // the last unmap frees the entry
  EXPECT_EQ((*table)->EndGrant(ref).code(), StatusCode::kNotFound);
  EXPECT_EQ(mapper.Map(7, refs, Access::kReadOnly).status().code(), StatusCode::kNotFound);
}

TEST(LocalGrants, AForgedEntryCannotReachBeyondTheGrantersRam) {
  auto d = NewDomain(2);
  std::shared_ptr<const LocalDomain> shared(std::move(d));
  LocalGrantMapper mapper(
      0, [&](DomainId) -> Result<std::shared_ptr<const LocalDomain>> { return shared; });
  auto table = os::SharedMapping::Map(shared->grant_fd(), 0, shared->grant_table_bytes(), true);
  ASSERT_TRUE(table.ok());
  auto* entries = reinterpret_cast<LocalGrantEntry*>(table->data());
  entries[5].gfn = shared->frame_count();  // one past the end of RAM
  entries[5].state = kGrantValid | 0;      // granted to dom0
  const GrantRef refs[] = {5};
  EXPECT_EQ(mapper.Map(2, refs, Access::kReadOnly).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(entries[5].state >> 32, 0u) << "the failed map dropped its count";
  const GrantRef past[] = {kDefaultGrantEntries};
  EXPECT_EQ(mapper.Map(2, past, Access::kReadOnly).status().code(), StatusCode::kOutOfRange);
  entries[6].state = kGrantValid | 3;  // granted to someone else
  const GrantRef other[] = {6};
  EXPECT_EQ(mapper.Map(2, other, Access::kReadOnly).status().code(), StatusCode::kPermissionDenied);
}

// --- memory ranges (BAR remap): accesses inside one reach the backing without a request

TEST(LocalMemoryRanges, AccessesInsideARangeReachTheBackingWithoutTrapping) {
  auto [d, server, guest] = NewIoBed(std::chrono::milliseconds(200));
  ASSERT_NE(guest, nullptr);
  auto backing = os::CreateSealedMemfd("backing", 4 * kPageSize);
  ASSERT_TRUE(backing.ok());
  auto bytes = os::SharedMapping::Map(backing->get(), 0, 4 * kPageSize, true);
  ASSERT_TRUE(bytes.ok());
  os::StoreShared(*reinterpret_cast<uint32_t*>(bytes->data() + 0x2008), 0xcafef00du);
  constexpr uint64_t kBase = 0xe0000000;
  ASSERT_TRUE(server->MapMmioRange(kBase, kBase + 0x3fff).ok());
  ASSERT_TRUE(
      server->MapMemoryRange(kBase + 0x1000, kBase + 0x2fff, {backing->get(), 0x1000}).ok());
  // Reads and writes inside the range: straight to the memfd, no request for the server.
  auto value = guest->Read(0, kBase + 0x2008, 4);  // backing offset 0x2008
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, 0xcafef00du);
  ASSERT_TRUE(guest->Write(0, kBase + 0x1010, 8, 0x1122334455667788ull).ok());
  EXPECT_EQ(*reinterpret_cast<uint64_t*>(bytes->data() + 0x1010), 0x1122334455667788ull);
  EXPECT_EQ(guest->memory_accesses(), 2u);
  auto waiting = server->Poll();
  ASSERT_TRUE(waiting.ok());
  EXPECT_FALSE(waiting->has_value());
  // An access reaching past the range, and one outside it, trap as before.
  uint8_t buffer[16];
  EXPECT_FALSE(guest->AccessMemory(kBase + 0x2ff8, buffer, 16, false));
  EXPECT_FALSE(guest->AccessMemory(kBase, buffer, 4, false));
  // Overlaps and unsealed backings are refused; unmapping makes the pages trap again.
  EXPECT_EQ(server->MapMemoryRange(kBase + 0x2000, kBase + 0x3fff, {backing->get(), 0}).code(),
            StatusCode::kAlreadyExists);
  os::UniqueFd unsealed(::memfd_create("unsealed", MFD_CLOEXEC));
  ASSERT_EQ(::ftruncate(unsealed.get(), 4 * kPageSize), 0);
  EXPECT_EQ(server->MapMemoryRange(kBase + 0x3000, kBase + 0x3fff, {unsealed.get(), 0}).code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(server->MapMemoryRange(kBase + 0x3000, kBase + 0x4fff, {backing->get(), 0x3000}).code(),
            StatusCode::kOutOfRange);
  EXPECT_EQ(server->UnmapMemoryRange(kBase + 0x1000, kBase + 0x1fff).code(), StatusCode::kNotFound);
  ASSERT_TRUE(server->UnmapMemoryRange(kBase + 0x1000, kBase + 0x2fff).ok());
  EXPECT_FALSE(guest->AccessMemory(kBase + 0x1008, buffer, 4, false));
  // A server that goes away withdraws its ranges.
  ASSERT_TRUE(server->MapMemoryRange(kBase, kBase + 0xfff, {backing->get(), 0}).ok());
  EXPECT_TRUE(guest->AccessMemory(kBase, buffer, 8, false));
  server.reset();
  EXPECT_FALSE(guest->AccessMemory(kBase, buffer, 8, false));
}

// The next program of a VM (a guest side created after the ranges were mapped, when the earlier
// one took the backings off the physmap socket) asks for them; the server's Housekeep sends them
// again, and that program's accesses reach the backing without trapping too.
TEST(LocalMemoryRanges, AGuestSideCreatedLaterGetsTheBackingsAgain) {
  auto d = NewDomain();
  auto server = LocalIoreqServer::Create(*d);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_GE((*server)->housekeeping_fd(), 0);
  auto backing = os::CreateSealedMemfd("backing", kPageSize);
  ASSERT_TRUE(backing.ok());
  auto bytes = os::SharedMapping::Map(backing->get(), 0, kPageSize, true);
  ASSERT_TRUE(bytes.ok());
  os::StoreShared(*reinterpret_cast<uint32_t*>(bytes->data() + 0x40), 0x5eed5eedu);
  constexpr uint64_t kBase = 0xe0000000;
  ASSERT_TRUE((*server)->MapMmioRange(kBase, kBase + 0xfff).ok());
  ASSERT_TRUE((*server)->MapMemoryRange(kBase, kBase + 0xfff, {backing->get(), 0}).ok());
  uint32_t value = 0;
  {
    auto first = LocalGuestIo::Create(*d, std::chrono::milliseconds(200));
    ASSERT_TRUE(first.ok());
    ASSERT_TRUE((*first)->AccessMemory(kBase + 0x40, &value, 4, false));
    EXPECT_EQ(value, 0x5eed5eedu);
  }
  auto second = LocalGuestIo::Create(*d, std::chrono::milliseconds(200));
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE((*second)->AccessMemory(kBase + 0x40, &value, 4, false))
      << "the first one took the backing";
  pollfd asked{(*server)->housekeeping_fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&asked, 1, 5000), 1) << "the new guest side asked";
  ASSERT_TRUE((*server)->Housekeep().ok());
  value = 0;
  ASSERT_TRUE((*second)->AccessMemory(kBase + 0x40, &value, 4, false));
  EXPECT_EQ(value, 0x5eed5eedu);
}

}  // namespace
}  // namespace gpuvm::hv::local
