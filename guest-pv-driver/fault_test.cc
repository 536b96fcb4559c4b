// GPU errors reported by the device surface as errors of the context that caused them, on its next
// wait, decoded from the device's registers alone (VM_FAULT, PSUBFIFO, PGRAPH TRAP) — with the
// interrupt line and by polling. Other contexts go on.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "gpu/hw/classes.h"
#include "gpu/hw/mmu_fault.h"
#include "gpu/hw/pfifo.h"
#include "gpu/hw/pgraph.h"
#include "guest-pv-driver/driver_impl.h"
#include "guest-pv-driver/test_util.h"

namespace gpuvm::guest {
namespace {

using std::chrono::seconds;
using testing::FakeComputeEngine;
namespace copy = gf100::copy;
namespace pf = gf100::pfifo;

uint32_t Hi(uint64_t v) { return uint32_t(v >> 32); }
uint32_t Lo(uint64_t v) { return uint32_t(v); }

// A PCOPY copy of `bytes` from src to dst, without the API's checks.
PushBuffer RawCopy(uint64_t dst, uint64_t src, uint32_t bytes) {
  PushBuffer pb;
  pb.Inc(kSubcCopy, copy::kOffsetInUpper, {Hi(src), Lo(src), Hi(dst), Lo(dst), 0, 0, bytes, 1});
  pb.Method(kSubcCopy, copy::kLaunchDma, 2 | copy::kSrcPitch | copy::kDstPitch);
  return pb;
}

// Parameter: whether the driver uses the interrupt line (else it polls PMC_INTR_HOST).
class GuestDriverFaultTest : public testing::GpuFixture,
                             public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    engine_ = std::make_shared<FakeComputeEngine>();
    DriverOptions o;
    o.use_interrupts = GetParam();
    StartGpu(engine_, o);
  }

  // Runs `raw` on the context's default channel and returns the wait's status.
  Status RunRaw(Context* ctx, PushBuffer raw) {
    auto f = ctx->default_channel()->impl()->SubmitForTesting(std::move(raw));
    if (!f.ok()) return f.status();
    return ctx->default_channel()->Wait(*f, seconds(20));
  }

  Result<Allocation> CodeFor(Context* ctx) {
    std::vector<uint8_t> image(128, 0);
    return ctx->LoadCode(image);
  }

  std::shared_ptr<FakeComputeEngine> engine_;
};

TEST_P(GuestDriverFaultTest, MmuFaultOnAnUnmappedAddress) {
  auto ctx = NewContext();
  auto other = NewContext();
  auto dst = ctx->AllocDevice(4096);
  ASSERT_TRUE(dst.ok());
  const uint64_t bad = 0x2000000000;  // in the large heap, no table there
  Status s = RunRaw(ctx.get(), RawCopy(dst->va, bad, 64));
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
  auto fault = ctx->fault();
  ASSERT_TRUE(fault.has_value());
  EXPECT_EQ(fault->kind, GpuFault::Kind::kMmuFault);
  EXPECT_EQ(fault->channel, ctx->default_channel()->id());
  EXPECT_EQ(fault->address, bad);
  EXPECT_FALSE(fault->write);
  EXPECT_EQ(fault->reason, uint32_t(gf100::FaultReason::kPtNotPresent));
  EXPECT_EQ(fault->unit, uint32_t(gf100::FaultUnit::kPcopy0));
  EXPECT_NE(fault->message.find("PT_NOT_PRESENT"), std::string::npos) << fault->message;

  // Sticky: the context is unusable, as on hardware.
  EXPECT_EQ(ctx->status().code(), StatusCode::kAborted);
  EXPECT_EQ(ctx->AllocDevice(4096).status().code(), StatusCode::kAborted);
  EXPECT_EQ(ctx->default_channel()->Memset32Async(dst->va, 0, 1).status().code(),
            StatusCode::kAborted);
  EXPECT_EQ(ctx->Synchronize().code(), StatusCode::kAborted);
  EXPECT_TRUE(ctx->Free(dst->va).ok()) << "freeing still works";

  // The other context is untouched.
  auto a = other->AllocDevice(4096);
  ASSERT_TRUE(a.ok());
  uint32_t v = 1;
  ASSERT_TRUE(other->default_channel()->Memset32Async(a->va, 77, 1).ok());
  ASSERT_TRUE(other->default_channel()->CopyDeviceToHost(&v, a->va, 4).ok());
  EXPECT_EQ(v, 77u);
  EXPECT_TRUE(other->status().ok());
}

TEST_P(GuestDriverFaultTest, MmuFaultOnAFreedPageIsAWriteFault) {
  ContextOptions o;
  o.recycle_bytes = 0;  // every free unmaps at once
  auto ctx = NewContext(o);
  auto keep = ctx->AllocDevice(4096);
  auto gone = ctx->AllocDevice(4096);
  ASSERT_TRUE(keep.ok() && gone.ok());
  ASSERT_TRUE(ctx->Free(gone->va).ok());  // its page table stays, the PTE is cleared
  Status s = RunRaw(ctx.get(), RawCopy(gone->va + 8, keep->va, 16));
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  auto fault = ctx->fault();
  ASSERT_TRUE(fault.has_value());
  EXPECT_EQ(fault->address, gone->va + 8);
  EXPECT_TRUE(fault->write);
  EXPECT_EQ(fault->reason, uint32_t(gf100::FaultReason::kPageNotPresent));
}

TEST_P(GuestDriverFaultTest, CommandErrorOnAnEmptySubchannel) {
  auto ctx = NewContext();
  PushBuffer pb;
  pb.Method(6, 0x0100, 1);  // nothing is bound on subchannel 6
  Status s = RunRaw(ctx.get(), std::move(pb));
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  auto fault = ctx->fault();
  ASSERT_TRUE(fault.has_value());
  EXPECT_EQ(fault->kind, GpuFault::Kind::kCommandError);
  EXPECT_EQ(fault->subfifo_intr, pf::kSubfifoIntrSwMthd);
  EXPECT_EQ(fault->subchannel, 6u);
  EXPECT_EQ(fault->method, 0x100u);
  EXPECT_NE(fault->message.find("EMPTY_SUBC"), std::string::npos) << fault->message;
}

TEST_P(GuestDriverFaultTest, CommandErrorOnAnUnknownClass) {
  auto ctx = NewContext();
  PushBuffer pb;
  pb.Method(3, gf100::host::kSetObject, 0x1234);
  EXPECT_EQ(RunRaw(ctx.get(), std::move(pb)).code(), StatusCode::kAborted);
  auto fault = ctx->fault();
  ASSERT_TRUE(fault.has_value());
  EXPECT_EQ(fault->kind, GpuFault::Kind::kCommandError);
  EXPECT_EQ(fault->subfifo_intr, pf::kSubfifoIntrIllegalMthd);
  EXPECT_EQ(fault->data, 0x1234u);
}

TEST_P(GuestDriverFaultTest, ComputeTrap) {
  auto ctx = NewContext();
  auto code = CodeFor(ctx.get());
  ASSERT_TRUE(code.ok());
  engine_->set_behaviour(FakeComputeEngine::Behaviour::kTrap);
  LaunchParams p;
  p.code_address = code->va;
  auto f = ctx->default_channel()->Launch(p);
  ASSERT_TRUE(f.ok());
  Status s = ctx->default_channel()->Wait(*f, seconds(20));
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
  auto fault = ctx->fault();
  ASSERT_TRUE(fault.has_value());
  EXPECT_EQ(fault->kind, GpuFault::Kind::kComputeTrap);
  EXPECT_EQ(fault->channel, ctx->default_channel()->id());
  // The reason, from the MP trap registers (a PTX `trap`: global error BPT_INT).
  EXPECT_EQ(fault->warp_error, 0u);
  EXPECT_EQ(fault->global_error, gf100::pgraph::kMpGlobalBptInt);
  EXPECT_NE(fault->message.find("BPT_INT"), std::string::npos) << fault->message;
  // The whole trap chain was acknowledged.
  EXPECT_EQ(driver_->ServiceInterrupts(), 0u);
  EXPECT_EQ(gpu_->device()->ReadReg(gf100::pgraph::kTrap), 0u);
  EXPECT_EQ(gpu_->device()->ReadReg(gf100::pgraph::kTpc0TrapStatus), 0u);
}

TEST_P(GuestDriverFaultTest, ComputeMmuFaultAndOtherChannelsOfTheContextSeeIt) {
  auto ctx = NewContext();
  auto second = ctx->CreateChannel();
  ASSERT_TRUE(second.ok());
  auto code = CodeFor(ctx.get());
  ASSERT_TRUE(code.ok());
  engine_->set_behaviour(FakeComputeEngine::Behaviour::kMmuFault, 0x3000000000);
  LaunchParams p;
  p.code_address = code->va;
  auto f = (*second)->Launch(p);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*second)->Wait(*f, seconds(20)).code(), StatusCode::kAborted);
  auto fault = ctx->fault();
  ASSERT_TRUE(fault.has_value());
  EXPECT_EQ(fault->kind, GpuFault::Kind::kMmuFault);
  EXPECT_EQ(fault->channel, (*second)->id());
  EXPECT_EQ(fault->address, 0x3000000000u);
  EXPECT_TRUE(fault->write);
  EXPECT_EQ(fault->unit, uint32_t(gf100::FaultUnit::kPgraph));
  EXPECT_EQ(ctx->default_channel()->Synchronize().code(), StatusCode::kAborted);
  auto ev = ctx->CreateEvent();
  EXPECT_EQ(ev.status().code(), StatusCode::kAborted);
}

TEST_P(GuestDriverFaultTest, LaunchWithoutAComputeEngineIsACommandError) {
  driver_.reset();
  gpu_.reset();
  StartGpu(nullptr);
  auto ctx = NewContext();
  auto code = CodeFor(ctx.get());
  ASSERT_TRUE(code.ok());
  LaunchParams p;
  p.code_address = code->va;
  auto f = ctx->default_channel()->Launch(p);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(ctx->default_channel()->Wait(*f, seconds(20)).code(), StatusCode::kAborted);
  ASSERT_TRUE(ctx->fault().has_value());
  EXPECT_EQ(ctx->fault()->kind, GpuFault::Kind::kCommandError);
}

TEST_P(GuestDriverFaultTest, FaultedContextsTearDownAndTheDeviceGoesOn) {
  for (int i = 0; i < 3; ++i) {
    auto ctx = NewContext();
    auto dst = ctx->AllocDevice(4096);
    ASSERT_TRUE(dst.ok());
    EXPECT_EQ(RunRaw(ctx.get(), RawCopy(dst->va, 0x2000000000, 4)).code(), StatusCode::kAborted);
  }
  auto ctx = NewContext();
  auto a = ctx->AllocDevice(1 << 20);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(ctx->default_channel()->Memset32Async(a->va, 5, 1 << 18).ok());
  EXPECT_TRUE(ctx->Synchronize().ok());
  EXPECT_EQ(driver_->ServiceInterrupts(), 0u) << "every error was acknowledged";
}

// Waits without limit (the synchronous calls' default) still end with the fault: a channel blocked
// for good, its waiters in Channel::Wait and Context::Synchronize without a timeout, and a fault
// on another channel of the context 300 ms later.
TEST_P(GuestDriverFaultTest, AFaultEndsWaitsThatHaveNoLimit) {
  auto ctx = NewContext();
  ASSERT_EQ(ctx->options().default_timeout, kWaitForever);
  auto blocked = ctx->CreateChannel();
  auto ev = ctx->CreateEvent();
  auto dst = ctx->AllocDevice(4096);
  ASSERT_TRUE(blocked.ok() && ev.ok() && dst.ok());
  (*ev)->impl()->Recorded(4);
  ASSERT_TRUE((*blocked)->WaitEvent(*ev).ok());
  auto f = (*blocked)->Memset32Async(dst->va, 1, 1);
  ASSERT_TRUE(f.ok());
  Status waited, synchronized;
  std::thread waiter([&] { waited = (*blocked)->Wait(*f); });
  std::thread synchronizer([&] { synchronized = ctx->Synchronize(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto raw = ctx->default_channel()->impl()->SubmitForTesting(RawCopy(dst->va, 0x2000000000, 4));
  ASSERT_TRUE(raw.ok());
  waiter.join();
  synchronizer.join();
  EXPECT_EQ(waited.code(), StatusCode::kAborted) << waited.ToString();
  EXPECT_EQ(synchronized.code(), StatusCode::kAborted) << synchronized.ToString();
  ASSERT_TRUE(ctx->fault().has_value());
  EXPECT_EQ(ctx->fault()->kind, GpuFault::Kind::kMmuFault);
  __atomic_store_n(reinterpret_cast<uint32_t*>((*ev)->impl()->slot().host), 4u, __ATOMIC_RELEASE);
}

TEST_P(GuestDriverFaultTest, FaultsWakeWaitersBlockedOnOtherFences) {
  // A channel blocked on a semaphore that never comes, and a fault on another channel of the same
  // context: the blocked waiter returns the fault instead of timing out.
  auto ctx = NewContext();
  auto blocked = ctx->CreateChannel();
  ASSERT_TRUE(blocked.ok());
  auto ev = ctx->CreateEvent();
  ASSERT_TRUE(ev.ok());
  (*ev)->impl()->Recorded(3);
  ASSERT_TRUE((*blocked)->WaitEvent(*ev).ok());
  auto dst = ctx->AllocDevice(4096);
  ASSERT_TRUE(dst.ok());
  auto f = (*blocked)->Memset32Async(dst->va, 1, 1);
  ASSERT_TRUE(f.ok());
  Status waited;
  std::thread waiter([&] { waited = (*blocked)->Wait(*f, seconds(30)); });
  EXPECT_EQ(RunRaw(ctx.get(), RawCopy(dst->va, 0x2000000000, 4)).code(), StatusCode::kAborted);
  waiter.join();
  EXPECT_EQ(waited.code(), StatusCode::kAborted) << waited.ToString();
  // Let the context tear down without waiting the full drain timeout on the blocked channel.
  __atomic_store_n(reinterpret_cast<uint32_t*>((*ev)->impl()->slot().host), 3u, __ATOMIC_RELEASE);
}

INSTANTIATE_TEST_SUITE_P(Delivery, GuestDriverFaultTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Interrupts" : "Polling"; });

}  // namespace
}  // namespace gpuvm::guest
