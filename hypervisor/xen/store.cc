// The store over libxenstore.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "hypervisor/xen/libxen.h"
#include "hypervisor/xen/xen_backend.h"

namespace gpuvm::hv::xen {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

class XenStore : public Store {
 public:
  explicit XenStore(StoreHandle h) : h_(std::move(h)) {}

  Result<std::string> Read(std::string_view path) override {
    GPUVM_RETURN_IF_ERROR(ValidateStorePath(path));
    const std::string p(path);
    unsigned int length = 0;
    std::unique_ptr<char, FreeDeleter> value = ReadNode(p, &length);
    if (!value) return Failed("read", p, errno);
    return std::string(value.get(), length);
  }
  Status Write(std::string_view path, std::string_view value) override {
    GPUVM_RETURN_IF_ERROR(ValidateStorePath(path));
    if (value.size() > kMaxStoreValueLength) return Status::InvalidArgument("store value too long");
    const std::string p(path);
    if (!xs_write(h_.get(), XBT_NULL, p.c_str(), value.data(),
                  static_cast<unsigned int>(value.size()))) {
      return Failed("write", p, errno);
    }
    return Status::Ok();
  }
  Status Remove(std::string_view path) override {
    GPUVM_RETURN_IF_ERROR(ValidateStorePath(path));
    const std::string p(path);
    // xs_rm succeeds on a missing node; the port promises NotFound.
    unsigned int length = 0;
    if (!ReadNode(p, &length)) return Failed("remove", p, errno);
    if (!xs_rm(h_.get(), XBT_NULL, p.c_str())) return Failed("remove", p, errno);
    return Status::Ok();
  }
  Result<std::vector<std::string>> List(std::string_view path) override {
    GPUVM_RETURN_IF_ERROR(ValidateStorePath(path));
    const std::string p(path);
    unsigned int n = 0;
    std::unique_ptr<char*, FreeDeleter> names(xs_directory(h_.get(), XBT_NULL, p.c_str(), &n));
    if (!names) return Failed("list", p, errno);
    std::vector<std::string> out(names.get(), names.get() + n);
    std::sort(out.begin(), out.end());
    return out;
  }
  Status Watch(std::string_view path, std::string_view token) override {
    GPUVM_RETURN_IF_ERROR(ValidateStorePath(path));
    const std::string p(path), t(token);
    if (!xs_watch(h_.get(), p.c_str(), t.c_str())) return Failed("watch", p, errno);
    return Status::Ok();
  }
  Status Unwatch(std::string_view path, std::string_view token) override {
    const std::string p(path), t(token);
    if (!xs_unwatch(h_.get(), p.c_str(), t.c_str())) return Failed("unwatch", p, errno);
    return Status::Ok();
  }
  int watch_fd() const override { return xs_fileno(h_.get()); }
  Result<std::optional<WatchEvent>> PollWatch() override {
    std::unique_ptr<char*, FreeDeleter> event(xs_check_watch(h_.get()));
    if (!event) {
      if (errno == EAGAIN) return std::optional<WatchEvent>();
      return CallFailed("xs_check_watch", errno);
    }
    return std::optional<WatchEvent>(
        WatchEvent{event.get()[XS_WATCH_PATH], event.get()[XS_WATCH_TOKEN]});
  }

 private:
  // The node's value (malloc'd by libxenstore), or null with errno set.
  std::unique_ptr<char, FreeDeleter> ReadNode(const std::string& path, unsigned int* length) {
    return std::unique_ptr<char, FreeDeleter>(
        static_cast<char*>(xs_read(h_.get(), XBT_NULL, path.c_str(), length)));
  }

  static Status Failed(const char* what, const std::string& path, int err) {
    if (err == ENOENT) return Status::NotFound(path + " does not exist");
    if (err == EACCES || err == EPERM)
      return Status::PermissionDenied("may not " + std::string(what) + " " + path);
    return CallFailed(std::string("xenstore ") + what + " " + path, err);
  }
  StoreHandle h_;
};

}  // namespace

Result<std::unique_ptr<Store>> OpenStore() {
  GPUVM_ASSIGN_OR_RETURN(StoreHandle h, OpenStoreHandle());
  return std::unique_ptr<Store>(new XenStore(std::move(h)));
}

}  // namespace gpuvm::hv::xen
