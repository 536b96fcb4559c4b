#include "runtime/core/host_callbacks.h"

#include <utility>

namespace gpuvm::runtime {

HostCallbacks::HostCallbacks(guest::Context* context, guest::Channel* channel, guest::Event* gate)
    : context_(context), channel_(channel), gate_(gate), worker_([this] { Run(); }) {}

HostCallbacks::~HostCallbacks() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  worker_.join();
  (void)context_->DestroyEvent(gate_);
}

Status HostCallbacks::Enqueue(Function fn) {
  std::lock_guard order(enqueue_mu_);
  Item item;
  item.after = channel_->last_fence();
  item.gate_target = gate_->ArmForHost();
  item.fn = std::move(fn);
  Status held = channel_->WaitEvent(gate_);
  if (!held.ok()) {
    // The channel will not wait for this target: release it now, run nothing.
    gate_->ReleaseFromHost(item.gate_target);
    return held;
  }
  {
    std::lock_guard lock(mu_);
    items_.push_back(std::move(item));
  }
  cv_.notify_all();
  return Status::Ok();
}

void HostCallbacks::Run() {
  std::unique_lock lock(mu_);
  std::chrono::steady_clock::time_point drain_deadline{};
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !items_.empty(); });
    if (items_.empty()) return;  // stopping, nothing left
    Item item = std::move(items_.front());
    items_.pop_front();
    lock.unlock();
    // The stream's earlier work: without limit while the stream lives (a long kernel), bounded
    // once it is being destroyed. Waits in slices so that destruction is noticed.
    Status waited;
    for (;;) {
      waited = channel_->Wait(item.after, std::chrono::milliseconds(100));
      if (waited.code() != StatusCode::kDeadlineExceeded) break;
      std::lock_guard check(mu_);
      if (!stopping_) continue;
      const auto now = std::chrono::steady_clock::now();
      if (drain_deadline == std::chrono::steady_clock::time_point{}) {
        drain_deadline = now + kDrainWait;
      }
      if (now >= drain_deadline) break;
    }
    item.fn(waited);
    gate_->ReleaseFromHost(item.gate_target);
    lock.lock();
  }
}

}  // namespace gpuvm::runtime
