#include "aggregator/refusals.h"

#include "base/rate_limited_log.h"

namespace gpuvm::aggregator {
namespace {

struct KindNames {
  const char* key;
  const char* what;        // for the rate-limited log
  const char* short_what;  // for DescribeRefusals ("refused: N <short_what>")
};
constexpr KindNames kNames[kRefusalKinds] = {
    {"mmio", "refused MMIO accesses", "MMIO accesses"},
    {"registers", "refused BAR0 register writes", "BAR0 register writes"},
    {"memory", "refused accesses outside the VM's memory", "accesses outside its memory"},
    {"channels", "refused channel operations", "channel operations"},
    {"playlists", "refused playlists", "playlists"},
    {"page_table_entries", "page-table entries dropped", "page-table entries"},
    {"submissions", "refused submissions", "submissions"},
    {"vram_exhausted", "VRAM chunks refused (the pool is exhausted)",
     "VRAM chunks (pool exhausted)"},
};

}  // namespace

const char* RefusalKey(Refusal kind) {
  const size_t i = static_cast<size_t>(kind);
  return i < kRefusalKinds ? kNames[i].key : "?";
}

const char* RefusalWhat(Refusal kind) {
  const size_t i = static_cast<size_t>(kind);
  return i < kRefusalKinds ? kNames[i].what : "refusals";
}

std::string DescribeRefusals(const RefusalCounts& counts) {
  std::string out;
  for (size_t i = 0; i < kRefusalKinds; ++i) {
    if (counts[i] == 0) continue;
    out +=
        (out.empty() ? "refused: " : ", ") + WithThousands(counts[i]) + " " + kNames[i].short_what;
  }
  return out.empty() ? "refused nothing" : out;
}

}  // namespace gpuvm::aggregator
