// Full virtualization: a VM's virtual GPU is one slice of the physical GPU (fv_host.h), driven by
// the unmodified guest driver through trapped BAR accesses. What the guest sees:
//   - VRAM from 0 to its declared size (the FB partition registers say so), placed by its VramMap
//     (vram_map.h: a static slice or chunks assigned on first reference); PRAMIN moves over it;
//   - BAR1/BAR3 translated by the guest's own BAR page tables, which the aggregator walks in
//     software for each trapped aperture access (validated like any shadow PTE); the USER area of
//     BAR1 (POLL_AREA) is intercepted: IB_PUT writes become submissions (submission_queue.h), other
//     USER words live in the physical channel's USER page, so IB_GET and friends are reflected;
//   - channel ids 0..channels-1 mapped onto a physical range; CHAN_TABLE, the playlist and kicks
//     are emulated and forwarded in terms of shadow channels whose instance blocks point at shadow
//     page directories (shadow_page_table.h);
//   - its own PMC/PFIFO/PGRAPH interrupt state: physical interrupts are demultiplexed by channel
//     (FvHost::PollInterrupts), so a VM sees only its own faults, with its own instance addresses;
//     a compute trap's reason (the TRAP chain down to the MP warp/global error registers) is the
//     host's reading of the physical registers, kept per VM and acknowledged by the VM on its copy;
//   - every other register reads 0 and drops writes (counted), except identity registers
//     (PMC_BOOT_0, PROM), which read through.
//
// Shadow modes (FvMode): naive rescans a shadowed directory on every TLB flush that names it;
// lazy only marks it stale and rescans when a channel using it is activated (a submission, or a
// playlist that binds it); bar-remap and optimized are naive and lazy respectively, plus the BAR
// remap (bar_remap.h): aperture pages that map the VM's VRAM, other than channel descriptors and
// its USER pages, are handed to the device model to map into the guest (BAR_MAP), so the guest
// reaches them without a trap; the set is recomputed on TLB flushes, BAR instance and POLL_AREA
// writes and channel binds, and a trapped access to a page that could be remapped (needs a
// physical GPU with a VRAM descriptor: the software GPU).
//
// Hostile input: every value is copied before it is checked; a bad value costs the VM its own
// channel (a fault it can see) or is dropped and counted; never another VM's memory or the host.
//
// Threading: as VirtualGpu, except interrupt_asserted(), which polls the physical GPU and must also
// be called on the owner thread.
#ifndef GPUVM_AGGREGATOR_FV_GPU_H_
#define GPUVM_AGGREGATOR_FV_GPU_H_

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "aggregator/bar_remap.h"
#include "aggregator/fv_host.h"
#include "aggregator/pv_device.h"
#include "aggregator/refusals.h"
#include "aggregator/shadow_page_table.h"
#include "aggregator/virtual_gpu.h"
#include "base/rate_limited_log.h"
#include "ipc/protocol.h"

namespace gpuvm::aggregator {

// The pv modes (docs/PARAVIRT.md) are fv with the guest's page tables written by para-virtual calls
// (pv_device.h, pv_tables.h) instead of shadowed: no shadow spaces, no BAR remap, one static VRAM
// slice; channels, submissions and interrupts as in fv.
enum class FvMode : uint8_t { kNaive, kLazy, kBarRemap, kOptimized, kPvNaive, kPvMulticall };
const char* FvModeName(FvMode mode);
// "naive", "lazy", "bar-remap", "optimized" (with or without an "fv-" prefix; "opt" and "remap"
// too: VM_CONFIG's fv variant words, ipc::ParseVgpuVariant).
Result<FvMode> ParseFvMode(std::string_view text);
// The mode a VM_CONFIG variant names; nullopt for kDefault (the aggregator's choice) and unknown
// values.
std::optional<FvMode> FvModeOf(ipc::VgpuVariant variant);
inline bool IsPvMode(FvMode mode) {
  return mode == FvMode::kPvNaive || mode == FvMode::kPvMulticall;
}

struct FvVmOptions {
  FvMode mode = FvMode::kNaive;
  uint64_t vram_bytes = 128ull << 20;
  uint32_t channels = 16;
  uint32_t vm_id = 0;  // for submissions and logs
  std::string name;
};

struct FvCounters {
  std::array<uint64_t, 3> traps{};  // BAR0, BAR1, BAR3 accesses handled (elements of a block each)
  uint64_t pramin = 0;              // of the BAR0 ones: PRAMIN window accesses
  uint64_t user_area = 0;           // of the BAR1 ones: USER page accesses
  uint64_t tlb_flushes = 0;
  uint64_t submissions = 0;
  uint64_t playlist_updates = 0;
  uint64_t shadow_channels_built = 0;
  uint64_t bar_walks = 0;          // software walks of the guest's BAR1/BAR3 tables (cache misses)
  uint64_t refused_registers = 0;  // writes to registers a VM may not touch, dropped
  uint64_t refused_memory = 0;     // accesses outside the VM's memory (PRAMIN, BAR pages), dropped
  uint64_t refused_channels = 0;   // channel ids or instance blocks the VM does not own
  uint64_t refused_playlists = 0;  // playlists outside its VRAM or too long, dropped
  uint64_t refused_submissions = 0;  // IB_PUT doorbells the submission queue had no room for
  uint64_t faults = 0;               // GPU faults/errors of this VM's channels delivered to it
  uint64_t out_of_vram_faults = 0;   // of the MMU faults: on pages the exhausted pool did not back
  // Guest stores into a bound channel's instance block (BAR1/BAR3 or PRAMIN) re-validated and
  // propagated to its shadow instance (a page-directory change is refused instead: the channel
  // stops, counted in refused_channels).
  uint64_t descriptor_writes = 0;
  uint64_t remap_syncs = 0;     // BAR remap: recomputations of the remapped set
  uint64_t remap_refused = 0;   // BAR remap: maps the device model refused (remap then off)
  uint64_t remap_ns = 0;        // BAR remap: time spent recomputing (walks, diffs)
  uint64_t vram_assigned = 0;   // at Detach: bytes of VRAM the VM had (vram_map() before)
  uint64_t vram_exhausted = 0;  // at Detach: chunks it was refused (the pool was empty)
  ShadowCounters shadow;
};

class FullVirtGpu final : public VirtualGpu, private FvChannelOwner {
 public:
  static Result<std::unique_ptr<FullVirtGpu>> Create(FvHost* host, const VmBars& bars,
                                                     const FvVmOptions& options);
  ~FullVirtGpu() override;

  ipc::VmMode mode() const override {
    return IsPvMode(options_.mode) ? ipc::VmMode::kParaVirtualization
                                   : ipc::VmMode::kFullVirtualization;
  }
  uint64_t vram_bytes() const override { return partition_.vram_bytes; }
  Result<uint64_t> Read(gpu::Bar bar, uint64_t offset, uint32_t size, uint32_t vcpu) override;
  Status Write(gpu::Bar bar, uint64_t offset, uint32_t size, uint64_t value,
               uint32_t vcpu) override;
  Status WriteElements(gpu::Bar bar, uint64_t offset, uint32_t size, std::span<const uint8_t> data,
                       uint32_t vcpu) override;
  Status ReadElements(gpu::Bar bar, uint64_t offset, uint32_t size, std::span<uint8_t> out,
                      uint32_t vcpu) override;
  bool interrupt_asserted() const override;
  Status AttachGuestRam(const GuestRam& ram) override;
  Status Detach() override;
  // As Detach, but the VM's VRAM does not go back to the pool: its VramMap (chunks or slice, as
  // they are) moves to `*kept` — the aggregator's quarantine of a VM whose guest may still reach
  // its VRAM through BAR remap ranges its dead device model left published.
  Status DetachKeepingVram(std::unique_ptr<VramMap>* kept);
  // BAR remap: whether pages of the GPU's VRAM — machine frames another VM may get next — may be
  // mapped into the guest now: a BAR_MAP of the GPU's VRAM file (--sim-vram-file) was issued that
  // the device model did not refuse, so that a device model dying without TEARDOWN may have left
  // them in the guest (aggregator.h: quarantine). Never with per-VM backing: the guest can only
  // have been handed the VM's own memfd, which no longer backs any GPU page once the VM is
  // detached (vram_map.h).
  bool VramMayBeMapped() const {
    return remap_ != nullptr && !remap_own_backing_ && remap_->maps() > counters_.remap_refused;
  }
  std::string DescribeCounters() const override;
  RefusalCounts refusals() const override;
  std::vector<BarRemapRequest> TakeBarRemapRequests() override;
  void BarRemapAnswered(bool map, const Status& status) override;
  // BAR remap: pages and runs mapped now (0 without remap).
  uint64_t remapped_pages() const { return remap_ ? remap_->mapped_pages() : 0; }
  size_t remapped_runs() const { return remap_ ? remap_->runs() : 0; }

  FvMode fv_mode() const { return options_.mode; }
  const FvCounters& counters() const { return counters_; }
  const FvHost::Partition& partition() const { return partition_; }
  // Its guest-physical -> machine VRAM map (null after Detach).
  const VramMap* vram_map() const { return vram_map_.get(); }
  // pv modes: the PV register window and the VM's para-virtual tables; null otherwise.
  const PvDevice* pv() const { return pv_.get(); }
  VmMemoryLayout layout() const;

 private:
  struct VirtualChannel {
    uint32_t chan = 0;   // CHAN_TABLE word 0 as the guest wrote it
    uint32_t state = 0;  // word 1
    bool on_playlist = false;
    bool bound = false;  // the shadow channel is in the physical CHAN_TABLE
    bool dead = false;   // its shadow could not be built (bad instance): never bound again
    uint64_t guest_instance = 0;
    ShadowSpace* space = nullptr;  // fv: its shadow space; pv: null (the GPU walks the guest's)
    uint64_t guest_pd = 0;         // while bound: the directory its instance block names
    uint64_t physical_pd = 0;      // ... and the one the GPU walks (shadow or registered pv)
  };
  struct SpaceEntry {
    std::unique_ptr<ShadowSpace> space;
    bool stale = false;
  };
  // A translated aperture page: physical VRAM, or an offset into the guest's RAM.
  struct BarPage {
    bool valid = false;
    bool sysram = false;
    uint64_t address = 0;
  };

  FullVirtGpu(FvHost* host, const VmBars& bars, const FvVmOptions& options,
              const FvHost::Partition& partition, std::unique_ptr<VramMap> vram_map);
  Status Check(gpu::Bar bar, uint64_t offset, uint32_t size, uint64_t length) const;
  uint64_t ReadOne(gpu::Bar bar, uint64_t offset, uint32_t size);
  void WriteOne(gpu::Bar bar, uint64_t offset, uint32_t size, uint64_t value);

  // BAR0.
  uint32_t ReadRegister(uint32_t offset);
  void WriteRegister(uint32_t offset, uint32_t value);
  uint64_t PraminAddress(uint64_t offset) const;
  uint32_t VirtualPfifoIntr() const;
  uint32_t VirtualPmcIntr() const;
  void OnTlbFlush(uint32_t trigger);
  void OnPlaylistSubmit(uint32_t length);
  void OnChannelTableWrite(uint32_t vchid, bool state_word, uint32_t value);
  Status BindShadowChannel(uint32_t vchid);
  void UnbindShadowChannel(uint32_t vchid);
  // A guest store reached [address, address + length) of its VRAM — a machine address (the
  // BAR1/BAR3 apertures) or, `guest`, a guest one (PRAMIN): the part of any bound channel's
  // instance block it touched is copied again, checked and written to the shadow instance.
  void DescriptorStore(bool guest, uint64_t address, uint64_t length);
  void RefreshShadowInstance(uint32_t vchid, uint32_t first, uint32_t end);
  Result<ShadowSpace*> ShadowFor(uint64_t guest_pd);
  Status Resync(SpaceEntry& entry);

  // BAR1/BAR3.
  bool InUserArea(gpu::Bar bar, uint64_t offset) const;
  uint64_t UserAccess(uint64_t offset, uint32_t size, bool write, uint64_t value);
  BarPage TranslateBar(gpu::Bar bar, uint64_t page);
  // BAR remap: something that decides the remapped set of the BARs in `bars` (bit 0 BAR1, bit 1
  // BAR3) changed; `eager`: recompute now if anything is mapped (else at the next trapped BAR1/BAR3
  // access).
  void RemapChanged(bool eager, uint8_t bars = 3);
  void SyncRemap();
  void ApertureAccess(gpu::Bar bar, uint64_t offset, uint8_t* data, uint32_t size, bool write);
  // How many bytes from `offset` (at most `length`, up to the page's end) a block access may take
  // to aperture memory at once: 0 for BAR0 and the USER pages, whose stores act element by element.
  size_t AperturePiece(gpu::Bar bar, uint64_t offset, size_t length) const;
  // Such a piece of `element`-byte elements as one aperture access, refusals counted per element.
  void ApertureRun(gpu::Bar bar, uint64_t offset, uint8_t* data, size_t bytes, uint32_t element,
                   bool write);

  // FvChannelOwner.
  void OnVmFault(uint32_t physical_channel, const std::array<uint32_t, 4>& record) override;
  void OnSubfifoError(uint32_t physical_channel, uint32_t unit, uint32_t intr) override;
  void OnGraphTrap(uint32_t physical_channel, uint32_t warp_error, uint32_t global_error) override;
  void OnChannelFailed(uint32_t physical_channel, uint32_t intr,
                       const std::string& reason) override;
  // Presents the next failed channel waiting for a free PSUBFIFO unit, if any.
  void PresentFailedChannels();
  int VirtualChannelOf(uint32_t physical_channel) const;
  // Whether the guest's walk of `va` in the channel's address space meets guest VRAM the
  // over-committed pool left without a chunk (a table or the page): its fault is "out of VRAM".
  bool LacksVram(const VirtualChannel& ch, uint64_t va) const;
  // pv: whether a guest store may reach guest VRAM [address, address + length) — not when it would
  // touch a registered page table (the host's copy is authoritative). Always true in fv.
  bool PvStoreAllowed(uint64_t guest_address, uint64_t length) const {
    return pv_ == nullptr || !pv_->tables().Registered(guest_address, length);
  }
  std::unique_ptr<PvDevice> MakePvDevice();
  // pv: a BAR_WRITE / BAR_FILL call (PvTables::Hooks::aperture_store): checked whole first (every
  // aperture page as a trapped store would be translated, PRAMIN against registered tables), then
  // stored as trapped stores are; kNotMapped with nothing stored when any byte would be refused.
  pv::CallResult PvBarStore(const pv::Call& call, std::span<const uint8_t> batch);
  // pv: ", pv calls ..., doorbells ..." for DescribeCounters.
  std::string PvCounters() const;

  // The VM's log lines. Everything its guest can cause over and over goes through guest_log_
  // (rate-limited per kind, base/rate_limited_log.h): refusals (counted in counters_ by the
  // caller) and the other guest events below.
  void Log(const std::string& line);
  void LogRefusal(Refusal kind, uint64_t count, const std::function<std::string()>& line);
  enum class GuestEvent : uint8_t {
    kMmuFault,
    kCommandError,
    kComputeTrap,
    kShadowFailure,   // a rescan ran out of reserved VRAM (too many tables)
    kStuckChannel,    // a channel did not leave the engine in time
    kPlaylistCommit,  // the physical playlist could not be written
    kRemapUpdate,     // BAR remap could not be recomputed
  };
  static constexpr uint32_t kGuestEventBase = 64;  // log kinds past the Refusal values
  void LogGuestEvent(GuestEvent kind, const std::function<std::string()>& line);

  FvHost* const host_;
  const VmBars bars_;
  const FvVmOptions options_;
  const FvHost::Partition partition_;
  std::unique_ptr<VramMap> vram_map_;  // every guest VRAM access goes through it
  RateLimitedLog guest_log_;           // see LogRefusal
  std::span<uint8_t> ram_;
  bool ram_attached_ = false;
  bool detached_ = false;
  FvCounters counters_;

  // Virtual registers.
  uint32_t pmc_enable_ = 0, pmc_intr_en_ = 0, pmc_intr_mask_ = 0;
  uint32_t pramin_base_ = 0;
  uint32_t bar_inst_[2] = {0, 0};  // BAR1, BAR3
  uint32_t pfifo_intr_edges_ = 0, pfifo_intr_en_ = 0, pfifo_ctrl_ = 0;
  uint32_t poll_area_ = 0, playlist_wr_ = 0, runlist_intr_ = 0, engine_intr_enable_ = 0;
  uint32_t chan_table_error_ = 0;
  uint32_t vm_fault_source_ = 0;
  std::array<std::array<uint32_t, 4>, gf100::pfifo::kVmFaultUnits> vm_fault_{};
  struct Subfifo {
    uint32_t intr = 0, intr_en = 0xffffffff, channel = 0;
  };
  std::array<Subfifo, gf100::pfifo::kSubfifos> subfifo_{};
  // Channels the host failed (OnChannelFailed) waiting for a PSUBFIFO unit the guest has
  // acknowledged: (virtual channel, INTR bits), at most one per channel.
  std::map<uint32_t, uint32_t> failed_waiting_;
  uint32_t graph_intr_ = 0, graph_intr_en_ = 0, graph_trap_channel_ = 0;
  // Its own copy of the PGRAPH trap chain (0x400108, 0x400118, 0x502c90) and MP trap registers
  // (0x504648, 0x504650) of its last trap, set by OnGraphTrap and cleared only by its own writes.
  uint32_t graph_trap_ = 0, graph_trap_gpc_mask_ = 0, gpc0_trap_ = 0;
  uint32_t mp_warp_error_ = 0, mp_global_error_ = 0;
  uint32_t vm_cfg_ = 0, tlb_page_ = 0, tlb_vspace_ = 0;

  std::vector<VirtualChannel> channels_;
  std::map<uint64_t, SpaceEntry> spaces_;            // by guest page directory address
  std::unordered_map<uint64_t, BarPage> bar_cache_;  // (bar << 40 | page) -> translation
  std::unique_ptr<PvDevice> pv_;                     // pv modes only
  std::unique_ptr<BarRemapper> remap_;  // bar-remap/optimized with a VRAM descriptor; else null
  uint8_t remap_dirty_ = 0;  // BARs whose remapped set must be recomputed (bit 0 BAR1, bit 1 BAR3)
  bool remap_off_ = false;   // the device model refused a map: everything traps
  bool remap_own_backing_ = false;  // BAR_MAP hands out the VM's own VRAM memfd (vram_map.h)
  BarWalk bar_walk_[2];             // BAR1, BAR3
  // What the last remapped set of each BAR was computed from, besides its walk.
  struct RemapInputs {
    std::vector<uint64_t> descriptors;
    uint32_t poll_area = 0;
    bool valid = false;
  } remap_inputs_[2];
};

}  // namespace gpuvm::aggregator

#endif  // GPUVM_AGGREGATOR_FV_GPU_H_
