// What a context's program told CUDA about its managed memory, page by page: cuMemAdvise's
// read-mostly, preferred-location and accessed-by advice and cuMemPrefetchAsync's last target —
// what cuMemRangeGetAttribute(s) report (docs/RUNTIME.md, "Managed memory"). The memory itself
// does not move on our GPU (managed memory is host memory every processor reaches coherently),
// so this is all the advice changes.
//
// Pages are the caller's: it rounds ranges out to whole pages. Ranges nobody advised hold the
// default (no advice, never prefetched) and take no room; a range is forgotten when its memory is
// freed, so a later allocation at the same address starts with no advice.
//
// Threading: every method is thread-safe (one internal mutex).
#ifndef GPUVM_RUNTIME_CORE_MANAGED_ADVICE_H_
#define GPUVM_RUNTIME_CORE_MANAGED_ADVICE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

namespace gpuvm::runtime {

struct AdviceLocation {
  int type = 0;  // CUmemLocationType; 0 (CU_MEM_LOCATION_TYPE_INVALID): none
  int id = 0;    // the device ordinal or host NUMA node for those types, else 0
  friend bool operator==(const AdviceLocation&, const AdviceLocation&) = default;
};

struct PageAdvice {
  bool read_mostly = false;
  AdviceLocation preferred;         // type 0: no preferred location
  bool accessed_by_device = false;  // CU_MEM_ADVISE_SET_ACCESSED_BY for device 0
  bool accessed_by_host = false;    // ... for the host (CU_DEVICE_CPU)
  AdviceLocation last_prefetch;     // type 0: never prefetched
  friend bool operator==(const PageAdvice&, const PageAdvice&) = default;
};

class ManagedAdvice {
 public:
  // Changes the advice of every page in [begin, end) with `change`.
  void Apply(uint64_t begin, uint64_t end, const std::function<void(PageAdvice&)>& change);
  // Calls `visit` for the pages of [begin, end) in order, once per run of pages with the same
  // advice (the default for pages never advised).
  void Visit(uint64_t begin, uint64_t end,
             const std::function<void(const PageAdvice&)>& visit) const;
  // The pages of [begin, end) hold the default again.
  void Forget(uint64_t begin, uint64_t end);
  // Runs of advised pages kept (for tests).
  size_t runs() const;

 private:
  struct Run {
    uint64_t end;
    PageAdvice advice;
  };
  // Makes `at` a run boundary if a run spans it (mu_ held).
  void SplitAt(uint64_t at);

  mutable std::mutex mu_;
  std::map<uint64_t, Run> runs_;  // by first address; runs never overlap
};

}  // namespace gpuvm::runtime

#endif  // GPUVM_RUNTIME_CORE_MANAGED_ADVICE_H_
