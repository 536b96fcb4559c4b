#include "aggregator/aggregator.h"

#include <cstdlib>

#include "aggregator/pt_gpu.h"

namespace gpuvm::aggregator {
namespace {

const char* ModeName(ipc::VmMode mode) {
  switch (mode) {
    case ipc::VmMode::kPassThrough:
      return "pt";
    case ipc::VmMode::kFullVirtualization:
      return "fv";
    case ipc::VmMode::kParaVirtualization:
      return "pv";
  }
  return "?";
}

}  // namespace

std::string VmControlBlock::Describe() const {
  return "VM " + std::to_string(id) + " '" + config.name + "' (" +
         (config.backend == ipc::Backend::kLocal ? "local" : "xen") + " domain " +
         std::to_string(config.domid) + ", " + ModeName(config.mode) + ")";
}

Result<std::unique_ptr<Aggregator>> Aggregator::Create(std::unique_ptr<PhysicalGpu> gpu,
                                                       const AggregatorOptions& options) {
  if (gpu == nullptr) return Status::InvalidArgument("no GPU");
  std::unique_ptr<Aggregator> a(new Aggregator(std::move(gpu), options));
  GPUVM_ASSIGN_OR_RETURN(a->interrupt_fd_, hv::local::CreateEventFd());
  const int fd = a->interrupt_fd_.get();
  // Runs on device threads: only a signal, the aggregator's thread looks at the levels.
  a->gpu_->SetInterruptHandler([fd](bool) { (void)hv::local::SignalEventFd(fd); });
  return a;
}

Aggregator::~Aggregator() {
  while (!vms_.empty()) (void)RemoveVm(vms_.begin()->first);
  if (health_.ok()) gpu_->SetInterruptHandler(nullptr);
}

Result<VmControlBlock*> Aggregator::AdmitVm(const ipc::VmConfig& config) {
  if (!health_.ok()) {
    return Status::Unavailable("the GPU is out of service after a failed reset: " +
                               health_.message());
  }
  if (config.mode == ipc::VmMode::kFullVirtualization) return AdmitFvVm(config);
  if (config.mode != ipc::VmMode::kPassThrough) {
    return Status::Unimplemented(std::string(ModeName(config.mode)) +
                                 " VMs are not supported yet; this aggregator runs pt and fv");
  }
  for (const auto& [id, vm] : vms_) {
    if (vm->config.mode == ipc::VmMode::kPassThrough) {
      return Status::FailedPrecondition("a second pt VM is refused: the GPU is passed through to " +
                                        vm->Describe());
    }
  }
  if (!vms_.empty()) {
    return Status::FailedPrecondition("a pt VM needs the whole GPU, and " +
                                      std::to_string(vms_.size()) + " VM(s) are using it");
  }
  if (vms_.size() >= options_.max_vms) {
    return Status::ResourceExhausted("too many VMs (" + std::to_string(vms_.size()) + ")");
  }
  for (const auto& [id, vm] : vms_) {
    if (vm->config.backend == config.backend && vm->config.domid == config.domid) {
      return Status::AlreadyExists("domain " + std::to_string(config.domid) +
                                   " already has a virtual GPU: " + vm->Describe());
    }
  }
  if (!gpu_->reaches_guest_memory() && !options_.allow_pt_without_dma) {
    return Status::FailedPrecondition(
        "pt needs the GPU to reach guest RAM, and this one cannot (no IOMMU mapping of guest "
        "memory): a guest's SYSRAM page tables would aim the card at host memory");
  }
  auto vm = std::make_unique<VmControlBlock>();
  vm->id = next_id_++;
  if (next_id_ == 0) next_id_ = 1;
  vm->config = config;
  vm->admitted = std::chrono::steady_clock::now();
  GPUVM_ASSIGN_OR_RETURN(vm->vgpu,
                         PassThroughGpu::Create(gpu_.get(), VmBars{config.bar0_size,
                                                                   config.bar1_size,
                                                                   config.bar3_size}));
  VmControlBlock* raw = vm.get();
  vms_[raw->id] = std::move(vm);
  return raw;
}

Result<FvVmOptions> ParseFvVmName(const std::string& name, const AggregatorOptions& options) {
  FvVmOptions o;
  o.mode = options.fv_mode;
  o.vram_bytes = options.fv.default_vram_bytes;
  o.channels = options.fv.default_channels;
  o.name = name;
  const size_t at = name.find('@');
  if (at == std::string::npos) return o;
  std::string rest = name.substr(at + 1);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string token = rest.substr(0, comma);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    if (token.empty()) continue;
    if (token.size() > 5 && token.compare(0, 5, "share") == 0) {
      // shareP: the VM's GPU share in percent, for the scheduler (aggregator/control/service.h
      // reads it from the name); checked here so a bad one refuses the VM at admission.
      const std::string p = token.substr(5);
      char* end = nullptr;
      const double v = std::strtod(p.c_str(), &end);
      if (p.find_first_not_of("0123456789.") != std::string::npos || end != p.c_str() + p.size() ||
          !(v >= 0 && v <= 100)) {
        return Status::InvalidArgument("fv: share must be 0 to 100 (percent), not '" + p + "'");
      }
      continue;
    }
    const bool channels = token.size() > 2 && token.compare(0, 2, "ch") == 0;
    const std::string digits = channels ? token.substr(2) : token;
    if (digits.find_first_not_of("0123456789") == std::string::npos && digits.size() <= 6) {
      const uint64_t n = std::stoull(digits);
      if (channels) {
        if (n == 0 || n > FvHost::kChannels) {
          return Status::InvalidArgument("fv: channels must be 1 to 128, not " + digits);
        }
        o.channels = uint32_t(n);
      } else {
        if (n == 0) return Status::InvalidArgument("fv: a VM needs some VRAM");
        o.vram_bytes = n << 20;
      }
      continue;
    }
    GPUVM_ASSIGN_OR_RETURN(o.mode, ParseFvMode(token));
  }
  return o;
}

Result<VmControlBlock*> Aggregator::AdmitFvVm(const ipc::VmConfig& config) {
  for (const auto& [id, vm] : vms_) {
    if (vm->config.mode == ipc::VmMode::kPassThrough) {
      return Status::FailedPrecondition("fv is refused: the GPU is passed through to " +
                                        vm->Describe());
    }
    if (vm->config.backend == config.backend && vm->config.domid == config.domid) {
      return Status::AlreadyExists("domain " + std::to_string(config.domid) +
                                   " already has a virtual GPU: " + vm->Describe());
    }
  }
  if (vms_.size() >= options_.max_vms) {
    return Status::ResourceExhausted("too many VMs (" + std::to_string(vms_.size()) + ")");
  }
  if (!gpu_->reaches_guest_memory()) {
    return Status::FailedPrecondition(
        "fv needs the GPU to reach guest RAM (SYSRAM page tables, pushbuffers), and this one "
        "cannot (no IOMMU mapping of guest memory)");
  }
  GPUVM_ASSIGN_OR_RETURN(FvVmOptions fv, ParseFvVmName(config.name, options_));
  if (fv_host_ == nullptr) {
    GPUVM_ASSIGN_OR_RETURN(fv_host_, FvHost::Create(gpu_.get(), options_.fv));
    if (options_.log) fv_host_->SetLog(options_.log);
    if (queue_factory_) fv_host_->SetQueue(queue_factory_(fv_host_.get()));
  }
  auto vm = std::make_unique<VmControlBlock>();
  vm->id = next_id_;
  vm->config = config;
  vm->admitted = std::chrono::steady_clock::now();
  fv.vm_id = vm->id;
  Result<std::unique_ptr<FullVirtGpu>> vgpu = FullVirtGpu::Create(
      fv_host_.get(), VmBars{config.bar0_size, config.bar1_size, config.bar3_size}, fv);
  if (!vgpu.ok()) {
    if (fv_vms_ == 0) fv_host_.reset();
    return vgpu.status();
  }
  vm->vgpu = std::move(*vgpu);
  if (++next_id_ == 0) next_id_ = 1;
  ++fv_vms_;
  VmControlBlock* raw = vm.get();
  vms_[raw->id] = std::move(vm);
  return raw;
}

Status Aggregator::AttachGuestMemory(VmControlBlock& vm, const ipc::GuestMemory& memory,
                                     std::vector<hv::local::UniqueFd> fds) {
  if (vm.ram != nullptr) return Status::AlreadyExists("the VM's memory was already given");
  if (memory.bytes != vm.config.guest_ram_bytes) {
    return Status::InvalidArgument("GUEST_MEMORY says " + std::to_string(memory.bytes) +
                                   " bytes, VM_CONFIG said " +
                                   std::to_string(vm.config.guest_ram_bytes));
  }
  std::unique_ptr<GuestRam> ram;
  if (memory.kind == ipc::GuestMemoryKind::kLocalMemfd) {
    if (vm.config.backend != ipc::Backend::kLocal || fds.size() != 1) {
      return Status::InvalidArgument("a local memfd for a VM that is not local");
    }
    GPUVM_ASSIGN_OR_RETURN(ram, GuestRam::FromLocalMemfd(std::move(fds[0]), memory.bytes));
  } else {
    if (vm.config.backend != ipc::Backend::kXen || !fds.empty()) {
      return Status::InvalidArgument("a Xen domain for a VM that is not on Xen");
    }
    GPUVM_ASSIGN_OR_RETURN(ram, GuestRam::FromXenDomain(vm.config.domid, memory.bytes));
  }
  GPUVM_RETURN_IF_ERROR(vm.vgpu->AttachGuestRam(*ram));
  vm.ram = std::move(ram);
  return Status::Ok();
}

Status Aggregator::RemoveVm(VmId id) {
  auto it = vms_.find(id);
  if (it == vms_.end()) return Status::NotFound("no VM " + std::to_string(id));
  std::unique_ptr<VmControlBlock> vm = std::move(it->second);
  vms_.erase(it);
  Status detached = vm->vgpu->Detach();
  const bool fv = vm->config.mode == ipc::VmMode::kFullVirtualization;
  if (fv && --fv_vms_ == 0) {
    // The last fv VM: the GPU goes back to a known state for whoever comes next.
    fv_host_.reset();
    Status reset = gpu_->Reset();
    if (detached.ok()) detached = reset;
  }
  if (!detached.ok() && health_.ok()) health_ = detached;
  vm.reset();  // the virtual GPU, then the RAM mapping
  return detached;
}

VmControlBlock* Aggregator::Find(VmId id) {
  auto it = vms_.find(id);
  return it == vms_.end() ? nullptr : it->second.get();
}

}  // namespace gpuvm::aggregator
