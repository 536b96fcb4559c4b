#include "pvdrm-backend/guest_frames.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace gpuvm::pvdrm {
namespace {
constexpr uint64_t kPage = 4096;
}  // namespace

class MemfdGuestFrames::Mapping final : public hv::GuestMapping {
 public:
  Mapping(MemfdGuestFrames* owner, uint8_t* base, uint64_t bytes)
      : owner_(owner), base_(base), bytes_(bytes) {}
  ~Mapping() override {
    owner_->Forget(base_);
    munmap(base_, bytes_);
  }
  std::span<uint8_t> bytes() override { return {base_, bytes_}; }

 private:
  MemfdGuestFrames* const owner_;
  uint8_t* const base_;
  const uint64_t bytes_;
};

Result<std::unique_ptr<MemfdGuestFrames>> MemfdGuestFrames::Create(os::UniqueFd memfd,
                                                                   uint64_t frames) {
  struct stat st {};
  if (!memfd.valid() || fstat(memfd.get(), &st) != 0) {
    return Status::InvalidArgument("guest RAM: not an open descriptor");
  }
  if (frames == 0 || frames > (UINT64_MAX / kPage) || uint64_t(st.st_size) < frames * kPage) {
    return Status::InvalidArgument("guest RAM: the descriptor is shorter than " +
                                   std::to_string(frames) + " pages");
  }
  return std::unique_ptr<MemfdGuestFrames>(new MemfdGuestFrames(std::move(memfd), frames));
}

MemfdGuestFrames::~MemfdGuestFrames() = default;

Status IndexedGuestFrames::CheckFrames(std::span<const uint32_t> frames) const {
  if (frames.empty()) return Status::InvalidArgument("no frames to map");
  for (const uint32_t frame : frames) {
    if (frame >= frame_count()) {
      return Status::OutOfRange("frame " + std::to_string(frame) + " is past the guest's " +
                                std::to_string(frame_count()) + " pages of RAM");
    }
  }
  return Status::Ok();
}

void IndexedGuestFrames::Remember(const uint8_t* base, uint64_t bytes,
                                  std::span<const uint32_t> frames) {
  std::lock_guard lock(mu_);
  live_[reinterpret_cast<uintptr_t>(base)] = {bytes, {frames.begin(), frames.end()}};
}

Result<std::unique_ptr<hv::GuestMapping>> MemfdGuestFrames::Map(std::span<const uint32_t> frames) {
  GPUVM_RETURN_IF_ERROR(CheckFrames(frames));
  const uint64_t bytes = frames.size() * kPage;
  // Reserve the whole range first, then map each run of consecutive frames over it.
  void* reserved = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (reserved == MAP_FAILED) {
    return Status::ResourceExhausted(std::string("mapping guest frames: ") + std::strerror(errno));
  }
  auto* base = static_cast<uint8_t*>(reserved);
  for (size_t at = 0; at < frames.size();) {
    size_t run = 1;
    while (at + run < frames.size() && frames[at + run] == frames[at] + run) ++run;
    void* got = mmap(base + at * kPage, run * kPage, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                     fd_.get(), off_t(uint64_t{frames[at]} * kPage));
    if (got == MAP_FAILED) {
      const int err = errno;
      munmap(base, bytes);
      return Status::ResourceExhausted(std::string("mapping guest frames: ") + std::strerror(err));
    }
    at += run;
  }
  Remember(base, bytes, frames);
  return std::unique_ptr<hv::GuestMapping>(new Mapping(this, base, bytes));
}

std::optional<uint64_t> IndexedGuestFrames::GuestPhysical(const void* host) const {
  const auto address = reinterpret_cast<uintptr_t>(host);
  std::lock_guard lock(mu_);
  auto it = live_.upper_bound(address);
  if (it == live_.begin()) return std::nullopt;
  --it;
  const uint64_t offset = address - it->first;
  if (offset >= it->second.bytes) return std::nullopt;
  return uint64_t{it->second.frames[offset / kPage]} * kPage + offset % kPage;
}

void IndexedGuestFrames::Forget(const uint8_t* base) {
  std::lock_guard lock(mu_);
  live_.erase(reinterpret_cast<uintptr_t>(base));
}

}  // namespace gpuvm::pvdrm
