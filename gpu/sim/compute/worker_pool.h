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

  // Runs fn(i) for every i in [0, n), 1 <= n <= size(); fn(0) on the calling thread.
  void Run(int n, const std::function<void(int)>& fn);

 private:
  void Loop(int index);

  const int size_;
  std::mutex mu_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int)>* fn_ = nullptr;  // guarded by mu_
  int round_size_ = 0;                            // guarded by mu_
  uint64_t generation_ = 0;                       // guarded by mu_
  int running_ = 0;                               // guarded by mu_
  bool stop_ = false;                             // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace gpuvm::sim::compute

#endif  // GPUVM_GPU_SIM_COMPUTE_WORKER_POOL_H_
