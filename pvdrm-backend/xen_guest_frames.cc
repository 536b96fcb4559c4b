#include "pvdrm-backend/xen_guest_frames.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

// libxenforeignmemory's header has no C++ guard of its own.
extern "C" {
#include <xenforeignmemory.h>
}

namespace gpuvm::pvdrm {
namespace {
constexpr uint64_t kPage = 4096;
}  // namespace

struct ForeignGuestFrames::Handle {
  xenforeignmemory_handle* fmem = nullptr;
  ~Handle() {
    if (fmem != nullptr) xenforeignmemory_close(fmem);
  }
};

class ForeignGuestFrames::Mapping final : public hv::GuestMapping {
 public:
  Mapping(ForeignGuestFrames* owner, void* base, uint64_t pages)
      : owner_(owner), base_(static_cast<uint8_t*>(base)), pages_(pages) {}
  ~Mapping() override {
    owner_->Forget(base_);
    xenforeignmemory_unmap(owner_->handle_->fmem, base_, pages_);
  }
  std::span<uint8_t> bytes() override { return {base_, pages_ * kPage}; }

 private:
  ForeignGuestFrames* const owner_;
  uint8_t* const base_;
  const uint64_t pages_;
};

Result<std::unique_ptr<ForeignGuestFrames>> ForeignGuestFrames::Open(hv::DomainId domid,
                                                                     uint64_t frames) {
  if (frames == 0 || frames > (uint64_t{1} << 32)) {
    return Status::InvalidArgument("guest frames: " + std::to_string(frames));
  }
  auto handle = std::make_shared<Handle>();
  handle->fmem = xenforeignmemory_open(nullptr, 0);
  if (handle->fmem == nullptr) {
    return Status::FromErrno(errno, "xenforeignmemory_open (is this dom0 with privcmd?)");
  }
  return std::unique_ptr<ForeignGuestFrames>(
      new ForeignGuestFrames(std::move(handle), domid, frames));
}

ForeignGuestFrames::~ForeignGuestFrames() = default;

Result<std::unique_ptr<hv::GuestMapping>> ForeignGuestFrames::Map(
    std::span<const uint32_t> frames) {
  GPUVM_RETURN_IF_ERROR(CheckFrames(frames));
  std::vector<xen_pfn_t> gfns(frames.begin(), frames.end());
  std::vector<int> errors(frames.size(), 0);
  void* base = xenforeignmemory_map(handle_->fmem, domid_, PROT_READ | PROT_WRITE, frames.size(),
                                    gfns.data(), errors.data());
  if (base == nullptr) {
    return Status::ResourceExhausted(std::string("foreign map of guest frames: ") +
                                     std::strerror(errno));
  }
  for (size_t i = 0; i < frames.size(); ++i) {
    if (errors[i] != 0) {
      xenforeignmemory_unmap(handle_->fmem, base, frames.size());
      return Status::OutOfRange("guest frame " + std::to_string(frames[i]) + " of domain " +
                                std::to_string(domid_) + " cannot be mapped: error " +
                                std::to_string(-errors[i]));
    }
  }
  Remember(static_cast<uint8_t*>(base), frames.size() * kPage, frames);
  return std::unique_ptr<hv::GuestMapping>(new Mapping(this, base, frames.size()));
}

}  // namespace gpuvm::pvdrm
