// The software GPU's physical memory: VRAM and the resolution of a (target, physical address) pair
// to host bytes in VRAM or, through the SYSRAM port, in host memory. Also the word-access helpers
// every unit uses on memory the driver can write concurrently.
//
// VRAM is one fixed range of our address space (the view every unit reads through). By default it
// is backed by a private memfd, sealed against resizing, which is never handed to anyone; ranges of
// the view can be backed by another memfd instead (Back) and given back to VRAM's own memory,
// zeroed (Restore) — full virtualization stitches each VM's VRAM pages from that VM's own memfd
// this way, so BAR remap can hand a guest its own pages and nothing else (docs/
// FULL-VIRTUALIZATION.md, "BAR remap"). Or VRAM is a shared mapping of a file the operator names,
// e.g. a PCI BAR's sysfs resourceN file, so the VRAM is at machine addresses a hypervisor can map
// into guests page by page (BAR remap on Xen, docs/XEN-TESTBED.md); such VRAM cannot be re-backed.
//
// Threading: Vram and PhysicalMemory are immutable after creation except for Back/Restore, which
// one thread (the aggregator's) calls; all methods are thread-safe. Back/Restore replace the
// mapping in place (MAP_FIXED, under the kernel's mmap lock): an access racing with them on the
// same range sees the old or the new backing, never a hole; callers make sure nobody uses a range
// whose owner changes. The bytes themselves are shared with drivers and engines without locks, as
// on hardware: aligned 32/64-bit words are read and written atomically (no tearing), anything
// larger is a plain copy.
#ifndef GPUVM_GPU_SIM_MEMORY_H_
#define GPUVM_GPU_SIM_MEMORY_H_

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "gpu/device.h"
#include "gpu/hw/vm.h"

namespace gpuvm::sim {

class Vram {
 public:
  // `size` must be a non-zero multiple of 4 KiB and at most 2^40. The memfd is sized but not
  // touched, so an unused VRAM costs no resident memory.
  static Result<std::unique_ptr<Vram>> Create(uint64_t size);
  // VRAM in the first `size` bytes of the file at `path` (same size rules), mapped shared and
  // zeroed: a regular file, or a device's memory such as /sys/bus/pci/devices/BDF/resource2. The
  // file must be at least `size` long; it is never resized. fd() is then that file (not a memfd).
  static Result<std::unique_ptr<Vram>> Open(const std::string& path, uint64_t size);
  ~Vram();
  Vram(const Vram&) = delete;
  Vram& operator=(const Vram&) = delete;

  uint64_t size() const { return size_; }
  // VRAM's own memory: the private memfd of Create() (never to be handed out: it holds every
  // page nobody re-backed, the reserved structures of full virtualization included), or the file of
  // Open().
  int fd() const { return fd_; }
  // Host bytes of [address, address + length), or nullptr if any of it lies outside VRAM.
  uint8_t* At(uint64_t address, uint64_t length) const {
    return (address <= size_ && length <= size_ - address) ? base_ + address : nullptr;
  }
  // The whole view.
  uint8_t* data() const { return base_; }

  // Whether Back/Restore work: VRAM of Create(); not a file's (its pages are machine frames).
  bool rebindable() const { return rebindable_; }
  // From now on the whole pages [address, address + length) of VRAM are the pages of `fd` at
  // `offset` (a memfd or any shared-mappable file; the view keeps its own reference, the caller may
  // close `fd`). Meant for a range that shows VRAM's own memory, which stays hidden, not freed
  // (Restore zeroes it). InvalidArgument for a range that is not whole pages inside VRAM,
  // FailedPrecondition when not rebindable(); after an mmap error (e.g. the process's map count
  // is full) the range shows VRAM's own memory. The backing's pages are populated at once, for
  // write as Prefault does: the engine threads would otherwise take a fault per 4 KiB page at first
  // touch — under nested paging ~30 us each, a tenth of a compute-bound benchmark's time — where
  // one call now maps them all. populate = false is for a range the owner may use only in part (a
  // VM's static VRAM slice, most of which a program never touches; a chunk fv assigns because a
  // PTE names it, which the GPU may never reach): nothing is mapped now, and the range's prefault bits are cleared, so the MMU
  // brings its blocks in as the GPU first reaches them (Prefault) and the CPU faults in what it
  // touches — instead of allocating and zeroing all of it up front.
  Status Back(uint64_t address, uint64_t length, int fd, uint64_t offset, bool populate = true);
  // The pages are VRAM's own memory again, zeroed (punched); the file that backed them no longer
  // reaches VRAM. On error (the mmap failed) the range may still be backed by that file: the caller
  // must not hand those pages to anyone else.
  Status Restore(uint64_t address, uint64_t length);

  // Brings in the kPrefaultBlock of VRAM holding `address`, the first time a translation reaches
  // it (the MMU calls this on a TLB miss that resolves to VRAM): real VRAM is simply there, and
  // without this the engine threads would take a page fault per 4 KiB page at first touch — on a
  // nested-paging host ~30 us each, a tenth of a compute-bound kernel's time. One madvise maps the
  // block, populated for write: VRAM is the GPU's working memory, almost always first reached by a
  // copy or a kernel storing into it, and a page mapped for read pays a dirty-bit update at its
  // first store (PopulatePages in base/os.h). Each block is tried once per mapping of it (a
  // lock-free bit, cleared when Back(populate = false) or Restore puts other pages there); the bits
  // only save system calls, correctness never depends on them. No-op for VRAM in a file (device
  // memory). Thread-safe.
  void Prefault(uint64_t address);
  static constexpr uint64_t kPrefaultBlock = 128 << 10;  // the GPU's large page
  uint64_t prefaulted_blocks() const { return prefaulted_.load(std::memory_order_relaxed); }

 private:
  Vram(int fd, uint8_t* base, uint64_t size, bool rebindable)
      : fd_(fd),
        base_(base),
        size_(size),
        rebindable_(rebindable),
        tried_((size / kPrefaultBlock + 63) / 64) {}
  Status CheckRange(uint64_t address, uint64_t length) const;
  // Clears the prefault bits of every block [address, address + length) touches.
  void ForgetPrefaults(uint64_t address, uint64_t length);
  int fd_;
  uint8_t* base_;
  uint64_t size_;
  bool rebindable_;
  std::vector<std::atomic<uint64_t>> tried_;  // one bit per kPrefaultBlock
  std::atomic<uint64_t> prefaulted_{0};
};

// Where physical addresses lead: VRAM, or host memory through the SYSRAM port (may be null: then
// every SYSRAM access fails).
class PhysicalMemory {
 public:
  PhysicalMemory(Vram* vram, gpu::HostMemory* host) : vram_(vram), host_(host) {}
  // `write`: the direction of the access this resolution is for, a hint to host memory that comes
  // in at first use (gpu::HostMemory::TranslateFor).
  uint8_t* Resolve(gf100::vm::Target target, uint64_t address, uint64_t length,
                   bool write = false) const {
    switch (target) {
      case gf100::vm::Target::kVram:
        return vram_->At(address, length);
      case gf100::vm::Target::kSysramSnooped:
      case gf100::vm::Target::kSysramNoSnoop:
        return host_ != nullptr ? host_->TranslateFor(address, length, write) : nullptr;
      case gf100::vm::Target::kInvalid:
        break;
    }
    return nullptr;
  }
  Vram* vram() const { return vram_; }

 private:
  Vram* vram_;
  gpu::HostMemory* host_;
};

// Word access to shared memory. Aligned words use relaxed atomics so a concurrent writer never
// produces a torn value and the compiler never invents or elides accesses; unaligned ones fall back
// to memcpy.
template <typename T>
inline T LoadWord(const uint8_t* p) {
  if ((reinterpret_cast<uintptr_t>(p) & (sizeof(T) - 1)) == 0) {
    return __atomic_load_n(reinterpret_cast<const T*>(p), __ATOMIC_RELAXED);
  }
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename T>
inline void StoreWord(uint8_t* p, T v) {
  if ((reinterpret_cast<uintptr_t>(p) & (sizeof(T) - 1)) == 0) {
    __atomic_store_n(reinterpret_cast<T*>(p), v, __ATOMIC_RELAXED);
  } else {
    std::memcpy(p, &v, sizeof v);
  }
}
inline uint32_t Load32(const uint8_t* p) { return LoadWord<uint32_t>(p); }
inline uint64_t Load64(const uint8_t* p) { return LoadWord<uint64_t>(p); }
inline void Store32(uint8_t* p, uint32_t v) { StoreWord(p, v); }
inline void Store64(uint8_t* p, uint64_t v) { StoreWord(p, v); }

// A load/store of 1, 2, 4 or 8 bytes (little-endian, like the GPU and x86); other sizes are copied.
inline uint64_t LoadN(const uint8_t* p, unsigned n) {
  switch (n) {
    case 1:
      return LoadWord<uint8_t>(p);
    case 2:
      return LoadWord<uint16_t>(p);
    case 4:
      return LoadWord<uint32_t>(p);
    case 8:
      return LoadWord<uint64_t>(p);
  }
  uint64_t v = 0;
  std::memcpy(&v, p, n);
  return v;
}
inline void StoreN(uint8_t* p, unsigned n, uint64_t v) {
  switch (n) {
    case 1:
      return StoreWord(p, uint8_t(v));
    case 2:
      return StoreWord(p, uint16_t(v));
    case 4:
      return StoreWord(p, uint32_t(v));
    case 8:
      return StoreWord(p, v);
  }
  std::memcpy(p, &v, n);
}

}  // namespace gpuvm::sim

#endif  // GPUVM_GPU_SIM_MEMORY_H_
