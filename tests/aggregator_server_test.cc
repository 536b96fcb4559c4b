// The server over real sockets: device model connections (the dm's own IpcAggregatorConnection),
// the fast lane, the second pt VM refused, a device model that vanishes without a word (its VM is
// removed and the next one admitted), malformed packets, stalled handshakes, interrupts forwarded;
// who may connect (credentials, tokens) and what idle or silent connections cannot do
// (docs/SECURITY.md).
#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

#include "aggregator/server.h"
#include "aggregator/sim_gpu.h"
#include "gpu/hw/pbus.h"
#include "gpu/hw/pfifo.h"
#include "gpu/hw/pmc.h"
#include "ipc/channel.h"
#include "qemu-device/ipc_aggregator_connection.h"

namespace gpuvm::aggregator {
namespace {

using dm::BarIndex;

class AggregatorServerTest : public ::testing::Test {
 protected:
  void SetUp() override { StartServer({}); }
  void StartServer(std::vector<uid_t> allowed_uids, bool start = true) {
    server_.reset();
    path_ = "@gpuvm-aggregator-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::unique_ptr<Aggregator> aggregator;
    ASSERT_NO_FATAL_FAILURE(MakeAggregator(&aggregator));
    ServerOptions options;
    options.path = path_;
    options.handshake_timeout = std::chrono::milliseconds(300);
    options.allowed_uids = std::move(allowed_uids);
    options.log = nullptr;
    auto server = AggregatorServer::Create(std::move(aggregator), options);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    if (start) {
      ASSERT_TRUE(server_->Start().ok());
    }
  }
  void TearDown() override { server_.reset(); }

  // An aggregator on a 64 MiB software GPU without a compute engine.
  static void MakeAggregator(std::unique_ptr<Aggregator>* out) {
    SimGpuOptions o;
    o.vram_bytes = 64ull << 20;
    o.compute_engine = false;
    auto gpu = SimGpu::Create(o);
    ASSERT_TRUE(gpu.ok());
    auto aggregator = Aggregator::Create(std::move(*gpu));
    ASSERT_TRUE(aggregator.ok());
    *out = std::move(*aggregator);
  }

  dm::IpcConnectOptions Options(uint16_t domid, bool lane = true) {
    dm::IpcConnectOptions o;
    o.path = path_;
    o.vm.domid = domid;
    o.vm.vcpus = 1;
    o.vm.guest_ram_bytes = 1ull << 20;
    o.vm.bar0_size = 16ull << 20;
    o.vm.bar1_size = 128ull << 20;
    o.vm.bar3_size = 64ull << 20;
    o.vm.name = "vm" + std::to_string(domid);
    o.use_fast_lane = lane;
    o.timeout = std::chrono::seconds(10);
    o.token = Token(domid);
    return o;
  }
  // What the control socket's `vm-token DOMID` issues (VmTokens is thread-safe).
  ipc::VmToken Token(uint16_t domid) {
    Result<ipc::VmToken> t = server_->aggregator().vm_tokens().Issue(domid);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? *t : ipc::VmToken{};
  }

  // A device model's whole handshake: connected, authenticated, admitted, its guest memory
  // attached (else the server's 300 ms handshake deadline drops it).
  Result<std::unique_ptr<dm::IpcAggregatorConnection>> ConnectVm(uint16_t domid, bool lane = true) {
    const dm::IpcConnectOptions options = Options(domid, lane);
    GPUVM_ASSIGN_OR_RETURN(auto c, dm::IpcAggregatorConnection::Connect(options));
    GPUVM_ASSIGN_OR_RETURN(os::UniqueFd ram,
                           os::CreateSealedMemfd("ram", options.vm.guest_ram_bytes));
    GPUVM_RETURN_IF_ERROR(c->SendGuestMemory(ipc::GuestMemoryKind::kLocalMemfd,
                                             options.vm.guest_ram_bytes, ram.get()));
    return c;
  }

  // Connects, retrying while the GPU is still owned by a VM that is going away.
  std::unique_ptr<dm::IpcAggregatorConnection> ConnectEventually(uint16_t domid) {
    for (int attempt = 0; attempt < 500; ++attempt) {
      auto c = ConnectVm(domid);
      if (c.ok()) return std::move(*c);
      EXPECT_EQ(c.status().code(), StatusCode::kFailedPrecondition) << c.status().ToString();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "the GPU never became free";
    return nullptr;
  }

  std::string path_;
  std::unique_ptr<AggregatorServer> server_;
};

TEST_F(AggregatorServerTest, ServesMmioOverTheSocketAndTheFastLane) {
  for (bool lane : {false, true}) {
    auto c = ConnectVm(lane ? 2 : 1, lane);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ((*c)->on_fast_lane(), lane);
    EXPECT_EQ((*c)->accepted().vram_bytes, 64ull << 20);
    for (uint32_t v : {1u, 0x1234u, 0xffffffu}) {
      ASSERT_TRUE((*c)->Write(BarIndex::kBar0, gf100::pbus::kPraminBase, 4, v, 0).ok());
      auto back = (*c)->Read(BarIndex::kBar0, gf100::pbus::kPraminBase, 4, 0);
      ASSERT_TRUE(back.ok()) << back.status().ToString();
      EXPECT_EQ(*back, v);
    }
    // Refused accesses come back as errors, and the connection stays usable.
    auto past = (*c)->Read(BarIndex::kBar3, 64ull << 20, 4, 0);
    EXPECT_EQ(past.status().code(), StatusCode::kOutOfRange);
    EXPECT_TRUE((*c)->Read(BarIndex::kBar0, 0, 4, 0).ok());
    ASSERT_TRUE((*c)->Teardown(ipc::TeardownReason::kNormal).ok());
    c->reset();
    // The next VM must wait for the server to finish the teardown; it will.
  }
}

// The socket's name is taken at Create, but nobody can connect before Start: gpuvm-aggregator sets
// its control socket up in between, and whoever finds the VM socket ready must find that too.
TEST_F(AggregatorServerTest, NobodyConnectsBeforeStartButTheNameIsTaken) {
  StartServer({}, /*start=*/false);
  auto early = os::ConnectSeqpacket(path_);
  EXPECT_FALSE(early.ok());
  std::unique_ptr<Aggregator> aggregator;
  ASSERT_NO_FATAL_FAILURE(MakeAggregator(&aggregator));
  ServerOptions second;
  second.path = path_;
  second.log = nullptr;
  EXPECT_EQ(AggregatorServer::Create(std::move(aggregator), second).status().code(),
            StatusCode::kAlreadyExists);
  ASSERT_TRUE(server_->Start().ok());
  auto c = dm::IpcAggregatorConnection::Connect(Options(1));
  EXPECT_TRUE(c.ok()) << c.status().ToString();
}

TEST_F(AggregatorServerTest, RepTransfersTravelAsBlocks) {
  for (bool lane : {false, true}) {
    auto c = ConnectVm(lane ? 4 : 3, lane);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ((*c)->version(), ipc::kProtocolVersion);
    ASSERT_TRUE((*c)->Write(BarIndex::kBar0, gf100::pbus::kPraminBase, 4, 0x20, 0).ok());
    // 12 KiB through the PRAMIN window: more than one message's worth, ragged at the end.
    std::vector<uint8_t> data(3 * 4096 - 8);
    for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 13 + 5);
    ASSERT_TRUE((*c)->WriteElements(BarIndex::kBar0, gf100::pbus::kPraminWindow, 4, data, 0).ok());
    std::vector<uint8_t> back(data.size());
    ASSERT_TRUE((*c)->ReadElements(BarIndex::kBar0, gf100::pbus::kPraminWindow, 8, back, 0).ok());
    EXPECT_EQ(back, data);
    auto single = (*c)->Read(BarIndex::kBar0, gf100::pbus::kPraminWindow + 4, 4, 0);
    ASSERT_TRUE(single.ok());
    EXPECT_EQ(*single, uint64_t{data[4]} | uint64_t{data[5]} << 8 | uint64_t{data[6]} << 16 |
                           uint64_t{data[7]} << 24);
    ASSERT_TRUE((*c)->Teardown(ipc::TeardownReason::kNormal).ok());
    c->reset();  // TEARDOWN_ACK comes after the reset: the next VM finds the GPU free
  }
}

TEST_F(AggregatorServerTest, SecondPtVmIsRefusedUntilTheFirstIsGone) {
  auto first = ConnectVm(1);
  ASSERT_TRUE(first.ok());
  auto second = ConnectVm(2);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("a second pt VM is refused"), std::string::npos)
      << second.status().ToString();
  EXPECT_NE(second.status().message().find("'vm1'"), std::string::npos);
  first->reset();  // TEARDOWN
  EXPECT_NE(ConnectEventually(2), nullptr);
}

TEST_F(AggregatorServerTest, AVanishedDeviceModelLeavesTheGpuToTheNextVm) {
  {
    // A device model that writes a secret into VRAM and dies without TEARDOWN: its socket closes.
    auto channel = ipc::Channel::Connect(path_);
    ASSERT_TRUE(channel.ok());
    ASSERT_TRUE(channel
                    ->Send(ipc::Message{
                        1, ipc::Hello{ipc::kProtocolVersion, ipc::kProtocolVersion, "doomed"}})
                    .ok());
    ASSERT_TRUE(channel->Receive(5000).ok());
    ASSERT_TRUE(channel->Send(ipc::Message{2, ipc::Auth{Token(1)}}).ok());
    ASSERT_TRUE(channel->Receive(5000).ok());
    ASSERT_TRUE(channel->Send(ipc::Message{2, Options(1).vm}).ok());
    auto accept = channel->Receive(5000);
    ASSERT_TRUE(accept.ok());
    ASSERT_TRUE(std::holds_alternative<ipc::VmAccept>(accept->message.body));
    const std::pair<uint32_t, uint32_t> writes[] = {{gf100::pbus::kPraminBase, 0x10},
                                                    {gf100::pbus::kPraminWindow + 0x40, 0x5ec2e7}};
    uint32_t seq = 3;
    for (auto [reg, value] : writes) {
      ASSERT_TRUE(
          channel->Send(ipc::Message{seq++, ipc::MmioWrite{ipc::Bar::kBar0, 4, 0, reg, value}})
              .ok());
      ASSERT_TRUE(channel->Receive(5000).ok());
    }
  }  // closed, no TEARDOWN
  auto next = ConnectEventually(2);
  ASSERT_NE(next, nullptr);
  ASSERT_TRUE(next->Write(BarIndex::kBar0, gf100::pbus::kPraminBase, 4, 0x10, 0).ok());
  auto secret = next->Read(BarIndex::kBar0, gf100::pbus::kPraminWindow + 0x40, 4, 0);
  ASSERT_TRUE(secret.ok());
  EXPECT_EQ(*secret, 0u) << "the next VM read the previous one's VRAM";
}

TEST_F(AggregatorServerTest, MalformedPacketGetsAFatalErrorAndTheConnectionCloses) {
  auto socket = os::ConnectSeqpacket(path_);
  ASSERT_TRUE(socket.ok());
  const uint8_t junk[] = {'G', 'V', 'D', 'M', 0xff, 0xff, 0, 0, 1, 0, 0, 0, 16, 0, 0, 0};
  ASSERT_TRUE(os::SendWithFds(socket->get(), junk, {}).ok());
  ipc::Channel channel(std::move(*socket));
  auto error = channel.Receive(5000);
  ASSERT_TRUE(error.ok()) << error.status().ToString();
  const auto* e = std::get_if<ipc::Error>(&error->message.body);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(error->message.seq, 0u);
  EXPECT_EQ(e->code, StatusCode::kDataLoss);
  EXPECT_EQ(channel.Receive(5000).status().code(), StatusCode::kUnavailable);
  EXPECT_NE(ConnectEventually(1), nullptr) << "one bad peer broke the server";
}

TEST_F(AggregatorServerTest, SilentPeersAreDroppedAfterTheHandshakeTimeout) {
  auto channel = ipc::Channel::Connect(path_);
  ASSERT_TRUE(channel.ok());
  // Say nothing: the server tells us and hangs up after 300 ms.
  auto told = channel->Receive(10000);
  ASSERT_TRUE(told.ok()) << told.status().ToString();
  const auto* e = std::get_if<ipc::Error>(&told->message.body);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(told->message.seq, 0u);
  EXPECT_EQ(e->code, StatusCode::kDeadlineExceeded);
  EXPECT_NE(e->text.find("within 300 ms"), std::string::npos) << e->text;
  EXPECT_EQ(channel->Receive(10000).status().code(), StatusCode::kUnavailable);
}

TEST_F(AggregatorServerTest, InterruptLineReachesTheDeviceModel) {
  auto c = ConnectVm(1);
  ASSERT_TRUE(c.ok());
  namespace pf = gf100::pfifo;
  ASSERT_TRUE((*c)->Write(BarIndex::kBar0, gf100::pmc::kIntrEnHost, 4, 1, 0).ok());
  ASSERT_TRUE((*c)->Write(BarIndex::kBar0, pf::kIntrEn, 4, pf::kIntrChanTableError, 0).ok());
  ASSERT_TRUE(
      (*c)->Write(BarIndex::kBar0, pf::kChanTable, 4, pf::kChanValid | pf::kChanInstMask, 0).ok());
  auto wait_level = [&](bool want) {
    for (int i = 0; i < 1000; ++i) {
      auto event = (*c)->PollEvent();
      EXPECT_TRUE(event.ok());
      if (event.ok() && event->has_value()) {
        const auto* level = std::get_if<dm::InterruptLevel>(&**event);
        if (level != nullptr && level->asserted == want) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  };
  EXPECT_TRUE(wait_level(true));
  ASSERT_TRUE((*c)->Write(BarIndex::kBar0, pf::kIntr, 4, pf::kIntrChanTableError, 0).ok());
  EXPECT_TRUE(wait_level(false));
}

TEST_F(AggregatorServerTest, StopEndsEverySessionWithTeardown) {
  auto c = ConnectVm(1);
  ASSERT_TRUE(c.ok());
  server_->Stop();
  bool torn_down = false;
  for (int i = 0; i < 1000 && !torn_down; ++i) {
    auto event = (*c)->PollEvent();
    if (event.ok() && event->has_value()) {
      torn_down = std::holds_alternative<dm::TeardownRequest>(**event);
    }
    if (!event.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(torn_down);
}

// Receives until the server's fatal ERROR and hang-up; the ERROR, or what happened instead.
Result<ipc::Error> PartingError(ipc::Channel& channel) {
  for (int i = 0; i < 16; ++i) {
    Result<ipc::Channel::Received> m = channel.Receive(10000);
    if (!m.ok() && m.status().code() == StatusCode::kUnavailable) m = channel.ReceiveParting();
    if (!m.ok()) return m.status();
    if (const auto* e = std::get_if<ipc::Error>(&m->message.body)) {
      if (m->message.seq != 0) return Status::DataLoss("an ERROR that answers a request");
      if (channel.Receive(10000).status().code() != StatusCode::kUnavailable) {
        return Status::DataLoss("the server did not hang up after its fatal ERROR");
      }
      return *e;
    }
  }
  return Status::DataLoss("no ERROR");
}

TEST_F(AggregatorServerTest, OtherUsersAreRefusedWithTheReason) {
  const uid_t us = ::geteuid();
  StartServer({us + 1});  // a server that serves somebody else
  auto c = ConnectVm(1);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kPermissionDenied) << c.status().ToString();
  EXPECT_NE(c.status().message().find("uid " + std::to_string(us) + " may not connect"),
            std::string::npos)
      << c.status().ToString();
  // A raw peer that says nothing is told just the same.
  auto channel = ipc::Channel::Connect(path_);
  ASSERT_TRUE(channel.ok());
  Result<ipc::Error> e = PartingError(*channel);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->code, StatusCode::kPermissionDenied);
  EXPECT_NE(e->text.find("this aggregator serves uid " + std::to_string(us + 1)), std::string::npos)
      << e->text;
}

// Admitted, then silent before GUEST_MEMORY (a device model squatting channels and VRAM): dropped
// at the handshake deadline, told why, and its VM gone — the next pt VM gets the GPU.
TEST_F(AggregatorServerTest, AnAdmittedDeviceModelThatGoesSilentIsDroppedAtTheDeadline) {
  auto channel = ipc::Channel::Connect(path_);
  ASSERT_TRUE(channel.ok());
  ASSERT_TRUE(channel
                  ->Send(ipc::Message{
                      1, ipc::Hello{ipc::kProtocolVersion, ipc::kProtocolVersion, "squatter"}})
                  .ok());
  ASSERT_TRUE(channel->Send(ipc::Message{2, ipc::Auth{Token(1)}}).ok());
  ASSERT_TRUE(channel->Send(ipc::Message{3, Options(1).vm}).ok());
  for (int i = 0; i < 3; ++i) {
    auto reply = channel->Receive(5000);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    if (i == 2) {
      ASSERT_TRUE(std::holds_alternative<ipc::VmAccept>(reply->message.body));
    }
  }
  auto blocked = ConnectVm(2);
  EXPECT_EQ(blocked.status().code(), StatusCode::kFailedPrecondition) << "the squatter has the GPU";
  Result<ipc::Error> e = PartingError(*channel);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->code, StatusCode::kDeadlineExceeded);
  EXPECT_NE(e->text.find("GUEST_MEMORY"), std::string::npos) << e->text;
  EXPECT_NE(ConnectEventually(2), nullptr);
}

// 80 connections that never say a word, then a device model: it is admitted at once (each newcomer
// pushes out the oldest silent one), and every silent one is told why and closed.
TEST_F(AggregatorServerTest, IdleConnectionsCannotLockAdmissionOut) {
  std::vector<ipc::Channel> idle;
  for (int i = 0; i < 80; ++i) {
    auto c = ipc::Channel::Connect(path_);
    ASSERT_TRUE(c.ok()) << i << ": " << c.status().ToString();
    idle.push_back(std::move(*c));
  }
  auto vm = ConnectVm(1);
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  EXPECT_TRUE((*vm)->Write(BarIndex::kBar0, gf100::pbus::kPraminBase, 4, 0x10, 0).ok());
  size_t evicted = 0, expired = 0;
  for (ipc::Channel& c : idle) {
    Result<ipc::Error> e = PartingError(c);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    evicted += e->code == StatusCode::kResourceExhausted;
    expired += e->code == StatusCode::kDeadlineExceeded;
  }
  EXPECT_GE(evicted, 64u);
  EXPECT_EQ(evicted + expired, 80u);
  EXPECT_TRUE((*vm)->Read(BarIndex::kBar0, gf100::pbus::kPraminBase, 4, 0).ok())
      << "the VM outlived them all";
}

}  // namespace
}  // namespace gpuvm::aggregator
