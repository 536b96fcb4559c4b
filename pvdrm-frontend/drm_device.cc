#include "pvdrm-frontend/drm_device.h"

#include <bit>
#include <cerrno>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "pvdrm-frontend/page_lists.h"

namespace gpuvm::pvdrm {
namespace {
constexpr uint64_t kPage = 4096;
class VmDma final : public GuestDma {
 public:
  explicit VmDma(std::shared_ptr<guest::LocalVmGuest> vm) : vm_(std::move(vm)) {}
  Result<std::unique_ptr<guest::DmaMapping>> Alloc(uint64_t length) override {
    return vm_->AllocDma(length);
  }
  Result<std::unique_ptr<guest::DmaMapping>> Wrap(void* host, uint64_t length) override {
    return vm_->MapDma(host, length);
  }

 private:
  std::shared_ptr<guest::LocalVmGuest> vm_;
};

}  // namespace

std::unique_ptr<GuestDma> LocalVmGuestDma(std::shared_ptr<guest::LocalVmGuest> vm) {
  return std::make_unique<VmDma>(std::move(vm));
}

Status StatusFromErrno(int32_t status, const char* what) {
  const std::string message = std::string(what) + ": " + std::strerror(-status);
  switch (-status) {
    case 0:
      return Status::Ok();
    case EIO:
      return Status::Aborted(message);
    case ENOENT:
    case EBADF:
      return Status::NotFound(message);
    case ENOMEM:
    case ENOSPC:
    case EMFILE:
      return Status::ResourceExhausted(message);
    case EBUSY:
      return Status::DeadlineExceeded(message);
    case EINVAL:
    case EFAULT:
      return Status::InvalidArgument(message);
    case EEXIST:
      return Status::AlreadyExists(message);
    case ENODEV:
    case EPIPE:
      return Status::Unavailable(message);
    default:
      return Status::Internal(message);
  }
}

Result<Response> PvdrmDevice::Call(uint32_t file, const RequestBody& body, const char* what) {
  requests_.fetch_add(1, std::memory_order_relaxed);
  GPUVM_ASSIGN_OR_RETURN(Response response, connection_.Call(file, body));
  if (response.status < 0) return StatusFromErrno(response.status, what);
  return response;
}

Result<guest::DrmDevice::Identity> IdentifyByGetParam(
    guest::DrmDevice& device,
    const std::function<Result<uint64_t>(uint32_t file, uint64_t param)>& get_param) {
  GPUVM_ASSIGN_OR_RETURN(const uint32_t file, device.OpenFile());
  guest::DrmDevice::Identity id;
  Status status;
  auto param = [&](uint64_t which) -> uint64_t {
    Result<uint64_t> value = get_param(file, which);
    if (!value.ok() && status.ok()) status = value.status();
    return value.ok() ? *value : 0;
  };
  id.chipset = uint32_t(param(NOUVEAU_GETPARAM_CHIPSET_ID));
  id.pci_vendor = uint16_t(param(NOUVEAU_GETPARAM_PCI_VENDOR));
  id.pci_device = uint16_t(param(NOUVEAU_GETPARAM_PCI_DEVICE));
  id.vram_bytes = param(NOUVEAU_GETPARAM_FB_SIZE);
  device.CloseFile(file);
  GPUVM_RETURN_IF_ERROR(status);
  return id;
}

Result<guest::DrmDevice::Identity> PvdrmDevice::Identify() {
  return IdentifyByGetParam(*this, [this](uint32_t file, uint64_t which) -> Result<uint64_t> {
    GetParam g;
    g.arg.param = which;
    GPUVM_ASSIGN_OR_RETURN(Response r, Call(file, g, "GETPARAM"));
    return std::get<drm_nouveau_getparam>(r.body).value;
  });
}

Result<uint32_t> PvdrmDevice::OpenFile() {
  const uint32_t file = next_file_.fetch_add(1);
  if (file == 0) return Status::ResourceExhausted("DRM file numbers ran out");
  // The file's arrays area; without one (no grant room) its pushbuffers share pages per call.
  std::unique_ptr<SharedPageList> area;
  {
    std::lock_guard lock(sharer_mu_);
    Result<SharedPageList> shared =
        ShareDataPages(sharer_, backend_, kAreaSlots * kAreaSlotBytes / uint32_t(kPage));
    if (shared.ok()) area = std::make_unique<SharedPageList>(std::move(*shared));
  }
  FileOpen open;
  if (area != nullptr) open.area = area->list;
  if (Status opened = Call(file, open, "FILE_OPEN").status(); !opened.ok()) {
    if (area != nullptr) Unshare(std::move(area));
    return opened;
  }
  if (area != nullptr) {
    auto entry = std::make_shared<FileArea>();
    entry->pages = std::move(area);
    std::lock_guard lock(posted_mu_);
    areas_[file] = std::move(entry);
  }
  return file;
}

void PvdrmDevice::CloseFile(uint32_t file) {
  {
    // The file's pooled and live objects go with it (the backend frees them at FILE_CLOSE).
    std::lock_guard lock(pool_mu_);
    live_.erase(live_.lower_bound({file, 0}), live_.lower_bound({file + 1, 0}));
    pool_.erase(pool_.lower_bound({file, 0, 0}), pool_.lower_bound({file + 1, 0, 0}));
    pooled_bytes_.erase(file);
  }
  (void)Call(file, FileClose{}, "FILE_CLOSE");
  // FILE_CLOSE was answered after every posted pushbuffer of the file (the ring keeps order) and
  // the backend unmapped the area with it; a completion still running may touch the area's
  // bitmap (it holds the area) or add a failure back, harmless: file numbers are never reused.
  std::shared_ptr<FileArea> area;
  {
    std::lock_guard lock(posted_mu_);
    failed_files_.erase(file);
    if (auto it = areas_.find(file); it != areas_.end()) {
      area = std::move(it->second);
      areas_.erase(it);
    }
  }
  if (area != nullptr) Unshare(std::move(area->pages));
}

std::optional<guest::DrmDevice::Object> PvdrmDevice::TakePooled(uint32_t file, uint32_t domain,
                                                                uint64_t size) {
  if (options_.pool_bytes == 0) return std::nullopt;
  std::lock_guard lock(pool_mu_);
  auto it = pool_.find({file, domain, size});
  if (it == pool_.end()) return std::nullopt;
  Object object = std::move(it->second);
  pool_.erase(it);
  pooled_bytes_[file] -= size;
  live_[{file, object.handle}] = {domain, object};
  pool_hits_.fetch_add(1, std::memory_order_relaxed);
  return object;
}

Result<int32_t> PvdrmDevice::ChannelAlloc(uint32_t file) {
  GPUVM_ASSIGN_OR_RETURN(Response r, Call(file, ::gpuvm::pvdrm::ChannelAlloc{}, "CHANNEL_ALLOC"));
  return std::get<drm_nouveau_channel_alloc>(r.body).channel;
}

Status PvdrmDevice::ChannelFree(uint32_t file, int32_t channel) {
  ::gpuvm::pvdrm::ChannelFree free;
  free.arg.channel = channel;
  return Call(file, free, "CHANNEL_FREE").status();
}

Result<guest::DrmDevice::Object> PvdrmDevice::NewVram(uint32_t file, uint64_t size,
                                                      uint64_t align) {
  if (std::optional<Object> pooled = TakePooled(file, NOUVEAU_GEM_DOMAIN_VRAM, size)) {
    if (align == 0 || pooled->va % align == 0) return *pooled;
    (void)Close(file, pooled->handle);  // not aligned as asked: really closed
  }
  GemNew g;
  g.arg.info.size = size;
  g.arg.info.domain = NOUVEAU_GEM_DOMAIN_VRAM;
  if (align > UINT32_MAX) return Status::InvalidArgument("alignment too large");
  g.arg.align = uint32_t(align);
  GPUVM_ASSIGN_OR_RETURN(Response r, Call(file, g, "GEM_NEW"));
  const auto& info = std::get<drm_nouveau_gem_info>(r.body);
  Object object;
  object.handle = info.handle;
  object.va = info.offset;
  object.size = size;
  if (options_.pool_bytes != 0) {
    std::lock_guard lock(pool_mu_);
    live_[{file, object.handle}] = {NOUVEAU_GEM_DOMAIN_VRAM, object};
  }
  return object;
}

Result<guest::DrmDevice::Object> PvdrmDevice::NewOverFrames(
    uint32_t file, std::unique_ptr<guest::DmaMapping> mapping) {
  const uint64_t pages = mapping->length() / kPage;
  if (pages > kMaxGemFrames) {
    return Status::ResourceExhausted("a GART object is at most " +
                                     std::to_string(kMaxGemFrames * kPage >> 30) + " GiB");
  }
  std::vector<uint32_t> frames(pages);
  for (uint64_t i = 0; i < pages; ++i) {
    frames[i] = uint32_t(mapping->PageBusAddress(i * kPage) / kPage);
  }
  GemNew g;
  g.arg.info.size = mapping->length();
  g.arg.info.domain = NOUVEAU_GEM_DOMAIN_GART;
  // The list is read once by the backend, during the call; then it is revoked.
  std::unique_ptr<SharedPageList> list;
  {
    std::lock_guard lock(sharer_mu_);
    GPUVM_ASSIGN_OR_RETURN(SharedPageList shared, ShareFrameList(sharer_, backend_, frames));
    list = std::make_unique<SharedPageList>(std::move(shared));
  }
  g.pages = list->list;
  Result<Response> r = Call(file, g, "GEM_NEW");
  Unshare(std::move(list));
  GPUVM_RETURN_IF_ERROR(r.status());
  const auto& info = std::get<drm_nouveau_gem_info>(r->body);
  Object object;
  object.handle = info.handle;
  object.va = info.offset;
  object.size = info.size;
  object.host = mapping->host();
  object.backing = std::shared_ptr<guest::DmaMapping>(std::move(mapping));
  return object;
}

Result<guest::DrmDevice::Object> PvdrmDevice::NewGart(uint32_t file, uint64_t size) {
  if (std::optional<Object> pooled = TakePooled(file, NOUVEAU_GEM_DOMAIN_GART, size)) {
    std::memset(pooled->host, 0, size);  // NewGart's memory is zeroed, pooled or not
    return *pooled;
  }
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<guest::DmaMapping> mapping, dma_.Alloc(size));
  GPUVM_ASSIGN_OR_RETURN(Object object, NewOverFrames(file, std::move(mapping)));
  if (options_.pool_bytes != 0) {
    std::lock_guard lock(pool_mu_);
    live_[{file, object.handle}] = {NOUVEAU_GEM_DOMAIN_GART, object};
  }
  return object;
}

Result<guest::DrmDevice::Object> PvdrmDevice::WrapHost(uint32_t file, void* host, uint64_t size) {
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<guest::DmaMapping> mapping, dma_.Wrap(host, size));
  return NewOverFrames(file, std::move(mapping));
}

Status PvdrmDevice::Close(uint32_t file, uint32_t handle) {
  if (options_.pool_bytes != 0) {
    std::lock_guard lock(pool_mu_);
    auto it = live_.find({file, handle});
    if (it != live_.end()) {
      Live live = std::move(it->second);
      live_.erase(it);
      uint64_t& pooled = pooled_bytes_[file];
      if (pooled + live.object.size <= options_.pool_bytes) {
        pooled += live.object.size;
        const uint64_t size = live.object.size;
        pool_.emplace(std::tuple{file, live.domain, size}, std::move(live.object));
        return Status::Ok();  // kept open: the next object of its size is this one
      }
    }
  }
  GemClose c;
  c.arg.handle = handle;
  return Call(file, c, "GEM_CLOSE").status();
}

Status PvdrmDevice::Pushbuf(uint32_t file, int32_t channel, std::span<const Push> pushes) {
  if (pushes.empty() || pushes.size() > NOUVEAU_GEM_MAX_PUSH) {
    return Status::InvalidArgument("a pushbuf has 1 to 512 pushes");
  }
  GPUVM_RETURN_IF_ERROR(FileFailure(file));
  PushbufArrays arrays;
  std::map<uint32_t, uint32_t> index;  // handle -> bo index
  for (const Push& push : pushes) {
    auto [it, added] = index.emplace(push.handle, uint32_t(arrays.buffers.size()));
    if (added) {
      drm_nouveau_gem_pushbuf_bo bo{};
      bo.handle = push.handle;
      bo.read_domains = NOUVEAU_GEM_DOMAIN_GART | NOUVEAU_GEM_DOMAIN_VRAM;
      arrays.buffers.push_back(bo);
    }
    drm_nouveau_gem_pushbuf_push p{};
    p.bo_index = it->second;
    p.offset = push.offset;
    p.length = push.bytes;
    arrays.push.push_back(p);
  }
  const PushbufLayout layout =
      LayoutPushbuf(uint32_t(arrays.buffers.size()), 0, uint32_t(arrays.push.size()));
  GemPushbuf submit;
  submit.arg.channel = uint32_t(channel);
  submit.arg.nr_buffers = uint32_t(arrays.buffers.size());
  submit.arg.nr_push = uint32_t(arrays.push.size());
  // The arrays: in a free slot of the file's area, else in pages shared for this call. Either
  // stays the backend's until it answered; then the completion gives it back and keeps a
  // refusal for the file's next call.
  std::shared_ptr<FileArea> area;
  int slot = -1;
  if (layout.bytes <= kAreaSlotBytes) {
    std::lock_guard lock(posted_mu_);
    if (auto it = areas_.find(file); it != areas_.end() && it->second->free != 0) {
      area = it->second;
      slot = std::countr_zero(area->free);
      area->free &= ~(1u << slot);
    }
  }
  auto pages = std::make_shared<std::unique_ptr<SharedPageList>>();
  if (slot >= 0) {
    submit.arg.buffers = uint64_t(slot) * kAreaSlotBytes;
    WritePushbufArrays(arrays,
                       area->pages->data->bytes().subspan(submit.arg.buffers, kAreaSlotBytes));
  } else {
    {
      std::lock_guard lock(sharer_mu_);
      GPUVM_ASSIGN_OR_RETURN(SharedPageList shared,
                             ShareDataPages(sharer_, backend_, layout.pages));
      *pages = std::make_unique<SharedPageList>(std::move(shared));
    }
    WritePushbufArrays(arrays, (*pages)->data->bytes());
    submit.data = (*pages)->list;
  }
  // Once the backend answered (or the request never left): the arrays' pages or slot go back, a
  // refusal sticks to the file, and the device counts one posted pushbuffer fewer.
  auto finish = [this, file, area, slot, pages](const Status& refused) {
    if (*pages != nullptr) Unshare(std::move(*pages));
    std::lock_guard lock(posted_mu_);
    if (area != nullptr) area->free |= 1u << slot;
    if (!refused.ok()) failed_files_.emplace(file, refused);  // the first one sticks
    --posted_;
    posted_cv_.notify_all();
  };
  {
    std::lock_guard lock(posted_mu_);
    ++posted_;
  }
  requests_.fetch_add(1, std::memory_order_relaxed);
  const Status posted = connection_.Post(file, submit, [finish](Result<Response> r) {
    Status outcome = r.status();
    if (outcome.ok() && r->status < 0) outcome = StatusFromErrno(r->status, "GEM_PUSHBUF");
    finish(outcome);
  });
  if (!posted.ok()) finish(Status::Ok());  // the caller hears it from this call instead
  return posted;
}

Status PvdrmDevice::FileFailure(uint32_t file) {
  std::lock_guard lock(posted_mu_);
  auto it = failed_files_.find(file);
  return it == failed_files_.end() ? Status::Ok() : it->second;
}

PvdrmDevice::~PvdrmDevice() {
  std::map<uint32_t, std::shared_ptr<FileArea>> areas;
  {
    std::unique_lock lock(posted_mu_);
    posted_cv_.wait(lock, [&] { return posted_ == 0; });
    areas.swap(areas_);
  }
  for (auto& [file, area] : areas) Unshare(std::move(area->pages));
}

void PvdrmDevice::Unshare(std::unique_ptr<SharedPageList> list) {
  std::lock_guard lock(sharer_mu_);
  list.reset();  // revokes the grants: the sharer's work, under its lock
}

Status PvdrmDevice::Health(uint32_t file, uint32_t handle) {
  GPUVM_RETURN_IF_ERROR(FileFailure(file));
  GemCpuPrep prep;
  prep.arg.handle = handle;
  prep.arg.flags = NOUVEAU_GEM_CPU_PREP_NOWAIT;
  const Status s = Call(file, prep, "GEM_CPU_PREP").status();
  if (s.code() == StatusCode::kDeadlineExceeded) return Status::Ok();  // busy, alive
  return s;
}

}  // namespace gpuvm::pvdrm
