#include "aggregator/pv_tables.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "gpu/hw/vm.h"

namespace gpuvm::aggregator {

namespace vm = gf100::vm;
using pv::CallResult;

namespace {

constexpr int kLargePageShift = vm::kLargePageShift128K;
constexpr uint64_t kDirectoryEntries = vm::kPdeCount(kLargePageShift);

bool Inside(uint64_t address, uint64_t length, uint64_t size) {
  return length <= size && address <= size - length;
}

// first + count <= entries, without overflow.
bool WithinTable(uint64_t first, uint64_t count, uint64_t entries) {
  return first <= entries && count <= entries - first;
}

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

PvTables::~PvTables() = default;

CallResult PvTables::Refuse(CallResult code, std::string why) {
  ++counters_.refused;
  last_refusal_ = std::string(pv::CallResultName(code)) + ": " + why;
  return code;
}

uint64_t PvTables::ChannelDirectory(uint64_t guest_pd) const {
  auto it = spaces_.find(guest_pd);
  if (it == spaces_.end() || it->second.kind != pv::SpaceKind::kChannel) return 0;
  return vram_->Lookup(guest_pd);
}

std::map<uint64_t, PvTables::Object>::const_iterator PvTables::Overlapping(uint64_t address,
                                                                           uint64_t bytes) const {
  // Objects never overlap each other, so only the last one starting below the end can.
  auto it = objects_.lower_bound(address + bytes);
  if (it == objects_.begin()) return objects_.end();
  --it;
  return it->first + it->second.bytes > address ? it : objects_.end();
}

bool PvTables::Registered(uint64_t address, uint64_t length) const {
  return length != 0 && Overlapping(address, length) != objects_.end();
}

void PvTables::Zero(uint64_t address, uint64_t bytes) {
  static const std::vector<uint8_t> kZeros(64 << 10, 0);
  for (uint64_t at = 0; at < bytes;) {
    const uint64_t n = std::min<uint64_t>(kZeros.size(), bytes - at);
    vram_->Write(address + at, kZeros.data(), n);
    at += n;
  }
}

void PvTables::Reference(uint64_t address, uint64_t bytes, Kind kind) {
  if (bytes == 0) return;
  auto it = objects_.find(address);
  if (it != objects_.end()) {
    ++it->second.refs;
    return;
  }
  objects_[address] = {bytes, kind, 1};
  Zero(address, bytes);  // garbage the guest left there must never be walked as machine entries
  ++counters_.tables_registered;
}

bool PvTables::Unreference(uint64_t address) {
  auto it = objects_.find(address);
  if (it == objects_.end() || --it->second.refs != 0) return false;
  objects_.erase(it);
  ++counters_.tables_released;
  return true;
}

void PvTables::FlushDirectory(uint64_t guest_pd) {
  ++counters_.tlb_flushes;
  if (hooks_.flush_tlb) hooks_.flush_tlb(vram_->Lookup(guest_pd));
}

CallResult PvTables::Apply(const pv::Call& call, std::span<const uint8_t> batch,
                           const VmMemoryLayout& layout) {
  CallResult r = CallResult::kOk;
  switch (call.op) {
    case pv::Op::kAttach:
      r = Attach(call, layout);
      break;
    case pv::Op::kDetach:
      r = Detach(call);
      break;
    case pv::Op::kFlush: {
      auto it = spaces_.find(call.space);
      if (it == spaces_.end()) {
        r = Refuse(CallResult::kNotRegistered, "FLUSH of " + Hex(call.space) + ": no such space");
      } else if (it->second.kind == pv::SpaceKind::kChannel) {
        FlushDirectory(call.space);
      } else if (hooks_.bar_tables_changed) {
        hooks_.bar_tables_changed();
      }
      break;
    }
    case pv::Op::kWrite:
    case pv::Op::kWriteLinear:
    case pv::Op::kClear: {
      auto it = spaces_.find(call.space);
      if (it == spaces_.end()) {
        r = Refuse(CallResult::kNotRegistered,
                   "a write into space " + Hex(call.space) + ": no such space");
      } else if (it->second.kind != pv::SpaceKind::kChannel) {
        r = WriteBarTable(it->second, call, batch, layout);
      } else if (call.table == call.space) {
        r = WriteDirectory(it->second, call, batch, layout);
      } else {
        r = WriteTable(it->second, call, batch, layout);
      }
      break;
    }
    case pv::Op::kBarWrite:
    case pv::Op::kBarFill:
      r = hooks_.aperture_store ? hooks_.aperture_store(call, batch) : CallResult::kNotMapped;
      if (r != CallResult::kOk) {
        r = Refuse(r, std::string(call.op == pv::Op::kBarWrite ? "BAR_WRITE" : "BAR_FILL") +
                          " of " + std::to_string(call.count) + " bytes at BAR" +
                          std::to_string(call.bar) + " + " + Hex(call.first) +
                          ": not all of it maps the VM's own memory outside its registered tables");
      }
      break;
  }
  if (r == CallResult::kOk) ++counters_.calls;
  return r;
}

CallResult PvTables::Attach(const pv::Call& call, const VmMemoryLayout& layout) {
  const uint64_t pd = call.space;
  if (spaces_.count(pd) != 0) {
    return Refuse(CallResult::kConflict, "ATTACH of " + Hex(pd) + ": already attached");
  }
  if (spaces_.size() >= pv::kMaxSpaces) {
    return Refuse(CallResult::kExhausted,
                  "ATTACH: more than " + std::to_string(pv::kMaxSpaces) + " spaces");
  }
  Space space;
  space.kind = call.kind;
  space.limit = call.limit;
  // A channel directory is always whole: the GPU walks any PDE the channel's limit (the guest's)
  // allows. A BAR directory as far as its limit (the host's software walk stops there), in whole
  // pages (instance memory is allocated so).
  const uint64_t bar_pdes = (call.limit >> vm::kPdeShift(kLargePageShift)) + 1;
  space.entries = call.kind == pv::SpaceKind::kChannel
                      ? kDirectoryEntries
                      : (bar_pdes * vm::kEntrySize + vm::kSmallPageSize - 1) / vm::kSmallPageSize *
                            vm::kSmallPageSize / vm::kEntrySize;
  const uint64_t bytes = space.entries * vm::kEntrySize;
  if (!Inside(pd, bytes, layout.vram_bytes)) {
    return Refuse(CallResult::kNotInVram, "ATTACH: the directory " + Hex(pd) + " (" +
                                              std::to_string(bytes) +
                                              " bytes) is not inside the VM's VRAM");
  }
  if (auto o = Overlapping(pd, bytes); o != objects_.end()) {
    return Refuse(CallResult::kConflict, "ATTACH: the directory " + Hex(pd) +
                                             " overlaps the registered table at " + Hex(o->first));
  }
  if (call.kind == pv::SpaceKind::kChannel) {
    if (objects_.size() >= pv::kMaxTables) {
      return Refuse(CallResult::kExhausted,
                    "ATTACH: more than " + std::to_string(pv::kMaxTables) + " registered tables");
    }
    Reference(pd, bytes, Kind::kDirectory);
  } else if (hooks_.bar_tables_changed) {
    hooks_.bar_tables_changed();
  }
  spaces_[pd] = std::move(space);
  return CallResult::kOk;
}

CallResult PvTables::Detach(const pv::Call& call) {
  auto it = spaces_.find(call.space);
  if (it == spaces_.end()) {
    return Refuse(CallResult::kNotRegistered, "DETACH of " + Hex(call.space) + ": no such space");
  }
  if (it->second.kind != pv::SpaceKind::kChannel) {
    spaces_.erase(it);
    if (hooks_.bar_tables_changed) hooks_.bar_tables_changed();
    return CallResult::kOk;
  }
  if (hooks_.directory_in_use && hooks_.directory_in_use(call.space)) {
    return Refuse(CallResult::kBusy,
                  "DETACH of " + Hex(call.space) + ": a bound channel still uses it");
  }
  // The GPU forgets the space before any of its memory becomes the guest's to write again.
  FlushDirectory(call.space);
  for (const auto& [index, t] : it->second.pdes) {
    if (t.small_bytes != 0) Unreference(t.small);
    if (t.large_bytes != 0) Unreference(t.large);
  }
  Unreference(call.space);
  spaces_.erase(it);
  return CallResult::kOk;
}

CallResult PvTables::WriteDirectory(Space& space, const pv::Call& call,
                                    std::span<const uint8_t> batch, const VmMemoryLayout& layout) {
  const uint64_t pd = call.space;
  if (!WithinTable(call.first, call.count, space.entries)) {
    return Refuse(CallResult::kOutOfTable, "PDEs " + std::to_string(call.first) + "+" +
                                               std::to_string(call.count) + " of a directory of " +
                                               std::to_string(space.entries));
  }
  const pv::VmExtent extent{layout.vram_bytes, layout.ram_bytes};
  std::vector<pv::PdeTables> tables(call.count);
  std::vector<uint64_t> guest(call.count);
  // Tables this call registers (not registered yet), to check them against each other too.
  std::map<uint64_t, std::pair<uint64_t, Kind>> pending;
  auto check = [&](uint64_t address, uint64_t bytes, Kind kind) -> CallResult {
    if (bytes == 0) return CallResult::kOk;
    if (auto o = Overlapping(address, bytes); o != objects_.end()) {
      if (o->first == address && o->second.bytes == bytes && o->second.kind == kind) {
        return CallResult::kOk;  // shared with other PDEs (of this or another space)
      }
      return Refuse(CallResult::kConflict,
                    "a table at " + Hex(address) + " (" + std::to_string(bytes) +
                        " bytes) overlaps the registered object at " + Hex(o->first));
    }
    auto p = pending.lower_bound(address + bytes);
    if (p != pending.begin()) {
      --p;
      if (p->first + p->second.first > address) {
        if (p->first == address && p->second == std::make_pair(bytes, kind)) return CallResult::kOk;
        return Refuse(CallResult::kConflict,
                      "tables at " + Hex(address) + " and " + Hex(p->first) + " overlap");
      }
    }
    pending[address] = {bytes, kind};
    return CallResult::kOk;
  };
  for (uint32_t i = 0; i < call.count; ++i) {
    guest[i] = pv::EntryOf(call, batch, i);
    const CallResult r = pv::CheckPde(guest[i], extent, &tables[i]);
    if (r != CallResult::kOk) {
      return Refuse(r, "PDE " + std::to_string(call.first + i) + " = " + Hex(guest[i]) +
                           " names a table outside the VM's VRAM");
    }
    CallResult c = check(tables[i].small, tables[i].small_bytes, Kind::kSmall);
    if (c == CallResult::kOk) c = check(tables[i].large, tables[i].large_bytes, Kind::kLarge);
    if (c != CallResult::kOk) return c;
  }
  if (objects_.size() + pending.size() > pv::kMaxTables) {
    return Refuse(CallResult::kExhausted,
                  "more than " + std::to_string(pv::kMaxTables) + " registered tables");
  }
  // Valid: new tables registered (zeroed) before any PDE names them, the PDEs written with machine
  // addresses, then the tables no PDE names any more released — after the GPU's TLB forgot them.
  std::vector<uint64_t> machine(call.count);
  std::vector<pv::PdeTables> old(call.count);
  for (uint32_t i = 0; i < call.count; ++i) {
    const pv::PdeTables& t = tables[i];
    Reference(t.small, t.small_bytes, Kind::kSmall);
    Reference(t.large, t.large_bytes, Kind::kLarge);
    const uint64_t g = guest[i];
    machine[i] = vm::pde::Make(vm::pde::LargeTarget(g), t.large_bytes ? vram_->Lookup(t.large) : 0,
                               vm::pde::SmallTarget(g), t.small_bytes ? vram_->Lookup(t.small) : 0,
                               vm::pde::PtSize(g)) |
                 (g & (vm::pde::kSmallVol | vm::pde::kLargeVol));
    const uint32_t index = uint32_t(call.first + i);
    auto it = space.pdes.find(index);
    if (it != space.pdes.end()) {
      old[i] = it->second;
      space.pdes.erase(it);
    }
    if (t.small_bytes != 0 || t.large_bytes != 0) space.pdes[index] = t;
  }
  vram_->Write(pd + call.first * vm::kEntrySize, machine.data(), machine.size() * vm::kEntrySize);
  counters_.entries_written += call.count;
  bool released = false;
  for (const pv::PdeTables& t : old) {
    if (t.small_bytes != 0) released |= Unreference(t.small);
    if (t.large_bytes != 0) released |= Unreference(t.large);
  }
  // (Released tables are out of objects_ already, but this thread runs on before the guest can
  // write them: the flush happens first.)
  if (released) FlushDirectory(pd);
  return CallResult::kOk;
}

bool PvTables::Names(const Space& space, uint64_t address, Kind* kind) {
  for (const auto& [index, t] : space.pdes) {
    if (t.small_bytes != 0 && t.small == address) {
      *kind = Kind::kSmall;
      return true;
    }
    if (t.large_bytes != 0 && t.large == address) {
      *kind = Kind::kLarge;
      return true;
    }
  }
  return false;
}

CallResult PvTables::WriteTable(Space& space, const pv::Call& call, std::span<const uint8_t> batch,
                                const VmMemoryLayout& layout) {
  Kind kind = Kind::kSmall;
  if (!Names(space, call.table, &kind)) {
    return Refuse(CallResult::kNotRegistered, "the table " + Hex(call.table) +
                                                  " is not one of space " + Hex(call.space) + "'s");
  }
  const Object& object = objects_.at(call.table);
  if (!WithinTable(call.first, call.count, object.bytes / vm::kEntrySize)) {
    return Refuse(CallResult::kOutOfTable, "entries " + std::to_string(call.first) + "+" +
                                               std::to_string(call.count) + " of a table of " +
                                               std::to_string(object.bytes / vm::kEntrySize));
  }
  const uint64_t page = kind == Kind::kSmall ? vm::kSmallPageSize : 1ull << kLargePageShift;
  const pv::VmExtent extent{layout.vram_bytes, layout.ram_bytes};
  std::vector<uint64_t> values(call.count);
  for (uint32_t i = 0; i < call.count; ++i) {
    const uint64_t e = pv::EntryOf(call, batch, i);
    CallResult r = pv::CheckPte(e, page, extent);
    RelocatedPte relocated;
    if (r == CallResult::kOk) {
      relocated = RelocatePte(e, page, layout);
      if (relocated.verdict == PteVerdict::kRejected) r = CallResult::kBadEntry;
    }
    if (r != CallResult::kOk) {
      return Refuse(r, "PTE " + std::to_string(call.first + i) + " = " + Hex(e) + " of table " +
                           Hex(call.table));
    }
    values[i] = relocated.value;
  }
  vram_->Write(call.table + call.first * vm::kEntrySize, values.data(),
               values.size() * vm::kEntrySize);
  counters_.entries_written += call.count;
  return CallResult::kOk;
}

CallResult PvTables::WriteBarTable(Space& space, const pv::Call& call,
                                   std::span<const uint8_t> batch, const VmMemoryLayout& layout) {
  const bool directory = call.table == call.space;
  if (directory && !WithinTable(call.first, call.count, space.entries)) {
    return Refuse(CallResult::kOutOfTable,
                  "PDEs " + std::to_string(call.first) + "+" + std::to_string(call.count) +
                      " of a BAR directory of " + std::to_string(space.entries));
  }
  // The guest's own entries into its own VRAM, as a BAR3 store would put them (the software walk
  // validates each again when it uses it) — never into a table the GPU walks.
  if (call.first > (uint64_t(1) << 40) / vm::kEntrySize) {
    return Refuse(CallResult::kNotInVram, "entries past the VM's VRAM");
  }
  const uint64_t at = call.table + call.first * vm::kEntrySize;
  const uint64_t bytes = uint64_t{call.count} * vm::kEntrySize;
  if (at < call.table || !Inside(at, bytes, layout.vram_bytes)) {
    return Refuse(CallResult::kNotInVram,
                  "BAR table entries at " + Hex(at) + " are not inside the VM's VRAM");
  }
  if (auto o = Overlapping(at, bytes); o != objects_.end()) {
    return Refuse(CallResult::kConflict, "BAR table entries at " + Hex(at) +
                                             " would overwrite the registered table at " +
                                             Hex(o->first));
  }
  const pv::VmExtent extent{layout.vram_bytes, layout.ram_bytes};
  std::vector<uint64_t> values(call.count);
  for (uint32_t i = 0; i < call.count; ++i) {
    values[i] = pv::EntryOf(call, batch, i);
    pv::PdeTables tables;
    const CallResult r = directory ? pv::CheckPde(values[i], extent, &tables)
                                   : pv::CheckPte(values[i], vm::kSmallPageSize, extent);
    if (r != CallResult::kOk) {
      return Refuse(r, std::string(directory ? "BAR PDE " : "BAR PTE ") +
                           std::to_string(call.first + i) + " = " + Hex(values[i]));
    }
  }
  vram_->Write(at, values.data(), bytes);
  counters_.entries_written += call.count;
  return CallResult::kOk;
}

size_t PvTables::ReleaseUnused() {
  std::vector<uint64_t> unused;
  for (const auto& [pd, space] : spaces_) {
    const bool in_use = space.kind == pv::SpaceKind::kChannel && hooks_.directory_in_use &&
                        hooks_.directory_in_use(pd);
    if (!in_use) unused.push_back(pd);
  }
  for (uint64_t pd : unused) {
    pv::Call call;
    call.op = pv::Op::kDetach;
    call.space = pd;
    (void)Detach(call);  // cannot be refused: the space exists and nothing binds it
  }
  counters_.spaces_released_for_new_driver += unused.size();
  return unused.size();
}

void PvTables::ReleaseAll() {
  for (const auto& [pd, space] : spaces_) {
    if (space.kind == pv::SpaceKind::kChannel) FlushDirectory(pd);
  }
  counters_.tables_released += objects_.size();
  spaces_.clear();
  objects_.clear();
  if (hooks_.bar_tables_changed) hooks_.bar_tables_changed();
}

}  // namespace gpuvm::aggregator
