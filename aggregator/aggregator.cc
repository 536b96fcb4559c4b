#include "aggregator/aggregator.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "aggregator/pt_gpu.h"
#include "base/enum_names.h"
#include "base/vm_name.h"

namespace gpuvm::aggregator {
namespace {

const char* ModeName(ipc::VmMode mode) {
  static constexpr EnumName<ipc::VmMode> kNames[] = {{ipc::VmMode::kPassThrough, "pt"},
                                                     {ipc::VmMode::kFullVirtualization, "fv"},
                                                     {ipc::VmMode::kParaVirtualization, "pv"}};
  return NameOf(kNames, mode, "?");
}

}  // namespace

std::string VmControlBlock::Describe() const {
  return "VM " + std::to_string(id) + " '" + config.name + "' (" +
         (config.backend == ipc::Backend::kLocal ? "local" : "xen") + " domain " +
         std::to_string(config.domid) + ", " + ModeName(config.mode) + ")";
}

std::string VmControlBlock::LogFields() const { return VmLogFields(id, config.name); }

RefusalCounts VmControlBlock::refusals() const {
  RefusalCounts r = vgpu != nullptr ? vgpu->refusals() : RefusalCounts{};
  r[size_t(Refusal::kMmio)] = counters.refused;
  return r;
}

Result<std::unique_ptr<Aggregator>> Aggregator::Create(std::unique_ptr<PhysicalGpu> gpu,
                                                       const AggregatorOptions& options) {
  if (gpu == nullptr) return Status::InvalidArgument("no GPU");
  std::unique_ptr<Aggregator> a(new Aggregator(std::move(gpu), options));
  GPUVM_ASSIGN_OR_RETURN(a->interrupt_fd_, os::CreateEventFd());
  const int fd = a->interrupt_fd_.get();
  // Runs on device threads: only a signal, the aggregator's thread looks at the levels.
  a->gpu_->SetInterruptHandler([fd](bool) { (void)os::SignalEventFd(fd); });
  return a;
}

Result<os::UniqueFd> WatchLocalRam(int memfd) {
  if (::flock(memfd, LOCK_SH | LOCK_NB) != 0) {
    return Status::FromErrno(errno, "a shared lock on the VM's RAM (someone holds it exclusively)");
  }
  // A new open file description of the same memfd (not a dup: that would share the lock).
  const std::string path = "/proc/self/fd/" + std::to_string(memfd);
  os::UniqueFd probe(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!probe.valid()) return Status::FromErrno(errno, "reopening the VM's RAM memfd");
  return probe;
}

bool LocalRamReleased(int ram_probe) {
  if (::flock(ram_probe, LOCK_EX | LOCK_NB) != 0) return false;  // the RAM is still held
  (void)::flock(ram_probe, LOCK_UN);
  return true;
}

bool DomainGone(hv::Backend* hypervisor, uint32_t domid) {
  if (hypervisor == nullptr) return true;  // no hypervisor here, no domain either
  Result<std::unique_ptr<hv::GuestMemory>> memory =
      hypervisor->OpenGuestMemory(hv::DomainId(domid));
  if (memory.ok()) return false;
  // No Xen here (no domain either), or Xen says there is no such domain (ESRCH). Anything else
  // (a permission problem, ...) keeps the quarantine: it is the safe side.
  return memory.status().code() == StatusCode::kUnavailable ||
         memory.status().message().find(std::strerror(ESRCH)) != std::string::npos;
}

Aggregator::~Aggregator() {
  while (!vms_.empty()) (void)RemoveVm(vms_.begin()->first);
  // The GPU and its VRAM end with us: nothing is left for an orphaned guest to meet.
  quarantine_.clear();
  (void)ResetFvHostIfUnused();
  if (health_.ok()) gpu_->SetInterruptHandler(nullptr);
}

Status Aggregator::ResetFvHostIfUnused() {
  if (fv_host_ == nullptr || fv_vms_ != 0 || !quarantine_.empty()) return Status::Ok();
  fv_host_.reset();
  Status reset = gpu_->Reset();
  if (!reset.ok() && health_.ok()) health_ = reset;
  return reset;
}

void Aggregator::NoteCleanTeardown(VmId id) {
  if (VmControlBlock* vm = Find(id)) vm->clean_teardown = true;
}

size_t Aggregator::ReapQuarantine() {
  const size_t released = ReleaseGoneQuarantine();
  if (released != 0) (void)ResetFvHostIfUnused();
  return released;
}

size_t Aggregator::ReleaseGoneQuarantine() {
  size_t released = 0;
  for (auto it = quarantine_.begin(); it != quarantine_.end();) {
    if (!it->gone()) {
      ++it;
      continue;
    }
    const uint64_t bytes = it->vram->assigned_bytes();
    Log(LogLevel::kInfo, it->fields,
        "its guest is gone; " + std::to_string(bytes >> 10) +
            " KiB of quarantined VRAM back to the pool");
    it = quarantine_.erase(it);  // the VramMap gives its chunks back (a static slice scrubbed)
    ++released;
  }
  return released;
}

Result<VmControlBlock*> Aggregator::AdmitVm(const ipc::VmConfig& config) {
  if (!health_.ok()) {
    return Status::Unavailable("the GPU is out of service after a failed reset: " +
                               health_.message());
  }
  // Every VM's name is checked (base/vm_name.h): a malformed one is refused, never cut or guessed.
  // The codec checks a VM_CONFIG off the wire; in-process callers come through here too.
  GPUVM_RETURN_IF_ERROR(CheckVmName(config.name));
  if (config.mode == ipc::VmMode::kPassThrough && (config.variant != ipc::VgpuVariant::kDefault ||
                                                   config.vram_mib != 0 || config.channels != 0)) {
    return Status::InvalidArgument("VM '" + config.name + "': a variant, VRAM size and channel " +
                                   "count are fv and pv options; a pt VM has the whole GPU");
  }
  (void)ReapQuarantine();
  // pv VMs are fv VMs whose page tables are written by calls (docs/PARAVIRT.md): same host.
  if (config.mode == ipc::VmMode::kFullVirtualization ||
      config.mode == ipc::VmMode::kParaVirtualization) {
    return AdmitFvVm(config);
  }
  if (!quarantine_.empty()) {
    return Status::FailedPrecondition(
        "a pt VM needs the whole GPU, and VRAM of " + std::to_string(quarantine_.size()) +
        " dead fv VM(s) is quarantined until their guests are gone (first: " +
        quarantine_.front().fields + ")");
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
  GPUVM_ASSIGN_OR_RETURN(
      vm->vgpu, PassThroughGpu::Create(gpu_.get(),
                                       VmBars{config.bar0_size, config.bar1_size, config.bar3_size},
                                       options_.pt_bar_remap));
  VmControlBlock* raw = vm.get();
  vms_[raw->id] = std::move(vm);
  return raw;
}

Result<FvVmOptions> FvVmOptionsFromConfig(const ipc::VmConfig& config,
                                          const AggregatorOptions& options) {
  GPUVM_RETURN_IF_ERROR(CheckVmName(config.name));
  const bool pv = config.mode == ipc::VmMode::kParaVirtualization;
  FvVmOptions o;
  o.mode = pv ? FvMode::kPvMulticall : options.fv_mode;
  o.vram_bytes = options.fv.default_vram_bytes;
  o.channels = options.fv.default_channels;
  o.name = config.name;
  if (config.variant != ipc::VgpuVariant::kDefault) {
    const std::optional<FvMode> mode = FvModeOf(config.variant);
    if (!mode) return Status::InvalidArgument("VM '" + config.name + "': unknown variant");
    o.mode = *mode;
  }
  if (IsPvMode(o.mode) != pv) {
    return Status::InvalidArgument("VM '" + config.name + "': variant '" +
                                   ipc::VgpuVariantName(config.variant) + "' is not one of a " +
                                   ModeName(config.mode) + " VM's");
  }
  if (config.vram_mib != 0) o.vram_bytes = uint64_t(config.vram_mib) << 20;
  if (config.channels != 0) {
    if (config.channels > FvHost::kChannels) {
      return Status::InvalidArgument("VM '" + config.name + "': channels must be 1 to " +
                                     std::to_string(FvHost::kChannels) + ", not " +
                                     std::to_string(config.channels));
    }
    o.channels = config.channels;
  }
  // The share is the scheduler's (aggregator/control/service.h reads it from the VM's config).
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
  GPUVM_ASSIGN_OR_RETURN(FvVmOptions fv, FvVmOptionsFromConfig(config, options_));
  if (fv_host_ == nullptr) {
    GPUVM_ASSIGN_OR_RETURN(fv_host_, FvHost::Create(gpu_.get(), options_.fv));
    if (options_.log) fv_host_->SetLog(options_.log);
    // A channel the scheduler failed (kill-work, a kernel limit) is an interrupt of its VM: the
    // server thread looks at the levels when the eventfd fires.
    fv_host_->SetInterruptNotifier([fd = interrupt_fd_.get()] { (void)os::SignalEventFd(fd); });
    // A pool with no room first gets back the quarantined VRAM of guests that are gone.
    // (Never resets the host: it runs inside an allocation.)
    fv_host_->vm_vram().SetReclaim([this] { return ReleaseGoneQuarantine() > 0; });
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
    if (fv_vms_ == 0 && quarantine_.empty()) fv_host_.reset();
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
                                     std::vector<os::UniqueFd> fds) {
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
    // Before the RAM is mapped: the probe that tells when the guest is gone (quarantine).
    GPUVM_ASSIGN_OR_RETURN(vm.ram_probe, WatchLocalRam(fds[0].get()));
    GPUVM_ASSIGN_OR_RETURN(ram, GuestRam::FromLocalMemfd(std::move(fds[0]), memory.bytes));
  } else {
    if (vm.config.backend != ipc::Backend::kXen || !fds.empty()) {
      return Status::InvalidArgument("a Xen domain for a VM that is not on Xen");
    }
    if (options_.hypervisor == nullptr) {
      return Status::Unavailable("no hypervisor backend here to map a domain's RAM");
    }
    GPUVM_ASSIGN_OR_RETURN(
        ram, GuestRam::FromDomain(*options_.hypervisor, vm.config.domid, memory.bytes));
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
  const bool fv = vm->config.mode == ipc::VmMode::kFullVirtualization ||
                  vm->config.mode == ipc::VmMode::kParaVirtualization;  // both on the fv host
  // Its device model died (no TEARDOWN) while BAR remap may have mapped VRAM into the guest, which
  // may still run: that VRAM must not go to the next VM before the guest is gone.
  auto* fv_gpu = fv ? static_cast<FullVirtGpu*>(vm->vgpu.get()) : nullptr;
  std::unique_ptr<VramMap> kept;
  Status detached = fv_gpu != nullptr && !vm->clean_teardown && fv_gpu->VramMayBeMapped()
                        ? fv_gpu->DetachKeepingVram(&kept)
                        : vm->vgpu->Detach();
  if (kept != nullptr) {
    Quarantined q;
    q.fields = vm->LogFields();
    if (vm->config.backend == ipc::Backend::kLocal) {
      auto probe = std::make_shared<os::UniqueFd>(std::move(vm->ram_probe));
      // Without a probe (its device model never gave the RAM) there is no telling when the guest
      // is gone: kept until the aggregator exits (gpuvm-dm always gives it before the guest runs).
      q.gone = [probe] { return probe->valid() && LocalRamReleased(probe->get()); };
    } else {
      const uint32_t domid = vm->config.domid;
      hv::Backend* hypervisor = options_.hypervisor.get();  // outlives the quarantine: ours
      q.gone = [hypervisor, domid] { return DomainGone(hypervisor, domid); };
    }
    Log(LogLevel::kWarn, q.fields,
        "its device model went away while BAR remap ranges of its VRAM may still be "
        "mapped into the guest: " +
            std::to_string(kept->assigned_bytes() >> 10) +
            " KiB of VRAM quarantined until the guest is gone");
    q.vram = std::move(kept);
    quarantine_.push_back(std::move(q));
  }
  vm.reset();  // the virtual GPU, then the RAM mapping (the guest's RAM is no longer held by us)
  if (fv) --fv_vms_;
  (void)ReapQuarantine();  // perhaps the guest is gone already (its launcher killed it)
  // The last fv VM (and nothing quarantined): the GPU goes back to a known state for whoever comes
  // next.
  if (fv) {
    Status reset = ResetFvHostIfUnused();
    if (detached.ok()) detached = reset;
  }
  if (!detached.ok() && health_.ok()) health_ = detached;
  return detached;
}

VmControlBlock* Aggregator::Find(VmId id) {
  auto it = vms_.find(id);
  return it == vms_.end() ? nullptr : it->second.get();
}

}  // namespace gpuvm::aggregator
