// fv's submissions through the scheduler's dispatcher on the software GPU:
// DispatchedSubmissionQueue and FvEngineSink between unmodified guest drivers (fv VMs inside the
// test process) and the physical channels. Checks that every submission is released exactly once,
// the guests' results are right, and that the GPU time charged comes from the device
// (CHAN_BUSY_US), not from wall time.
#include "aggregator/fv_dispatch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gpu/hw/pfifo.h"
#include "guest-pv-driver/driver.h"
#include "scheduler/clock.h"
#include "tests/fv_test_vm.h"

namespace gpuvm::aggregator {
namespace {

using fv_testing::FvTestVm;
using fv_testing::FvTestWorld;

constexpr uint64_t kMiB = 1ull << 20;

// A guest sees its last fence before the dispatcher has seen that submission complete: waits (up to
// 10 s) until the dispatcher has nothing queued or running.
bool WaitUntilDispatched(sched::Dispatcher& dispatcher) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    bool queued = false;
    for (const sched::VmStats& v : dispatcher.Stats().scheduler.vms) queued |= v.queue_depth > 0;
    if (!queued && !dispatcher.busy()) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// A FIFO dispatcher (BAND would also charge its own CPU time) over `sink`, polling every `poll`.
Result<std::unique_ptr<sched::Dispatcher>> FifoDispatcher(sched::Clock* clock, FvEngineSink* sink,
                                                          sched::Duration poll) {
  sched::DispatcherOptions options;
  options.poll_interval = poll;
  options.scheduler.policy = sched::PolicyKind::kFifo;
  return sched::Dispatcher::Create(clock, sink, options);
}

// Puts `dispatcher` between the world's VMs and the GPU, as the aggregator does: the host's queue
// becomes a DispatchedSubmissionQueue over `sink`, which calls `register_vms` as the control
// service's Reconcile would.
void RouteThroughDispatcher(FvTestWorld& world, sched::Dispatcher* dispatcher, FvEngineSink* sink,
                            std::function<void()> register_vms) {
  std::lock_guard lock(world.lock());
  world.host().SetQueue(std::make_unique<DispatchedSubmissionQueue>(&world.host(), dispatcher, sink,
                                                                    std::move(register_vms)));
}

// Copies in, back, and checks: PCOPY work the device accounts to the channel.
std::string CopyWorkload(guest::Bus* bus, uint32_t seed, uint64_t n = 2 * kMiB) {
  auto driver = guest::Driver::Create(bus);
  if (!driver.ok()) return "driver: " + driver.status().ToString();
  auto ctx = (*driver)->CreateContext();
  if (!ctx.ok()) return "context: " + ctx.status().ToString();
  auto a = (*ctx)->AllocDevice(n);
  if (!a.ok()) return "alloc: " + a.status().ToString();
  std::vector<uint32_t> in(n / 4), out(n / 4);
  for (size_t i = 0; i < in.size(); ++i) in[i] = uint32_t(i * 2654435761u) ^ seed;
  guest::Channel* ch = (*ctx)->default_channel();
  for (int round = 0; round < 3; ++round) {
    if (Status s = ch->CopyHostToDevice(a->va, in.data(), n); !s.ok()) return s.ToString();
    if (Status s = ch->CopyDeviceToHost(out.data(), a->va, n); !s.ok()) return s.ToString();
    if (in != out) return "data mismatch";
  }
  return "";
}

TEST(FvDispatchTest, TwoVmsThroughTheDispatcherAreChargedDeviceTime) {
  auto world = FvTestWorld::Create({});
  ASSERT_TRUE(world.ok()) << world.status().ToString();
  sched::MonotonicClock clock;
  FvEngineSink sink;
  auto dispatcher = FifoDispatcher(&clock, &sink, std::chrono::microseconds(100));
  ASSERT_TRUE(dispatcher.ok()) << dispatcher.status().ToString();
  std::vector<FvTestVm*> vms;
  for (int i = 0; i < 2; ++i) {
    auto vm = (*world)->AddVm(
        {.mode = FvMode::kLazy, .vram_bytes = 32 * kMiB, .channels = 4, .vm_id = 0, .name = ""});
    ASSERT_TRUE(vm.ok()) << vm.status().ToString();
    vms.push_back(*vm);
  }
  std::atomic<int> registered{0};
  RouteThroughDispatcher(**world, dispatcher->get(), &sink, [&] {
    // What the control service's Reconcile does: every VM gets its share.
    for (sched::VmId id : {1u, 2u}) {  // FvTestWorld numbers its VMs from 1
      if ((*dispatcher)->AddVm(id, 50).ok()) ++registered;
    }
  });
  std::vector<std::string> errors(vms.size());
  std::vector<std::thread> guests;
  for (size_t i = 0; i < vms.size(); ++i) {
    guests.emplace_back([&, i] { errors[i] = CopyWorkload(vms[i], uint32_t(i + 1)); });
  }
  for (std::thread& t : guests) t.join();
  for (size_t i = 0; i < vms.size(); ++i)
    EXPECT_EQ(errors[i], "") << "VM " << i << "\n" << (*world)->log();
  EXPECT_EQ(registered.load(), 2);
  ASSERT_TRUE(WaitUntilDispatched(**dispatcher));
  const sched::DispatcherStats stats = (*dispatcher)->Stats();
  ASSERT_EQ(stats.scheduler.vms.size(), 2u);
  for (const sched::VmStats& v : stats.scheduler.vms) {
    EXPECT_GT(v.completed, 0u);
    EXPECT_EQ(v.completed, v.submitted) << "every submission released once and completed";
    EXPECT_GT(v.gpu_time.count(), 0) << "the device's busy time was charged";
  }
  // Every microsecond the device accounted to a channel was charged to a VM, and nothing else:
  // work reaches the channels only through the dispatcher, and a channel accrues busy time only
  // while it has work, so the charges telescope to the channels' counters.
  int64_t charged_ns = 0;
  for (const sched::VmStats& v : stats.scheduler.vms) charged_ns += v.gpu_time.count();
  int64_t device_us = 0;
  for (uint32_t c = 0; c < gf100::pfifo::kChannels; ++c) {
    device_us += (*world)->gpu().device().ReadReg(gf100::pfifo::kChanBusyUs + 4 * c);
  }
  EXPECT_GT(device_us, 0);
  EXPECT_EQ(charged_ns, device_us * 1000);
  EXPECT_EQ(sink.timeouts(), 0u);
  EXPECT_EQ(sink.forwarded(), stats.started);
  // As the aggregator tears down: the VMs and the host (whose queue tells the dispatcher the VMs
  // are gone) first, then the dispatcher, then the sink.
  world->reset();
  dispatcher->reset();
}

// Kill-work (docs/SCHEDULER.md "Pause, kernel limit, kill-work") through fv: VM 1 is paused, so
// the copies of its four contexts (four channels: more than the three PSUBFIFO units a channel
// error is presented on) wait queued; kill-work fails them, and every context's wait ends with a
// channel error KILLED_BY_HOST, the guest driver's kAborted. VM 2 computes correctly, and after
// resume VM 1's next contexts do too.
TEST(FvDispatchTest, KillWorkFailsEveryWaitingContextWithAChannelError) {
  auto world = FvTestWorld::Create({});
  ASSERT_TRUE(world.ok()) << world.status().ToString();
  sched::MonotonicClock clock;
  FvEngineSink sink;
  auto dispatcher = FifoDispatcher(&clock, &sink, std::chrono::microseconds(100));
  ASSERT_TRUE(dispatcher.ok()) << dispatcher.status().ToString();
  std::vector<FvTestVm*> vms;
  for (int i = 0; i < 2; ++i) {
    auto vm = (*world)->AddVm(
        {.mode = FvMode::kLazy, .vram_bytes = 32 * kMiB, .channels = 8, .vm_id = 0, .name = ""});
    ASSERT_TRUE(vm.ok()) << vm.status().ToString();
    vms.push_back(*vm);
  }
  const auto register_vms = [&] {
    for (sched::VmId id : {1u, 2u}) (void)(*dispatcher)->AddVm(id, 50);
  };
  RouteThroughDispatcher(**world, dispatcher->get(), &sink, register_vms);
  register_vms();

  auto driver = guest::Driver::Create(vms[0]);
  ASSERT_TRUE(driver.ok()) << driver.status().ToString();
  constexpr int kContexts = 4;
  std::vector<std::unique_ptr<guest::Context>> contexts;
  std::vector<uint64_t> buffers;
  guest::ContextOptions bounded;
  bounded.default_timeout = std::chrono::seconds(20);  // a wait nobody ends fails, not hangs
  for (int i = 0; i < kContexts; ++i) {
    auto ctx = (*driver)->CreateContext(bounded);
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    auto a = (*ctx)->AllocDevice(kMiB);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    buffers.push_back(a->va);
    contexts.push_back(std::move(*ctx));
  }
  // Paused once its contexts exist (making one waits for the GPU).
  ASSERT_TRUE((*dispatcher)->Pause(1).ok());
  std::vector<uint8_t> data(kMiB, 0x5a);
  std::vector<Status> waits(kContexts);
  std::vector<std::thread> guests;
  for (int i = 0; i < kContexts; ++i) {
    guests.emplace_back([&, i] {
      waits[i] = contexts[i]->default_channel()->CopyHostToDevice(buffers[i], data.data(), kMiB);
    });
  }
  // Every context's copy waits in the paused VM's queue.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  auto queued = [&] { return (*dispatcher)->Stats().scheduler.vms[0].queue_depth; };
  while (queued() < kContexts && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(queued(), uint32_t(kContexts));
  Result<size_t> killed = (*dispatcher)->KillWork(1, Status::Aborted("killed by the operator"));
  ASSERT_TRUE(killed.ok());
  EXPECT_EQ(*killed, size_t(kContexts));
  for (std::thread& t : guests) t.join();
  for (int i = 0; i < kContexts; ++i) {
    EXPECT_EQ(waits[i].code(), StatusCode::kAborted) << waits[i].ToString();
    EXPECT_NE(waits[i].message().find("KILLED_BY_HOST"), std::string::npos) << waits[i].ToString();
    const std::optional<guest::GpuFault> fault = contexts[i]->fault();
    ASSERT_TRUE(fault.has_value()) << i;
    EXPECT_EQ(fault->kind, guest::GpuFault::Kind::kCommandError);
    EXPECT_NE(fault->subfifo_intr & gf100::pfifo::kSubfifoIntrGpuvmKilled, 0u);
  }
  EXPECT_EQ(sink.cancels(), uint64_t(kContexts));
  EXPECT_NE((*world)->log().find("failed: killed by the operator"), std::string::npos)
      << (*world)->log();
  EXPECT_EQ(CopyWorkload(vms[1], 7), "");  // the other VM was never touched
  contexts.clear();
  driver->reset();
  // Resumed, the VM runs new work normally.
  ASSERT_TRUE((*dispatcher)->Resume(1).ok());
  EXPECT_EQ(CopyWorkload(vms[0], 8), "") << (*world)->log();
  world->reset();
  dispatcher->reset();
}

// Preemption (docs/SCHEDULER.md "Preemption"): BAND at a 1 ms quantum over two VMs copying 16 MiB
// at a time. The sink suspends a running submission by holding its channel and resumes it later;
// whether and how often that happens depends on timing (not asserted), but the results must stay
// right and the charges must still add up exactly to the channels' busy time, suspensions or not.
TEST(FvDispatchTest, PreemptedSubmissionsStayCorrectAndFullyCharged) {
  auto world = FvTestWorld::Create({});
  ASSERT_TRUE(world.ok()) << world.status().ToString();
  sched::MonotonicClock clock;
  FvEngineSink sink;
  sched::DispatcherOptions options;
  options.poll_interval = std::chrono::microseconds(100);
  options.quantum = std::chrono::milliseconds(1);
  options.scheduler.policy = sched::PolicyKind::kBand;
  options.scheduler.band.charge_scheduler_time = false;  // only device time, to compare
  auto dispatcher = sched::Dispatcher::Create(&clock, &sink, options);
  ASSERT_TRUE(dispatcher.ok()) << dispatcher.status().ToString();
  std::vector<FvTestVm*> vms;
  for (int i = 0; i < 2; ++i) {
    auto vm = (*world)->AddVm(
        {.mode = FvMode::kLazy, .vram_bytes = 96 * kMiB, .channels = 4, .vm_id = 0, .name = ""});
    ASSERT_TRUE(vm.ok()) << vm.status().ToString();
    vms.push_back(*vm);
  }
  RouteThroughDispatcher(**world, dispatcher->get(), &sink, [&] {
    for (sched::VmId id : {1u, 2u}) (void)(*dispatcher)->AddVm(id, 50);
  });
  std::vector<std::string> errors(vms.size());
  std::vector<std::thread> guests;
  for (size_t i = 0; i < vms.size(); ++i) {
    guests.emplace_back([&, i] { errors[i] = CopyWorkload(vms[i], uint32_t(i + 7), 16 * kMiB); });
  }
  for (std::thread& t : guests) t.join();
  for (size_t i = 0; i < vms.size(); ++i)
    EXPECT_EQ(errors[i], "") << "VM " << i << "\n" << (*world)->log();
  ASSERT_TRUE(WaitUntilDispatched(**dispatcher));
  const sched::DispatcherStats stats = (*dispatcher)->Stats();
  int64_t charged_ns = 0;
  for (const sched::VmStats& v : stats.scheduler.vms) {
    EXPECT_EQ(v.completed, v.submitted);
    charged_ns += v.gpu_time.count();
  }
  int64_t device_us = 0;
  for (uint32_t c = 0; c < gf100::pfifo::kChannels; ++c) {
    device_us += (*world)->gpu().device().ReadReg(gf100::pfifo::kChanBusyUs + 4 * c);
  }
  EXPECT_GT(device_us, 0);
  EXPECT_EQ(charged_ns, device_us * 1000);
  EXPECT_EQ(stats.preemptions, sink.suspends());
  EXPECT_EQ(stats.suspend_errors, 0u);
  std::printf("preemptions: %llu, slices charged: %llu\n",
              static_cast<unsigned long long>(stats.preemptions),
              static_cast<unsigned long long>(stats.slices));
  world->reset();
  dispatcher->reset();
}

// The software GPU says when a channel runs dry, and the sink passes that on (its wake function,
// the dispatcher's PollNow, on the GPU's engine thread), so completions are seen then rather than
// at the next poll (here the longest the dispatcher allows, 1 s). After Detach nothing calls the
// wake function any more.
TEST(FvDispatchTest, TheGpuWakesTheDispatcherWhenAChannelRunsDry) {
  auto world = FvTestWorld::Create({});
  ASSERT_TRUE(world.ok()) << world.status().ToString();
  sched::MonotonicClock clock;
  FvEngineSink sink;
  auto dispatcher = FifoDispatcher(&clock, &sink, std::chrono::seconds(1));
  ASSERT_TRUE(dispatcher.ok()) << dispatcher.status().ToString();
  std::atomic<int> wakes{0};
  sink.SetWake([&] {
    ++wakes;
    (void)(*dispatcher)->PollNow();  // as the aggregator does
  });
  auto vm = (*world)->AddVm(
      {.mode = FvMode::kOptimized, .vram_bytes = 32 * kMiB, .channels = 4, .vm_id = 0, .name = ""});
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  RouteThroughDispatcher(**world, dispatcher->get(), &sink,
                         [&] { (void)(*dispatcher)->AddVm(1, 100); });
  EXPECT_EQ(CopyWorkload(*vm, 7), "") << (*world)->log();
  ASSERT_TRUE(WaitUntilDispatched(**dispatcher));
  const sched::DispatcherStats stats = (*dispatcher)->Stats();
  ASSERT_EQ(stats.scheduler.vms.size(), 1u);
  EXPECT_GT(stats.completed, 0u);
  EXPECT_EQ(stats.scheduler.vms[0].completed, stats.scheduler.vms[0].submitted);
  EXPECT_GT(wakes.load(), 0);
  EXPECT_EQ(sink.timeouts(), 0u);
  // The host's queue goes (Detach): the GPU no longer calls the sink.
  {
    std::lock_guard lock((*world)->lock());
    (*world)->host().SetQueue(std::make_unique<FifoSubmissionQueue>(
        [&](const Submission& s) { (*world)->host().Forward(s); }));
  }
  const int before = wakes.load();
  EXPECT_EQ(CopyWorkload(*vm, 8), "") << (*world)->log();
  EXPECT_EQ(wakes.load(), before);
  world->reset();
  dispatcher->reset();
}

// A submission that finds the engine free starts on the thread that queued it (the aggregator's,
// serving the guest's IB_PUT write), not after a wake-up of the dispatch thread: with a dispatcher
// nobody else steps (driven, no thread), a guest's work still runs — each submission is started by
// DispatchedSubmissionQueue::Submit and completed by the GPU's drained signal. If it does not (the
// guest hangs), the test steps the dispatcher itself to let the guest finish, and fails.
TEST(FvDispatchTest, ASubmissionStartsOnTheThreadThatQueuedIt) {
  auto world = FvTestWorld::Create({});
  ASSERT_TRUE(world.ok()) << world.status().ToString();
  sched::MonotonicClock clock;
  FvEngineSink sink;
  sched::DispatcherOptions options;
  options.own_thread = false;
  options.scheduler.policy = sched::PolicyKind::kFifo;
  auto dispatcher = sched::Dispatcher::Create(&clock, &sink, options);
  ASSERT_TRUE(dispatcher.ok()) << dispatcher.status().ToString();
  sink.SetWake([&] { (void)(*dispatcher)->PollNow(); });  // as the aggregator does
  auto vm = (*world)->AddVm(
      {.mode = FvMode::kOptimized, .vram_bytes = 32 * kMiB, .channels = 4, .vm_id = 0, .name = ""});
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  RouteThroughDispatcher(**world, dispatcher->get(), &sink,
                         [&] { (void)(*dispatcher)->AddVm(1, 100); });
  std::atomic<bool> finished{false};
  std::string error;
  std::thread guest([&] {
    error = CopyWorkload(*vm, 9);
    finished = true;
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!finished && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const bool unaided = finished;
  while (!finished) {  // unstick the guest so that the test ends
    (*dispatcher)->Step();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  guest.join();
  EXPECT_TRUE(unaided) << "the guest's submissions waited for a dispatcher step";
  EXPECT_EQ(error, "") << (*world)->log();
  ASSERT_TRUE(WaitUntilDispatched(**dispatcher));
  const sched::DispatcherStats stats = (*dispatcher)->Stats();
  EXPECT_GT(stats.started, 0u);
  EXPECT_EQ(stats.completed, stats.started);
  EXPECT_EQ(sink.forwarded(), stats.started);
  world->reset();
  dispatcher->reset();
}

// max_run counts the time the aggregator ran (FvEngineSink::kMaxPollGap): a stopped aggregator's
// clock jumps between two polls, which must neither time the submission out nor be charged to it;
// regular polls past max_run do time it out, and it is charged the device's time, not wall time.
TEST(FvDispatchTest, MaxRunCountsTheTimeTheAggregatorRan) {
  auto world = FvTestWorld::Create({});
  ASSERT_TRUE(world.ok()) << world.status().ToString();
  sched::ManualClock clock;
  FvEngineSink sink(std::chrono::seconds(1), &clock);
  sink.Attach(&(*world)->host());
  // A submission on a channel nothing runs (not in CHAN_TABLE): it never completes.
  sink.Remember(1, aggregator::Submission{1, 100, 5});
  ASSERT_TRUE(sink.Start(1, 1).ok());
  for (int stop = 0; stop < 3; ++stop) {
    clock.Advance(std::chrono::seconds(10));
    Result<sched::SinkPoll> p = sink.Poll(1, 1);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_FALSE(p->done) << "timed out over a stop (" << stop << ")";
  }
  // 3 x 250 ms counted so far: about 25 regular polls 10 ms apart reach the 1 s.
  int polls = 0;
  Result<sched::SinkPoll> p = sched::SinkPoll::Running();
  do {
    clock.Advance(std::chrono::milliseconds(10));
    p = sink.Poll(1, 1);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    ASSERT_LT(++polls, 1000);
  } while (!p->done);
  EXPECT_GE(polls, 20);
  EXPECT_LE(polls, 30);
  EXPECT_EQ(p->status.code(), StatusCode::kDeadlineExceeded) << p->status.ToString();
  ASSERT_TRUE(p->gpu_time.has_value()) << "the device's time, not the 30 s of wall time";
  EXPECT_LT(*p->gpu_time, std::chrono::milliseconds(100));
  EXPECT_EQ(sink.timeouts(), 1u);
  sink.Detach(&(*world)->host());
}

}  // namespace
}  // namespace gpuvm::aggregator
