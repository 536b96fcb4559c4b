// Grant sharing (libxengntshr) and mapping (libxengnttab).
#include <sys/mman.h>

#include <cerrno>
#include <memory>
#include <vector>

#include "hypervisor/xen/libxen.h"
#include "hypervisor/xen/xen_backend.h"

namespace gpuvm::hv::xen {
namespace {

class XenSharedPages : public SharedPages {
 public:
  XenSharedPages(std::shared_ptr<xengntshr_handle> h, void* addr, std::vector<GrantRef> refs)
      : h_(std::move(h)), addr_(addr), refs_(std::move(refs)) {}
  // gntshr defers freeing the pages until the peer unmaps them.
  ~XenSharedPages() override { xengntshr_unshare(h_.get(), addr_, refs_.size()); }
  std::span<const GrantRef> refs() const override { return refs_; }
  std::span<uint8_t> bytes() override {
    return {static_cast<uint8_t*>(addr_), refs_.size() << kPageShift};
  }

 private:
  std::shared_ptr<xengntshr_handle> h_;
  void* addr_;
  std::vector<GrantRef> refs_;
};

class XenGrantSharer : public GrantSharer {
 public:
  explicit XenGrantSharer(std::shared_ptr<xengntshr_handle> h) : h_(std::move(h)) {}
  Result<std::unique_ptr<SharedPages>> Share(DomainId peer, uint32_t pages,
                                             Access peer_access) override {
    if (pages == 0) return Status::InvalidArgument("sharing zero pages");
    std::vector<GrantRef> refs(pages);
    static_assert(sizeof(GrantRef) == sizeof(uint32_t));
    void* addr = xengntshr_share_pages(h_.get(), peer, pages, refs.data(),
                                       peer_access == Access::kReadWrite ? 1 : 0);
    if (addr == nullptr) return CallFailed("gntshr share_pages", errno);
    return std::unique_ptr<SharedPages>(new XenSharedPages(h_, addr, std::move(refs)));
  }

 private:
  std::shared_ptr<xengntshr_handle> h_;
};

class XenGrantMapping : public GuestMapping {
 public:
  XenGrantMapping(std::shared_ptr<xengnttab_handle> h, void* addr, uint32_t count)
      : h_(std::move(h)), addr_(addr), count_(count) {}
  ~XenGrantMapping() override { xengnttab_unmap(h_.get(), addr_, count_); }
  std::span<uint8_t> bytes() override {
    return {static_cast<uint8_t*>(addr_), uint64_t{count_} << kPageShift};
  }

 private:
  std::shared_ptr<xengnttab_handle> h_;
  void* addr_;
  uint32_t count_;
};

class XenGrantMapper : public GrantMapper {
 public:
  explicit XenGrantMapper(std::shared_ptr<xengnttab_handle> h) : h_(std::move(h)) {}
  Result<std::unique_ptr<GuestMapping>> Map(DomainId granter, std::span<const GrantRef> refs,
                                            Access access) override {
    if (refs.empty()) return Status::InvalidArgument("mapping zero grants");
    if (refs.size() > 4096) return Status::InvalidArgument("too many grants in one mapping");
    std::vector<uint32_t> copy(refs.begin(), refs.end());
    const int prot = PROT_READ | (access == Access::kReadWrite ? PROT_WRITE : 0);
    void* addr = xengnttab_map_domain_grant_refs(h_.get(), static_cast<uint32_t>(copy.size()),
                                                 granter, copy.data(), prot);
    if (addr == nullptr) {
      const int err = errno;
      if (err == EINVAL || err == EPERM || err == EACCES) {
        return Status::PermissionDenied("domain " + std::to_string(granter) +
                                        " did not grant these refs to us");
      }
      return CallFailed("gnttab map_domain_grant_refs", err);
    }
    return std::unique_ptr<GuestMapping>(
        new XenGrantMapping(h_, addr, static_cast<uint32_t>(copy.size())));
  }

 private:
  std::shared_ptr<xengnttab_handle> h_;
};

}  // namespace

Result<std::unique_ptr<GrantSharer>> OpenGrantSharer() {
  GPUVM_ASSIGN_OR_RETURN(GntshrHandle h, OpenGntshr());
  return std::unique_ptr<GrantSharer>(new XenGrantSharer(
      std::shared_ptr<xengntshr_handle>(h.release(), GntshrHandle::deleter_type())));
}

Result<std::unique_ptr<GrantMapper>> OpenGrantMapper() {
  GPUVM_ASSIGN_OR_RETURN(GnttabHandle h, OpenGnttab());
  return std::unique_ptr<GrantMapper>(new XenGrantMapper(
      std::shared_ptr<xengnttab_handle>(h.release(), GnttabHandle::deleter_type())));
}

}  // namespace gpuvm::hv::xen
