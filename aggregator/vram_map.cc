#include "aggregator/vram_map.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace gpuvm::aggregator {

const char* VramPolicyName(VramPolicy policy) {
  return policy == VramPolicy::kStatic ? "static" : "dynamic";
}

Result<VramPolicy> ParseVramPolicy(std::string_view text) {
  if (text == "static") return VramPolicy::kStatic;
  if (text == "dynamic") return VramPolicy::kDynamic;
  return Status::InvalidArgument("unknown VRAM policy '" + std::string(text) +
                                 "' (static, dynamic)");
}

Result<std::unique_ptr<VramMap>> VramMap::Create(VramPolicy policy, ReservedVram* pool,
                                                 VramAccess* vram, uint64_t guest_bytes) {
  if (guest_bytes == 0 || guest_bytes % kChunk != 0) {
    return Status::InvalidArgument("fv: a VM's VRAM must be a whole number of 128 KiB chunks");
  }
  const uint64_t pool_bytes = pool->end() - pool->begin();
  std::unique_ptr<VramMap> map(new VramMap(policy, pool, vram, guest_bytes));
  if (policy == VramPolicy::kDynamic) {
    if (guest_bytes > pool_bytes) {
      return Status::ResourceExhausted("fv: no free VRAM for a VM of " +
                                       std::to_string(guest_bytes >> 20) + " MiB: the GPU has " +
                                       std::to_string(pool_bytes >> 20) +
                                       " MiB for VMs (dynamic allocation over-commits, but no "
                                       "VM may be larger than that)");
    }
    map->chunks_.assign(guest_bytes >> kChunkShift, 0);
    return map;
  }
  Result<uint64_t> base = pool->Allocate(guest_bytes);
  if (!base.ok()) {
    return Status::ResourceExhausted("fv: no free VRAM slice of " +
                                     std::to_string(guest_bytes >> 20) + " MiB (" +
                                     std::to_string(pool->used() >> 20) + " MiB of " +
                                     std::to_string(pool_bytes >> 20) + " MiB given to VMs)");
  }
  map->static_base_ = *base;
  map->assigned_chunks_ = guest_bytes >> kChunkShift;
  // Nothing of a previous owner may show through.
  vram->Fill(*base, 0, guest_bytes);
  return map;
}

VramMap::~VramMap() {
  if (policy_ == VramPolicy::kStatic) {
    vram_->Fill(static_base_, 0, guest_bytes_);
    pool_->Free(static_base_, guest_bytes_);
    return;
  }
  // Dynamic chunks are zeroed when next assigned; freeing is enough.
  for (uint64_t chunk : chunks_) {
    if (chunk != 0) pool_->Free(chunk, kChunk);
  }
}

Result<uint64_t> VramMap::Assign(uint64_t address) {
  if (address >= guest_bytes_) {
    return Status::OutOfRange("guest VRAM address past the VM's " +
                              std::to_string(guest_bytes_ >> 20) + " MiB");
  }
  if (policy_ == VramPolicy::kStatic) return static_base_ + address;
  uint64_t& chunk = chunks_[address >> kChunkShift];
  if (chunk == 0) {
    Result<uint64_t> machine = pool_->Allocate(kChunk);
    if (!machine.ok() || (*machine & (kChunk - 1)) != 0) {
      if (machine.ok()) pool_->Free(*machine, kChunk);
      ++exhausted_;
      return Status::ResourceExhausted(
          "the GPU's VRAM is over-committed and full: no chunk left for this VM (" +
          std::to_string(assigned_bytes() >> 20) + " MiB of its " +
          std::to_string(guest_bytes_ >> 20) + " MiB assigned)");
    }
    // Zeroed before the guest (or the GPU on its behalf) can see it.
    vram_->Fill(*machine, 0, kChunk);
    chunk = *machine;
    ++assigned_chunks_;
  }
  return chunk + (address & (kChunk - 1));
}

bool VramMap::Read(uint64_t address, void* out, size_t length) const {
  if (length > guest_bytes_ || address > guest_bytes_ - length) {
    std::memset(out, 0, length);
    return false;
  }
  auto* bytes = static_cast<uint8_t*>(out);
  if (policy_ == VramPolicy::kStatic) {
    if (length > 0) vram_->Read(static_base_ + address, bytes, length);
    return true;
  }
  for (size_t done = 0; done < length;) {
    const uint64_t at = address + done;
    const size_t n = size_t(std::min<uint64_t>(length - done, kChunk - (at & (kChunk - 1))));
    const uint64_t machine = Lookup(at);
    if (machine == 0) {
      std::memset(bytes + done, 0, n);
    } else {
      vram_->Read(machine, bytes + done, n);
    }
    done += n;
  }
  return true;
}

bool VramMap::Write(uint64_t address, const void* data, size_t length) {
  if (length > guest_bytes_ || address > guest_bytes_ - length) return false;
  const auto* bytes = static_cast<const uint8_t*>(data);
  if (policy_ == VramPolicy::kStatic) {
    if (length > 0) vram_->Write(static_base_ + address, bytes, length);
    return true;
  }
  bool all = true;
  for (size_t done = 0; done < length;) {
    const uint64_t at = address + done;
    const size_t n = size_t(std::min<uint64_t>(length - done, kChunk - (at & (kChunk - 1))));
    Result<uint64_t> machine = Assign(at);
    if (machine.ok()) {
      vram_->Write(*machine, bytes + done, n);
    } else {
      all = false;
    }
    done += n;
  }
  return all;
}

}  // namespace gpuvm::aggregator
