// Local backend of Store: a client of the local hypervisor daemon's store (hv_daemon.h), which
// every process of a local run shares — the VM process, its gpuvm-dm, the aggregator, backends.
//
// Threading: one owner thread, as Store.
#ifndef GPUVM_HYPERVISOR_LOCAL_STORE_H_
#define GPUVM_HYPERVISOR_LOCAL_STORE_H_

#include <memory>

#include "hypervisor/local/hv_client.h"
#include "hypervisor/store.h"

namespace gpuvm::hv::local {

class LocalStore : public Store {
 public:
  static Result<std::unique_ptr<LocalStore>> Connect(const std::string& daemon_path, DomainId self);

  Result<std::string> Read(std::string_view path) override;
  Status Write(std::string_view path, std::string_view value) override;
  Status Remove(std::string_view path) override;
  Result<std::vector<std::string>> List(std::string_view path) override;
  Status Watch(std::string_view path, std::string_view token) override;
  Status Unwatch(std::string_view path, std::string_view token) override;
  int watch_fd() const override;
  Result<std::optional<WatchEvent>> PollWatch() override;

 private:
  explicit LocalStore(std::unique_ptr<LocalHvClient> client) : client_(std::move(client)) {}
  std::unique_ptr<LocalHvClient> client_;
};

}  // namespace gpuvm::hv::local

#endif  // GPUVM_HYPERVISOR_LOCAL_STORE_H_
