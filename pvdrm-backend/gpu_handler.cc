#include "pvdrm-backend/gpu_handler.h"

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <set>
#include <string>
#include <utility>

#include "gpu/hw/classes.h"
#include "gpu/hw/gpfifo.h"

namespace gpuvm::pvdrm {
namespace {

constexpr uint64_t kPage = 4096;
// nouveau's bus types for NOUVEAU_GETPARAM_BUS_TYPE: AGP 0, PCI 1, PCI Express 2.
constexpr uint64_t kBusTypePcie = 2;
// How long closing a file waits for its channels before it keeps the file's guest-frame mappings
// for the handler's life instead of unmapping them under a GPU that may still use them.
constexpr auto kCloseDrainWait = std::chrono::seconds(5);

int32_t Errno(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return 0;
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return -EINVAL;
    case StatusCode::kNotFound:
      return -ENOENT;
    case StatusCode::kAlreadyExists:
      return -EEXIST;
    case StatusCode::kPermissionDenied:
      return -EACCES;
    case StatusCode::kResourceExhausted:
      return -ENOMEM;
    case StatusCode::kDeadlineExceeded:
      return -EBUSY;
    case StatusCode::kUnavailable:
      return -ENODEV;
    default:
      return -EIO;  // a faulted context (kAborted) and everything else
  }
}

bool KnownClass(uint32_t oclass) {
  return oclass == gf100::kClassM2mf || oclass == gf100::kClassCopy ||
         oclass == gf100::kClassCompute;
}

}  // namespace

struct GpuRequestHandler::Object {
  uint32_t domain = 0;  // NOUVEAU_GEM_DOMAIN_VRAM or _GART
  uint64_t size = 0;    // whole pages
  uint64_t va = 0;
  std::unique_ptr<hv::GuestMapping> frames;    // GART: the guest's pages, mapped
  std::map<guest::Channel*, uint32_t> fences;  // last submission naming it, per channel

  drm_nouveau_gem_info Info(uint32_t handle) const {
    drm_nouveau_gem_info info{};
    info.handle = handle;
    info.domain = domain;
    info.size = size;
    info.offset = va;
    return info;
  }
};

struct GpuRequestHandler::File {
  struct ChannelEntry {
    guest::Channel* channel = nullptr;
    std::set<uint32_t> objects;  // GROBJ handles
  };
  // Declared before the context: destroyed after it (the context's channels may still read them
  // until it is gone).
  std::map<uint32_t, Object> objects;
  std::unique_ptr<guest::Context> context;
  std::map<int, ChannelEntry> channels;
  uint32_t next_handle = 1;
  int next_channel = 0;
  // Set by every request but GETPARAM: the context may hold something of this file.
  bool used = false;
  bool default_channel_taken = false;

  Object* Find(uint32_t handle) {
    auto it = objects.find(handle);
    return it == objects.end() ? nullptr : &it->second;
  }
  ChannelEntry* FindChannel(int id) {
    auto it = channels.find(id);
    return it == channels.end() ? nullptr : &it->second;
  }
  // Waits for every fence recorded on `object` (timeout zero: only checks).
  Status WaitIdle(Object& object, std::chrono::nanoseconds timeout) {
    for (const auto& [channel, sequence] : object.fences) {
      const guest::Fence fence{channel->id(), sequence};
      if (timeout.count() == 0) {
        GPUVM_ASSIGN_OR_RETURN(const bool done, channel->IsDone(fence));
        if (!done) return Status::DeadlineExceeded("busy");
      } else {
        GPUVM_RETURN_IF_ERROR(channel->Wait(fence, timeout));
      }
    }
    return Status::Ok();
  }
};

GpuRequestHandler::GpuRequestHandler(guest::Driver& driver, GuestFrames& frames,
                                     const GpuHandlerOptions& options)
    : driver_(driver), frames_(frames), options_(options) {}

GpuRequestHandler::~GpuRequestHandler() { OnDisconnect(); }

GpuHandlerStats GpuRequestHandler::stats() const {
  return {open_files_.load(), live_objects_.load(), pushbufs_.load(), pushes_.load(),
          spare_opens_.load()};
}

Status GpuRequestHandler::PrepareSpare() {
  if (spare_ != nullptr) return Status::Ok();
  Result<std::unique_ptr<guest::Context>> context = driver_.CreateContext(options_.context);
  spare_failed_ = !context.ok();
  if (!context.ok()) return context.status();
  spare_ = std::move(*context);
  return Status::Ok();
}

void GpuRequestHandler::OnDisconnect() {
  while (!files_.empty()) CloseFile(files_.begin()->first);
}

void GpuRequestHandler::CloseFile(uint32_t id) {
  auto it = files_.find(id);
  if (it == files_.end()) return;
  std::unique_ptr<File> file = std::move(it->second);
  files_.erase(it);
  open_files_.fetch_sub(1);
  live_objects_.fetch_sub(file->objects.size());
  if (!file->used && spare_ == nullptr && file->context->status().ok()) {
    spare_ = std::move(file->context);  // nothing of the file's is in it
    return;
  }
  // Channels that do not drain (an endless kernel) leave the GPU reading the file's pages: the
  // context then quarantines what it owns, and the guest-frame mappings stay too.
  const bool drained = file->context->Synchronize(kCloseDrainWait).ok();
  file->context.reset();
  if (!drained) {
    for (auto& [handle, object] : file->objects) {
      if (object.frames != nullptr) kept_frames_.push_back(std::move(object.frames));
    }
  }
}

Response GpuRequestHandler::Handle(const Request& request, GuestPages& pages) {
  Response response;
  if (std::holds_alternative<FileOpen>(request.body)) {
    spare_failed_ = false;  // what was used up may have been freed since
    auto file = std::make_unique<File>();
    if (spare_ != nullptr) {
      file->context = std::move(spare_);
      spare_opens_.fetch_add(1);
    } else {
      Result<std::unique_ptr<guest::Context>> context = driver_.CreateContext(options_.context);
      if (!context.ok()) {
        response.status = Errno(context.status());
        return response;
      }
      file->context = std::move(*context);
    }
    files_[request.file] = std::move(file);
    open_files_.fetch_add(1);
    return response;
  }
  if (std::holds_alternative<FileClose>(request.body)) {
    CloseFile(request.file);
    return response;
  }
  auto it = files_.find(request.file);
  if (it == files_.end()) {    // the connection admits only open files; a handler that failed
    response.status = -EBADF;  // FILE_OPEN has none
    return response;
  }
  return Serve(*it->second, request, pages);
}

Response GpuRequestHandler::Serve(File& file, const Request& request, GuestPages& pages) {
  Response r;
  auto fail = [&r](int32_t status) { r.status = status; };
  // A faulted context (a bad pushbuffer of this file) fails every later call of the file. Nothing
  // else may be waiting on the GPU to decode its errors: look (throttled by the driver).
  driver_.PollErrors();
  if (!std::holds_alternative<GetParam>(request.body)) file.used = true;
  if (!file.context->status().ok() && !std::holds_alternative<GemClose>(request.body) &&
      !std::holds_alternative<ChannelFree>(request.body)) {
    fail(-EIO);
    return r;
  }
  std::visit(
      [&](const auto& b) {
        using T = std::decay_t<decltype(b)>;
        if constexpr (std::is_same_v<T, GetParam>) {
          const guest::DeviceInfo& info = driver_.info();
          drm_nouveau_getparam out = b.arg;
          switch (b.arg.param) {
            case NOUVEAU_GETPARAM_PCI_VENDOR:
              out.value = info.pci.vendor_id;
              break;
            case NOUVEAU_GETPARAM_PCI_DEVICE:
              out.value = info.pci.device_id;
              break;
            case NOUVEAU_GETPARAM_BUS_TYPE:
              out.value = kBusTypePcie;
              break;
            case NOUVEAU_GETPARAM_FB_SIZE:
              out.value = info.vram_bytes;
              break;
            case NOUVEAU_GETPARAM_AGP_SIZE:  // the GART: the guest's own RAM
              out.value = frames_.frame_count() * kPage;
              break;
            case NOUVEAU_GETPARAM_CHIPSET_ID:
              out.value = info.chipset;
              break;
            case NOUVEAU_GETPARAM_HAS_BO_USAGE:
              out.value = 1;
              break;
            case NOUVEAU_GETPARAM_HAS_PAGEFLIP:
              out.value = 0;
              break;
            default:
              return fail(-EINVAL);
          }
          r.body = out;
        } else if constexpr (std::is_same_v<T, ChannelAlloc>) {
          if (file.channels.size() >= options_.max_channels_per_file) return fail(-ENOSPC);
          guest::Channel* channel = nullptr;
          if (!file.default_channel_taken) {
            channel = file.context->default_channel();
          } else {
            Result<guest::Channel*> created = file.context->CreateChannel();
            if (!created.ok()) return fail(Errno(created.status()));
            channel = *created;
          }
          if (channel == file.context->default_channel()) file.default_channel_taken = true;
          const int id = file.next_channel++;
          file.channels[id].channel = channel;
          drm_nouveau_channel_alloc out = b.arg;
          out.channel = id;
          // Pushbuffers may live in either domain; Fermi binds classes by SET_OBJECT in the
          // pushbuffer, so no subchannel is assigned here.
          out.pushbuf_domains = NOUVEAU_GEM_DOMAIN_VRAM | NOUVEAU_GEM_DOMAIN_GART;
          r.body = out;
        } else if constexpr (std::is_same_v<T, ChannelFree>) {
          File::ChannelEntry* entry = file.FindChannel(b.arg.channel);
          if (entry == nullptr) return fail(-ENOENT);
          guest::Channel* channel = entry->channel;
          for (auto& [handle, object] : file.objects) object.fences.erase(channel);
          file.channels.erase(b.arg.channel);
          if (channel == file.context->default_channel()) {
            file.default_channel_taken = false;  // it stays with the context, free for reuse
          } else {
            const Status destroyed = file.context->DestroyChannel(channel);
            if (!destroyed.ok()) return fail(Errno(destroyed));
          }
        } else if constexpr (std::is_same_v<T, GrobjAlloc>) {
          File::ChannelEntry* entry = file.FindChannel(b.arg.channel);
          if (entry == nullptr) return fail(-ENOENT);
          if (!KnownClass(uint32_t(b.arg.oclass)) || b.arg.handle == 0) return fail(-EINVAL);
          if (!entry->objects.insert(b.arg.handle).second) return fail(-EEXIST);
        } else if constexpr (std::is_same_v<T, GpuobjFree>) {
          File::ChannelEntry* entry = file.FindChannel(b.arg.channel);
          if (entry == nullptr || entry->objects.erase(b.arg.handle) == 0) return fail(-ENOENT);
        } else if constexpr (std::is_same_v<T, NotifierobjAlloc>) {
          fail(-ENODEV);  // fences are semaphore releases into the file's own objects
        } else if constexpr (std::is_same_v<T, GemNew>) {
          const drm_nouveau_gem_info& want = b.arg.info;
          if (want.tile_mode != 0 || want.tile_flags != 0) return fail(-EINVAL);
          if (file.objects.size() >= options_.max_objects_per_file || file.next_handle == 0) {
            return fail(-ENOSPC);
          }
          const uint32_t align = b.arg.align;
          if (align != 0 && (align & (align - 1)) != 0) return fail(-EINVAL);
          Object object;
          object.size = (want.size + kPage - 1) / kPage * kPage;
          if (b.pages.nr_pages == 0) {
            if ((want.domain & NOUVEAU_GEM_DOMAIN_VRAM) == 0) return fail(-EINVAL);
            object.domain = NOUVEAU_GEM_DOMAIN_VRAM;
            Result<guest::Allocation> a = file.context->AllocDevice(object.size);
            if (!a.ok()) return fail(Errno(a.status()));
            object.va = a->va;
          } else {
            if ((want.domain & NOUVEAU_GEM_DOMAIN_GART) == 0) return fail(-EINVAL);
            object.domain = NOUVEAU_GEM_DOMAIN_GART;
            Result<std::vector<uint32_t>> listed =
                ReadFrameList(pages, b.pages, object.size / kPage);
            if (!listed.ok()) {
              return fail(listed.status().code() == StatusCode::kInvalidArgument ? -EINVAL
                                                                                 : -EFAULT);
            }
            Result<std::unique_ptr<hv::GuestMapping>> mapped = frames_.Map(*listed);
            if (!mapped.ok()) return fail(-EFAULT);
            Result<guest::Allocation> a =
                file.context->RegisterHost((*mapped)->bytes().data(), object.size);
            if (!a.ok()) return fail(Errno(a.status()));
            object.va = a->va;
            object.frames = std::move(*mapped);
          }
          if (align != 0 && object.va % align != 0) {
            (void)file.context->Free(object.va);
            return fail(-EINVAL);  // stronger than the page alignment the heaps give
          }
          const uint32_t handle = file.next_handle++;
          r.body = object.Info(handle);
          file.objects.emplace(handle, std::move(object));
          live_objects_.fetch_add(1);
        } else if constexpr (std::is_same_v<T, GemInfo>) {
          Object* object = file.Find(b.arg.handle);
          if (object == nullptr) return fail(-ENOENT);
          r.body = object->Info(b.arg.handle);
        } else if constexpr (std::is_same_v<T, GemClose>) {
          auto found = file.objects.find(b.arg.handle);
          if (found == file.objects.end()) return fail(-ENOENT);
          // Free waits for the context's channels (the GPU may still use the object), then the
          // guest-frame mapping goes with the object.
          const Status freed = file.context->Free(found->second.va);
          if (!freed.ok() && freed.code() != StatusCode::kAborted) return fail(Errno(freed));
          file.objects.erase(found);
          live_objects_.fetch_sub(1);
        } else if constexpr (std::is_same_v<T, GemCpuPrep>) {
          Object* object = file.Find(b.arg.handle);
          if (object == nullptr) return fail(-ENOENT);
          const bool nowait = (b.arg.flags & NOUVEAU_GEM_CPU_PREP_NOWAIT) != 0;
          const Status idle =
              file.WaitIdle(*object, nowait ? std::chrono::nanoseconds(0)
                                            : std::chrono::nanoseconds(options_.cpu_prep_timeout));
          if (!idle.ok()) return fail(Errno(idle));
        } else if constexpr (std::is_same_v<T, GemCpuFini>) {
          if (file.Find(b.arg.handle) == nullptr) return fail(-ENOENT);
        } else if constexpr (std::is_same_v<T, GemPushbuf>) {
          const drm_nouveau_gem_pushbuf& arg = b.arg;
          File::ChannelEntry* entry = file.FindChannel(int(arg.channel));
          if (entry == nullptr) return fail(-ENOENT);
          drm_nouveau_gem_pushbuf out = arg;
          out.buffers = 0;  // the area offset: responses carry no pointers (docs/PVDRM.md)
          out.suffix0 = out.suffix1 = 0;                 // IB channels have no suffix (nouveau)
          if (arg.nr_relocs != 0) return fail(-EINVAL);  // fixed addresses: see the header
          std::vector<guest::CommandSegment> segments;
          std::vector<Object*> listed;
          if (arg.nr_buffers != 0 || arg.nr_push != 0) {
            // The arrays: in the file's area (mapped at FILE_OPEN), or in pages of their own.
            std::unique_ptr<hv::GuestMapping> own_pages;
            std::span<uint8_t> bytes;
            if (b.InArea()) {
              const std::span<uint8_t> area = pages.FileArea(request.file);
              const size_t length =
                  LayoutPushbuf(arg.nr_buffers, arg.nr_relocs, arg.nr_push).bytes;
              if (arg.buffers > area.size() || length > area.size() - arg.buffers) {
                return fail(-EFAULT);  // no area, or the arrays run past it
              }
              bytes = area.subspan(arg.buffers, length);
            } else {
              Result<std::unique_ptr<hv::GuestMapping>> data =
                  pages.Map(b.data, hv::Access::kReadWrite);
              if (!data.ok()) return fail(-EFAULT);
              own_pages = std::move(*data);
              bytes = own_pages->bytes();
            }
            Result<PushbufArrays> arrays = CopyPushbufArrays(arg, bytes);
            if (!arrays.ok()) return fail(-EINVAL);
            std::set<uint32_t> seen;
            for (drm_nouveau_gem_pushbuf_bo& bo : arrays->buffers) {
              Object* object = file.Find(bo.handle);
              if (object == nullptr) return fail(-ENOENT);
              if (!seen.insert(bo.handle).second) return fail(-EINVAL);  // listed twice
              if (((bo.read_domains | bo.write_domains) & object->domain) == 0) {
                return fail(-EINVAL);
              }
              listed.push_back(object);
              bo.presumed.valid = 1;
              bo.presumed.domain = object->domain;
              bo.presumed.offset = object->va;
            }
            for (const drm_nouveau_gem_pushbuf_push& push : arrays->push) {
              const Object* object = listed[push.bo_index];
              if (push.offset % 4 != 0 || push.length % 4 != 0 || push.length == 0 ||
                  push.offset > object->size || push.length > object->size - push.offset ||
                  push.length / 4 > gf100::gpfifo::kIbLengthMask) {
                return fail(-EINVAL);
              }
              segments.push_back({object->va + push.offset, uint32_t(push.length / 4)});
            }
            if (!segments.empty()) {
              Result<guest::Fence> fence = entry->channel->SubmitSegments(segments);
              if (!fence.ok()) return fail(Errno(fence.status()));
              for (Object* object : listed) object->fences[entry->channel] = fence->sequence;
              pushbufs_.fetch_add(1);
              pushes_.fetch_add(segments.size());
            }
            // As the kernel does to the caller's array: where each object is.
            WritePushbufArrays(*arrays, bytes);
          }
          out.vram_available = driver_.vram_free();
          out.gart_available = frames_.frame_count() * kPage;
          r.body = out;
        }
      },
      request.body);
  if (r.status != 0) r.body = std::monostate{};
  return r;
}

}  // namespace gpuvm::pvdrm
