#include "runtime/core/managed_advice.h"

#include <iterator>

namespace gpuvm::runtime {

void ManagedAdvice::SplitAt(uint64_t at) {
  auto it = runs_.upper_bound(at);
  if (it == runs_.begin()) return;
  --it;
  if (it->first < at && at < it->second.end) {
    runs_.emplace(at, Run{it->second.end, it->second.advice});
    it->second.end = at;
  }
}

void ManagedAdvice::Apply(uint64_t begin, uint64_t end,
                          const std::function<void(PageAdvice&)>& change) {
  if (begin >= end) return;
  std::lock_guard lock(mu_);
  SplitAt(begin);
  SplitAt(end);
  uint64_t at = begin;
  auto it = runs_.lower_bound(begin);
  while (at < end) {
    if (it != runs_.end() && it->first == at) {
      change(it->second.advice);
      at = it->second.end;
      ++it;
      continue;
    }
    // A gap up to the next run (or the end): default advice, changed.
    const uint64_t gap_end = (it != runs_.end() && it->first < end) ? it->first : end;
    Run run{gap_end, PageAdvice{}};
    change(run.advice);
    it = std::next(runs_.emplace_hint(it, at, run));
    at = gap_end;
  }
  // Runs back at the default take no room; neighbours with equal advice become one run.
  auto first = runs_.lower_bound(begin);
  if (first != runs_.begin()) --first;
  for (auto cur = first; cur != runs_.end() && cur->first <= end;) {
    if (cur->second.advice == PageAdvice{}) {
      cur = runs_.erase(cur);
      continue;
    }
    auto next = std::next(cur);
    if (next != runs_.end() && next->first == cur->second.end &&
        next->second.advice == cur->second.advice) {
      cur->second.end = next->second.end;
      runs_.erase(next);
      continue;
    }
    cur = next;
  }
}

void ManagedAdvice::Visit(uint64_t begin, uint64_t end,
                          const std::function<void(const PageAdvice&)>& visit) const {
  if (begin >= end) return;
  std::lock_guard lock(mu_);
  static const PageAdvice kDefault;
  auto it = runs_.upper_bound(begin);
  if (it != runs_.begin() && std::prev(it)->second.end > begin) --it;
  uint64_t at = begin;
  while (at < end) {
    if (it != runs_.end() && it->first <= at) {
      visit(it->second.advice);
      at = it->second.end;
      ++it;
    } else {
      visit(kDefault);  // a gap
      at = (it != runs_.end() && it->first < end) ? it->first : end;
    }
  }
}

void ManagedAdvice::Forget(uint64_t begin, uint64_t end) {
  if (begin >= end) return;
  std::lock_guard lock(mu_);
  SplitAt(begin);
  SplitAt(end);
  runs_.erase(runs_.lower_bound(begin), runs_.lower_bound(end));
}

size_t ManagedAdvice::runs() const {
  std::lock_guard lock(mu_);
  return runs_.size();
}

}  // namespace gpuvm::runtime
