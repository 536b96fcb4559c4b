// The aggregator's core, independent of any transport: the physical GPU, one control block per VM
// with its virtual GPU, and the admission policy. Sessions (session.h) call it for what their
// device models ask; the server (server.h) owns sockets and threads.
//
// Policy today (pt only):
//  - a pt VM owns the whole GPU: it is admitted only when no other VM exists, and while it runs
//    every other VM is refused ("a second pt VM is refused"), with who owns the GPU in the message;
//  - fv VMs share the GPU (fv_host.h): each gets a VRAM slice, a channel range and a SYSRAM window;
//    admitted while no pt VM runs, refused when the partition does not fit; the first one takes
//    the GPU over for fv, the last one leaving resets it;
//  - pv is the next issue: refused with Unimplemented;
//  - a GPU that cannot reach guest memory (a real card without an IOMMU mapping of guest RAM) takes
//    no pt VM unless AggregatorOptions::allow_pt_without_dma (then the guest must not use SYSRAM);
//  - at most max_vms control blocks; the same (backend, domain) only once;
//  - removing a VM detaches its virtual GPU (pt: the GPU is reset). If a reset fails, the GPU is in
//    an unknown state: health() turns non-OK and no VM is admitted again;
//  - quarantine: an fv VM removed without its device model's TEARDOWN (the dm died) while BAR
//    remap may have mapped machine frames of its VRAM into the guest (VRAM in a PCI BAR, Xen:
//    FullVirtGpu::VramMayBeMapped) keeps that VRAM out of the pool until its guest can no longer
//    run (local: no process holds the VM's RAM any more; Xen: the domain is gone) — else the
//    orphaned guest would read and write the next VM's pages. With per-VM VRAM backing (the
//    software GPU's own VRAM) the guest can only hold its VM's own memfd, which no GPU page is
//    backed by once the VM is detached, so nothing is quarantined. Checked when a VM is admitted
//    or removed and whenever the pool has no room; while anything is quarantined the fv host
//    stays (no GPU reset) and pt VMs are refused.
//
// Threading: one owner thread calls everything; interrupt_fd() becomes readable from device
// threads.
#ifndef GPUVM_AGGREGATOR_AGGREGATOR_H_
#define GPUVM_AGGREGATOR_AGGREGATOR_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "aggregator/fv_gpu.h"
#include "aggregator/fv_host.h"
#include "aggregator/guest_ram.h"
#include "aggregator/physical_gpu.h"
#include "aggregator/virtual_gpu.h"
#include "aggregator/vm_tokens.h"
#include "base/log.h"
#include "base/os.h"
#include "hypervisor/backend.h"
#include "ipc/protocol.h"

namespace gpuvm::aggregator {

using VmId = uint32_t;

struct VmCounters {
  std::array<uint64_t, 3> reads{};  // per BAR: 0, 1, 3
  std::array<uint64_t, 3> writes{};
  uint64_t refused = 0;     // accesses answered with an error (never reached the GPU)
  uint64_t interrupts = 0;  // INTERRUPT level changes sent
};

// Everything the aggregator keeps about one VM.
struct VmControlBlock {
  VmId id = 0;
  ipc::VmConfig config;
  std::unique_ptr<GuestRam> ram;     // after GUEST_MEMORY
  std::unique_ptr<VirtualGpu> vgpu;  // declared after ram: destroyed (detached) first
  VmCounters counters;
  std::chrono::steady_clock::time_point admitted;
  // Local VMs: a second open file description of the RAM memfd (WatchLocalRam), to learn when the
  // guest is gone should its VRAM need quarantine.
  os::UniqueFd ram_probe;
  // Its device model ended the session with TEARDOWN (it withdrew every BAR remap range first).
  bool clean_teardown = false;

  // "VM 3 'name' (local domain 5, pt)".
  std::string Describe() const;
  // What starts its log lines (base/log.h): "vm=3 name=web".
  std::string LogFields() const;
  // Everything refused of this VM, per kind: the session's refused accesses and its virtual GPU's.
  RefusalCounts refusals() const;
};

struct AggregatorOptions {
  size_t max_vms = 64;
  bool allow_pt_without_dma = false;
  // pt's BAR remap (pt_gpu.h): the apertures' VRAM pages mapped into the guest where the GPU can
  // hand out its VRAM. false (gpuvm-aggregator --pt-trap-all): every pt access traps, the baseline
  // that measures what trapping costs.
  bool pt_bar_remap = true;
  // Full virtualization: the partitioning and the mode of VMs that do not choose one. A VM chooses
  // in VM_CONFIG's typed fields (variant, VRAM MiB, channels; docs/IPC.md).
  FvOptions fv;
  FvMode fv_mode = FvMode::kNaive;
  // Where the aggregator's and fv's notes on VMs go (owner thread), as base/log.h LogEvent bodies
  // that start with the VM's "vm=<id> name=<name>"; empty: nowhere.
  std::function<void(const std::string&)> log;
  // The one-time tokens device models authenticate with (vm_tokens.h, docs/SECURITY.md).
  VmTokens::Options tokens;
  // The hypervisor of VMs whose RAM arrives as a domain id (GUEST_MEMORY kXenDomain): their RAM is
  // mapped through it (hv::Backend::MapGuestRam) and the quarantine asks it whether the domain is
  // gone. gpuvm-aggregator's main() passes the Xen backend. Null: such RAM is refused (Unavailable)
  // and such a domain counts as gone, as where there is no Xen.
  std::shared_ptr<hv::Backend> hypervisor;
};

// The fv (or pv) virtual GPU a VM_CONFIG asks for: its variant, VRAM and channels, the
// aggregator's defaults where it leaves them 0 (a pv VM's default variant is multicall).
// InvalidArgument for a malformed name or a variant of another mode (the codec already refuses
// both on the wire; this guards in-process callers).
Result<FvVmOptions> FvVmOptionsFromConfig(const ipc::VmConfig& config,
                                          const AggregatorOptions& options);

// Quarantine probes: can a gone VM's guest still run (and reach what was mapped into it)?
// Local: a local VM's RAM is one memfd whose open file description the launcher, the device model
// and the guest share (SCM_RIGHTS) and hold, as descriptor or as mapping, while they live.
// WatchLocalRam puts a shared flock on that description and returns a second, read-only
// description of the same memfd; LocalRamReleased(probe) is true once an exclusive flock on the
// probe is granted, i.e. the original description is gone from every process (the aggregator's
// own mapping of the RAM included, so call it after the VM's GuestRam is destroyed).
Result<os::UniqueFd> WatchLocalRam(int memfd);
bool LocalRamReleased(int ram_probe);
// A domain of `hypervisor` (Xen): it no longer exists, or there is no such hypervisor here.
bool DomainGone(hv::Backend* hypervisor, uint32_t domid);

class Aggregator {
 public:
  static Result<std::unique_ptr<Aggregator>> Create(std::unique_ptr<PhysicalGpu> gpu,
                                                    const AggregatorOptions& options = {});
  ~Aggregator();

  // A new control block and virtual GPU for a VM, or the reason it is refused. The caller
  // (Session) has authenticated the device model for config.domid first (vm_tokens()).
  Result<VmControlBlock*> AdmitVm(const ipc::VmConfig& config);
  // Who may open a VM: a token per domain, issued on the control socket, redeemed in AUTH.
  VmTokens& vm_tokens() { return tokens_; }
  // GUEST_MEMORY: maps the VM's RAM (checking the memfd or opening the Xen domain) and gives it to
  // the virtual GPU. Once per VM.
  Status AttachGuestMemory(VmControlBlock& vm, const ipc::GuestMemory& memory,
                           std::vector<os::UniqueFd> fds);
  // Detaches the VM's virtual GPU (pt: resets the GPU), then forgets the VM. An fv VM whose VRAM
  // may still be mapped into its guest (see quarantine above) leaves its VRAM quarantined.
  Status RemoveVm(VmId id);
  // The VM's device model ended the session with TEARDOWN: no BAR remap range is left in the guest.
  void NoteCleanTeardown(VmId id);
  // Gives the VRAM of quarantined VMs whose guests are gone back to the pool; how many were.
  size_t ReapQuarantine();
  size_t quarantined_vms() const { return quarantine_.size(); }

  VmControlBlock* Find(VmId id);
  // The GPU scheduler's dispatcher (aggregator/control/): fv hosts created from now on queue
  // their VMs' submissions through the queue this makes instead of the FIFO.
  using SubmissionQueueFactory = std::function<std::unique_ptr<SubmissionQueue>(FvHost*)>;
  void SetSubmissionQueueFactory(SubmissionQueueFactory factory) {
    queue_factory_ = std::move(factory);
  }
  // The admitted VMs' ids, ascending (for the control socket, aggregator/control/).
  std::vector<VmId> vm_ids() const {
    std::vector<VmId> ids;
    for (const auto& [id, vm] : vms_) ids.push_back(id);
    return ids;
  }
  size_t vm_count() const { return vms_.size(); }
  PhysicalGpu& gpu() { return *gpu_; }
  // Not OK once a reset failed (the GPU's state is unknown); no VM is admitted after that.
  const Status& health() const { return health_; }

  // Readable (an eventfd, never drained by us) when the GPU's interrupt line may have changed:
  // register it edge-triggered and then look at each VM's virtual GPU.
  int interrupt_fd() const { return interrupt_fd_.get(); }

 private:
  Result<VmControlBlock*> AdmitFvVm(const ipc::VmConfig& config);
  Aggregator(std::unique_ptr<PhysicalGpu> gpu, const AggregatorOptions& options)
      : gpu_(std::move(gpu)), options_(options) {}

  std::unique_ptr<PhysicalGpu> gpu_;
  const AggregatorOptions options_;
  VmTokens tokens_{options_.tokens};
  os::UniqueFd interrupt_fd_;
  std::map<VmId, std::unique_ptr<VmControlBlock>> vms_;
  VmId next_id_ = 1;
  Status health_;
  SubmissionQueueFactory queue_factory_;  // before fv_host_: outlives the queues it made
  std::unique_ptr<FvHost> fv_host_;       // while fv VMs exist (or VRAM is quarantined)
  size_t fv_vms_ = 0;
  // VRAM of removed fv VMs whose guests may still reach it; after fv_host_ (its maps use its pool).
  struct Quarantined {
    std::unique_ptr<VramMap> vram;
    std::function<bool()> gone;  // true once the guest can no longer run
    std::string fields;          // VmControlBlock::LogFields()
  };
  std::vector<Quarantined> quarantine_;
  // A line about the VM whose LogFields() are `fields`.
  void Log(LogLevel level, const std::string& fields, const std::string& msg) const {
    if (options_.log) options_.log(LogEvent(level, fields, msg));
  }
  // The last fv VM is gone and nothing is quarantined: the GPU goes back to a known state.
  Status ResetFvHostIfUnused();
  // ReapQuarantine without the reset (safe inside an allocation from the pool).
  size_t ReleaseGoneQuarantine();
};

}  // namespace gpuvm::aggregator

#endif  // GPUVM_AGGREGATOR_AGGREGATOR_H_
