// Building page lists on the frontend's side (docs/PVDRM.md, "Guest pages: page lists"): shared
// indirect pages listing the grant references of shared data pages, which hold GEM_PUSHBUF's
// arrays or GEM_NEW's guest frame numbers.
//
// Threading: functions; a SharedPageList belongs to its owner, and keeps its pages granted until
// it is destroyed.
#ifndef GPUVM_PVDRM_FRONTEND_PAGE_LISTS_H_
#define GPUVM_PVDRM_FRONTEND_PAGE_LISTS_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "hypervisor/grants.h"
#include "pvdrm-frontend/protocol/codec.h"

namespace gpuvm::pvdrm {

struct SharedPageList {
  PageList list;
  std::unique_ptr<hv::SharedPages> data;  // the data pages (ShareDataPages), else null
  std::unique_ptr<hv::SharedPages> indirect;
};

// Indirect pages listing `entries` (1..kMaxListedPages), shared read-only with `peer`.
Result<SharedPageList> ShareEntryList(hv::GrantSharer& sharer, hv::DomainId peer,
                                      std::span<const uint32_t> entries);
// `pages` zeroed data pages shared with `peer` (fill them through data->bytes()), and indirect
// pages listing their references.
Result<SharedPageList> ShareDataPages(hv::GrantSharer& sharer, hv::DomainId peer, uint32_t pages,
                                      hv::Access access = hv::Access::kReadWrite);
// GEM_NEW's list: `frames` (1..kMaxGemFrames guest frame numbers) written into frame-list pages
// shared read-only with `peer`.
Result<SharedPageList> ShareFrameList(hv::GrantSharer& sharer, hv::DomainId peer,
                                      std::span<const uint32_t> frames);

}  // namespace gpuvm::pvdrm

#endif  // GPUVM_PVDRM_FRONTEND_PAGE_LISTS_H_
