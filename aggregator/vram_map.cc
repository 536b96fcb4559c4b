#include "aggregator/vram_map.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
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
  if (vram->can_back()) {
    // The VM's own VRAM: what BAR remap hands its guest (file offset = guest address).
    GPUVM_ASSIGN_OR_RETURN(map->file_, os::CreateSealedMemfd("gpuvm-vm-vram", guest_bytes));
  }
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
  if (map->file_.valid()) {
    // The slice is the VM's fresh (zero) file: nothing of a previous owner can show through.
    // Mapped, not populated: a program uses a few MiB of its VM's slice (128 MiB by default), and
    // populating it all allocated and zeroed every page on the owner thread at admission (~70 ms
    // per pv VM, every other VM's traps waiting) and kept it resident for the VM's life.
    if (Status backed = vram->Back(*base, guest_bytes, map->file_.get(), 0, /*populate=*/false);
        !backed.ok()) {
      pool->Free(*base, guest_bytes);
      return backed.WithContext("fv: backing the VM's VRAM slice with its own memory");
    }
  } else {
    // Nothing of a previous owner may show through.
    vram->Fill(*base, 0, guest_bytes);
  }
  map->static_base_ = *base;
  map->assigned_chunks_ = guest_bytes >> kChunkShift;
  return map;
}

VramMap::~VramMap() {
  if (policy_ == VramPolicy::kStatic) {
    if (file_.valid()) {
      Release(static_base_, guest_bytes_);
    } else {
      vram_->Fill(static_base_, 0, guest_bytes_);
      pool_->Free(static_base_, guest_bytes_);
    }
  } else if (file_.valid()) {
    // Runs of consecutive machine chunks, one restore each (chunks are often assigned in order).
    std::vector<uint64_t> machine;
    for (uint64_t chunk : chunks_) {
      if (chunk != 0) machine.push_back(chunk);
    }
    std::sort(machine.begin(), machine.end());
    for (size_t i = 0; i < machine.size();) {
      size_t j = i + 1;
      while (j < machine.size() && machine[j] == machine[i] + (j - i) * kChunk) ++j;
      Release(machine[i], (j - i) * kChunk);
      i = j;
    }
  } else {
    // Dynamic chunks are zeroed when next assigned; freeing is enough.
    for (uint64_t chunk : chunks_) {
      if (chunk != 0) pool_->Free(chunk, kChunk);
    }
  }
  if (file_.valid()) {
    // A guest may still map the file (its device model died): it keeps nothing of the VM's data,
    // and whatever it writes there from now on reaches no GPU page.
    (void)::fallocate(file_.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                      off_t(guest_bytes_));
  }
}

void VramMap::Release(uint64_t machine, uint64_t bytes) {
  if (Status restored = vram_->Restore(machine, bytes); !restored.ok()) {
    // Still (perhaps) the VM's file: the next owner must never get these pages.
    stranded_ += bytes;
    if (log_) {
      char at[32];
      std::snprintf(at, sizeof at, "%#llx", static_cast<unsigned long long>(machine));
      log_(std::to_string(bytes >> 10) + " KiB of VRAM at " + at +
           " kept out of the pool (its VM's file may still back it): " + restored.ToString());
    }
    return;
  }
  pool_->Free(machine, bytes);
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
    if (file_.valid()) {
      // The chunk becomes the VM's file pages at its guest address, punched first: zero, whatever
      // the guest wrote there through a mapping of its file (BAR remap maps the file whole).
      // Mapped, not populated: a PTE naming a chunk (a BAR walk relocates every entry of a BAR's
      // tables) does not mean the GPU will touch it, and populating 128 KiB here made the guest's
      // register write that caused the walk wait (a walk relocating 256 BAR3 entries took
      // 650-700 us, 50-90 us without). The GPU's first reach of each block prefaults it
      // (Vram::Prefault), the CPU's faults in what it touches.
      const uint64_t offset = address & ~(kChunk - 1);
      Status backed = ::fallocate(file_.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                  off_t(offset), off_t(kChunk)) == 0
                          ? vram_->Back(*machine, kChunk, file_.get(), offset,
                                        /*populate=*/false)
                          : Status::FromErrno(errno, "punching the VM's VRAM file");
      if (!backed.ok()) {
        pool_->Free(*machine, kChunk);  // Back left it the GPU's own memory (as it was)
        return backed.WithContext("fv: backing a VRAM chunk with the VM's own memory");
      }
    } else {
      // Zeroed before the guest (or the GPU on its behalf) can see it.
      vram_->Fill(*machine, 0, kChunk);
    }
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
