#include "qemu-device/ipc_aggregator_connection.h"

#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "gtest/gtest.h"
#include "ipc/codec.h"
#include "qemu-device/device_model.h"
#include "qemu-device/testing/fake_aggregator.h"
#include "qemu-device/testing/fake_aggregator_server.h"
#include "qemu-device/testing/fake_hypervisor.h"

namespace gpuvm::dm {
namespace {

using os::UniqueFd;
using testing::FakeAggregatorServer;
using testing::FakePatternByte;

std::string UniquePath() {
  static std::atomic<int> n{0};
  return "@gpuvm-dm-ipc-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
}

ipc::VmToken Token() {
  ipc::VmToken t;
  t.fill(0x42);
  return t;
}

ipc::VmConfig Config() {
  ipc::VmConfig c;
  c.domid = 3;
  c.vcpus = 2;
  c.guest_ram_bytes = 64 << 20;
  c.bar0_size = 16 << 20;
  c.bar1_size = 128 << 20;
  c.bar3_size = 64 << 20;
  c.name = "test-vm";
  return c;
}

class IpcConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = FakeAggregatorServer::Create(UniquePath());
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    ASSERT_TRUE(server_->Start().ok());
  }
  Result<std::unique_ptr<IpcAggregatorConnection>> Connect(
      std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    return IpcAggregatorConnection::Connect({server_->path(), Config(), Token(), timeout});
  }
  // Waits until the connection has an event for us.
  std::optional<AggregatorEvent> NextEvent(IpcAggregatorConnection& c) {
    for (int i = 0; i < 200; ++i) {
      auto e = c.PollEvent();
      if (!e.ok()) return std::nullopt;
      if (e->has_value()) return **e;
      pollfd pfd{c.event_fd(), POLLIN, 0};
      ::poll(&pfd, 1, 10);
    }
    return std::nullopt;
  }
  std::unique_ptr<FakeAggregatorServer> server_;
};

TEST_F(IpcConnectionTest, HandshakeThenReadsAndWrites) {
  auto c = Connect();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ((*c)->accepted().vm_id, 1u);
  ASSERT_TRUE((*c)->Write(BarIndex::kBar0, 0x1700, 4, 0xabcd, 1).ok());
  EXPECT_EQ(*(*c)->Read(BarIndex::kBar0, 0x1700, 4, 0), 0xabcdu);
  const uint64_t expected = FakePatternByte(BarIndex::kBar3, 0x10);
  EXPECT_EQ(*(*c)->Read(BarIndex::kBar3, 0x10, 1, 0), expected);
  EXPECT_EQ((*c)->Read(BarIndex::kBar0, 0x1702, 4, 0).status().code(), StatusCode::kInvalidArgument)
      << "we never send what the protocol forbids";
  EXPECT_TRUE((*c)->Read(BarIndex::kBar0, 0x1700, 4, 0).ok()) << "and that did not break anything";
  const std::vector<ipc::Message> seen = server_->received();
  ASSERT_GE(seen.size(), 3u);
  EXPECT_EQ(std::get<ipc::Auth>(seen[1].body).token, Token()) << "AUTH right behind HELLO";
  const auto& config = std::get<ipc::VmConfig>(seen[2].body);
  EXPECT_EQ(config.name, "test-vm");
  EXPECT_EQ(config.domid, 3);
  ASSERT_TRUE((*c)->Teardown(ipc::TeardownReason::kNormal).ok());
}

TEST_F(IpcConnectionTest, AFillIsOneMessagePerMaxFillCountElements) {
  auto c = Connect();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ((*c)->version(), ipc::kProtocolVersion);
  const uint64_t before = server_->mmio_requests();
  // 5000 elements of 2 bytes: two MMIO_WRITE_FILLs (4096 + 904), the value's high bits dropped.
  ASSERT_TRUE((*c)->FillElements(BarIndex::kBar3, 0x1000, 2, 0xdead12ab, 5000, 1).ok());
  EXPECT_EQ(server_->mmio_requests(), before + 2);
  EXPECT_EQ(*(*c)->Read(BarIndex::kBar3, 0x1000, 2, 0), 0x12abu);
  EXPECT_EQ(*(*c)->Read(BarIndex::kBar3, 0x1000 + 2 * 4999, 2, 0), 0x12abu);
  EXPECT_EQ(*(*c)->Read(BarIndex::kBar3, 0x1000 + 2 * 5000, 1, 0),
            FakePatternByte(BarIndex::kBar3, 0x1000 + 2 * 5000))
      << "nothing past the last element";
}

TEST_F(IpcConnectionTest, NoAggregatorIsUnavailableAndARefusalCarriesItsReason) {
  auto nobody =
      IpcAggregatorConnection::Connect({UniquePath(), Config(), Token(), std::chrono::seconds(1)});
  EXPECT_EQ(nobody.status().code(), StatusCode::kUnavailable);
  IpcConnectOptions no_token;
  no_token.path = server_->path();
  no_token.vm = Config();
  auto tokenless = IpcAggregatorConnection::Connect(no_token);
  EXPECT_EQ(tokenless.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(tokenless.status().message().find("no VM token"), std::string::npos);
  ipc::VmToken other = Token();
  other[0] ^= 1;
  server_->set_token(other);
  auto wrong = Connect();
  EXPECT_EQ(wrong.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(wrong.status().message().find("token is unknown"), std::string::npos);
  server_->set_token(Token());
  server_->set_behaviour(FakeAggregatorServer::Behaviour::kRefuseVm);
  auto refused = Connect();
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("already owned"), std::string::npos);
}

TEST_F(IpcConnectionTest, ASilentAggregatorBreaksTheConnection) {
  auto c = Connect(std::chrono::milliseconds(100));
  ASSERT_TRUE(c.ok());
  server_->set_behaviour(FakeAggregatorServer::Behaviour::kSilent);
  EXPECT_EQ((*c)->Read(BarIndex::kBar0, 0, 4, 0).status().code(), StatusCode::kDeadlineExceeded);
  server_->set_behaviour(FakeAggregatorServer::Behaviour::kNormal);
  EXPECT_EQ((*c)->Read(BarIndex::kBar0, 0, 4, 0).status().code(), StatusCode::kDeadlineExceeded)
      << "broken for good: a late reply must never answer a newer request";
  EXPECT_FALSE((*c)->PollEvent().ok());
}

// A stopped aggregator is slow, not gone: the call waits (past what used to be a fixed 5 s reply
// timeout, here scaled down through slow_note), says so once, and gets its answer when the
// aggregator comes back — on the socket and in the fast lane.
TEST_F(IpcConnectionTest, AStalledAggregatorIsWaitedForWhileItsSocketIsOpen) {
  for (const bool lane : {false, true}) {
    SCOPED_TRACE(lane ? "fast lane" : "socket");
    server_->set_offer_fast_lane(lane);
    std::vector<std::string> notes;
    IpcConnectOptions options{server_->path(), Config(), Token()};
    options.slow_note = std::chrono::milliseconds(50);
    options.note = [&notes](const std::string& line) { notes.push_back(line); };
    auto c = IpcAggregatorConnection::Connect(options);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ASSERT_EQ((*c)->on_fast_lane(), lane);
    server_->StallNextFor(std::chrono::milliseconds(600));
    Result<uint64_t> value = (*c)->Read(BarIndex::kBar0, 0x10, 1, 0);
    ASSERT_TRUE(value.ok()) << value.status().ToString();
    EXPECT_EQ(*value, FakePatternByte(BarIndex::kBar0, 0x10));
    ASSERT_EQ(notes.size(), 2u);
    EXPECT_NE(notes[0].find("has not answered MMIO_READ"), std::string::npos) << notes[0];
    EXPECT_NE(notes[1].find("answered MMIO_READ after"), std::string::npos) << notes[1];
    EXPECT_TRUE((*c)->Write(BarIndex::kBar0, 0x1700, 4, 1, 0).ok()) << "and it goes on";
    ASSERT_TRUE((*c)->Teardown(ipc::TeardownReason::kNormal).ok());
  }
}

// The aggregator gone is its socket closing: a call waiting for a reply (in the fast lane too,
// where the reply would come without the socket) ends at once with Unavailable, not after a timer.
TEST_F(IpcConnectionTest, AnAggregatorThatGoesAwayEndsTheWaitAtOnce) {
  auto c = Connect(std::chrono::milliseconds(0));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE((*c)->on_fast_lane());
  server_->set_behaviour(FakeAggregatorServer::Behaviour::kSilent);
  std::atomic<bool> done{false};
  Status result;
  std::thread reader([&] {
    result = (*c)->Read(BarIndex::kBar0, 0, 4, 0).status();
    done = true;
  });
  while (server_->mmio_requests() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  server_->Stop();  // the serving thread returns: the connection's socket closes
  // Generous: without watching the socket the call would wait forever.
  for (int i = 0; i < 3000 && !done; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (!done) {
    server_.reset();  // unreachable unless the test fails; the reader stays blocked
    reader.detach();
    FAIL() << "the call still waits for an aggregator that is gone";
  }
  reader.join();
  EXPECT_EQ(result.code(), StatusCode::kUnavailable) << result.ToString();
  EXPECT_FALSE((*c)->PollEvent().ok()) << "the connection is broken for good";
}

TEST_F(IpcConnectionTest, GarbageFromTheAggregatorIsDataLossOnTheSocket) {
  server_->set_offer_fast_lane(false);
  auto c = Connect();
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE((*c)->on_fast_lane());
  server_->set_behaviour(FakeAggregatorServer::Behaviour::kGarbage);
  EXPECT_EQ((*c)->Read(BarIndex::kBar0, 0, 4, 0).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ((*c)->Write(BarIndex::kBar0, 0, 4, 0, 0).code(), StatusCode::kDataLoss);
}

TEST_F(IpcConnectionTest, GarbageFromTheAggregatorIsDataLossInTheFastLane) {
  auto c = Connect();
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->on_fast_lane());
  EXPECT_EQ(*(*c)->Read(BarIndex::kBar0, 0x10, 1, 0), FakePatternByte(BarIndex::kBar0, 0x10));
  server_->set_behaviour(FakeAggregatorServer::Behaviour::kGarbage);
  EXPECT_EQ((*c)->Read(BarIndex::kBar0, 0, 4, 0).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ((*c)->Write(BarIndex::kBar0, 0, 4, 0, 0).code(), StatusCode::kDataLoss);
}

TEST_F(IpcConnectionTest, TheFastLaneAndTheSocketCarryTheSameConversation) {
  auto lane = Connect();
  server_->set_offer_fast_lane(false);  // the next connection (after this one ends) goes without
  ASSERT_TRUE(lane.ok());
  ASSERT_TRUE((*lane)->on_fast_lane());
  ASSERT_TRUE((*lane)->Write(BarIndex::kBar1, 0x2001, 2, 0xbeef, 0).ok());
  EXPECT_EQ(*(*lane)->Read(BarIndex::kBar1, 0x2001, 2, 0), 0xbeefu);
  // Notifications still come over the socket while MMIO uses the lane.
  ASSERT_TRUE(server_->SendToDm({0, ipc::Interrupt{true}}).ok());
  auto irq = NextEvent(**lane);
  ASSERT_TRUE(irq.has_value());
  EXPECT_TRUE(std::get<InterruptLevel>(*irq).asserted);
  EXPECT_GE(server_->mmio_requests(), 2u);
  lane->reset();
  auto plain = Connect();
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE((*plain)->on_fast_lane());
  EXPECT_EQ(*(*plain)->Read(BarIndex::kBar1, 0x2001, 2, 0), 0xbeefu) << "same aggregator state";
}

// Posted writes, on the fast lane and on the socket.
class IpcPostedWriteTest : public IpcConnectionTest, public ::testing::WithParamInterface<bool> {
 protected:
  Result<std::unique_ptr<IpcAggregatorConnection>> ConnectPosting() {
    IpcConnectOptions options{server_->path(), Config(), Token(), std::chrono::seconds(5)};
    options.use_fast_lane = GetParam();
    auto c = IpcAggregatorConnection::Connect(options);
    if (c.ok() && (*c)->on_fast_lane() != GetParam()) return Status::Internal("wrong path");
    return c;
  }
  // Waits (bounded) until the server has taken in `n` MMIO requests.
  bool ServerSaw(uint64_t n) {
    for (int i = 0; i < 500 && server_->mmio_requests() < n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return server_->mmio_requests() >= n;
  }
};

TEST_P(IpcPostedWriteTest, APostedWriteReturnsBeforeItsAcknowledgementWhichTheNextAccessAwaits) {
  auto c = ConnectPosting();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  server_->Hold();  // the aggregator takes requests in but answers nothing
  ASSERT_TRUE((*c)->PostWrite(BarIndex::kBar1, 0x1040, 4, 0x600d, 0).ok());
  EXPECT_TRUE((*c)->write_posted());
  ASSERT_TRUE(ServerSaw(1)) << "the write went out";
  // The next access (another thread plays the device model's next trap) must wait for the
  // acknowledgement: nothing comes back while the aggregator holds it.
  std::atomic<bool> done{false};
  Result<uint64_t> read = Status::Internal("not read");
  std::thread next([&] {
    read = (*c)->Read(BarIndex::kBar1, 0x1040, 4, 0);
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(done) << "the read overtook the posted write";
  EXPECT_EQ(server_->mmio_requests(), 1u) << "the read was sent before the write's acknowledgement";
  server_->Release();
  next.join();
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, 0x600du) << "the read sees the write";
  EXPECT_FALSE((*c)->write_posted());
  EXPECT_TRUE((*c)->Settle().ok());
  EXPECT_TRUE((*c)->Teardown(ipc::TeardownReason::kNormal).ok());
}

TEST_P(IpcPostedWriteTest, ARefusedPostedWriteIsReportedBySettleAndBreaksNothing) {
  server_->RefuseWritesAt(1, 0x40);
  auto c = ConnectPosting();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE((*c)->PostWrite(BarIndex::kBar1, 0x40, 4, 1, 0).ok());
  const Status settled = (*c)->Settle();
  EXPECT_EQ(settled.code(), StatusCode::kPermissionDenied) << settled.ToString();
  EXPECT_TRUE((*c)->Settle().ok()) << "reported once";
  // Refused and then overtaken by a read: the refusal waits for the next Settle.
  ASSERT_TRUE((*c)->PostWrite(BarIndex::kBar1, 0x40, 4, 1, 0).ok());
  EXPECT_TRUE((*c)->Read(BarIndex::kBar1, 0x44, 4, 0).ok());
  EXPECT_EQ((*c)->Settle().code(), StatusCode::kPermissionDenied);
  ASSERT_TRUE((*c)->PostWrite(BarIndex::kBar1, 0x48, 4, 2, 0).ok());
  EXPECT_TRUE((*c)->Settle().ok());
  EXPECT_EQ(*(*c)->Read(BarIndex::kBar1, 0x48, 4, 0), 2u);
}

TEST_P(IpcPostedWriteTest, AnIdleDeviceModelCollectsTheAcknowledgementAndTearsDownCleanly) {
  auto c = ConnectPosting();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE((*c)->PostWrite(BarIndex::kBar1, 0x80, 4, 3, 0).ok());
  if (!GetParam()) {
    // On the socket the acknowledgement wakes the device model's event loop like a notification;
    // PollEvent takes it in (no "reply nobody asked for") and reports no event.
    for (int i = 0; i < 200 && (*c)->write_posted(); ++i) {
      pollfd pfd{(*c)->event_fd(), POLLIN, 0};
      ::poll(&pfd, 1, 10);
      auto e = (*c)->PollEvent();
      ASSERT_TRUE(e.ok()) << e.status().ToString();
      EXPECT_FALSE(e->has_value());
    }
    EXPECT_FALSE((*c)->write_posted());
    EXPECT_TRUE((*c)->Settle().ok());
  }
  // TEARDOWN's reply is not mistaken for the write's, nor the other way round.
  ASSERT_TRUE((*c)->PostWrite(BarIndex::kBar1, 0x84, 4, 4, 0).ok());
  EXPECT_TRUE((*c)->Teardown(ipc::TeardownReason::kNormal).ok());
  EXPECT_FALSE((*c)->write_posted());
  EXPECT_EQ(server_->mmio_requests(), 2u);
}

TEST_P(IpcPostedWriteTest, TheAggregatorsOwnRequestsAreNeverTakenForTheAcknowledgement) {
  auto c = ConnectPosting();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  server_->Hold();
  ASSERT_TRUE((*c)->PostWrite(BarIndex::kBar1, 0x2000, 4, 5, 0).ok());
  ASSERT_TRUE(ServerSaw(1));
  // BAR_MAPs numbered in the aggregator's own seq space, one of them with the posted write's seq
  // (whatever it is: the handshake used a few): requests, not the reply.
  UniqueFd memfd(::memfd_create("aperture", MFD_CLOEXEC));
  const int fds[] = {memfd.get()};
  for (uint32_t seq = 1; seq <= 8; ++seq) {
    ASSERT_TRUE(server_->SendToDm({seq, ipc::BarMap{ipc::Bar::kBar1, 0, 0x1000, 0}}, fds).ok());
  }
  for (uint32_t seq = 1; seq <= 8; ++seq) {
    auto map = NextEvent(**c);
    ASSERT_TRUE(map.has_value()) << "seq " << seq;
    EXPECT_EQ(std::get<BarMapRequest>(*map).seq, seq);
  }
  EXPECT_TRUE((*c)->write_posted());
  server_->Release();
  EXPECT_TRUE((*c)->Settle().ok());
  EXPECT_EQ(*(*c)->Read(BarIndex::kBar1, 0x2000, 4, 0), 5u);
}

// The whole device-model path: the guest's doorbell store completes while the aggregator still
// holds its answer; the guest's next access (a read of what it wrote) is served only after it.
TEST_P(IpcPostedWriteTest, TheDeviceModelCompletesTheGuestsWriteBeforeTheAggregatorAnswers) {
  auto c = ConnectPosting();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  testing::RecordingIoreqServer hypervisor;
  auto dm = DeviceModel::Create(DeviceModelConfig{}, &hypervisor, c->get(), nullptr);
  ASSERT_TRUE(dm.ok()) << dm.status().ToString();
  auto access = [](hv::IoSpace space, hv::IoDirection dir, uint64_t addr, uint32_t size,
                   uint64_t data) {
    hv::IoRequest r;
    r.space = space;
    r.dir = dir;
    r.addr = addr;
    r.size = size;
    r.count = 1;
    r.data = data;
    r.sbdf = kDefaultSbdf;
    return r;
  };
  constexpr uint64_t kBar1At = 0xe0000000;
  (*dm)->Handle(access(hv::IoSpace::kPciConfig, hv::IoDirection::kWrite, kPciBar1, 4, kBar1At));
  (*dm)->Handle(access(hv::IoSpace::kPciConfig, hv::IoDirection::kWrite, kPciBar1 + 4, 4, 0));
  (*dm)->Handle(
      access(hv::IoSpace::kPciConfig, hv::IoDirection::kWrite, kPciCommand, 2, kCommandMemory));
  server_->Hold();
  // On its own thread, so a device model that waited for the acknowledgement fails the test
  // instead of hanging it.
  std::atomic<bool> wrote{false};
  std::thread write([&] {
    (*dm)->Handle(access(hv::IoSpace::kMmio, hv::IoDirection::kWrite, kBar1At + 0x1040, 4, 0xfeed));
    // What RunOnce does once the guest's request is completed: the write goes out, and nothing
    // waits for its answer.
    (*dm)->SendPostedWrite();
    wrote = true;
  });
  for (int i = 0; i < 500 && !wrote; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const bool completed_while_held = wrote;
  if (!completed_while_held) server_->Release();
  write.join();
  ASSERT_TRUE(completed_while_held) << "the guest's write waited for the aggregator's answer";
  EXPECT_TRUE((*dm)->write_posted()) << "completed without the acknowledgement";
  ASSERT_TRUE(ServerSaw(1));
  std::atomic<bool> done{false};
  uint64_t value = 0;
  std::thread next([&] {
    value =
        (*dm)->Handle(access(hv::IoSpace::kMmio, hv::IoDirection::kRead, kBar1At + 0x1040, 4, 0));
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(done) << "the guest's read was served before the posted write was acknowledged";
  server_->Release();
  next.join();
  EXPECT_EQ(value, 0xfeedu);
  EXPECT_FALSE((*dm)->write_posted());
  EXPECT_EQ((*dm)->posted_writes(), 1u);
  EXPECT_EQ((*dm)->counters().Snapshot().refused_total(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Paths, IpcPostedWriteTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? std::string("FastLane") : std::string("Socket");
                         });

TEST_F(IpcConnectionTest, NotificationsAndRequestsFromTheAggregator) {
  auto c = Connect();
  ASSERT_TRUE(c.ok());
  // An interrupt that arrives while we wait for a reply is kept for PollEvent.
  ASSERT_TRUE(server_->SendToDm({0, ipc::Interrupt{true}}).ok());
  EXPECT_TRUE((*c)->Read(BarIndex::kBar0, 0, 4, 0).ok());
  auto irq = NextEvent(**c);
  ASSERT_TRUE(irq.has_value());
  EXPECT_TRUE(std::get<InterruptLevel>(*irq).asserted);

  ASSERT_TRUE(server_->SendToDm({9, ipc::Ping{1234}}).ok());
  UniqueFd memfd(::memfd_create("aperture", MFD_CLOEXEC));
  const int fds[] = {memfd.get()};
  ASSERT_TRUE(server_->SendToDm({10, ipc::BarMap{ipc::Bar::kBar1, 0, 0x10000, 0}}, fds).ok());
  auto map = NextEvent(**c);
  ASSERT_TRUE(map.has_value());
  const auto& request = std::get<BarMapRequest>(*map);
  EXPECT_EQ(request.seq, 10u);
  EXPECT_EQ(request.length, 0x10000u);
  ASSERT_TRUE((*c)->AnswerBarRequest(10, Status::Unimplemented("not yet")).ok());

  ASSERT_TRUE(server_->SendToDm({11, ipc::Teardown{ipc::TeardownReason::kAggregatorExit}}).ok());
  auto teardown = NextEvent(**c);
  ASSERT_TRUE(teardown.has_value());
  EXPECT_TRUE(std::holds_alternative<TeardownRequest>(*teardown));

  for (int i = 0; i < 200 && server_->received().size() < 6; ++i) ::usleep(5000);
  bool pong = false, error = false;
  for (const ipc::Message& m : server_->received()) {
    if (const auto* p = std::get_if<ipc::Pong>(&m.body)) pong = m.seq == 9 && p->nonce == 1234;
    if (const auto* e = std::get_if<ipc::Error>(&m.body)) {
      error = m.seq == 10 && e->code == StatusCode::kUnimplemented;
    }
  }
  EXPECT_TRUE(pong);
  EXPECT_TRUE(error);
}

TEST_F(IpcConnectionTest, GuestMemoryTravelsWithItsDescriptor) {
  auto c = Connect();
  ASSERT_TRUE(c.ok());
  UniqueFd memfd(::memfd_create("ram", MFD_CLOEXEC));
  ASSERT_TRUE((*c)->SendGuestMemory(ipc::GuestMemoryKind::kLocalMemfd, 1 << 20, memfd.get()).ok());
  ASSERT_TRUE((*c)->SendGuestMemory(ipc::GuestMemoryKind::kXenDomain, 1 << 20, -1).ok());
  EXPECT_EQ((*c)->SendGuestMemory(ipc::GuestMemoryKind::kXenDomain, 100, -1).code(),
            StatusCode::kInvalidArgument);
}

// An aggregator that refuses us hangs up right after its fatal ERROR, with our HELLO and AUTH
// unread: our next receive fails with ECONNRESET. What we report is its reason, not the reset.
TEST(IpcConnectionRefusalTest, TheRefusalsReasonReachesTheDeviceModelNotTheReset) {
  for (const StatusCode code : {StatusCode::kPermissionDenied, StatusCode::kResourceExhausted}) {
    const std::string path = UniquePath();
    Result<UniqueFd> listen = os::ListenSeqpacket(path);
    ASSERT_TRUE(listen.ok());
    std::atomic<int> refused{0};
    std::thread refuser([&] {
      // Refuse every attempt (a ResourceExhausted refusal before AUTH is tried three times).
      for (int i = 0; i < (code == StatusCode::kResourceExhausted ? 3 : 1); ++i) {
        pollfd pfd{listen->get(), POLLIN, 0};
        if (::poll(&pfd, 1, 5000) != 1) return;
        UniqueFd c(::accept4(listen->get(), nullptr, nullptr, SOCK_CLOEXEC));
        pollfd hello{c.get(), POLLIN, 0};
        ::poll(&hello, 1, 5000);  // HELLO and AUTH are queued: closing now resets the peer
        ::usleep(2000);
        auto bytes = ipc::Encode({0, ipc::Error{code, "uid 4242 may not connect: go away"}});
        ASSERT_TRUE(bytes.ok());
        ASSERT_TRUE(os::SendWithFds(c.get(), *bytes, {}).ok());
        ++refused;
      }
    });
    auto c = IpcAggregatorConnection::Connect({path, Config(), Token()});
    refuser.join();
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), code) << c.status().ToString();
    EXPECT_NE(c.status().message().find("uid 4242 may not connect: go away"), std::string::npos)
        << c.status().ToString();
    EXPECT_EQ(refused, code == StatusCode::kResourceExhausted ? 3 : 1)
        << "pushed out before AUTH got through: tried again";
  }
}

}  // namespace
}  // namespace gpuvm::dm
