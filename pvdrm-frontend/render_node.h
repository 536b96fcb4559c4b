// The guest driver's DRM port (guest-pv-driver/drm_device.h) over a real DRM render node: a
// /dev/dri/renderD* of the pvdrm kernel frontend (pvdrm-frontend/linux, docs/PVDRM.md "The Linux
// kernel frontend"), reached through libdrm exactly as nouveau's user space reaches nouveau —
// drmIoctl with nouveau's ioctl numbers and structs, GART objects mmapped at GEM_NEW's map_handle.
// One DRM file (an open of the node) per guest::Context; the kernel frees a file's objects when it
// closes, so a killed process leaves nothing behind.
//
// What a render node cannot do: wrap the caller's own memory as a GART object (nouveau has no
// user-pointer objects), so WrapHost (cuMemHostRegister) is Unimplemented here.
//
// Threading: every method from any thread at once (each call is one ioctl on a file descriptor
// the kernel serializes as it needs; the file table is guarded by a mutex).
#ifndef GPUVM_PVDRM_FRONTEND_RENDER_NODE_H_
#define GPUVM_PVDRM_FRONTEND_RENDER_NODE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "guest-pv-driver/drm_device.h"

namespace gpuvm::pvdrm {

// The DRM driver name the pvdrm kernel frontend registers (its drm_driver.name).
inline constexpr const char* kPvdrmDriverName = "pvdrm";

// The first /dev/dri/renderD128..191 whose driver is `driver` (DRM_IOCTL_VERSION), or NotFound.
// `dir` is for tests (default /dev/dri).
Result<std::string> FindRenderNode(const std::string& driver = kPvdrmDriverName,
                                   const std::string& dir = "/dev/dri");

class RenderNodeDevice final : public guest::DrmDevice {
 public:
  // Opens nothing yet: each OpenFile opens `path`. Checks once that its driver is `driver`.
  static Result<std::unique_ptr<RenderNodeDevice>> Open(
      const std::string& path, const std::string& driver = kPvdrmDriverName);
  ~RenderNodeDevice() override;

  Result<Identity> Identify() override;
  Result<uint32_t> OpenFile() override;
  void CloseFile(uint32_t file) override;
  Result<int32_t> ChannelAlloc(uint32_t file) override;
  Status ChannelFree(uint32_t file, int32_t channel) override;
  Result<Object> NewVram(uint32_t file, uint64_t size, uint64_t align) override;
  Result<Object> NewGart(uint32_t file, uint64_t size) override;
  Result<Object> WrapHost(uint32_t file, void* host, uint64_t size) override;
  Status Close(uint32_t file, uint32_t handle) override;
  Status Pushbuf(uint32_t file, int32_t channel, std::span<const Push> pushes) override;
  Status Health(uint32_t file, uint32_t handle) override;

  const std::string& path() const { return path_; }

 private:
  explicit RenderNodeDevice(std::string path) : path_(std::move(path)) {}
  // The descriptor of `file`, or NotFound.
  Result<int> Fd(uint32_t file);
  // One ioctl; a failure becomes the Status of its errno (pvdrm-frontend/drm_device.h's mapping).
  Status Ioctl(uint32_t file, unsigned long request, void* arg, const char* what);
  // A driver ioctl, DRM_COMMAND_BASE + `index` (drmCommandWriteRead).
  Status Command(uint32_t file, unsigned long index, void* arg, size_t size, const char* what);

  const std::string path_;
  std::mutex mu_;
  std::map<uint32_t, int> fds_;  // file id (descriptor + 1) -> descriptor
};

}  // namespace gpuvm::pvdrm

#endif  // GPUVM_PVDRM_FRONTEND_RENDER_NODE_H_
