// The seam through which GPU page-table updates reach the GPU. The driver's address-space code
// (vm_space.h) decides WHAT to write — which tables exist, which PDE/PTE values go where, when the
// TLB must forget — and hands it to a PageTableWriter, which decides HOW it reaches the device:
//
//   - native (NativePageTableWriter, below): entries are stored into the tables through their BAR3
//     mapping (instance memory), and the TLB is flushed by MMIO with nouveau's 0x100c80 handshake.
//     This is the "unmodified" path used natively, in pass-through and in full virtualization,
//     where the hypervisor traps those BAR3 writes and 0x100cb8/0x100cbc.
//   - para-virtual (PvPageTableWriter, pv_calls.h): the same calls become operations in the call
//     page (ATTACH, WRITE, WRITE_LINEAR, CLEAR, FLUSH, DETACH) that the host validates and applies,
//     a doorbell per call (pv-naive) or per batch (pv-multicall); docs/PARAVIRT.md. The driver
//     installs it itself when the device offers it (DriverOptions::para_virtual).
//
// Tables are named by their VRAM address (what the GPU and a para-virtual host see) and, for the
// native path, their BAR3 offset. Entries are 64-bit values in gpu/hw/vm.h formats.
//
// Threading: the driver serializes calls per address space, but calls for different spaces may
// come from different threads at once; implementations must be thread-safe.
#ifndef GPUVM_GUEST_PV_DRIVER_PAGE_TABLE_WRITER_H_
#define GPUVM_GUEST_PV_DRIVER_PAGE_TABLE_WRITER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"

namespace gpuvm::guest {

class Bus;

// Who walks an address space: the GPU for a context's channels, or only the CPU through an
// aperture (BAR1, BAR3). The native path does not care; a para-virtual host treats them apart
// (docs/PARAVIRT.md, "BAR spaces").
enum class SpaceKind : uint8_t { kChannel, kBar1, kBar3 };

// One page directory or page table in instance memory.
struct PageTableRef {
  uint64_t vram = 0;                     // VRAM address of the table's first entry
  uint64_t bar3_offset = 0;              // where the table is mapped in BAR3 (native path)
  uint64_t entries = 0;                  // size in entries
  SpaceKind kind = SpaceKind::kChannel;  // of a directory: its space's
};

class PageTableWriter {
 public:
  virtual ~PageTableWriter() = default;

  // A new address space whose page directory is `directory`, covering [0, limit]. A para-virtual
  // writer registers it with the host ("set PD"); the native one has nothing to do.
  virtual Status AttachSpace(const PageTableRef& directory, uint64_t limit) = 0;
  // The space is gone (its tables are about to be freed).
  virtual Status DetachSpace(const PageTableRef& directory) = 0;

  // Stores `entries` into `table` (a directory of `space`, or one of its page tables) from entry
  // `first` on. first + entries.size() <= table.entries (the caller checks).
  virtual Status WriteEntries(const PageTableRef& space, const PageTableRef& table, uint64_t first,
                              std::span<const uint64_t> entries) = 0;
  // Stores `count` invalid (zero) entries from entry `first` on (unmapping; same bounds). The
  // default writes zeros with WriteEntries.
  virtual Status ClearEntries(const PageTableRef& space, const PageTableRef& table, uint64_t first,
                              uint64_t count) {
    const std::vector<uint64_t> zeros(count, 0);
    return WriteEntries(space, table, first, zeros);
  }

  // Makes the GPU forget cached translations of `space` (after entries were changed or removed).
  virtual Status Flush(const PageTableRef& space) = 0;

  // The device is about to act on the tables (the driver is submitting work): whatever was handed
  // over must be in effect. Returns the error of any earlier call the device refused and did not
  // report then (a para-virtual writer that batches, pv_calls.h); OK natively.
  virtual Status Commit() { return Status::Ok(); }

  // Whether a channel space's directory and tables come out zeroed without the driver clearing
  // them (a para-virtual host zeroes what it registers): the driver then skips its own fill.
  virtual bool ZeroesChannelTables() const { return false; }
};

// Builds the writer a Driver uses; gets the driver's Bus. Empty in DriverOptions means native.
using PageTableWriterFactory = std::function<Result<std::unique_ptr<PageTableWriter>>(Bus* bus)>;

}  // namespace gpuvm::guest

#endif  // GPUVM_GUEST_PV_DRIVER_PAGE_TABLE_WRITER_H_
