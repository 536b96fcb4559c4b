// The para-virtual call page protocol, version 1 (docs/PARAVIRT.md is its specification): the PV
// register window a pv VM's device offers in BAR0, the layout of a batch in the call area, the
// opcodes and the result codes. Both sides link it: the guest driver (guest-pv-driver/, which
// builds batches) and the aggregator (aggregator/, which copies, decodes, validates and applies
// them). call_page.h is the only code that builds or parses a batch.
//
// Threading: constants only.
#ifndef GPUVM_PV_PROTOCOL_H_
#define GPUVM_PV_PROTOCOL_H_

#include <cstdint>
#include <string_view>

namespace gpuvm::pv {

inline constexpr uint32_t kVersion = 1;

// ---- The PV register window (BAR0; our choice: 4 KiB no GF100 unit we model decodes) ----
inline constexpr uint32_t kWindow = 0xf00000;
inline constexpr uint32_t kWindowSize = 0x1000;
inline constexpr uint32_t kRegId = kWindow + 0x000;            // R: kIdValue in a pv VM, else 0
inline constexpr uint32_t kRegVersion = kWindow + 0x004;       // R: kVersion
inline constexpr uint32_t kRegMode = kWindow + 0x008;          // R: Mode
inline constexpr uint32_t kRegAreaMaxPages = kWindow + 0x00c;  // R: kMaxAreaPages
inline constexpr uint32_t kRegAreaListLo = kWindow + 0x010;    // RW: the page list's address
inline constexpr uint32_t kRegAreaListHi = kWindow + 0x014;    // RW
inline constexpr uint32_t kRegAreaPages = kWindow + 0x018;     // W: register N pages (0: none)
inline constexpr uint32_t kRegAreaStatus = kWindow + 0x01c;    // R: last registration's result
inline constexpr uint32_t kRegDoorbell = kWindow + 0x020;      // W: the batch's length in bytes
inline constexpr uint32_t kRegBatchStatus = kWindow + 0x024;   // R: last batch's result
inline constexpr uint32_t kRegBatchDone = kWindow + 0x028;     // R: ops the last batch applied
inline constexpr uint32_t kRegCallsLo = kWindow + 0x030;       // R: ops applied since start
inline constexpr uint32_t kRegCallsHi = kWindow + 0x034;       // R
inline constexpr uint32_t kRegDoorbellsLo = kWindow + 0x038;   // R: doorbells since start
inline constexpr uint32_t kRegDoorbellsHi = kWindow + 0x03c;   // R
inline constexpr uint32_t kIdValue = 0x47505643;

inline constexpr bool InWindow(uint64_t bar0_offset) {
  return bar0_offset >= kWindow && bar0_offset < kWindow + kWindowSize;
}

// PV_MODE: when the guest rings.
enum class Mode : uint32_t {
  kNaive = 1,      // a doorbell per call
  kMulticall = 2,  // a doorbell per batch
};

// ---- The call area and its batches ----
inline constexpr uint64_t kPageBytes = 4096;
inline constexpr uint32_t kMaxAreaPages = 16;
inline constexpr uint32_t kBatchMagic = 0x42435650;  // "PVCB"
inline constexpr uint32_t kHeaderBytes = 32;
inline constexpr uint32_t kOpHeaderBytes = 16;
inline constexpr uint32_t kMaxOps = 4096;
// WRITE, WRITE_LINEAR and CLEAR counts summed over a batch.
inline constexpr uint64_t kMaxBatchEntries = 65536;
// Per VM.
inline constexpr uint32_t kMaxSpaces = 64;
inline constexpr uint32_t kMaxTables = 4096;

// Header field offsets.
inline constexpr uint32_t kHeaderMagic = 0;
inline constexpr uint32_t kHeaderVersion = 4;  // u16
inline constexpr uint32_t kHeaderFlags = 6;    // u16
inline constexpr uint32_t kHeaderOpCount = 8;
inline constexpr uint32_t kHeaderLength = 12;
inline constexpr uint32_t kHeaderStatus = 16;    // written by the host
inline constexpr uint32_t kHeaderDone = 20;      // written by the host
inline constexpr uint32_t kHeaderReserved = 24;  // u64
// Op header field offsets (relative to the op).
inline constexpr uint32_t kOpCode = 0;   // u16
inline constexpr uint32_t kOpFlags = 2;  // u16
inline constexpr uint32_t kOpLength = 4;
inline constexpr uint32_t kOpResult = 8;  // written by the host
inline constexpr uint32_t kOpReserved = 12;

enum class Op : uint16_t {
  kAttach = 1,  // u64 directory, u64 limit, u32 kind, u32 reserved
  kDetach = 2,  // u64 directory
  kWrite = 3,   // u64 space, u64 table, u64 first, u32 count, u32 reserved, count x u64
  kWriteLinear =
      4,       // u64 space, u64 table, u64 first, u32 count, u32 reserved, u64 value, u64 step
  kClear = 5,  // u64 space, u64 table, u64 first, u32 count, u32 reserved
  kFlush = 6,  // u64 space
  // Stores as trapped ones would be made (docs/PARAVIRT.md, "BAR stores"): BAR1/BAR3 translated
  // by the guest's BAR page tables into its own memory; BAR0 (BAR_WRITE only) register writes and
  // PRAMIN stores, outside the PV window.
  kBarWrite = 7,  // u64 offset, u32 bar (0, 1 or 3), u32 bytes, the bytes (padded to 8)
  kBarFill = 8,   // u64 offset, u32 bar, u32 bytes, u32 pattern (4 bytes repeated), u32 reserved
};
inline constexpr uint32_t kAttachBytes = 40;
inline constexpr uint32_t kDetachBytes = 24;
inline constexpr uint32_t kWriteFixedBytes = 48;  // + 8 per entry
inline constexpr uint32_t kWriteLinearBytes = 64;
inline constexpr uint32_t kClearBytes = 48;
inline constexpr uint32_t kFlushBytes = 24;
inline constexpr uint32_t kBarWriteFixedBytes = 32;  // + the bytes, rounded up to 8
inline constexpr uint32_t kBarFillBytes = 40;
// An aperture store's bytes: a multiple of 4 at a 4-byte aligned offset, at most this many. Each
// 8 bytes (rounded up) count as one entry against kMaxBatchEntries, so a batch stores at most
// 512 KiB through the apertures.
inline constexpr uint32_t kMaxBarStoreBytes = 256 * 1024;

// ATTACH's kind: who walks the space.
enum class SpaceKind : uint32_t {
  kChannel = 0,  // the GPU (a channel's address space): the host owns its tables
  kBar1 = 1,     // only the host, in software (the guest's BAR1 tables)
  kBar3 = 3,     // only the host, in software (the guest's BAR3 tables)
};

// What the host answers per op, in the batch header and in the PV registers.
enum class CallResult : uint32_t {
  kOk = 0,
  kNotRun = 1,
  kBadBatch = 2,
  kBadOp = 3,
  kOutOfTable = 4,
  kNotInVram = 5,
  kNotRegistered = 6,
  kConflict = 7,
  kForeignVram = 8,
  kForeignSysram = 9,
  kBadEntry = 10,
  kBusy = 11,
  kExhausted = 12,
  kNoArea = 13,
  kBadArea = 14,
  kNotMapped = 15,
};
inline constexpr uint32_t kResultCount = 16;

// "OK", "NOT_RUN", ... (docs/PARAVIRT.md's names); "UNKNOWN" past the table.
std::string_view CallResultName(CallResult result);

}  // namespace gpuvm::pv

#endif  // GPUVM_PV_PROTOCOL_H_
