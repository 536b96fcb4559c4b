// gpuvm-pt-guest: the guest program of gpuvm-pt-bench and of the pt integration tests
// (tests/pt_integration_test.cc): a driver-API CUDA program, run natively (GPUVM_BUS=native) or
// inside a local VM by gpuvm-vm (GPUVM_BUS=local).
//
//   gpuvm-pt-guest nop [N]            load an empty kernel, launch it N times (10), synchronize
//   gpuvm-pt-guest case NAME [bench]  a kernel-corpus case (bench/kernels), checked against the CPU
//                                     reference; prints the wall time of its launches + sync
//   gpuvm-pt-guest hold FILE          launch empty kernels until killed (at most 120 s); writes
//   FILE
//                                     after the first one completes
//   gpuvm-pt-guest secret             fills 16 MiB of VRAM with a pattern and exits without
//   cleaning gpuvm-pt-guest snoop              allocates 16 MiB, reads it back uninitialized, fails
//   if any
//                                     word of the pattern is there
//   gpuvm-pt-guest repeat NAME N FILE [GO]
//                                     case NAME N times in one context, each checked; writes FILE
//                                     after the first and then waits (at most 300 s) for file GO
//                                     if given (tests stop a process of the VM meanwhile)
//   gpuvm-pt-guest staged NAME SIZE GO READY EXIT
//                                     case NAME (SIZE test|bench) with its launches held until
//                                     file GO exists; writes READY once they are launched, prints
//                                     "VERIFIED <seconds from launch to checked>" and waits for
//                                     file EXIT before it exits (so the VM is still there to be
//                                     looked at); each wait at most 300 s
//   gpuvm-pt-guest fill MIB [FILE]    allocates MIB MiB, fills and checks it; with FILE, writes it
//                                     and keeps the memory until killed (a CUDA error is printed
//                                     with its name and number: out-of-VRAM tests)
//
// Prints "PASSED <what>" and exits 0, or prints what went wrong and exits 1.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/kernels/driver_api_launch.h"
#include "bench/kernels/kernel_corpus.h"
#include "runtime/include/cuda.h"

namespace {

constexpr uint32_t kSecret = 0x5ec2e7ed;
constexpr size_t kSecretBytes = 16 << 20;

// PTX 9.0 of `extern "C" __global__ void nop() {}`.
constexpr char kNopPtx[] = R"(
.version 9.0
.target sm_75
.address_size 64
.visible .entry nop()
{
  ret;
}
)";

#define CHECK_CU(call)                                                                             \
  do {                                                                                             \
    CUresult r_ = (call);                                                                          \
    if (r_ != CUDA_SUCCESS) {                                                                      \
      const char* name_ = nullptr;                                                                 \
      cuGetErrorName(r_, &name_);                                                                  \
      std::fprintf(stderr, "FAILED %s: %s (%d) at line %d\n", #call, name_ ? name_ : "?", int(r_), \
                   __LINE__);                                                                      \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

int Init(CUcontext* ctx) {
  CHECK_CU(cuInit(0));
  CUdevice dev;
  CHECK_CU(cuDeviceGet(&dev, 0));
  char name[128] = "";
  CHECK_CU(cuDeviceGetName(name, sizeof(name), dev));
  std::printf("device: %s\n", name);
  CHECK_CU(cuCtxCreate(ctx, nullptr, 0, dev));
  return 0;
}

int LoadNop(CUmodule* module, CUfunction* nop) {
  CHECK_CU(cuModuleLoadData(module, kNopPtx));
  CHECK_CU(cuModuleGetFunction(nop, *module, "nop"));
  return 0;
}

int Nop(int launches) {
  CUcontext ctx;
  if (Init(&ctx) != 0) return 1;
  CUmodule module;
  CUfunction nop;
  if (LoadNop(&module, &nop) != 0) return 1;
  for (int i = 0; i < launches; ++i) {
    CHECK_CU(cuLaunchKernel(nop, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr));
  }
  CHECK_CU(cuCtxSynchronize());
  CHECK_CU(cuCtxDestroy(ctx));
  std::printf("PASSED nop x%d\n", launches);
  return 0;
}

int Hold(const std::string& ready_file) {
  CUcontext ctx;
  if (Init(&ctx) != 0) return 1;
  CUmodule module;
  CUfunction nop;
  if (LoadNop(&module, &nop) != 0) return 1;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  bool told = false;
  while (std::chrono::steady_clock::now() < end) {
    CHECK_CU(cuLaunchKernel(nop, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr));
    CHECK_CU(cuCtxSynchronize());
    if (!told) {
      std::ofstream(ready_file) << "ready\n";
      told = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::printf("PASSED hold (never killed)\n");
  return 0;
}

// `bytes` of device memory at `*out`, every word kSecret: set by the GPU and read back to check
// (0), or "FAILED what" (1).
int AllocSecret(size_t bytes, CUdeviceptr* out, const char* what) {
  // Named `d` and `bytes`: CHECK_CU prints the call as written, and the integration tests look for
  // "cuMemAlloc(&d, bytes)".
  CUdeviceptr d;
  CHECK_CU(cuMemAlloc(&d, bytes));
  *out = d;
  CHECK_CU(cuMemsetD32(d, kSecret, bytes / 4));
  CHECK_CU(cuCtxSynchronize());
  std::vector<uint32_t> back(bytes / 4);
  CHECK_CU(cuMemcpyDtoH(back.data(), d, bytes));
  for (uint32_t w : back) {
    if (w != kSecret) {
      std::printf("FAILED %s: memset did not stick\n", what);
      return 1;
    }
  }
  return 0;
}

// Allocates `mib` MiB of VRAM, fills it with the GPU (cuMemsetD32) and reads it back; with
// `ready_file`, then writes it and keeps the memory until killed (at most 120 s). A CUDA error is
// printed by CHECK_CU with its name and number: the tests look for CUDA_ERROR_OUT_OF_MEMORY (2)
// when there is no VRAM for it (natively and in pt: the driver's allocator; in fv with
// over-committed VRAM: the page the aggregator could not back, docs/FULL-VIRTUALIZATION.md).
int Fill(uint64_t mib, const std::string& ready_file) {
  CUcontext ctx;
  if (Init(&ctx) != 0) return 1;
  CUdeviceptr d;
  if (AllocSecret(size_t(mib) << 20, &d, "fill") != 0) return 1;
  std::printf("PASSED fill %llu MiB\n", static_cast<unsigned long long>(mib));
  std::fflush(stdout);
  if (!ready_file.empty()) {
    std::ofstream(ready_file) << "ready\n";
    std::this_thread::sleep_for(std::chrono::seconds(120));
  }
  CHECK_CU(cuMemFree(d));
  CHECK_CU(cuCtxDestroy(ctx));
  return 0;
}

int Secret() {
  CUcontext ctx;
  if (Init(&ctx) != 0) return 1;
  CUdeviceptr d;
  if (AllocSecret(kSecretBytes, &d, "secret") != 0) return 1;
  // No cuMemFree, no cuCtxDestroy: leave it all behind, as a crashing guest would.
  std::printf("PASSED secret\n");
  std::fflush(stdout);
  std::_Exit(0);
}

int Snoop() {
  CUcontext ctx;
  if (Init(&ctx) != 0) return 1;
  CUdeviceptr d;
  CHECK_CU(cuMemAlloc(&d, kSecretBytes));
  std::vector<uint32_t> back(kSecretBytes / 4);
  CHECK_CU(cuMemcpyDtoH(back.data(), d, kSecretBytes));
  size_t found = 0;
  for (uint32_t w : back) found += w == kSecret;
  if (found != 0) {
    std::printf("FAILED snoop: %zu words of the previous VM's data are readable\n", found);
    return 1;
  }
  CHECK_CU(cuCtxDestroy(ctx));
  std::printf("PASSED snoop\n");
  return 0;
}

// Waits (up to 300 s) until `path` exists.
bool AwaitFile(const std::string& path) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  while (!std::ifstream(path).good()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// What a test wants around a case (all optional).
struct Staging {
  std::string go;     // launch only once this file exists
  std::string ready;  // written once the launches are queued
  std::string exit;   // after the check, wait for this file before returning
};

// One case in the current context: upload, launch, synchronize, download, check.
int RunCase(const gpuvm::kernels::Case& c, const Staging& staging, double* seconds) {
  std::string ptx(c.ptx);
  CUmodule module;
  CHECK_CU(cuModuleLoadData(&module, ptx.c_str()));
  std::vector<CUdeviceptr> buffers;
  for (const auto& b : c.buffers) {
    CUdeviceptr d;
    CHECK_CU(cuMemAlloc(&d, std::max<size_t>(b.initial.size(), 1)));
    if (!b.initial.empty()) CHECK_CU(cuMemcpyHtoD(d, b.initial.data(), b.initial.size()));
    buffers.push_back(d);
  }
  CHECK_CU(cuCtxSynchronize());
  if (!staging.go.empty() && !AwaitFile(staging.go)) {
    std::printf("FAILED %s: %s never appeared\n", c.name.c_str(), staging.go.c_str());
    return 1;
  }
  const auto start = std::chrono::steady_clock::now();
  for (const auto& launch : c.launches) {
    CUfunction f;
    CHECK_CU(cuModuleGetFunction(&f, module, launch.kernel.c_str()));
    CHECK_CU(gpuvm::kernels::LaunchWithDriverApi(f, launch, buffers));
  }
  if (!staging.ready.empty()) std::ofstream(staging.ready) << "launched\n";
  CHECK_CU(cuCtxSynchronize());
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<std::vector<uint8_t>> results;
  for (size_t i = 0; i < buffers.size(); ++i) {
    std::vector<uint8_t> out(c.buffers[i].initial.size());
    if (!out.empty()) CHECK_CU(cuMemcpyDtoH(out.data(), buffers[i], out.size()));
    results.push_back(std::move(out));
  }
  gpuvm::Status verdict = c.Verify(results);
  if (!verdict.ok()) {
    std::printf("FAILED %s: %s\n", c.name.c_str(), verdict.ToString().c_str());
    return 1;
  }
  for (CUdeviceptr d : buffers) CHECK_CU(cuMemFree(d));
  CHECK_CU(cuModuleUnload(module));
  return 0;
}

// `repeat` times case NAME in one context; `ready` written after the first; `staging` applies to
// the first.
int Case(const std::string& name, bool bench, int repeat = 1, const Staging& staging = {},
         const std::string& ready = "", const std::string& go_on = "") {
  auto c = gpuvm::kernels::MakeCase(
      name, bench ? gpuvm::kernels::Size::kBench : gpuvm::kernels::Size::kTest);
  if (!c.ok()) {
    std::printf("FAILED %s: %s\n", name.c_str(), c.status().ToString().c_str());
    return 1;
  }
  CUcontext ctx;
  if (Init(&ctx) != 0) return 1;
  double seconds = 0;
  for (int i = 0; i < repeat; ++i) {
    if (RunCase(*c, i == 0 ? staging : Staging{}, &seconds) != 0) return 1;
    if (i == 0 && !ready.empty()) std::ofstream(ready) << "ran once\n";
    if (i == 0 && !go_on.empty() && !AwaitFile(go_on)) {
      std::printf("FAILED %s: %s never appeared\n", name.c_str(), go_on.c_str());
      return 1;
    }
  }
  if (!staging.exit.empty()) {
    std::printf("VERIFIED %.6f\n", seconds);
    std::fflush(stdout);
    if (!AwaitFile(staging.exit)) {
      std::printf("FAILED %s: %s never appeared\n", name.c_str(), staging.exit.c_str());
      return 1;
    }
  }
  CHECK_CU(cuCtxDestroy(ctx));
  if (repeat > 1) {
    std::printf("PASSED %s x%d\n", name.c_str(), repeat);
  } else {
    std::printf("PASSED %s kernels %.6f s\n", name.c_str(), seconds);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  if (what == "nop") return Nop(argc > 2 ? std::atoi(argv[2]) : 10);
  if (what == "case" && argc > 2) return Case(argv[2], argc > 3 && std::string(argv[3]) == "bench");
  if (what == "repeat" && argc > 4) {
    return Case(argv[2], false, std::atoi(argv[3]), {}, argv[4], argc > 5 ? argv[5] : "");
  }
  if (what == "staged" && argc > 6) {
    return Case(argv[2], std::string(argv[3]) == "bench", 1, {argv[4], argv[5], argv[6]});
  }
  if (what == "hold" && argc > 2) return Hold(argv[2]);
  if (what == "secret") return Secret();
  if (what == "fill" && argc > 2) {
    return Fill(std::strtoull(argv[2], nullptr, 10), argc > 3 ? argv[3] : "");
  }
  if (what == "snoop") return Snoop();
  std::fprintf(stderr,
               "usage: gpuvm-pt-guest nop [N] | case NAME [bench] | hold FILE | secret | snoop\n"
               "       | repeat NAME N FILE [GO] | staged NAME test|bench GO READY EXIT\n"
               "       | fill MIB [FILE]\n");
  return 2;
}
