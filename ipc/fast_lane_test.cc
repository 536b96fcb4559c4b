#include "ipc/fast_lane.h"

#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "gtest/gtest.h"
#include "ipc/codec.h"

namespace gpuvm::ipc {
namespace {

using os::UniqueFd;
using Side = FastLane::Side;

std::vector<UniqueFd> Copies(const FastLane& lane) {
  std::vector<UniqueFd> out;
  for (int fd : lane.fds()) out.push_back(*os::DuplicateFd(fd));
  return out;
}

TEST(FastLane, CarriesRequestsAndRepliesBothWays) {
  auto dm = FastLane::Create();
  ASSERT_TRUE(dm.ok());
  auto aggregator = FastLane::Adopt(Copies(**dm));
  ASSERT_TRUE(aggregator.ok()) << aggregator.status().ToString();
  EXPECT_FALSE((*aggregator)->TryReceive(Side::kAggregator)->has_value());
  const Message read{7, MmioRead{Bar::kBar0, 4, 1, 0x1700}};
  ASSERT_TRUE((*dm)->Send(Side::kDeviceModel, read).ok());
  EXPECT_EQ((*dm)->Send(Side::kDeviceModel, read).code(), StatusCode::kResourceExhausted)
      << "one message per direction at a time";
  ASSERT_TRUE((*aggregator)->Wait(Side::kAggregator, 1000).ok());
  auto got = (*aggregator)->TryReceive(Side::kAggregator);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ(**got, read);
  ASSERT_TRUE((*aggregator)->Send(Side::kAggregator, {7, MmioReadReply{0x42}}).ok());
  ASSERT_TRUE((*dm)->Wait(Side::kDeviceModel, 1000).ok());
  auto reply = (*dm)->TryReceive(Side::kDeviceModel);
  ASSERT_TRUE(reply.ok() && reply->has_value());
  EXPECT_EQ(std::get<MmioReadReply>((*reply)->body).value, 0x42u);
  EXPECT_EQ((*dm)->Wait(Side::kDeviceModel, 10).code(), StatusCode::kDeadlineExceeded);
  EXPECT_FALSE((*dm)->Send(Side::kDeviceModel, {0, MmioRead{Bar::kBar0, 3, 0, 0}}).ok())
      << "the codec's rules hold in the lane too";
}

TEST(FastLane, AReceiverThatPollsIsNotRungAndOneThatStoppedIs) {
  auto dm = FastLane::Create();
  ASSERT_TRUE(dm.ok());
  auto aggregator = FastLane::Adopt(Copies(**dm));
  ASSERT_TRUE(aggregator.ok());
  (*dm)->BeginPolling(Side::kDeviceModel);
  ASSERT_TRUE((*aggregator)->Send(Side::kAggregator, {3, MmioWriteAck{}}).ok());
  EXPECT_EQ((*dm)->Wait(Side::kDeviceModel, 0).code(), StatusCode::kDeadlineExceeded)
      << "no doorbell while the device model polls";
  (*dm)->EndPolling(Side::kDeviceModel);
  auto reply = (*dm)->TryReceive(Side::kDeviceModel);
  ASSERT_TRUE(reply.ok() && reply->has_value()) << "the message is in the slot all the same";
  ASSERT_TRUE((*aggregator)->Send(Side::kAggregator, {4, MmioWriteAck{}}).ok());
  EXPECT_TRUE((*dm)->Wait(Side::kDeviceModel, 1000).ok()) << "rung again once polling ended";
  EXPECT_TRUE((*dm)->TryReceive(Side::kDeviceModel)->has_value());
  // The flags are per side: the aggregator's doorbell rings whatever the device model does.
  (*dm)->BeginPolling(Side::kDeviceModel);
  ASSERT_TRUE((*dm)->Send(Side::kDeviceModel, {5, MmioRead{Bar::kBar0, 4, 0, 0}}).ok());
  EXPECT_TRUE((*aggregator)->Wait(Side::kAggregator, 1000).ok());
  (*dm)->EndPolling(Side::kDeviceModel);
}

TEST(FastLane, AHostilePeersBytesAreCopiedThenRefused) {
  auto dm = FastLane::Create();
  auto aggregator = FastLane::Adopt(Copies(**dm));
  ASSERT_TRUE(aggregator.ok());
  const uint8_t junk[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17};
  ASSERT_TRUE((*dm)->SendRawForTesting(Side::kDeviceModel, junk, sizeof(junk)).ok());
  EXPECT_EQ((*aggregator)->TryReceive(Side::kAggregator).status().code(), StatusCode::kDataLoss);
  ASSERT_TRUE((*dm)->SendRawForTesting(Side::kDeviceModel, junk, 0xffffffff).ok());
  EXPECT_EQ((*aggregator)->TryReceive(Side::kAggregator).status().code(), StatusCode::kDataLoss);
  // The slot was emptied each time, so the lane goes on.
  ASSERT_TRUE((*dm)->Send(Side::kDeviceModel, {8, MmioWrite{Bar::kBar1, 1, 0, 3, 0xff}}).ok());
  EXPECT_TRUE((*aggregator)->TryReceive(Side::kAggregator)->has_value());
  // A message that needs descriptors cannot travel in the lane.
  auto offer = Encode({9, FastLaneOffer{1}});
  ASSERT_TRUE(offer.ok());
  ASSERT_TRUE((*dm)->SendRawForTesting(Side::kDeviceModel, *offer, offer->size()).ok());
  EXPECT_EQ((*aggregator)->TryReceive(Side::kAggregator).status().code(), StatusCode::kDataLoss);
}

TEST(FastLane, AdoptChecksWhatItIsGiven) {
  auto dm = FastLane::Create();
  std::vector<UniqueFd> two;
  two.push_back(*os::DuplicateFd((*dm)->fds()[0]));
  two.push_back(*os::DuplicateFd((*dm)->fds()[1]));
  EXPECT_EQ(FastLane::Adopt(std::move(two)).status().code(), StatusCode::kInvalidArgument);
  std::vector<UniqueFd> unsealed = Copies(**dm);
  unsealed[0] = UniqueFd(::memfd_create("lane", MFD_CLOEXEC));
  ASSERT_EQ(::ftruncate(unsealed[0].get(), kLaneBytes), 0);
  EXPECT_EQ(FastLane::Adopt(std::move(unsealed)).status().code(), StatusCode::kPermissionDenied);
  std::vector<UniqueFd> not_eventfd = Copies(**dm);
  not_eventfd[1] = *os::DuplicateFd(not_eventfd[0].get());
  // A regular file (here the memfd) as a doorbell: epoll refuses it (EPERM), so does Adopt.
  EXPECT_FALSE(FastLane::Adopt(std::move(not_eventfd)).ok());
}

TEST(FastLane, WorksAcrossProcesses) {
  auto dm = FastLane::Create();
  ASSERT_TRUE(dm.ok());
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto aggregator = FastLane::Adopt(Copies(**dm));
    if (!aggregator.ok()) ::_exit(1);
    for (int served = 0; served < 200;) {
      if (!(*aggregator)->Wait(Side::kAggregator, 5000).ok()) ::_exit(2);
      for (;;) {
        auto m = (*aggregator)->TryReceive(Side::kAggregator);
        if (!m.ok()) ::_exit(3);
        if (!m->has_value()) break;
        const auto& read = std::get<MmioRead>((*m)->body);
        if (!(*aggregator)
                 ->Send(Side::kAggregator, {(*m)->seq, MmioReadReply{read.offset * 2}})
                 .ok()) {
          ::_exit(4);
        }
        ++served;
      }
    }
    ::_exit(0);
  }
  for (uint32_t i = 1; i <= 200; ++i) {
    ASSERT_TRUE((*dm)->Send(Side::kDeviceModel, {i, MmioRead{Bar::kBar0, 4, 0, 4ull * i}}).ok());
    std::optional<Message> reply;
    while (!reply) {
      auto r = (*dm)->TryReceive(Side::kDeviceModel);
      ASSERT_TRUE(r.ok());
      reply = *r;
      if (!reply) {
        ASSERT_TRUE((*dm)->Wait(Side::kDeviceModel, 5000).ok());
      }
    }
    EXPECT_EQ(reply->seq, i);
    EXPECT_EQ(std::get<MmioReadReply>(reply->body).value, 8ull * i);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace gpuvm::ipc
