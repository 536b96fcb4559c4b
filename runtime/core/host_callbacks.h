// Host functions on a stream (cuLaunchHostFunc, cuStreamAddCallback and their runtime twins): a
// function runs on the CPU after everything queued on the stream before it has completed, and
// everything queued after it waits until it has returned — CUDA's ordering.
//
// How: per stream, one worker thread and one gate event (guest::Event::ArmForHost). Enqueue takes
// the channel's last fence (the stream's earlier work) and makes the channel wait on the GPU for a
// newly armed gate target; the worker waits for that fence, runs the function, then releases the
// target from the CPU, which lets the stream's later work run. Functions of one stream run one at
// a time, in order, on the worker (never on the caller's thread, as in CUDA).
//
// When the stream's earlier work fails (the context faulted) the function still runs: callbacks
// learn the error through their status argument; the gate is released either way. The destructor
// (stream destruction, context teardown) runs what is queued first — waiting for the work before
// each, bounded by kDrainWait once destruction started; a function whose work did not finish by
// then is called with CUDA_ERROR_LAUNCH_TIMEOUT (a host function without a status is skipped) —
// and must run before the stream's channel is destroyed.
//
// Threading: Enqueue from any thread (serialized internally); the functions run on the worker.
#ifndef GPUVM_RUNTIME_CORE_HOST_CALLBACKS_H_
#define GPUVM_RUNTIME_CORE_HOST_CALLBACKS_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "base/status.h"
#include "guest-pv-driver/driver.h"

namespace gpuvm::runtime {

class HostCallbacks {
 public:
  // What a queued function gets: the status of the stream's earlier work (OK, the context's
  // fault, or kDeadlineExceeded when destruction gave up waiting).
  using Function = std::function<void(const Status&)>;
  static constexpr std::chrono::seconds kDrainWait{5};

  // `channel` is the stream's; `gate` an event of the same context that this object owns from now
  // on (destroyed through `context` with it).
  HostCallbacks(guest::Context* context, guest::Channel* channel, guest::Event* gate);
  ~HostCallbacks();
  HostCallbacks(const HostCallbacks&) = delete;
  HostCallbacks& operator=(const HostCallbacks&) = delete;

  // Queues `fn` after the channel's work so far and holds the channel's later work until it
  // returned. The caller has ordered the stream's work (legacy null-stream rules) first.
  Status Enqueue(Function fn);

 private:
  struct Item {
    guest::Fence after;  // the stream's earlier work
    uint32_t gate_target = 0;
    Function fn;
  };
  void Run();

  guest::Context* const context_;
  guest::Channel* const channel_;
  guest::Event* const gate_;
  std::mutex enqueue_mu_;  // fence, arm and channel wait of one Enqueue stay together
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> items_;  // guarded by mu_
  bool stopping_ = false;   // guarded by mu_
  std::thread worker_;
};

}  // namespace gpuvm::runtime

#endif  // GPUVM_RUNTIME_CORE_HOST_CALLBACKS_H_
