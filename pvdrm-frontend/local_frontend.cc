#include "pvdrm-frontend/local_frontend.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "base/flag_number.h"
#include "hypervisor/backend.h"
#include "hypervisor/local/event_channels.h"
#include "hypervisor/local/guest_io.h"
#include "hypervisor/local/store.h"

namespace gpuvm::pvdrm {
namespace {

Result<uint64_t> EnvNumber(const char* name, uint64_t fallback, uint64_t min, uint64_t max) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  return ParseFlagNumber(std::string("$") + name, value, min, max);
}

}  // namespace

namespace {
// The device whose counters go to stderr at exit (the runtime never destroys its frontend: CUDA
// programs call into it from atexit handlers).
std::atomic<PvdrmDevice*> g_counted{nullptr};
void PrintCounters() {
  if (PvdrmDevice* device = g_counted.load()) {
    std::fprintf(stderr, "gpuvm-counters: pvdrm_frontend_requests=%llu pvdrm_pool_hits=%llu\n",
                 (unsigned long long)device->requests(), (unsigned long long)device->pool_hits());
  }
}
}  // namespace

LocalPvdrmFrontend::~LocalPvdrmFrontend() {
  PvdrmDevice* self = device_.get();
  g_counted.compare_exchange_strong(self, nullptr);
  device_.reset();
  if (connection_ != nullptr) (void)connection_->Close();
}

Result<std::unique_ptr<LocalPvdrmFrontend>> LocalPvdrmFrontend::FromEnvironment() {
  const char* vm_fd = std::getenv(hv::kLocalVmFdVariable);
  const char* hv_path = std::getenv("GPUVM_PVDRM_HV");
  if (vm_fd == nullptr || hv_path == nullptr || *hv_path == '\0') {
    return Status::FailedPrecondition(
        "$GPUVM_LOCAL_VM_FD and $GPUVM_PVDRM_HV are not set: this process is not inside a local "
        "pvdrm VM (start it with gpuvm-vm --mode pvdrm)");
  }
  GPUVM_ASSIGN_OR_RETURN(
      const uint64_t fd,
      ParseFlagNumber(std::string("$") + hv::kLocalVmFdVariable, vm_fd, 0, 1 << 20));
  GPUVM_ASSIGN_OR_RETURN(const uint64_t devid, EnvNumber("GPUVM_PVDRM_DEVID", 0, 0, 255));
  GPUVM_ASSIGN_OR_RETURN(const uint64_t grant_frames,
                         EnvNumber("GPUVM_PVDRM_GRANT_FRAMES", kDefaultGrantFrames, 16, 65536));
  GPUVM_ASSIGN_OR_RETURN(const uint64_t reserved_mib,
                         EnvNumber("GPUVM_PVDRM_RESERVED_MIB", kDefaultReservedMib, 1, 1 << 16));
  GPUVM_ASSIGN_OR_RETURN(const uint64_t pool_mib, EnvNumber("GPUVM_PVDRM_POOL_MIB", 0, 0, 1 << 16));
  if (reserved_mib * 256 < grant_frames) {
    return Status::InvalidArgument("$GPUVM_PVDRM_RESERVED_MIB must cover the grant frames");
  }

  std::unique_ptr<LocalPvdrmFrontend> f(new LocalPvdrmFrontend());
  // Two copies of the domain: one for the guest side (RAM as DMA memory), one for the grants.
  GPUVM_ASSIGN_OR_RETURN(f->domain_, hv::local::LocalDomain::RequestFrom(int(fd)));
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<hv::local::LocalGuestIo> io,
                         hv::local::LocalGuestIo::Create(*f->domain_));
  guest::LocalVmGuestOptions vm_options;
  vm_options.reserved_high_bytes = reserved_mib << 20;
  GPUVM_ASSIGN_OR_RETURN(std::shared_ptr<guest::LocalVmGuest> vm,
                         guest::LocalVmGuest::Create(std::move(io), vm_options));
  f->dma_ = LocalVmGuestDma(std::move(vm));
  const uint64_t frames = f->domain_->frame_count();
  if (grant_frames >= frames) return Status::InvalidArgument("more grant frames than RAM");
  GPUVM_ASSIGN_OR_RETURN(f->sharer_, hv::local::LocalGrantSharer::Create(
                                         *f->domain_, frames - grant_frames, grant_frames));
  const hv::DomainId self = f->domain_->domid();
  GPUVM_ASSIGN_OR_RETURN(auto channels, hv::local::LocalEventChannels::Connect(hv_path, self));
  GPUVM_ASSIGN_OR_RETURN(auto store, hv::local::LocalStore::Connect(hv_path, self));
  FrontendOptions options;
  options.device = {self, hv::kControlDomain, uint32_t(devid)};
  GPUVM_ASSIGN_OR_RETURN(
      f->connection_,
      FrontendConnection::Connect(*f->sharer_, std::move(channels), std::move(store), options));
  PvdrmDeviceOptions device_options;
  device_options.pool_bytes = pool_mib << 20;
  f->device_ = std::make_unique<PvdrmDevice>(*f->connection_, *f->sharer_, *f->dma_,
                                             hv::kControlDomain, device_options);
  PvdrmDevice* none = nullptr;
  if (g_counted.compare_exchange_strong(none, f->device_.get())) std::atexit(PrintCounters);
  return f;
}

}  // namespace gpuvm::pvdrm
