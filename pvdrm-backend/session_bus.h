// The Bus the PVDRM backend's guest driver runs on (docs/PVDRM.md, "The backend process"): the
// VM's own aggregator session instead of a trapped BAR. The backend is the guest's device model and
// its kernel driver in one, so its register accesses go to the aggregator directly — one IPC
// round trip each (the fast lane when offered), no IOREQ and no VM exit — and the aggregator
// treats them as that VM's: its VRAM share, its channels, its page tables validated and
// confined as for any fv or pv VM.
//
// DMA addresses are guest-physical, since the aggregator confines every SYSRAM page-table entry of
// the VM to the VM's own RAM:
//   AllocDma   pages of a pool of guest frames the guest set aside for its backend (the driver's
//              own rings, fences, staging), zeroed at allocation;
//   MapDma     memory of a live GuestFrames mapping (a GART object's frames): its pages' frames.
//              Anything else is not guest memory: InvalidArgument.
// No interrupt line (SetInterruptHandler: Unimplemented): the driver polls for errors.
// Single BAR1 writes (the channels' doorbells) are posted (docs/IPC.md, "Posted writes"): the
// next access of any kind settles them first, and a refused one counts in failed_accesses() then.
//
// Threading: every method from any thread (bus.h); accesses are serialized on one lock, as the
// session is one connection.
#ifndef GPUVM_PVDRM_BACKEND_SESSION_BUS_H_
#define GPUVM_PVDRM_BACKEND_SESSION_BUS_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "guest-pv-driver/bus.h"
#include "guest-pv-driver/range_allocator.h"
#include "pvdrm-backend/guest_frames.h"
#include "qemu-device/aggregator_connection.h"

namespace gpuvm::pvdrm {

class SessionBus final : public guest::Bus {
 public:
  // `connection` and `frames` must outlive the bus. `pool` are the frames the driver's own DMA
  // memory comes from (at least one; each below frames.frame_count()).
  static Result<std::unique_ptr<SessionBus>> Create(dm::AggregatorConnection& connection,
                                                    const gpu::PciIdentity& pci,
                                                    GuestFrames& frames,
                                                    std::vector<uint32_t> pool);
  ~SessionBus() override;

  const gpu::PciIdentity& pci() const override { return pci_; }
  uint64_t Read(gpu::Bar bar, uint64_t offset, gpu::Width width) override;
  void Write(gpu::Bar bar, uint64_t offset, gpu::Width width, uint64_t value) override;
  Status ReadBlock(gpu::Bar bar, uint64_t offset, void* dst, uint64_t length) override;
  Status WriteBlock(gpu::Bar bar, uint64_t offset, const void* src, uint64_t length) override;
  Status FillBlock(gpu::Bar bar, uint64_t offset, uint8_t byte, uint64_t length) override;
  void WriteRegs(uint64_t offset, std::span<const uint32_t> values) override;
  Result<std::unique_ptr<guest::DmaMapping>> MapDma(void* host, uint64_t length) override;
  Result<std::unique_ptr<guest::DmaMapping>> AllocDma(uint64_t length) override;
  // Memory at a given address of this process is never the guest's: kUnimplemented.
  Result<std::unique_ptr<guest::DmaMapping>> AllocDmaAt(uint64_t length, void* at) override;
  Status SetInterruptHandler(std::function<void(bool asserted)> handler) override;
  bool remote() const override { return true; }

  // Accesses the session refused or lost (the aggregator gone): nonzero means the GPU is gone.
  uint64_t failed_accesses() const;
  // Whether single BAR1 writes are posted (default) or wait for their acknowledgement.
  void set_posted_writes(bool on) {
    std::lock_guard lock(mu_);
    posted_writes_ = on;
  }
  // The session's lock, for whoever else must use the connection (its events).
  std::mutex& connection_mutex() { return mu_; }

 private:
  class PoolPages;
  class FramePages;
  SessionBus(dm::AggregatorConnection& connection, const gpu::PciIdentity& pci, GuestFrames& frames)
      : connection_(connection), pci_(pci), frames_(frames) {}
  Status CheckBlock(gpu::Bar bar, uint64_t offset, uint64_t length) const;
  void FreePool(uint64_t offset);
  // Collects the posted write's acknowledgement, if one is outstanding. mu_ held.
  void SettleLocked();

  dm::AggregatorConnection& connection_;
  const gpu::PciIdentity pci_;
  GuestFrames& frames_;
  mutable std::mutex mu_;      // the connection's accesses
  uint64_t failed_ = 0;        // guarded by mu_
  bool posted_writes_ = true;  // guarded by mu_
  bool write_posted_ = false;  // guarded by mu_: an acknowledgement outstanding
  std::mutex pool_mu_;
  std::unique_ptr<hv::GuestMapping> pool_;  // the pool's frames, mapped in order
  guest::RangeAllocator pool_space_;        // offsets into pool_; guarded by pool_mu_
};

}  // namespace gpuvm::pvdrm

#endif  // GPUVM_PVDRM_BACKEND_SESSION_BUS_H_
