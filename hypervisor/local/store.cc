#include "hypervisor/local/store.h"

#include <initializer_list>

namespace gpuvm::hv::local {
namespace {

// A store request's payload: `path` (checked first) and then `more` strings.
Result<std::vector<uint8_t>> PathPayload(std::string_view path,
                                         std::initializer_list<std::string_view> more = {}) {
  GPUVM_RETURN_IF_ERROR(ValidateStorePath(path));
  HvWriter w;
  w.Str(path);
  for (const std::string_view s : more) w.Str(s);
  return w.Take();
}

}  // namespace

Result<std::unique_ptr<LocalStore>> LocalStore::Connect(const std::string& daemon_path,
                                                        DomainId self) {
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<LocalHvClient> client,
                         LocalHvClient::Connect(daemon_path, self));
  return std::unique_ptr<LocalStore>(new LocalStore(std::move(client)));
}

Result<std::string> LocalStore::Read(std::string_view path) {
  GPUVM_ASSIGN_OR_RETURN(const std::vector<uint8_t> payload, PathPayload(path));
  GPUVM_ASSIGN_OR_RETURN(LocalHvClient::Reply reply, client_->Call(HvOp::kStoreRead, payload));
  HvReader in(reply.results);
  std::optional<std::string> value = in.Str(kMaxStoreValueLength);
  if (!value || !in.Done()) return Status::DataLoss("malformed store read reply");
  return std::move(*value);
}

Status LocalStore::Write(std::string_view path, std::string_view value) {
  GPUVM_ASSIGN_OR_RETURN(const std::vector<uint8_t> payload, PathPayload(path, {value}));
  if (value.size() > kMaxStoreValueLength) return Status::InvalidArgument("store value too long");
  return client_->Call(HvOp::kStoreWrite, payload).status();
}

Status LocalStore::Remove(std::string_view path) {
  GPUVM_ASSIGN_OR_RETURN(const std::vector<uint8_t> payload, PathPayload(path));
  return client_->Call(HvOp::kStoreRemove, payload).status();
}

Result<std::vector<std::string>> LocalStore::List(std::string_view path) {
  GPUVM_ASSIGN_OR_RETURN(const std::vector<uint8_t> payload, PathPayload(path));
  GPUVM_ASSIGN_OR_RETURN(LocalHvClient::Reply reply, client_->Call(HvOp::kStoreList, payload));
  HvReader in(reply.results);
  std::optional<uint32_t> count = in.U32();
  if (!count || *count > reply.results.size())
    return Status::DataLoss("malformed store list reply");
  std::vector<std::string> names;
  for (uint32_t i = 0; i < *count; ++i) {
    std::optional<std::string> name = in.Str(kMaxStorePathLength);
    if (!name) return Status::DataLoss("malformed store list reply");
    names.push_back(std::move(*name));
  }
  if (!in.Done()) return Status::DataLoss("malformed store list reply");
  return names;
}

Status LocalStore::Watch(std::string_view path, std::string_view token) {
  GPUVM_ASSIGN_OR_RETURN(const std::vector<uint8_t> payload, PathPayload(path, {token}));
  return client_->Call(HvOp::kStoreWatch, payload).status();
}

Status LocalStore::Unwatch(std::string_view path, std::string_view token) {
  GPUVM_ASSIGN_OR_RETURN(const std::vector<uint8_t> payload, PathPayload(path, {token}));
  return client_->Call(HvOp::kStoreUnwatch, payload).status();
}

int LocalStore::watch_fd() const { return client_->fd(); }

Result<std::optional<WatchEvent>> LocalStore::PollWatch() { return client_->PollEvent(); }

}  // namespace gpuvm::hv::local
