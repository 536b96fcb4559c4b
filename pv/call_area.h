// A VM's registered call area, as the host holds it (docs/PARAVIRT.md, "The call area"): the
// guest-physical addresses of its pages, copied once out of the guest's page list at registration
// and checked to be whole pages of the VM's RAM. At a doorbell the host copies the batch out of the
// area once (Copy) and decodes only that copy (call_page.h); the answers go back into the guest's
// pages (Store32) at offsets taken from the copy. Nothing here re-reads guest memory.
//
// Guest RAM is the host's mapping of the VM's RAM (guest-physical 0 at ram.data()).
//
// Threading: a value; the owner serializes access (the aggregator's owner thread).
#ifndef GPUVM_PV_CALL_AREA_H_
#define GPUVM_PV_CALL_AREA_H_

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"

namespace gpuvm::pv {

class CallArea {
 public:
  CallArea() = default;

  // Copies `pages` addresses (u64, little endian) from the page list at guest-physical `list` and
  // checks each. InvalidArgument saying what is wrong when `pages` is 0 or past kMaxAreaPages, the
  // list is not inside RAM, or an address is not page aligned or not a whole page of RAM.
  static Result<CallArea> Register(std::span<const uint8_t> ram, uint64_t list, uint32_t pages);

  bool registered() const { return !pages_.empty(); }
  uint32_t pages() const { return uint32_t(pages_.size()); }
  uint64_t bytes() const;
  // The guest-physical address of area byte `offset` (< bytes()).
  uint64_t Address(uint64_t offset) const;

  // Area bytes [0, length) copied out of `ram` (length <= bytes(), checked by the caller; the pages
  // were checked at registration and RAM does not shrink).
  std::vector<uint8_t> Copy(std::span<const uint8_t> ram, uint64_t length) const;
  // Stores `value` at area offset `offset` (4-byte aligned, offset + 4 <= bytes()): a result.
  void Store32(std::span<uint8_t> ram, uint64_t offset, uint32_t value) const;

 private:
  std::vector<uint64_t> pages_;
};

}  // namespace gpuvm::pv

#endif  // GPUVM_PV_CALL_AREA_H_
