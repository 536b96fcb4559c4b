// A minimal aggregator on the real IPC protocol: accepts device models on a socket, completes the
// handshake, and answers MMIO reads and writes from a sparse BAR memory (as FakeAggregator does).
// For tests of the IPC path and for gpuvm-trap-bench; the real one is aggregator/
// (gpuvm-aggregator). It can also misbehave on purpose (no answers, garbage), to test the device
// model's defences.
//
// Threading: Serve() runs on one thread (its own, with Start()); the control methods are
// thread-safe.
#ifndef GPUVM_QEMU_DEVICE_TESTING_FAKE_AGGREGATOR_SERVER_H_
#define GPUVM_QEMU_DEVICE_TESTING_FAKE_AGGREGATOR_SERVER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ipc/channel.h"
#include "ipc/fast_lane.h"

namespace gpuvm::dm::testing {

class FakeAggregatorServer {
 public:
  enum class Behaviour { kNormal, kSilent, kGarbage, kRefuseVm };

  static Result<std::unique_ptr<FakeAggregatorServer>> Create(const std::string& path);
  ~FakeAggregatorServer();

  // Serves connections one after another until Stop() (the calling thread).
  void Serve();
  Status Start();  // Serve() on a background thread
  void Stop();

  void set_behaviour(Behaviour b) { behaviour_ = b; }
  // The next time something arrives, the serving thread sleeps this long before it looks (as a
  // SIGSTOPped aggregator would: nothing answered, nothing closed).
  void StallNextFor(std::chrono::milliseconds stall) { stall_ms_ = stall.count(); }
  // While held, the serving thread takes MMIO requests in (counted by mmio_requests()) but answers
  // none until Release() — an aggregator busy elsewhere, as long as the test wants.
  void Hold();
  void Release();
  // MMIO_WRITEs to this BAR offset are answered with ERROR (as the aggregator refuses a write).
  void RefuseWritesAt(uint8_t bar, uint64_t offset) { refuse_at_ = {bar, offset}; }
  // The only token AUTH may carry (default: any token is good).
  void set_token(const ipc::VmToken& token) {
    std::lock_guard<std::mutex> lock(mu_);
    token_ = token;
  }
  // Whether VM_ACCEPT offers the fast lane (default yes). Set before the device model connects.
  void set_offer_fast_lane(bool offer) { offer_fast_lane_ = offer; }
  bool lane_in_use() const { return lane_in_use_; }
  // Sends a notification or request to the connected device model (from any thread).
  Status SendToDm(const ipc::Message& message, std::span<const int> fds = {});
  uint64_t mmio_requests() const { return mmio_requests_; }
  // Every message but MMIO_READ/MMIO_WRITE (those are only counted, in mmio_requests()).
  std::vector<ipc::Message> received() const;
  const std::string& path() const { return path_; }

 private:
  FakeAggregatorServer() = default;
  // Returns false when the connection should end.
  bool HandleOne(ipc::Channel& channel, int epoll);
  // Serves every message waiting in the fast lane. False on a protocol violation.
  bool DrainLane();
  // The answer to an MMIO request (nullopt: say nothing, as the Silent behaviour wants).
  std::optional<ipc::Body> AnswerMmio(const ipc::Body& request);

  std::string path_;
  os::UniqueFd listen_;
  os::UniqueFd stop_;
  std::thread thread_;
  std::atomic<Behaviour> behaviour_{Behaviour::kNormal};
  std::atomic<uint64_t> mmio_requests_{0};
  std::atomic<int64_t> stall_ms_{0};
  std::mutex hold_mu_;
  std::condition_variable hold_cv_;
  bool held_ = false;                                      // guarded by hold_mu_
  std::optional<std::pair<uint8_t, uint64_t>> refuse_at_;  // set before serving
  std::atomic<bool> offer_fast_lane_{true};
  std::atomic<bool> lane_in_use_{false};
  std::unique_ptr<ipc::FastLane> lane_;  // serving thread only
  mutable std::mutex mu_;
  int connection_fd_ = -1;  // guarded by mu_, for SendToDm
  std::vector<ipc::Message> received_;
  std::optional<ipc::VmToken> token_;  // guarded by mu_
  std::map<std::pair<uint8_t, uint64_t>, uint8_t> bytes_;
};

}  // namespace gpuvm::dm::testing

#endif  // GPUVM_QEMU_DEVICE_TESTING_FAKE_AGGREGATOR_SERVER_H_
