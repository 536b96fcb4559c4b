// The runtime API and nvcc's host ABI as a program sees them: this test links libcudart.so.13 (our
// build) and plays the part of nvcc's generated code by hand: it registers a "fat binary" (a
// wrapper pointing at a GVISA module image, a gpuvm extension, so no translator is needed), its
// kernels and variables, then launches through the CUDA 13 path (__cudaPushCallConfiguration,
// __cudaGetKernel,
// __cudaPopCallConfiguration, __cudaLaunchKernel) and the legacy one (cudaLaunchKernel).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/include/cuda_runtime_api.h"
#include "runtime/tests/test_kernels.h"

extern "C" {
void** __cudaRegisterFatBinary(void* fat_cubin);
void __cudaRegisterFatBinaryEnd(void** handle);
void __cudaUnregisterFatBinary(void** handle);
void __cudaRegisterFunction(void** handle, const char* host_fun, char* device_fun,
                            const char* device_name, int thread_limit, uint3* tid, uint3* bid,
                            dim3* bdim, dim3* gdim, int* wsize);
void __cudaRegisterVar(void** handle, char* host_var, char* device_address, const char* device_name,
                       int ext, size_t size, int constant, int global);
char __cudaInitModule(void** handle);
unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared,
                                     struct CUstream_st* stream);
cudaError_t __cudaPopCallConfiguration(dim3* grid, dim3* block, size_t* shared, void* stream);
cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* host_fun);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void** args,
                               size_t shared, cudaStream_t stream);
}

namespace {

// Host-side stand-ins nvcc would generate: stubs whose addresses name the kernels, and shadow
// variables whose addresses name device variables.
void vadd_stub() {}
void poke_stub() {}
void unregistered_stub() {}
unsigned counter_shadow;

struct Wrapper {
  uint32_t magic, version;
  const void* data;
  const void* unused;
};

class RuntimeCudart : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    image_ = new std::vector<uint8_t>(gpuvm::runtime::testing::TestModuleImage());
    wrapper_ = new Wrapper{0x466243b1, 1, image_->data(), nullptr};
    handle_ = __cudaRegisterFatBinary(wrapper_);
    __cudaRegisterFunction(handle_, reinterpret_cast<const char*>(&vadd_stub), nullptr, "vadd", -1,
                           nullptr, nullptr, nullptr, nullptr, nullptr);
    __cudaRegisterFunction(handle_, reinterpret_cast<const char*>(&poke_stub), nullptr, "poke", -1,
                           nullptr, nullptr, nullptr, nullptr, nullptr);
    __cudaRegisterVar(handle_, reinterpret_cast<char*>(&counter_shadow), nullptr, "counter", 0, 4,
                      0, 0);
    __cudaRegisterFatBinaryEnd(handle_);
  }
  void SetUp() override { (void)cudaGetLastError(); }

  // What `vadd<<<grid, block, 0, stream>>>(a, b, c, n)` compiles to with nvcc 13.
  static cudaError_t LaunchVadd(dim3 grid, dim3 block, cudaStream_t stream, void* a, void* b,
                                void* c, unsigned n) {
    __cudaPushCallConfiguration(grid, block, 0, stream);
    static cudaKernel_t handle = nullptr;
    if (handle == nullptr &&
        __cudaGetKernel(&handle, reinterpret_cast<const void*>(&vadd_stub)) != cudaSuccess) {
      return cudaErrorInvalidDeviceFunction;
    }
    dim3 g, b2;
    size_t shared;
    cudaStream_t s;
    cudaError_t e = __cudaPopCallConfiguration(&g, &b2, &shared, &s);
    if (e != cudaSuccess) return e;
    void* args[] = {&a, &b, &c, &n};
    return __cudaLaunchKernel(handle, g, b2, args, shared, s);
  }

  static std::vector<uint8_t>* image_;
  static Wrapper* wrapper_;
  static void** handle_;
};

std::vector<uint8_t>* RuntimeCudart::image_;
Wrapper* RuntimeCudart::wrapper_;
void** RuntimeCudart::handle_;

TEST_F(RuntimeCudart, DevicesAndVersions) {
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_EQ(count, 1);
  cudaDeviceProp prop;
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  EXPECT_NE(std::string(prop.name).find("gpuvm"), std::string::npos);
  EXPECT_EQ(prop.warpSize, 32);
  EXPECT_EQ(prop.maxThreadsPerBlock, 1024);
  EXPECT_EQ(prop.major, 7);
  EXPECT_GT(prop.totalGlobalMem, 0u);
  EXPECT_EQ(cudaGetDeviceProperties(&prop, 1), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetDeviceProperties(nullptr, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaSetDevice(0), cudaSuccess);
  EXPECT_EQ(cudaSetDevice(2), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // reset by the previous call
  int device = -1;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(device, 0);
  int v = 0;
  ASSERT_EQ(cudaDriverGetVersion(&v), cudaSuccess);
  EXPECT_EQ(v, 13000);
  ASSERT_EQ(cudaRuntimeGetVersion(&v), cudaSuccess);
  EXPECT_EQ(v, 13000);
}

// What the usual helper headers call first (cudaDeviceGetAttribute, cudaSetDeviceFlags), and the
// calls programs make without caring about the answer (cache configuration, profiler, host
// registration) — each answers as CUDA does, bad arguments refused.
TEST_F(RuntimeCudart, AttributesFlagsCacheConfigAndHostRegistration) {
  cudaDeviceProp prop;
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  int v = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  EXPECT_EQ(v, prop.multiProcessorCount);
  ASSERT_EQ(cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  EXPECT_EQ(v, prop.major);
  ASSERT_EQ(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlock, 0), cudaSuccess);
  EXPECT_EQ(size_t(v), prop.sharedMemPerBlock);
  EXPECT_EQ(cudaDeviceGetAttribute(&v, cudaDevAttrWarpSize, 1), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceGetAttribute(nullptr, cudaDevAttrWarpSize, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceGetAttribute(&v, cudaDeviceAttr(100000), 0), cudaErrorInvalidValue);

  ASSERT_EQ(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync | cudaDeviceMapHost), cudaSuccess);
  unsigned flags = 0;
  ASSERT_EQ(cudaGetDeviceFlags(&flags), cudaSuccess);
  EXPECT_EQ(flags & cudaDeviceScheduleMask, unsigned(cudaDeviceScheduleBlockingSync));
  EXPECT_EQ(cudaSetDeviceFlags(cudaDeviceScheduleSpin | cudaDeviceScheduleYield),
            cudaErrorInvalidValue);  // two schedules
  EXPECT_EQ(cudaSetDeviceFlags(0x100), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetDeviceFlags(nullptr), cudaErrorInvalidValue);
  ASSERT_EQ(cudaSetDeviceFlags(cudaDeviceScheduleAuto), cudaSuccess);

  ASSERT_EQ(cudaDeviceSetCacheConfig(cudaFuncCachePreferShared), cudaSuccess);
  cudaFuncCache cache = cudaFuncCachePreferNone;
  ASSERT_EQ(cudaDeviceGetCacheConfig(&cache), cudaSuccess);
  EXPECT_EQ(cache, cudaFuncCachePreferShared);
  EXPECT_EQ(cudaDeviceSetCacheConfig(cudaFuncCache(9)), cudaErrorInvalidValue);
  EXPECT_EQ(
      cudaFuncSetCacheConfig(reinterpret_cast<const void*>(&vadd_stub), cudaFuncCachePreferL1),
      cudaSuccess);
  EXPECT_EQ(cudaFuncSetCacheConfig(reinterpret_cast<const void*>(&unregistered_stub),
                                   cudaFuncCachePreferL1),
            cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(cudaFuncSetCacheConfig(reinterpret_cast<const void*>(&vadd_stub), cudaFuncCache(-1)),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaProfilerStart(), cudaSuccess);
  EXPECT_EQ(cudaProfilerStop(), cudaSuccess);

  // Registered host memory is a copy source and destination like pinned memory (any range: see
  // RuntimeDriverApi.HostRegister for unaligned ones).
  const size_t bytes = 4096;
  struct PageFree {
    void operator()(uint32_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint32_t, PageFree> page(static_cast<uint32_t*>(std::aligned_alloc(4096, bytes)));
  ASSERT_NE(page, nullptr);
  std::span<uint32_t> host(page.get(), bytes / 4);
  for (uint32_t i = 0; i < host.size(); ++i) host[i] = i * 3;
  ASSERT_EQ(cudaHostRegister(host.data(), bytes, cudaHostRegisterDefault), cudaSuccess);
  EXPECT_EQ(cudaHostRegister(host.data(), bytes, 0), cudaErrorHostMemoryAlreadyRegistered);
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, bytes), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d, host.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  std::vector<uint32_t> back(host.size(), 0);
  ASSERT_EQ(cudaMemcpy(back.data(), d, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_TRUE(std::equal(back.begin(), back.end(), host.begin()));
  ASSERT_EQ(cudaHostUnregister(host.data()), cudaSuccess);
  EXPECT_EQ(cudaHostUnregister(host.data()), cudaErrorHostMemoryNotRegistered);
  EXPECT_EQ(cudaHostRegister(nullptr, bytes, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaHostRegister(host.data(), bytes, 0x40), cudaErrorInvalidValue);
  ASSERT_EQ(cudaFree(d), cudaSuccess);
  (void)cudaGetLastError();
}

// The runtime's pitched memory and 2D/3D copies (each kind, cudaMemcpyDefault too), 2D memsets,
// occupancy of a registered kernel, and host functions / callbacks on streams, over the driver's.
TEST_F(RuntimeCudart, PitchedCopiesOccupancyAndHostFunctions) {
  const size_t width = 50, height = 6;
  void* d = nullptr;
  size_t pitch = 0;
  ASSERT_EQ(cudaMallocPitch(&d, &pitch, width, height), cudaSuccess);
  EXPECT_EQ(pitch, 256u);
  std::vector<uint8_t> src(64 * height);
  for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 3 + 1);
  ASSERT_EQ(cudaMemset2D(d, pitch, 0x11, pitch, height), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2D(d, pitch, src.data(), 64, width, height, cudaMemcpyHostToDevice),
            cudaSuccess);
  void* d2 = nullptr;
  size_t pitch2 = 0;
  ASSERT_EQ(cudaMallocPitch(&d2, &pitch2, width, height), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2D(d2, pitch2, d, pitch, width, height, cudaMemcpyDefault), cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  std::vector<uint8_t> back(width * height, 0);
  ASSERT_EQ(
      cudaMemcpy2DAsync(back.data(), width, d2, pitch2, width, height, cudaMemcpyDeviceToHost, s),
      cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  for (size_t y = 0; y < height; ++y) {
    ASSERT_EQ(std::memcmp(&back[y * width], &src[y * 64], width), 0) << y;
  }
  std::vector<uint8_t> row(pitch, 0);
  ASSERT_EQ(cudaMemcpy(row.data(), d, pitch, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(row[width], 0x11);  // beyond the window: the memset's
  EXPECT_EQ(cudaMemcpy2D(d, width - 1, src.data(), 64, width, height, cudaMemcpyHostToDevice),
            cudaErrorInvalidPitchValue);
  EXPECT_EQ(cudaMemcpy2D(d, pitch, src.data(), 64, width, height, cudaMemcpyKind(9)),
            cudaErrorInvalidMemcpyDirection);
  // 3D: two slices of 3 rows from the host into d (slices `height / 2` rows apart) and back.
  cudaMemcpy3DParms p{};
  p.srcPtr = {src.data(), 64, 64, 3};
  p.dstPtr = {d, pitch, width, 3};
  p.extent = {width, 3, 2};
  p.kind = cudaMemcpyHostToDevice;
  ASSERT_EQ(cudaMemcpy3D(&p), cudaSuccess);
  std::vector<uint8_t> box(width * 3 * 2, 0);
  cudaMemcpy3DParms q{};
  q.srcPtr = {d, pitch, width, 3};
  q.dstPtr = {box.data(), width, width, 3};
  q.extent = {width, 3, 2};
  q.kind = cudaMemcpyDeviceToHost;
  ASSERT_EQ(cudaMemcpy3DAsync(&q, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  for (size_t y = 0; y < 6; ++y) {
    ASSERT_EQ(std::memcmp(&box[y * width], &src[y * 64], width), 0) << y;
  }
  q.srcArray = reinterpret_cast<cudaArray_t>(&q);  // no array
  EXPECT_EQ(cudaMemcpy3D(&q), cudaErrorInvalidResourceHandle);

  int blocks = -1;
  ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                &blocks, reinterpret_cast<const void*>(&vadd_stub), 256, 0),
            cudaSuccess);
  EXPECT_EQ(blocks, 6);
  EXPECT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                &blocks, reinterpret_cast<const void*>(&unregistered_stub), 256, 0),
            cudaErrorInvalidDeviceFunction);

  struct Calls {
    std::vector<int> order;
    cudaError_t status = cudaErrorUnknown;
    cudaStream_t stream = nullptr;
  } calls;
  ASSERT_EQ(cudaLaunchHostFunc(
                s, [](void* c) { static_cast<Calls*>(c)->order.push_back(1); }, &calls),
            cudaSuccess);
  ASSERT_EQ(cudaStreamAddCallback(
                s,
                [](cudaStream_t stream, cudaError_t status, void* c) {
                  auto* calls = static_cast<Calls*>(c);
                  calls->order.push_back(2);
                  calls->status = status;
                  calls->stream = stream;
                },
                &calls, 0),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(calls.order, (std::vector<int>{1, 2}));
  EXPECT_EQ(calls.status, cudaSuccess);
  EXPECT_EQ(calls.stream, s);
  EXPECT_EQ(cudaStreamAddCallback(s, nullptr, &calls, 0), cudaErrorInvalidValue);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  ASSERT_EQ(cudaFree(d), cudaSuccess);
  ASSERT_EQ(cudaFree(d2), cudaSuccess);
  (void)cudaGetLastError();
}

TEST_F(RuntimeCudart, ErrorStrings) {
  EXPECT_STREQ(cudaGetErrorName(cudaErrorIllegalAddress), "cudaErrorIllegalAddress");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorIllegalAddress),
               "an illegal memory access was encountered");
  EXPECT_STREQ(cudaGetErrorName(cudaSuccess), "cudaSuccess");
  EXPECT_STREQ(cudaGetErrorString(cudaSuccess), "no error");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorInvalidConfiguration), "invalid configuration argument");
  EXPECT_STREQ(cudaGetErrorName(cudaErrorMissingConfiguration), "cudaErrorMissingConfiguration");
  EXPECT_STREQ(cudaGetErrorString(cudaError_t(4242)), "unrecognized error code");
}

TEST_F(RuntimeCudart, VectorAddThroughTheNvcc13LaunchPath) {
  const unsigned n = 5000;
  std::vector<unsigned> a(n), b(n), c(n, 0);
  for (unsigned i = 0; i < n; ++i) {
    a[i] = i;
    b[i] = 7 * i;
  }
  void *da, *db, *dc;
  ASSERT_EQ(cudaMalloc(&da, n * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&db, n * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dc, n * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(da, a.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(db, b.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(LaunchVadd(dim3((n + 255) / 256), dim3(256), nullptr, da, db, dc, n), cudaSuccess);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(c.data(), dc, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  for (unsigned i = 0; i < n; ++i) ASSERT_EQ(c[i], 8 * i) << i;
  // The legacy path: cudaLaunchKernel with the host stub, on a stream, with cudaMemcpyDefault.
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  unsigned count = n;
  void* args[] = {&dc, &dc, &dc, &count};
  ASSERT_EQ(cudaLaunchKernel(reinterpret_cast<const void*>(&vadd_stub), dim3(n / 100 + 1),
                             dim3(100), args, 0, s),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(c.data(), dc, n * 4, cudaMemcpyDefault), cudaSuccess);
  for (unsigned i = 0; i < n; ++i) ASSERT_EQ(c[i], 16 * i) << i;
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  for (void* p : {da, db, dc}) ASSERT_EQ(cudaFree(p), cudaSuccess);
}

// The most common beginner program: cudaMallocManaged, fill on the host, launch, synchronize,
// read on the host. Plus what the runtime says of such pointers, hints, and cudaFree.
TEST_F(RuntimeCudart, ManagedMemoryFilledOnTheHostAndReadBack) {
  int value = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&value, cudaDevAttrManagedMemory, 0), cudaSuccess);
  EXPECT_EQ(value, 1);
  ASSERT_EQ(cudaDeviceGetAttribute(&value, cudaDevAttrConcurrentManagedAccess, 0), cudaSuccess);
  EXPECT_EQ(value, 1);
  ASSERT_EQ(cudaDeviceGetAttribute(&value, cudaDevAttrUnifiedAddressing, 0), cudaSuccess);
  EXPECT_EQ(value, 0);
  cudaDeviceProp prop;
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  EXPECT_EQ(prop.managedMemory, 1);
  EXPECT_EQ(prop.concurrentManagedAccess, 1);

  const unsigned n = 3000;
  unsigned *a = nullptr, *b = nullptr, *c = nullptr;
  ASSERT_EQ(cudaMallocManaged(reinterpret_cast<void**>(&a), n * 4, cudaMemAttachGlobal),
            cudaSuccess);
  ASSERT_EQ(cudaMallocManaged(reinterpret_cast<void**>(&b), n * 4, cudaMemAttachHost), cudaSuccess);
  ASSERT_EQ(cudaMallocManaged(reinterpret_cast<void**>(&c), n * 4, cudaMemAttachGlobal),
            cudaSuccess);
  for (unsigned i = 0; i < n; ++i) {
    a[i] = i;
    b[i] = 100 * i;
  }
  const cudaMemLocation gpu{cudaMemLocationTypeDevice, 0};
  const cudaMemLocation cpu{cudaMemLocationTypeHost, 0};
  ASSERT_EQ(cudaMemAdvise(a, n * 4, cudaMemAdviseSetReadMostly, gpu), cudaSuccess);
  ASSERT_EQ(cudaMemPrefetchAsync(a, n * 4, gpu, 0, nullptr), cudaSuccess);
  ASSERT_EQ(cudaStreamAttachMemAsync(nullptr, c, 0, cudaMemAttachGlobal), cudaSuccess);
  ASSERT_EQ(LaunchVadd(dim3((n + 255) / 256), dim3(256), nullptr, a, b, c, n), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaMemPrefetchAsync(c, n * 4, cpu, 0, nullptr), cudaSuccess);
  for (unsigned i = 0; i < n; ++i) ASSERT_EQ(c[i], 101 * i) << i;

  cudaPointerAttributes attr;
  ASSERT_EQ(cudaPointerGetAttributes(&attr, c + 5), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeManaged);
  EXPECT_EQ(attr.device, 0);
  EXPECT_EQ(attr.devicePointer, c + 5);
  EXPECT_EQ(attr.hostPointer, c + 5);
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 256), cudaSuccess);
  ASSERT_EQ(cudaPointerGetAttributes(&attr, d), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeDevice);
  EXPECT_EQ(attr.hostPointer, nullptr);
  int local = 0;
  ASSERT_EQ(cudaPointerGetAttributes(&attr, &local), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeUnregistered);

  // cudaMemcpyDefault knows managed memory is the GPU's to copy.
  std::vector<unsigned> back(n);
  ASSERT_EQ(cudaMemcpy(back.data(), c, n * 4, cudaMemcpyDefault), cudaSuccess);
  EXPECT_EQ(back[n - 1], 101 * (n - 1));
  ASSERT_EQ(cudaMemcpy(a, c, n * 4, cudaMemcpyDefault), cudaSuccess);
  EXPECT_EQ(a[n - 1], 101 * (n - 1));
  ASSERT_EQ(cudaMemset(b, 0, n * 4), cudaSuccess);
  EXPECT_EQ(b[17], 0u);

  // Bad arguments: the runtime's error codes, and the memory untouched.
  void* m = nullptr;
  EXPECT_EQ(cudaMallocManaged(&m, 0, cudaMemAttachGlobal), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMallocManaged(&m, 64, cudaMemAttachSingle), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMallocManaged(nullptr, 64, cudaMemAttachGlobal), cudaErrorInvalidValue);
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(cudaMemAdvise(a, n * 4, cudaMemoryAdvise(42), gpu), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPrefetchAsync(a, n * 4 + 1, gpu, 0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPrefetchAsync(d, 256, gpu, 0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamAttachMemAsync(nullptr, c, 0, cudaMemAttachSingle), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(c + 1), cudaErrorInvalidDevicePointer);
  EXPECT_EQ(c[1], 101u);

  ASSERT_EQ(cudaFree(d), cudaSuccess);
  ASSERT_EQ(cudaFree(a), cudaSuccess);
  ASSERT_EQ(cudaFree(b), cudaSuccess);
  ASSERT_EQ(cudaFree(c), cudaSuccess);
  ASSERT_EQ(cudaPointerGetAttributes(&attr, c), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeUnregistered);
  (void)cudaGetLastError();
}

TEST_F(RuntimeCudart, LaunchErrors) {
  void* d;
  ASSERT_EQ(cudaMalloc(&d, 4096), cudaSuccess);
  EXPECT_EQ(LaunchVadd(dim3(1), dim3(1025), nullptr, d, d, d, 0), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(LaunchVadd(dim3(0), dim3(32), nullptr, d, d, d, 0), cudaErrorInvalidConfiguration);
  EXPECT_EQ(LaunchVadd(dim3(1), dim3(32, 32, 2), nullptr, d, d, d, 0),
            cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidConfiguration);  // peek does not reset
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  void* args[] = {&d, &d, &d, &d};
  EXPECT_EQ(cudaLaunchKernel(reinterpret_cast<const void*>(&unregistered_stub), dim3(1), dim3(1),
                             args, 0, nullptr),
            cudaErrorInvalidDeviceFunction);
  cudaKernel_t k;
  EXPECT_EQ(__cudaGetKernel(&k, reinterpret_cast<const void*>(&unregistered_stub)),
            cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(
      __cudaLaunchKernel(reinterpret_cast<cudaKernel_t>(&k), dim3(1), dim3(1), args, 0, nullptr),
      cudaErrorInvalidDeviceFunction);
  dim3 g, b;
  size_t shared;
  cudaStream_t s;
  EXPECT_EQ(__cudaPopCallConfiguration(&g, &b, &shared, &s), cudaErrorMissingConfiguration);
  cudaFuncAttributes attr;
  ASSERT_EQ(cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(&vadd_stub)), cudaSuccess);
  EXPECT_EQ(attr.maxThreadsPerBlock, 1024);
  EXPECT_GT(attr.numRegs, 0);
  EXPECT_EQ(cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(&unregistered_stub)),
            cudaErrorInvalidDeviceFunction);
  // The settable attributes: what the device allows is kept and read back, more is refused and
  // changes nothing.
  const void* vadd = reinterpret_cast<const void*>(&vadd_stub);
  EXPECT_EQ(attr.maxDynamicSharedSizeBytes, 48 * 1024);
  EXPECT_EQ(attr.preferredShmemCarveout, -1);
  EXPECT_EQ(cudaFuncSetAttribute(vadd, cudaFuncAttributeMaxDynamicSharedMemorySize, 16384),
            cudaSuccess);
  EXPECT_EQ(cudaFuncSetAttribute(vadd, cudaFuncAttributePreferredSharedMemoryCarveout, 50),
            cudaSuccess);
  EXPECT_EQ(cudaFuncSetAttribute(vadd, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaFuncSetAttribute(vadd, cudaFuncAttributePreferredSharedMemoryCarveout, 101),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaFuncSetAttribute(vadd, cudaFuncAttribute(0), 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFuncSetAttribute(reinterpret_cast<const void*>(&unregistered_stub),
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, 0),
            cudaErrorInvalidDeviceFunction);
  ASSERT_EQ(cudaFuncGetAttributes(&attr, vadd), cudaSuccess);
  EXPECT_EQ(attr.maxDynamicSharedSizeBytes, 16384);
  EXPECT_EQ(attr.preferredShmemCarveout, 50);
  EXPECT_EQ(cudaFuncSetSharedMemConfig(vadd, cudaSharedMemBankSizeEightByte), cudaSuccess);
  EXPECT_EQ(cudaFuncSetSharedMemConfig(vadd, cudaSharedMemConfig(3)), cudaErrorInvalidValue);
  ASSERT_EQ(cudaFree(d), cudaSuccess);
  (void)cudaGetLastError();
}

// Peer access with one device's answers, peer copies within it, stream priorities and queries,
// kernel names and the dynamic shared memory that keeps a number of blocks resident.
TEST_F(RuntimeCudart, PeerAccessStreamQueriesAndKernelNames) {
  int can = -1;
  ASSERT_EQ(cudaDeviceCanAccessPeer(&can, 0, 0), cudaSuccess);
  EXPECT_EQ(can, 0);
  EXPECT_EQ(cudaDeviceCanAccessPeer(&can, 0, 1), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceEnablePeerAccess(0, 0), cudaErrorInvalidDevice);  // not its own peer
  EXPECT_EQ(cudaDeviceEnablePeerAccess(0, 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceEnablePeerAccess(3, 0), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceDisablePeerAccess(0), cudaErrorPeerAccessNotEnabled);
  EXPECT_EQ(cudaGetLastError(), cudaErrorPeerAccessNotEnabled);
  int value = -1;
  EXPECT_EQ(cudaDeviceGetP2PAttribute(&value, cudaDevP2PAttrAccessSupported, 0, 0),
            cudaErrorInvalidDevice);

  constexpr size_t kN = 3000;
  std::vector<uint8_t> src(kN), back(kN, 0);
  for (size_t i = 0; i < kN; ++i) src[i] = uint8_t(i * 13 + 1);
  void *a, *b;
  ASSERT_EQ(cudaMalloc(&a, kN), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, kN), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(a, src.data(), kN, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpyPeer(b, 0, a, 0, kN), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(back.data(), b, kN, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, src);
  EXPECT_EQ(cudaMemcpyPeer(b, 1, a, 0, kN), cudaErrorInvalidDevice);
  // A 3D peer copy: a 100 x 3 x 2 box of `a` (as rows of 500 bytes) into `b`.
  ASSERT_EQ(cudaMemset(b, 0, kN), cudaSuccess);
  cudaMemcpy3DPeerParms box{};
  box.srcPtr = make_cudaPitchedPtr(a, 500, 500, 3);
  box.dstPtr = make_cudaPitchedPtr(b, 500, 500, 3);
  box.extent = make_cudaExtent(100, 3, 2);
  ASSERT_EQ(cudaMemcpy3DPeer(&box), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(back.data(), b, kN, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(std::memcmp(back.data() + 500 * 5, src.data() + 500 * 5, 100), 0);  // the last row
  EXPECT_EQ(back[500 * 5 + 100], 0);
  box.dstDevice = 1;
  EXPECT_EQ(cudaMemcpy3DPeer(&box), cudaErrorInvalidDevice);

  int least = -1, greatest = -1;
  ASSERT_EQ(cudaDeviceGetStreamPriorityRange(&least, &greatest), cudaSuccess);
  EXPECT_EQ(least, 0);
  EXPECT_EQ(greatest, 0);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest - 1), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(b, 0, kN, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyPeerAsync(b, 0, a, 0, 10, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(back.data(), b, 11, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(std::memcmp(back.data(), src.data(), 10), 0);
  EXPECT_EQ(back[10], 0);
  int priority = -1;
  unsigned flags = 0;
  unsigned long long id = 0, null_id = 0;
  int device = -1;
  ASSERT_EQ(cudaStreamGetPriority(s, &priority), cudaSuccess);
  EXPECT_EQ(priority, 0);
  ASSERT_EQ(cudaStreamGetFlags(s, &flags), cudaSuccess);
  EXPECT_EQ(flags, unsigned(cudaStreamNonBlocking));
  ASSERT_EQ(cudaStreamGetId(s, &id), cudaSuccess);
  ASSERT_EQ(cudaStreamGetId(nullptr, &null_id), cudaSuccess);
  EXPECT_NE(id, null_id);
  ASSERT_EQ(cudaStreamGetDevice(s, &device), cudaSuccess);
  EXPECT_EQ(device, 0);
  EXPECT_EQ(cudaStreamGetFlags(s, nullptr), cudaErrorInvalidValue);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaStreamGetId(s, &id), cudaErrorInvalidResourceHandle);

  // Pinned allocations' flags.
  void* pinned = nullptr;
  ASSERT_EQ(cudaHostAlloc(&pinned, 4096, cudaHostAllocMapped), cudaSuccess);
  unsigned host_flags = 0;
  ASSERT_EQ(cudaHostGetFlags(&host_flags, pinned), cudaSuccess);
  EXPECT_EQ(host_flags, unsigned(cudaHostAllocMapped));
  EXPECT_EQ(cudaHostGetFlags(&host_flags, &host_flags), cudaErrorInvalidValue);
  ASSERT_EQ(cudaFreeHost(pinned), cudaSuccess);

  // Device choice and addresses.
  cudaDeviceProp want{};
  want.major = 2;
  int chosen = -1;
  ASSERT_EQ(cudaChooseDevice(&chosen, &want), cudaSuccess);
  EXPECT_EQ(chosen, 0);
  int valid[] = {0};
  EXPECT_EQ(cudaSetValidDevices(valid, 1), cudaSuccess);
  int invalid[] = {0, 5};
  EXPECT_EQ(cudaSetValidDevices(invalid, 2), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaInitDevice(0, 0, 0), cudaSuccess);
  EXPECT_EQ(cudaInitDevice(0, 0, 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaInitDevice(2, 0, 0), cudaErrorInvalidDevice);
  char bus_id[16];
  ASSERT_EQ(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, 0), cudaSuccess);
  int by_bus = -1;
  ASSERT_EQ(cudaDeviceGetByPCIBusId(&by_bus, bus_id), cudaSuccess);
  EXPECT_EQ(by_bus, 0);
  EXPECT_EQ(cudaDeviceGetByPCIBusId(&by_bus, "zz"), cudaErrorInvalidValue);
  cudaSharedMemConfig config = cudaSharedMemBankSizeDefault;
  ASSERT_EQ(cudaDeviceGetSharedMemConfig(&config), cudaSuccess);
  EXPECT_EQ(config, cudaSharedMemBankSizeFourByte);
  EXPECT_EQ(cudaDeviceSetSharedMemConfig(cudaSharedMemBankSizeEightByte), cudaSuccess);
  EXPECT_EQ(cudaDeviceSetSharedMemConfig(cudaSharedMemConfig(7)), cudaErrorInvalidValue);

  const char* name = nullptr;
  ASSERT_EQ(cudaFuncGetName(&name, reinterpret_cast<const void*>(&vadd_stub)), cudaSuccess);
  EXPECT_STREQ(name, "vadd");
  EXPECT_EQ(cudaFuncGetName(&name, reinterpret_cast<const void*>(&unregistered_stub)),
            cudaErrorInvalidDeviceFunction);
  size_t dynamic = 0;
  ASSERT_EQ(cudaOccupancyAvailableDynamicSMemPerBlock(
                &dynamic, reinterpret_cast<const void*>(&vadd_stub), 2, 128),
            cudaSuccess);
  int blocks = 0;
  ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                &blocks, reinterpret_cast<const void*>(&vadd_stub), 128, dynamic),
            cudaSuccess);
  EXPECT_GE(blocks, 2);
  EXPECT_GT(dynamic, 0u);
  ASSERT_EQ(cudaFree(a), cudaSuccess);
  ASSERT_EQ(cudaFree(b), cudaSuccess);
  (void)cudaGetLastError();
}

// cudaMalloc3D's pitched layout and cudaMemset3D over a sub-extent: exactly the extent's bytes of
// each slice change; an extent past the allocation is refused whole.
TEST_F(RuntimeCudart, ThreeDimensionalAllocationsAndMemsets) {
  const cudaExtent extent{100, 7, 5};
  cudaPitchedPtr p{};
  ASSERT_EQ(cudaMalloc3D(&p, extent), cudaSuccess);
  ASSERT_NE(p.ptr, nullptr);
  EXPECT_GE(p.pitch, extent.width);
  EXPECT_EQ(p.pitch % 256, 0u);
  EXPECT_EQ(p.xsize, extent.width);
  EXPECT_EQ(p.ysize, extent.height);
  const size_t bytes = p.pitch * extent.height * extent.depth;
  ASSERT_EQ(cudaMemset(p.ptr, 0x11, bytes), cudaSuccess);
  ASSERT_EQ(cudaMemset3D(p, 0x22, cudaExtent{60, 4, 3}), cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaPitchedPtr last = p;
  last.ptr = static_cast<char*>(p.ptr) + 4 * p.pitch * p.ysize;  // the fifth slice
  ASSERT_EQ(cudaMemset3DAsync(last, 0x33, cudaExtent{10, 7, 1}, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  std::vector<uint8_t> host(bytes);
  ASSERT_EQ(cudaMemcpy(host.data(), p.ptr, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  size_t wrong = 0;
  for (size_t z = 0; z < extent.depth; ++z) {
    for (size_t y = 0; y < extent.height; ++y) {
      for (size_t x = 0; x < p.pitch; ++x) {
        uint8_t want = 0x11;
        if (z < 3 && y < 4 && x < 60) want = 0x22;
        if (z == 4 && x < 10) want = 0x33;
        wrong += host[(z * extent.height + y) * p.pitch + x] != want;
      }
    }
  }
  EXPECT_EQ(wrong, 0u);
  // One slice too many, or rows wider than the pitch: refused, nothing set.
  EXPECT_EQ(cudaMemset3D(p, 0x44, cudaExtent{10, 7, 6}), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset3D(p, 0x44, cudaExtent{p.pitch + 1, 1, 1}), cudaErrorInvalidValue);
  ASSERT_EQ(cudaMemcpy(host.data(), p.ptr, 16, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(host[0], 0x22);
  cudaPitchedPtr empty{};
  ASSERT_EQ(cudaMalloc3D(&empty, cudaExtent{0, 4, 4}), cudaSuccess);
  EXPECT_EQ(empty.ptr, nullptr);
  EXPECT_EQ(cudaMalloc3D(nullptr, extent), cudaErrorInvalidValue);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  ASSERT_EQ(cudaFree(p.ptr), cudaSuccess);
  (void)cudaGetLastError();
}

// CUDA arrays through the runtime: 2D copies in and out at byte offsets, a 3D array filled by
// cudaMemcpy3D with element positions, array to array, and what an array says of itself.
TEST_F(RuntimeCudart, ArraysTakeAndGiveBackTheirElements) {
  const cudaChannelFormatDesc f1 = {32, 0, 0, 0, cudaChannelFormatKindFloat};
  cudaArray_t a = nullptr, b = nullptr;
  ASSERT_EQ(cudaMallocArray(&a, &f1, 64, 16, cudaArrayDefault), cudaSuccess);
  ASSERT_EQ(cudaMallocArray(&b, &f1, 64, 16, cudaArrayDefault), cudaSuccess);
  std::vector<float> image(64 * 16);
  for (size_t i = 0; i < image.size(); ++i) image[i] = float(i) + 0.25f;
  ASSERT_EQ(cudaMemcpy2DToArray(a, 0, 0, image.data(), 64 * 4, 64 * 4, 16, cudaMemcpyHostToDevice),
            cudaSuccess);
  // Array to array: a 10 x 4 window from (5, 3) to (0, 0); b was zeroed first.
  std::vector<float> zeros(64 * 16, 0.0f);
  ASSERT_EQ(cudaMemcpy2DToArray(b, 0, 0, zeros.data(), 256, 256, 16, cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DArrayToArray(b, 0, 0, a, 5 * 4, 3, 10 * 4, 4, cudaMemcpyDeviceToDevice),
            cudaSuccess);
  std::vector<float> back(64 * 16, -1.0f);
  ASSERT_EQ(cudaMemcpy2DFromArray(back.data(), 256, b, 0, 0, 256, 16, cudaMemcpyDeviceToHost),
            cudaSuccess);
  size_t wrong = 0;
  for (size_t y = 0; y < 16; ++y) {
    for (size_t x = 0; x < 64; ++x) {
      const float want = (y < 4 && x < 10) ? image[(y + 3) * 64 + x + 5] : 0.0f;
      wrong += back[y * 64 + x] != want;
    }
  }
  EXPECT_EQ(wrong, 0u);
  cudaChannelFormatDesc got{};
  cudaExtent extent{};
  unsigned flags = 99;
  ASSERT_EQ(cudaArrayGetInfo(&got, &extent, &flags, a), cudaSuccess);
  EXPECT_EQ(got.x, 32);
  EXPECT_EQ(got.y, 0);
  EXPECT_EQ(got.f, cudaChannelFormatKindFloat);
  EXPECT_EQ(extent.width, 64u);
  EXPECT_EQ(extent.height, 16u);
  EXPECT_EQ(extent.depth, 0u);
  EXPECT_EQ(flags, 0u);

  // A 3D array of short2: positions and the extent's width in elements.
  const cudaChannelFormatDesc f2 = {16, 16, 0, 0, cudaChannelFormatKindSigned};
  cudaArray_t c = nullptr;
  ASSERT_EQ(cudaMalloc3DArray(&c, &f2, make_cudaExtent(8, 4, 2), cudaArraySurfaceLoadStore),
            cudaSuccess);
  std::vector<int16_t> box(8 * 2 * 4 * 2);
  for (size_t i = 0; i < box.size(); ++i) box[i] = int16_t(i * 3 - 50);
  cudaMemcpy3DParms in{};
  in.srcPtr = make_cudaPitchedPtr(box.data(), 8 * 4, 8, 4);
  in.dstArray = c;
  in.extent = make_cudaExtent(8, 4, 2);
  in.kind = cudaMemcpyHostToDevice;
  ASSERT_EQ(cudaMemcpy3D(&in), cudaSuccess);
  std::vector<int16_t> out(box.size(), 0);
  cudaMemcpy3DParms o{};
  o.srcArray = c;
  o.srcPos = make_cudaPos(2, 1, 1);  // elements, rows, slices
  o.dstPtr = make_cudaPitchedPtr(out.data(), 8 * 4, 8, 4);
  o.extent = make_cudaExtent(3, 2, 1);
  o.kind = cudaMemcpyDeviceToHost;
  ASSERT_EQ(cudaMemcpy3D(&o), cudaSuccess);
  for (size_t y = 0; y < 2; ++y) {
    for (size_t x = 0; x < 3 * 2; ++x) {  // 3 short2 = 6 shorts a row
      EXPECT_EQ(out[y * 16 + x], box[((1 * 4) + y + 1) * 16 + 2 * 2 + x]) << y << "," << x;
    }
  }
  ASSERT_EQ(cudaGetChannelDesc(&got, c), cudaSuccess);
  EXPECT_EQ(got.y, 16);
  EXPECT_EQ(got.z, 0);
  EXPECT_EQ(got.f, cudaChannelFormatKindSigned);

  // The deprecated linear copies: 20 floats from (3, row 1) run on through rows 2 and 3 of a
  // 10-float-wide array.
  cudaArray_t lin = nullptr;
  ASSERT_EQ(cudaMallocArray(&lin, &f1, 10, 4, 0), cudaSuccess);
  std::vector<float> zero40(40, 0.0f), run(20), all40(40, -1.0f), again(20, -1.0f);
  for (size_t i = 0; i < run.size(); ++i) run[i] = float(i) + 100.0f;
  ASSERT_EQ(cudaMemcpy2DToArray(lin, 0, 0, zero40.data(), 40, 40, 4, cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyToArray(lin, 3 * 4, 1, run.data(), 20 * 4, cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DFromArray(all40.data(), 40, lin, 0, 0, 40, 4, cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (size_t i = 0; i < 40; ++i) {
    const float want = i >= 13 && i < 33 ? run[i - 13] : 0.0f;
    EXPECT_EQ(all40[i], want) << i;
  }
  ASSERT_EQ(cudaMemcpyFromArray(again.data(), lin, 3 * 4, 1, 20 * 4, cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(again, run);
  EXPECT_EQ(cudaMemcpyToArray(lin, 3 * 4, 1, run.data(), 30 * 4, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);  // past the last row

  // Between arrays of different widths: 20 floats from (3, row 1) of the 10-wide array (the run
  // above) to (5, row 0) of a 7-wide one, on through its rows.
  cudaArray_t narrow = nullptr;
  ASSERT_EQ(cudaMallocArray(&narrow, &f1, 7, 5, 0), cudaSuccess);
  std::vector<float> zero35(35, 0.0f), got35(35, -1.0f);
  ASSERT_EQ(cudaMemcpy2DToArray(narrow, 0, 0, zero35.data(), 28, 28, 5, cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(
      cudaMemcpyArrayToArray(narrow, 5 * 4, 0, lin, 3 * 4, 1, 20 * 4, cudaMemcpyDeviceToDevice),
      cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DFromArray(got35.data(), 28, narrow, 0, 0, 28, 5, cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (size_t i = 0; i < 35; ++i) {
    const float want = i >= 5 && i < 25 ? run[i - 5] : 0.0f;
    EXPECT_EQ(got35[i], want) << i;
  }
  // Same widths, aligned: whole rows go as one copy (rows 1-2 of `lin` onto rows 2-3 of a copy).
  cudaArray_t twin = nullptr;
  ASSERT_EQ(cudaMallocArray(&twin, &f1, 10, 4, 0), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DToArray(twin, 0, 0, zero40.data(), 40, 40, 4, cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyArrayToArray(twin, 0, 2, lin, 0, 1, 20 * 4, cudaMemcpyDefault), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DFromArray(all40.data(), 40, twin, 0, 0, 40, 4, cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (size_t i = 0; i < 40; ++i) {
    const float want = i >= 20 ? (i - 10 >= 13 && i - 10 < 33 ? run[i - 10 - 13] : 0.0f) : 0.0f;
    EXPECT_EQ(all40[i], want) << i;
  }
  // Refusals change nothing: past either array, a host direction, a freed array.
  EXPECT_EQ(
      cudaMemcpyArrayToArray(narrow, 5 * 4, 0, lin, 3 * 4, 1, 31 * 4, cudaMemcpyDeviceToDevice),
      cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyArrayToArray(narrow, 0, 4, lin, 0, 0, 8 * 4, cudaMemcpyDeviceToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyArrayToArray(narrow, 0, 0, lin, 0, 0, 4, cudaMemcpyHostToDevice),
            cudaErrorInvalidMemcpyDirection);
  ASSERT_EQ(cudaMemcpy2DFromArray(got35.data(), 28, narrow, 0, 0, 28, 5, cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (size_t i = 0; i < 35; ++i) EXPECT_EQ(got35[i], i >= 5 && i < 25 ? run[i - 5] : 0.0f) << i;
  ASSERT_EQ(cudaFreeArray(twin), cudaSuccess);
  EXPECT_EQ(cudaMemcpyArrayToArray(twin, 0, 0, lin, 0, 0, 4, cudaMemcpyDeviceToDevice),
            cudaErrorInvalidResourceHandle);
  ASSERT_EQ(cudaFreeArray(narrow), cudaSuccess);
  (void)cudaGetLastError();
  ASSERT_EQ(cudaFreeArray(lin), cudaSuccess);

  // Refusals: a 3-channel format, a copy past the array, a freed array.
  const cudaChannelFormatDesc f3 = {8, 8, 8, 0, cudaChannelFormatKindUnsigned};
  cudaArray_t bad = nullptr;
  EXPECT_EQ(cudaMallocArray(&bad, &f3, 4, 4, 0), cudaErrorInvalidChannelDescriptor);
  cudaChannelFormatDesc odd_kind = f1;
  const int nine = 9;  // no cudaChannelFormatKind: read as bytes, as a careless caller's would be
  std::memcpy(&odd_kind.f, &nine, sizeof nine);
  EXPECT_EQ(cudaMallocArray(&bad, &odd_kind, 4, 4, 0), cudaErrorInvalidChannelDescriptor);
  EXPECT_EQ(cudaMemcpy2DToArray(a, 60 * 4, 0, image.data(), 256, 8 * 4, 1, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  ASSERT_EQ(cudaFreeArray(a), cudaSuccess);
  ASSERT_EQ(cudaFreeArray(b), cudaSuccess);
  ASSERT_EQ(cudaFreeArray(c), cudaSuccess);
  EXPECT_EQ(cudaFreeArray(nullptr), cudaSuccess);
  EXPECT_EQ(cudaArrayGetInfo(&got, &extent, &flags, a), cudaErrorInvalidResourceHandle);
  (void)cudaGetLastError();
}

TEST_F(RuntimeCudart, MemoryErrors) {
  void* d = reinterpret_cast<void*>(1);
  ASSERT_EQ(cudaMalloc(&d, 0), cudaSuccess);
  EXPECT_EQ(d, nullptr);
  EXPECT_EQ(cudaMalloc(nullptr, 16), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMalloc(&d, size_t(1) << 40), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaFree(nullptr), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d, 256), cudaSuccess);
  std::vector<uint8_t> host(512);
  EXPECT_EQ(cudaMemcpy(d, host.data(), 512, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(d, host.data(), 16, cudaMemcpyKind(9)), cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaMemcpy(nullptr, host.data(), 16, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset(d, 0, 257), cudaErrorInvalidValue);
  ASSERT_EQ(cudaMemset(d, 0x11, 256), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(host.data(), d, 256, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(host[255], 0x11);
  ASSERT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaErrorInvalidDevicePointer);
  void* pinned;
  ASSERT_EQ(cudaMallocHost(&pinned, 8192), cudaSuccess);
  void* dev_view;
  ASSERT_EQ(cudaHostGetDevicePointer(&dev_view, pinned, 0), cudaSuccess);
  ASSERT_EQ(cudaFreeHost(pinned), cudaSuccess);
  void* mapped;
  ASSERT_EQ(cudaHostAlloc(&mapped, 4096, cudaHostAllocMapped), cudaSuccess);
  ASSERT_EQ(cudaFreeHost(mapped), cudaSuccess);
  size_t free = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  EXPECT_LE(free, total);
  (void)cudaGetLastError();
}

TEST_F(RuntimeCudart, SymbolsAndEvents) {
  unsigned v = 0;
  ASSERT_EQ(cudaMemcpyFromSymbol(&v, &counter_shadow, 4, 0, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(v, 40u);
  v = 1234;
  ASSERT_EQ(cudaMemcpyToSymbol(&counter_shadow, &v, 4, 0, cudaMemcpyHostToDevice), cudaSuccess);
  unsigned back = 0;
  ASSERT_EQ(cudaMemcpyFromSymbol(&back, &counter_shadow, 4, 0, cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(back, 1234u);
  EXPECT_EQ(cudaMemcpyToSymbol(&counter_shadow, &v, 4, 2, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyToSymbol(&v, &v, 4, 0, cudaMemcpyHostToDevice), cudaErrorInvalidSymbol);
  EXPECT_EQ(cudaMemcpyToSymbol(&counter_shadow, &v, 4, 0, cudaMemcpyDeviceToHost),
            cudaErrorInvalidMemcpyDirection);
  void* address = nullptr;
  ASSERT_EQ(cudaGetSymbolAddress(&address, &counter_shadow), cudaSuccess);
  EXPECT_NE(address, nullptr);
  size_t symbol_size = 0;
  ASSERT_EQ(cudaGetSymbolSize(&symbol_size, &counter_shadow), cudaSuccess);
  EXPECT_EQ(symbol_size, 4u);
  EXPECT_EQ(cudaGetSymbolSize(&symbol_size, &v), cudaErrorInvalidSymbol);
  EXPECT_EQ(cudaGetSymbolSize(nullptr, &counter_shadow), cudaErrorInvalidValue);
  // The stream forms, in order with the stream's other work.
  cudaStream_t q;
  ASSERT_EQ(cudaStreamCreateWithFlags(&q, cudaStreamNonBlocking), cudaSuccess);
  v = 777;
  ASSERT_EQ(cudaMemcpyToSymbolAsync(&counter_shadow, &v, 4, 0, cudaMemcpyHostToDevice, q),
            cudaSuccess);
  back = 0;
  ASSERT_EQ(cudaMemcpyFromSymbolAsync(&back, &counter_shadow, 4, 0, cudaMemcpyDeviceToHost, q),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(q), cudaSuccess);
  EXPECT_EQ(back, 777u);
  EXPECT_EQ(cudaMemcpyFromSymbolAsync(&back, &counter_shadow, 8, 0, cudaMemcpyDeviceToHost, q),
            cudaErrorInvalidValue);
  ASSERT_EQ(cudaStreamDestroy(q), cudaSuccess);
  EXPECT_NE(__cudaInitModule(handle_), 0);

  cudaEvent_t start, stop;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&stop, cudaEventBlockingSync), cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  void* d;
  const unsigned n = 1 << 16;
  ASSERT_EQ(cudaMalloc(&d, n * 4), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(d, 0, n * 4, s), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(start, s), cudaSuccess);
  ASSERT_EQ(LaunchVadd(dim3(n / 256), dim3(256), s, d, d, d, n), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(stop, s), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(nullptr, stop, 0), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(stop), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(stop), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);
  float ms = -1;
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaSuccess);
  EXPECT_GE(ms, 0.0f);
  ASSERT_EQ(cudaEventDestroy(start), cudaSuccess);
  ASSERT_EQ(cudaEventDestroy(stop), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(stop), cudaErrorInvalidResourceHandle);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  ASSERT_EQ(cudaFree(d), cudaSuccess);
  (void)cudaGetLastError();
}

// Every trap reason of the software GPU as the runtime API reports it: the code at the next
// synchronizing call, in cudaGetLastError, and on every later call until cudaDeviceReset.
TEST_F(RuntimeCudart, EachKindOfKernelFaultHasItsCodeUntilDeviceReset) {
  namespace t = gpuvm::runtime::testing;
  static std::vector<uint8_t> image = t::FaultModuleImage();
  static Wrapper wrapper{0x466243b1, 1, image.data(), nullptr};
  // One host stub per kernel: distinct addresses within one array.
  static char stubs[std::size(t::kFaultKernels)];
  void** handle = __cudaRegisterFatBinary(&wrapper);
  for (size_t i = 0; i < std::size(t::kFaultKernels); ++i) {
    __cudaRegisterFunction(handle, &stubs[i], nullptr, t::kFaultKernels[i].name, -1, nullptr,
                           nullptr, nullptr, nullptr, nullptr);
  }
  __cudaRegisterFatBinaryEnd(handle);
  for (size_t i = 0; i < std::size(t::kFaultKernels); ++i) {
    SCOPED_TRACE(t::kFaultKernels[i].name);
    const cudaError_t code = cudaError_t(t::kFaultKernels[i].cuda_error);
    void* d;
    ASSERT_EQ(cudaMalloc(&d, 4096), cudaSuccess);
    void* args[] = {&d};
    ASSERT_EQ(cudaLaunchKernel(&stubs[i], dim3(1), dim3(64), args, 0, nullptr), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), code);
    EXPECT_EQ(cudaGetLastError(), code);
    EXPECT_EQ(cudaMalloc(&d, 16), code);  // sticky: the context is unusable
    EXPECT_EQ(cudaMemset(d, 0, 4), code);
    EXPECT_EQ(cudaDeviceSynchronize(), code);
    EXPECT_EQ(cudaPeekAtLastError(), code);
    ASSERT_EQ(cudaDeviceReset(), cudaSuccess);
    (void)cudaGetLastError();
    ASSERT_EQ(cudaMalloc(&d, 16), cudaSuccess);
    ASSERT_EQ(cudaFree(d), cudaSuccess);
  }
  __cudaUnregisterFatBinary(handle);
}

// Runs last (gtest keeps definition order in one process): it faults the primary context.
TEST_F(RuntimeCudart, KernelFaultIsStickyUntilDeviceReset) {
  void (*poke)() = &poke_stub;
  uint64_t bad_address = 0x10;
  void* args[] = {&bad_address};
  ASSERT_EQ(
      cudaLaunchKernel(reinterpret_cast<const void*>(poke), dim3(1), dim3(32), args, 0, nullptr),
      cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
  void* d;
  EXPECT_EQ(cudaMalloc(&d, 16), cudaErrorIllegalAddress);  // sticky: the context is unusable
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
  ASSERT_EQ(cudaDeviceReset(), cudaSuccess);
  // A fresh primary context: everything works again, modules reload lazily.
  ASSERT_EQ(cudaMalloc(&d, 4 * 64), cudaSuccess);
  ASSERT_EQ(cudaMemset(d, 0, 4 * 64), cudaSuccess);
  ASSERT_EQ(LaunchVadd(dim3(1), dim3(64), nullptr, d, d, d, 64), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaFree(d), cudaSuccess);
}

// The driver's functions by base name through the runtime: its own version (13.0) or the one asked.
TEST(CudartDriverEntryPoint, FindsTheDriversFunctionsByNameAndVersion) {
  using EntryPoint =
      cudaError_t (*)(const char*, void**, unsigned long long, cudaDriverEntryPointQueryResult*);
  const auto entry_point_ptsz =
      reinterpret_cast<EntryPoint>(::dlsym(RTLD_DEFAULT, "cudaGetDriverEntryPoint_ptsz"));
  ASSERT_NE(entry_point_ptsz, nullptr);
  void* f = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  ASSERT_EQ(cudaGetDriverEntryPoint("cuMemAlloc", &f, cudaEnableDefault, &status), cudaSuccess);
  EXPECT_EQ(status, cudaDriverEntryPointSuccess);
  EXPECT_EQ(f, ::dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
  ASSERT_EQ(cudaGetDriverEntryPointByVersion("cuCtxCreate", &f, 11040, cudaEnableDefault, nullptr),
            cudaSuccess);
  EXPECT_EQ(f, ::dlsym(RTLD_DEFAULT, "cuCtxCreate_v3"));
  // A program compiled for per-thread default streams calls the _ptsz entry point.
  ASSERT_EQ(entry_point_ptsz("cuMemcpyHtoD", &f, cudaEnableDefault, nullptr), cudaSuccess);
  EXPECT_EQ(f, ::dlsym(RTLD_DEFAULT, "cuMemcpyHtoD_v2_ptds"));
  ASSERT_EQ(cudaGetDriverEntryPoint("cuMemcpyHtoD", &f, cudaEnableDefault, nullptr), cudaSuccess);
  EXPECT_EQ(f, ::dlsym(RTLD_DEFAULT, "cuMemcpyHtoD_v2"));
  // Not there, or too new for the version asked: success, no function, and the reason.
  ASSERT_EQ(cudaGetDriverEntryPoint("cuNoSuchFunction", &f, cudaEnableDefault, &status),
            cudaSuccess);
  EXPECT_EQ(f, nullptr);
  EXPECT_EQ(status, cudaDriverEntryPointSymbolNotFound);
  ASSERT_EQ(cudaGetDriverEntryPointByVersion("cuGraphAddNode", &f, 12000, 0, &status), cudaSuccess);
  EXPECT_EQ(f, nullptr);
  EXPECT_EQ(status, cudaDriverEntryPointVersionNotSufficent);
  EXPECT_EQ(cudaGetDriverEntryPoint(nullptr, &f, 0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetDriverEntryPoint("cuMemAlloc", &f, 3, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);  // recorded like any refused call
}

// The runtime's form of the range attributes: what cudaMemAdvise said, per page.
TEST(CudartManagedRange, AttributesReportTheAdvice) {
  char* m = nullptr;
  ASSERT_EQ(cudaMallocManaged(reinterpret_cast<void**>(&m), 4 * 4096, cudaMemAttachGlobal),
            cudaSuccess);
  cudaMemLocation gpu{};
  gpu.type = cudaMemLocationTypeDevice;
  gpu.id = 0;
  ASSERT_EQ(cudaMemAdvise(m, 2 * 4096, cudaMemAdviseSetReadMostly, gpu), cudaSuccess);
  ASSERT_EQ(cudaMemAdvise(m, 4 * 4096, cudaMemAdviseSetPreferredLocation, gpu), cudaSuccess);
  int value = -7;
  ASSERT_EQ(cudaMemRangeGetAttribute(&value, 4, cudaMemRangeAttributeReadMostly, m, 2 * 4096),
            cudaSuccess);
  EXPECT_EQ(value, 1);
  ASSERT_EQ(cudaMemRangeGetAttribute(&value, 4, cudaMemRangeAttributeReadMostly, m, 4 * 4096),
            cudaSuccess);
  EXPECT_EQ(value, 0);
  int pref = -7, type = -7;
  void* data[] = {&pref, &type};
  size_t sizes[] = {4, 4};
  cudaMemRangeAttribute which[] = {cudaMemRangeAttributePreferredLocation,
                                   cudaMemRangeAttributePreferredLocationType};
  ASSERT_EQ(cudaMemRangeGetAttributes(data, sizes, which, 2, m, 4 * 4096), cudaSuccess);
  EXPECT_EQ(pref, 0);
  EXPECT_EQ(type, cudaMemLocationTypeDevice);
  EXPECT_EQ(cudaMemRangeGetAttribute(&value, 3, cudaMemRangeAttributeReadMostly, m, 4096),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  ASSERT_EQ(cudaFree(m), cudaSuccess);
}

}  // namespace
