#include "tests/fv_test_vm.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace gpuvm::aggregator::fv_testing {

class FvTestVm::Pages final : public guest::DmaMapping {
 public:
  Pages(uint8_t* host, uint64_t length, std::vector<uint64_t> frames)
      : host_(host), length_(length), frames_(std::move(frames)) {}
  uint8_t* host() const override { return host_; }
  uint64_t length() const override { return length_; }
  uint64_t PageBusAddress(uint64_t offset) const override { return frames_[offset / 4096] * 4096; }

 private:
  uint8_t* host_;
  uint64_t length_;
  std::vector<uint64_t> frames_;
};

Result<std::unique_ptr<guest::DmaMapping>> FvTestVm::MapDma(void* host, uint64_t length) {
  if (length == 0 || length % 4096 || reinterpret_cast<uintptr_t>(host) % 4096) {
    return Status::InvalidArgument("unaligned DMA");
  }
  std::lock_guard lock(frames_mu_);
  const uint64_t pages = length / 4096;
  if ((next_frame_ + pages) * 4096 > ram_->size()) return Status::ResourceExhausted("guest RAM");
  std::vector<uint64_t> frames(pages);
  auto* bytes = static_cast<uint8_t*>(host);
  // Move the bytes into guest frames, then map the frames over them (one run: consecutive frames).
  std::memcpy(ram_->bytes().data() + next_frame_ * 4096, bytes, length);
  if (::mmap(bytes, length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, memfd_.get(),
             off_t(next_frame_ * 4096)) == MAP_FAILED) {
    return Status::FromErrno(errno, "mmap");
  }
  for (uint64_t i = 0; i < pages; ++i) frames[i] = next_frame_ + i;
  next_frame_ += pages;
  return std::unique_ptr<guest::DmaMapping>(new Pages(bytes, length, std::move(frames)));
}

Result<std::unique_ptr<FvTestWorld>> FvTestWorld::Create(const FvWorldOptions& options) {
  std::unique_ptr<FvTestWorld> w(new FvTestWorld());
  SimGpuOptions o;
  o.vram_bytes = options.gpu_vram_bytes;
  o.compute_engine = options.compute_engine;
  o.compute_workers = options.compute_workers;
  o.vram_file = options.vram_file;
  GPUVM_ASSIGN_OR_RETURN(w->gpu_, SimGpu::Create(o));
  FvOptions fv;
  fv.reserved_bytes = options.reserved_bytes;
  fv.vram_policy = options.vram_policy;
  fv.guest_log = options.guest_log;
  GPUVM_ASSIGN_OR_RETURN(w->host_, FvHost::Create(w->gpu_.get(), fv));
  FvTestWorld* raw = w.get();
  w->host_->SetLog([raw](const std::string& line) {
    std::lock_guard lock(raw->log_mu_);
    raw->log_ += line + "\n";
  });
  return w;
}

FvTestWorld::~FvTestWorld() {
  for (auto& vm : vms_) vm->Stop();
  vms_.clear();
  host_.reset();
}

Result<FvTestVm*> FvTestWorld::AddVm(FvVmOptions options, uint64_t ram_bytes) {
  if (options.vm_id == 0) options.vm_id = uint32_t(vms_.size() + 1);
  if (options.name.empty()) options.name = "vm" + std::to_string(options.vm_id);
  auto vm = std::make_unique<FvTestVm>(&lock_, gpu_.get());
  GPUVM_RETURN_IF_ERROR(vm->Start(host_.get(), options, ram_bytes));
  vms_.push_back(std::move(vm));
  return vms_.back().get();
}

std::string FvTestWorld::log() {
  std::lock_guard lock(log_mu_);
  return log_;
}

}  // namespace gpuvm::aggregator::fv_testing
