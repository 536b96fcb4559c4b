// The driver API as a program sees it: this test links libcuda.so.1 (our build) and our cuda.h
// only, like a Gdev-style driver-API program. Every function is exercised on its success path and
// on the error paths CUDA documents; kernels come from GVISA module images (test_kernels.h).
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "runtime/include/cuda.h"
#include "runtime/tests/test_kernels.h"

namespace {

#define ASSERT_CU(expr) ASSERT_EQ((expr), CUDA_SUCCESS) << #expr
#define EXPECT_CU(expr) EXPECT_EQ((expr), CUDA_SUCCESS) << #expr

// Runs first in its process (ctest runs every test in a process of its own).
TEST(RuntimeDriverApiInit, EverythingNeedsInitFirst) {
  CUdevice dev;
  int n;
  CUcontext ctx;
  CUdeviceptr p;
  EXPECT_EQ(cuDeviceGet(&dev, 0), CUDA_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(cuCtxGetCurrent(&ctx), CUDA_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(cuMemAlloc(&p, 16), CUDA_ERROR_NOT_INITIALIZED);
  // These work without cuInit.
  int version = 0;
  EXPECT_CU(cuDriverGetVersion(&version));
  EXPECT_EQ(version, 13000);
  const char* s = nullptr;
  EXPECT_CU(cuGetErrorName(CUDA_ERROR_NOT_INITIALIZED, &s));
  EXPECT_EQ(cuInit(1), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuInit(0));
  ASSERT_CU(cuInit(0));  // idempotent
}

TEST(RuntimeDriverApiErrors, NamesAndStrings) {
  const char* s = nullptr;
  ASSERT_CU(cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &s));
  EXPECT_STREQ(s, "CUDA_ERROR_ILLEGAL_ADDRESS");
  ASSERT_CU(cuGetErrorString(CUDA_ERROR_ILLEGAL_ADDRESS, &s));
  EXPECT_STREQ(s, "an illegal memory access was encountered");
  ASSERT_CU(cuGetErrorName(CUDA_SUCCESS, &s));
  EXPECT_STREQ(s, "CUDA_SUCCESS");
  ASSERT_CU(cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s));
  EXPECT_STREQ(s, "invalid argument");
  ASSERT_CU(cuGetErrorName(CUDA_ERROR_UNKNOWN, &s));
  EXPECT_STREQ(s, "CUDA_ERROR_UNKNOWN");
  EXPECT_EQ(cuGetErrorName(CUresult(12345), &s), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGetErrorString(CUresult(-1), &s), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGetErrorName(CUDA_SUCCESS, nullptr), CUDA_ERROR_INVALID_VALUE);
}

class RuntimeDriverApi : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_CU(cuInit(0));
    ASSERT_CU(cuDeviceGet(&dev_, 0));
    ASSERT_CU(cuCtxCreate(&ctx_, nullptr, 0, dev_));
  }
  void TearDown() override {
    if (ctx_) {
      EXPECT_CU(cuCtxDestroy(ctx_));
    }
  }
  CUmodule LoadTestModule() {
    image_ = gpuvm::runtime::testing::TestModuleImage();
    CUmodule m = nullptr;
    EXPECT_CU(cuModuleLoadData(&m, image_.data()));
    return m;
  }
  // `name` from the test module (loaded on first use, kept in module_); null, and a failed test,
  // when the module has no such function.
  CUfunction TestFunction(const char* name) {
    if (module_ == nullptr) module_ = LoadTestModule();
    CUfunction f = nullptr;
    EXPECT_CU(cuModuleGetFunction(&f, module_, name));
    return f;
  }

  // One attribute read through `get` (cuDeviceGetAttribute, cuFuncGetAttribute); a failed call
  // fails the test and reads as -1, which no attribute checked here can be.
  template <typename Attr, typename Of>
  static int Attribute(CUresult (*get)(int*, Attr, Of), Attr attr, Of of) {
    int v = -1;
    EXPECT_CU(get(&v, attr, of));
    return v;
  }
  // What every attribute getter refuses with CUDA_ERROR_INVALID_VALUE: the `unknown` attribute
  // numbers, and no place for the result (asked for the `known` attribute).
  template <typename Attr, typename Of>
  static void ExpectRefusals(CUresult (*get)(int*, Attr, Of), Of of, Attr known,
                             std::initializer_list<int> unknown) {
    int v = 0;
    for (int a : unknown) EXPECT_EQ(get(&v, Attr(a), of), CUDA_ERROR_INVALID_VALUE) << a;
    EXPECT_EQ(get(nullptr, known, of), CUDA_ERROR_INVALID_VALUE);
  }

  // Device buffers for the vadd kernels: copies of `a` and `b`, and one as large for the sum.
  template <typename T>
  std::array<CUdeviceptr, 3> VaddBuffers(const std::vector<T>& a, const std::vector<T>& b) {
    const size_t bytes = a.size() * sizeof(T);
    std::array<CUdeviceptr, 3> d{};
    for (CUdeviceptr& p : d) {
      EXPECT_CU(cuMemAlloc(&p, bytes));
    }
    EXPECT_CU(cuMemcpyHtoD(d[0], a.data(), bytes));
    EXPECT_CU(cuMemcpyHtoD(d[1], b.data(), bytes));
    return d;
  }

  // A buffer of `n` (a multiple of 256) words set to 1, then vadd launched `times` on `s` with the
  // buffer as a, b and c: each launch doubles every word, so the words tell how many launches ran
  // before a read. `before` (if any) is recorded on `s` just before the first launch.
  CUdeviceptr LaunchDoublings(CUstream s, uint32_t n, int times, CUevent before = nullptr) {
    CUfunction vadd = TestFunction("vadd");
    CUdeviceptr d = 0;
    EXPECT_CU(cuMemAlloc(&d, n * 4));
    EXPECT_CU(cuMemsetD32(d, 1, n));
    void* params[] = {&d, &d, &d, &n};
    if (before != nullptr) {
      EXPECT_CU(cuEventRecord(before, s));
    }
    for (int i = 0; i < times; ++i) {
      EXPECT_CU(cuLaunchKernel(vadd, n / 256, 1, 1, 256, 1, 1, 0, s, params, nullptr));
    }
    return d;
  }

  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  CUmodule module_ = nullptr;
  std::vector<uint8_t> image_;
};

TEST_F(RuntimeDriverApi, Devices) {
  int count = 0;
  ASSERT_CU(cuDeviceGetCount(&count));
  EXPECT_EQ(count, 1);
  CUdevice d;
  EXPECT_EQ(cuDeviceGet(&d, 1), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cuDeviceGet(&d, -1), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cuDeviceGet(nullptr, 0), CUDA_ERROR_INVALID_VALUE);
  char name[256];
  ASSERT_CU(cuDeviceGetName(name, sizeof name, dev_));
  EXPECT_NE(std::string(name).find("gpuvm"), std::string::npos) << name;
  char tiny[4];
  ASSERT_CU(cuDeviceGetName(tiny, sizeof tiny, dev_));
  EXPECT_EQ(strlen(tiny), 3u);
  EXPECT_EQ(cuDeviceGetName(name, 0, dev_), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuDeviceGetName(name, 16, 7), CUDA_ERROR_INVALID_DEVICE);
  size_t total = 0;
  ASSERT_CU(cuDeviceTotalMem(&total, dev_));
  EXPECT_GE(total, 64u << 20);
  EXPECT_EQ(Attribute(cuDeviceGetAttribute, CU_DEVICE_ATTRIBUTE_WARP_SIZE, dev_), 32);
  EXPECT_EQ(Attribute(cuDeviceGetAttribute, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, dev_), 1024);
  EXPECT_EQ(Attribute(cuDeviceGetAttribute, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, dev_), 65535);
  EXPECT_GT(Attribute(cuDeviceGetAttribute, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev_), 0);
  ExpectRefusals(cuDeviceGetAttribute, dev_, CU_DEVICE_ATTRIBUTE_WARP_SIZE, {0, 100000});
  int major = 0, minor = 0;
  ASSERT_CU(cuDeviceComputeCapability(&major, &minor, dev_));
  EXPECT_EQ(major, 7);
  EXPECT_EQ(minor, 5);
  EXPECT_EQ(cuDeviceComputeCapability(nullptr, &minor, dev_), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(RuntimeDriverApi, ContextStack) {
  CUcontext cur = nullptr;
  ASSERT_CU(cuCtxGetCurrent(&cur));
  EXPECT_EQ(cur, ctx_);  // cuCtxCreate makes the new context current
  CUcontext other;
  ASSERT_CU(cuCtxCreate(&other, nullptr, 0, dev_));
  ASSERT_CU(cuCtxGetCurrent(&cur));
  EXPECT_EQ(cur, other);
  CUcontext popped;
  ASSERT_CU(cuCtxPopCurrent(&popped));
  EXPECT_EQ(popped, other);
  ASSERT_CU(cuCtxGetCurrent(&cur));
  EXPECT_EQ(cur, ctx_);
  ASSERT_CU(cuCtxPushCurrent(other));
  ASSERT_CU(cuCtxSetCurrent(ctx_));
  ASSERT_CU(cuCtxGetCurrent(&cur));
  EXPECT_EQ(cur, ctx_);
  CUdevice d = -1;
  ASSERT_CU(cuCtxGetDevice(&d));
  EXPECT_EQ(d, dev_);
  ASSERT_CU(cuCtxSynchronize());
  ASSERT_CU(cuCtxDestroy(other));
  EXPECT_EQ(cuCtxDestroy(other), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cuCtxPushCurrent(other), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cuCtxSetCurrent(reinterpret_cast<CUcontext>(0x1234)), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cuCtxCreate(nullptr, nullptr, 0, dev_), CUDA_ERROR_INVALID_VALUE);
  CUcontext bad;
  EXPECT_EQ(cuCtxCreate(&bad, nullptr, 0x100, dev_), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuCtxCreate(&bad, nullptr, 0, 3), CUDA_ERROR_INVALID_DEVICE);

  // Without a current context, context-bound calls fail.
  std::thread([] {
    CUdeviceptr p;
    CUcontext none = reinterpret_cast<CUcontext>(1);
    EXPECT_CU(cuCtxGetCurrent(&none));
    EXPECT_EQ(none, nullptr);
    EXPECT_EQ(cuMemAlloc(&p, 16), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(cuCtxPopCurrent(nullptr), CUDA_ERROR_INVALID_CONTEXT);
  }).join();
}

TEST_F(RuntimeDriverApi, PrimaryContext) {
  CUcontext p1, p2;
  ASSERT_CU(cuDevicePrimaryCtxRetain(&p1, dev_));
  ASSERT_CU(cuDevicePrimaryCtxRetain(&p2, dev_));
  EXPECT_EQ(p1, p2);
  EXPECT_NE(p1, ctx_);
  unsigned flags = 7;
  int active = 0;
  ASSERT_CU(cuDevicePrimaryCtxGetState(dev_, &flags, &active));
  EXPECT_EQ(active, 1);
  EXPECT_EQ(cuCtxDestroy(p1), CUDA_ERROR_INVALID_CONTEXT);  // not by cuCtxDestroy
  ASSERT_CU(cuCtxPushCurrent(p1));
  CUdeviceptr d;
  ASSERT_CU(cuMemAlloc(&d, 64));
  ASSERT_CU(cuMemFree(d));
  ASSERT_CU(cuCtxPopCurrent(nullptr));
  ASSERT_CU(cuDevicePrimaryCtxRelease(dev_));
  ASSERT_CU(cuDevicePrimaryCtxRelease(dev_));
  EXPECT_EQ(cuDevicePrimaryCtxRelease(dev_), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cuDevicePrimaryCtxRetain(nullptr, dev_), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuDevicePrimaryCtxRetain(&p1, 9), CUDA_ERROR_INVALID_DEVICE);
}

// cuDevicePrimaryCtxReset destroys what the primary context owns; the same handle works again on
// its next use, with a fresh address space (its old allocations are gone).
TEST_F(RuntimeDriverApi, PrimaryContextResetComesBackOnItsNextUse) {
  CUcontext p;
  ASSERT_CU(cuDevicePrimaryCtxRetain(&p, dev_));
  ASSERT_CU(cuCtxPushCurrent(p));
  CUdeviceptr before;
  ASSERT_CU(cuMemAlloc(&before, 4096));
  CUstream stream;
  ASSERT_CU(cuStreamCreate(&stream, 0));
  ASSERT_CU(cuDevicePrimaryCtxReset(dev_));
  ASSERT_CU(cuDevicePrimaryCtxReset(dev_));  // a second reset of a reset context is fine
  EXPECT_EQ(cuStreamSynchronize(stream), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuMemFree(before), CUDA_ERROR_INVALID_VALUE);
  CUdeviceptr after;
  ASSERT_CU(cuMemAlloc(&after, 4096));
  const uint32_t value = 0x5eed;
  uint32_t back = 0;
  ASSERT_CU(cuMemcpyHtoD(after, &value, sizeof value));
  ASSERT_CU(cuMemcpyDtoH(&back, after, sizeof back));
  EXPECT_EQ(back, value);
  ASSERT_CU(cuMemFree(after));
  ASSERT_CU(cuCtxSynchronize());
  ASSERT_CU(cuCtxPopCurrent(nullptr));
  ASSERT_CU(cuDevicePrimaryCtxRelease(dev_));
}

TEST_F(RuntimeDriverApi, AllocAndCopy) {
  size_t free0 = 0, total = 0;
  ASSERT_CU(cuMemGetInfo(&free0, &total));
  EXPECT_GT(total, 0u);
  const size_t n = (5u << 20) / 4 + 3;  // past the staging buffers, not a page multiple
  std::vector<uint32_t> in(n), out(n, 0);
  for (size_t i = 0; i < n; ++i) in[i] = uint32_t(i * 2654435761u);
  CUdeviceptr a, b;
  ASSERT_CU(cuMemAlloc(&a, n * 4));
  ASSERT_CU(cuMemAlloc(&b, n * 4));
  size_t free1 = 0;
  ASSERT_CU(cuMemGetInfo(&free1, &total));
  EXPECT_LT(free1, free0);
  ASSERT_CU(cuMemcpyHtoD(a, in.data(), n * 4));
  ASSERT_CU(cuMemcpyDtoD(b, a, n * 4));
  ASSERT_CU(cuMemcpyDtoH(out.data(), b, n * 4));
  EXPECT_EQ(in, out);
  // Small copies (the BAR1 path) at an offset inside the allocation.
  uint32_t word = 0xdeadbeef, back = 0;
  ASSERT_CU(cuMemcpyHtoD(a + 4 * 1000, &word, 4));
  ASSERT_CU(cuMemcpyDtoH(&back, a + 4 * 1000, 4));
  EXPECT_EQ(back, 0xdeadbeefu);
  // Zero-byte copies are no-ops, even with null pointers.
  ASSERT_CU(cuMemcpyHtoD(a, nullptr, 0));
  ASSERT_CU(cuMemFree(a));
  ASSERT_CU(cuMemFree(b));
}

TEST_F(RuntimeDriverApi, AllocErrors) {
  CUdeviceptr p;
  EXPECT_EQ(cuMemAlloc(&p, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemAlloc(nullptr, 16), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemAlloc(&p, size_t(1) << 40), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_CU(cuMemAlloc(&p, 4096));
  EXPECT_EQ(cuMemFree(p + 4), CUDA_ERROR_INVALID_VALUE);  // not the start of an allocation
  EXPECT_CU(cuMemFree(0));                                // freeing null is allowed
  ASSERT_CU(cuMemFree(p));
  EXPECT_EQ(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);  // double free
  EXPECT_EQ(cuMemFree(0xdead0000), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(RuntimeDriverApi, CopyErrors) {
  CUdeviceptr d;
  ASSERT_CU(cuMemAlloc(&d, 4096));
  std::vector<uint8_t> host(8192);
  EXPECT_EQ(cuMemcpyHtoD(d, host.data(), 4097), CUDA_ERROR_INVALID_VALUE);  // past the end
  EXPECT_EQ(cuMemcpyHtoD(d + 4000, host.data(), 97), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpyDtoH(host.data(), d + 1, 4096), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpyDtoH(nullptr, d, 16), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpyHtoD(d, nullptr, 16), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpyHtoD(0x10, host.data(), 16), CUDA_ERROR_INVALID_VALUE);  // not allocated
  EXPECT_EQ(cuMemcpyDtoD(d, d + 2048, 4096), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpyHtoD(d, host.data(), ~size_t(0)), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemsetD8(d, 1, 4097), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemsetD32(d + 2, 1, 4), CUDA_ERROR_INVALID_VALUE);  // misaligned
  EXPECT_EQ(cuMemsetD32(d, 1, 1025), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemsetD32(d, 1, ~size_t(0)), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuMemFree(d));
}

TEST_F(RuntimeDriverApi, Memset) {
  CUdeviceptr d;
  ASSERT_CU(cuMemAlloc(&d, 1 << 16));
  ASSERT_CU(cuMemsetD8(d, 0xab, 1 << 16));
  ASSERT_CU(cuMemsetD32(d + 64, 0x01020304, 3));
  std::vector<uint8_t> out(1 << 16);
  ASSERT_CU(cuMemcpyDtoH(out.data(), d, out.size()));
  EXPECT_EQ(out[0], 0xab);
  EXPECT_EQ(out[63], 0xab);
  uint32_t w;
  memcpy(&w, &out[64], 4);
  EXPECT_EQ(w, 0x01020304u);
  memcpy(&w, &out[72], 4);
  EXPECT_EQ(w, 0x01020304u);
  EXPECT_EQ(out[76], 0xab);
  EXPECT_EQ(out.back(), 0xab);
  ASSERT_CU(cuMemFree(d));
}

TEST_F(RuntimeDriverApi, PinnedHostMemoryAndAsyncCopies) {
  const size_t bytes = 1 << 20;
  void* pinned = nullptr;
  ASSERT_CU(cuMemAllocHost(&pinned, bytes));
  void* mapped = nullptr;
  ASSERT_CU(cuMemHostAlloc(&mapped, bytes, CU_MEMHOSTALLOC_DEVICEMAP));
  EXPECT_EQ(cuMemHostAlloc(&mapped, bytes, 0x80), CUDA_ERROR_INVALID_VALUE);
  CUdeviceptr dev_view = 0;
  ASSERT_CU(cuMemHostGetDevicePointer(&dev_view, static_cast<char*>(mapped) + 16, 0));
  EXPECT_NE(dev_view, 0u);
  EXPECT_EQ(cuMemHostGetDevicePointer(&dev_view, mapped, 1), CUDA_ERROR_INVALID_VALUE);
  int on_stack;
  EXPECT_EQ(cuMemHostGetDevicePointer(&dev_view, &on_stack, 0), CUDA_ERROR_INVALID_VALUE);

  auto* p = static_cast<uint32_t*>(pinned);
  for (size_t i = 0; i < bytes / 4; ++i) p[i] = uint32_t(i ^ 0x5a5a);
  CUdeviceptr d;
  ASSERT_CU(cuMemAlloc(&d, bytes));
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, 0));
  ASSERT_CU(cuMemcpyHtoDAsync(d, pinned, bytes, s));
  ASSERT_CU(cuMemcpyDtoHAsync(mapped, d, bytes, s));
  ASSERT_CU(cuStreamSynchronize(s));
  EXPECT_EQ(memcmp(pinned, mapped, bytes), 0);
  // DtoD and memsets on the stream, then a pageable async copy (staged, synchronous).
  CUdeviceptr d2;
  ASSERT_CU(cuMemAlloc(&d2, bytes));
  ASSERT_CU(cuMemcpyDtoDAsync(d2, d, bytes, s));
  ASSERT_CU(cuMemsetD8Async(d2, 7, 16, s));
  ASSERT_CU(cuMemsetD32Async(d2 + 16, 9, 4, s));
  std::vector<uint32_t> out(bytes / 4);
  ASSERT_CU(cuMemcpyDtoHAsync(out.data(), d2, bytes, s));
  ASSERT_CU(cuStreamSynchronize(s));
  EXPECT_EQ(out[0], 0x07070707u);
  EXPECT_EQ(out[4], 9u);
  EXPECT_EQ(out[8], p[8]);
  EXPECT_EQ(out.back(), p[bytes / 4 - 1]);

  EXPECT_EQ(cuMemFreeHost(static_cast<char*>(pinned) + 8), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuMemFreeHost(pinned));
  ASSERT_CU(cuMemFreeHost(mapped));
  EXPECT_EQ(cuMemFreeHost(pinned), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuStreamDestroy(s));
  ASSERT_CU(cuMemFree(d));
  ASSERT_CU(cuMemFree(d2));
}

TEST_F(RuntimeDriverApi, HostRegister) {
  const size_t bytes = 64 << 10;
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  ASSERT_CU(cuMemHostRegister(mem, bytes, 0));
  EXPECT_EQ(cuMemHostRegister(mem, bytes, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  CUdeviceptr view;
  ASSERT_CU(cuMemHostGetDevicePointer(&view, mem, 0));
  memset(mem, 0x3c, bytes);
  CUdeviceptr d;
  ASSERT_CU(cuMemAlloc(&d, bytes));
  ASSERT_CU(cuMemcpyDtoD(d, view, bytes));  // the GPU reads the registered memory
  uint8_t b = 0;
  ASSERT_CU(cuMemcpyDtoH(&b, d + bytes - 1, 1));
  EXPECT_EQ(b, 0x3c);
  ASSERT_CU(cuMemHostUnregister(mem));
  EXPECT_EQ(cuMemHostUnregister(mem), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  EXPECT_EQ(cuMemHostRegister(nullptr, bytes, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemHostRegister(mem, 0, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemHostRegister(mem, bytes, 0x100), CUDA_ERROR_INVALID_VALUE);

  // Any address and size (CUDA 4.1 on): two neighbours sharing a page, the device pointer of the
  // exact byte, overlapping bytes refused.
  uint8_t* bytes8 = static_cast<uint8_t*>(mem);
  ASSERT_CU(cuMemHostRegister(bytes8 + 10, 5000, 0));
  ASSERT_CU(cuMemHostRegister(bytes8 + 5010, 100, 0));
  EXPECT_EQ(cuMemHostRegister(bytes8 + 5000, 20, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  CUdeviceptr first, second;
  ASSERT_CU(cuMemHostGetDevicePointer(&first, bytes8 + 10, 0));
  ASSERT_CU(cuMemHostGetDevicePointer(&second, bytes8 + 5010, 0));
  EXPECT_EQ(first % 4096, (reinterpret_cast<uintptr_t>(bytes8) + 10) % 4096);
  CUdeviceptr inside;
  ASSERT_CU(cuMemHostGetDevicePointer(&inside, bytes8 + 4999, 0));
  EXPECT_EQ(inside, first + 4989);
  for (int i = 0; i < 5110; ++i) bytes8[10 + i] = uint8_t(i * 7);
  ASSERT_CU(cuMemcpyDtoD(d, first, 5000));  // the GPU reads both registrations
  ASSERT_CU(cuMemcpyDtoD(d + 5000, second, 100));
  std::vector<uint8_t> seen(5100);
  ASSERT_CU(cuMemcpyDtoH(seen.data(), d, seen.size()));
  for (int i = 0; i < 5100; ++i) ASSERT_EQ(seen[i], uint8_t(i * 7)) << i;
  ASSERT_CU(cuMemHostUnregister(bytes8 + 10));
  ASSERT_CU(cuMemcpyDtoD(second, d, 100));  // the shared page still reaches the GPU for the other
  for (int i = 0; i < 100; ++i) ASSERT_EQ(bytes8[5010 + i], uint8_t(i * 7)) << i;
  ASSERT_CU(cuMemHostUnregister(bytes8 + 5010));
  ASSERT_CU(cuMemFree(d));
  munmap(mem, bytes);
}

TEST_F(RuntimeDriverApi, ModuleAndLaunch) {
  CUmodule m = LoadTestModule();
  ASSERT_NE(m, nullptr);
  CUfunction vadd;
  ASSERT_CU(cuModuleGetFunction(&vadd, m, "vadd"));
  CUfunction missing;
  EXPECT_EQ(cuModuleGetFunction(&missing, m, "nope"), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(cuModuleGetFunction(&missing, nullptr, "vadd"), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuModuleGetFunction(nullptr, m, "vadd"), CUDA_ERROR_INVALID_VALUE);

  const uint32_t n = 10000;
  std::vector<uint32_t> a(n), b(n), c(n, 0);
  for (uint32_t i = 0; i < n; ++i) {
    a[i] = i;
    b[i] = 3 * i + 1;
  }
  auto [da, db, dc] = VaddBuffers(a, b);
  ASSERT_FALSE(HasFailure());
  uint32_t count = n;
  void* params[] = {&da, &db, &dc, &count};
  ASSERT_CU(cuLaunchKernel(vadd, (n + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
  ASSERT_CU(cuCtxSynchronize());
  ASSERT_CU(cuMemcpyDtoH(c.data(), dc, n * 4));
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(c[i], 4 * i + 1) << i;

  // The same launch with a packed parameter buffer (CU_LAUNCH_PARAM_BUFFER_*), on a stream.
  struct {
    uint64_t a, b, c;
    uint32_t n;
    uint32_t pad;
  } packed = {dc, da, db, n, 0};
  size_t packed_size = 28;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE,
                   &packed_size, CU_LAUNCH_PARAM_END};
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cuLaunchKernel(vadd, (n + 127) / 128, 1, 1, 128, 1, 1, 0, s, nullptr, extra));
  ASSERT_CU(cuStreamSynchronize(s));
  ASSERT_CU(cuMemcpyDtoH(b.data(), db, n * 4));
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(b[i], 5 * i + 1) << i;
  ASSERT_CU(cuStreamDestroy(s));
  ASSERT_CU(cuModuleUnload(m));
  EXPECT_EQ(cuModuleUnload(m), CUDA_ERROR_INVALID_HANDLE);
  // The function died with its module.
  EXPECT_EQ(cuLaunchKernel(vadd, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr),
            CUDA_ERROR_INVALID_HANDLE);
}

TEST_F(RuntimeDriverApi, LaunchConfigurationErrors) {
  CUmodule m = LoadTestModule();
  CUfunction vadd, fill;
  ASSERT_CU(cuModuleGetFunction(&vadd, m, "vadd"));
  ASSERT_CU(cuModuleGetFunction(&fill, m, "fill_from_global"));
  CUdeviceptr d;
  ASSERT_CU(cuMemAlloc(&d, 4096));
  uint32_t n = 0;
  void* params[] = {&d, &d, &d, &n};
  auto launch = [&](unsigned gx, unsigned gy, unsigned bx, unsigned by, unsigned bz,
                    unsigned shared) {
    return cuLaunchKernel(vadd, gx, gy, 1, bx, by, bz, shared, nullptr, params, nullptr);
  };
  EXPECT_EQ(launch(1, 1, 1025, 1, 1, 0), CUDA_ERROR_INVALID_VALUE);   // too many threads
  EXPECT_EQ(launch(1, 1, 512, 4, 1, 0), CUDA_ERROR_INVALID_VALUE);    // 2048 threads
  EXPECT_EQ(launch(1, 1, 1, 1, 65, 0), CUDA_ERROR_INVALID_VALUE);     // block z > 64
  EXPECT_EQ(launch(0, 1, 1, 1, 1, 0), CUDA_ERROR_INVALID_VALUE);      // empty grid
  EXPECT_EQ(launch(1, 1, 0, 1, 1, 0), CUDA_ERROR_INVALID_VALUE);      // empty block
  EXPECT_EQ(launch(65536, 1, 1, 1, 1, 0), CUDA_ERROR_INVALID_VALUE);  // grid x past Fermi's limit
  EXPECT_EQ(launch(1, 1, 32, 1, 1, 49152 + 1), CUDA_ERROR_INVALID_VALUE);  // shared memory
  EXPECT_EQ(cuLaunchKernel(vadd, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  void* null_param[] = {&d, nullptr, &d, &n};
  EXPECT_EQ(cuLaunchKernel(vadd, 1, 1, 1, 1, 1, 1, 0, nullptr, null_param, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  size_t small = 8;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &d, CU_LAUNCH_PARAM_BUFFER_SIZE, &small,
                   CU_LAUNCH_PARAM_END};
  EXPECT_EQ(cuLaunchKernel(vadd, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, extra),
            CUDA_ERROR_INVALID_VALUE);
  void* bad_extra[] = {reinterpret_cast<void*>(0x77), nullptr, CU_LAUNCH_PARAM_END};
  EXPECT_EQ(cuLaunchKernel(vadd, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, bad_extra),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLaunchKernel(vadd, 1, 1, 1, 1, 1, 1, 0, nullptr, params, extra),
            CUDA_ERROR_INVALID_VALUE);
  // A kernel declaring .maxthreads 256 refuses 257 threads.
  void* fill_params[] = {&d};
  EXPECT_EQ(cuLaunchKernel(fill, 1, 1, 1, 257, 1, 1, 0, nullptr, fill_params, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr),
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuLaunchKernel(reinterpret_cast<CUfunction>(&n), 1, 1, 1, 1, 1, 1, 0, nullptr, params,
                           nullptr),
            CUDA_ERROR_INVALID_HANDLE);
  CUstream dead;
  ASSERT_CU(cuStreamCreate(&dead, 0));
  ASSERT_CU(cuStreamDestroy(dead));
  EXPECT_EQ(cuLaunchKernel(vadd, 1, 1, 1, 1, 1, 1, 0, dead, params, nullptr),
            CUDA_ERROR_INVALID_HANDLE);
  // A function of another context.
  CUcontext other;
  ASSERT_CU(cuCtxCreate(&other, nullptr, 0, dev_));
  EXPECT_EQ(cuLaunchKernel(vadd, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr),
            CUDA_ERROR_INVALID_CONTEXT);
  ASSERT_CU(cuCtxDestroy(other));
  ASSERT_CU(cuCtxSetCurrent(ctx_));
  // Nothing above launched anything, and the context is fine.
  ASSERT_CU(cuCtxSynchronize());
  ASSERT_CU(cuMemFree(d));
}

TEST_F(RuntimeDriverApi, FunctionAttributes) {
  CUfunction fill = TestFunction("fill_from_global");
  CUfunction vadd = TestFunction("vadd");
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(Attribute(cuFuncGetAttribute, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fill), 256);
  EXPECT_EQ(Attribute(cuFuncGetAttribute, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, vadd), 1024);
  EXPECT_GE(Attribute(cuFuncGetAttribute, CU_FUNC_ATTRIBUTE_NUM_REGS, vadd), 16);
  EXPECT_EQ(Attribute(cuFuncGetAttribute, CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, vadd), 4);
  EXPECT_EQ(Attribute(cuFuncGetAttribute, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, vadd), 0);
  ExpectRefusals(cuFuncGetAttribute, vadd, CU_FUNC_ATTRIBUTE_NUM_REGS, {99});
  int v = 0;
  EXPECT_EQ(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, nullptr), CUDA_ERROR_INVALID_HANDLE);
  // Settable: the dynamic shared size up to what the device allows, the carveout hint; each read
  // back. Refused values, read-only attributes and bad handles change nothing.
  const auto dynamic = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
  const auto carveout = CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT;
  EXPECT_EQ(Attribute(cuFuncGetAttribute, dynamic, fill), 48 * 1024);
  EXPECT_CU(cuFuncSetAttribute(fill, dynamic, 1000));
  EXPECT_EQ(cuFuncSetAttribute(fill, dynamic, 48 * 1024 + 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuFuncSetAttribute(fill, dynamic, -1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Attribute(cuFuncGetAttribute, dynamic, fill), 1000);
  EXPECT_EQ(Attribute(cuFuncGetAttribute, dynamic, vadd), 48 * 1024);  // per function
  EXPECT_CU(cuFuncSetAttribute(fill, carveout, 25));
  EXPECT_EQ(cuFuncSetAttribute(fill, carveout, -2), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Attribute(cuFuncGetAttribute, carveout, fill), 25);
  EXPECT_EQ(cuFuncSetAttribute(fill, CU_FUNC_ATTRIBUTE_NUM_REGS, 8), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuFuncSetAttribute(nullptr, dynamic, 0), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_CU(cuFuncSetCacheConfig(fill, CU_FUNC_CACHE_PREFER_L1));
  EXPECT_EQ(cuFuncSetCacheConfig(fill, CUfunc_cache(4)), CUDA_ERROR_INVALID_VALUE);
  EXPECT_CU(cuFuncSetSharedMemConfig(fill, CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE));
  EXPECT_EQ(cuFuncSetSharedMemConfig(fill, CUsharedconfig(3)), CUDA_ERROR_INVALID_VALUE);
}

// A kernel using all of its 48 KiB of static shared memory and bar.red (whose counter word the JIT
// adds in shared memory): the word is not the program's, so the launch is allowed and the
// attribute shows the program's 48 KiB.
TEST_F(RuntimeDriverApi, FullStaticSharedMemoryWithBarRed) {
  const char* ptx = R"(
.version 9.0
.target sm_75
.address_size 64
.visible .entry k(.param .u64 out)
{
  .reg .pred %p<3>;
  .reg .b32 %r<4>;
  .reg .b64 %rd<3>;
  .shared .align 16 .b8 tile[49152];
  mov.u32 %r1, %tid.x;
  st.shared.u32 [tile+49148], %r1;
  setp.ne.u32 %p1, %r1, 0;
  bar.red.popc.u32 %r2, 0, %p1;
  ld.param.u64 %rd1, [out];
  st.global.u32 [%rd1], %r2;
  ret;
}
)";
  CUmodule m;
  ASSERT_CU(cuModuleLoadData(&m, ptx));
  CUfunction k;
  ASSERT_CU(cuModuleGetFunction(&k, m, "k"));
  EXPECT_EQ(Attribute(cuFuncGetAttribute, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k), 49152);
  EXPECT_EQ(Attribute(cuFuncGetAttribute, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k), 0);
  CUdeviceptr out;
  ASSERT_CU(cuMemAlloc(&out, 4));
  void* params[] = {&out};
  ASSERT_CU(cuLaunchKernel(k, 1, 1, 1, 64, 1, 1, 0, nullptr, params, nullptr));
  uint32_t count = 0;
  ASSERT_CU(cuMemcpyDtoH(&count, out, 4));
  EXPECT_EQ(count, 63u);
  // One byte of dynamic shared memory more is past the device's 48 KiB; GPUVM_LOG says so.
  ASSERT_EQ(::setenv("GPUVM_LOG", "1", 1), 0);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(cuLaunchKernel(k, 1, 1, 1, 64, 1, 1, 1, nullptr, params, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  const std::string said = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(::unsetenv("GPUVM_LOG"), 0);
  EXPECT_NE(said.find("launch of 'k' refused: more shared memory"), std::string::npos) << said;
  ASSERT_CU(cuMemFree(out));
  ASSERT_CU(cuModuleUnload(m));
}

TEST_F(RuntimeDriverApi, ModuleGlobalsAndConstantBanks) {
  CUmodule m = LoadTestModule();
  CUdeviceptr counter = 0, pointer = 0;
  size_t size = 0;
  ASSERT_CU(cuModuleGetGlobal(&counter, &size, m, "counter"));
  EXPECT_EQ(size, 4u);
  ASSERT_CU(cuModuleGetGlobal(&pointer, nullptr, m, "pointer_to_counter"));
  EXPECT_EQ(cuModuleGetGlobal(&pointer, &size, m, "nope"), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(cuModuleGetGlobal(&pointer, &size, nullptr, "counter"), CUDA_ERROR_INVALID_HANDLE);
  uint32_t value = 0;
  ASSERT_CU(cuMemcpyDtoH(&value, counter, 4));
  EXPECT_EQ(value, 40u);
  uint64_t relocated = 0;
  ASSERT_CU(cuMemcpyDtoH(&relocated, pointer, 8));
  EXPECT_EQ(relocated, counter + 4);
  // The kernel finds the global through bank 2 and the constant through bank 1.
  value = 100;
  ASSERT_CU(cuMemcpyHtoD(counter, &value, 4));
  CUfunction fill;
  ASSERT_CU(cuModuleGetFunction(&fill, m, "fill_from_global"));
  CUdeviceptr out;
  ASSERT_CU(cuMemAlloc(&out, 64 * 4));
  void* params[] = {&out};
  ASSERT_CU(cuLaunchKernel(fill, 1, 1, 1, 64, 1, 1, 0, nullptr, params, nullptr));
  std::vector<uint32_t> host(64);
  ASSERT_CU(cuMemcpyDtoH(host.data(), out, 64 * 4));
  for (uint32_t i = 0; i < 64; ++i) EXPECT_EQ(host[i], 102 + i);
}

// A module variable is zero past its initializer (PTX's rule; nvcc's string constants end in
// that zero: `.b8 $str[5] = {101, 118, 101, 110}`), also where the memory held other bytes before.
TEST_F(RuntimeDriverApi, ModuleGlobalsAreZeroPastTheirInitializer) {
#ifndef GPUVM_RUNTIME_HAVE_TRANSLATOR
  GTEST_SKIP() << "the PTX translator is not in this build";
#endif
  for (size_t bytes : {size_t{4096}, size_t{64} << 10, size_t{512} << 10}) {
    CUdeviceptr dirty;
    ASSERT_CU(cuMemAlloc(&dirty, bytes));
    ASSERT_CU(cuMemsetD8(dirty, 0xab, bytes));
    ASSERT_CU(cuMemFree(dirty));
  }
  const char* ptx =
      ".version 9.0\n.target sm_75\n.address_size 64\n"
      ".global .align 1 .b8 str[5] = {101, 118, 101, 110};\n"
      ".global .align 4 .b8 small[3000] = {1, 2, 3};\n"
      ".global .align 8 .b8 large[300000] = {7};\n"
      ".global .align 4 .u32 plain[16];\n"
      ".visible .entry k()\n{\n  ret;\n}\n";
  CUmodule m;
  ASSERT_CU(cuModuleLoadData(&m, ptx));
  for (const char* name : {"str", "small", "large", "plain"}) {
    CUdeviceptr va;
    size_t size;
    ASSERT_CU(cuModuleGetGlobal(&va, &size, m, name));
    std::vector<uint8_t> host(size);
    ASSERT_CU(cuMemcpyDtoH(host.data(), va, size));
    const std::string n = name;
    const size_t init = n == "str" ? 4 : n == "small" ? 3 : n == "large" ? 1 : 0;
    for (size_t i = init; i < size; ++i) ASSERT_EQ(host[i], 0) << name << "[" << i << "]";
  }
  ASSERT_CU(cuModuleUnload(m));
}

TEST_F(RuntimeDriverApi, ModuleLoadErrors) {
  CUmodule m;
  EXPECT_EQ(cuModuleLoadData(&m, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuModuleLoadData(nullptr, "x"), CUDA_ERROR_INVALID_VALUE);
  // Text that is no PTX.
  EXPECT_EQ(cuModuleLoadData(&m, "this is not PTX"), CUDA_ERROR_INVALID_PTX);
  // An NVIDIA cubin: machine code we cannot run.
  const char elf[] =
      "\x7f"
      "ELF\x02\x01\x01";
  EXPECT_EQ(cuModuleLoadData(&m, elf), CUDA_ERROR_NO_BINARY_FOR_GPU);
  // A GVISA module image with a corrupted kernel.
  std::vector<uint8_t> image = gpuvm::runtime::testing::TestModuleImage();
  std::vector<uint8_t> bad = image;
  const uint8_t kernel_magic[4] = {'G', 'V', 'K', 'N'};
  auto at = std::search(bad.begin(), bad.end(), kernel_magic, kernel_magic + 4);
  ASSERT_NE(at, bad.end());
  at[0] ^= 0xff;
  EXPECT_EQ(cuModuleLoadData(&m, bad.data()), CUDA_ERROR_INVALID_IMAGE);
  // A fat binary container header claiming far more than exists is refused before reading it.
  uint8_t container[16] = {0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0, 0, 0, 0, 0x40, 0, 0, 0, 0};
  EXPECT_EQ(cuModuleLoadData(&m, container), CUDA_ERROR_INVALID_IMAGE);
  EXPECT_EQ(cuModuleLoad(&m, "/nonexistent/module.ptx"), CUDA_ERROR_FILE_NOT_FOUND);
  // The JIT error log.
  char log[256] = "untouched";
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {log, reinterpret_cast<void*>(uintptr_t(sizeof log))};
  EXPECT_EQ(
      cuModuleLoadDataEx(&m, ".version 9.0\n.target sm_75\n.address_size 64\n.visible .entry k( {",
                         2, options, values),
      CUDA_ERROR_INVALID_PTX);
  EXPECT_NE(std::string(log), "untouched");
  EXPECT_NE(std::string(log).find("line"), std::string::npos) << log;
  EXPECT_EQ(cuModuleLoadDataEx(&m, "x", 1, nullptr, nullptr), CUDA_ERROR_INVALID_VALUE);
  // A program that asks for no log learns why on stderr when GPUVM_LOG is set, and only then.
  const std::string bad_ptx = ".version 9.0\n.target sm_75\n.address_size 64\n.entry k( {";
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(cuModuleLoadData(&m, bad_ptx.c_str()), CUDA_ERROR_INVALID_PTX);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  ASSERT_EQ(::setenv("GPUVM_LOG", "1", 1), 0);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(cuModuleLoadData(&m, bad_ptx.c_str()), CUDA_ERROR_INVALID_PTX);
  const std::string said = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(::unsetenv("GPUVM_LOG"), 0);
  EXPECT_NE(said.find("CUDA_ERROR_INVALID_PTX"), std::string::npos) << said;
  EXPECT_NE(said.find("line"), std::string::npos) << said;
  // Loading the image again works: the failures left nothing behind.
  ASSERT_CU(cuModuleLoadData(&m, image.data()));
  ASSERT_CU(cuModuleUnload(m));
}

// The fat binary nvcc 13 made for runtime/fatbin/testdata/vadd.cu: its PTX is ZSTD-compressed.
TEST_F(RuntimeDriverApi, FatBinaryFromNvcc) {
  FILE* f = fopen(GPUVM_FATBIN_TESTDATA "/vadd_sm75_zstd.fatbin", "rb");
  ASSERT_NE(f, nullptr);
  std::vector<uint8_t> blob(1 << 16);
  blob.resize(fread(blob.data(), 1, blob.size(), f));
  fclose(f);
  CUmodule m;
  CUresult r = cuModuleLoadFatBinary(&m, blob.data());
#ifndef GPUVM_RUNTIME_HAVE_TRANSLATOR
  EXPECT_EQ(r, CUDA_ERROR_JIT_COMPILER_NOT_FOUND);
  GTEST_SKIP() << "the PTX translator is not in this build; the fat binary was read up to the JIT";
#endif
  ASSERT_EQ(r, CUDA_SUCCESS);
  CUfunction vadd;
  ASSERT_CU(cuModuleGetFunction(&vadd, m, "_Z4vaddPKfS0_Pfi"));
  const int n = 1000;
  std::vector<float> a(n), b(n), c(n);
  for (int i = 0; i < n; ++i) {
    a[i] = float(i) * 0.5f;
    b[i] = float(n - i);
  }
  auto [da, db, dc] = VaddBuffers(a, b);
  ASSERT_FALSE(HasFailure());
  int count = n;
  void* params[] = {&da, &db, &dc, &count};
  ASSERT_CU(cuLaunchKernel(vadd, (n + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
  ASSERT_CU(cuMemcpyDtoH(c.data(), dc, n * 4));
  for (int i = 0; i < n; ++i) ASSERT_EQ(c[i], a[i] + b[i]) << i;
}

TEST_F(RuntimeDriverApi, KernelFaultIsStickyAndContextLocal) {
  CUfunction poke = TestFunction("poke");
  ASSERT_NE(poke, nullptr);
  CUdeviceptr good;
  ASSERT_CU(cuMemAlloc(&good, 4096));
  uint64_t bad_address = 0x10;  // never mapped
  void* params[] = {&bad_address};
  // The launch itself succeeds; the fault surfaces at the next synchronizing call.
  ASSERT_CU(cuLaunchKernel(poke, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr));
  EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  // From then on the context is unusable.
  CUdeviceptr p;
  EXPECT_EQ(cuMemAlloc(&p, 16), CUDA_ERROR_ILLEGAL_ADDRESS);
  uint32_t v;
  EXPECT_EQ(cuMemcpyDtoH(&v, good, 4), CUDA_ERROR_ILLEGAL_ADDRESS);
  void* good_params[] = {&good};
  EXPECT_EQ(cuLaunchKernel(poke, 1, 1, 1, 1, 1, 1, 0, nullptr, good_params, nullptr),
            CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  // Another context is unaffected.
  CUcontext other;
  ASSERT_CU(cuCtxCreate(&other, nullptr, 0, dev_));
  ASSERT_CU(cuMemAlloc(&p, 16));
  ASSERT_CU(cuMemFree(p));
  ASSERT_CU(cuCtxDestroy(other));
  // Destroying the faulted context works.
  ASSERT_CU(cuCtxDestroy(ctx_));
  ctx_ = nullptr;
}

// Every trap reason of the software GPU surfaces as its own CUDA code at the next synchronizing
// call, and the context stays unusable with that code while other contexts go on.
TEST_F(RuntimeDriverApi, EachKindOfKernelFaultHasItsCode) {
  const std::vector<uint8_t> image = gpuvm::runtime::testing::FaultModuleImage();
  for (const auto& k : gpuvm::runtime::testing::kFaultKernels) {
    SCOPED_TRACE(k.name);
    const CUresult code = CUresult(k.cuda_error);
    CUcontext ctx;
    ASSERT_CU(cuCtxCreate(&ctx, nullptr, 0, dev_));
    CUmodule m;
    ASSERT_CU(cuModuleLoadData(&m, image.data()));
    CUfunction f;
    ASSERT_CU(cuModuleGetFunction(&f, m, k.name));
    CUdeviceptr d;
    ASSERT_CU(cuMemAlloc(&d, 4096));
    void* params[] = {&d};
    ASSERT_CU(cuLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, nullptr, params, nullptr));
    EXPECT_EQ(cuCtxSynchronize(), code);
    const char* name = nullptr;
    ASSERT_CU(cuGetErrorName(code, &name));
    EXPECT_NE(name, nullptr);
    // Sticky: every later call on the context returns the code.
    CUdeviceptr p;
    EXPECT_EQ(cuMemAlloc(&p, 16), code);
    uint32_t v;
    EXPECT_EQ(cuMemcpyDtoH(&v, d, 4), code);
    EXPECT_EQ(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr), code);
    EXPECT_EQ(cuCtxSynchronize(), code);
    // The context in the fixture is unaffected.
    ASSERT_CU(cuCtxDestroy(ctx));
    ASSERT_CU(cuCtxSetCurrent(ctx_));
    ASSERT_CU(cuMemAlloc(&p, 16));
    ASSERT_CU(cuMemFree(p));
    ASSERT_CU(cuCtxSynchronize());
  }
}

TEST_F(RuntimeDriverApi, StreamsAndEvents) {
  CUstream s;
  EXPECT_EQ(cuStreamCreate(&s, 0x10), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuStreamCreate(nullptr, 0), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuStreamCreate(&s, 0));
  EXPECT_CU(cuStreamQuery(s));
  CUevent start, stop, untimed, never;
  ASSERT_CU(cuEventCreate(&start, 0));
  ASSERT_CU(cuEventCreate(&stop, CU_EVENT_BLOCKING_SYNC));
  ASSERT_CU(cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING));
  ASSERT_CU(cuEventCreate(&never, 0));
  EXPECT_EQ(cuEventCreate(&never, 0x40), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuEventCreate(&never, CU_EVENT_INTERPROCESS), CUDA_ERROR_INVALID_VALUE);
  EXPECT_CU(cuEventQuery(never));  // never recorded: complete

  CUdeviceptr d = LaunchDoublings(s, 1 << 16, 4, start);
  ASSERT_FALSE(HasFailure());
  ASSERT_CU(cuEventRecord(stop, s));
  ASSERT_CU(cuEventRecord(untimed, s));
  // The null stream waits for `stop` on the GPU before reading the result.
  ASSERT_CU(cuStreamWaitEvent(nullptr, stop, 0));
  EXPECT_EQ(cuStreamWaitEvent(nullptr, stop, 1), CUDA_ERROR_INVALID_VALUE);
  uint32_t first = 0;
  ASSERT_CU(cuMemcpyDtoH(&first, d, 4));
  EXPECT_EQ(first, 16u);  // 1 doubled four times
  ASSERT_CU(cuEventSynchronize(stop));
  EXPECT_CU(cuEventQuery(stop));
  float ms = -1;
  ASSERT_CU(cuEventElapsedTime(&ms, start, stop));
  EXPECT_GE(ms, 0.0f);
  EXPECT_EQ(cuEventElapsedTime(&ms, start, untimed), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuEventElapsedTime(&ms, start, never), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuEventElapsedTime(nullptr, start, stop), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuStreamSynchronize(s));
  EXPECT_CU(cuStreamQuery(s));
  ASSERT_CU(cuStreamSynchronize(nullptr));
  ASSERT_CU(cuStreamSynchronize(CU_STREAM_LEGACY));
  for (CUevent e : {start, stop, untimed, never}) ASSERT_CU(cuEventDestroy(e));
  EXPECT_EQ(cuEventDestroy(start), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuEventRecord(start, s), CUDA_ERROR_INVALID_HANDLE);
  ASSERT_CU(cuStreamDestroy(s));
  EXPECT_EQ(cuStreamDestroy(s), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
}

// A stream (and a context's null stream) nobody has given work is idle, as in CUDA: the driver's
// setup of the channel behind it is not the caller's work.
TEST_F(RuntimeDriverApi, NewStreamsAreIdle) {
  EXPECT_CU(cuStreamQuery(nullptr));
  std::vector<CUstream> streams(16);
  for (size_t i = 0; i < streams.size(); ++i) {
    ASSERT_CU(cuStreamCreate(&streams[i], i % 2 ? CU_STREAM_NON_BLOCKING : 0));
    EXPECT_CU(cuStreamQuery(streams[i])) << "stream " << i;
  }
  for (CUstream s : streams) ASSERT_CU(cuStreamDestroy(s));
  CUcontext other;
  ASSERT_CU(cuCtxCreate(&other, nullptr, 0, dev_));
  EXPECT_CU(cuStreamQuery(nullptr));
  ASSERT_CU(cuCtxDestroy(other));
  ASSERT_CU(cuCtxSetCurrent(ctx_));
}

TEST_F(RuntimeDriverApi, LegacyNullStreamOrdersBlockingStreams) {
  const uint32_t n = 1 << 18;
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_DEFAULT));
  CUdeviceptr d = LaunchDoublings(s, n, 3);
  ASSERT_FALSE(HasFailure());
  // A synchronous copy on the null stream must see the blocking stream's work.
  std::vector<uint32_t> out(n);
  ASSERT_CU(cuMemcpyDtoH(out.data(), d, n * 4));
  EXPECT_EQ(out[0], 8u);
  EXPECT_EQ(out[n - 1], 8u);
  ASSERT_CU(cuStreamDestroy(s));
}

TEST_F(RuntimeDriverApi, PointerAttributes) {
  CUdeviceptr d;
  ASSERT_CU(cuMemAlloc(&d, 4096));
  unsigned type = 0;
  ASSERT_CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d + 100));
  EXPECT_EQ(type, unsigned(CU_MEMORYTYPE_DEVICE));
  void* h;
  ASSERT_CU(cuMemAllocHost(&h, 4096));
  ASSERT_CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CUdeviceptr(h)));
  EXPECT_EQ(type, unsigned(CU_MEMORYTYPE_HOST));
  CUcontext c;
  ASSERT_CU(cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, d));
  EXPECT_EQ(c, ctx_);
  int stack_var;
  EXPECT_EQ(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CUdeviceptr(&stack_var)),
            CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuMemFreeHost(h));
  ASSERT_CU(cuMemFree(d));
}

// Managed memory: one pointer that the host and kernels both use, pointer attributes saying so,
// address ranges, cudaFree's driver twin, hints that only check their arguments.
TEST_F(RuntimeDriverApi, ManagedMemoryIsOnePointerForHostAndKernels) {
  int managed = 0, concurrent = 0;
  ASSERT_CU(cuDeviceGetAttribute(&managed, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, dev_));
  ASSERT_CU(cuDeviceGetAttribute(&concurrent, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, dev_));
  EXPECT_EQ(managed, 1);
  EXPECT_EQ(concurrent, 1);

  CUfunction vadd = TestFunction("vadd");
  uint32_t n = 4096;
  CUdeviceptr a, b, c;
  ASSERT_CU(cuMemAllocManaged(&a, n * 4, CU_MEM_ATTACH_GLOBAL));
  ASSERT_CU(cuMemAllocManaged(&b, n * 4, CU_MEM_ATTACH_HOST));
  ASSERT_CU(cuMemAllocManaged(&c, n * 4, CU_MEM_ATTACH_GLOBAL));
  auto* ha = reinterpret_cast<uint32_t*>(a);
  auto* hb = reinterpret_cast<uint32_t*>(b);
  auto* hc = reinterpret_cast<uint32_t*>(c);
  for (uint32_t i = 0; i < n; ++i) {
    ha[i] = i;
    hb[i] = 7 * i;
  }
  void* params[] = {&a, &b, &c, &n};
  ASSERT_CU(cuLaunchKernel(vadd, n / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
  ASSERT_CU(cuCtxSynchronize());
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(hc[i], 8 * i) << i;

  // Attributes: device memory as far as copies go, managed, the same pointer on both sides.
  unsigned type = 0, is_managed = 0, mapped = 0;
  CUdeviceptr device_pointer = 0, start = 0;
  void* host_pointer = nullptr;
  size_t range = 0;
  int ordinal = -1;
  ASSERT_CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, c + 40));
  EXPECT_EQ(type, unsigned(CU_MEMORYTYPE_DEVICE));
  ASSERT_CU(cuPointerGetAttribute(&is_managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, c + 40));
  EXPECT_EQ(is_managed, 1u);
  ASSERT_CU(cuPointerGetAttribute(&device_pointer, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, c + 40));
  ASSERT_CU(cuPointerGetAttribute(&host_pointer, CU_POINTER_ATTRIBUTE_HOST_POINTER, c + 40));
  EXPECT_EQ(device_pointer, c + 40);
  EXPECT_EQ(host_pointer, reinterpret_cast<void*>(c + 40));
  ASSERT_CU(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, c + 40));
  ASSERT_CU(cuPointerGetAttribute(&range, CU_POINTER_ATTRIBUTE_RANGE_SIZE, c + 40));
  EXPECT_EQ(start, c);
  EXPECT_EQ(range, n * 4);
  ASSERT_CU(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, c));
  EXPECT_EQ(ordinal, 0);
  ASSERT_CU(cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, c));
  EXPECT_EQ(mapped, 1u);
  CUdeviceptr base = 0;
  size_t size = 0;
  ASSERT_CU(cuMemGetAddressRange(&base, &size, c + n * 4 - 1));
  EXPECT_EQ(base, c);
  EXPECT_EQ(size, n * 4);
  ASSERT_CU(cuMemGetAddressRange(nullptr, &size, c));

  // Several at once; device memory is not managed, and memory nobody allocated has null attributes.
  CUdeviceptr d;
  ASSERT_CU(cuMemAlloc(&d, 4096));
  CUpointer_attribute which[] = {CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                 CU_POINTER_ATTRIBUTE_HOST_POINTER};
  void* data[] = {&is_managed, &type, &host_pointer};
  ASSERT_CU(cuPointerGetAttributes(3, which, data, d));
  EXPECT_EQ(is_managed, 0u);
  EXPECT_EQ(type, unsigned(CU_MEMORYTYPE_DEVICE));
  EXPECT_EQ(host_pointer, nullptr);
  int stack_var = 0;
  ASSERT_CU(cuPointerGetAttributes(3, which, data, CUdeviceptr(&stack_var)));
  EXPECT_EQ(type, 0u);
  EXPECT_EQ(cuMemGetAddressRange(&base, &size, CUdeviceptr(&stack_var)), CUDA_ERROR_NOT_FOUND);

  // Copies between managed, device and pageable memory, all ways.
  std::vector<uint32_t> back(n);
  ASSERT_CU(cuMemcpyDtoD(d, c, 4096));
  ASSERT_CU(cuMemcpyDtoH(back.data(), d, 4096));
  EXPECT_EQ(back[1023], 8u * 1023);
  ASSERT_CU(cuMemcpyHtoD(a, back.data(), 4096));
  EXPECT_EQ(ha[1023], 8u * 1023);
  ASSERT_CU(cuMemsetD32(b, 9, n));
  EXPECT_EQ(hb[n - 1], 9u);

  // Hints: valid ones succeed and change nothing.
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUmemLocation gpu{CU_MEM_LOCATION_TYPE_DEVICE, 0}, host{CU_MEM_LOCATION_TYPE_HOST, 0};
  ASSERT_CU(cuMemPrefetchAsync(a, n * 4, gpu, 0, s));
  ASSERT_CU(cuMemPrefetchAsync(a + 4, 8, host, 0, nullptr));
  ASSERT_CU(cuMemAdvise(a, n * 4, CU_MEM_ADVISE_SET_READ_MOSTLY, gpu));
  ASSERT_CU(cuMemAdvise(a, n * 4, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, host));
  ASSERT_CU(cuMemAdvise(a, 4, CU_MEM_ADVISE_SET_ACCESSED_BY, gpu));
  ASSERT_CU(cuStreamAttachMemAsync(s, a, 0, CU_MEM_ATTACH_SINGLE));
  ASSERT_CU(cuStreamAttachMemAsync(nullptr, a, n * 4, CU_MEM_ATTACH_HOST));
  ASSERT_CU(cuStreamSynchronize(s));
  EXPECT_EQ(ha[1023], 8u * 1023);

  ASSERT_CU(cuStreamDestroy(s));
  ASSERT_CU(cuMemFree(d));
  ASSERT_CU(cuMemFree(a));
  ASSERT_CU(cuMemFree(b));
  ASSERT_CU(cuMemFree(c));
  EXPECT_EQ(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, c),
            CUDA_ERROR_INVALID_VALUE);
}

// What cuMemAdvise and cuMemPrefetchAsync said, as cuMemRangeGetAttribute(s) report it: per page,
// a location only where every page of the range agrees, forgotten with the memory.
TEST_F(RuntimeDriverApi, ManagedRangeAttributesReportTheAdvice) {
  constexpr size_t kPage = 4096;
  CUdeviceptr m;
  ASSERT_CU(cuMemAllocManaged(&m, 8 * kPage, CU_MEM_ATTACH_GLOBAL));
  auto get = [&](CUmem_range_attribute attribute, CUdeviceptr at, size_t count) {
    int value = 12345;
    EXPECT_EQ(cuMemRangeGetAttribute(&value, 4, attribute, at, count), CUDA_SUCCESS) << attribute;
    return value;
  };
  // Nothing said yet.
  EXPECT_EQ(get(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, m, 8 * kPage), 0);
  EXPECT_EQ(get(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, m, 8 * kPage), CU_DEVICE_INVALID);
  EXPECT_EQ(get(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, m, 8 * kPage), CU_DEVICE_INVALID);
  EXPECT_EQ(get(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, m, 1),
            CU_MEM_LOCATION_TYPE_INVALID);

  const CUmemLocation gpu{CU_MEM_LOCATION_TYPE_DEVICE, 0}, host{CU_MEM_LOCATION_TYPE_HOST, 0};
  // Read-mostly on pages 0-3 (a range starting mid-page covers its page).
  ASSERT_CU(cuMemAdvise(m + 100, 4 * kPage - 100, CU_MEM_ADVISE_SET_READ_MOSTLY, gpu));
  EXPECT_EQ(get(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, m, 4 * kPage), 1);
  EXPECT_EQ(get(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, m + 3 * kPage + 5, 1), 1);
  EXPECT_EQ(get(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, m, 5 * kPage), 0) << "page 4 is not";
  // Preferred: the GPU for pages 0-5, the host for 6-7.
  ASSERT_CU(cuMemAdvise(m, 6 * kPage, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, gpu));
  ASSERT_CU(cuMemAdvise(m + 6 * kPage, 2 * kPage, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, host));
  EXPECT_EQ(get(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, m, 6 * kPage), 0);
  EXPECT_EQ(get(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, m + 6 * kPage, 2 * kPage),
            CU_DEVICE_CPU);
  EXPECT_EQ(get(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, m, 8 * kPage), CU_DEVICE_INVALID);
  EXPECT_EQ(get(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, m + 7 * kPage, 4),
            CU_MEM_LOCATION_TYPE_HOST);
  EXPECT_EQ(get(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, m, 4), CU_MEM_LOCATION_TYPE_DEVICE);
  EXPECT_EQ(get(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID, m, 4), 0);
  ASSERT_CU(cuMemAdvise(m, 8 * kPage, CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, gpu));
  EXPECT_EQ(get(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, m, 1), CU_DEVICE_INVALID);
  // Accessed-by: the GPU for the whole range, the host for part of it only.
  ASSERT_CU(cuMemAdvise(m, 8 * kPage, CU_MEM_ADVISE_SET_ACCESSED_BY, gpu));
  ASSERT_CU(cuMemAdvise(m, 2 * kPage, CU_MEM_ADVISE_SET_ACCESSED_BY, host));
  int devices[3] = {7, 7, 7};
  ASSERT_CU(cuMemRangeGetAttribute(devices, sizeof devices, CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, m,
                                   8 * kPage));
  EXPECT_EQ(devices[0], 0);
  EXPECT_EQ(devices[1], CU_DEVICE_INVALID);
  EXPECT_EQ(devices[2], CU_DEVICE_INVALID);
  ASSERT_CU(cuMemRangeGetAttribute(devices, sizeof devices, CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, m,
                                   2 * kPage));
  EXPECT_EQ(devices[0], 0);
  EXPECT_EQ(devices[1], CU_DEVICE_CPU);
  int one = 7;  // a smaller buffer gets as many as fit
  ASSERT_CU(cuMemRangeGetAttribute(&one, 4, CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, m, kPage));
  EXPECT_EQ(one, 0);
  // Prefetches: the last one asked, where every page agrees.
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, 0));
  ASSERT_CU(cuMemPrefetchAsync(m, 8 * kPage, gpu, 0, s));
  ASSERT_CU(cuMemPrefetchAsync(m + 4 * kPage, 4 * kPage, host, 0, s));
  EXPECT_EQ(get(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, m, 4 * kPage), 0);
  EXPECT_EQ(get(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, m + 4 * kPage, 4 * kPage),
            CU_DEVICE_CPU);
  EXPECT_EQ(get(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, m, 8 * kPage), CU_DEVICE_INVALID);
  EXPECT_EQ(get(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE, m + 5 * kPage, 1),
            CU_MEM_LOCATION_TYPE_HOST);
  // Several at once.
  int rm = -1, pref = -1, last = -1;
  void* data[] = {&rm, &pref, &last};
  size_t sizes[] = {4, 4, 4};
  CUmem_range_attribute which[] = {CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY,
                                   CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION,
                                   CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION};
  ASSERT_CU(cuMemRangeGetAttributes(data, sizes, which, 3, m, kPage));
  EXPECT_EQ(rm, 1);
  EXPECT_EQ(pref, CU_DEVICE_INVALID);
  EXPECT_EQ(last, 0);
  // Refusals change nothing: a bad size, an unknown attribute (after good ones), memory that is
  // not managed, a range past the allocation.
  rm = pref = last = -1;
  sizes[2] = 8;
  EXPECT_EQ(cuMemRangeGetAttributes(data, sizes, which, 3, m, kPage), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(rm, -1);
  EXPECT_EQ(pref, -1);
  sizes[2] = 4;
  int raw = 99;
  std::memcpy(&which[2], &raw, sizeof raw);
  EXPECT_EQ(cuMemRangeGetAttributes(data, sizes, which, 3, m, kPage), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(rm, -1);
  CUdeviceptr d;
  ASSERT_CU(cuMemAlloc(&d, kPage));
  int value = 5;
  EXPECT_EQ(cuMemRangeGetAttribute(&value, 4, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, d, kPage),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemRangeGetAttribute(&value, 4, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, m, 8 * kPage + 1),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemRangeGetAttribute(&value, 4, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, m, 0),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemRangeGetAttribute(&value, 0, CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, m, kPage),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(value, 5);
  // Freed memory's advice is gone: an allocation at the same address starts with none.
  ASSERT_CU(cuMemFree(m));
  CUdeviceptr again;
  ASSERT_CU(cuMemAllocManaged(&again, 8 * kPage, CU_MEM_ATTACH_GLOBAL));
  if (again == m) {
    EXPECT_EQ(get(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, again, kPage), 0);
    EXPECT_EQ(get(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, again, kPage), CU_DEVICE_INVALID);
  }
  ASSERT_CU(cuMemFree(again));
  ASSERT_CU(cuMemFree(d));
  ASSERT_CU(cuStreamDestroy(s));
}

// Bad arguments to managed memory's calls: CUDA's error, and nothing changed.
TEST_F(RuntimeDriverApi, ManagedMemoryArgumentErrors) {
  CUdeviceptr m = 0;
  EXPECT_EQ(cuMemAllocManaged(nullptr, 4096, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemAllocManaged(&m, 0, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemAllocManaged(&m, 4096, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_SINGLE), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL | CU_MEM_ATTACH_HOST),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(m, 0u);  // nothing written on failure
  EXPECT_EQ(cuMemAllocManaged(&m, size_t{1} << 50, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_OUT_OF_MEMORY);

  ASSERT_CU(cuMemAllocManaged(&m, 8192, CU_MEM_ATTACH_GLOBAL));
  auto* bytes = reinterpret_cast<uint8_t*>(m);
  bytes[100] = 0x3c;
  CUdeviceptr d;
  ASSERT_CU(cuMemAlloc(&d, 8192));
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, 0));
  const CUmemLocation gpu{CU_MEM_LOCATION_TYPE_DEVICE, 0};
  // Prefetches: past the end, not managed, zero bytes, flags, bad locations.
  EXPECT_EQ(cuMemPrefetchAsync(m, 8193, gpu, 0, s), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemPrefetchAsync(m + 4096, 4097, gpu, 0, s), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemPrefetchAsync(d, 4096, gpu, 0, s), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemPrefetchAsync(m, 0, gpu, 0, s), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemPrefetchAsync(m, 4096, gpu, 1, s), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemPrefetchAsync(m, 4096, CUmemLocation{CU_MEM_LOCATION_TYPE_DEVICE, 3}, 0, s),
            CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cuMemPrefetchAsync(m, 4096, CUmemLocation{CU_MEM_LOCATION_TYPE_INVALID, 0}, 0, s),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemPrefetchAsync(m, 4096, CUmemLocation{CUmemLocationType(9), 0}, 0, s),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemPrefetchAsync(m, 4096, gpu, 0, reinterpret_cast<CUstream>(&d)),
            CUDA_ERROR_INVALID_HANDLE);
  // Advice: unknown advice, not managed, ACCESSED_BY a NUMA node.
  EXPECT_EQ(cuMemAdvise(m, 4096, CUmem_advise(0), gpu), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemAdvise(m, 4096, CUmem_advise(7), gpu), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemAdvise(d, 4096, CU_MEM_ADVISE_SET_READ_MOSTLY, gpu), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemAdvise(m, 8193, CU_MEM_ADVISE_SET_READ_MOSTLY, gpu), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemAdvise(m, 4096, CU_MEM_ADVISE_SET_ACCESSED_BY,
                        CUmemLocation{CU_MEM_LOCATION_TYPE_HOST_NUMA, 0}),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemAdvise(m, 4096, CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
                        CUmemLocation{CU_MEM_LOCATION_TYPE_DEVICE, -5}),
            CUDA_ERROR_INVALID_DEVICE);
  // Attachment: a part of the allocation, not its start, SINGLE on the null stream, flags.
  EXPECT_EQ(cuStreamAttachMemAsync(s, m, 4096, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuStreamAttachMemAsync(s, m + 4096, 0, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuStreamAttachMemAsync(nullptr, m, 0, CU_MEM_ATTACH_SINGLE), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuStreamAttachMemAsync(s, m, 0, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuStreamAttachMemAsync(s, d, 0, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
  // Freeing: not the start, with the host call; then the memory is still there.
  EXPECT_EQ(cuMemFree(m + 16), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemFreeHost(bytes), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(bytes[100], 0x3c);
  unsigned is_managed = 0;
  ASSERT_CU(cuPointerGetAttribute(&is_managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m + 8191));
  EXPECT_EQ(is_managed, 1u);
  // Attribute queries with bad arguments.
  EXPECT_EQ(cuPointerGetAttributes(0, nullptr, nullptr, m), CUDA_ERROR_INVALID_VALUE);
  CUpointer_attribute bogus = CUpointer_attribute(99);
  void* out[] = {&is_managed};
  EXPECT_EQ(cuPointerGetAttributes(1, &bogus, out, m), CUDA_ERROR_INVALID_VALUE);

  ASSERT_CU(cuStreamDestroy(s));
  ASSERT_CU(cuMemFree(d));
  ASSERT_CU(cuMemFree(m));
  EXPECT_EQ(cuMemFree(m), CUDA_ERROR_INVALID_VALUE);  // twice
}

TEST_F(RuntimeDriverApi, ThreadsShareContexts) {
  CUfunction vadd = TestFunction("vadd");
  ASSERT_NE(vadd, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      ASSERT_CU(cuCtxSetCurrent(ctx_));
      CUstream s;
      ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
      const uint32_t n = 4096;
      CUdeviceptr d;
      ASSERT_CU(cuMemAlloc(&d, n * 4));
      std::vector<uint32_t> host(n, uint32_t(t + 1)), out(n);
      ASSERT_CU(cuMemcpyHtoD(d, host.data(), n * 4));
      uint32_t count = n;
      void* params[] = {&d, &d, &d, &count};
      ASSERT_CU(cuLaunchKernel(vadd, n / 128, 1, 1, 128, 1, 1, 0, s, params, nullptr));
      ASSERT_CU(cuStreamSynchronize(s));
      ASSERT_CU(cuMemcpyDtoH(out.data(), d, n * 4));
      for (uint32_t v : out) ASSERT_EQ(v, uint32_t(2 * (t + 1)));
      ASSERT_CU(cuStreamDestroy(s));
      ASSERT_CU(cuMemFree(d));
    });
  }
  for (auto& th : threads) th.join();
}

// Several threads share one context. Each has a blocking and a non-blocking stream of its own;
// all share one more stream, so that pageable (staged) copies run through one channel from several
// threads at once; every round creates and destroys a blocking stream (which null-stream work must
// order against) and frees memory (a context-wide wait) while other threads do the same. Every
// result is checked. Small enough for make test.
TEST_F(RuntimeDriverApi, StressThreadsStreamsKernelsAndCopies) {
  CUfunction vadd = TestFunction("vadd");
  ASSERT_NE(vadd, nullptr);
  CUstream shared;
  ASSERT_CU(cuStreamCreate(&shared, CU_STREAM_NON_BLOCKING));
  constexpr uint32_t kThreads = 4;
  constexpr uint32_t kRounds = 8;
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ASSERT_CU(cuCtxSetCurrent(ctx_));
      CUstream blocking, nonblocking;
      ASSERT_CU(cuStreamCreate(&blocking, 0));
      ASSERT_CU(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));
      const uint32_t max_n = 2048 + 512 * kThreads + 100 * kRounds;
      void* pinned_raw = nullptr;
      ASSERT_CU(cuMemAllocHost(&pinned_raw, max_n * 4));
      auto* pinned = static_cast<uint32_t*>(pinned_raw);
      for (uint32_t round = 0; round < kRounds; ++round) {
        // Not a multiple of the block size, and above the BAR1 threshold (staged copies).
        uint32_t n = 2048 + 512 * t + 100 * round + 3;
        std::vector<uint32_t> a(n), b(n), back(n);
        for (uint32_t i = 0; i < n; ++i) {
          a[i] = i * (t + 1) + round;
          b[i] = 7 * t + 3 * i;
        }
        CUdeviceptr da, db, dc;
        ASSERT_CU(cuMemAlloc(&da, n * 4));
        ASSERT_CU(cuMemAlloc(&db, n * 4));
        ASSERT_CU(cuMemAlloc(&dc, n * 4));
        // Pageable sources: staged through the shared stream's bounce buffers, done on return.
        ASSERT_CU(cuMemcpyHtoDAsync(da, a.data(), n * 4, shared));
        ASSERT_CU(cuMemcpyHtoDAsync(db, b.data(), n * 4, shared));
        // dc = a + b on one stream; da = 2 (a + b) on the other, after an event.
        void* first[] = {&da, &db, &dc, &n};
        ASSERT_CU(
            cuLaunchKernel(vadd, (n + 127) / 128, 1, 1, 128, 1, 1, 0, blocking, first, nullptr));
        CUevent e;
        ASSERT_CU(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
        ASSERT_CU(cuEventRecord(e, blocking));
        ASSERT_CU(cuStreamWaitEvent(nonblocking, e, 0));
        void* second[] = {&dc, &dc, &da, &n};
        ASSERT_CU(cuLaunchKernel(vadd, (n + 255) / 256, 1, 1, 256, 1, 1, 0, nonblocking, second,
                                 nullptr));
        ASSERT_CU(cuMemcpyDtoHAsync(pinned, da, n * 4, nonblocking));  // pinned: DMA, async
        ASSERT_CU(cuStreamSynchronize(nonblocking));
        for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(pinned[i], 2 * (a[i] + b[i])) << t << " " << i;
        // A short-lived blocking stream: the null-stream copy below is ordered after its memset
        // (legacy semantics) while other threads create and destroy theirs.
        CUstream temporary;
        ASSERT_CU(cuStreamCreate(&temporary, 0));
        ASSERT_CU(cuMemsetD32Async(db, 1000 * t + round, n, temporary));
        ASSERT_CU(cuMemcpyDtoH(back.data(), db, n * 4));  // null stream, pageable: staged
        for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(back[i], 1000 * t + round) << t << " " << i;
        ASSERT_CU(cuStreamDestroy(temporary));
        ASSERT_CU(cuEventDestroy(e));
        ASSERT_CU(cuMemcpyDtoHAsync(back.data(), dc, n * 4, shared));  // staged, shared stream
        for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(back[i], a[i] + b[i]) << t << " " << i;
        for (CUdeviceptr d : {da, db, dc}) ASSERT_CU(cuMemFree(d));
      }
      ASSERT_CU(cuMemFreeHost(pinned_raw));
      ASSERT_CU(cuStreamDestroy(blocking));
      ASSERT_CU(cuStreamDestroy(nonblocking));
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_CU(cuStreamDestroy(shared));
  ASSERT_CU(cuModuleUnload(module_));
}

}  // namespace
