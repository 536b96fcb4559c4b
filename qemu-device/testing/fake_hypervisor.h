// Hypervisor-side fakes for device-model unit tests and fuzzing: an IOREQ server that records what
// is claimed (and optionally refuses ranges), and guest RAM in a vector. Requests are handed to
// DeviceModel::Handle directly, so a test is one thread and fully deterministic.
//
// Threading: one thread.
#ifndef GPUVM_QEMU_DEVICE_TESTING_FAKE_HYPERVISOR_H_
#define GPUVM_QEMU_DEVICE_TESTING_FAKE_HYPERVISOR_H_

#include <deque>
#include <utility>
#include <vector>

#include "hypervisor/guest_memory.h"
#include "hypervisor/ioreq_server.h"

namespace gpuvm::dm::testing {

class RecordingIoreqServer : public hv::IoreqServer {
 public:
  hv::DomainId domain() const override { return 1; }
  uint32_t vcpu_count() const override { return 2; }
  Status MapPciDevice(const hv::Sbdf& sbdf) override;
  Status UnmapPciDevice(const hv::Sbdf& sbdf) override;
  Status MapMmioRange(uint64_t first, uint64_t last) override;
  Status UnmapMmioRange(uint64_t first, uint64_t last) override;
  Status MapMemoryRange(uint64_t first, uint64_t last, const hv::MemoryBacking& backing) override;
  Status UnmapMemoryRange(uint64_t first, uint64_t last) override;
  int wait_fd() const override { return -1; }
  Result<std::optional<hv::IoRequest>> Poll() override;
  Status Complete(const hv::IoRequest& request, uint64_t read_value) override;
  Status SetPciIntxLevel(const hv::Sbdf& sbdf, uint8_t pin, bool asserted) override;
  Status InjectMsi(uint64_t address, uint32_t data) override;

  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // currently mapped
  struct MemoryRange {
    uint64_t first, last, offset;
  };
  std::vector<MemoryRange> memory;  // memory ranges currently mapped (BAR remap)
  std::vector<hv::Sbdf> devices;
  int map_calls = 0;
  // Memory-range changes answered Unavailable before one goes through (a Xen vCPU inside an
  // access).
  int busy_memory_changes = 0;
  int unmap_calls = 0;
  bool refuse_maps = false;
  bool intx = false;
  int msis = 0;
  std::deque<hv::IoRequest> pending;  // what Poll() hands out
  std::vector<std::pair<hv::IoRequest, uint64_t>> completed;
};

class VectorGuestMemory : public hv::GuestMemory {
 public:
  explicit VectorGuestMemory(uint64_t frames) : bytes_(frames << hv::kPageShift) {}
  hv::DomainId domain() const override { return 1; }
  uint64_t frame_count() const override { return bytes_.size() >> hv::kPageShift; }
  Result<std::unique_ptr<hv::GuestMapping>> Map(hv::Gfn first, uint64_t count,
                                                hv::Access access) override;
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

}  // namespace gpuvm::dm::testing

#endif  // GPUVM_QEMU_DEVICE_TESTING_FAKE_HYPERVISOR_H_
