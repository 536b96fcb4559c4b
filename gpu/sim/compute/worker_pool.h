// A fixed set of threads that run one function per "round" and then wait: the compute engine's SMs.
// The caller of Run is worker 0, so a pool of size 1 has no helper threads and no hand-offs.
//
// Threading: Run may be called by one thread at a time (the device's engine thread); the function
// runs concurrently on up to size() threads and Run returns after all of them have returned.
#ifndef GPUVM_GPU_SIM_COMPUTE_WORKER_POOL_H_
#define GPUVM_GPU_SIM_COMPUTE_WORKER_POOL_H_

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gpuvm::sim::compute {

class WorkerPool {
 public:
  explicit WorkerPool(int size);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int size() const { return size_; }

  // Runs fn(0) on the calling thread and fn(i), 1 <= i < n, on up to n - 1 helper threads, each
  // index at most once. A helper that has not started by the time fn(0) returns does not start at
  // all (the caller never waits for a thread the OS has not scheduled yet); Run returns when every
  // started fn has returned. So fn must not rely on every index running: it takes work from a
  // shared queue.
  void Run(int n, const std::function<void(int)>& fn);

 private:
  void Loop();

  const int size_;
  std::mutex mu_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int)>* fn_ = nullptr;  // guarded by mu_
  int round_size_ = 0;                            // guarded by mu_
  uint64_t generation_ = 0;                       // guarded by mu_
  int next_index_ = 1;  // guarded by mu_: the next helper index to hand out
  int running_ = 0;     // guarded by mu_: helpers inside fn
  bool open_ = false;   // guarded by mu_: helpers may still join the round
  bool stop_ = false;   // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace gpuvm::sim::compute

#endif  // GPUVM_GPU_SIM_COMPUTE_WORKER_POOL_H_
