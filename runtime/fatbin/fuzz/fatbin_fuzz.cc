// libFuzzer target: any bytes as a fat binary section. The reader must return containers or an
// error and extract (decompress) every PTX entry or fail cleanly: no crash, leak, hang, oversized
// allocation or sanitizer report. Seeds: runtime/fatbin/fuzz/fatbin_fuzz/ (the committed nvcc blobs
// and small variants).
#include <cstddef>
#include <cstdint>
#include <span>

#include "runtime/fatbin/fatbin.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpuvm::runtime::fatbin;
  FatbinLimits limits;
  limits.max_uncompressed_bytes = 1u << 20;  // keeps runs fast; the code paths are the same
  std::span<const uint8_t> bytes(data, size);
  (void)ParseWrapper(bytes);
  (void)ContainerSize(bytes, limits);
  auto containers = ParseContainers(bytes, limits);
  if (!containers.ok()) return 0;
  for (const Container& c : *containers) {
    for (const Entry& e : c.entries) {
      if (e.kind == EntryKind::kPtx) (void)ExtractPtx(e, limits);
    }
  }
  (void)SelectPtx(*containers, 75);
  return 0;
}
