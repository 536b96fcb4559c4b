// PVDRM's GPU layer (docs/PVDRM.md, "Running requests on the GPU"): the RequestHandler that runs
// one guest's nouveau-shaped requests on the GPU through the guest driver
// (guest-pv-driver/driver.h) — in gpuvm's backend process that driver reaches the GPU through the
// VM's own aggregator session, so the VM's VRAM share, channel budget and BAND share bound
// everything done here.
//
//   DRM file        a guest::Context: a GPU address space of its own, holding only that file's
//                   objects, so one guest process's pushbuffers reach nothing of another's.
//   CHANNEL_ALLOC   a Channel of that context (the first is the context's own default channel).
//   GEM_NEW         VRAM: Context::AllocDevice. GART: the guest frames the request lists, mapped
//                   (GuestFrames) and registered with the context (RegisterHost): the GPU reaches
//                   the guest's own pages, no copy.
//   GEM_PUSHBUF     one IB entry per push (Channel::SubmitSegments), then the channel's fence; the
//                   commands are not parsed (they run in the file's own address space). The fence
//                   is recorded on every object the call lists, for CPU_PREP and GEM_CLOSE.
//   GEM_CPU_PREP    waits for the object's fences (NOWAIT: -EBUSY while busy), bounded by
//                   cpu_prep_timeout (then -EBUSY, as nouveau's own bounded wait).
//
// Everything a request names is looked up in the requesting file only: another file's (or a freed)
// handle or channel is -ENOENT. Errors are the ioctl's errnos. A GPU fault of a file's context
// (a bad pushbuffer) fails that file's later calls (-EIO) and nothing else.
//
// Not in this version: CPU mappings of VRAM objects (map_handle is 0: the guest reaches VRAM
// through copies by the GPU), relocations (a file's objects sit at fixed GPU addresses, reported in
// `presumed`; nr_relocs must be 0), notifier objects (-ENODEV: fences are semaphore releases into
// the file's own GART objects), tiling (tile_mode/tile_flags must be 0).
//
// Threading: Handle and OnDisconnect on one thread (BackendConnection::Run's); stats() from any.
#ifndef GPUVM_PVDRM_BACKEND_GPU_HANDLER_H_
#define GPUVM_PVDRM_BACKEND_GPU_HANDLER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "guest-pv-driver/driver.h"
#include "pvdrm-backend/backend.h"
#include "pvdrm-backend/guest_frames.h"

namespace gpuvm::pvdrm {

struct GpuHandlerOptions {
  guest::ContextOptions context;  // each DRM file's context
  std::chrono::milliseconds cpu_prep_timeout{15000};
  uint32_t max_objects_per_file = 1u << 16;  // GEM_NEW past it: -ENOSPC
  uint32_t max_channels_per_file = 16;       // CHANNEL_ALLOC past it: -ENOSPC
};

struct GpuHandlerStats {
  uint64_t files = 0;    // open now
  uint64_t objects = 0;  // live now, all files
  uint64_t pushbufs = 0;
  uint64_t pushes = 0;
};

class GpuRequestHandler final : public RequestHandler {
 public:
  // `driver` and `frames` must outlive the handler.
  GpuRequestHandler(guest::Driver& driver, GuestFrames& frames, const GpuHandlerOptions& options);
  ~GpuRequestHandler() override;

  Response Handle(const Request& request, GuestPages& pages) override;
  void OnDisconnect() override;

  GpuHandlerStats stats() const;

 private:
  struct Object;
  struct File;
  Response Serve(File& file, const Request& request, GuestPages& pages);
  void CloseFile(uint32_t id);

  guest::Driver& driver_;
  GuestFrames& frames_;
  const GpuHandlerOptions options_;
  std::map<uint32_t, std::unique_ptr<File>> files_;  // by file id
  // Guest-frame mappings of files closed while their channels still ran (see CloseFile).
  std::vector<std::unique_ptr<hv::GuestMapping>> kept_frames_;
  std::atomic<uint64_t> open_files_{0};
  std::atomic<uint64_t> live_objects_{0};
  std::atomic<uint64_t> pushbufs_{0};
  std::atomic<uint64_t> pushes_{0};
};

}  // namespace gpuvm::pvdrm

#endif  // GPUVM_PVDRM_BACKEND_GPU_HANDLER_H_
