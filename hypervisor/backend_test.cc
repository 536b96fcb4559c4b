// The hypervisor port's behaviour, written once and run against every backend
// (CONTRIBUTING.md, "Tests").
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "hypervisor/testing/backend_env.h"

namespace gpuvm::hv::testing {
namespace {

constexpr uint64_t kClaimBase = 0xe0000000;
constexpr uint64_t kClaimSize = 0x100000;
const Sbdf kDevice{0, 0, 5, 0};

// Owns an IoreqServer on its own thread (its owner thread) and answers every request with
// handler().
class ServerLoop {
 public:
  using Handler = std::function<uint64_t(const IoRequest&)>;
  ServerLoop(std::unique_ptr<IoreqServer> server, Handler handler)
      : server_(std::move(server)), handler_(std::move(handler)), stop_(::eventfd(0, EFD_CLOEXEC)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~ServerLoop() { Stop(); }
  void Stop() {
    if (!thread_.joinable()) return;
    const uint64_t one = 1;
    EXPECT_EQ(::write(stop_, &one, sizeof(one)), 8);
    thread_.join();
    ::close(stop_);
  }
  // Destroys the server (on its owner thread, as the thread rules want) while the loop keeps
  // polling.
  std::unique_ptr<IoreqServer> TakeServer() {
    Stop();
    return std::move(server_);
  }
  std::vector<IoRequest> seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

 private:
  void Run() {
    for (;;) {
      pollfd fds[2] = {{server_->wait_fd(), POLLIN, 0}, {stop_, POLLIN, 0}};
      ::poll(fds, 2, 1000);
      if (fds[1].revents & POLLIN) return;
      for (;;) {
        auto next = server_->Poll();
        if (!next.ok()) {
          ADD_FAILURE() << next.status().ToString();
          return;
        }
        if (!next->has_value()) break;
        const IoRequest& r = **next;
        {
          std::lock_guard<std::mutex> lock(mu_);
          seen_.push_back(r);
        }
        const Status done = server_->Complete(r, handler_(r));
        if (!done.ok()) ADD_FAILURE() << done.ToString();
      }
    }
  }

  std::unique_ptr<IoreqServer> server_;
  Handler handler_;
  int stop_;
  std::thread thread_;
  std::mutex mu_;
  std::vector<IoRequest> seen_;
};

template <typename Backend>
class HypervisorBackendTest : public BackendTest<Backend> {};

using Backends = ::testing::Types<LocalBackend, XenBackend>;
TYPED_TEST_SUITE(HypervisorBackendTest, Backends, BackendName);

// --- guest memory
// -------------------------------------------------------------------------------------

TYPED_TEST(HypervisorBackendTest, GuestMemoryIsBoundsChecked) {
  GPUVM_ASSIGN_OR_SKIP(auto memory, this->env_->OpenGuestMemory());
  const uint64_t frames = memory->frame_count();
  ASSERT_GT(frames, 4u);
  EXPECT_EQ(memory->Map(frames, 1, Access::kReadOnly).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(memory->Map(frames - 1, 2, Access::kReadOnly).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(memory->Map(1, ~uint64_t{0}, Access::kReadOnly).status().code(),
            StatusCode::kOutOfRange);
  EXPECT_EQ(memory->Map(0, 0, Access::kReadOnly).status().code(), StatusCode::kInvalidArgument);
  uint8_t byte = 0;
  EXPECT_EQ(memory->Read(frames << kPageShift, {&byte, 1}).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(memory->Read((frames << kPageShift) - 1, {&byte, 1}).code(), StatusCode::kOk);
  uint8_t two[2];
  EXPECT_EQ(memory->Read((frames << kPageShift) - 1, two).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(memory->Write(~uint64_t{0}, {&byte, 1}).code(), StatusCode::kOutOfRange);
}

TYPED_TEST(HypervisorBackendTest, GuestMemoryReadsWritesAndMapsAgree) {
  GPUVM_ASSIGN_OR_SKIP(auto memory, this->env_->OpenGuestMemory());
  // Across a frame boundary, unaligned.
  const uint64_t gpa = (3 << kPageShift) - 5;
  const uint8_t pattern[11] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  ASSERT_TRUE(memory->Write(gpa, pattern).ok());
  uint8_t back[11] = {};
  ASSERT_TRUE(memory->Read(gpa, back).ok());
  EXPECT_EQ(0, std::memcmp(pattern, back, sizeof(back)));
  auto mapping = memory->Map(2, 2, Access::kReadWrite);
  ASSERT_TRUE(mapping.ok()) << mapping.status().ToString();
  ASSERT_EQ((*mapping)->bytes().size(), 2 * kPageSize);
  EXPECT_EQ((*mapping)->bytes()[kPageSize - 5], 1);
  EXPECT_EQ((*mapping)->bytes()[kPageSize + 5], 11);
  (*mapping)->bytes()[100] = 0x5a;
  uint8_t byte = 0;
  ASSERT_TRUE(memory->Read((2 << kPageShift) + 100, {&byte, 1}).ok());
  EXPECT_EQ(byte, 0x5a);
}

TYPED_TEST(HypervisorBackendTest, TheGuestSeesWhatDom0WritesToItsMemory) {
  GPUVM_ASSIGN_OR_SKIP(auto memory, this->env_->OpenGuestMemory());
  GPUVM_ASSIGN_OR_SKIP(auto guest, this->env_->CreateGuest());
  const uint8_t hello[] = {'h', 'e', 'l', 'l', 'o'};
  ASSERT_TRUE(memory->Write(0x1234, hello).ok());
  EXPECT_EQ(0, std::memcmp(this->env_->guest_ram().data() + 0x1234, hello, sizeof(hello)));
}

// --- IOREQ server
// ---------------------------------------------------------------------------------------

TYPED_TEST(HypervisorBackendTest, ClaimsRejectOverlapsAndUnknownRanges) {
  GPUVM_ASSIGN_OR_SKIP(auto server, this->env_->CreateIoreqServer());
  EXPECT_GE(server->vcpu_count(), 1u);
  EXPECT_EQ(server->domain(), this->env_->guest_domid());
  ASSERT_TRUE(server->MapMmioRange(kClaimBase, kClaimBase + kClaimSize - 1).ok());
  EXPECT_EQ(server->MapMmioRange(kClaimBase + 0x1000, kClaimBase + 0x1fff).code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(server->MapMmioRange(kClaimBase + 10, kClaimBase + 1).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(server->UnmapMmioRange(kClaimBase, kClaimBase + 1).code(), StatusCode::kNotFound);
  EXPECT_TRUE(server->UnmapMmioRange(kClaimBase, kClaimBase + kClaimSize - 1).ok());
  ASSERT_TRUE(server->MapPciDevice(kDevice).ok());
  EXPECT_EQ(server->MapPciDevice(kDevice).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(server->MapPciDevice(Sbdf{0, 0, 40, 0}).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(server->UnmapPciDevice(kDevice).ok());
  EXPECT_EQ(server->UnmapPciDevice(kDevice).code(), StatusCode::kNotFound);
  IoRequest none;
  EXPECT_EQ(server->Complete(none, 0).code(), StatusCode::kFailedPrecondition);
}

TYPED_TEST(HypervisorBackendTest, MmioAndConfigAccessesRoundTrip) {
  GPUVM_ASSIGN_OR_SKIP(auto server, this->env_->CreateIoreqServer());
  GPUVM_ASSIGN_OR_SKIP(auto guest, this->env_->CreateGuest());
  ASSERT_TRUE(server->MapMmioRange(kClaimBase, kClaimBase + kClaimSize - 1).ok());
  ASSERT_TRUE(server->MapPciDevice(kDevice).ok());
  ServerLoop loop(std::move(server), [](const IoRequest& r) -> uint64_t {
    if (r.space == IoSpace::kPciConfig) return 0x06d810de;
    return r.addr * 3;
  });

  for (uint32_t size : {1u, 2u, 4u, 8u}) {
    auto value = guest->Read(0, kClaimBase + 0x40, size);
    ASSERT_TRUE(value.ok()) << value.status().ToString();
    const uint64_t full = (kClaimBase + 0x40) * 3;
    EXPECT_EQ(*value, size == 8 ? full : full & ((uint64_t{1} << (8 * size)) - 1));
  }
  ASSERT_TRUE(guest->Write(1, kClaimBase + 0x80, 4, 0xdeadbeef).ok());
  auto config = guest->ConfigRead(0, kDevice, 0, 4);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(*config, 0x06d810deu);
  ASSERT_TRUE(guest->ConfigWrite(0, kDevice, 0x10, 4, 0xffffffff).ok());

  // Nothing claimed here: the guest sees all-ones and the server never hears of it.
  EXPECT_EQ(*guest->Read(0, 0x1000, 4), 0xffffffffu);
  EXPECT_EQ(*guest->Read(0, kClaimBase + kClaimSize - 2, 4), 0xffffffffu) << "straddles the end";
  EXPECT_EQ(*guest->ConfigRead(0, Sbdf{0, 0, 6, 0}, 0, 4), 0xffffffffu);
  EXPECT_TRUE(guest->Write(0, 0x1000, 4, 1).ok());

  const std::vector<IoRequest> seen = loop.seen();
  ASSERT_EQ(seen.size(), 7u);
  EXPECT_EQ(seen[4].dir, IoDirection::kWrite);
  EXPECT_EQ(seen[4].vcpu, 1u);
  EXPECT_EQ(seen[4].addr, kClaimBase + 0x80);
  EXPECT_EQ(seen[4].data, 0xdeadbeefu);
  EXPECT_EQ(seen[4].count, 1u);
  EXPECT_EQ(seen[5].space, IoSpace::kPciConfig);
  EXPECT_EQ(seen[5].sbdf, kDevice);
  EXPECT_EQ(seen[6].addr, 0x10u);
  EXPECT_EQ(seen[6].data, 0xffffffffu);
}

TYPED_TEST(HypervisorBackendTest, RequestsReachTheServerExactlyAsTheGuestSentThem) {
  GPUVM_ASSIGN_OR_SKIP(auto server, this->env_->CreateIoreqServer());
  GPUVM_ASSIGN_OR_SKIP(auto guest, this->env_->CreateGuest());
  ServerLoop loop(std::move(server), [](const IoRequest&) -> uint64_t { return 7; });
  IoRequest odd;
  odd.vcpu = 1;
  odd.space = IoSpace::kMmio;
  odd.dir = IoDirection::kRead;
  odd.addr = 0xfffffffffffffff0;
  odd.size = 3;
  odd.count = 0xffffffff;
  odd.data_is_ptr = true;
  odd.df = true;
  odd.data = 0x1000;
  auto answer = guest->Submit(odd);
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ(*answer, 0x1000u) << "a data_is_ptr completion leaves the buffer address in place";
  IoRequest unknown;
  unknown.space = IoSpace::kUnknown;
  unknown.raw_type = 0x77;
  unknown.size = 4;
  unknown.count = 1;
  ASSERT_TRUE(guest->Submit(unknown).ok());
  const std::vector<IoRequest> seen = loop.seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].addr, odd.addr);
  EXPECT_EQ(seen[0].size, 3u);
  EXPECT_EQ(seen[0].count, 0xffffffffu);
  EXPECT_TRUE(seen[0].data_is_ptr);
  EXPECT_TRUE(seen[0].df);
  EXPECT_EQ(seen[0].vcpu, 1u);
  EXPECT_EQ(seen[1].space, IoSpace::kUnknown);
  EXPECT_EQ(seen[1].raw_type, 0x77);
}

TYPED_TEST(HypervisorBackendTest, VcpusTrapConcurrently) {
  GPUVM_ASSIGN_OR_SKIP(auto server, this->env_->CreateIoreqServer());
  GPUVM_ASSIGN_OR_SKIP(auto guest, this->env_->CreateGuest());
  ASSERT_GE(guest->vcpu_count(), 2u);
  ASSERT_TRUE(server->MapMmioRange(kClaimBase, kClaimBase + kClaimSize - 1).ok());
  ServerLoop loop(std::move(server),
                  [](const IoRequest& r) -> uint64_t { return r.addr + r.vcpu; });
  std::atomic<int> errors{0};
  std::vector<std::thread> vcpus;
  for (uint32_t v = 0; v < 2; ++v) {
    vcpus.emplace_back([&, v] {
      for (uint64_t i = 0; i < 500; ++i) {
        auto value = guest->Read(v, kClaimBase + 8 * i, 8);
        if (!value.ok() || *value != kClaimBase + 8 * i + v) ++errors;
      }
    });
  }
  for (auto& t : vcpus) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(loop.seen().size(), 1000u);
}

TYPED_TEST(HypervisorBackendTest, RemappedRangesRouteToTheNewPlace) {
  GPUVM_ASSIGN_OR_SKIP(auto server, this->env_->CreateIoreqServer());
  GPUVM_ASSIGN_OR_SKIP(auto guest, this->env_->CreateGuest());
  ASSERT_TRUE(server->MapMmioRange(kClaimBase, kClaimBase + 0xfff).ok());
  ASSERT_TRUE(server->UnmapMmioRange(kClaimBase, kClaimBase + 0xfff).ok());
  ASSERT_TRUE(server->MapMmioRange(kClaimBase + 0x10000, kClaimBase + 0x10fff).ok());
  ServerLoop loop(std::move(server), [](const IoRequest&) -> uint64_t { return 1; });
  EXPECT_EQ(*guest->Read(0, kClaimBase, 4), 0xffffffffu);
  EXPECT_EQ(*guest->Read(0, kClaimBase + 0x10000, 4), 1u);
  EXPECT_EQ(loop.seen().size(), 1u);
}

TYPED_TEST(HypervisorBackendTest, InterruptsReachTheGuest) {
  GPUVM_ASSIGN_OR_SKIP(auto server, this->env_->CreateIoreqServer());
  GPUVM_ASSIGN_OR_SKIP(auto guest, this->env_->CreateGuest());
  ASSERT_TRUE(server->MapPciDevice(kDevice).ok());
  EXPECT_EQ(server->SetPciIntxLevel(kDevice, 4, true).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(server->SetPciIntxLevel(kDevice, 0, true).ok());
  EXPECT_EQ(guest->interrupts().intx_levels, 1u);
  ASSERT_TRUE(server->SetPciIntxLevel(kDevice, 0, false).ok());
  EXPECT_EQ(guest->interrupts().intx_levels, 0u);
  ASSERT_TRUE(server->InjectMsi(0xfee00000, 0x4041).ok());
  ASSERT_TRUE(server->InjectMsi(0xfee00000, 0x4041).ok());
  EXPECT_EQ(guest->interrupts().msi_count, 2u);
}

TYPED_TEST(HypervisorBackendTest, AServerThatGoesAwayReleasesBlockedVcpus) {
  GPUVM_ASSIGN_OR_SKIP(auto server, this->env_->CreateIoreqServer());
  GPUVM_ASSIGN_OR_SKIP(auto guest, this->env_->CreateGuest());
  ASSERT_TRUE(server->MapMmioRange(kClaimBase, kClaimBase + 0xfff).ok());
  std::atomic<bool> taken{false};
  std::thread vcpu([&] {
    auto value = guest->Read(0, kClaimBase, 4);
    ASSERT_TRUE(value.ok()) << value.status().ToString();
    EXPECT_EQ(*value, 0xffffffffu);
  });
  // Take the request but never complete it; then destroy the server.
  while (!taken) {
    auto next = WaitForIoreq(*server, std::chrono::milliseconds(100));
    ASSERT_TRUE(next.ok());
    if (next->has_value()) taken = true;
  }
  server.reset();
  vcpu.join();
  // And with the claims gone, the guest's accesses no longer trap.
  EXPECT_EQ(*guest->Read(0, kClaimBase, 4), 0xffffffffu);
}

// --- event channels
// -------------------------------------------------------------------------------------

TYPED_TEST(HypervisorBackendTest, EventChannelsNotifyBothWaysAndMask) {
  const DomainId a = this->env_->backend_domid();
  const DomainId b = this->env_->peer_domid();
  GPUVM_ASSIGN_OR_SKIP(auto back, this->env_->OpenEventChannels(a));
  GPUVM_ASSIGN_OR_SKIP(auto front, this->env_->OpenEventChannels(b));
  auto unbound = back->AllocUnbound(b);
  ASSERT_TRUE(unbound.ok()) << unbound.status().ToString();
  auto bound = front->BindInterdomain(a, *unbound);
  ASSERT_TRUE(bound.ok()) << bound.status().ToString();

  auto wait_pending = [](EventChannels& e) -> std::optional<EvtchnPort> {
    pollfd pfd{e.fd(), POLLIN, 0};
    ::poll(&pfd, 1, 2000);
    auto p = e.Pending();
    return p.ok() ? *p : std::nullopt;
  };
  ASSERT_TRUE(front->Notify(*bound).ok());
  EXPECT_EQ(wait_pending(*back), std::optional<EvtchnPort>(*unbound));
  ASSERT_TRUE(back->Notify(*unbound).ok());
  EXPECT_EQ(wait_pending(*front), std::optional<EvtchnPort>(*bound));

  // Masked after firing: a second notification is held until Unmask, then delivered once.
  ASSERT_TRUE(front->Notify(*bound).ok());
  EXPECT_FALSE(back->Pending()->has_value());
  ASSERT_TRUE(back->Unmask(*unbound).ok());
  EXPECT_EQ(wait_pending(*back), std::optional<EvtchnPort>(*unbound));
  ASSERT_TRUE(back->Unmask(*unbound).ok());
  EXPECT_FALSE(back->Pending()->has_value());

  EXPECT_FALSE(front->BindInterdomain(a, *unbound).ok()) << "already bound";
  EXPECT_FALSE(front->BindInterdomain(a, 0xfffff).ok());
  EXPECT_TRUE(front->Unbind(*bound).ok());
  EXPECT_TRUE(back->Unbind(*unbound).ok());
}

// --- store
// ----------------------------------------------------------------------------------------------

TYPED_TEST(HypervisorBackendTest, StoreReadsWritesListsAndRemoves) {
  GPUVM_ASSIGN_OR_SKIP(auto store, this->env_->OpenStore(this->env_->backend_domid()));
  const std::string dir = this->env_->scratch_store_path();
  ASSERT_TRUE(store->Write(dir + "/vgpu/0/state", "1").ok());
  ASSERT_TRUE(store->Write(dir + "/vgpu/0/ring-ref", "42").ok());
  EXPECT_EQ(*store->Read(dir + "/vgpu/0/ring-ref"), "42");
  auto names = store->List(dir + "/vgpu/0");
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, (std::vector<std::string>{"ring-ref", "state"}));
  EXPECT_EQ(store->Read(dir + "/missing").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Write("relative/path", "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Write(dir + "//x", "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Write(dir + "/bad char", "x").code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(store->Remove(dir).ok());
  EXPECT_EQ(store->Read(dir + "/vgpu/0/state").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Remove(dir).code(), StatusCode::kNotFound);
}

TYPED_TEST(HypervisorBackendTest, StoreWatchesFireOnSetAndOnChangesBelow) {
  GPUVM_ASSIGN_OR_SKIP(auto writer, this->env_->OpenStore(this->env_->backend_domid()));
  GPUVM_ASSIGN_OR_SKIP(auto watcher, this->env_->OpenStore(this->env_->peer_domid()));
  const std::string dir = this->env_->scratch_store_path() + "/watched";
  // Waits up to `rounds` * 10 ms; events come at once, so only the "nothing comes" checks wait
  // long.
  auto next_event = [&](int rounds = 200) -> std::optional<WatchEvent> {
    for (int i = 0; i < rounds; ++i) {
      auto e = watcher->PollWatch();
      if (!e.ok()) return std::nullopt;
      if (e->has_value()) return **e;
      pollfd pfd{watcher->watch_fd(), POLLIN, 0};
      ::poll(&pfd, 1, 10);
    }
    return std::nullopt;
  };
  ASSERT_TRUE(watcher->Watch(dir, "tok").ok());
  EXPECT_EQ(next_event(), std::optional<WatchEvent>(WatchEvent{dir, "tok"})) << "fires once on set";
  ASSERT_TRUE(writer->Write(dir + "/a/b", "v").ok());
  // The write created dir and dir/a too; every event names a path at or below the watch.
  bool saw_leaf = false;
  for (int i = 0; i < 3 && !saw_leaf; ++i) {
    auto e = next_event();
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->token, "tok");
    EXPECT_EQ(e->path.compare(0, dir.size(), dir), 0) << e->path;
    saw_leaf = e->path == dir + "/a/b";
  }
  EXPECT_TRUE(saw_leaf);
  ASSERT_TRUE(watcher->Unwatch(dir, "tok").ok());
  while (next_event(10).has_value()) {
  }
  ASSERT_TRUE(writer->Write(dir + "/c", "v").ok());
  EXPECT_FALSE(next_event(20).has_value()) << "no events after unwatch";
  EXPECT_TRUE(writer->Remove(dir).ok());
}

// --- grants
// ---------------------------------------------------------------------------------------------

TYPED_TEST(HypervisorBackendTest, GrantedPagesAreSharedBothWays) {
  GPUVM_ASSIGN_OR_SKIP(auto sharer, this->env_->OpenGrantSharer());
  GPUVM_ASSIGN_OR_SKIP(auto mapper, this->env_->OpenGrantMapper());
  auto pages = sharer->Share(this->env_->backend_domid(), 2, Access::kReadWrite);
  ASSERT_TRUE(pages.ok()) << pages.status().ToString();
  ASSERT_EQ((*pages)->refs().size(), 2u);
  (*pages)->bytes()[10] = 0x11;
  (*pages)->bytes()[kPageSize + 10] = 0x22;
  auto mapping = mapper->Map(this->env_->peer_domid(), (*pages)->refs(), Access::kReadWrite);
  ASSERT_TRUE(mapping.ok()) << mapping.status().ToString();
  EXPECT_EQ((*mapping)->bytes()[10], 0x11);
  EXPECT_EQ((*mapping)->bytes()[kPageSize + 10], 0x22);
  (*mapping)->bytes()[20] = 0x33;
  EXPECT_EQ((*pages)->bytes()[20], 0x33);
  mapping->reset();
}

TYPED_TEST(HypervisorBackendTest, GrantMappingChecksPermissions) {
  GPUVM_ASSIGN_OR_SKIP(auto sharer, this->env_->OpenGrantSharer());
  GPUVM_ASSIGN_OR_SKIP(auto mapper, this->env_->OpenGrantMapper());
  auto read_only = sharer->Share(this->env_->backend_domid(), 1, Access::kReadOnly);
  ASSERT_TRUE(read_only.ok());
  EXPECT_FALSE(
      mapper->Map(this->env_->peer_domid(), (*read_only)->refs(), Access::kReadWrite).ok());
  EXPECT_TRUE(mapper->Map(this->env_->peer_domid(), (*read_only)->refs(), Access::kReadOnly).ok());
  const GrantRef bogus[] = {0x7fffffff};
  EXPECT_FALSE(mapper->Map(this->env_->peer_domid(), bogus, Access::kReadOnly).ok());
  EXPECT_EQ(mapper->Map(this->env_->peer_domid(), {}, Access::kReadOnly).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpuvm::hv::testing
