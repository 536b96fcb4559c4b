#include "pvdrm-frontend/page_lists.h"

#include <cstring>
#include <string>
#include <utility>

namespace gpuvm::pvdrm {

Result<SharedPageList> ShareEntryList(hv::GrantSharer& sharer, hv::DomainId peer,
                                      std::span<const uint32_t> entries) {
  if (entries.empty() || entries.size() > kMaxListedPages) {
    return Status::InvalidArgument("a page list holds 1 to " + std::to_string(kMaxListedPages) +
                                   " entries");
  }
  const uint32_t count = uint32_t(entries.size());
  SharedPageList shared;
  GPUVM_ASSIGN_OR_RETURN(shared.indirect,
                         sharer.Share(peer, IndirectPagesFor(count), hv::Access::kReadOnly));
  std::memcpy(shared.indirect->bytes().data(), entries.data(), entries.size_bytes());
  shared.list.nr_pages = count;
  const std::span<const hv::GrantRef> refs = shared.indirect->refs();
  shared.list.indirect.assign(refs.begin(), refs.end());
  return shared;
}

Result<SharedPageList> ShareDataPages(hv::GrantSharer& sharer, hv::DomainId peer, uint32_t pages,
                                      hv::Access access) {
  if (pages == 0 || pages > kMaxListedPages) {
    return Status::InvalidArgument("a page list holds 1 to " + std::to_string(kMaxListedPages) +
                                   " pages");
  }
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<hv::SharedPages> data, sharer.Share(peer, pages, access));
  const std::span<const hv::GrantRef> refs = data->refs();
  GPUVM_ASSIGN_OR_RETURN(SharedPageList shared, ShareEntryList(sharer, peer, refs));
  shared.data = std::move(data);
  return shared;
}

Result<SharedPageList> ShareFrameList(hv::GrantSharer& sharer, hv::DomainId peer,
                                      std::span<const uint32_t> frames) {
  if (frames.empty() || frames.size() > kMaxGemFrames) {
    return Status::InvalidArgument("a GEM object lists 1 to " + std::to_string(kMaxGemFrames) +
                                   " frames");
  }
  const uint32_t pages = uint32_t((frames.size() + kFramesPerListPage - 1) / kFramesPerListPage);
  GPUVM_ASSIGN_OR_RETURN(SharedPageList shared,
                         ShareDataPages(sharer, peer, pages, hv::Access::kReadOnly));
  std::memcpy(shared.data->bytes().data(), frames.data(), frames.size_bytes());
  return shared;
}

}  // namespace gpuvm::pvdrm
