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
// The spare context: creating a context is GPU work (its address space, its default channel: about
// 2 ms for a VM's first, 0.5 ms after that), and every guest process pays it at its first open().
// So the handler keeps one context no file has used ready (PrepareSpare: gpuvm-pvdrm-backend calls
// it before the frontend connects, as a guest kernel's driver would have its device up at boot)
// and FILE_OPEN takes it. A file that closes having sent nothing but GETPARAM (a program probing
// the device) gives its context back untouched, as the spare; a file that sent anything else never
// does, so no state of one file reaches another. With every file closed, the ring idle and no
// spare, OnIdle makes a new one (between programs, not while one runs). A spare holds one of the
// VM's channels and its context's VRAM, all counted in the VM's budget like any file's.
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
  uint64_t spare_opens = 0;  // FILE_OPENs that took the spare context
};

class GpuRequestHandler final : public RequestHandler {
 public:
  // `driver` and `frames` must outlive the handler.
  GpuRequestHandler(guest::Driver& driver, GuestFrames& frames, const GpuHandlerOptions& options);
  ~GpuRequestHandler() override;

  Response Handle(const Request& request, GuestPages& pages) override;
  void OnDisconnect() override;
  // Every file closed and no spare: OnIdle makes one.
  bool WantsIdle() const override { return spare_ == nullptr && files_.empty() && !spare_failed_; }
  void OnIdle() override { (void)PrepareSpare(); }

  // Creates the spare context if there is none (see above). An error (the VM's VRAM or channels
  // are used up) changes nothing but that FILE_OPEN then creates its context itself; OnIdle does
  // not retry until a file has been opened since.
  Status PrepareSpare();
  bool has_spare() const { return spare_ != nullptr; }
  // Destroys the spare context: before the aggregator session ends (its teardown disables the
  // context's channel through that session), and OnIdle makes no new one while no file opens.
  void ReleaseSpare() {
    spare_.reset();
    spare_failed_ = true;
  }

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
  std::unique_ptr<guest::Context> spare_;            // no file has used it
  bool spare_failed_ = false;  // the last PrepareSpare failed, or ReleaseSpare: no refill
  // Guest-frame mappings of files closed while their channels still ran (see CloseFile).
  std::vector<std::unique_ptr<hv::GuestMapping>> kept_frames_;
  std::atomic<uint64_t> open_files_{0};
  std::atomic<uint64_t> live_objects_{0};
  std::atomic<uint64_t> pushbufs_{0};
  std::atomic<uint64_t> pushes_{0};
  std::atomic<uint64_t> spare_opens_{0};
};

}  // namespace gpuvm::pvdrm

#endif  // GPUVM_PVDRM_BACKEND_GPU_HANDLER_H_
