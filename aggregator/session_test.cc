// The protocol state machine, driven message by message as a hostile or broken device model could:
// the conversation of docs/IPC.md, what each violation costs, the fast lane's checks, interrupts.
#include "aggregator/session.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <tuple>

#include "aggregator/sim_gpu.h"
#include "aggregator/testing/unthreaded_sim.h"
#include "gpu/hw/pbus.h"
#include "gpu/hw/pfifo.h"
#include "gpu/hw/pmc.h"

namespace gpuvm::aggregator {
namespace {

using os::UniqueFd;

class AggregatorSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto gpu = SimGpu::Create(testing::UnthreadedSim(64ull << 20));
    ASSERT_TRUE(gpu.ok());
    sim_ = gpu->get();
    auto aggregator = Aggregator::Create(std::move(*gpu));
    ASSERT_TRUE(aggregator.ok());
    aggregator_ = std::move(*aggregator);
  }

  static ipc::VmConfig Config(uint16_t domid = 1) {
    ipc::VmConfig c;
    c.domid = domid;
    c.vcpus = 2;
    c.guest_ram_bytes = 1ull << 20;
    c.bar0_size = 16ull << 20;
    c.bar1_size = 128ull << 20;
    c.bar3_size = 64ull << 20;
    c.name = "vm" + std::to_string(domid);
    return c;
  }

  // `m` is an error and the session closed (a fatal mistake of the device model).
  static void ExpectFatal(const ipc::Message& m, bool closed) {
    ASSERT_NE(AsError(m), nullptr);
    EXPECT_TRUE(closed);
  }

  // Sends one message; expects exactly one reply and returns it.
  ipc::Message Call(Session& s, ipc::Body body, std::vector<UniqueFd> fds = {},
                    bool* closed = nullptr) {
    Session::Output out = s.OnMessage(ipc::Message{++seq_, std::move(body)}, std::move(fds));
    EXPECT_EQ(out.send.size(), 1u);
    if (closed != nullptr) *closed = out.close;
    return out.send.empty() ? ipc::Message{} : out.send[0];
  }

  // A token the aggregator issued for `domid`, as the control socket hands one out.
  ipc::VmToken Token(uint16_t domid) {
    Result<ipc::VmToken> t = aggregator_->vm_tokens().Issue(domid);
    EXPECT_TRUE(t.ok());
    return t.ok() ? *t : ipc::VmToken{};
  }

  // HELLO and AUTH with a token for `domid`.
  void Authenticate(Session& s, uint16_t domid = 1) {
    ASSERT_TRUE(std::holds_alternative<ipc::HelloAck>(
        Call(s, ipc::Hello{ipc::kProtocolVersion, ipc::kProtocolVersion, "test"}).body));
    ASSERT_EQ(s.state(), Session::State::kAwaitAuth);
    ASSERT_TRUE(std::holds_alternative<ipc::AuthAck>(Call(s, ipc::Auth{Token(domid)}).body));
    ASSERT_TRUE(s.authenticated());
  }

  void Handshake(Session& s, uint16_t domid = 1) {
    Authenticate(s, domid);
    ipc::Message accept = Call(s, Config(domid));
    const auto* a = std::get_if<ipc::VmAccept>(&accept.body);
    ASSERT_NE(a, nullptr) << ipc::MessageTypeName(ipc::TypeOf(accept.body));
    EXPECT_EQ(a->flags, ipc::kAcceptWantsGuestMemory | ipc::kAcceptFastLane);
    EXPECT_EQ(a->vram_bytes, 64ull << 20);
    ASSERT_EQ(s.state(), Session::State::kActive);
  }

  // GUEST_MEMORY with a sealed 1 MiB memfd, as Config() announces; its reply.
  ipc::Message AttachRam(Session& s) {
    auto ram = os::CreateSealedMemfd("ram", 1ull << 20);
    EXPECT_TRUE(ram.ok());
    std::vector<UniqueFd> fds;
    if (ram.ok()) fds.push_back(std::move(*ram));
    return Call(s, ipc::GuestMemory{ipc::GuestMemoryKind::kLocalMemfd, 1ull << 20}, std::move(fds));
  }

  static const ipc::Error* AsError(const ipc::Message& m) {
    return std::get_if<ipc::Error>(&m.body);
  }

  SimGpu* sim_ = nullptr;
  std::unique_ptr<Aggregator> aggregator_;
  uint32_t seq_ = 0;
};

TEST_F(AggregatorSessionTest, FullConversation) {
  Session s(aggregator_.get(), "test");
  Handshake(s);
  EXPECT_EQ(aggregator_->vm_count(), 1u);
  EXPECT_TRUE(std::holds_alternative<ipc::GuestMemoryAck>(AttachRam(s).body));

  ipc::Message ack = Call(s, ipc::MmioWrite{ipc::Bar::kBar0, 4, 1, gf100::pbus::kPraminBase, 0x77});
  EXPECT_TRUE(std::holds_alternative<ipc::MmioWriteAck>(ack.body));
  EXPECT_EQ(ack.seq, seq_) << "a reply carries its request's seq";
  ipc::Message value = Call(s, ipc::MmioRead{ipc::Bar::kBar0, 4, 0, gf100::pbus::kPraminBase});
  ASSERT_TRUE(std::holds_alternative<ipc::MmioReadReply>(value.body));
  EXPECT_EQ(std::get<ipc::MmioReadReply>(value.body).value, 0x77u);
  EXPECT_EQ(std::get<ipc::Pong>(Call(s, ipc::Ping{99}).body).nonce, 99u);
  EXPECT_EQ(s.vm()->counters.reads[0], 1u);
  EXPECT_EQ(s.vm()->counters.writes[0], 1u);

  bool closed = false;
  EXPECT_TRUE(std::holds_alternative<ipc::TeardownAck>(
      Call(s, ipc::Teardown{ipc::TeardownReason::kNormal}, {}, &closed).body));
  EXPECT_TRUE(closed);
  EXPECT_EQ(s.state(), Session::State::kClosed);
  EXPECT_EQ(aggregator_->vm_count(), 0u);
  EXPECT_EQ(sim_->resets(), 1u);
  EXPECT_TRUE(s.summary().had_vm);
  EXPECT_EQ(s.summary().counters.writes[0], 1u);
}

TEST_F(AggregatorSessionTest, RequestsOutOfTurnEndTheSession) {
  {
    Session s(aggregator_.get(), "test");
    bool closed = false;
    ipc::Message m = Call(s, ipc::MmioRead{ipc::Bar::kBar0, 4, 0, 0}, {}, &closed);
    ASSERT_NE(AsError(m), nullptr);
    EXPECT_EQ(AsError(m)->code, StatusCode::kFailedPrecondition);
    EXPECT_EQ(m.seq, seq_);
    EXPECT_TRUE(closed);
  }
  {
    Session s(aggregator_.get(), "test");
    Handshake(s);
    bool closed = false;
    ipc::Message m = Call(s, ipc::Hello{1, 1, "again"}, {}, &closed);
    ASSERT_NO_FATAL_FAILURE(ExpectFatal(m, closed));
    EXPECT_EQ(aggregator_->vm_count(), 0u) << "the closed session's VM stayed";
  }
}

TEST_F(AggregatorSessionTest, NoCommonVersionIsRefused) {
  Session s(aggregator_.get(), "test");
  bool closed = false;
  const ipc::Hello future{ipc::kProtocolVersion + 1, ipc::kProtocolVersion + 3, "future"};
  ipc::Message m = Call(s, future, {}, &closed);
  ASSERT_NE(AsError(m), nullptr);
  EXPECT_NE(AsError(m)->text.find("no common protocol version"), std::string::npos);
  EXPECT_TRUE(closed);
}

TEST_F(AggregatorSessionTest, OldDeviceModelsAreToldToUpgrade) {
  for (const uint16_t max : {1, 2, 4, 5}) {
    Session s(aggregator_.get(), "test");
    bool closed = false;
    ipc::Message m = Call(s, ipc::Hello{1, max, "old gpuvm-dm"}, {}, &closed);
    ASSERT_NE(AsError(m), nullptr);
    EXPECT_EQ(AsError(m)->code, StatusCode::kFailedPrecondition);
    EXPECT_NE(AsError(m)->text.find("no common protocol version"), std::string::npos);
    EXPECT_NE(AsError(m)->text.find("upgrade gpuvm-dm"), std::string::npos) << AsError(m)->text;
    EXPECT_TRUE(closed);
  }
}

TEST_F(AggregatorSessionTest, NegotiatesTheHighestCommonVersion) {
  for (auto [min, max, want] :
       {std::tuple{6, 6, 6}, std::tuple{1, 6, 6}, std::tuple{5, 9, int{ipc::kProtocolVersion}}}) {
    Session s(aggregator_.get(), "test");
    ipc::Message m = Call(s, ipc::Hello{uint16_t(min), uint16_t(max), "x"});
    ASSERT_TRUE(std::holds_alternative<ipc::HelloAck>(m.body));
    EXPECT_EQ(std::get<ipc::HelloAck>(m.body).version, want);
    EXPECT_EQ(s.version(), want);
  }
}

TEST_F(AggregatorSessionTest, BlocksMoveConsecutiveElements) {
  Session s(aggregator_.get(), "test");
  Handshake(s);
  ASSERT_EQ(s.version(), ipc::kProtocolVersion);
  // PRAMIN window at VRAM 0x10000, then 64 bytes of it written and read back as 8 elements.
  ASSERT_TRUE(std::holds_alternative<ipc::MmioWriteAck>(
      Call(s, ipc::MmioWrite{ipc::Bar::kBar0, 4, 0, gf100::pbus::kPraminBase, 1}).body));
  std::vector<uint8_t> data(64);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(3 * i + 1);
  ipc::Message ack = Call(
      s, ipc::MmioWriteBlock{ipc::Bar::kBar0, 8, 8, 1, gf100::pbus::kPraminWindow + 0x100, data});
  ASSERT_TRUE(std::holds_alternative<ipc::MmioWriteAck>(ack.body));
  ipc::Message back =
      Call(s, ipc::MmioReadBlock{ipc::Bar::kBar0, 4, 16, 0, gf100::pbus::kPraminWindow + 0x100});
  ASSERT_TRUE(std::holds_alternative<ipc::MmioReadBlockReply>(back.body));
  EXPECT_EQ(std::get<ipc::MmioReadBlockReply>(back.body).data, data);
  EXPECT_EQ(s.vm()->counters.writes[0], 9u);  // elements, as single accesses would count
  EXPECT_EQ(s.vm()->counters.reads[0], 16u);
  // A block that runs off the BAR is refused whole, and the session goes on.
  bool closed = true;
  ipc::Message past = Call(s,
                           ipc::MmioWriteBlock{ipc::Bar::kBar3, 8, 2, 0, (64ull << 20) - 8,
                                               std::vector<uint8_t>(16, 0xee)},
                           {}, &closed);
  ASSERT_NE(AsError(past), nullptr);
  EXPECT_EQ(AsError(past)->code, StatusCode::kOutOfRange);
  EXPECT_FALSE(closed);
}

TEST_F(AggregatorSessionTest, AFillStoresOneValueIntoConsecutiveElements) {
  Session s(aggregator_.get(), "test");
  Handshake(s, 1);
  ASSERT_EQ(s.version(), ipc::kProtocolVersion);
  ASSERT_TRUE(std::holds_alternative<ipc::MmioWriteAck>(
      Call(s, ipc::MmioWrite{ipc::Bar::kBar0, 4, 0, gf100::pbus::kPraminBase, 1}).body));
  // 3 x 4 bytes of the PRAMIN window (BAR0: element by element, as single writes).
  ASSERT_TRUE(std::holds_alternative<ipc::MmioWriteAck>(
      Call(s, ipc::MmioWriteFill{ipc::Bar::kBar0, 4, 3, 1, gf100::pbus::kPraminWindow + 0x200,
                                 0xa1b2c3d4})
          .body));
  ipc::Message back =
      Call(s, ipc::MmioReadBlock{ipc::Bar::kBar0, 4, 4, 0, gf100::pbus::kPraminWindow + 0x200});
  ASSERT_TRUE(std::holds_alternative<ipc::MmioReadBlockReply>(back.body));
  const std::vector<uint8_t> want = {0xd4, 0xc3, 0xb2, 0xa1, 0xd4, 0xc3, 0xb2, 0xa1,
                                     0xd4, 0xc3, 0xb2, 0xa1, 0,    0,    0,    0};
  EXPECT_EQ(std::get<ipc::MmioReadBlockReply>(back.body).data, want);
  EXPECT_EQ(s.vm()->counters.writes[0], 4u);  // the base register and three elements
  // One that runs off the BAR is refused whole, and the session goes on.
  bool closed = true;
  ipc::Message past =
      Call(s, ipc::MmioWriteFill{ipc::Bar::kBar3, 8, 2, 0, (64ull << 20) - 8, 0}, {}, &closed);
  ASSERT_NE(AsError(past), nullptr);
  EXPECT_EQ(AsError(past)->code, StatusCode::kOutOfRange);
  EXPECT_FALSE(closed);
}

// Nothing is charged before AUTH: no VM, no channel, no VRAM. Everything but a valid token of
// the announced domain is PermissionDenied, and the session ends.
TEST_F(AggregatorSessionTest, NothingIsAdmittedWithoutTheVmsToken) {
  const auto hello = [&](Session& s) {
    ASSERT_TRUE(std::holds_alternative<ipc::HelloAck>(
        Call(s, ipc::Hello{ipc::kProtocolVersion, ipc::kProtocolVersion, "x"}).body));
  };
  const auto expect_denied = [&](const ipc::Message& m, bool closed, const std::string& text) {
    ASSERT_NE(AsError(m), nullptr);
    EXPECT_EQ(AsError(m)->code, StatusCode::kPermissionDenied) << AsError(m)->text;
    EXPECT_NE(AsError(m)->text.find(text), std::string::npos) << AsError(m)->text;
    EXPECT_EQ(m.seq, seq_);
    EXPECT_TRUE(closed);
    EXPECT_EQ(aggregator_->vm_count(), 0u);
  };
  bool closed = false;
  {  // Straight to VM_CONFIG, as a device model of version 4 would.
    Session s(aggregator_.get(), "no auth");
    hello(s);
    ipc::Message m = Call(s, Config(), {}, &closed);
    expect_denied(m, closed, "VM_CONFIG before AUTH");
  }
  {  // MMIO before AUTH.
    Session s(aggregator_.get(), "mmio");
    hello(s);
    ipc::Message m = Call(s, ipc::MmioRead{ipc::Bar::kBar0, 4, 0, 0}, {}, &closed);
    expect_denied(m, closed, "before AUTH");
  }
  {  // A guessed token.
    Session s(aggregator_.get(), "guess");
    hello(s);
    ipc::VmToken guess{};
    guess.fill(0x17);
    ipc::Message m = Call(s, ipc::Auth{guess}, {}, &closed);
    expect_denied(m, closed, "unknown, used or expired");
    EXPECT_FALSE(s.authenticated());
  }
  {  // Another domain's token.
    Session s(aggregator_.get(), "other domain");
    Authenticate(s, 5);
    EXPECT_FALSE(s.established());
    ipc::Message m = Call(s, Config(6), {}, &closed);
    expect_denied(m, closed, "issued for domain 5, not 6");
  }
  {  // A token that opened a session already.
    const ipc::VmToken once = Token(7);
    Session first(aggregator_.get(), "first");
    hello(first);
    ASSERT_TRUE(std::holds_alternative<ipc::AuthAck>(Call(first, ipc::Auth{once}).body));
    Session replay(aggregator_.get(), "replay");
    hello(replay);
    ipc::Message m = Call(replay, ipc::Auth{once}, {}, &closed);
    expect_denied(m, closed, "unknown, used or expired");
  }
  {  // AUTH before HELLO, and twice.
    Session s(aggregator_.get(), "early");
    ipc::Message m = Call(s, ipc::Auth{Token(1)}, {}, &closed);
    ASSERT_NO_FATAL_FAILURE(ExpectFatal(m, closed));
    Session twice(aggregator_.get(), "twice");
    Authenticate(twice, 1);
    m = Call(twice, ipc::Auth{Token(1)}, {}, &closed);
    ASSERT_NO_FATAL_FAILURE(ExpectFatal(m, closed));
  }
  EXPECT_EQ(aggregator_->vm_count(), 0u);
}

TEST_F(AggregatorSessionTest, EstablishedOnlyOnceItsGuestMemoryIsAttached) {
  Session s(aggregator_.get(), "test");
  Handshake(s);
  EXPECT_TRUE(s.authenticated());
  EXPECT_FALSE(s.established()) << "admitted, but the server's handshake deadline still runs";
  ASSERT_TRUE(std::holds_alternative<ipc::GuestMemoryAck>(AttachRam(s).body));
  EXPECT_TRUE(s.established());
}

TEST_F(AggregatorSessionTest, WhatOnlyTheAggregatorSendsIsFatal) {
  const ipc::Body bodies[] = {ipc::HelloAck{1},     ipc::VmAccept{1, 0, 0},
                              ipc::Interrupt{true}, ipc::MmioReadReply{5},
                              ipc::MmioWriteAck{},  ipc::BarMap{ipc::Bar::kBar1, 0, 4096, 0},
                              ipc::BarMapAck{},     ipc::Pong{1},
                              ipc::TeardownAck{},   ipc::MmioReadBlockReply{{1, 2, 3}}};
  for (const ipc::Body& body : bodies) {
    Session s(aggregator_.get(), "test");
    Handshake(s);
    Session::Output out = s.OnMessage(ipc::Message{++seq_, body}, {});
    ASSERT_EQ(out.send.size(), 1u);
    ASSERT_NE(AsError(out.send[0]), nullptr);
    EXPECT_EQ(out.send[0].seq, 0u) << "fatal errors are notifications";
    EXPECT_TRUE(out.close);
    EXPECT_EQ(aggregator_->vm_count(), 0u);
  }
}

TEST_F(AggregatorSessionTest, BadAccessesAreAnsweredAndCountedButTheSessionGoesOn) {
  Session s(aggregator_.get(), "test");
  Handshake(s);
  bool closed = true;
  ipc::Message m =
      Call(s, ipc::MmioRead{ipc::Bar::kBar3, 8, 0, (64ull << 20) - 4}, {}, &closed);  // past BAR3
  ASSERT_NE(AsError(m), nullptr);
  EXPECT_EQ(AsError(m)->code, StatusCode::kOutOfRange);
  EXPECT_FALSE(closed);
  m = Call(s, ipc::MmioWrite{ipc::Bar::kBar0, 4, 2, 0x1700, 1}, {}, &closed);  // vCPU 2 of 2
  ASSERT_NE(AsError(m), nullptr);
  EXPECT_EQ(AsError(m)->code, StatusCode::kInvalidArgument);
  EXPECT_FALSE(closed);
  EXPECT_EQ(s.vm()->counters.refused, 2u);
  EXPECT_EQ(sim_->device().ReadReg(gf100::pbus::kPraminBase), 0u) << "a refused write went through";
}

TEST_F(AggregatorSessionTest, GuestMemoryTwiceOrBrokenEndsTheSession) {
  Session s(aggregator_.get(), "test");
  Handshake(s);
  std::vector<UniqueFd> fds;
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  ::close(pipe_fds[1]);
  fds.emplace_back(pipe_fds[0]);
  bool closed = false;
  ipc::Message m = Call(s, ipc::GuestMemory{ipc::GuestMemoryKind::kLocalMemfd, 1ull << 20},
                        std::move(fds), &closed);
  ASSERT_NO_FATAL_FAILURE(ExpectFatal(m, closed));
  EXPECT_EQ(aggregator_->vm_count(), 0u);
}

TEST_F(AggregatorSessionTest, FastLaneCarriesOnlyMmio) {
  Session s(aggregator_.get(), "test");
  Handshake(s);
  auto lane = ipc::FastLane::Create();
  ASSERT_TRUE(lane.ok());
  std::vector<UniqueFd> fds;
  for (int fd : (*lane)->fds()) fds.push_back(std::move(*os::DuplicateFd(fd)));
  Session::Output out = s.OnMessage(ipc::Message{++seq_, ipc::FastLaneOffer{1}}, std::move(fds));
  ASSERT_EQ(out.send.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<ipc::FastLaneAck>(out.send[0].body));
  EXPECT_TRUE(out.lane_opened);
  ASSERT_NE(s.lane(), nullptr);

  auto reply = s.OnLaneMessage(ipc::Message{7, ipc::MmioWrite{ipc::Bar::kBar0, 4, 0, 0x1700, 3}});
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->seq, 7u);
  EXPECT_TRUE(std::holds_alternative<ipc::MmioWriteAck>(reply->body));
  auto bad = s.OnLaneMessage(ipc::Message{8, ipc::Ping{1}});
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  // A second lane is refused.
  auto other = ipc::FastLane::Create();
  std::vector<UniqueFd> more;
  for (int fd : (*other)->fds()) more.push_back(std::move(*os::DuplicateFd(fd)));
  bool closed = false;
  EXPECT_NE(AsError(Call(s, ipc::FastLaneOffer{1}, std::move(more), &closed)), nullptr);
  EXPECT_TRUE(closed);
}

TEST_F(AggregatorSessionTest, FastLaneDoorbellsMustBeEventfds) {
  Session s(aggregator_.get(), "test");
  Handshake(s);
  auto lane = ipc::FastLane::Create();
  ASSERT_TRUE(lane.ok());
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  std::vector<UniqueFd> fds;
  fds.push_back(std::move(*os::DuplicateFd((*lane)->fds()[0])));
  fds.emplace_back(pipe_fds[0]);
  fds.emplace_back(pipe_fds[1]);  // a pipe nobody drains: our doorbell writes would block
  bool closed = false;
  ipc::Message m = Call(s, ipc::FastLaneOffer{1}, std::move(fds), &closed);
  ASSERT_NE(AsError(m), nullptr);
  EXPECT_NE(AsError(m)->text.find("not an eventfd"), std::string::npos);
  EXPECT_TRUE(closed);
}

TEST_F(AggregatorSessionTest, SecondPtSessionIsRefusedWithAClearError) {
  Session first(aggregator_.get(), "first");
  Handshake(first, 1);
  Session second(aggregator_.get(), "second");
  Authenticate(second, 2);
  bool closed = false;
  ipc::Message m = Call(second, Config(2), {}, &closed);
  ASSERT_NE(AsError(m), nullptr);
  EXPECT_EQ(AsError(m)->code, StatusCode::kFailedPrecondition);
  EXPECT_NE(AsError(m)->text.find("a second pt VM is refused"), std::string::npos);
  EXPECT_TRUE(closed);
  EXPECT_EQ(first.state(), Session::State::kActive);
  EXPECT_EQ(aggregator_->vm_count(), 1u);
}

TEST_F(AggregatorSessionTest, InterruptLevelChangesBecomeNotifications) {
  Session s(aggregator_.get(), "test");
  Handshake(s);
  EXPECT_FALSE(s.InterruptUpdate().has_value());
  namespace pf = gf100::pfifo;
  auto write = [&](uint32_t reg, uint32_t value) {
    ASSERT_TRUE(std::holds_alternative<ipc::MmioWriteAck>(
        Call(s, ipc::MmioWrite{ipc::Bar::kBar0, 4, 0, reg, value}).body));
  };
  write(gf100::pmc::kIntrEnHost, gf100::pmc::kIntrEnHardware);
  write(pf::kIntrEn, pf::kIntrChanTableError);
  write(pf::kChanTable, pf::kChanValid | pf::kChanInstMask);  // instance far outside VRAM
  std::optional<ipc::Message> up = s.InterruptUpdate();
  ASSERT_TRUE(up.has_value());
  EXPECT_EQ(up->seq, 0u);
  EXPECT_TRUE(std::get<ipc::Interrupt>(up->body).asserted);
  EXPECT_FALSE(s.InterruptUpdate().has_value()) << "the same level twice";
  write(pf::kIntr, pf::kIntrChanTableError);  // acknowledge
  std::optional<ipc::Message> down = s.InterruptUpdate();
  ASSERT_TRUE(down.has_value());
  EXPECT_FALSE(std::get<ipc::Interrupt>(down->body).asserted);
}

TEST_F(AggregatorSessionTest, DestroyingAnActiveSessionRemovesItsVm) {
  {
    Session s(aggregator_.get(), "test");
    Handshake(s);
  }
  EXPECT_EQ(aggregator_->vm_count(), 0u);
  EXPECT_EQ(sim_->resets(), 1u);
}

}  // namespace
}  // namespace gpuvm::aggregator
