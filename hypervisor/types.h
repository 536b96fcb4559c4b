// Vocabulary of the hypervisor port: domains, guest frames, PCI addresses and the I/O request a
// trapped guest access becomes. These are OUR types; each backend translates its hypervisor's
// structures (Xen's ioreq_t, grant entries, ...) into them at its edge (CONTRIBUTING.md, "Code").
//
// Threading: plain values.
#ifndef GPUVM_HYPERVISOR_TYPES_H_
#define GPUVM_HYPERVISOR_TYPES_H_

#include <cstdint>
#include <string>

#include "base/hex.h"
#include "base/status.h"

namespace gpuvm::hv {

using DomainId = uint16_t;
// dom0: the control domain, where gpuvm-dm, the aggregator and the backends run.
inline constexpr DomainId kControlDomain = 0;

// Guest frame number: guest physical address >> kPageShift.
using Gfn = uint64_t;
inline constexpr uint32_t kPageShift = 12;
inline constexpr uint64_t kPageSize = uint64_t{1} << kPageShift;

enum class Access : uint8_t { kReadOnly, kReadWrite };

// A PCI function address: segment, bus, device (slot), function.
struct Sbdf {
  uint16_t segment = 0;
  uint8_t bus = 0;
  uint8_t device = 0;    // 0..31
  uint8_t function = 0;  // 0..7

  // "ssss:bb:dd.f"
  std::string ToString() const;
  // Parses "ssss:bb:dd.f" or "bb:dd.f" (segment 0).
  static Result<Sbdf> Parse(std::string_view text);
  bool valid() const { return device < 32 && function < 8; }
  friend bool operator==(const Sbdf&, const Sbdf&) = default;
};

// Which address space a trapped access targets.
enum class IoSpace : uint8_t {
  kMmio,        // guest physical memory address inside a claimed range
  kPciConfig,   // configuration space of a claimed PCI function (IoRequest::sbdf + addr = offset)
  kPort,        // x86 I/O port
  kTimeOffset,  // Xen housekeeping broadcast: guest RTC offset changed (no device access)
  kInvalidate,  // Xen housekeeping broadcast: drop cached guest mappings (no device access)
  kUnknown,     // a type this port does not know; IoRequest::raw_type says which
};

enum class IoDirection : uint8_t { kWrite, kRead };

// One trapped guest access, copied out of the hypervisor's shared page exactly once. Every field is
// as the guest (or the hypervisor on its behalf) sent it: NOT validated. The device model
// validates.
struct IoRequest {
  uint32_t vcpu = 0;  // which vCPU's slot it came from; completion goes back there
  IoSpace space = IoSpace::kMmio;
  IoDirection dir = IoDirection::kRead;
  uint8_t raw_type = 0;      // the backend's own type code, for diagnostics of kUnknown
  bool data_is_ptr = false;  // data is the guest physical address of a buffer of count*size bytes
  bool df = false;           // x86 direction flag: rep accesses walk downwards
  bool buffered = false;     // posted write from the buffered ring: needs no completion
  uint64_t addr = 0;   // MMIO: guest physical address; port: port; PCI config: register offset
  Sbdf sbdf;           // PCI config only
  uint64_t data = 0;   // write value, or buffer address when data_is_ptr
  uint32_t size = 0;   // bytes per access
  uint32_t count = 0;  // repetitions (rep prefix); 1 for a plain access
};

// Hex(): base/hex.h ("0x1f", for messages).

std::string_view IoSpaceName(IoSpace space);
// A one-line description for logs and test failures.
std::string Describe(const IoRequest& request);

}  // namespace gpuvm::hv

#endif  // GPUVM_HYPERVISOR_TYPES_H_
