// The driver against the software GF100 through the native Bus, part 2: fences and events (waits,
// timeouts, stalled buses), rings that wrap, channels and contexts (ids, address spaces, teardown)
// and threads submitting concurrently. Part 1 is driver_test.cc.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "gpu/hw/classes.h"
#include "gpu/hw/pfifo.h"
#include "gpu/hw/pmc.h"
#include "gpu/hw/ramin.h"
#include "guest-pv-driver/driver.h"
#include "guest-pv-driver/driver_impl.h"
#include "guest-pv-driver/native_bus.h"
#include "guest-pv-driver/test_util.h"

namespace gpuvm::guest {
namespace {

using std::chrono::milliseconds;
using testing::ForwardingBus;
using testing::GuestDriverTest;
using testing::kVram;
using testing::Pattern;

// ---- fences and events
// -------------------------------------------------------------------------------------

TEST_F(GuestDriverTest, Fences) {
  auto ctx = NewContext();
  Channel* ch = ctx->default_channel();
  auto other = ctx->CreateChannel();
  ASSERT_TRUE(other.ok());
  auto a = ctx->AllocDevice(1 << 20);
  ASSERT_TRUE(a.ok());
  Fence previous = ch->last_fence();
  auto f = ch->Memset32Async(a->va, 1, 1 << 18);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->channel, ch->id());
  EXPECT_EQ(f->sequence, previous.sequence + 1);
  EXPECT_EQ(ch->last_fence(), *f);
  ASSERT_TRUE(ch->Wait(*f).ok());
  EXPECT_TRUE(*ch->IsDone(*f));
  EXPECT_TRUE(*ch->IsDone({ch->id(), 0}));
  EXPECT_EQ(ch->Wait({(*other)->id(), 1}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ch->Wait({ch->id(), f->sequence + 10}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ch->IsDone({(*other)->id(), 1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(ch->Synchronize().ok());
  EXPECT_TRUE(ctx->Synchronize().ok());
}

TEST_F(GuestDriverTest, SuccessfulWaitsTouchNoRegister) {
  auto ctx = NewContext();
  ASSERT_TRUE(driver_->impl()->interrupts_enabled());
  Channel* ch = ctx->default_channel();
  auto a = ctx->AllocDevice(64 << 20);
  ASSERT_TRUE(a.ok());
  auto f = ch->Memset32Async(a->va, 7, 16 << 20);
  ASSERT_TRUE(f.ok());
  const BusCounters before = driver_->bus_counters();
  ASSERT_TRUE(ch->Wait(*f).ok());
  EXPECT_EQ((driver_->bus_counters() - before).total(), 0u)
      << "fences are polled in host memory; no fault, no interrupt, no register access";
}

TEST_F(GuestDriverTest, WaitTimesOutOnABlockedChannelAndRecovers) {
  auto ctx = NewContext();
  Channel* ch = ctx->default_channel();
  auto ev = ctx->CreateEvent();
  ASSERT_TRUE(ev.ok());
  // Pretend the event was recorded with sequence 5 that nobody releases yet: the channel blocks.
  (*ev)->impl()->Recorded(5);
  ASSERT_TRUE(ch->WaitEvent(*ev).ok());
  auto a = ctx->AllocDevice(4096);
  ASSERT_TRUE(a.ok());
  auto f = ch->Memset32Async(a->va, 42, 1);
  ASSERT_TRUE(f.ok());
  Status s = ch->Wait(*f, milliseconds(50));
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_FALSE(*ch->IsDone(*f));
  EXPECT_EQ((*ev)->Wait(milliseconds(10)).code(), StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(*(*ev)->Query());
  // The CPU releases the semaphore in host memory; the channel goes on.
  __atomic_store_n(reinterpret_cast<uint32_t*>((*ev)->impl()->slot().host), 5u, __ATOMIC_RELEASE);
  ASSERT_TRUE(ch->Wait(*f, std::chrono::seconds(10)).ok());
  uint32_t v = 0;
  ASSERT_TRUE(ch->CopyDeviceToHost(&v, a->va, 4).ok());
  EXPECT_EQ(v, 42u);
  EXPECT_TRUE(ctx->status().ok());
}

// A Bus whose PMC_BOOT_0 reads, once armed, block for a while and then run `resume` — what a
// trapping bus does while the device model or the aggregator behind it is stopped — or, once
// `gone`, read all-ones (a device model that died).
class StallingBus final : public ForwardingBus {
 public:
  using ForwardingBus::ForwardingBus;
  void Arm(std::chrono::milliseconds stall, std::function<void()> resume) {
    stall_ = stall;
    resume_ = std::move(resume);
  }
  std::atomic<bool> gone{false};
  std::atomic<int> stalls{0};

  bool remote() const override { return true; }
  uint64_t Read(Bar bar, uint64_t offset, Width width) override {
    if (bar == Bar::k0 && offset == gf100::pmc::kBoot0) {
      if (gone) return 0xffffffffu;
      if (resume_) {
        std::this_thread::sleep_for(stall_);
        std::exchange(resume_, nullptr)();
        ++stalls;
      }
    }
    return inner_->Read(bar, offset, width);
  }

 private:
  std::chrono::milliseconds stall_{0};
  std::function<void()> resume_;  // the waiting thread only
};

// A wait does not count time in which the path to the GPU was stalled (WaitClock): a 2 s wait on
// a channel that is blocked until the GPU "resumes" survives a 3 s stall of the bus, which its
// probe of PMC_BOOT_0 sits in; and a GPU that is gone ends even an unlimited wait, with
// Unavailable.
TEST_F(GuestDriverTest, WaitsDoNotCountAStalledBus) {
  StallingBus* stalling = RestartDriverOn<StallingBus>();
  ASSERT_NE(stalling, nullptr);
  StallingBus& bus = *stalling;
  auto ctx = NewContext();
  Channel* ch = ctx->default_channel();
  auto ev = ctx->CreateEvent();
  ASSERT_TRUE(ev.ok());
  (*ev)->impl()->Recorded(5);  // nobody releases it: the channel blocks (as above)
  ASSERT_TRUE(ch->WaitEvent(*ev).ok());
  auto a = ctx->AllocDevice(4096);
  ASSERT_TRUE(a.ok());
  auto f = ch->Memset32Async(a->va, 42, 1);
  ASSERT_TRUE(f.ok());
  auto* semaphore = reinterpret_cast<uint32_t*>((*ev)->impl()->slot().host);
  bus.Arm(std::chrono::seconds(3),
          [semaphore] { __atomic_store_n(semaphore, 5u, __ATOMIC_RELEASE); });
  const auto start = std::chrono::steady_clock::now();
  Status waited = ch->Wait(*f, std::chrono::seconds(2));
  EXPECT_TRUE(waited.ok()) << waited.ToString();
  EXPECT_EQ(bus.stalls.load(), 1);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  uint32_t v = 0;
  ASSERT_TRUE(ch->CopyDeviceToHost(&v, a->va, 4).ok());
  EXPECT_EQ(v, 42u);

  (*ev)->impl()->Recorded(6);
  ASSERT_TRUE(ch->WaitEvent(*ev).ok());
  auto g = ch->Memset32Async(a->va, 43, 1);
  ASSERT_TRUE(g.ok());
  bus.gone = true;
  EXPECT_EQ(ch->Wait(*g, kWaitForever).code(), StatusCode::kUnavailable);
  EXPECT_EQ((*ev)->Wait(kWaitForever).code(), StatusCode::kUnavailable);
  bus.gone = false;
  __atomic_store_n(semaphore, 6u, __ATOMIC_RELEASE);
  ASSERT_TRUE(ch->Wait(*g, std::chrono::seconds(10)).ok());
}

TEST_F(GuestDriverTest, AContextWithAHungChannelStillTearsDown) {
  ContextOptions o;
  o.default_timeout = milliseconds(100);
  auto ctx = NewContext(o);
  const uint64_t vram_before = driver_->vram_free();
  auto a = ctx->AllocDevice(1 << 20);
  auto ev = ctx->CreateEvent();
  ASSERT_TRUE(a.ok() && ev.ok());
  (*ev)->impl()->Recorded(9);  // never released: the channel hangs on the acquire
  ASSERT_TRUE(ctx->default_channel()->WaitEvent(*ev).ok());
  ASSERT_TRUE(ctx->default_channel()->Memset32Async(a->va, 1, 1).ok());
  EXPECT_EQ(ctx->Synchronize().code(), StatusCode::kDeadlineExceeded);
  ctx.reset();  // bounded: one drain timeout, then the channel is taken off PFIFO
  EXPECT_GT(driver_->vram_free(), vram_before) << "VRAM is returned";
  // Its host pages (rings, report page) stay registered until the driver goes: the device might
  // have been in the middle of reading them.
  EXPECT_GT(static_cast<NativeBus*>(gpu_->bus())->mapped_bytes(), 0u);
  auto fresh = NewContext();
  auto b = fresh->AllocDevice(4096);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(fresh->default_channel()->Memset32Async(b->va, 3, 1).ok());
  EXPECT_TRUE(fresh->Synchronize().ok());
}

// A Bus behind which the GPU is gone once `gone` is set (the device model died, the aggregator
// ended the session): BAR0 reads all-ones, writes go nowhere; it counts the reads meanwhile.
class GoneBus final : public ForwardingBus {
 public:
  using ForwardingBus::ForwardingBus;
  std::atomic<bool> gone{false};
  std::atomic<uint64_t> reads_while_gone{0};

  bool remote() const override { return true; }
  uint64_t Read(Bar bar, uint64_t offset, Width width) override {
    if (gone) {
      ++reads_while_gone;
      return width == Width::k64 ? ~uint64_t(0) : 0xffffffffu;
    }
    return inner_->Read(bar, offset, width);
  }
  void Write(Bar bar, uint64_t offset, Width width, uint64_t value) override {
    if (!gone) inner_->Write(bar, offset, width, value);
  }
};

// A register poll ends at its first all-ones read when PMC_BOOT_0 says the GPU is gone, instead of
// reading for two seconds; a context torn down then (its channels disabled, playlists committed:
// several polls) costs a handful of reads. Before, the pvdrm backend's exit with a spare context
// and its session already ended spun 4 s of CPU here.
TEST_F(GuestDriverTest, RegisterPollsEndAtOnceWhenTheGpuIsGone) {
  GoneBus* bus = RestartDriverOn<GoneBus>();
  ASSERT_NE(bus, nullptr);
  auto ctx = NewContext();
  ASSERT_NE(ctx, nullptr);
  // A live GPU: a poll that is satisfied at once reads once; one that never is reads until the
  // timeout (not tried here: two seconds).
  EXPECT_TRUE(PollReg(bus, gf100::pfifo::kPlaylistRdLen,
                      [](uint32_t v) { return (v & gf100::pfifo::kPlaylistBusy) == 0; }));
  bus->gone = true;
  EXPECT_TRUE(GpuGone(bus));
  bus->reads_while_gone = 0;
  EXPECT_FALSE(PollReg(bus, gf100::pfifo::kPlaylistRdLen,
                       [](uint32_t v) { return (v & gf100::pfifo::kPlaylistBusy) == 0; }));
  EXPECT_EQ(bus->reads_while_gone.load(), 2u) << "the register, then PMC_BOOT_0";
  // A poll that accepts all-ones is done at its first read, gone or not.
  EXPECT_TRUE(PollReg(bus, gf100::pfifo::kPlaylistRdLen, [](uint32_t) { return true; }));
  bus->reads_while_gone = 0;
  ctx.reset();
  EXPECT_LT(bus->reads_while_gone.load(), 1000u);
  bus->gone = false;  // the driver's own teardown talks to the GPU again
}

// CUDA waits for work as long as it runs: synchronous calls have no limit by default
// (ContextOptions::default_timeout), only the waits the driver bounds for itself do. With those
// lowered to 100 ms, a channel held for 1.2 s (an event nobody releases until then, as a long
// kernel would) still completes every synchronous wait: Channel::Wait, Synchronize, a copy behind
// the work, Event::Wait.
TEST_F(GuestDriverTest, SynchronousWaitsOutlastTheBoundedLimits) {
  ContextOptions o;
  o.setup_timeout = milliseconds(100);
  EXPECT_EQ(o.default_timeout, kWaitForever);
  auto ctx = NewContext(o);
  Channel* ch = ctx->default_channel();
  auto a = ctx->AllocDevice(4096);
  auto gate = ctx->CreateEvent();
  auto done = ctx->CreateEvent();
  ASSERT_TRUE(a.ok() && gate.ok() && done.ok());
  (*gate)->impl()->Recorded(11);
  ASSERT_TRUE(ch->WaitEvent(*gate).ok());
  auto f = ch->Memset32Async(a->va, 77, 1);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(ch->Record(*done).ok());
  auto* semaphore = reinterpret_cast<uint32_t*>((*gate)->impl()->slot().host);
  std::thread release([semaphore] {
    std::this_thread::sleep_for(milliseconds(1200));
    __atomic_store_n(semaphore, 11u, __ATOMIC_RELEASE);
  });
  const auto start = std::chrono::steady_clock::now();
  Status event_wait;
  std::thread event_waiter([&] { event_wait = (*done)->Wait(o.default_timeout); });
  uint32_t v = 0;
  const Status copied = ch->CopyDeviceToHost(&v, a->va, 4);  // waits for the memset first
  EXPECT_TRUE(copied.ok()) << copied.ToString();
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(1000));
  EXPECT_EQ(v, 77u);
  EXPECT_TRUE(ch->Wait(*f).ok());
  EXPECT_TRUE(ctx->Synchronize().ok());
  event_waiter.join();
  release.join();
  EXPECT_TRUE(event_wait.ok()) << event_wait.ToString();
}

// The CPU as an event's producer: work behind an armed event waits on the GPU until the CPU
// releases it (what host functions on a stream are built on).
TEST_F(GuestDriverTest, AnEventArmedForTheHostHoldsTheChannelUntilReleased) {
  auto ctx = NewContext();
  Channel* ch = ctx->default_channel();
  auto gate = ctx->CreateEvent();
  auto a = ctx->AllocDevice(4096);
  ASSERT_TRUE(gate.ok() && a.ok());
  const uint32_t first = (*gate)->ArmForHost();
  EXPECT_FALSE(*(*gate)->Query());
  ASSERT_TRUE(ch->WaitEvent(*gate).ok());
  auto f = ch->Memset32Async(a->va, 8, 1);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(ch->Wait(*f, milliseconds(200)).code(), StatusCode::kDeadlineExceeded);
  (*gate)->ReleaseFromHost(first);
  EXPECT_TRUE(ch->Wait(*f).ok());
  EXPECT_TRUE(*(*gate)->Query());
  const uint32_t second = (*gate)->ArmForHost();
  EXPECT_NE(second, first);
  ASSERT_TRUE(ch->WaitEvent(*gate).ok());
  auto g = ch->Memset32Async(a->va, 9, 1);
  ASSERT_TRUE(g.ok());
  (*gate)->ReleaseFromHost(second);
  EXPECT_TRUE(ch->Wait(*g).ok());
  uint32_t v = 0;
  ASSERT_TRUE(ch->CopyDeviceToHost(&v, a->va, 4).ok());
  EXPECT_EQ(v, 9u);
}

TEST_F(GuestDriverTest, EventsCompleteInOrderWithTimestamps) {
  auto ctx = NewContext();
  Channel* ch = ctx->default_channel();
  auto e1 = ctx->CreateEvent();
  auto e2 = ctx->CreateEvent();
  ASSERT_TRUE(e1.ok() && e2.ok());
  EXPECT_TRUE(*(*e1)->Query());  // never recorded: complete
  EXPECT_EQ((*e1)->TimestampNs().status().code(), StatusCode::kFailedPrecondition);
  auto a = ctx->AllocDevice(32 << 20);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(ch->Record(*e1).ok());
  ASSERT_TRUE(ch->Memset32Async(a->va, 3, 8 << 20).ok());
  ASSERT_TRUE(ch->Record(*e2).ok());
  ASSERT_TRUE((*e2)->Wait().ok());
  EXPECT_TRUE(*(*e1)->Query());
  auto t1 = (*e1)->TimestampNs();
  auto t2 = (*e2)->TimestampNs();
  ASSERT_TRUE(t1.ok() && t2.ok());
  EXPECT_LT(*t1, *t2) << "the memset between them took device time";
  // Re-recording moves the event forward.
  ASSERT_TRUE(ch->Record(*e1).ok());
  ASSERT_TRUE((*e1)->Wait().ok());
  EXPECT_GE(*(*e1)->TimestampNs(), *t2);
  EXPECT_TRUE(ctx->DestroyEvent(*e1).ok());
  EXPECT_EQ(ctx->DestroyEvent(*e1).code(), StatusCode::kNotFound);
}

TEST_F(GuestDriverTest, ChannelsOrderThroughEvents) {
  auto ctx = NewContext();
  Channel* producer = ctx->default_channel();
  auto consumer = ctx->CreateChannel();
  ASSERT_TRUE(consumer.ok());
  auto ev = ctx->CreateEvent();
  ASSERT_TRUE(ev.ok());
  const uint64_t size = 16 << 20;
  auto a = ctx->AllocDevice(size);
  auto b = ctx->AllocDevice(size);
  ASSERT_TRUE(a.ok() && b.ok());
  for (uint32_t round = 1; round <= 3; ++round) {
    ASSERT_TRUE(producer->Memset32Async(a->va, round, size / 4).ok());
    ASSERT_TRUE(producer->Record(*ev).ok());
    ASSERT_TRUE((*consumer)->WaitEvent(*ev).ok());
    auto f = (*consumer)->CopyAsync(b->va, a->va, size);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*consumer)->Wait(*f).ok());
    uint32_t last = 0;
    ASSERT_TRUE((*consumer)->CopyDeviceToHost(&last, b->va + size - 4, 4).ok());
    EXPECT_EQ(last, round);
  }
}

// cuStreamWaitEvent then cuEventDestroy at once is legal CUDA. The waiting channel's acquire may
// still be queued when the event's report slot goes back to the context and is handed to a new
// event: the new event must not make the old acquire wait again.
TEST_F(GuestDriverTest, AWaitOutlivesItsDestroyedEvent) {
  auto ctx = NewContext();
  Channel* waiter = ctx->default_channel();
  auto producer = ctx->CreateChannel();
  ASSERT_TRUE(producer.ok());
  const uint64_t size = 32 << 20;
  auto a = ctx->AllocDevice(size);
  ASSERT_TRUE(a.ok());
  for (int round = 0; round < 3; ++round) {
    auto ev = ctx->CreateEvent();
    ASSERT_TRUE(ev.ok());
    ASSERT_TRUE((*producer)->Record(*ev).ok());
    ASSERT_TRUE((*ev)->Wait().ok());
    // The waiter is busy, so its acquire of `ev` runs only after the event is gone.
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(waiter->Memset32Async(a->va, i, size / 4).ok());
    ASSERT_TRUE(waiter->WaitEvent(*ev).ok());
    ASSERT_TRUE(ctx->DestroyEvent(*ev).ok());
    auto reuse = ctx->CreateEvent();  // may get the same slot
    ASSERT_TRUE(reuse.ok());
    EXPECT_TRUE(waiter->Synchronize(std::chrono::seconds(5)).ok()) << "round " << round;
    ASSERT_TRUE(ctx->DestroyEvent(*reuse).ok());
  }
}

TEST_F(GuestDriverTest, EventsOfAnotherContextAreRefused) {
  auto c1 = NewContext();
  auto c2 = NewContext();
  auto ev = c2->CreateEvent();
  ASSERT_TRUE(ev.ok());
  EXPECT_EQ(c1->default_channel()->Record(*ev).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c1->default_channel()->WaitEvent(*ev).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c1->DestroyEvent(*ev).code(), StatusCode::kNotFound);
  EXPECT_EQ(c1->DestroyChannel(c2->default_channel()).code(), StatusCode::kNotFound);
  EXPECT_EQ(c1->DestroyChannel(c1->default_channel()).code(), StatusCode::kFailedPrecondition);
}

// ---- rings, channels, contexts, threads
// ---------------------------------------------------------------------

TEST_F(GuestDriverTest, RingsWrapAndReclaim) {
  ContextOptions o;
  o.ib_entries = 8;
  o.pushbuffer_bytes = 64 << 10;
  auto ctx = NewContext(o);
  Channel* ch = ctx->default_channel();
  auto a = ctx->AllocDevice(1 << 20);
  ASSERT_TRUE(a.ok());
  // Each memset of 4 KiB carries 4 KiB of inline pattern: 16 fill the pushbuffer.
  for (uint32_t i = 0; i < 300; ++i) {
    auto f = ch->Memset32Async(a->va + (i % 200) * 4096, i, 1024);
    ASSERT_TRUE(f.ok()) << i << " " << f.status().ToString();
    EXPECT_LE(ch->impl()->inflight(), 7u);
  }
  ASSERT_TRUE(ch->Synchronize().ok());
  std::vector<uint32_t> out(256 << 10);
  ASSERT_TRUE(ch->CopyDeviceToHost(out.data(), a->va, 1 << 20).ok());
  for (uint32_t page = 0; page < 200; ++page) {
    const uint32_t expected = page < 100 ? page + 200 : page;
    ASSERT_EQ(out[page * 1024], expected) << page;
    ASSERT_EQ(out[page * 1024 + 1023], expected) << page;
  }
}

TEST_F(GuestDriverTest, ChannelIdsAreAllocatedAndReused) {
  auto ctx = NewContext();
  std::vector<Channel*> channels;
  for (;;) {
    auto c = ctx->CreateChannel();
    if (!c.ok()) {
      EXPECT_EQ(c.status().code(), StatusCode::kResourceExhausted);
      break;
    }
    channels.push_back(*c);
  }
  EXPECT_EQ(channels.size(), 127u);  // plus the default channel: all 128
  const uint32_t id = channels[40]->id();
  ASSERT_TRUE(ctx->DestroyChannel(channels[40]).ok());
  auto again = ctx->CreateChannel();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->id(), id);
  auto a = ctx->AllocDevice(4096);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE((*again)->Memset32Async(a->va, 9, 1).ok());
  ASSERT_TRUE((*again)->Synchronize().ok());
}

TEST_F(GuestDriverTest, ContextsHaveSeparateAddressSpaces) {
  auto c1 = NewContext();
  auto c2 = NewContext();
  auto a1 = c1->AllocDevice(8192);
  auto a2 = c2->AllocDevice(8192);
  ASSERT_TRUE(a1.ok() && a2.ok());
  EXPECT_EQ(a1->va, a2->va) << "same heap layout, different spaces";
  ASSERT_TRUE(c1->default_channel()->Memset32Async(a1->va, 111, 2048).ok());
  ASSERT_TRUE(c2->default_channel()->Memset32Async(a2->va, 222, 2048).ok());
  uint32_t v1 = 0, v2 = 0;
  ASSERT_TRUE(c1->default_channel()->CopyDeviceToHost(&v1, a1->va + 8188, 4).ok());
  ASSERT_TRUE(c2->default_channel()->CopyDeviceToHost(&v2, a2->va + 8188, 4).ok());
  EXPECT_EQ(v1, 111u);
  EXPECT_EQ(v2, 222u);
}

TEST_F(GuestDriverTest, ThreadsOnChannelsAndContexts) {
  auto shared = NewContext();
  std::atomic<int> failures{0};
  auto work = [&](Context* ctx, Channel* ch, uint32_t seed) {
    for (int round = 0; round < 5; ++round) {
      const uint64_t size = (64 << 10) * (1 + (seed + round) % 5) + seed;
      auto a = ctx->AllocDevice(size);
      if (!a.ok()) {
        ++failures;
        return;
      }
      const auto in = Pattern(size, seed * 100 + round);
      std::vector<uint8_t> out(size);
      if (!ch->CopyHostToDevice(a->va, in.data(), size).ok() ||
          !ch->CopyDeviceToHost(out.data(), a->va, size).ok() || in != out ||
          !ctx->Free(a->va).ok()) {
        ++failures;
      }
    }
  };
  std::vector<std::thread> threads;
  std::vector<std::unique_ptr<Context>> own;
  for (uint32_t t = 0; t < 4; ++t) {
    auto ch = shared->CreateChannel();
    ASSERT_TRUE(ch.ok());
    threads.emplace_back(work, shared.get(), *ch, t);
    own.push_back(NewContext());
    threads.emplace_back(work, own.back().get(), own.back()->default_channel(), t + 10);
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(GuestDriverTest, ConcurrentSubmittersOnOneChannel) {
  auto ctx = NewContext();
  Channel* ch = ctx->default_channel();
  auto a = ctx->AllocDevice(1 << 20);
  ASSERT_TRUE(a.ok());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (uint32_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (uint32_t i = 0; i < 50; ++i) {
        auto f = ch->Memset32Async(a->va + t * 65536, t * 1000 + i, 16384);
        if (!f.ok() || !ch->Wait(*f).ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  for (uint32_t t = 0; t < 4; ++t) {
    uint32_t v = 0;
    ASSERT_TRUE(ch->CopyDeviceToHost(&v, a->va + t * 65536 + 65532, 4).ok());
    EXPECT_EQ(v, t * 1000 + 49);
  }
}

// Regression (CI, RuntimeDriverApi.ThreadsShareContexts): Context::Synchronize (and Free, which
// synchronizes) walked the context's channels while another thread destroyed one of them.
TEST_F(GuestDriverTest, ChannelsDestroyedWhileTheContextSynchronizes) {
  auto ctx = NewContext();
  auto a = ctx->AllocDevice(1 << 20);
  ASSERT_TRUE(a.ok());
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> churners;
  for (uint32_t t = 0; t < 2; ++t) {
    churners.emplace_back([&, t] {
      for (uint32_t i = 0; i < 40; ++i) {
        auto ch = ctx->CreateChannel();
        if (!ch.ok() || !(*ch)->Memset32Async(a->va + t * 4096, i, 1024).ok() ||
            !ctx->DestroyChannel(*ch).ok()) {
          ++failures;
        }
      }
    });
  }
  std::thread syncer([&] {
    while (!stop.load()) {
      auto b = ctx->AllocDevice(4096);
      if (!ctx->Synchronize().ok() || !b.ok() || !ctx->Free(b->va).ok()) ++failures;
    }
  });
  for (auto& t : churners) t.join();
  stop = true;
  syncer.join();
  EXPECT_EQ(failures.load(), 0);
  uint32_t v = 0;
  ASSERT_TRUE(ctx->default_channel()->CopyDeviceToHost(&v, a->va + 4096 + 4092, 4).ok());
  EXPECT_EQ(v, 39u);
}

// A Context::Synchronize that started before DestroyChannel still covers the channel's work: the
// channel stays listed until it has drained.
TEST_F(GuestDriverTest, DestroyChannelDrainsBeforeItUnlists) {
  auto ctx = NewContext();
  auto a = ctx->AllocDevice(8 << 20);
  ASSERT_TRUE(a.ok());
  auto ch = ctx->CreateChannel();
  ASSERT_TRUE(ch.ok());
  for (int i = 0; i < 8; ++i) ASSERT_TRUE((*ch)->Memset32Async(a->va, i, 2 << 20).ok());
  std::thread destroyer([&] { EXPECT_TRUE(ctx->DestroyChannel(*ch).ok()); });
  ASSERT_TRUE(ctx->Synchronize().ok());
  uint32_t v = 0;  // read before the destroyer is joined
  EXPECT_TRUE(ctx->default_channel()->CopyDeviceToHost(&v, a->va + (8 << 20) - 4, 4).ok());
  EXPECT_EQ(v, 7u);
  destroyer.join();
}

// Synchronous copies from/to pageable memory on one channel share its bounce buffers: several
// threads copying through the same channel at once must each get their own bytes.
TEST_F(GuestDriverTest, ConcurrentStagedCopiesOnOneChannel) {
  ContextOptions o;
  o.staging_bytes = 64 << 10;  // many rounds through both halves per copy
  auto ctx = NewContext(o);
  Channel* ch = ctx->default_channel();
  constexpr uint32_t kThreads = 4;
  constexpr uint64_t kBytes = (200 << 10) + 12;  // above the BAR1 threshold, odd tail
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto a = ctx->AllocDevice(kBytes);
      if (!a.ok()) {
        ++failures;
        return;
      }
      for (uint32_t round = 0; round < 6; ++round) {
        const auto in = Pattern(kBytes, t * 1000 + round);
        std::vector<uint8_t> out(kBytes);
        if (!ch->CopyHostToDevice(a->va, in.data(), kBytes).ok() ||
            !ch->CopyDeviceToHost(out.data(), a->va, kBytes).ok() || in != out) {
          ++failures;
        }
      }
      if (!ctx->Free(a->va).ok()) ++failures;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

// CUDA: a stream nobody has given work is idle (cuStreamQuery -> CUDA_SUCCESS). The driver's own
// setup commands of a new channel are not the caller's work.
TEST_F(GuestDriverTest, NewChannelsAndContextsAreIdle) {
  for (int i = 0; i < 5; ++i) {
    auto ctx = NewContext();
    Channel* d = ctx->default_channel();
    auto done = d->IsDone(d->last_fence());
    ASSERT_TRUE(done.ok());
    EXPECT_TRUE(*done) << "default channel of context " << i;
    for (int j = 0; j < 8; ++j) {
      auto ch = ctx->CreateChannel();
      ASSERT_TRUE(ch.ok());
      done = (*ch)->IsDone((*ch)->last_fence());
      ASSERT_TRUE(done.ok());
      EXPECT_TRUE(*done) << "channel " << j << " of context " << i;
    }
  }
}

// A Bus that, once armed, holds the next IB_PUT doorbell back for a while and then delivers it
// from another thread: what the aggregator's dispatcher does to a VM's submission while another
// VM's long (or hung, until max_run) kernel has the GPU.
class QueueingBus final : public ForwardingBus {
 public:
  using ForwardingBus::ForwardingBus;
  ~QueueingBus() override {
    if (late_.joinable()) late_.join();
  }
  void HoldNextDoorbell(std::chrono::milliseconds hold) {
    hold_ = hold;
    armed_ = true;
  }
  void Write(Bar bar, uint64_t offset, Width width, uint64_t value) override {
    const bool doorbell =
        bar == Bar::k1 && (offset & (gf100::pfifo::kUserPageSize - 1)) == gf100::userd::kIbPut;
    if (doorbell && armed_.exchange(false)) {
      late_ = std::thread([this, bar, offset, width, value] {
        std::this_thread::sleep_for(hold_);
        inner_->Write(bar, offset, width, value);
      });
      return;
    }
    inner_->Write(bar, offset, width, value);
  }

 private:
  std::atomic<bool> armed_{false};
  std::chrono::milliseconds hold_{0};
  std::thread late_;
};

// A new context's channel setup waits its turn on a busy GPU like any other work (the context's
// default timeout), not a shorter drain limit: another VM holding the GPU for a few seconds (up to
// the aggregator's max_run, 5 s by default) must not make cuCtxCreate fail here.
TEST_F(GuestDriverTest, AContextCreatedWhileTheGpuIsBusyWaitsItsTurn) {
  QueueingBus* bus = RestartDriverOn<QueueingBus>();
  ASSERT_NE(bus, nullptr);
  ContextOptions o;
  o.default_timeout = std::chrono::seconds(30);
  bus->HoldNextDoorbell(milliseconds(6500));
  const auto start = std::chrono::steady_clock::now();
  auto ctx = driver_->CreateContext(o);
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(6500));
  auto a = (*ctx)->AllocDevice(4096);
  ASSERT_TRUE(a.ok());
  Channel* ch = (*ctx)->default_channel();
  auto f = ch->Memset32Async(a->va, 9, 1);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(ch->Wait(*f).ok());
  uint32_t v = 0;
  ASSERT_TRUE(ch->CopyDeviceToHost(&v, a->va, 4).ok());
  EXPECT_EQ(v, 9u);
}

TEST_F(GuestDriverTest, BadContextOptions) {
  ContextOptions o;
  o.ib_entries = 1000;
  EXPECT_EQ(driver_->CreateContext(o).status().code(), StatusCode::kInvalidArgument);
  o = {};
  o.pushbuffer_bytes = 100;
  EXPECT_EQ(driver_->CreateContext(o).status().code(), StatusCode::kInvalidArgument);
  o = {};
  o.default_timeout = std::chrono::nanoseconds(0);
  EXPECT_EQ(driver_->CreateContext(o).status().code(), StatusCode::kInvalidArgument);
  o = {};
  o.copy_engine = CopyEngine(7);
  EXPECT_EQ(driver_->CreateContext(o).status().code(), StatusCode::kInvalidArgument);
}

// Commands written by the caller into its own memory (a DRM pushbuffer) run as IB entries of their
// own before the channel's fence: each segment releases a semaphore into pinned memory. A small IB
// ring is lapped many times by submissions of several entries each, so the ring's room is counted
// in entries, not submissions.
TEST_F(GuestDriverTest, CallerWrittenSegmentsRunInOrderAndLapTheIbRing) {
  ContextOptions o;
  o.ib_entries = 16;
  auto ctx = NewContext(o);
  Channel* ch = ctx->default_channel();
  auto commands = ctx->AllocHost(64 << 10);
  auto results = ctx->AllocHost(4096);
  ASSERT_TRUE(commands.ok() && results.ok());
  auto* words = static_cast<uint32_t*>(commands->host);
  // Segment k (8 words at word 8*k): release `value` into results word k.
  auto write_segment = [&](uint32_t k, uint32_t value) {
    PushBuffer pb;
    const uint64_t target = results->va + 4 * k;
    pb.Inc(0, gf100::host::kSemaphoreA,
           {uint32_t(target >> 32), uint32_t(target), value,
            gf100::host::kSemOpRelease | gf100::host::kSemReleaseSize4});
    EXPECT_LE(pb.size(), 8u);
    std::memcpy(words + 8 * k, pb.words().data(), pb.size() * 4);
    return CommandSegment{commands->va + 32 * k, uint32_t(pb.size())};
  };
  const auto* out = static_cast<const uint32_t*>(results->host);
  // A gate first: the channel waits (semaphore acquire) until the CPU opens it, so nothing is
  // consumed while 40 submissions of 5 segments (6 IB entries each) queue behind it on another
  // thread. The 16-entry ring holds two of them at a time: the channel must wait for room counted
  // in entries, not in submissions, or it overwrites entries the GPU has not read yet.
  auto* gate = static_cast<uint32_t*>(results->host) + 512;
  {
    PushBuffer pb;
    const uint64_t target = results->va + 4 * 512;
    pb.Inc(0, gf100::host::kSemaphoreA,
           {uint32_t(target >> 32), uint32_t(target), 1, gf100::host::kSemOpAcquire});
    std::memcpy(words + 8 * 1000, pb.words().data(), pb.size() * 4);
    const CommandSegment wait{commands->va + 32 * 1000, uint32_t(pb.size())};
    ASSERT_TRUE(ch->SubmitSegments({&wait, 1}).ok());
  }
  Fence last{};
  std::atomic<bool> queued{false};
  std::thread producer([&] {
    for (uint32_t round = 0; round < 40; ++round) {
      std::vector<CommandSegment> segments;
      for (uint32_t i = 0; i < 5; ++i) {
        const uint32_t k = round * 5 + i;
        segments.push_back(write_segment(k, 1000 + k));
      }
      auto fence = ch->SubmitSegments(segments);
      EXPECT_TRUE(fence.ok()) << fence.status().ToString();
      if (fence.ok()) last = *fence;
    }
    queued = true;
  });
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_FALSE(queued.load());  // blocked for room behind the gate
  __atomic_store_n(gate, 1u, __ATOMIC_RELEASE);
  producer.join();
  ASSERT_TRUE(ch->Wait(last).ok());
  for (uint32_t k = 0; k < 200; ++k) ASSERT_EQ(out[k], 1000 + k) << "segment " << k;
  EXPECT_EQ(last.sequence, ch->last_fence().sequence);

  // Refused: nothing, too many for the ring, misaligned, empty, outside every allocation, crossing
  // the allocation's end.
  EXPECT_EQ(ch->SubmitSegments({}).status().code(), StatusCode::kInvalidArgument);
  std::vector<CommandSegment> many(15, CommandSegment{commands->va, 1});
  EXPECT_EQ(ch->SubmitSegments(many).status().code(), StatusCode::kInvalidArgument);
  const CommandSegment misaligned{commands->va + 2, 4};
  EXPECT_EQ(ch->SubmitSegments({&misaligned, 1}).status().code(), StatusCode::kInvalidArgument);
  const CommandSegment empty{commands->va, 0};
  EXPECT_EQ(ch->SubmitSegments({&empty, 1}).status().code(), StatusCode::kInvalidArgument);
  const CommandSegment nowhere{results->va + (1ull << 30), 4};
  EXPECT_FALSE(ch->SubmitSegments({&nowhere, 1}).ok());
  const CommandSegment crossing{commands->va + (64 << 10) - 8, 4};
  EXPECT_FALSE(ch->SubmitSegments({&crossing, 1}).ok());
  // None of them reached the GPU: the channel is still usable and its fence unchanged.
  EXPECT_EQ(ch->last_fence().sequence, last.sequence);
  EXPECT_TRUE(ctx->status().ok());
}

}  // namespace
}  // namespace gpuvm::guest
