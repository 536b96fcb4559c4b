// FullVirtGpu (fv_gpu.h): the modes, creation and counters, the trapped-access entry points that
// route each BAR access to its part, and the VM's lifetime (guest RAM, detach). The parts:
// fv_gpu_registers.cc (BAR0: registers, PRAMIN, TLB flushes and shadow spaces), fv_gpu_channels.cc
// (channels, playlists, interrupts from the physical GPU), fv_gpu_bars.cc (BAR1/BAR3 apertures and
// BAR remap).
//
// Threading: as FullVirtGpu (fv_gpu.h).
#include "aggregator/fv_gpu.h"

#include <bit>
#include <chrono>
#include <cstring>

#include "aggregator/fv_gpu_internal.h"
#include "base/enum_names.h"
#include "base/log.h"

namespace gpuvm::aggregator {

const char* FvModeName(FvMode mode) {
  static constexpr EnumName<FvMode> kNames[] = {
      {FvMode::kNaive, "fv-naive"},        {FvMode::kLazy, "fv-lazy"},
      {FvMode::kBarRemap, "fv-bar-remap"}, {FvMode::kOptimized, "fv-optimized"},
      {FvMode::kPvNaive, "pv-naive"},      {FvMode::kPvMulticall, "pv-multicall"}};
  return NameOf(kNames, mode, "fv-?");
}

Result<FvMode> ParseFvMode(std::string_view text) {
  if (text.starts_with("fv-")) text.remove_prefix(3);
  if (text == "fv") return FvMode::kNaive;
  Result<ipc::VgpuVariant> variant = ipc::ParseVgpuVariant(ipc::VmMode::kFullVirtualization, text);
  if (!variant.ok()) {
    return Status::InvalidArgument("unknown fv mode '" + std::string(text) +
                                   "' (naive, lazy, bar-remap, optimized)");
  }
  return *FvModeOf(*variant);
}

std::optional<FvMode> FvModeOf(ipc::VgpuVariant variant) {
  using V = ipc::VgpuVariant;
  switch (variant) {
    case V::kFvNaive:
      return FvMode::kNaive;
    case V::kFvLazy:
      return FvMode::kLazy;
    case V::kFvBarRemap:
      return FvMode::kBarRemap;
    case V::kFvOptimized:
      return FvMode::kOptimized;
    case V::kPvNaive:
      return FvMode::kPvNaive;
    case V::kPvMulticall:
    case V::kPvDrm:  // a PVDRM backend's session: its driver's page tables as multicalls
      return FvMode::kPvMulticall;
    case V::kDefault:
      break;
  }
  return std::nullopt;
}

Result<std::unique_ptr<FullVirtGpu>> FullVirtGpu::Create(FvHost* host, const VmBars& bars,
                                                         const FvVmOptions& options) {
  if (bars.bar0 < pbus::kPraminWindow + pbus::kPraminWindowSize) {
    return Status::InvalidArgument("fv: BAR0 must reach the PRAMIN window (16 MiB)");
  }
  if (bars.bar1 < uint64_t(pf::kChannels) * pf::kUserPageSize || bars.bar3 < (1ull << 20) ||
      bars.bar1 > (4ull << 30) || bars.bar3 > (4ull << 30)) {
    return Status::InvalidArgument("fv: BAR1 and BAR3 must be 1 MiB to 4 GiB");
  }
  // The VRAM first (a static slice is zeroed here; dynamic chunks when first referenced).
  // pv: the GPU walks the guest's own tables, which must be contiguous machine memory (a small
  // table is larger than a dynamic chunk): one static slice, whatever the fv VMs get.
  const VramPolicy policy =
      IsPvMode(options.mode) ? VramPolicy::kStatic : host->options().vram_policy;
  GPUVM_ASSIGN_OR_RETURN(
      std::unique_ptr<VramMap> map,
      VramMap::Create(policy, &host->vm_vram(), &host->vram(), options.vram_bytes));
  GPUVM_ASSIGN_OR_RETURN(FvHost::Partition partition,
                         host->AllocatePartition(options.vram_bytes, options.channels));
  partition.vram_base = map->static_base();
  // (The host, not the VM: a quarantined map outlives its FullVirtGpu, never the host.)
  map->SetLog([host, fields = VmLogFields(options.vm_id, options.name)](const std::string& line) {
    host->Log(LogEvent(LogLevel::kInfo, fields, line));
  });
  return std::unique_ptr<FullVirtGpu>(
      new FullVirtGpu(host, bars, options, partition, std::move(map)));
}

FullVirtGpu::FullVirtGpu(FvHost* host, const VmBars& bars, const FvVmOptions& options,
                         const FvHost::Partition& partition, std::unique_ptr<VramMap> vram_map)
    : host_(host),
      bars_(bars),
      options_(options),
      partition_(partition),
      vram_map_(std::move(vram_map)),
      // What its guest causes (refusals, faults): warnings.
      guest_log_(
          [this](const std::string& line) {
            host_->Log(LogEvent(LogLevel::kWarn, VmLogFields(options_.vm_id, options_.name), line));
          },
          host->options().guest_log) {
  pmc_enable_ = pmc::kEnableResetValue;
  channels_.resize(partition.channels);
  if (IsPvMode(options.mode)) pv_ = MakePvDevice();
  if (options.mode == FvMode::kBarRemap || options.mode == FvMode::kOptimized) {
    // What a BAR_MAP hands out (bar_remap.h): the VM's own VRAM memfd, else the GPU's machine
    // frames; neither: everything traps (always correct).
    remap_own_backing_ = vram_map_->backing_fd() >= 0;
    const int backing = remap_own_backing_ ? vram_map_->backing_fd() : host->gpu().vram_frames_fd();
    Result<os::UniqueFd> vram = backing >= 0
                                    ? os::DuplicateFd(backing)
                                    : Result<os::UniqueFd>(Status::Unavailable("no VRAM to map"));
    if (vram.ok()) {
      remap_ = std::make_unique<BarRemapper>(std::move(*vram), pf::kChannels - partition.channels);
    }
  }
}

std::unique_ptr<PvDevice> FullVirtGpu::MakePvDevice() {
  PvTables::Hooks hooks;
  hooks.flush_tlb = [this](uint64_t machine_pd) { host_->FlushTlb(machine_pd); };
  hooks.directory_in_use = [this](uint64_t guest_pd) {
    for (const VirtualChannel& ch : channels_) {
      if (ch.bound && ch.guest_pd == guest_pd) return true;
    }
    return false;
  };
  hooks.bar_tables_changed = [this] { bar_cache_.clear(); };
  hooks.aperture_store = [this](const pv::Call& call, std::span<const uint8_t> batch) {
    return PvBarStore(call, batch);
  };
  return std::make_unique<PvDevice>(
      options_.mode == FvMode::kPvNaive ? pv::Mode::kNaive : pv::Mode::kMulticall, vram_map_.get(),
      std::move(hooks), [this](const std::string& why) {
        LogRefusal(Refusal::kPageTableEntry, 1,
                   [&] { return "para-virtual call refused: " + why; });
      });
}

FullVirtGpu::~FullVirtGpu() {
  if (!detached_) (void)Detach();
}

VmMemoryLayout FullVirtGpu::layout() const {
  return {partition_.vram_base, partition_.vram_bytes, partition_.sysram_base, ram_.size(),
          vram_map_.get()};
}

void FullVirtGpu::Log(const std::string& line) {
  host_->Log(LogEvent(LogLevel::kInfo, VmLogFields(options_.vm_id, options_.name), line));
}

void FullVirtGpu::LogRefusal(Refusal kind, uint64_t count,
                             const std::function<std::string()>& line) {
  guest_log_.Note(uint32_t(kind), RefusalWhat(kind), count, line);
}

void FullVirtGpu::LogGuestEvent(GuestEvent kind, const std::function<std::string()>& line) {
  static constexpr const char* kWhat[] = {"MMU faults",
                                          "command errors",
                                          "compute traps",
                                          "shadow rescans that failed",
                                          "channels that did not leave the engine",
                                          "playlist commits that failed",
                                          "BAR remap updates that failed"};
  guest_log_.Note(kGuestEventBase + uint32_t(kind), kWhat[size_t(kind)], 1, line);
}

RefusalCounts FullVirtGpu::refusals() const {
  const FvCounters& k = counters_;
  RefusalCounts r{};
  r[size_t(Refusal::kRegister)] = k.refused_registers;
  r[size_t(Refusal::kMemory)] = k.refused_memory;
  r[size_t(Refusal::kChannel)] = k.refused_channels;
  r[size_t(Refusal::kPlaylist)] = k.refused_playlists;
  r[size_t(Refusal::kPageTableEntry)] =
      k.shadow.entries_rejected +
      (pv_ ? pv_->counters().batches_refused + pv_->counters().calls_refused +
                 pv_->counters().areas_refused
           : 0);
  r[size_t(Refusal::kSubmission)] = k.refused_submissions;
  r[size_t(Refusal::kVramExhausted)] = vram_map_ ? vram_map_->exhausted() : k.vram_exhausted;
  return r;
}

std::string FullVirtGpu::DescribeCounters() const {
  const FvCounters& k = counters_;
  const ShadowCounters& s = k.shadow;
  const uint64_t assigned = vram_map_ ? vram_map_->assigned_bytes() : k.vram_assigned;
  return std::string(FvModeName(options_.mode)) + ", VRAM " +
         std::to_string(partition_.vram_bytes >> 20) + " MiB " +
         (host_->options().vram_policy == VramPolicy::kStatic || pv_ != nullptr
              ? "at " + Hex(partition_.vram_base)
              : "dynamic (" + std::to_string(assigned >> 10) + " KiB assigned" +
                    (k.vram_exhausted != 0 || (vram_map_ && vram_map_->exhausted() != 0)
                         ? ", pool exhausted"
                         : "") +
                    ")") +
         ", channels " + std::to_string(partition_.first_channel) + ".." +
         std::to_string(partition_.first_channel + partition_.channels - 1) + "; traps BAR0/1/3 " +
         std::to_string(k.traps[0]) + "/" + std::to_string(k.traps[1]) + "/" +
         std::to_string(k.traps[2]) + " (PRAMIN " + std::to_string(k.pramin) + ", USER " +
         std::to_string(k.user_area) + "), TLB flushes " + std::to_string(k.tlb_flushes) +
         ", scans " + std::to_string(s.scans) + " (tables " + std::to_string(s.tables_scanned) +
         ", unchanged " + std::to_string(s.tables_unchanged) + "), shadow entries written " +
         std::to_string(s.entries_written) + ", rejected " + std::to_string(s.entries_rejected) +
         ", BAR walks " + std::to_string(k.bar_walks) + ", submissions " +
         std::to_string(k.submissions) + ", playlists " + std::to_string(k.playlist_updates) +
         ", shadow channels " + std::to_string(k.shadow_channels_built) +
         ", refused registers/memory/channels " + std::to_string(k.refused_registers) + "/" +
         std::to_string(k.refused_memory) + "/" + std::to_string(k.refused_channels) + ", faults " +
         std::to_string(k.faults) +
         (k.descriptor_writes != 0 ? ", descriptor writes " + std::to_string(k.descriptor_writes)
                                   : std::string()) +
         (pv_ ? PvCounters() : std::string()) +
         (remap_ ? ", remap syncs " + std::to_string(k.remap_syncs) + " (" +
                       std::to_string(k.remap_ns / 1000) + " us, runs " +
                       std::to_string(remap_->runs()) + ", pages " +
                       std::to_string(remap_->mapped_pages()) + ", maps/unmaps " +
                       std::to_string(remap_->maps()) + "/" + std::to_string(remap_->unmaps()) +
                       (remap_off_ ? ", refused: trapping" : "") + ")"
                 : std::string());
}

std::string FullVirtGpu::PvCounters() const {
  const PvDeviceCounters& d = pv_->counters();
  const PvTableCounters& t = pv_->tables().counters();
  return ", pv calls " + std::to_string(t.calls) + " (refused " + std::to_string(d.calls_refused) +
         "), doorbells " + std::to_string(d.doorbells) + " (batches refused " +
         std::to_string(d.batches_refused) + "), pv tables " +
         std::to_string(pv_->tables().registered_objects()) + " (registered " +
         std::to_string(t.tables_registered) + ", released " + std::to_string(t.tables_released) +
         "), pv entries " + std::to_string(t.entries_written) + ", host TLB flushes " +
         std::to_string(t.tlb_flushes);
}

// ---- access entry points ----

Status FullVirtGpu::Check(gpu::Bar bar, uint64_t offset, uint32_t size, uint64_t length) const {
  return CheckBarAccess(detached_, bars_, bar, offset, size, length);
}
Result<uint64_t> FullVirtGpu::Read(gpu::Bar bar, uint64_t offset, uint32_t size, uint32_t) {
  GPUVM_RETURN_IF_ERROR(Check(bar, offset, size, size));
  ++counters_.traps[CounterSlot(bar)];
  return ReadOne(bar, offset, size);
}

Status FullVirtGpu::Write(gpu::Bar bar, uint64_t offset, uint32_t size, uint64_t value, uint32_t) {
  GPUVM_RETURN_IF_ERROR(Check(bar, offset, size, size));
  ++counters_.traps[CounterSlot(bar)];
  WriteOne(bar, offset, size, value);
  return Status::Ok();
}

Status FullVirtGpu::WriteElements(gpu::Bar bar, uint64_t offset, uint32_t size,
                                  std::span<const uint8_t> data, uint32_t) {
  GPUVM_RETURN_IF_ERROR(Check(bar, offset, size, data.size()));
  counters_.traps[CounterSlot(bar)] += data.size() / size;
  for (size_t at = 0; at < data.size();) {
    // Aperture memory outside the USER pages takes a page's worth of elements as one store: the
    // same bytes land in the same order, and the descriptor check sees the whole range. (A 32 KiB
    // fill of a BAR3 page table element by element took ~1 ms of a context's creation.)
    const size_t piece = AperturePiece(bar, offset + at, data.size() - at);
    if (piece != 0) {
      ApertureRun(bar, offset + at, const_cast<uint8_t*>(data.data() + at), piece, size,
                  /*write=*/true);
      at += piece;
      continue;
    }
    uint64_t value = 0;
    std::memcpy(&value, data.data() + at, size);
    WriteOne(bar, offset + at, size, value);
    at += size;
  }
  return Status::Ok();
}

void FullVirtGpu::ApertureRun(gpu::Bar bar, uint64_t offset, uint8_t* data, size_t bytes,
                              uint32_t element, bool write) {
  if (remap_dirty_) SyncRemap();
  const uint64_t refused = counters_.refused_memory;
  ApertureAccess(bar, offset, data, uint32_t(bytes), write);
  // Counted as the elements would have been: each one a refused access (a run is one page).
  if (counters_.refused_memory != refused) counters_.refused_memory = refused + bytes / element;
}

size_t FullVirtGpu::AperturePiece(gpu::Bar bar, uint64_t offset, size_t length) const {
  if (bar == gpu::Bar::k0) return 0;
  const size_t n = size_t(std::min<uint64_t>(length, kPage - (offset & (kPage - 1))));
  // The USER pages are one aligned run of whole pages: a page is in it or not.
  return InUserArea(bar, offset) ? 0 : n;
}

Status FullVirtGpu::ReadElements(gpu::Bar bar, uint64_t offset, uint32_t size,
                                 std::span<uint8_t> out, uint32_t) {
  GPUVM_RETURN_IF_ERROR(Check(bar, offset, size, out.size()));
  counters_.traps[CounterSlot(bar)] += out.size() / size;
  for (size_t at = 0; at < out.size();) {
    const size_t piece = AperturePiece(bar, offset + at, out.size() - at);
    if (piece != 0) {
      ApertureRun(bar, offset + at, out.data() + at, piece, size, /*write=*/false);
      at += piece;
      continue;
    }
    const uint64_t value = ReadOne(bar, offset + at, size);
    std::memcpy(out.data() + at, &value, size);
    at += size;
  }
  return Status::Ok();
}

uint64_t FullVirtGpu::PraminAddress(uint64_t offset) const {
  return (uint64_t(pramin_base_) << pbus::kPraminBaseShift) + (offset - pbus::kPraminWindow);
}

uint64_t FullVirtGpu::ReadOne(gpu::Bar bar, uint64_t offset, uint32_t size) {
  uint64_t value = 0;
  if (bar == gpu::Bar::k0) {
    if (offset >= pbus::kPraminWindow && offset < pbus::kPraminWindow + pbus::kPraminWindowSize) {
      ++counters_.pramin;
      if (!PvStoreAllowed(PraminAddress(offset), size) ||
          !vram_map_->Read(PraminAddress(offset), &value, size)) {
        ++counters_.refused_memory;  // (pv: a registered table reads 0: the host's business)
      }
      return value;
    }
    if (pv_ != nullptr && pv::InWindow(offset)) {
      if (size == 4 && (offset & 3) == 0) return pv_->Read(uint32_t(offset));
      ++counters_.refused_registers;
      return 0;
    }
    if (size == 8) {
      return ReadRegister(uint32_t(offset)) | (uint64_t(ReadRegister(uint32_t(offset + 4))) << 32);
    }
    const uint32_t word = ReadRegister(uint32_t(offset & ~3ull));
    value = word >> ((offset & 3) * 8);
    return size == 4 ? uint32_t(value) : value & ((1ull << (size * 8)) - 1);
  }
  if (remap_dirty_) SyncRemap();
  if (InUserArea(bar, offset)) return UserAccess(offset, size, false, 0);
  ApertureAccess(bar, offset, reinterpret_cast<uint8_t*>(&value), size, false);
  return value;
}

void FullVirtGpu::WriteOne(gpu::Bar bar, uint64_t offset, uint32_t size, uint64_t value) {
  if (bar == gpu::Bar::k0) {
    if (offset >= pbus::kPraminWindow && offset < pbus::kPraminWindow + pbus::kPraminWindowSize) {
      ++counters_.pramin;
      if (!PvStoreAllowed(PraminAddress(offset), size) ||
          !vram_map_->Write(PraminAddress(offset), &value, size)) {
        ++counters_.refused_memory;
      } else {
        DescriptorStore(/*guest=*/true, PraminAddress(offset), size);
      }
      return;
    }
    if (pv_ != nullptr && pv::InWindow(offset)) {
      if (size != 4 || (offset & 3) != 0 ||
          !pv_->Write(uint32_t(offset), uint32_t(value), ram_, layout())) {
        ++counters_.refused_registers;
      }
      return;
    }
    if (size == 8 && (offset & 3) == 0) {
      WriteRegister(uint32_t(offset), uint32_t(value));
      WriteRegister(uint32_t(offset + 4), uint32_t(value >> 32));
    } else if (size == 4 && (offset & 3) == 0) {
      WriteRegister(uint32_t(offset), uint32_t(value));
    } else {
      ++counters_.refused_registers;  // partial register writes: no driver does them
    }
    return;
  }
  if (remap_dirty_) SyncRemap();
  if (InUserArea(bar, offset)) {
    UserAccess(offset, size, true, value);
    return;
  }
  ApertureAccess(bar, offset, reinterpret_cast<uint8_t*>(&value), size, true);
}

// ---- lifetime ----

Status FullVirtGpu::AttachGuestRam(const GuestRam& ram) {
  if (detached_) return Status::FailedPrecondition("the VM's virtual GPU is gone");
  if (ram_attached_) return Status::AlreadyExists("the VM's RAM is already attached");
  if ((ram.size() >> 12) + (partition_.sysram_base >> 12) > vm::pte::kAddrFieldMask ||
      ram.size() > (1ull << FvHost::kSysramSlotShift)) {
    return Status::InvalidArgument("fv: guest RAM too large for a SYSRAM window");
  }
  if (host_->gpu().reaches_guest_memory() &&
      !host_->gpu().host_window().AttachRegion(partition_.sysram_base, ram.bytes())) {
    return Status::Internal("fv: the SYSRAM window is taken");
  }
  ram_ = ram.bytes();
  ram_attached_ = true;
  bar_cache_.clear();
  return Status::Ok();
}

Status FullVirtGpu::Detach() { return DetachKeepingVram(nullptr); }

Status FullVirtGpu::DetachKeepingVram(std::unique_ptr<VramMap>* kept) {
  if (detached_) return Status::Ok();
  bool all_stopped = true;
  for (uint32_t v = 0; v < channels_.size(); ++v) {
    if (channels_[v].bound && !host_->StopChannel(partition_.first_channel + v)) {
      all_stopped = false;
    }
    channels_[v].bound = false;
    channels_[v].space = nullptr;
  }
  host_->queue().ForgetVm(options_.vm_id);
  for (auto& [pd, entry] : spaces_) host_->FlushTlb(entry.space->physical_pd());
  if (pv_) pv_->tables().ReleaseAll();  // flushes every pv directory's translations
  spaces_.clear();
  bar_cache_.clear();
  if (ram_attached_) host_->gpu().host_window().DetachRegion(partition_.sysram_base);
  ram_ = {};
  counters_.vram_assigned = vram_map_->assigned_bytes();
  counters_.vram_exhausted = vram_map_->exhausted();
  if (kept != nullptr) {
    *kept = std::move(vram_map_);  // quarantined by the caller: the guest may still reach it
  } else {
    vram_map_.reset();  // every page back to the pool (a static slice scrubbed)
  }
  host_->ReleasePartition(partition_);
  detached_ = true;
  guest_log_.Flush();  // what the rate limit left out, before the session's last lines
  if (!all_stopped) {
    return Status::DeadlineExceeded("fv: a channel of the VM did not leave the engine in time");
  }
  return Status::Ok();
}

}  // namespace gpuvm::aggregator
