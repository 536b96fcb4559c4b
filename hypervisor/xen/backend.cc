// The Xen backend behind the port's factory (hypervisor/backend.h): each call opens what it needs
// through this folder's entry points (xen_backend.h), so the Backend itself holds nothing and opens
// anywhere; without Xen its calls answer Unavailable.
#include "hypervisor/backend_constructors.h"
#include "hypervisor/xen/xen_backend.h"

namespace gpuvm::hv::xen {
namespace {

class XenBackend final : public Backend {
 public:
  BackendKind kind() const override { return BackendKind::kXen; }

  Status CreateDomain(const DomainConfig&) override {
    return Status::Unimplemented("xen: domains are created by the toolstack (xl), not here");
  }
  Result<std::unique_ptr<IoreqServer>> CreateIoreqServer(DomainId domid) override {
    return xen::CreateIoreqServer(domid);
  }
  Result<std::unique_ptr<GuestMemory>> OpenGuestMemory(DomainId domid) override {
    return xen::OpenGuestMemory(domid);
  }
  // A Xen domain's RAM is not a descriptor: a peer in dom0 maps the domain's frames itself.
  Result<int> GuestRamFd(DomainId) override { return -1; }
  Result<std::unique_ptr<GuestMapping>> MapGuestRam(DomainId domid, uint64_t frames,
                                                    uint64_t* holes) override {
    return xen::MapGuestRam(domid, frames, holes);
  }
  Result<std::unique_ptr<GuestIo>> OpenGuestIo(DomainId, const GuestIoOptions&) override {
    return Status::Unimplemented(
        "xen: an HVM guest's accesses trap in hardware (inside the guest: the sysfs bus)");
  }
  Result<std::unique_ptr<EventChannels>> OpenEventChannels() override {
    return xen::OpenEventChannels();
  }
  Result<std::unique_ptr<GrantSharer>> OpenGrantSharer() override { return xen::OpenGrantSharer(); }
  Result<std::unique_ptr<GrantMapper>> OpenGrantMapper() override { return xen::OpenGrantMapper(); }
  Result<std::unique_ptr<Store>> OpenStore() override { return xen::OpenStore(); }
};

}  // namespace

std::unique_ptr<Backend> NewBackend() { return std::make_unique<XenBackend>(); }

}  // namespace gpuvm::hv::xen

namespace gpuvm::hv {

std::unique_ptr<Backend> NewXenBackend() { return xen::NewBackend(); }

}  // namespace gpuvm::hv
