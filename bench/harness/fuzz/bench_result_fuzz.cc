// libFuzzer target: what a benchmark program (possibly inside a VM, so untrusted) hands gpuvm-bench
// — its result object and its VM's stderr — through the JSON parser, ApplyProgramResult and
// ParseCounters. Whatever the bytes, no crash, and an accepted result is sane.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "bench/harness/json.h"
#include "bench/harness/results.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  gpuvm::Result<gpuvm::bench::Json> parsed = gpuvm::bench::ParseJson(text);
  if (parsed.ok()) {
    // What we parse we can write, and what we write parses to the same thing.
    const std::string line = parsed->Serialize();
    gpuvm::Result<gpuvm::bench::Json> again = gpuvm::bench::ParseJson(line);
    if (!again.ok() || again->Serialize() != line) std::abort();
  }
  gpuvm::bench::RunRecord record;
  record.bench = "madd";
  if (gpuvm::bench::ApplyProgramResult(text, &record).ok()) {
    if (!(record.seconds >= 0) || !std::isfinite(record.seconds)) std::abort();
    for (double p : record.phases) {
      if (!(p >= 0) || !std::isfinite(p)) std::abort();
    }
    if (record.correct && !record.error.empty()) std::abort();
  }
  (void)gpuvm::bench::ParseCounters(text);
  return 0;
}
