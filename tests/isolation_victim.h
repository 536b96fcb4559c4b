// The victim of the isolation tests (fv_isolation_test, pv_isolation_test): a VM that keeps running
// the unmodified guest driver — copies in and out, a memset and, with kernels, c = a + b — and
// checks every round, while an attacker VM does its worst. Header-only; users link gpu_isa (the
// kernel is assembled from runtime/tests/test_kernels.h).
//
// Threading: RunVictim runs on the caller's thread (a test's victim thread); `stop` and `rounds`
// are shared with the test's main thread.
#ifndef GPUVM_TESTS_ISOLATION_VICTIM_H_
#define GPUVM_TESTS_ISOLATION_VICTIM_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "gpu/isa/assembler.h"
#include "guest-pv-driver/driver.h"
#include "runtime/tests/test_kernels.h"

namespace gpuvm::aggregator::fv_testing {

// Launches runtime::testing::kVaddAsm (c[i] = a[i] + b[i] for i < n; params a, b, c, n; loaded at
// `code`) one thread per element, and waits for it.
inline Status LaunchAdd(guest::Channel* ch, uint64_t code, uint64_t a, uint64_t b, uint64_t c,
                        uint32_t n) {
  struct {
    uint64_t a, b, c;
    uint32_t n;
  } args{a, b, c, n};
  guest::LaunchParams p;
  p.code_address = code;
  p.grid = {(n + 255) / 256, 1, 1};
  p.block = {256, 1, 1};
  p.params = std::span(reinterpret_cast<const uint8_t*>(&args), 28);
  GPUVM_ASSIGN_OR_RETURN(guest::Fence f, ch->Launch(p));
  return ch->Wait(f, std::chrono::seconds(30));
}

// The victim's workload on `bus` with a driver made with `options`: a context and 2 MiB of VRAM,
// rewritten, memset in part and read back each round (with `kernels`, c = a + b over 4096 elements
// first), checked. Goes on until `stop` is set and at least two rounds are done; `rounds` counts
// the correct ones. The first failure, or "" when none.
inline std::string RunVictim(guest::Bus* bus, const guest::DriverOptions& options, bool kernels,
                             const std::atomic<bool>& stop, std::atomic<int>& rounds) {
  auto driver = guest::Driver::Create(bus, options);
  if (!driver.ok()) return "victim driver: " + driver.status().ToString();
  auto ctx = (*driver)->CreateContext();
  if (!ctx.ok()) return "victim context: " + ctx.status().ToString();
  constexpr uint64_t kBytes = 2ull << 20;
  auto a = (*ctx)->AllocDevice(kBytes);
  if (!a.ok()) return "victim alloc: " + a.status().ToString();
  std::vector<uint32_t> in(kBytes / 4), out(kBytes / 4);
  guest::Channel* ch = (*ctx)->default_channel();
  constexpr uint32_t kN = 4096;
  Result<guest::Allocation> code = Status::Unavailable("no kernels"), ka = code, kb = code,
                            kc = code;
  if (kernels) {
    auto image = isa::Assemble(runtime::testing::kVaddAsm);
    if (!image.ok()) return "victim kernel: " + image.status().ToString();
    code = (*ctx)->LoadCode(*image);
    ka = (*ctx)->AllocDevice(kN * 4);
    kb = (*ctx)->AllocDevice(kN * 4);
    kc = (*ctx)->AllocDevice(kN * 4);
    if (!code.ok() || !ka.ok() || !kb.ok() || !kc.ok()) return "victim kernel alloc";
  }
  for (uint32_t round = 1; !stop || rounds < 2; ++round) {
    if (kernels) {
      std::vector<uint32_t> ha(kN), hb(kN), hc(kN);
      for (uint32_t i = 0; i < kN; ++i) {
        ha[i] = i * round;
        hb[i] = 7 * i + round;
      }
      if (!ch->CopyHostToDevice(ka->va, ha.data(), kN * 4).ok() ||
          !ch->CopyHostToDevice(kb->va, hb.data(), kN * 4).ok()) {
        return "victim kernel htod";
      }
      Status s = LaunchAdd(ch, code->va, ka->va, kb->va, kc->va, kN);
      if (!s.ok()) return "victim kernel: " + s.ToString();
      if (!ch->CopyDeviceToHost(hc.data(), kc->va, kN * 4).ok()) return "victim dtoh";
      for (uint32_t i = 0; i < kN; ++i) {
        if (hc[i] != ha[i] + hb[i]) return "victim kernel result wrong at " + std::to_string(i);
      }
    }
    for (size_t i = 0; i < in.size(); ++i) in[i] = uint32_t(i * 2654435761u) ^ round;
    if (Status s = ch->CopyHostToDevice(a->va, in.data(), kBytes); !s.ok()) {
      return "victim htod: " + s.ToString();
    }
    if (auto f = ch->Memset32Async(a->va + 4096, round, 64); !f.ok()) {
      return "victim memset: " + f.status().ToString();
    }
    if (Status s = ch->CopyDeviceToHost(out.data(), a->va, kBytes); !s.ok()) {
      return "victim dtoh: " + s.ToString();
    }
    for (size_t i = 0; i < 64; ++i) in[1024 + i] = round;
    if (in != out) return "victim data wrong in round " + std::to_string(round);
    ++rounds;
  }
  return "";
}

}  // namespace gpuvm::aggregator::fv_testing

#endif  // GPUVM_TESTS_ISOLATION_VICTIM_H_
