// Port: a domain's guest physical memory, seen from dom0 (the device model, the aggregator,
// backends).
//
// Xen maps guest frames through libxenforeignmemory; the local backend maps the VM process's RAM
// memfd. Every access is bounds-checked against the domain's frames: an address the guest hands us
// (a rep buffer, a ring, a page table) is hostile until it has been checked here.
//
// Threading: a GuestMemory may be used from any thread. The guest can change its memory at any
// moment, so callers copy what they read before validating it (CONTRIBUTING.md, "Code"). A
// GuestMapping belongs to one owner.
#ifndef GPUVM_HYPERVISOR_GUEST_MEMORY_H_
#define GPUVM_HYPERVISOR_GUEST_MEMORY_H_

#include <cstdint>
#include <memory>
#include <span>

#include "base/status.h"
#include "hypervisor/types.h"

namespace gpuvm::hv {

// A contiguous view of guest frames in our address space; unmapped when destroyed.
class GuestMapping {
 public:
  virtual ~GuestMapping() = default;
  virtual std::span<uint8_t> bytes() = 0;
};

class GuestMemory {
 public:
  virtual ~GuestMemory() = default;

  virtual DomainId domain() const = 0;
  // Frames [0, frame_count()) exist; everything else is out of range.
  virtual uint64_t frame_count() const = 0;

  // Maps `count` frames starting at `first`. OutOfRange when any frame is past frame_count() (or
  // the range overflows), InvalidArgument for count 0.
  virtual Result<std::unique_ptr<GuestMapping>> Map(Gfn first, uint64_t count, Access access) = 0;

  // Copies between guest physical memory and our buffers; any alignment, may span frames. The whole
  // range is checked before anything is copied.
  virtual Status Read(uint64_t gpa, std::span<uint8_t> out);
  virtual Status Write(uint64_t gpa, std::span<const uint8_t> in);

 protected:
  // OK when [gpa, gpa + length) lies inside the domain's memory.
  Status CheckRange(uint64_t gpa, uint64_t length) const;
};

}  // namespace gpuvm::hv

#endif  // GPUVM_HYPERVISOR_GUEST_MEMORY_H_
