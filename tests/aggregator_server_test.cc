// The server over real sockets: device model connections (the dm's own IpcAggregatorConnection),
// the fast lane, the second pt VM refused, a device model that vanishes without a word (its VM is
// removed and the next one admitted), malformed packets, stalled handshakes, interrupts forwarded.
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
  void SetUp() override {
    path_ = "@gpuvm-aggregator-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    SimGpuOptions o;
    o.vram_bytes = 64ull << 20;
    o.compute_engine = false;
    auto gpu = SimGpu::Create(o);
    ASSERT_TRUE(gpu.ok());
    auto aggregator = Aggregator::Create(std::move(*gpu));
    ASSERT_TRUE(aggregator.ok());
    ServerOptions options;
    options.path = path_;
    options.handshake_timeout = std::chrono::milliseconds(300);
    options.log = nullptr;
    auto server = AggregatorServer::Create(std::move(*aggregator), options);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override { server_.reset(); }

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
    return o;
  }

  // Connects, retrying while the GPU is still owned by a VM that is going away.
  std::unique_ptr<dm::IpcAggregatorConnection> ConnectEventually(uint16_t domid) {
    for (int attempt = 0; attempt < 500; ++attempt) {
      auto c = dm::IpcAggregatorConnection::Connect(Options(domid));
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
    auto c = dm::IpcAggregatorConnection::Connect(Options(lane ? 2 : 1, lane));
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

TEST_F(AggregatorServerTest, RepTransfersTravelAsBlocks) {
  for (bool lane : {false, true}) {
    auto c = dm::IpcAggregatorConnection::Connect(Options(lane ? 4 : 3, lane));
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
  auto first = dm::IpcAggregatorConnection::Connect(Options(1));
  ASSERT_TRUE(first.ok());
  auto second = dm::IpcAggregatorConnection::Connect(Options(2));
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
    ASSERT_TRUE(channel->Send(ipc::Message{1, ipc::Hello{1, 1, "doomed"}}).ok());
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
  // Say nothing: the server hangs up after 300 ms.
  EXPECT_EQ(channel->Receive(10000).status().code(), StatusCode::kUnavailable);
}

TEST_F(AggregatorServerTest, InterruptLineReachesTheDeviceModel) {
  auto c = dm::IpcAggregatorConnection::Connect(Options(1));
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
  auto c = dm::IpcAggregatorConnection::Connect(Options(1));
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

}  // namespace
}  // namespace gpuvm::aggregator
