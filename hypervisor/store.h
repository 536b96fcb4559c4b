// Port: the store — xenstore-like hierarchical keys ("/local/domain/3/device/vgpu/0/state") with
// watches.
//
// Paths are absolute, '/'-separated, of [A-Za-z0-9_./:@-] characters; values are short byte
// strings. Writing creates missing parents. A watch on a path fires once when it is set (as
// xenstore does) and then on every change at or below the path, reporting the changed path and the
// watch's token.
//
// Xen: libxenstore. Local: the local hypervisor daemon's store (hypervisor/local/hv_daemon.h),
// shared by every process of a local run.
//
// Threading: one owner thread per Store handle.
#ifndef GPUVM_HYPERVISOR_STORE_H_
#define GPUVM_HYPERVISOR_STORE_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpuvm::hv {

struct WatchEvent {
  std::string path;   // the path that changed (at or below the watched path)
  std::string token;  // the token given to Watch()
  friend bool operator==(const WatchEvent&, const WatchEvent&) = default;
};

class Store {
 public:
  virtual ~Store() = default;

  // NotFound when the key does not exist.
  virtual Result<std::string> Read(std::string_view path) = 0;
  virtual Status Write(std::string_view path, std::string_view value) = 0;
  // Removes the key and everything below it. NotFound when absent.
  virtual Status Remove(std::string_view path) = 0;
  // Names of the direct children, sorted. NotFound when absent.
  virtual Result<std::vector<std::string>> List(std::string_view path) = 0;

  virtual Status Watch(std::string_view path, std::string_view token) = 0;
  virtual Status Unwatch(std::string_view path, std::string_view token) = 0;
  // Polls readable when PollWatch() may have an event.
  virtual int watch_fd() const = 0;
  // The next watch event, or nullopt. Non-blocking.
  virtual Result<std::optional<WatchEvent>> PollWatch() = 0;
};

// Checks the path rules above; both backends and the local daemon apply it.
Status ValidateStorePath(std::string_view path);
inline constexpr size_t kMaxStorePathLength = 1024;
inline constexpr size_t kMaxStoreValueLength = 4096;

}  // namespace gpuvm::hv

#endif  // GPUVM_HYPERVISOR_STORE_H_
