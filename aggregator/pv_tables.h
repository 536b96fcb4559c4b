// The host side of para-virtualization (docs/PARAVIRT.md): one pv VM's address spaces and page
// tables as its calls built them, and the calls applied to them. The GPU walks a pv guest's own
// directories and tables (no shadow copy, no scan); this object is why that is safe:
//   - a channel space's directory and every table its PDEs name are **registered**: inside the
//     VM's VRAM, never overlapping another registered object of another place, size or kind, zeroed
//     by the host when registered, and written only here, with machine addresses (PDEs: the
//     tables' machine addresses; PTEs: relocated and validated by RelocatePte). The VM's other
//     paths to its VRAM (BAR1/BAR3 apertures, PRAMIN) refuse stores into them (Registered());
//   - a table no PDE names any more is unregistered only after the GPU's TLB for the directory was
//     flushed, so the GPU never walks memory the guest can write;
//   - a directory a bound channel uses cannot be detached (BUSY);
//   - BAR spaces (walked only in software by the aggregator, which validates every PTE there) get
//     the guest's own entries, checked, never into a registered table.
// Every call is validated completely before anything of it is written: a call is all or nothing.
//
// The VM's VRAM must be one static slice (the GPU walks its tables as contiguous machine memory;
// FullVirtGpu gives pv VMs one): machine = VramMap::Lookup(guest).
//
// Threading: the aggregator's owner thread only (as FullVirtGpu).
#ifndef GPUVM_AGGREGATOR_PV_TABLES_H_
#define GPUVM_AGGREGATOR_PV_TABLES_H_

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>

#include "aggregator/shadow_page_table.h"
#include "aggregator/vram_map.h"
#include "pv/call_page.h"

namespace gpuvm::aggregator {

struct PvTableCounters {
  uint64_t calls = 0;              // calls applied
  uint64_t refused = 0;            // calls refused by validation
  uint64_t entries_written = 0;    // PDEs and PTEs stored
  uint64_t tables_registered = 0;  // tables (and channel directories) registered, in all
  uint64_t tables_released = 0;    // ... and unregistered again
  uint64_t tlb_flushes = 0;        // the host's flushes: FLUSH calls and releases
  // Spaces a new driver instance's registration released (ReleaseUnused): left by the last program.
  uint64_t spaces_released_for_new_driver = 0;
};

class PvTables {
 public:
  struct Hooks {
    // Flush the GPU's TLB for the directory at machine address `machine_pd`.
    std::function<void(uint64_t machine_pd)> flush_tlb;
    // Whether a bound channel uses the channel directory at guest address `guest_pd`.
    std::function<bool(uint64_t guest_pd)> directory_in_use;
    // The guest's BAR1/BAR3 tables changed or were flushed: cached translations are stale.
    std::function<void()> bar_tables_changed;
    // BAR_WRITE / BAR_FILL (`call.bar`, `call.first` the offset, `call.count` the bytes;
    // BAR_WRITE's bytes in `batch`): validate the whole store as a trapped one would be translated,
    // then apply it; kOk, or kNotMapped with nothing stored. None: every aperture store is refused.
    std::function<pv::CallResult(const pv::Call& call, std::span<const uint8_t> batch)>
        aperture_store;
  };

  // `vram` (the VM's static slice) must outlive this object.
  PvTables(VramMap* vram, Hooks hooks) : vram_(vram), hooks_(std::move(hooks)) {}
  ~PvTables();
  PvTables(const PvTables&) = delete;
  PvTables& operator=(const PvTables&) = delete;

  // Validates and applies one call decoded from `batch` (the host's copy). `layout`: the VM's
  // memory (its VramMap, SYSRAM window and RAM size) as RelocatePte needs it.
  pv::CallResult Apply(const pv::Call& call, std::span<const uint8_t> batch,
                       const VmMemoryLayout& layout);

  // The machine address of the registered channel directory at guest address `guest_pd`, or 0.
  uint64_t ChannelDirectory(uint64_t guest_pd) const;
  // Whether guest VRAM [address, address + length) overlaps a registered directory or table.
  bool Registered(uint64_t address, uint64_t length) const;
  // Unregisters everything (the TLB of every channel directory flushed first): the VM is going.
  void ReleaseAll();
  // A new driver instance in the VM registered its call area (a new program): every space the
  // last one left attached is detached as DETACH would, except channel directories a bound channel
  // still uses (they stay registered, with their tables, until that channel goes). Returns the
  // spaces released.
  size_t ReleaseUnused();

  size_t spaces() const { return spaces_.size(); }
  size_t registered_objects() const { return objects_.size(); }
  const PvTableCounters& counters() const { return counters_; }
  // Why the last refused call was refused (for the VM's log).
  const std::string& last_refusal() const { return last_refusal_; }

 private:
  enum class Kind : uint8_t { kDirectory, kSmall, kLarge };
  struct Object {
    uint64_t bytes = 0;
    Kind kind = Kind::kSmall;
    uint32_t refs = 0;  // tables: PDEs naming it (in any space); directories: 1
  };
  struct Space {
    pv::SpaceKind kind = pv::SpaceKind::kChannel;
    uint64_t limit = 0;
    uint64_t entries = 0;  // of its directory
    // Channel spaces: the tables each PDE names (guest addresses), by PDE index.
    std::map<uint32_t, pv::PdeTables> pdes;
  };

  pv::CallResult Refuse(pv::CallResult code, std::string why);
  pv::CallResult Attach(const pv::Call& call, const VmMemoryLayout& layout);
  pv::CallResult Detach(const pv::Call& call);
  pv::CallResult WriteDirectory(Space& space, const pv::Call& call, std::span<const uint8_t> batch,
                                const VmMemoryLayout& layout);
  pv::CallResult WriteTable(Space& space, const pv::Call& call, std::span<const uint8_t> batch,
                            const VmMemoryLayout& layout);
  pv::CallResult WriteBarTable(Space& space, const pv::Call& call, std::span<const uint8_t> batch,
                               const VmMemoryLayout& layout);
  // The registered object overlapping [address, address + bytes), or objects_.end().
  std::map<uint64_t, Object>::const_iterator Overlapping(uint64_t address, uint64_t bytes) const;
  // Adds a reference to the table (registering and zeroing it when new).
  void Reference(uint64_t address, uint64_t bytes, Kind kind);
  // Drops a reference; true when the table is no longer registered.
  bool Unreference(uint64_t address);
  // Whether some PDE of `space` names the table at `address`.
  static bool Names(const Space& space, uint64_t address, Kind* kind);
  void Zero(uint64_t address, uint64_t bytes);
  void FlushDirectory(uint64_t guest_pd);

  VramMap* const vram_;
  const Hooks hooks_;
  std::map<uint64_t, Space> spaces_;    // by directory (guest VRAM address)
  std::map<uint64_t, Object> objects_;  // registered directories and tables, by guest address
  PvTableCounters counters_;
  std::string last_refusal_;
};

}  // namespace gpuvm::aggregator

#endif  // GPUVM_AGGREGATOR_PV_TABLES_H_
