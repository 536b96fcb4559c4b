#include "pvdrm-frontend/render_node.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xf86drm.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

// nouveau_drm.h names a field of drm_nouveau_grobj_alloc `class` (pvdrm-frontend/protocol/wire.h).
#define class oclass
#include <nouveau_drm.h>
#undef class

#include "pvdrm-frontend/drm_device.h"

namespace gpuvm::pvdrm {
namespace {

// The driver name of an open DRM descriptor (DRM_IOCTL_VERSION), or "" when it is none.
std::string DriverName(int fd) {
  drmVersionPtr version = drmGetVersion(fd);
  if (version == nullptr) return "";
  std::string name(version->name, size_t(version->name_len));
  drmFreeVersion(version);
  return name;
}

Status ErrnoStatus(int err, const char* what) { return StatusFromErrno(-err, what); }

}  // namespace

Result<std::string> FindRenderNode(const std::string& driver, const std::string& dir) {
  // Render minors are 128..191 (DRM_NODE_RENDER's range).
  for (int minor = 128; minor < 192; ++minor) {
    const std::string path = dir + "/renderD" + std::to_string(minor);
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) continue;
    const bool match = DriverName(fd) == driver;
    ::close(fd);
    if (match) return path;
  }
  return Status::NotFound("no DRM render node of driver '" + driver + "' in " + dir);
}

Result<std::unique_ptr<RenderNodeDevice>> RenderNodeDevice::Open(const std::string& path,
                                                                 const std::string& driver) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "opening " + path);
  const std::string name = DriverName(fd);
  ::close(fd);
  if (name != driver) {
    return Status::InvalidArgument(path + " is driven by '" + name + "', not '" + driver + "'");
  }
  return std::unique_ptr<RenderNodeDevice>(new RenderNodeDevice(path));
}

RenderNodeDevice::~RenderNodeDevice() {
  std::lock_guard lock(mu_);
  for (const auto& [file, fd] : fds_) ::close(fd);
}

Result<int> RenderNodeDevice::Fd(uint32_t file) {
  std::lock_guard lock(mu_);
  auto it = fds_.find(file);
  if (it == fds_.end()) return Status::NotFound("no open DRM file " + std::to_string(file));
  return it->second;
}

Status RenderNodeDevice::Ioctl(uint32_t file, unsigned long request, void* arg, const char* what) {
  GPUVM_ASSIGN_OR_RETURN(const int fd, Fd(file));
  if (drmIoctl(fd, request, arg) != 0) return ErrnoStatus(errno, what);
  return Status::Ok();
}

Status RenderNodeDevice::Command(uint32_t file, unsigned long index, void* arg, size_t size,
                                 const char* what) {
  GPUVM_ASSIGN_OR_RETURN(const int fd, Fd(file));
  // As libdrm_nouveau issues them: read-write at DRM_COMMAND_BASE + index (-errno on failure).
  const int ret = drmCommandWriteRead(fd, index, arg, size);
  if (ret != 0) return ErrnoStatus(-ret, what);
  return Status::Ok();
}

Result<uint32_t> RenderNodeDevice::OpenFile() {
  const int fd = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "opening the render node");
  const auto file = uint32_t(fd) + 1;  // never 0
  std::lock_guard lock(mu_);
  fds_[file] = fd;
  return file;
}

void RenderNodeDevice::CloseFile(uint32_t file) {
  int fd = -1;
  {
    std::lock_guard lock(mu_);
    auto it = fds_.find(file);
    if (it == fds_.end()) return;
    fd = it->second;
    fds_.erase(it);
  }
  ::close(fd);  // the kernel frees the file's objects (mapped ones when their mapping goes)
}

Result<guest::DrmDevice::Identity> RenderNodeDevice::Identify() {
  return IdentifyByGetParam(*this, [this](uint32_t file, uint64_t which) -> Result<uint64_t> {
    drm_nouveau_getparam g{};
    g.param = which;
    GPUVM_RETURN_IF_ERROR(Command(file, DRM_NOUVEAU_GETPARAM, &g, sizeof(g), "GETPARAM"));
    return g.value;
  });
}

Result<int32_t> RenderNodeDevice::ChannelAlloc(uint32_t file) {
  drm_nouveau_channel_alloc a{};
  GPUVM_RETURN_IF_ERROR(Command(file, DRM_NOUVEAU_CHANNEL_ALLOC, &a, sizeof(a), "CHANNEL_ALLOC"));
  return a.channel;
}

Status RenderNodeDevice::ChannelFree(uint32_t file, int32_t channel) {
  drm_nouveau_channel_free f{};
  f.channel = channel;
  return Command(file, DRM_NOUVEAU_CHANNEL_FREE, &f, sizeof(f), "CHANNEL_FREE");
}

Result<guest::DrmDevice::Object> RenderNodeDevice::NewVram(uint32_t file, uint64_t size,
                                                           uint64_t align) {
  if (align > UINT32_MAX) return Status::InvalidArgument("alignment too large");
  drm_nouveau_gem_new g{};
  g.info.size = size;
  g.info.domain = NOUVEAU_GEM_DOMAIN_VRAM;
  g.align = uint32_t(align);
  GPUVM_RETURN_IF_ERROR(Command(file, DRM_NOUVEAU_GEM_NEW, &g, sizeof(g), "GEM_NEW"));
  Object object;
  object.handle = g.info.handle;
  object.va = g.info.offset;
  object.size = size;
  return object;
}

Result<guest::DrmDevice::Object> RenderNodeDevice::NewGart(uint32_t file, uint64_t size) {
  GPUVM_ASSIGN_OR_RETURN(const int fd, Fd(file));
  drm_nouveau_gem_new g{};
  g.info.size = size;
  g.info.domain = NOUVEAU_GEM_DOMAIN_GART;
  GPUVM_RETURN_IF_ERROR(Command(file, DRM_NOUVEAU_GEM_NEW, &g, sizeof(g), "GEM_NEW"));
  const uint32_t handle = g.info.handle;
  const uint64_t bytes = g.info.size;
  void* host = (g.info.map_handle == 0 || bytes < size)
                   ? MAP_FAILED
                   : ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                            off_t(g.info.map_handle));
  if (host == MAP_FAILED) {
    const int err = g.info.map_handle == 0 ? EINVAL : errno;
    (void)Close(file, handle);
    return ErrnoStatus(err, "mapping a GART object");
  }
  Object object;
  object.handle = handle;
  object.va = g.info.offset;
  object.size = size;
  object.host = static_cast<uint8_t*>(host);
  // The mapping keeps the kernel's object (and its pages) alive past GEM_CLOSE.
  object.backing = std::shared_ptr<void>(host, [bytes](void* p) { ::munmap(p, bytes); });
  return object;
}

Result<guest::DrmDevice::Object> RenderNodeDevice::WrapHost(uint32_t, void*, uint64_t) {
  return Status::Unimplemented("a DRM render node has no user-pointer objects (nouveau's ABI)");
}

Status RenderNodeDevice::Close(uint32_t file, uint32_t handle) {
  drm_gem_close c{};
  c.handle = handle;
  return Ioctl(file, DRM_IOCTL_GEM_CLOSE, &c, "GEM_CLOSE");
}

Status RenderNodeDevice::Pushbuf(uint32_t file, int32_t channel, std::span<const Push> pushes) {
  if (pushes.empty() || pushes.size() > NOUVEAU_GEM_MAX_PUSH) {
    return Status::InvalidArgument("a pushbuf has 1 to 512 pushes");
  }
  std::vector<drm_nouveau_gem_pushbuf_bo> buffers;
  std::vector<drm_nouveau_gem_pushbuf_push> push;
  std::map<uint32_t, uint32_t> index;  // handle -> bo index
  for (const Push& p : pushes) {
    auto [it, added] = index.emplace(p.handle, uint32_t(buffers.size()));
    if (added) {
      drm_nouveau_gem_pushbuf_bo bo{};
      bo.handle = p.handle;
      bo.read_domains = NOUVEAU_GEM_DOMAIN_GART | NOUVEAU_GEM_DOMAIN_VRAM;
      buffers.push_back(bo);
    }
    drm_nouveau_gem_pushbuf_push entry{};
    entry.bo_index = it->second;
    entry.offset = p.offset;
    entry.length = p.bytes;
    push.push_back(entry);
  }
  drm_nouveau_gem_pushbuf submit{};
  submit.channel = uint32_t(channel);
  submit.nr_buffers = uint32_t(buffers.size());
  submit.buffers = reinterpret_cast<uintptr_t>(buffers.data());
  submit.nr_push = uint32_t(push.size());
  submit.push = reinterpret_cast<uintptr_t>(push.data());
  return Command(file, DRM_NOUVEAU_GEM_PUSHBUF, &submit, sizeof(submit), "GEM_PUSHBUF");
}

Status RenderNodeDevice::Health(uint32_t file, uint32_t handle) {
  drm_nouveau_gem_cpu_prep prep{};
  prep.handle = handle;
  prep.flags = NOUVEAU_GEM_CPU_PREP_NOWAIT;
  const Status s = Command(file, DRM_NOUVEAU_GEM_CPU_PREP, &prep, sizeof(prep), "GEM_CPU_PREP");
  if (s.code() == StatusCode::kDeadlineExceeded) return Status::Ok();  // busy, alive
  return s;
}

}  // namespace gpuvm::pvdrm
