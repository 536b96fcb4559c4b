#include "aggregator/fv_dispatch.h"

#include <algorithm>

#include "gpu/hw/pfifo.h"
#include "gpu/hw/ramin.h"

namespace gpuvm::aggregator {

namespace pf = gf100::pfifo;

void FvEngineSink::SetWake(std::function<void()> wake) {
  std::lock_guard lock(wake_mu_);
  wake_ = std::move(wake);
  wake_set_.store(static_cast<bool>(wake_));
}

void FvEngineSink::Attach(FvHost* host) {
  {
    std::lock_guard lock(mu_);
    host_ = host;
    // CHAN_BUSY_US exists on the software GPU only (the only GPU fv runs on today: a real card
    // would need an IOMMU mapping of guest RAM); elsewhere GPU time falls back to wall time.
    busy_counter_ = host != nullptr && host->gpu().Describe().rfind("sim", 0) == 0;
    // The software GPU also has PREEMPT (docs/SOFTWARE-GPU.md "Preemption").
    preemptible_ = busy_counter_;
    drain_reported_ = host != nullptr && host->gpu().ReportsChannelDrained();
  }
  if (host != nullptr) {
    // Any channel running dry is worth a poll: at most one submission runs at a time. Set outside
    // mu_: the handler may step the dispatcher, which calls Poll/Start (they take mu_).
    host->gpu().SetChannelDrainedHandler([this](uint32_t) {
      std::lock_guard wake_lock(wake_mu_);
      if (wake_) wake_();
    });
  }
}

void FvEngineSink::Detach(FvHost* host) {
  bool attached = false;
  {
    std::lock_guard lock(mu_);
    attached = host_ == host && host != nullptr;
    if (attached) {
      host_ = nullptr;
      drain_reported_ = false;
    }
  }
  // Outside mu_ (see Attach); once this returns the handler no longer runs.
  if (attached) host->gpu().SetChannelDrainedHandler(nullptr);
}

void FvEngineSink::Remember(sched::SubmissionHandle handle, const Submission& submission) {
  std::lock_guard lock(mu_);
  submissions_[handle] = submission;
}

void FvEngineSink::Discard(sched::SubmissionHandle handle) {
  std::lock_guard lock(mu_);
  submissions_.erase(handle);
}

void FvEngineSink::Forget(uint32_t vm) {
  std::lock_guard lock(mu_);
  forgotten_.insert(vm);
  for (auto it = submissions_.begin(); it != submissions_.end();) {
    it = it->second.vm == vm ? submissions_.erase(it) : std::next(it);
  }
  std::erase_if(suspended_, [vm](const auto& e) { return e.second.submission.vm == vm; });
}

Status FvEngineSink::Start(sched::VmId vm, sched::SubmissionHandle handle) {
  std::lock_guard lock(mu_);
  if (auto paused = suspended_.find(handle); paused != suspended_.end()) {
    // Resumed: its IB_PUT is on the GPU already; the channel may run again.
    Running r = paused->second;
    suspended_.erase(paused);
    if (host_ == nullptr || forgotten_.contains(vm)) return Status::NotFound("VM is gone");
    r.last_poll = clock_->Now();
    host_->HoldChannel(r.submission.physical_channel, false);
    running_[handle] = r;
    return Status::Ok();
  }
  auto it = submissions_.find(handle);
  if (it == submissions_.end() || forgotten_.contains(vm)) {
    return Status::NotFound("submission of a VM that is gone");
  }
  const Submission s = it->second;
  submissions_.erase(it);
  if (host_ == nullptr) return Status::Unavailable("no fv host");
  if (held_after_timeout_.erase(s.physical_channel) != 0) {
    host_->HoldChannel(s.physical_channel, false);  // what was left of the timed-out work resumes
  }
  running_[handle] = Running{s, clock_->Now(), sched::Duration(0), BusyUs(s.physical_channel),
                             Bound(s.physical_channel)};
  host_->Forward(s);
  ++forwarded_;
  if (CaughtUp(s)) {
    // Nothing new to run (an IB_PUT the channel had already reached, e.g. the guest clearing its
    // USER page): the GPU will not report the channel running dry, so poll now.
    std::lock_guard wake_lock(wake_mu_);
    if (wake_) wake_();
  }
  return Status::Ok();
}

bool FvEngineSink::Bound(uint32_t physical_channel) {
  return physical_channel < pf::kChannels &&
         (host_->gpu().device().ReadReg(pf::kChanTable + physical_channel * pf::kChanTableStride) &
          pf::kChanValid) != 0;
}

bool FvEngineSink::CaughtUp(const Submission& s) {
  const uint32_t c = s.physical_channel;
  const uint32_t ib_get = host_->gpu().device().Read32(
      gpu::Bar::k1, uint64_t(c) * pf::kUserPageSize + gf100::userd::kIbGet);
  return ib_get == s.ib_put && (host_->ChannelState(c) & pf::kStatePending) == 0;
}

uint32_t FvEngineSink::BusyUs(uint32_t physical_channel) {
  if (!busy_counter_ || physical_channel >= pf::kChannels) return 0;
  return host_->gpu().device().ReadReg(pf::kChanBusyUs + 4 * physical_channel);
}

Result<sched::SinkPoll> FvEngineSink::Poll(sched::VmId vm, sched::SubmissionHandle handle) {
  std::lock_guard lock(mu_);
  auto it = running_.find(handle);
  if (it == running_.end()) return sched::SinkPoll::Done();
  Running& r = it->second;
  if (host_ == nullptr || forgotten_.contains(vm)) {
    running_.erase(it);
    return sched::SinkPoll::Done();  // the host or the VM went: its channel is stopped
  }
  const uint32_t c = r.submission.physical_channel;
  // The channel's busy time since Start: only this submission ran on the GPU meanwhile (the
  // dispatcher starts one at a time), so that is its GPU time. Wrapping 32-bit microseconds.
  auto device_time = [&]() -> std::optional<sched::Duration> {
    if (!busy_counter_) return std::nullopt;
    return std::chrono::microseconds(BusyUs(c) - r.busy_us_at_start);
  };
  // Done when caught up, or when stopped while it ran (its VM unbound the channel;
  // FvHost::StopChannel zeroes the USER page, so IB_GET would never catch up): nothing of it can
  // run any more.
  if ((r.bound_at_start && !Bound(c)) || CaughtUp(r.submission)) {
    const std::optional<sched::Duration> used = device_time();
    running_.erase(it);
    return sched::SinkPoll::Done(used);
  }
  // Run time as the aggregator ran: a longer gap since the last poll is a stop (see the header).
  const sched::TimePoint now = clock_->Now();
  r.ran += std::clamp<sched::Duration>(now - r.last_poll, sched::Duration(0), kMaxPollGap);
  r.last_poll = now;
  if (r.ran > max_run_) {
    // Given up on: held, so the rest of it does not run unknown to the scheduler.
    host_->HoldChannel(c, true);
    held_after_timeout_.insert(c);
    const std::optional<sched::Duration> used = device_time();
    running_.erase(it);
    ++timeouts_;
    return sched::SinkPoll::Failed(
        Status::DeadlineExceeded("submission on physical channel " + std::to_string(c) +
                                 " did not complete in time"),
        used);
  }
  return sched::SinkPoll::Running(device_time());
}

Status FvEngineSink::Suspend(sched::VmId /*vm*/, sched::SubmissionHandle handle) {
  std::lock_guard lock(mu_);
  auto it = running_.find(handle);
  if (it == running_.end()) return Status::NotFound("no such running submission");
  if (host_ == nullptr) return Status::Unavailable("no fv host");
  host_->HoldChannel(it->second.submission.physical_channel, true);
  suspended_[handle] = it->second;
  running_.erase(it);
  ++suspends_;
  return Status::Ok();
}

Result<std::optional<sched::Duration>> FvEngineSink::Cancel(sched::VmId vm,
                                                            sched::SubmissionHandle handle,
                                                            const Status& why) {
  std::lock_guard lock(mu_);
  if (host_ == nullptr || forgotten_.contains(vm)) return Status::NotFound("VM is gone");
  Submission s;
  std::optional<sched::Duration> used;
  const auto ran = [&](const Running& r) -> std::optional<sched::Duration> {
    if (!busy_counter_) return std::nullopt;
    return std::chrono::microseconds(BusyUs(r.submission.physical_channel) - r.busy_us_at_start);
  };
  if (auto it = submissions_.find(handle); it != submissions_.end()) {
    s = it->second;  // never started: nothing of it reached the GPU
    submissions_.erase(it);
  } else if (auto run = running_.find(handle); run != running_.end()) {
    s = run->second.submission;
    host_->HoldChannel(s.physical_channel, true);
    held_after_timeout_.insert(s.physical_channel);
    used = ran(run->second);
    running_.erase(run);
  } else if (auto held = suspended_.find(handle); held != suspended_.end()) {
    s = held->second.submission;  // held since its suspension
    held_after_timeout_.insert(s.physical_channel);
    used = ran(held->second);
    suspended_.erase(held);
  } else {
    return Status::NotFound("no such submission");
  }
  host_->FailChannel(s.physical_channel,
                     why.code() == StatusCode::kDeadlineExceeded ? pf::kSubfifoIntrGpuvmTimeLimit
                                                                 : pf::kSubfifoIntrGpuvmKilled,
                     why.message());
  ++cancels_;
  return used;
}

DispatchedSubmissionQueue::DispatchedSubmissionQueue(FvHost* host, sched::Dispatcher* dispatcher,
                                                     FvEngineSink* sink,
                                                     std::function<void()> register_vm)
    : host_(host), dispatcher_(dispatcher), sink_(sink), register_vm_(std::move(register_vm)) {
  sink_->Attach(host_);
}

DispatchedSubmissionQueue::~DispatchedSubmissionQueue() { sink_->Detach(host_); }

Status DispatchedSubmissionQueue::Submit(const Submission& submission) {
  const sched::SubmissionHandle handle = next_handle_++;
  sink_->Remember(handle, submission);
  // Step here (SubmitAndPoll): when the engine is free and the policy dispatches it, the
  // submission starts on this thread before the guest's write is acknowledged, instead of after a
  // wake-up of the dispatch thread (a hand-off on the path of every launch; on a loaded host tens
  // of microseconds), and the dispatch thread is not woken at all unless it has to be.
  Status s = dispatcher_->SubmitAndPoll(submission.vm, handle);
  if (s.code() == StatusCode::kNotFound && register_vm_) {
    register_vm_();
    s = dispatcher_->SubmitAndPoll(submission.vm, handle);
  }
  // A full queue (a guest flooding IB_PUT writes) or an unknown VM: the write is dropped, as a
  // real GPU would never see a doorbell it had no room for; the VM counts and logs it (fv_gpu.h).
  if (!s.ok()) {
    sink_->Discard(handle);  // never started: a flood must not pile up in the sink
    ++refused_;
    return s;
  }
  return s;
}

void DispatchedSubmissionQueue::ForgetVm(uint32_t vm) {
  sink_->Forget(vm);
  (void)dispatcher_->RemoveVm(vm);  // NotFound: it never submitted
}

uint64_t DispatchedSubmissionQueue::pending() const {
  uint64_t queued = 0;
  for (const sched::VmStats& v : dispatcher_->Stats().scheduler.vms) queued += v.queue_depth;
  return queued;
}

}  // namespace gpuvm::aggregator
