// PVDRM's user-space frontend as the guest driver's DRM port (guest-pv-driver/drm_device.h): each
// call becomes one request on the ring (docs/PVDRM.md). What a kernel frontend would do with the
// guest's memory it does here with the guest's RAM directly: GART objects are guest frames (from a
// GuestDma), listed by frame number in GEM_NEW; GEM_PUSHBUF's arrays travel in pages shared for the
// call.
//
// Threading: every method from any thread (the connection's Call is thread-safe; the grant sharer,
// which is not, is used under one lock, never held across a call).
#ifndef GPUVM_PVDRM_FRONTEND_DRM_DEVICE_H_
#define GPUVM_PVDRM_FRONTEND_DRM_DEVICE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <utility>

#include "guest-pv-driver/bus.h"
#include "guest-pv-driver/drm_device.h"
#include "guest-pv-driver/local_trap_bus.h"
#include "hypervisor/grants.h"
#include "pvdrm-frontend/frontend.h"
#include "pvdrm-frontend/page_lists.h"

namespace gpuvm::pvdrm {

// Guest RAM as memory the GPU reaches: the bus addresses of its pages are guest-physical.
class GuestDma {
 public:
  virtual ~GuestDma() = default;
  // Zeroed guest RAM of `length` bytes (whole pages).
  virtual Result<std::unique_ptr<guest::DmaMapping>> Alloc(uint64_t length) = 0;
  // The caller's [host, host + length) (page-aligned, whole pages) made guest RAM.
  virtual Result<std::unique_ptr<guest::DmaMapping>> Wrap(void* host, uint64_t length) = 0;
};

// A local VM's RAM (guest-pv-driver/local_trap_bus.h's LocalVmGuest) as GuestDma.
std::unique_ptr<GuestDma> LocalVmGuestDma(std::shared_ptr<guest::LocalVmGuest> vm);

// The ioctl's errno as a Status (-EIO: kAborted, the file's context is dead; -ENOENT: kNotFound;
// -ENOMEM/-ENOSPC: kResourceExhausted; -EBUSY: kDeadlineExceeded; ...).
Status StatusFromErrno(int32_t status, const char* what);

// DrmDevice::Identify as both our devices answer it: a file of its own, GETPARAM of the chipset,
// PCI vendor and device and FB size through `get_param`, the file closed again; the first failed
// GETPARAM is the answer.
Result<guest::DrmDevice::Identity> IdentifyByGetParam(
    guest::DrmDevice& device,
    const std::function<Result<uint64_t>(uint32_t file, uint64_t param)>& get_param);

struct PvdrmDeviceOptions {
  // GEM pooling (GPUvm's frontend "cache"; mode pvdrm-pool): a closed VRAM or GART object of the
  // driver's own memory is kept, still open, for the next object of the same domain and size of
  // that file — no GEM_CLOSE and no GEM_NEW round trip. Up to this many bytes per file; 0: off.
  uint64_t pool_bytes = 0;
};

class PvdrmDevice final : public guest::DrmDevice {
 public:
  // All three must outlive the device; `backend` is the backend's domain (grants go to it).
  PvdrmDevice(FrontendConnection& connection, hv::GrantSharer& sharer, GuestDma& dma,
              hv::DomainId backend, const PvdrmDeviceOptions& options = {})
      : connection_(connection), sharer_(sharer), dma_(dma), backend_(backend), options_(options) {}
  // Waits for the pushbuffers still posted.
  ~PvdrmDevice() override;

  Result<Identity> Identify() override;
  Result<uint32_t> OpenFile() override;
  void CloseFile(uint32_t file) override;
  Result<int32_t> ChannelAlloc(uint32_t file) override;
  Status ChannelFree(uint32_t file, int32_t channel) override;
  Result<Object> NewVram(uint32_t file, uint64_t size, uint64_t align) override;
  Result<Object> NewGart(uint32_t file, uint64_t size) override;
  Result<Object> WrapHost(uint32_t file, void* host, uint64_t size) override;
  Status Close(uint32_t file, uint32_t handle) override;
  // Posted (FrontendConnection::Post): returns once the request is on the ring. A refusal (say
  // -EIO: the context was stopped) sticks to the file: its next Pushbuf and Health return it.
  Status Pushbuf(uint32_t file, int32_t channel, std::span<const Push> pushes) override;
  Status Health(uint32_t file, uint32_t handle) override;

  // Ring requests made so far, and objects the pool served (gpuvm-bench's figures).
  uint64_t requests() const { return requests_.load(std::memory_order_relaxed); }
  uint64_t pool_hits() const { return pool_hits_.load(std::memory_order_relaxed); }

 private:
  // One request; a negative status becomes the Status.
  Result<Response> Call(uint32_t file, const RequestBody& body, const char* what);
  // Revokes a page list shared for one call. Lists are made and revoked under sharer_mu_, the
  // calls themselves run without it (a round trip must not hold up other threads' calls).
  void Unshare(std::unique_ptr<SharedPageList> list);
  // GEM_NEW of a GART object over `mapping`'s frames.
  Result<Object> NewOverFrames(uint32_t file, std::unique_ptr<guest::DmaMapping> mapping);

  // The pool: an object of `file` in `domain` of `size` bytes, or nullopt.
  std::optional<Object> TakePooled(uint32_t file, uint32_t domain, uint64_t size);

  FrontendConnection& connection_;
  hv::GrantSharer& sharer_;
  GuestDma& dma_;
  const hv::DomainId backend_;
  const PvdrmDeviceOptions options_;
  // Pooling: live objects by (file, handle) with their domain (wrapped caller memory is never
  // pooled), and the closed ones kept by (file, domain, size).
  struct Live {
    uint32_t domain = 0;
    Object object;
  };
  std::mutex pool_mu_;
  std::map<std::pair<uint32_t, uint32_t>, Live> live_;
  std::multimap<std::tuple<uint32_t, uint32_t, uint64_t>, Object> pool_;
  std::map<uint32_t, uint64_t> pooled_bytes_;  // by file
  std::atomic<uint64_t> pool_hits_{0};
  std::mutex sharer_mu_;
  // Posted pushbuffers: how many are out, and the first refusal of each file.
  std::mutex posted_mu_;
  std::condition_variable posted_cv_;
  uint64_t posted_ = 0;
  std::map<uint32_t, Status> failed_files_;
  // Each file's arrays area (FILE_OPEN's persistent pages, docs/PVDRM.md): kAreaSlots slots of
  // kAreaSlotBytes, one per pushbuffer in flight (the ring holds at most 32 requests), so the
  // backend maps nothing per call. Arrays larger than a slot get pages of their own.
  static constexpr uint32_t kAreaSlots = 32;
  static constexpr uint32_t kAreaSlotBytes = 2048;
  struct FileArea {
    std::unique_ptr<SharedPageList> pages;
    uint32_t free = ~0u;  // slot bitmap; guarded by posted_mu_
  };
  std::map<uint32_t, std::shared_ptr<FileArea>> areas_;  // by file; guarded by posted_mu_
  Status FileFailure(uint32_t file);
  std::atomic<uint32_t> next_file_{1};
  std::atomic<uint64_t> requests_{0};
};

}  // namespace gpuvm::pvdrm

#endif  // GPUVM_PVDRM_FRONTEND_DRM_DEVICE_H_
