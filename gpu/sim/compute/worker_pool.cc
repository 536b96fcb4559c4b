#include "gpu/sim/compute/worker_pool.h"

#include "base/os.h"

namespace gpuvm::sim::compute {

WorkerPool::WorkerPool(int size) : size_(size < 1 ? 1 : size) {
  for (int i = 1; i < size_; ++i) {
    threads_.emplace_back([this] {
      os::NameThisThread("gpu-sm");
      Loop();
    });
  }
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
    next_index_ = 1;
    running_ = 0;
    open_ = true;
    ++generation_;
  }
  if (n > 1) start_cv_.notify_all();
  fn(0);
  if (n > 1) {
    std::unique_lock<std::mutex> lock(mu_);
    open_ = false;  // helpers that have not started by now stay out
    done_cv_.wait(lock, [this] { return running_ == 0; });
    fn_ = nullptr;
  }
}

void WorkerPool::Loop() {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* fn;
    int index;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (!open_ || next_index_ >= round_size_) continue;  // too late, or not needed this round
      index = next_index_++;
      ++running_;
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
