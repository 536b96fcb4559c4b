// PFIFO: channels, the channel table, the playlist, the USER (USERD) poll area, MMU fault records,
// and the command-fetch units (PSUBFIFO, a.k.a. PBDMA) that report channel errors. Sources:
// envytools rnndb/fifo/gf100_pfifo.xml (offsets, bitfields, PSUBFIFO interrupt bits, VM_FAULT and
// CHAN_TABLE layouts); nouveau nvkm/engine/fifo/gf100.c (runlist commit: 8-byte playlist entries
// {chid, 0x00000004}, 0x2274 = 0x01f00000 | count, wait for 0x227c bit 20; fault decoding of
// 0x2800+; PBDMA error decoding of 0x40108/0x400c0/0x400c4/0x40120; engine status 0x2640: bit 31
// busy, bits 0-6 chid); docs/FERMI-FACTS.md. Facts only.
#ifndef GPUVM_GPU_HW_PFIFO_H_
#define GPUVM_GPU_HW_PFIFO_H_

#include <cstdint>

namespace gpuvm::gf100::pfifo {

inline constexpr uint32_t kChannels = 128;

// ---- Interrupts ----
inline constexpr uint32_t kIntr = 0x002100;  // write 1 to clear the edge-style bits
inline constexpr uint32_t kIntrEn = 0x002140;
inline constexpr uint32_t kIntrChanTableError = 1u << 0;
inline constexpr uint32_t kIntrPlaylist = 1u << 8;  // nouveau: SCHED_ERROR, reason in 0x254c
inline constexpr uint32_t kIntrVmFault = 1u << 28;  // level: VM_FAULT_SOURCE != 0
inline constexpr uint32_t kIntrSubfifo = 1u << 29;  // level: SUBFIFO_INTR_SOURCE != 0
inline constexpr uint32_t kIntrRunlist = 1u << 30;  // level: RUNLIST_INTR != 0
inline constexpr uint32_t kIntrEngine = 1u << 31;   // level: ENGINE_INTR_SOURCE != 0 (non-stall)

inline constexpr uint32_t kCtrl = 0x002200;

// POLL_AREA: where the channels' USER pages live in BAR1. bits 0-27 BAR1 address >> 12, bit 28
// enable. Channel c's USER page is BAR1 [addr + c * 0x1000, + 0x1000).
inline constexpr uint32_t kPollArea = 0x002254;
inline constexpr uint32_t kPollAreaAddrMask = 0x0fffffff;
inline constexpr uint32_t kPollAreaEnable = 1u << 28;
inline constexpr uint32_t kUserPageSize = 0x1000;

// ---- Playlist (runlist) ----
// PLAYLIST_WR: bits 0-27 address >> 12, bits 28-29 target (0 VRAM, 2/3 SYSRAM).
inline constexpr uint32_t kPlaylistWr = 0x002270;
inline constexpr uint32_t kPlaylistAddrMask = 0x0fffffff;
inline constexpr uint32_t kPlaylistTargetShift = 28;
// PLAYLIST_WR_LEN: bits 0-11 entry count; writing it submits the playlist. Bits 20-24: envytools
// calls them UNK20 on GF100 (on GK104+ the same place is ENG, a gf100_pfifo_engine). nouveau's
// gf100 runlist commit always writes 0x1f there (0x1f = engine NONE); the software GPU ignores it.
inline constexpr uint32_t kPlaylistWrLen = 0x002274;
inline constexpr uint32_t kPlaylistLenMask = 0xfff;
inline constexpr uint32_t kPlaylistWrLenUnk20Shift = 20;
// 0x01f00000
inline constexpr uint32_t kPlaylistWrLenUnk20Mask = 0x1fu << kPlaylistWrLenUnk20Shift;
// What nouveau writes in UNK20 on GF100.
inline constexpr uint32_t kPlaylistWrLenNouveau = 0x1fu << kPlaylistWrLenUnk20Shift;
inline constexpr uint32_t kPlaylistRd = 0x002278;
inline constexpr uint32_t kPlaylistRdLen = 0x00227c;
inline constexpr uint32_t kPlaylistBusy = 1u << 20;
// A playlist entry is two words: word 0 bits 0-6 the channel id; word 1 nouveau always writes
// 0x00000004 (meaning unknown; we ignore it).
inline constexpr uint32_t kPlaylistEntrySize = 8;
inline constexpr uint32_t kPlaylistEntryChidMask = 0x7f;
inline constexpr uint32_t kPlaylistEntryWord1 = 0x00000004;

// ---- Error / source registers ----
inline constexpr uint32_t kChanTableErrorCode = 0x00252c;
// gf100_pfifo.xml CHAN_TABLE_ERROR values.
inline constexpr uint32_t kChanTableErrorInvalidTarget = 6;
inline constexpr uint32_t kPlaylistIntrCode = 0x00254c;  // SCHED reason; 1 = INACTIVE_CHANNEL
inline constexpr uint32_t kPlaylistIntrInactiveChannel = 1;
inline constexpr uint32_t kVmFaultSource = 0x00259c;  // bit u: VM_FAULT[u] holds a record; W1C
// bit n: PSUBFIFO[n].INTR != 0 (read-only)
inline constexpr uint32_t kSubfifoIntrSource = 0x0025a0;
inline constexpr uint32_t kEngineIntrSource = 0x0025a4;  // bit e: ENGINE_INTR[e] != 0 (read-only)
inline constexpr uint32_t kEngineIntr = 0x0025a8;  // + 4 * engine; bit 0 NOTIFY (non-stall); W1C
inline constexpr uint32_t kEngineIntrNotify = 1u << 0;
inline constexpr uint32_t kEngineIntrEnable = 0x002628;
// KICK_CHID: writing a channel id asks PFIFO to take that channel off the engines (envytools:
// "wtf is this exactly"). nouveau's gf100 kick writes the chid, then polls until bit 20 reads clear
// ("kick timeout" after 2 s). The software GPU keeps bit 20 set (with the chid in bits 0-6) until
// its engine thread has left that channel's time slice; it reads clear at once when the channel
// is not running.
inline constexpr uint32_t kKickChid = 0x002634;
inline constexpr uint32_t kKickChidMask = 0x7f;
inline constexpr uint32_t kKickPending = 1u << 20;
// ENG_STATE[e]: nouveau reads bit 31 busy and bits 0-6 the channel; envytools: bit 24 FAULTED.
// The software GPU sets FAULTED (and freezes the channel bits and ENGINE_CHANNEL[e]) from a trap
// of engine e until the driver acknowledges it (PGRAPH: the TRAP bit of 0x400100).
inline constexpr uint32_t kEngState = 0x002640;
inline constexpr uint32_t kEngStateBusy = 1u << 31;
inline constexpr uint32_t kEngStateFaulted = 1u << 24;
// ENGINE_CHANNEL[e] (read-only): the channel whose context is on engine e. bits 0-29 instance >>
// 12, bit 31 valid.
inline constexpr uint32_t kEngineChannel = 0x002790;
inline constexpr uint32_t kEngineChannelValid = 1u << 31;
// RUNLIST_INTR (nouveau 0x2a00): bit 28 = playlist update done; W1C.
inline constexpr uint32_t kRunlistIntr = 0x002a00;
inline constexpr uint32_t kRunlistIntrUpdateDone = 1u << 28;

// PFIFO engine numbers (gf100_pfifo_engine): index into ENG_STATE / ENGINE_CHANNEL / ENGINE_INTR.
enum class Engine : uint8_t { kPgraph = 0, kPcopy0 = 4, kPcopy1 = 5, kNone = 0x1f };
inline constexpr uint32_t kEngineSlots = 6;

// ---- MMU fault records ----
inline constexpr uint32_t kVmFault = 0x002800;  // + 0x10 * unit, 32 units (see gf100::FaultUnit)
inline constexpr uint32_t kVmFaultStride = 0x10;
inline constexpr uint32_t kVmFaultUnits = 32;
inline constexpr uint32_t kVmFaultInst = 0x0;  // instance block >> 12 of the faulting context
inline constexpr uint32_t kVmFaultAddrLo = 0x4;
inline constexpr uint32_t kVmFaultAddrHi = 0x8;
inline constexpr uint32_t kVmFaultFlags = 0xc;
inline constexpr uint32_t kVmFaultReasonMask = 0xf;
inline constexpr uint32_t kVmFaultHub = 1u << 6;
inline constexpr uint32_t kVmFaultWrite = 1u << 7;
inline constexpr uint32_t kVmFaultClientShift = 8;
inline constexpr uint32_t kVmFaultGpcShift = 24;

// ---- Channel table ----
inline constexpr uint32_t kChanTable = 0x003000;  // + 8 * chid
inline constexpr uint32_t kChanTableStride = 8;
// CHAN: bits 0-29 instance block >> 12, bit 30 POLL_ENABLE, bit 31 VALID.
inline constexpr uint32_t kChanInstMask = 0x3fffffff;
inline constexpr uint32_t kChanPollEnable = 1u << 30;
inline constexpr uint32_t kChanValid = 1u << 31;
// STATE (+4): bit 0 RUNNABLE, bit 4 ACQUIRE_PENDING, bit 12 LOADED, bits 16-20 ENGINE, bit 28
// PENDING.
inline constexpr uint32_t kStateRunnable = 1u << 0;
inline constexpr uint32_t kStateAcquirePending = 1u << 4;
inline constexpr uint32_t kStateLoaded = 1u << 12;
inline constexpr uint32_t kStateEngineShift = 16;
inline constexpr uint32_t kStateEngineMask = 0x1fu << kStateEngineShift;
inline constexpr uint32_t kStatePending = 1u << 28;

// ---- gpuvm extension (implementation-specific; no real Fermi has it)
// CHAN_BUSY_US[chid] (read-only): microseconds the software GPU spent running that channel (its
// pushbuffer and the copy / compute work it started), a wrapping 32-bit counter updated at the end
// of each of the channel's time slices (each counting at most its budget plus a margin: time the
// engine thread was stopped is not the channel's; sim::PfifoConfig); writes are ignored. Consumers
// take differences (the aggregator's dispatcher charges a submission the difference between its
// start and its completion). Placed in PFIFO's 0x3800-0x39ff, where envytools' gf100_pfifo.xml
// documents no register (CHAN_TABLE ends at 0x33ff). A driver for a real card must not rely on it.
inline constexpr uint32_t kChanBusyUs = 0x003800;  // + 4 * chid
// PREEMPT: writing chid | DRAIN asks the engine thread to take that channel's compute grid off the
// engine between slices (docs/SOFTWARE-GPU.md "Preemption"): a context switch saves the grid's
// whole state into the channel's context (DRAIN clear), a drain starts no new thread block and
// switches out once the started ones have finished (DRAIN set). The grid continues on the
// channel's next turn (so with RUNNABLE clear it waits). Reads: the last chid | DRAIN, PENDING
// until the request is served, SAVED when serving it saved a context (a grid was in flight). A
// new write replaces a pending request. The figures below describe the last request served.
// (our choice) placed right after CHAN_BUSY_US; whether a real Fermi decodes these offsets we do
// not know. A driver for a real card must not rely on them. Times saturate at 0xffffffff.
inline constexpr uint32_t kPreempt = 0x003a00;
inline constexpr uint32_t kPreemptChidMask = 0x7f;
inline constexpr uint32_t kPreemptDrain = 1u << 8;
inline constexpr uint32_t kPreemptPending = 1u << 20;
inline constexpr uint32_t kPreemptSaved = 1u << 21;
inline constexpr uint32_t kPreemptSavedBytes = 0x003a04;  // bytes of the context saved
inline constexpr uint32_t kPreemptLatencyNs = 0x003a08;   // request written to grid off the engine
inline constexpr uint32_t kPreemptSaveNs = 0x003a0c;      // of which saving the context
inline constexpr uint32_t kPreemptCount = 0x003a10;       // requests served (wrapping)
inline constexpr uint32_t kPreemptRestoreNs = 0x003a14;   // the device's last context restore

// ---- PSUBFIFO (command fetch units, PBDMA) ----
inline constexpr uint32_t kSubfifo = 0x040000;  // + 0x2000 * n, 3 units
inline constexpr uint32_t kSubfifoStride = 0x2000;
inline constexpr uint32_t kSubfifos = 3;
inline constexpr uint32_t kSubfifoIbPut = 0x000;
inline constexpr uint32_t kSubfifoIbGet = 0x014;
inline constexpr uint32_t kSubfifoDmaGet = 0x018;
inline constexpr uint32_t kSubfifoRefCnt = 0x028;
// method that failed: bits 2-13 mthd, 16-18 subch
inline constexpr uint32_t kSubfifoCacheAddr = 0x0c0;
inline constexpr uint32_t kSubfifoCacheData = 0x0c4;
inline constexpr uint32_t kSubfifoIntr = 0x108;  // W1C
inline constexpr uint32_t kSubfifoIntrEn = 0x10c;
inline constexpr uint32_t kSubfifoChannel = 0x120;  // bits 0-6 chid, bit 8 active
inline constexpr uint32_t kSubfifoChannelActive = 1u << 8;
// PSUBFIFO INTR bits (gf100_psubfifo_intr).
inline constexpr uint32_t kSubfifoIntrIbPutOverflow = 1u << 14;
inline constexpr uint32_t kSubfifoIntrIbEntryInvalid = 1u << 15;
inline constexpr uint32_t kSubfifoIntrIllegalCmd = 1u << 18;
inline constexpr uint32_t kSubfifoIntrIllegalMthd = 1u << 21;
inline constexpr uint32_t kSubfifoIntrSwMthd = 1u << 23;  // nouveau: EMPTY_SUBC
inline constexpr uint32_t kSubfifoIntrIllegalSem = 1u << 25;
inline constexpr uint32_t kSubfifoIntrSigMismatch = 1u << 31;
// gpuvm extensions (no real Fermi sets them; our choice of bits, whether a real one uses these we
// do not know): only gpuvm's full virtualization presents them to a VM, on a channel whose work the
// host failed (docs/SCHEDULER.md "Pause, kernel limit, kill-work"): the operator's kill-work, or
// the VM's kernel run-time limit (a TDR). The guest driver reports them as a channel error.
inline constexpr uint32_t kSubfifoIntrGpuvmKilled = 1u << 6;
inline constexpr uint32_t kSubfifoIntrGpuvmTimeLimit = 1u << 7;

}  // namespace gpuvm::gf100::pfifo

#endif  // GPUVM_GPU_HW_PFIFO_H_
