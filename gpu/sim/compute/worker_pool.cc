#include "gpu/sim/compute/worker_pool.h"

namespace gpuvm::sim::compute {

WorkerPool::WorkerPool(int size) : size_(size < 1 ? 1 : size) {
  for (int i = 1; i < size_; ++i) threads_.emplace_back([this, i] { Loop(i); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WorkerPool::Run(int n, const std::function<void(int)>& fn) {
  if (n > size_) n = size_;
  if (n > 1) {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    round_size_ = n;
    running_ = n - 1;
    ++generation_;
  }
  if (n > 1) start_cv_.notify_all();
  fn(0);
  if (n > 1) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [this] { return running_ == 0; });
    fn_ = nullptr;
  }
}

void WorkerPool::Loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* fn;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (index >= round_size_) continue;  // not needed this round
      fn = fn_;
    }
    (*fn)(index);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--running_ == 0) done_cv_.notify_one();
    }
  }
}

}  // namespace gpuvm::sim::compute
