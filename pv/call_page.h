// Batches of para-virtual calls (docs/PARAVIRT.md): the one place that builds them (the guest
// driver's BatchBuilder) and parses them (the host's DecodeBatch), and the checks of a page-table
// entry that need nothing but the VM's VRAM and RAM sizes (CheckPte, CheckPde).
//
// DecodeBatch parses bytes the host has already copied out of guest RAM (call_area.h): every field
// is untrusted, and it accepts only a batch whose header and every op are well formed — exactly the
// layout BatchBuilder writes (lengths exact, flags and reserved fields 0, counts within their op
// and the batch's limits). What a call means for the VM's tables is the host's business
// (aggregator/pv_tables.h); a structurally bad batch is refused whole.
//
// Threading: BatchBuilder is a value (one thread at a time); the functions are pure.
#ifndef GPUVM_PV_CALL_PAGE_H_
#define GPUVM_PV_CALL_PAGE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "pv/protocol.h"

namespace gpuvm::pv {

// Bytes an op takes in a batch (WRITE: with `count` entries; BAR_WRITE: with `count` bytes).
uint32_t OpBytes(Op op, uint32_t count = 0);
// What an aperture store of `bytes` counts against kMaxBatchEntries.
uint64_t BarStoreEntries(uint32_t bytes);

// ---- the guest's side ----

class BatchBuilder {
 public:
  // A batch that must fit `capacity` bytes (the call area).
  explicit BatchBuilder(size_t capacity);

  void Reset();
  bool empty() const { return ops_ == 0; }
  uint32_t ops() const { return ops_; }
  size_t bytes() const { return bytes_.size(); }
  uint64_t entries() const { return entries_; }
  // Whether one more op of `op_bytes` touching `entries` entries stays within the capacity and the
  // batch limits (kMaxOps, kMaxBatchEntries).
  bool Fits(uint32_t op_bytes, uint64_t entries) const;
  // The most entries one WRITE may carry in an empty batch of this capacity.
  uint32_t MaxWriteEntries() const;

  // Each appends one op (the caller checked Fits) and returns its offset in the batch, where the
  // host will write its result.
  uint32_t Attach(uint64_t directory, uint64_t limit, SpaceKind kind);
  uint32_t Detach(uint64_t directory);
  uint32_t Write(uint64_t space, uint64_t table, uint64_t first, std::span<const uint64_t> entries);
  uint32_t WriteLinear(uint64_t space, uint64_t table, uint64_t first, uint32_t count,
                       uint64_t value, uint64_t step);
  uint32_t Clear(uint64_t space, uint64_t table, uint64_t first, uint32_t count);
  uint32_t Flush(uint64_t space);
  // `bar` 1 or 3; `data`/`bytes` a multiple of 4 (at most kMaxBarStoreBytes).
  uint32_t BarWrite(uint32_t bar, uint64_t offset, std::span<const uint8_t> data);
  uint32_t BarFill(uint32_t bar, uint64_t offset, uint32_t bytes, uint32_t pattern);
  // One op exactly as another batch held it (its result field cleared), counting `entries`: a
  // call the host did not run, sent again.
  uint32_t Append(std::span<const uint8_t> op, uint64_t entries);

  // The whole batch, header filled in (op count, length, status and done 0).
  std::span<const uint8_t> Finish();

 private:
  uint32_t Begin(Op op, uint32_t length);
  // BAR_WRITE's and BAR_FILL's common fields.
  uint32_t BeginBarStore(Op op, uint32_t length, uint32_t bar, uint64_t offset, uint32_t bytes);
  void Put64(uint64_t v);
  void Put32(uint32_t v);

  size_t capacity_;
  std::vector<uint8_t> bytes_;
  uint32_t ops_ = 0;
  uint64_t entries_ = 0;
};

// The host's answer for the op at `op_offset` of a batch (as the guest reads it back from its
// area), and the header's status and done.
CallResult ResultAt(std::span<const uint8_t> batch, uint32_t op_offset);
CallResult BatchStatus(std::span<const uint8_t> batch);
uint32_t BatchDone(std::span<const uint8_t> batch);

// ---- the host's side ----

// One decoded op. Addresses are the guest's (VRAM addresses of directories and tables).
struct Call {
  Op op = Op::kFlush;
  uint32_t offset = 0;  // its op header's offset in the batch: where its result goes
  uint64_t space = 0;   // ATTACH/DETACH: the directory; the others: the space's directory
  uint64_t table = 0;   // WRITE, WRITE_LINEAR, CLEAR
  uint64_t first = 0;
  uint32_t count = 0;
  uint64_t limit = 0;                    // ATTACH
  SpaceKind kind = SpaceKind::kChannel;  // ATTACH
  uint64_t value = 0;                    // WRITE_LINEAR
  uint64_t step = 0;
  uint32_t entries_offset = 0;  // WRITE, BAR_WRITE: where its entries (bytes) start in the batch
  uint32_t bar = 0;             // BAR_WRITE, BAR_FILL: 1 or 3 (`first` the offset, `count` the
                                // bytes, `value` BAR_FILL's pattern)
};

// Entry `i` (< call.count) of a WRITE (read from `batch`, the bytes DecodeBatch was given),
// WRITE_LINEAR (value + i * step, modulo 2^64) or CLEAR (0).
uint64_t EntryOf(const Call& call, std::span<const uint8_t> batch, uint32_t i);

struct DecodedBatch {
  CallResult status = CallResult::kOk;  // kOk, kBadBatch (the header) or kBadOp
  int64_t bad_offset = -1;              // the op that is malformed (kBadOp), else -1
  std::vector<Call> calls;  // every op when ok; the well-formed ones before the bad one otherwise
  std::string error;        // what was wrong (for the VM's log)
};

// Whether a doorbell's length can be a batch of an area of `area_bytes`: at least a header, a
// multiple of 8, within the area. kOk or kBadBatch.
CallResult CheckBatchLength(uint64_t length, uint64_t area_bytes);

// Parses `batch` (exactly the doorbell's length of the host's copy).
DecodedBatch DecodeBatch(std::span<const uint8_t> batch);

// ---- entries, against nothing but the VM's sizes ----

struct VmExtent {
  uint64_t vram_bytes = 0;
  uint64_t ram_bytes = 0;
};

// A PTE mapping a page of `page_bytes` (4 KiB or the 128 KiB large page): kOk when absent or when
// it names VRAM inside the VM's VRAM or system memory inside its RAM (the low bits of a large
// page's address are ignored, as the GPU ignores them); kForeignVram, kForeignSysram, or kBadEntry
// (the invalid target, a storage kind other than linear, a compression tag).
CallResult CheckPte(uint64_t pte, uint64_t page_bytes, const VmExtent& vm);

// The tables one PDE names (guest VRAM addresses; bytes 0: none), as PT_SIZE sizes them.
struct PdeTables {
  uint64_t small = 0;
  uint64_t small_bytes = 0;
  uint64_t large = 0;
  uint64_t large_bytes = 0;
};
// A PDE of a directory: each table it names must be in VRAM (target VRAM, or none), inside the
// VM's VRAM; kOk (with *tables set) or kNotInVram.
CallResult CheckPde(uint64_t pde, const VmExtent& vm, PdeTables* tables);

}  // namespace gpuvm::pv

#endif  // GPUVM_PV_CALL_PAGE_H_
