#include "gpu/sim/fifo.h"

#include <algorithm>
#include <chrono>

#include "base/os.h"
#include "gpu/hw/pgraph.h"
#include "gpu/hw/pmc.h"

namespace gpuvm::sim {

namespace pf = gf100::pfifo;
namespace pg = gf100::pgraph;

namespace {

uint64_t SteadyNs() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

// (our choice) PLAYLIST_INTR codes for what envytools leaves open: an unreadable playlist.
constexpr uint32_t kPlaylistIntrUnreadable = 4;

uint32_t SubfifoIntrBit(ChannelError::Kind kind) {
  using Kind = ChannelError::Kind;
  switch (kind) {
    case Kind::kBadInstance:
      return pf::kSubfifoIntrSigMismatch;
    case Kind::kIbPutOverflow:
      return pf::kSubfifoIntrIbPutOverflow;
    case Kind::kIllegalCommand:
      return pf::kSubfifoIntrIllegalCmd;
    case Kind::kIllegalMethod:
    case Kind::kNoComputeEngine:  // (our choice) reported as an illegal method
      return pf::kSubfifoIntrIllegalMthd;
    case Kind::kEmptySubchannel:
      return pf::kSubfifoIntrSwMthd;
    case Kind::kIllegalSemaphore:
      return pf::kSubfifoIntrIllegalSem;
    case Kind::kNone:
    case Kind::kMmuFault:      // reported through VM_FAULT
    case Kind::kComputeFault:  // reported through PGRAPH TRAP
      break;
  }
  return 0;
}

}  // namespace

Pfifo::Pfifo(const PfifoConfig& config) : config_(config), start_ns_(SteadyNs()) {
  channels_.reserve(pf::kChannels);
  for (uint32_t c = 0; c < pf::kChannels; ++c) {
    channels_.push_back(std::make_unique<Channel>(c, static_cast<ChannelEnvironment*>(this)));
  }
  loaded_generation_.fill(0);
}

Pfifo::~Pfifo() { StopThread(); }

uint64_t Pfifo::NowNs() { return SteadyNs() - start_ns_; }

// ---- registers
// --------------------------------------------------------------------------------------------

uint32_t Pfifo::IntrValue() const {
  uint32_t v = intr_;
  if (vm_fault_source_ != 0) v |= pf::kIntrVmFault;
  for (const Subfifo& s : subfifo_) {
    if (s.intr & s.intr_en) v |= pf::kIntrSubfifo;
  }
  if (runlist_intr_ != 0) v |= pf::kIntrRunlist;
  for (uint32_t e : engine_intr_) {
    if (e != 0) v |= pf::kIntrEngine;
  }
  return v;
}

bool Pfifo::pending() const { return (IntrValue() & intr_en_) != 0; }

bool Pfifo::Read(uint32_t offset, uint32_t* value) {
  if (offset >= pf::kChanTable && offset < pf::kChanTable + pf::kChannels * pf::kChanTableStride) {
    const uint32_t chid = (offset - pf::kChanTable) / pf::kChanTableStride;
    const Slot& s = slots_[chid];
    if ((offset & 4) == 0) {
      *value = s.chan;
    } else {
      *value = (s.runnable ? pf::kStateRunnable : 0) |
               (s.acquire_pending ? pf::kStateAcquirePending : 0) |
               (s.loaded ? pf::kStateLoaded : 0) |
               (uint32_t(pf::Engine::kNone) << pf::kStateEngineShift) |
               (s.pending_work || running_chid_ == int(chid) ? pf::kStatePending : 0);
    }
    return (offset & 3) == 0;
  }
  if (offset >= pf::kChanBusyUs && offset < pf::kChanBusyUs + 4 * pf::kChannels) {
    // (gpuvm extension) the channel's busy time, published at the end of each of its slices.
    *value = uint32_t(slots_[(offset - pf::kChanBusyUs) / 4].stats.busy_ns / 1000);
    return (offset & 3) == 0;
  }
  if (offset >= pf::kVmFault && offset < pf::kVmFault + pf::kVmFaultUnits * pf::kVmFaultStride) {
    const uint32_t rel = offset - pf::kVmFault;
    *value = vm_fault_[rel / pf::kVmFaultStride][(rel % pf::kVmFaultStride) / 4];
    return (offset & 3) == 0;
  }
  if (offset >= pf::kSubfifo && offset < pf::kSubfifo + pf::kSubfifos * pf::kSubfifoStride) {
    const Subfifo& s = subfifo_[(offset - pf::kSubfifo) / pf::kSubfifoStride];
    switch ((offset - pf::kSubfifo) % pf::kSubfifoStride) {
      case pf::kSubfifoIbPut:
        *value = s.ib_put;
        return true;
      case pf::kSubfifoIbGet:
        *value = s.ib_get;
        return true;
      case pf::kSubfifoDmaGet:
        *value = s.dma_get;
        return true;
      case pf::kSubfifoRefCnt:
        *value = s.ref;
        return true;
      case pf::kSubfifoCacheAddr:
        *value = s.cache_addr;
        return true;
      case pf::kSubfifoCacheData:
        *value = s.cache_data;
        return true;
      case pf::kSubfifoIntr:
        *value = s.intr;
        return true;
      case pf::kSubfifoIntrEn:
        *value = s.intr_en;
        return true;
      case pf::kSubfifoChannel:
        *value = s.channel;
        return true;
    }
    return false;
  }
  if (offset >= pf::kEngineIntr && offset < pf::kEngineIntr + 4 * pf::kEngineSlots) {
    *value = engine_intr_[(offset - pf::kEngineIntr) / 4];
    return (offset & 3) == 0;
  }
  if (offset >= pf::kEngState && offset < pf::kEngState + 4 * pf::kEngineSlots) {
    *value = engines_[(offset - pf::kEngState) / 4].state;
    return (offset & 3) == 0;
  }
  if (offset >= pf::kEngineChannel && offset < pf::kEngineChannel + 4 * pf::kEngineSlots) {
    *value = engines_[(offset - pf::kEngineChannel) / 4].channel;
    return (offset & 3) == 0;
  }
  switch (offset) {
    case pf::kIntr:
      *value = IntrValue();
      return true;
    case pf::kIntrEn:
      *value = intr_en_;
      return true;
    case pf::kCtrl:
      *value = ctrl_;
      return true;
    case pf::kPollArea:
      *value = poll_area_;
      return true;
    case pf::kPlaylistWr:
      *value = playlist_wr_;
      return true;
    case pf::kPlaylistWrLen:
      *value = playlist_rd_len_;
      return true;
    case pf::kPlaylistRd:
      *value = playlist_rd_;
      return true;
    case pf::kPlaylistRdLen:
      *value = playlist_rd_len_;  // bit 20 (busy) never reads set: playlists load synchronously
      return true;
    case pf::kChanTableErrorCode:
      *value = chan_table_error_;
      return true;
    case pf::kPlaylistIntrCode:
      *value = playlist_intr_code_;
      return true;
    case pf::kVmFaultSource:
      *value = vm_fault_source_;
      return true;
    case pf::kSubfifoIntrSource: {
      uint32_t v = 0;
      for (uint32_t i = 0; i < pf::kSubfifos; ++i) {
        if (subfifo_[i].intr & subfifo_[i].intr_en) v |= 1u << i;
      }
      *value = v;
      return true;
    }
    case pf::kEngineIntrSource: {
      uint32_t v = 0;
      for (uint32_t i = 0; i < pf::kEngineSlots; ++i) {
        if (engine_intr_[i] != 0) v |= 1u << i;
      }
      *value = v;
      return true;
    }
    case pf::kEngineIntrEnable:
      *value = engine_intr_enable_;
      return true;
    case pf::kKickChid:
      *value = kick_chid_ | (kick_pending_ ? pf::kKickPending : 0);
      return true;
    case pf::kRunlistIntr:
      *value = runlist_intr_;
      return true;
    case pf::kPreempt:
      *value = preempt_.value | (preempt_.pending ? pf::kPreemptPending : 0) |
               (preempt_.saved ? pf::kPreemptSaved : 0);
      return true;
    case pf::kPreemptSavedBytes:
      *value = preempt_.saved_bytes;
      return true;
    case pf::kPreemptLatencyNs:
      *value = preempt_.latency_ns;
      return true;
    case pf::kPreemptSaveNs:
      *value = preempt_.save_ns;
      return true;
    case pf::kPreemptCount:
      *value = preempt_.count;
      return true;
    case pf::kPreemptRestoreNs:
      *value = preempt_.restore_ns;
      return true;
  }
  return false;
}

bool Pfifo::Write(uint32_t offset, uint32_t value) {
  if ((offset & 3) != 0) return false;
  if (offset >= pf::kChanTable && offset < pf::kChanTable + pf::kChannels * pf::kChanTableStride) {
    WriteChannelTable((offset - pf::kChanTable) / pf::kChanTableStride, (offset & 4) != 0, value);
    return true;
  }
  if (offset >= pf::kVmFault && offset < pf::kVmFault + pf::kVmFaultUnits * pf::kVmFaultStride) {
    return true;  // read-only records
  }
  if (offset >= pf::kChanBusyUs && offset < pf::kChanBusyUs + 4 * pf::kChannels) {
    return true;  // (gpuvm extension) read-only
  }
  if (offset >= pf::kSubfifo && offset < pf::kSubfifo + pf::kSubfifos * pf::kSubfifoStride) {
    Subfifo& s = subfifo_[(offset - pf::kSubfifo) / pf::kSubfifoStride];
    switch ((offset - pf::kSubfifo) % pf::kSubfifoStride) {
      case pf::kSubfifoIntr:
        s.intr &= ~value;
        if (&s == &subfifo_[0] && s.intr == 0 && !queued_subfifo_errors_.empty()) {
          const SubfifoError next = queued_subfifo_errors_.front();
          queued_subfifo_errors_.pop_front();
          PresentSubfifoError(next);
        }
        NotifyInterrupts();
        return true;
      case pf::kSubfifoIntrEn:
        s.intr_en = value;
        NotifyInterrupts();
        return true;
      case pf::kSubfifoCacheAddr:  // nouveau rewrites it after an error; we keep no cache to reset
      case pf::kSubfifoCacheData:
      case pf::kSubfifoIbPut:
      case pf::kSubfifoIbGet:
      case pf::kSubfifoDmaGet:
      case pf::kSubfifoRefCnt:
      case pf::kSubfifoChannel:
        return true;
    }
    return false;
  }
  if (offset >= pf::kEngineIntr && offset < pf::kEngineIntr + 4 * pf::kEngineSlots) {
    engine_intr_[(offset - pf::kEngineIntr) / 4] &= ~value;
    NotifyInterrupts();
    return true;
  }
  if ((offset >= pf::kEngState && offset < pf::kEngState + 4 * pf::kEngineSlots) ||
      (offset >= pf::kEngineChannel && offset < pf::kEngineChannel + 4 * pf::kEngineSlots)) {
    return true;  // read-only
  }
  switch (offset) {
    case pf::kIntr:
      // The edge bits clear when written with 1; the level bits follow their sources.
      intr_ &= ~(value & (pf::kIntrChanTableError | pf::kIntrPlaylist));
      NotifyInterrupts();
      return true;
    case pf::kIntrEn:
      intr_en_ = value;
      NotifyInterrupts();
      return true;
    case pf::kCtrl:
      ctrl_ = value;
      return true;
    case pf::kPollArea:
      poll_area_ = value;
      poll_base_.store(uint64_t(value & pf::kPollAreaAddrMask) << 12, std::memory_order_relaxed);
      poll_enabled_.store((value & pf::kPollAreaEnable) != 0, std::memory_order_release);
      return true;
    case pf::kPlaylistWr:
      playlist_wr_ = value;
      return true;
    case pf::kPlaylistWrLen:
      SubmitPlaylist(value & pf::kPlaylistLenMask);
      return true;
    case pf::kPlaylistRd:
    case pf::kPlaylistRdLen:
    case pf::kChanTableErrorCode:
    case pf::kPlaylistIntrCode:
    case pf::kSubfifoIntrSource:
    case pf::kEngineIntrSource:
      return true;  // read-only
    case pf::kVmFaultSource:
      vm_fault_source_ &= ~value;
      NotifyInterrupts();
      return true;
    case pf::kEngineIntrEnable:
      engine_intr_enable_ = value;
      return true;
    case pf::kKickChid:
      // The kick is over once the stepping thread is outside that channel: at once if it is not
      // running it, else when its current slice ends (Step clears kick_pending_).
      kick_chid_ = value & pf::kKickChidMask;
      kick_pending_ = running_chid_ == int(kick_chid_);
      Wake();
      return true;
    case pf::kRunlistIntr:
      runlist_intr_ &= ~value;
      NotifyInterrupts();
      return true;
    case pf::kPreempt:
      preempt_.value = value & (pf::kPreemptChidMask | pf::kPreemptDrain);
      preempt_.pending = true;
      preempt_.saved = false;
      ++preempt_.sequence;
      preempt_.requested_ns = NowNs();
      // The channel is on the engines now: its compute slice stops early (within about 0.1 ms)
      // instead of running out its time slice before the switch.
      if (running_chid_ == int(value & pf::kPreemptChidMask) && config_.compute_engine != nullptr) {
        config_.compute_engine->RequestYield();
      }
      Wake();
      return true;
    case pf::kPreemptSavedBytes:
    case pf::kPreemptLatencyNs:
    case pf::kPreemptSaveNs:
    case pf::kPreemptCount:
    case pf::kPreemptRestoreNs:
      return true;  // read-only
  }
  return false;
}

bool Pfifo::ReadGraph(uint32_t offset, uint32_t* value) const {
  switch (offset) {
    case pg::kIntr:
      *value = graph_intr_;
      return true;
    case pg::kIntrEn:
      *value = graph_intr_en_;
      return true;
    case pg::kTrap:
      *value = graph_trap_;
      return true;
    case pg::kTrapGpcMask:
      *value = graph_trap_gpc_mask_;
      return true;
    case pg::kCurrentContext:
      *value = graph_context_;
      return true;
    case pg::kGpc0TrapStatus:
      *value = gpc0_trap_;
      return true;
    case pg::kTpc0TrapStatus:
      *value = (mp_warp_error_ != 0 || mp_global_error_ != 0) ? pg::kTpcTrapMp : 0;
      return true;
    case pg::kTpc0MpWarpError:
      *value = mp_warp_error_;
      return true;
    case pg::kTpc0MpGlobalError:
      *value = mp_global_error_;
      return true;
  }
  return false;
}

bool Pfifo::WriteGraph(uint32_t offset, uint32_t value) {
  switch (offset) {
    case pg::kIntr:
      graph_intr_ &= ~value;
      if (!graph_trap_latched()) {
        // The trap is acknowledged: PGRAPH's status follows the engine again, and the next
        // waiting trap (if any) takes its place.
        engines_[uint32_t(pf::Engine::kPgraph)].state &= ~pf::kEngStateFaulted;
        if (!queued_graph_traps_.empty()) {
          const GraphTrap next = queued_graph_traps_.front();
          queued_graph_traps_.pop_front();
          PresentGraphTrap(next);
        }
      }
      NotifyInterrupts();
      return true;
    case pg::kIntrEn:
      graph_intr_en_ = value;
      NotifyInterrupts();
      return true;
    case pg::kTrap:
      graph_trap_ &= ~value;
      return true;
    case pg::kTrapGpcMask:
      graph_trap_gpc_mask_ &= ~value;
      return true;
    case pg::kGpc0TrapStatus:
      gpc0_trap_ &= ~value;
      return true;
    case pg::kTpc0MpWarpError:
      mp_warp_error_ = value & pg::kMpWarpErrorMask;  // nouveau writes 0
      return true;
    case pg::kTpc0MpGlobalError:
      mp_global_error_ &= ~value;
      return true;
    case pg::kCurrentContext:
    case pg::kTpc0TrapStatus:
      return true;  // read-only here
  }
  return false;
}

void Pfifo::WriteChannelTable(uint32_t chid, bool state_word, uint32_t value) {
  Slot& s = slots_[chid];
  if (state_word) {
    s.runnable = (value & pf::kStateRunnable) != 0;
  } else {
    // Any write of the CHAN word (re)binds the channel: the stepping thread reloads it from its
    // instance block and the channel starts afresh (a dead channel comes back to life).
    s.chan = value;
    ++s.generation;
    s.dead = false;
    s.loaded = false;
    s.acquire_pending = false;
    s.pending_work = false;
    s.error = ChannelError();
    const uint64_t inst = uint64_t(value & pf::kChanInstMask) << 12;
    if ((value & pf::kChanValid) &&
        config_.memory->Resolve(gf100::vm::Target::kVram, inst, gf100::ramin::kSize) == nullptr) {
      chan_table_error_ = pf::kChanTableErrorInvalidTarget;
      intr_ |= pf::kIntrChanTableError;
      NotifyInterrupts();
    }
  }
  Wake();
}

void Pfifo::SubmitPlaylist(uint32_t length) {
  playlist_.clear();
  const auto target = gf100::vm::Target((playlist_wr_ >> pf::kPlaylistTargetShift) & 3);
  const uint64_t address = uint64_t(playlist_wr_ & pf::kPlaylistAddrMask) << 12;
  if (length > 0) {
    const uint8_t* p =
        config_.memory->Resolve(target, address, uint64_t(length) * pf::kPlaylistEntrySize);
    if (p == nullptr) {
      playlist_intr_code_ = kPlaylistIntrUnreadable;
      intr_ |= pf::kIntrPlaylist;
    } else {
      for (uint32_t i = 0; i < length; ++i) {
        const uint32_t chid = Load32(p + i * pf::kPlaylistEntrySize) & pf::kPlaylistEntryChidMask;
        if (!(slots_[chid].chan & pf::kChanValid)) {
          playlist_intr_code_ = pf::kPlaylistIntrInactiveChannel;
          intr_ |= pf::kIntrPlaylist;
        }
        playlist_.push_back(chid);
      }
    }
  }
  playlist_rd_ = playlist_wr_;
  playlist_rd_len_ = length;
  runlist_intr_ |= pf::kRunlistIntrUpdateDone;
  NotifyInterrupts();
  Wake();
}

void Pfifo::SnoopBar1Write(uint64_t offset, uint64_t length) {
  if (!poll_enabled_.load(std::memory_order_acquire) || length == 0) return;
  const uint64_t base = poll_base_.load(std::memory_order_relaxed);
  const uint64_t end = base + uint64_t(pf::kChannels) * pf::kUserPageSize;
  const uint64_t first = std::max(offset, base);
  const uint64_t last = std::min(offset + length, end);  // exclusive
  if (first >= last) return;
  // Does the write touch any channel's IB_PUT word?
  for (uint64_t page = (first - base) / pf::kUserPageSize; page * pf::kUserPageSize + base < last;
       ++page) {
    const uint64_t ib_put = base + page * pf::kUserPageSize + gf100::userd::kIbPut;
    if (first < ib_put + 4 && ib_put < last) {
      Wake();
      return;
    }
  }
}

void Pfifo::RecordFaultLocked(const FaultSource& source, uint64_t inst_address,
                              const MemoryFault& fault) {
  const uint32_t unit = uint32_t(source.unit) % pf::kVmFaultUnits;
  if (vm_fault_source_ & (1u << unit)) {
    ++faults_dropped_;  // (our choice) the first record stays until the driver acknowledges it
    return;
  }
  vm_fault_[unit] = {uint32_t(inst_address >> 12), uint32_t(fault.va), uint32_t(fault.va >> 32),
                     uint32_t(fault.reason) | (source.hub ? pf::kVmFaultHub : 0) |
                         (fault.write ? pf::kVmFaultWrite : 0) |
                         (uint32_t(source.client) << pf::kVmFaultClientShift)};
  vm_fault_source_ |= 1u << unit;
  NotifyInterrupts();
}

void Pfifo::RecordBarFault(const FaultSource& source, uint64_t inst_address,
                           const MemoryFault& fault) {
  RecordFaultLocked(source, inst_address, fault);
}

void Pfifo::RecordFault(const FaultSource& source, uint64_t inst_address,
                        const MemoryFault& fault) {
  {
    std::lock_guard lock(*config_.register_lock);
    RecordFaultLocked(source, inst_address, fault);
  }
  config_.interrupts->DeliverInterrupt();
}

void Pfifo::RaiseNonStall(pf::Engine engine) {
  {
    std::lock_guard lock(*config_.register_lock);
    engine_intr_[uint32_t(engine) % pf::kEngineSlots] |= pf::kEngineIntrNotify;
    NotifyInterrupts();
  }
  config_.interrupts->DeliverInterrupt();
}

void Pfifo::RaiseGraphTrap(uint32_t chid, uint64_t inst_address, uint32_t warp_error,
                           uint32_t global_error) {
  {
    std::lock_guard lock(*config_.register_lock);
    const GraphTrap trap{chid, inst_address, warp_error, global_error};
    if (!graph_trap_latched()) {
      PresentGraphTrap(trap);
    } else if (queued_graph_traps_.size() < kMaxQueuedReports) {
      queued_graph_traps_.push_back(trap);
    } else {
      ++reports_dropped_;
    }
    NotifyInterrupts();
  }
  config_.interrupts->DeliverInterrupt();
}

void Pfifo::PresentGraphTrap(const GraphTrap& trap) {
  graph_intr_ |= pg::kIntrTrap;
  graph_trap_ |= pg::kTrapGpc;
  graph_trap_gpc_mask_ |= 1u;  // GPC 0
  gpc0_trap_ |= pg::kGpcTrapTpc0;
  mp_warp_error_ = trap.warp_error & pg::kMpWarpErrorMask;
  mp_global_error_ = trap.global_error;
  // Until the trap is acknowledged, PGRAPH's context and status registers name the channel that
  // trapped, whatever runs on the engine meanwhile (EngineActive leaves them alone).
  const uint32_t inst = uint32_t(trap.inst_address >> 12);
  graph_context_ = inst & pg::kCurrentContextInstMask;
  EngineStatus& e = engines_[uint32_t(pf::Engine::kPgraph)];
  e.state = pf::kEngStateFaulted | (trap.chid & pf::kPlaylistEntryChidMask);
  e.channel = pf::kEngineChannelValid | (inst & pf::kChanInstMask);
}

void Pfifo::EngineActive(pf::Engine engine, uint32_t chid, uint64_t inst_address, bool busy) {
  std::lock_guard lock(*config_.register_lock);
  if (engine == pf::Engine::kPgraph) {
    if (graph_trap_latched()) return;  // latched until the trap is acknowledged
    graph_context_ = uint32_t(inst_address >> 12) & pg::kCurrentContextInstMask;
  }
  EngineStatus& e = engines_[uint32_t(engine) % pf::kEngineSlots];
  e.state = (busy ? pf::kEngStateBusy : 0) | chid;
  e.channel = pf::kEngineChannelValid | uint32_t(inst_address >> 12);
}

void Pfifo::LatchChannelError(uint32_t chid, const Channel& channel) {
  Slot& s = slots_[chid];
  s.dead = true;
  s.error = channel.error();
  const uint32_t bit = SubfifoIntrBit(s.error.kind);
  if (bit != 0) {
    SubfifoError error;
    error.intr = bit;
    error.cache_addr = (s.error.subchannel << 16) | s.error.method;
    error.cache_data = s.error.data;
    error.chid = chid;
    error.ib_put = channel.ib_put();
    error.ib_get = channel.ib_get();
    error.dma_get = uint32_t(channel.dma_get());
    error.ref = channel.reference();
    if (subfifo_[0].intr == 0) {
      PresentSubfifoError(error);
    } else if (queued_subfifo_errors_.size() < kMaxQueuedReports) {
      queued_subfifo_errors_.push_back(error);
    } else {
      ++reports_dropped_;
    }
  }
  NotifyInterrupts();
}

void Pfifo::PresentSubfifoError(const SubfifoError& error) {
  // (our choice) every channel's errors are reported through PSUBFIFO 0. Its CH, CACHE and IB
  // registers keep naming the failed channel until the driver clears INTR.
  Subfifo& sf = subfifo_[0];
  sf.intr |= error.intr;
  sf.cache_addr = error.cache_addr;
  sf.cache_data = error.cache_data;
  sf.channel = error.chid;
  sf.ib_put = error.ib_put;
  sf.ib_get = error.ib_get;
  sf.dma_get = error.dma_get;
  sf.ref = error.ref;
}

// ---- scheduling
// ---------------------------------------------------------------------------------------------

bool Pfifo::Step() {
  {
    std::lock_guard lock(*config_.register_lock);
    if (!(config_.pmc->enable() & gf100::pmc::kEnablePfifo)) return false;
    order_ = playlist_;
  }
  ServicePreempt();
  any_blocked_ = false;
  const size_t n = order_.size();
  for (size_t i = 0; i < n; ++i) {
    const size_t pos = (next_ + i) % n;
    const uint32_t chid = order_[pos];
    uint64_t generation;
    uint32_t chan;
    {
      std::lock_guard lock(*config_.register_lock);
      const Slot& s = slots_[chid];
      if (!(s.chan & pf::kChanValid) || !s.runnable || s.dead) continue;
      generation = s.generation;
      chan = s.chan;
      running_chid_ = int(chid);
    }
    Channel& channel = *channels_[chid];
    bool failed = false;
    if (loaded_generation_[chid] != generation || !channel.loaded()) {
      loaded_generation_[chid] = generation;
      failed = !channel.Load(uint64_t(chan & pf::kChanInstMask) << 12);
    }
    Channel::Outcome outcome = Channel::Outcome::kError;
    const uint64_t start = NowNs();
    if (!failed) outcome = channel.Run(start + config_.time_slice_ns);
    // Busy time: the slice's wall time, but a stopped or starved engine thread's overrun is not
    // GPU time (PfifoConfig::max_slice_overrun_ns).
    const uint64_t elapsed =
        std::min(NowNs() - start, config_.time_slice_ns + config_.max_slice_overrun_ns);
    bool drained = false;
    {
      std::lock_guard lock(*config_.register_lock);
      running_chid_ = -1;
      if (kick_chid_ == chid) kick_pending_ = false;  // the kicked channel is off the engines
      Slot& s = slots_[chid];
      if (s.generation == generation) {  // not rebound while we ran
        const uint64_t busy = s.stats.busy_ns;
        const uint64_t slices = s.stats.slices;
        const uint64_t restores = s.stats.context_restores;
        s.stats = channel.stats();
        s.stats.busy_ns = busy;
        s.stats.slices = slices;
        if (s.stats.context_restores != restores) {
          preempt_.restore_ns = uint32_t(std::min<uint64_t>(s.stats.last_restore_ns, 0xffffffffu));
        }
        if (outcome == Channel::Outcome::kProgress || outcome == Channel::Outcome::kError) {
          s.stats.busy_ns += elapsed;
          ++s.stats.slices;
        }
        s.loaded = channel.loaded();
        s.acquire_pending = channel.acquire_pending();
        s.pending_work = channel.busy() || channel.ib_get() != channel.ib_put();
        Subfifo& sf = subfifo_[0];
        if (sf.intr == 0) {  // else latched: they describe the error being reported
          sf.channel = chid | pf::kSubfifoChannelActive;
          sf.ib_put = channel.ib_put();
          sf.ib_get = channel.ib_get();
          sf.dma_get = uint32_t(channel.dma_get());
          sf.ref = channel.reference();
        }
        if (outcome == Channel::Outcome::kError) LatchChannelError(chid, channel);
        drained = outcome == Channel::Outcome::kError ||
                  (outcome == Channel::Outcome::kProgress && !s.pending_work);
      }
    }
    if (outcome == Channel::Outcome::kError) config_.interrupts->DeliverInterrupt();
    ServicePreempt();
    if (drained && config_.on_channel_drained) config_.on_channel_drained(chid);
    if (outcome == Channel::Outcome::kProgress || outcome == Channel::Outcome::kError) {
      next_ = pos + 1;
      return true;
    }
    if (outcome == Channel::Outcome::kBlocked) any_blocked_ = true;
  }
  return false;
}

void Pfifo::ServicePreempt() {
  uint32_t value;
  uint64_t sequence;
  {
    std::lock_guard lock(*config_.register_lock);
    if (!preempt_.pending) return;
    if (config_.compute_engine != nullptr) config_.compute_engine->ClearYield();
    value = preempt_.value;
    sequence = preempt_.sequence;
  }
  // Called between slices: no slice of any channel is in flight on this (the stepping) thread.
  Channel& channel = *channels_[value & pf::kPreemptChidMask];
  const uint64_t start = NowNs();
  size_t bytes = 0;
  const bool off = channel.Preempt((value & pf::kPreemptDrain) != 0, &bytes);
  const uint64_t end = NowNs();
  if (!off) return;  // a drain waits for its started blocks: asked again after later slices
  auto clamp = [](uint64_t v) { return uint32_t(std::min<uint64_t>(v, 0xffffffffu)); };
  std::lock_guard lock(*config_.register_lock);
  if (preempt_.sequence != sequence) return;  // replaced meanwhile: serve the new one
  preempt_.pending = false;
  preempt_.saved = bytes != 0;
  preempt_.saved_bytes = clamp(bytes);
  preempt_.latency_ns = clamp(end - std::min(end, preempt_.requested_ns));
  preempt_.save_ns = clamp(end - start);
  ++preempt_.count;
}

void Pfifo::Wake() {
  {
    std::lock_guard lock(wake_mu_);
    work_hint_ = true;
    idle_ = false;
  }
  wake_cv_.notify_one();
}

void Pfifo::StartThread() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] {
    os::NameThisThread("gpu-pfifo");
    ThreadMain();
  });
}

void Pfifo::StopThread() {
  {
    std::lock_guard lock(wake_mu_);
    stop_ = true;
  }
  wake_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Pfifo::ThreadMain() {
  std::unique_lock lock(wake_mu_);
  while (!stop_) {
    work_hint_ = false;
    lock.unlock();
    const bool progressed = Step();
    lock.lock();
    if (progressed || work_hint_) continue;
    idle_ = true;
    idle_cv_.notify_all();
    // Nothing to do. Sleep until a kick, or poll: a semaphore a blocked channel waits on may be
    // released by the CPU writing memory directly, which no register write announces. (our choice)
    // 200 us while a channel is blocked, 20 ms otherwise.
    const auto wait = any_blocked_ ? std::chrono::microseconds(200) : std::chrono::milliseconds(20);
    wake_cv_.wait_for(lock, wait, [this] { return stop_ || work_hint_; });
  }
}

bool Pfifo::WaitIdle(uint64_t timeout_ns) {
  std::unique_lock lock(wake_mu_);
  return idle_cv_.wait_for(lock, std::chrono::nanoseconds(timeout_ns),
                           [this] { return idle_ && !work_hint_; });
}

ChannelError Pfifo::channel_error(uint32_t chid) const {
  std::lock_guard lock(*config_.register_lock);
  return chid < pf::kChannels ? slots_[chid].error : ChannelError();
}

ChannelStats Pfifo::channel_stats(uint32_t chid) const {
  std::lock_guard lock(*config_.register_lock);
  return chid < pf::kChannels ? slots_[chid].stats : ChannelStats();
}

}  // namespace gpuvm::sim
