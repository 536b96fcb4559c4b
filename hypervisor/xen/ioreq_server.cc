// The Xen IOREQ server. The ioreq pages' state machine and translation live in xen_abi (tested
// without Xen); this file is only the libxen sequence around them.
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include "hypervisor/xen/libxen.h"
#include "hypervisor/xen/memory_mapping.h"
#include "hypervisor/xen/xen_backend.h"
#include "hypervisor/xen_abi/ioreq_page.h"

namespace gpuvm::hv::xen {
namespace {

// How far setup got; teardown undoes exactly the steps reached, newest first (as demu does).
enum class Step {
  kNothing,
  kHandlesOpen,
  kServerCreated,
  kPagesMapped,
  kEnabled,
  kPortsBound,
};

class XenIoreqServer : public IoreqServer {
 public:
  explicit XenIoreqServer(DomainId domid) : domid_(domid) {}
  ~XenIoreqServer() override { Teardown(); }

  Status Setup();

  DomainId domain() const override { return domid_; }
  uint32_t vcpu_count() const override { return vcpus_; }
  Status MapPciDevice(const Sbdf& sbdf) override;
  Status UnmapPciDevice(const Sbdf& sbdf) override;
  Status MapMmioRange(uint64_t first, uint64_t last) override;
  Status UnmapMmioRange(uint64_t first, uint64_t last) override;
  Status MapMemoryRange(uint64_t first, uint64_t last, const MemoryBacking& backing) override;
  Status UnmapMemoryRange(uint64_t first, uint64_t last) override;
  int wait_fd() const override { return xenevtchn_fd(evtchn_.get()); }
  Result<std::optional<IoRequest>> Poll() override;
  Status Complete(const IoRequest& request, uint64_t read_value) override;
  Status SetPciIntxLevel(const Sbdf& sbdf, uint8_t pin, bool asserted) override;
  Status InjectMsi(uint64_t address, uint32_t data) override;

 private:
  void Teardown();
  // Pauses the domain with no vCPU inside an access of ours; Unavailable when one is (see
  // PauseWithIdleVcpus's definition). On Ok the caller changes the p2m, then unpauses.
  Status PauseWithIdleVcpus();

  const DomainId domid_;
  Step step_ = Step::kNothing;
  DeviceModelHandle dm_;
  ForeignMemoryHandle fmem_;
  EvtchnHandle evtchn_;
  ioservid_t id_ = 0;
  uint32_t vcpus_ = 0;
  xenforeignmemory_resource_handle* pages_ = nullptr;
  void* pages_addr_ = nullptr;
  std::unique_ptr<xen_abi::IoreqDispatcher> dispatcher_;
  std::vector<evtchn_port_t> vcpu_ports_;  // local port per vCPU
  std::optional<evtchn_port_t> buffered_port_;
  std::vector<Sbdf> pci_devices_;
  MmioRangeList ranges_;
  ControlHandle xc_;  // libxenctrl, opened on the first memory range
  struct MemoryRange {
    uint64_t first, last;
    MemoryMappingPlan plan;
  };
  std::vector<MemoryRange> memory_ranges_;  // BAR remap: guest frames backed by machine frames
};

Status XenIoreqServer::Setup() {
  GPUVM_ASSIGN_OR_RETURN(dm_, OpenDeviceModel());
  GPUVM_ASSIGN_OR_RETURN(fmem_, OpenForeignMemory());
  GPUVM_ASSIGN_OR_RETURN(evtchn_, OpenEvtchn());
  step_ = Step::kHandlesOpen;

  unsigned int vcpus = 0;
  if (xendevicemodel_nr_vcpus(dm_.get(), domid_, &vcpus) != 0) {
    return CallFailed("nr_vcpus of domain " + std::to_string(domid_), errno);
  }
  if (vcpus == 0 || vcpus > xen_abi::kMaxVcpusPerPage) {
    return Status::Unimplemented("domain " + std::to_string(domid_) + " has " +
                                 std::to_string(vcpus) + " vCPUs; one ioreq page serves at most " +
                                 std::to_string(xen_abi::kMaxVcpusPerPage));
  }
  vcpus_ = vcpus;

  if (xendevicemodel_create_ioreq_server(dm_.get(), domid_, HVM_IOREQSRV_BUFIOREQ_ATOMIC, &id_) !=
      0) {
    return CallFailed("create_ioreq_server", errno);
  }
  step_ = Step::kServerCreated;

  // Resource frames: 0 = the buffered page, 1 = the first synchronous page (xen/memory.h).
  static_assert(XENMEM_resource_ioreq_server_frame_bufioreq == 0);
  static_assert(XENMEM_resource_ioreq_server_frame_ioreq(0) == 1);
  pages_ = xenforeignmemory_map_resource(fmem_.get(), domid_, XENMEM_resource_ioreq_server, id_,
                                         XENMEM_resource_ioreq_server_frame_bufioreq, 2,
                                         &pages_addr_, PROT_READ | PROT_WRITE, 0);
  if (pages_ == nullptr) return CallFailed("map_resource of the ioreq pages", errno);
  step_ = Step::kPagesMapped;
  auto* base = static_cast<uint8_t*>(pages_addr_);
  dispatcher_ = std::make_unique<xen_abi::IoreqDispatcher>(base + kPageSize, base, vcpus_);

  evtchn_port_t buffered_remote = 0;
  if (xendevicemodel_get_ioreq_server_info(dm_.get(), domid_, id_, nullptr, nullptr,
                                           &buffered_remote) != 0) {
    return CallFailed("get_ioreq_server_info", errno);
  }
  if (xendevicemodel_set_ioreq_server_state(dm_.get(), domid_, id_, 1) != 0) {
    return CallFailed("enable ioreq server", errno);
  }
  step_ = Step::kEnabled;

  // The per-vCPU ports are meaningful only once the server is enabled.
  for (uint32_t v = 0; v < vcpus_; ++v) {
    const xenevtchn_port_or_error_t local =
        xenevtchn_bind_interdomain(evtchn_.get(), domid_, dispatcher_->event_port(v));
    if (local < 0) return CallFailed("bind vCPU " + std::to_string(v) + " event channel", errno);
    vcpu_ports_.push_back(static_cast<evtchn_port_t>(local));
    step_ = Step::kPortsBound;  // at least one port to unbind from here on
  }
  const xenevtchn_port_or_error_t buffered =
      xenevtchn_bind_interdomain(evtchn_.get(), domid_, buffered_remote);
  if (buffered < 0) return CallFailed("bind buffered ioreq event channel", errno);
  buffered_port_ = static_cast<evtchn_port_t>(buffered);
  step_ = Step::kPortsBound;
  return Status::Ok();
}

void XenIoreqServer::Teardown() {
  // Remapped frames go first: the guest must not keep machine frames its device model let go of.
  for (const MemoryRange& r : memory_ranges_) {
    xc_domain_memory_mapping(xc_.get(), domid_, r.plan.first_gfn, r.plan.first_mfn, r.plan.frames,
                             DPCI_REMOVE_MAPPING);
    xc_domain_iomem_permission(xc_.get(), domid_, r.plan.first_mfn, r.plan.frames, 0);
  }
  memory_ranges_.clear();
  // Unclaim first so no new request is routed to a server that is going away.
  if (step_ >= Step::kServerCreated) {
    for (const auto& [first, last] : ranges_) {
      xendevicemodel_unmap_io_range_from_ioreq_server(dm_.get(), domid_, id_, 1, first, last);
    }
    for (const Sbdf& s : pci_devices_) {
      xendevicemodel_unmap_pcidev_from_ioreq_server(dm_.get(), domid_, id_, s.segment, s.bus,
                                                    s.device, s.function);
    }
  }
  switch (step_) {
    case Step::kPortsBound:
      if (dispatcher_) {
        for (uint32_t v : dispatcher_->AbandonInFlight()) {
          if (v < vcpu_ports_.size()) xenevtchn_notify(evtchn_.get(), vcpu_ports_[v]);
        }
      }
      if (buffered_port_) xenevtchn_unbind(evtchn_.get(), *buffered_port_);
      for (evtchn_port_t port : vcpu_ports_) xenevtchn_unbind(evtchn_.get(), port);
      [[fallthrough]];
    case Step::kEnabled:
      xendevicemodel_set_ioreq_server_state(dm_.get(), domid_, id_, 0);
      [[fallthrough]];
    case Step::kPagesMapped:
      dispatcher_.reset();
      xenforeignmemory_unmap_resource(fmem_.get(), pages_);
      [[fallthrough]];
    case Step::kServerCreated:
      xendevicemodel_destroy_ioreq_server(dm_.get(), domid_, id_);
      [[fallthrough]];
    case Step::kHandlesOpen:
    case Step::kNothing:
      break;
  }
  step_ = Step::kNothing;
  // The handles close as members are destroyed.
}

Status XenIoreqServer::MapPciDevice(const Sbdf& s) {
  if (!s.valid()) return Status::InvalidArgument("invalid PCI address " + s.ToString());
  if (std::find(pci_devices_.begin(), pci_devices_.end(), s) != pci_devices_.end()) {
    return Status::AlreadyExists("PCI device " + s.ToString() + " already claimed");
  }
  if (xendevicemodel_map_pcidev_to_ioreq_server(dm_.get(), domid_, id_, s.segment, s.bus, s.device,
                                                s.function) != 0) {
    return CallFailed("map_pcidev_to_ioreq_server " + s.ToString(), errno);
  }
  pci_devices_.push_back(s);
  return Status::Ok();
}

Status XenIoreqServer::UnmapPciDevice(const Sbdf& s) {
  auto it = std::find(pci_devices_.begin(), pci_devices_.end(), s);
  if (it == pci_devices_.end())
    return Status::NotFound("PCI device " + s.ToString() + " not claimed");
  pci_devices_.erase(it);
  if (xendevicemodel_unmap_pcidev_from_ioreq_server(dm_.get(), domid_, id_, s.segment, s.bus,
                                                    s.device, s.function) != 0) {
    return CallFailed("unmap_pcidev_from_ioreq_server " + s.ToString(), errno);
  }
  return Status::Ok();
}

// Xen finishes a trapped access by running the instruction again once we answered; a rep
// instruction whose pages changed p2m type in between computes another repeat count than the ioreq
// it issued, and Xen crashes the domain (hvm/emulate.c; seen in the test bed: a rep stosq over BAR3
// while the BAR_MAP its own fill caused was applied). So the p2m changes only with the domain
// paused and every slot of ours idle (NONE, or the request being served right now): a vCPU paused
// with an idle slot has finished its last access here (Xen takes our answer and re-executes in one
// pass before the vCPU can be descheduled). A slot holding a request the device model has yet to
// serve (READY) is Unavailable at once: the caller serves it and tries again; one whose answer the
// vCPU has yet to take (IORESP_READY) is given the CPU for up to ~100 ms first.
Status XenIoreqServer::PauseWithIdleVcpus() {
  if (!xc_) {
    GPUVM_ASSIGN_OR_RETURN(xc_, OpenControl());
  }
  for (int attempt = 0;; ++attempt) {
    if (xc_domain_pause(xc_.get(), domid_) != 0) return CallFailed("domain_pause", errno);
    bool idle = true, waiting_for_us = false;
    for (uint32_t v = 0; v < vcpus_; ++v) {
      const uint8_t state = dispatcher_->state(v);
      // INPROCESS is the request we are serving right now (a guest moving a BAR: a config-space
      // access, no rep over BAR pages), whose instruction this change cannot disturb.
      idle = idle && (state == STATE_IOREQ_NONE || state == STATE_IOREQ_INPROCESS);
      waiting_for_us = waiting_for_us || state == STATE_IOREQ_READY;
    }
    if (idle) return Status::Ok();
    xc_domain_unpause(xc_.get(), domid_);
    if (waiting_for_us || attempt >= 1000) {
      return Status::Unavailable("a vCPU of domain " + std::to_string(domid_) +
                                 " is inside a trapped access");
    }
    ::usleep(100);
  }
}

Status XenIoreqServer::MapMemoryRange(uint64_t first, uint64_t last, const MemoryBacking& backing) {
  MemoryBacking machine = backing;
  if (backing.fd >= 0) {
    // Device memory named by a PCI resource file (the software GPU's VRAM in a BAR): its frames.
    if (first > last) return Status::InvalidArgument("memory range ends before it starts");
    GPUVM_ASSIGN_OR_RETURN(machine,
                           MachineBackingOfFd(backing.fd, backing.offset, last - first + 1));
  }
  GPUVM_ASSIGN_OR_RETURN(MemoryMappingPlan plan, PlanMemoryMapping(first, last, machine));
  for (const MemoryRange& r : memory_ranges_) {
    if (first <= r.last && r.first <= last) {
      return Status::AlreadyExists("memory range " + Hex(first) + "-" + Hex(last) + " overlaps " +
                                   Hex(r.first) + "-" + Hex(r.last));
    }
  }
  GPUVM_RETURN_IF_ERROR(PauseWithIdleVcpus());
  // The domain may hold those machine frames, then its p2m maps them (QEMU's pass-through order).
  Status result;
  if (xc_domain_iomem_permission(xc_.get(), domid_, plan.first_mfn, plan.frames, 1) != 0) {
    result = CallFailed("iomem_permission " + Hex(machine.machine_address), errno);
  } else if (xc_domain_memory_mapping(xc_.get(), domid_, plan.first_gfn, plan.first_mfn,
                                      plan.frames, DPCI_ADD_MAPPING) != 0) {
    result = CallFailed("memory_mapping " + Hex(first) + "-" + Hex(last), errno);
    xc_domain_iomem_permission(xc_.get(), domid_, plan.first_mfn, plan.frames, 0);
  } else {
    memory_ranges_.push_back({first, last, plan});
  }
  xc_domain_unpause(xc_.get(), domid_);
  return result;
}

Status XenIoreqServer::UnmapMemoryRange(uint64_t first, uint64_t last) {
  for (auto it = memory_ranges_.begin(); it != memory_ranges_.end(); ++it) {
    if (it->first != first || it->last != last) continue;
    GPUVM_RETURN_IF_ERROR(PauseWithIdleVcpus());  // as for MapMemoryRange
    const MemoryMappingPlan plan = it->plan;
    memory_ranges_.erase(it);
    Status result;
    if (xc_domain_memory_mapping(xc_.get(), domid_, plan.first_gfn, plan.first_mfn, plan.frames,
                                 DPCI_REMOVE_MAPPING) != 0) {
      result = CallFailed("memory_mapping remove " + Hex(first) + "-" + Hex(last), errno);
    } else {
      xc_domain_iomem_permission(xc_.get(), domid_, plan.first_mfn, plan.frames, 0);
    }
    xc_domain_unpause(xc_.get(), domid_);
    return result;
  }
  return Status::NotFound("memory range " + Hex(first) + "-" + Hex(last) + " not mapped");
}

Status XenIoreqServer::MapMmioRange(uint64_t first, uint64_t last) {
  if (first > last) return Status::InvalidArgument("MMIO range ends before it starts");
  GPUVM_RETURN_IF_ERROR(CheckNoOverlap(ranges_, first, last));
  if (xendevicemodel_map_io_range_to_ioreq_server(dm_.get(), domid_, id_, 1, first, last) != 0) {
    return CallFailed("map_io_range_to_ioreq_server " + Hex(first) + "-" + Hex(last), errno);
  }
  ranges_.emplace_back(first, last);
  return Status::Ok();
}

Status XenIoreqServer::UnmapMmioRange(uint64_t first, uint64_t last) {
  GPUVM_RETURN_IF_ERROR(RemoveRange(ranges_, first, last));
  if (xendevicemodel_unmap_io_range_from_ioreq_server(dm_.get(), domid_, id_, 1, first, last) !=
      0) {
    return CallFailed("unmap_io_range_from_ioreq_server", errno);
  }
  return Status::Ok();
}

Result<std::optional<IoRequest>> XenIoreqServer::Poll() {
  // Consume and unmask every pending port before scanning the pages: a notification that arrives
  // after the unmask leaves the fd readable, so nothing is missed. xenevtchn_pending blocks on an
  // empty device, hence the zero-timeout poll first.
  for (;;) {
    pollfd pfd{xenevtchn_fd(evtchn_.get()), POLLIN, 0};
    if (::poll(&pfd, 1, 0) <= 0) break;
    const xenevtchn_port_or_error_t port = xenevtchn_pending(evtchn_.get());
    if (port < 0) return CallFailed("evtchn pending", errno);
    if (xenevtchn_unmask(evtchn_.get(), static_cast<evtchn_port_t>(port)) != 0) {
      return CallFailed("evtchn unmask", errno);
    }
  }
  return dispatcher_->Next();
}

Status XenIoreqServer::Complete(const IoRequest& request, uint64_t read_value) {
  GPUVM_ASSIGN_OR_RETURN(bool notify, dispatcher_->Complete(request, read_value));
  if (!notify) return Status::Ok();
  if (xenevtchn_notify(evtchn_.get(), vcpu_ports_.at(request.vcpu)) != 0) {
    return CallFailed("notify vCPU " + std::to_string(request.vcpu), errno);
  }
  return Status::Ok();
}

Status XenIoreqServer::SetPciIntxLevel(const Sbdf& s, uint8_t pin, bool asserted) {
  if (pin > 3) return Status::InvalidArgument("INTx pin must be 0..3 (INTA..INTD)");
  if (xendevicemodel_set_pci_intx_level(dm_.get(), domid_, s.segment, s.bus, s.device, pin,
                                        asserted ? 1 : 0) != 0) {
    return CallFailed("set_pci_intx_level", errno);
  }
  return Status::Ok();
}

Status XenIoreqServer::InjectMsi(uint64_t address, uint32_t data) {
  if (xendevicemodel_inject_msi(dm_.get(), domid_, address, data) != 0) {
    return CallFailed("inject_msi", errno);
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<IoreqServer>> CreateIoreqServer(DomainId domid) {
  auto server = std::make_unique<XenIoreqServer>(domid);
  GPUVM_RETURN_IF_ERROR(server->Setup());  // on failure the destructor unwinds what was reached
  return std::unique_ptr<IoreqServer>(std::move(server));
}

}  // namespace gpuvm::hv::xen
