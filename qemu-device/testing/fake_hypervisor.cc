#include "qemu-device/testing/fake_hypervisor.h"

#include <algorithm>

namespace gpuvm::dm::testing {

Status RecordingIoreqServer::MapPciDevice(const hv::Sbdf& sbdf) {
  if (std::find(devices.begin(), devices.end(), sbdf) != devices.end()) {
    return Status::AlreadyExists("claimed");
  }
  devices.push_back(sbdf);
  return Status::Ok();
}

Status RecordingIoreqServer::UnmapPciDevice(const hv::Sbdf& sbdf) {
  auto it = std::find(devices.begin(), devices.end(), sbdf);
  if (it == devices.end()) return Status::NotFound("not claimed");
  devices.erase(it);
  return Status::Ok();
}

Status RecordingIoreqServer::MapMmioRange(uint64_t first, uint64_t last) {
  ++map_calls;
  if (refuse_maps) return Status::PermissionDenied("refused by the test");
  if (first > last) return Status::InvalidArgument("inverted range");
  for (const auto& [f, l] : ranges) {
    if (first <= l && f <= last) return Status::AlreadyExists("overlap");
  }
  ranges.emplace_back(first, last);
  return Status::Ok();
}

Status RecordingIoreqServer::MapMemoryRange(uint64_t first, uint64_t last,
                                            const hv::MemoryBacking& backing) {
  if (busy_memory_changes > 0) {
    --busy_memory_changes;
    return Status::Unavailable("a vCPU is inside an access (test)");
  }
  if (backing.fd < 0) return Status::InvalidArgument("no backing");
  for (const MemoryRange& r : memory) {
    if (first <= r.last && r.first <= last) return Status::AlreadyExists("overlap");
  }
  memory.push_back({first, last, backing.offset});
  return Status::Ok();
}

Status RecordingIoreqServer::UnmapMemoryRange(uint64_t first, uint64_t last) {
  if (busy_memory_changes > 0) {
    --busy_memory_changes;
    return Status::Unavailable("a vCPU is inside an access (test)");
  }
  for (auto it = memory.begin(); it != memory.end(); ++it) {
    if (it->first == first && it->last == last) {
      memory.erase(it);
      return Status::Ok();
    }
  }
  return Status::NotFound("not mapped");
}

Status RecordingIoreqServer::UnmapMmioRange(uint64_t first, uint64_t last) {
  ++unmap_calls;
  auto it = std::find(ranges.begin(), ranges.end(), std::make_pair(first, last));
  if (it == ranges.end()) return Status::NotFound("not mapped");
  ranges.erase(it);
  return Status::Ok();
}

Result<std::optional<hv::IoRequest>> RecordingIoreqServer::Poll() {
  if (pending.empty()) return std::optional<hv::IoRequest>();
  hv::IoRequest r = pending.front();
  pending.pop_front();
  return std::optional<hv::IoRequest>(r);
}

Status RecordingIoreqServer::Complete(const hv::IoRequest& request, uint64_t read_value) {
  completed.emplace_back(request, read_value);
  return Status::Ok();
}

Status RecordingIoreqServer::SetPciIntxLevel(const hv::Sbdf&, uint8_t pin, bool asserted) {
  if (pin != 0) return Status::InvalidArgument("INTA only");
  intx = asserted;
  return Status::Ok();
}

Status RecordingIoreqServer::InjectMsi(uint64_t, uint32_t) {
  ++msis;
  return Status::Ok();
}

namespace {
class Window : public hv::GuestMapping {
 public:
  explicit Window(std::span<uint8_t> bytes) : bytes_(bytes) {}
  std::span<uint8_t> bytes() override { return bytes_; }

 private:
  std::span<uint8_t> bytes_;
};
}  // namespace

Result<std::unique_ptr<hv::GuestMapping>> VectorGuestMemory::Map(hv::Gfn first, uint64_t count,
                                                                 hv::Access) {
  if (count == 0) return Status::InvalidArgument("zero frames");
  if (first >= frame_count() || count > frame_count() - first) {
    return Status::OutOfRange("outside guest memory");
  }
  return std::unique_ptr<hv::GuestMapping>(new Window(
      std::span<uint8_t>(bytes_).subspan(first << hv::kPageShift, count << hv::kPageShift)));
}

}  // namespace gpuvm::dm::testing
