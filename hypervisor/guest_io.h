// Port: the guest's own side of trapped accesses — what a program running inside a VM uses where a
// real VM would touch BAR memory or PCI configuration space and the hypervisor would trap the
// access to the domain's IOREQ server (ioreq_server.h, the device model's side).
//
// Local backend: the VM is a process, and this is the trap itself (hypervisor/local/guest_io.h):
// an access that lies in a range the server claimed becomes a request in Xen's ioreq layout on the
// vCPU's slot, and the call returns with the server's answer. Unclaimed reads return all-ones,
// unclaimed writes vanish, like unassigned addresses on a PC. Ranges the server made memory (BAR
// remap) do not trap: AccessMemory/FillMemory reach their backing directly. On Xen an HVM guest's
// accesses trap in hardware, so Xen has no implementation here (its guests use the sysfs bus,
// guest-pv-driver/sysfs_bus.h).
//
// Guest RAM is a file here: ram_fd() at offset N is guest-physical address N, which the VM process
// maps, writes and maps over its own pages to make them DMA-able (the local backend's RAM memfd).
//
// Threading: one thread per vCPU index at a time; different vCPU indices may be used concurrently.
// The routing queries, interrupts() and the RAM accessors from any thread.
#ifndef GPUVM_HYPERVISOR_GUEST_IO_H_
#define GPUVM_HYPERVISOR_GUEST_IO_H_

#include <cstdint>

#include "base/status.h"
#include "hypervisor/types.h"

namespace gpuvm::hv {

class GuestIo {
 public:
  virtual ~GuestIo() = default;

  virtual DomainId domid() const = 0;
  virtual uint32_t vcpu_count() const = 0;
  // Guest RAM, [0, ram_bytes()) guest-physical (see the file comment).
  virtual uint64_t ram_bytes() const = 0;
  virtual int ram_fd() const = 0;

  // MMIO (size 1, 2, 4 or 8). DeadlineExceeded when the device model does not answer in time.
  virtual Result<uint64_t> Read(uint32_t vcpu, uint64_t gpa, uint32_t size) = 0;
  virtual Status Write(uint32_t vcpu, uint64_t gpa, uint32_t size, uint64_t value) = 0;
  // Configuration space of a PCI function (size 1, 2 or 4).
  virtual Result<uint32_t> ConfigRead(uint32_t vcpu, const Sbdf& sbdf, uint32_t offset,
                                      uint32_t size) = 0;
  virtual Status ConfigWrite(uint32_t vcpu, const Sbdf& sbdf, uint32_t offset, uint32_t size,
                             uint32_t value) = 0;
  // Submits `request` on request.vcpu exactly as given (any size, rep count, data_is_ptr, type)
  // without routing; returns the slot's data after completion. Rep transfers and hostile guests.
  virtual Result<uint64_t> Submit(const IoRequest& request) = 0;

  // Routing as the IOREQ server published it.
  virtual bool IsMmioClaimed(uint64_t gpa, uint64_t length) const = 0;
  virtual bool IsPciClaimed(const Sbdf& sbdf) const = 0;
  // Whether [gpa, gpa + length) lies inside one memory range (accesses there do not trap).
  virtual bool IsMemory(uint64_t gpa, uint64_t length) = 0;
  // Copies between `buffer` and guest physical [gpa, gpa + length) when that lies inside one memory
  // range this side can reach: true when done, false when the access must trap.
  virtual bool AccessMemory(uint64_t gpa, void* buffer, uint64_t length, bool write) = 0;
  // Sets [gpa, gpa + length) to `byte` under the same condition.
  virtual bool FillMemory(uint64_t gpa, uint8_t byte, uint64_t length) = 0;

  // The device's interrupt lines as the server set them.
  struct InterruptState {
    uint32_t intx_levels = 0;
    uint32_t msi_count = 0;
    uint64_t last_msi_address = 0;
    uint32_t last_msi_data = 0;
  };
  virtual InterruptState interrupts() const = 0;
  // An eventfd signalled on every interrupt edge (an INTx rising edge or an MSI): poll it, drain it
  // (os::DrainEventFd), then read interrupts().
  virtual int irq_fd() const = 0;
};

}  // namespace gpuvm::hv

#endif  // GPUVM_HYPERVISOR_GUEST_IO_H_
