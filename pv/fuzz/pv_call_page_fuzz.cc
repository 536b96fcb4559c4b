// Fuzz target: what the host runs on every doorbell of a pv guest (docs/PARAVIRT.md). Input: a
// batch as the guest would leave it in its call area. Checked, for every input:
//   - DecodeBatch never crashes and accepts only canonical batches: the accepted calls, built again
//     with BatchBuilder, give back exactly the input bytes; a refused batch names its failure and
//     lists only ops before it;
//   - the entry checks (CheckPte, CheckPde) never crash on any entry of an accepted call;
//   - the host's copy out of a call area whose pages are scattered over a RAM (CallArea) gives the
//     same bytes, and its decoding the same verdict, as the input itself.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "pv/call_area.h"
#include "pv/call_page.h"

namespace pv = gpuvm::pv;

namespace {

void Rebuild(const pv::DecodedBatch& d, std::span<const uint8_t> batch) {
  pv::BatchBuilder b(batch.size());
  for (const pv::Call& c : d.calls) {
    switch (c.op) {
      case pv::Op::kAttach:
        b.Attach(c.space, c.limit, c.kind);
        break;
      case pv::Op::kDetach:
        b.Detach(c.space);
        break;
      case pv::Op::kWrite: {
        std::vector<uint64_t> entries(c.count);
        for (uint32_t i = 0; i < c.count; ++i) entries[i] = pv::EntryOf(c, batch, i);
        b.Write(c.space, c.table, c.first, entries);
        break;
      }
      case pv::Op::kWriteLinear:
        b.WriteLinear(c.space, c.table, c.first, c.count, c.value, c.step);
        break;
      case pv::Op::kClear:
        b.Clear(c.space, c.table, c.first, c.count);
        break;
      case pv::Op::kFlush:
        b.Flush(c.space);
        break;
      case pv::Op::kBarWrite:
        b.BarWrite(c.bar, c.first, batch.subspan(c.entries_offset, c.count));
        break;
      case pv::Op::kBarFill:
        b.BarFill(c.bar, c.first, c.count, uint32_t(c.value));
        break;
    }
  }
  std::span<const uint8_t> again = b.Finish();
  if (again.size() != batch.size() || std::memcmp(again.data(), batch.data(), batch.size()) != 0) {
    std::abort();  // accepted something that is not the one encoding of its calls
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > pv::kMaxAreaPages * pv::kPageBytes) return 0;
  const std::span<const uint8_t> batch(data, size);
  const pv::DecodedBatch d = pv::DecodeBatch(batch);
  if (d.status == pv::CallResult::kOk) {
    Rebuild(d, batch);
    const pv::VmExtent vm{64ull << 20, 32ull << 20};
    for (const pv::Call& c : d.calls) {
      if (c.op != pv::Op::kWrite && c.op != pv::Op::kWriteLinear) continue;
      for (uint32_t i = 0; i < c.count && i < 4096; ++i) {
        const uint64_t entry = pv::EntryOf(c, batch, i);
        pv::PdeTables tables;
        (void)pv::CheckPde(entry, vm, &tables);
        (void)pv::CheckPte(entry, 4096, vm);
        (void)pv::CheckPte(entry, 128 << 10, vm);
      }
    }
  } else {
    if (d.error.empty()) std::abort();
    for (const pv::Call& c : d.calls) {
      if (d.bad_offset >= 0 && int64_t(c.offset) >= d.bad_offset) std::abort();
    }
  }
  // The same bytes through a call area of scattered pages (in reverse order) in a RAM.
  const uint32_t pages = uint32_t((size + pv::kPageBytes - 1) / pv::kPageBytes);
  if (pages == 0) return 0;
  std::vector<uint8_t> ram((pages + 2) * pv::kPageBytes, 0xa5);
  std::vector<uint64_t> list(pages);
  for (uint32_t i = 0; i < pages; ++i) list[i] = (pages - i + 1) * pv::kPageBytes;
  std::memcpy(ram.data(), list.data(), list.size() * 8);
  gpuvm::Result<pv::CallArea> area = pv::CallArea::Register(ram, 0, pages);
  if (!area.ok()) std::abort();
  for (size_t i = 0; i < size; ++i) ram[area->Address(i)] = data[i];
  const std::vector<uint8_t> copy = area->Copy(ram, size);
  if (copy.size() != size || (size != 0 && std::memcmp(copy.data(), data, size) != 0)) std::abort();
  if (pv::DecodeBatch(copy).status != d.status) std::abort();
  return 0;
}
