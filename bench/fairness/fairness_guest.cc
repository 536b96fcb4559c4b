// gpuvm-fairness-guest: the workload of the fairness experiment inside a VM. Loops "launch madd,
// wait for it" for a number of seconds and prints how many kernels it ran:
//
//   gpuvm-fairness-guest madd|long-madd|endless|endless-sync SECONDS [N] [--start-at NS]
//                        [--launches K]
//
// endless: one launch of a kernel that never ends (a 64-bit counter loop, PTX below), then the
// guest sleeps SECONDS and exits without waiting for it: the GPU eater of the preemption case
// (docs/SCHEDULER.md, "Preemption"); the aggregator stops its channel when the VM goes.
//
// endless-sync: the same kernel, but the guest waits for it (cuCtxSynchronize), which returns
// only when the host fails the VM's work (gpuvm-ctl kill-work, or the VM's kernel limit: docs/
// SCHEDULER.md "Pause, kernel limit, kill-work") — or after SECONDS, when the guest gives up
// waiting (a watchdog thread) and exits 1. It prints "STOPPED <CUDA error name> <code>" with the
// error, checks that the calls that follow return at once with the context's error (another
// synchronize, an allocation, the context's destruction) and exits 3.
//
// --start-at: after its set-up (context, module, buffers) the guest waits until CLOCK_MONOTONIC
// (std::chrono::steady_clock) reaches NS, so that several VMs start looping together; SECONDS
// count from then. --launches: stop after K launches (or SECONDS, whichever comes first). It
// prints when its loop started and ended (monotonic ns), for the total-time comparison.
//
// madd adds two N x N int matrices (N = 256 by default, one thread per element, GPUvm's madd);
// long-madd adds matrices with 15x the elements (N' = N x sqrt(15)), the paper's "15 times the
// work". Each launch is one submission (one IB_PUT) the aggregator's dispatcher schedules.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "bench/suite/driver.h"
#include "bench/suite/problems.h"

namespace {

#define CHECK_CU(call)                                        \
  do {                                                        \
    const CUresult r_ = (call);                               \
    if (r_ != CUDA_SUCCESS) {                                 \
      std::fprintf(stderr, "gpuvm-fairness-guest: %s\n",      \
                   gpuvm::suite::CuError(r_, #call).c_str()); \
      return 1;                                               \
    }                                                         \
  } while (0)

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool OpenContext(CUcontext* context) {
  std::string failed;
  if (const CUresult r = gpuvm::suite::OpenContext(context, &failed); r != CUDA_SUCCESS) {
    std::fprintf(stderr, "gpuvm-fairness-guest: %s\n",
                 gpuvm::suite::CuError(r, failed.c_str()).c_str());
    return false;
  }
  return true;
}

// Waits for the common start; true when the set-up had already outlasted it.
bool WaitUntil(int64_t start_at_ns) {
  const bool late = start_at_ns > 0 && NowNs() > start_at_ns;
  while (NowNs() < start_at_ns) {
    std::this_thread::sleep_for(
        std::chrono::nanoseconds(std::min<int64_t>(start_at_ns - NowNs(), 1'000'000)));
  }
  return late;
}

// 32 threads counting to 2^64: never ends at any speed a GPU has.
constexpr const char* kEndlessPtx = R"(
.version 9.0
.target sm_75
.address_size 64

.visible .entry endless(
	.param .u64 endless_param_0
)
{
	.reg .pred 	%p<2>;
	.reg .b64 	%rd<4>;

	mov.u64 	%rd1, 1;
$L__loop:
	add.s64 	%rd1, %rd1, 1;
	setp.ne.s64 	%p1, %rd1, 0;
	@%p1 bra 	$L__loop;
	ld.param.u64 	%rd2, [endless_param_0];
	cvta.to.global.u64 	%rd3, %rd2;
	st.global.u64 	[%rd3], %rd1;
	ret;
}
)";

// The endless kernel in a new context, with its argument (8 bytes of output) allocated.
struct EndlessKernel {
  CUcontext context = nullptr;
  CUfunction function = nullptr;
  CUdeviceptr out = 0;
};
int LoadEndless(EndlessKernel* k) {
  if (!OpenContext(&k->context)) return 1;
  CUmodule module;
  CHECK_CU(cuModuleLoadData(&module, kEndlessPtx));
  CHECK_CU(cuModuleGetFunction(&k->function, module, "endless"));
  CHECK_CU(cuMemAlloc(&k->out, 8));
  return 0;
}

int RunEndless(double seconds, int64_t start_at_ns) {
  EndlessKernel k;
  if (const int rc = LoadEndless(&k); rc != 0) return rc;
  void* args[] = {&k.out};
  const bool late = WaitUntil(start_at_ns);
  const int64_t loop_start = NowNs();
  CHECK_CU(cuLaunchKernel(k.function, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr));
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  // Still running, as it should be: anything else is a failure.
  const CUresult query = cuStreamQuery(nullptr);
  const int64_t loop_end = NowNs();
  const bool running = query == CUDA_ERROR_NOT_READY;
  std::printf("endless launches=1 loop_start_ns=%lld loop_end_ns=%lld%s %s\n",
              static_cast<long long>(loop_start), static_cast<long long>(loop_end),
              late ? " (set-up outlasted --start-at)" : "", running ? "PASSED" : "FAILED");
  std::fflush(stdout);
  // No context teardown: it would wait for the kernel. The VM's channels go with the process.
  std::_Exit(running ? 0 : 1);
}

int RunEndlessSync(double seconds) {
  EndlessKernel k;
  if (const int rc = LoadEndless(&k); rc != 0) return rc;
  void* args[] = {&k.out};
  // Nobody stopped it in time: say so and leave (a hang would otherwise hold the test).
  std::thread([seconds] {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    std::printf("FAILED: nobody stopped the endless kernel within %.0f s\n", seconds);
    std::fflush(stdout);
    std::_Exit(1);
  }).detach();
  CHECK_CU(cuLaunchKernel(k.function, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr));
  std::printf("LAUNCHED endless\n");
  std::fflush(stdout);
  const CUresult r = cuCtxSynchronize();
  if (r == CUDA_SUCCESS) {
    std::printf("FAILED: the endless kernel completed\n");
    return 1;
  }
  const char* name = nullptr;
  const char* text = nullptr;
  cuGetErrorName(r, &name);
  cuGetErrorString(r, &text);
  std::printf("STOPPED %s %d: %s\n", name ? name : "?", int(r), text ? text : "?");
  std::fflush(stdout);
  // The context is unusable now, and says so at once: nothing that follows may wait.
  const CUresult again = cuCtxSynchronize();
  CUdeviceptr more = 0;
  const CUresult alloc = cuMemAlloc(&more, 8);
  const CUresult destroyed = cuCtxDestroy(k.context);
  std::printf("AFTER synchronize=%d alloc=%d destroy=%d\n", int(again), int(alloc), int(destroyed));
  std::fflush(stdout);
  return 3;
}

int Run(bool long_madd, double seconds, int n, int64_t start_at_ns, uint64_t max_launches) {
  if (long_madd) n = static_cast<int>(std::lround(n * std::sqrt(15.0)));
  const size_t bytes = size_t(n) * size_t(n) * sizeof(int);
  CUcontext context;
  if (!OpenContext(&context)) return 1;
  CUmodule module;
  CHECK_CU(gpuvm::suite::LoadCorpusModule(&module, "madd.ptx"));
  CUfunction function;
  CHECK_CU(cuModuleGetFunction(&function, module, "madd"));
  CUdeviceptr a, b, c;
  CHECK_CU(cuMemAlloc(&a, bytes));
  CHECK_CU(cuMemAlloc(&b, bytes));
  CHECK_CU(cuMemAlloc(&c, bytes));
  std::vector<int> host(size_t(n) * size_t(n), 1);
  CHECK_CU(cuMemcpyHtoD(a, host.data(), bytes));
  CHECK_CU(cuMemcpyHtoD(b, host.data(), bytes));
  void* args[] = {&a, &b, &c, &n};
  const bool late = WaitUntil(start_at_ns);
  const int64_t loop_start = NowNs();
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  uint64_t launches = 0;
  while (std::chrono::steady_clock::now() < end && launches < max_launches) {
    CHECK_CU(cuLaunchKernel(function, gpuvm::suite::Blocks(n, 16), gpuvm::suite::Blocks(n, 16), 1,
                            16, 16, 1, 0, nullptr, args, nullptr));
    CHECK_CU(cuCtxSynchronize());
    ++launches;
  }
  const int64_t loop_end = NowNs();
  CHECK_CU(cuMemcpyDtoH(host.data(), c, bytes));
  const bool correct = host.front() == 2 && host.back() == 2;
  std::printf("%s n=%d launches=%llu loop_start_ns=%lld loop_end_ns=%lld%s %s\n",
              long_madd ? "long-madd" : "madd", n, static_cast<unsigned long long>(launches),
              static_cast<long long>(loop_start), static_cast<long long>(loop_end),
              late ? " (set-up outlasted --start-at)" : "", correct ? "PASSED" : "FAILED");
  cuCtxDestroy(context);
  return correct ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  const auto usage = [] {
    std::fprintf(stderr,
                 "usage: gpuvm-fairness-guest madd|long-madd|endless|endless-sync SECONDS [N] "
                 "[--start-at NS] [--launches K]\n");
    return 2;
  };
  if ((what != "madd" && what != "long-madd" && what != "endless" && what != "endless-sync") ||
      argc < 3) {
    return usage();
  }
  const double seconds = std::atof(argv[2]);
  int n = 256;
  int64_t start_at = 0;
  uint64_t launches = UINT64_MAX;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--start-at" && i + 1 < argc) {
      start_at = std::atoll(argv[++i]);
    } else if (a == "--launches" && i + 1 < argc) {
      launches = std::strtoull(argv[++i], nullptr, 10);
    } else if (i == 3 && a.rfind("--", 0) != 0) {
      n = std::atoi(argv[i]);
    } else {
      return usage();
    }
  }
  if (seconds <= 0 || seconds > 3600 || n < 16 || n > 4096 || start_at < 0 || launches == 0) {
    return usage();
  }
  if (what == "endless") return RunEndless(seconds, start_at);
  if (what == "endless-sync") return RunEndlessSync(seconds);
  return Run(what == "long-madd", seconds, n, start_at, launches);
}
