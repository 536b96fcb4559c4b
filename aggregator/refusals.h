// What a VM's guest (through its device model) tried and the aggregator refused, counted per kind.
// Every kind is also a kind of line in the VM's rate-limited log (base/rate_limited_log.h): the
// first lines of each kind are logged one by one, then one summary per second, so a guest that
// floods refusals costs the log a few lines per second however fast it goes, and the counts (the
// control plane's `stats`, docs/CONTROL.md; the VM's last log line) still say how many there were.
//
// Threading: values and pure functions.
#ifndef GPUVM_AGGREGATOR_REFUSALS_H_
#define GPUVM_AGGREGATOR_REFUSALS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace gpuvm::aggregator {

enum class Refusal : uint8_t {
  kMmio,            // accesses the session refused: past a BAR, an unknown vCPU, a bad size
  kRegister,        // fv: BAR0 writes to registers a VM may not touch (dropped)
  kMemory,          // fv: accesses outside its memory (PRAMIN, BAR1/BAR3 pages; dropped)
  kChannel,         // fv: channel ids and instance blocks it does not own, channels that cannot run
  kPlaylist,        // fv: playlists it may not submit (outside its VRAM, too long)
  kPageTableEntry,  // fv: guest PTEs/PDEs dropped from the shadow page tables
  kSubmission,      // fv: IB_PUT doorbells the scheduler had no room for
  kVramExhausted,   // fv: VRAM chunks the over-committed pool could not give it
  kCount,
};
inline constexpr size_t kRefusalKinds = static_cast<size_t>(Refusal::kCount);
using RefusalCounts = std::array<uint64_t, kRefusalKinds>;

// The key in the control plane's JSON: "mmio", "registers", "memory", "channels", "playlists",
// "page_table_entries", "submissions", "vram_exhausted".
const char* RefusalKey(Refusal kind);
// Plural words for log lines: "refused BAR0 register writes", ...
const char* RefusalWhat(Refusal kind);
// "refused: 3,999 BAR0 register writes, 2 playlists" (the kinds that happened), or "refused
// nothing".
std::string DescribeRefusals(const RefusalCounts& counts);

}  // namespace gpuvm::aggregator

#endif  // GPUVM_AGGREGATOR_REFUSALS_H_
