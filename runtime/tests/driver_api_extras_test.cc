// The driver API functions beyond the first-contact set, as a program sees them (linked with
// libcuda.so.1 and our cuda.h only): pitched allocations, 2D and 3D copies between every kind of
// memory and 2D memsets (RuntimePitched); occupancy from the device's limits and the kernel's
// registers and shared memory (RuntimeOccupancy); host functions and callbacks on streams, in order
// with the stream's work (RuntimeHostFunctions); peer access with one device's answers and copies
// between contexts (RuntimePeer); stream priorities and queries, context ids, kernel names
// (RuntimeStreamQueries).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "runtime/include/cuda.h"
#include "runtime/tests/test_kernels.h"

namespace {

#define ASSERT_CU(expr) ASSERT_EQ((expr), CUDA_SUCCESS) << #expr
#define EXPECT_CU(expr) EXPECT_EQ((expr), CUDA_SUCCESS) << #expr

class RuntimeExtras : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_CU(cuInit(0));
    ASSERT_CU(cuDeviceGet(&dev_, 0));
    ASSERT_CU(cuCtxCreate(&ctx_, nullptr, 0, dev_));
    image_ = gpuvm::runtime::testing::TestModuleImage();
    ASSERT_CU(cuModuleLoadData(&module_, image_.data()));
    ASSERT_CU(cuModuleGetFunction(&vadd_, module_, "vadd"));
    ASSERT_CU(cuModuleGetFunction(&poke_, module_, "poke"));
  }
  void TearDown() override {
    if (ctx_) {
      EXPECT_CU(cuCtxDestroy(ctx_));
    }
  }
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  CUmodule module_ = nullptr;
  CUfunction vadd_ = nullptr, poke_ = nullptr;
  std::vector<uint8_t> image_;
};

// ---- pitched memory, 2D and 3D copies, 2D memsets ----

using RuntimePitched = RuntimeExtras;

// A host image: byte (x, y) = x * 7 + y * 13 + seed, rows `pitch` apart.
std::vector<uint8_t> Image(size_t pitch, size_t height, uint8_t seed) {
  std::vector<uint8_t> v(pitch * height);
  for (size_t y = 0; y < height; ++y) {
    for (size_t x = 0; x < pitch; ++x) v[y * pitch + x] = uint8_t(x * 7 + y * 13 + seed);
  }
  return v;
}

TEST_F(RuntimePitched, AllocPitchAlignsRows) {
  CUdeviceptr d;
  size_t pitch = 0;
  ASSERT_CU(cuMemAllocPitch(&d, &pitch, 100, 7, 4));
  EXPECT_EQ(pitch, 256u);
  EXPECT_EQ(d % 256, 0u);
  ASSERT_CU(cuMemFree(d));
  ASSERT_CU(cuMemAllocPitch(&d, &pitch, 256, 3, 16));
  EXPECT_EQ(pitch, 256u);
  ASSERT_CU(cuMemFree(d));
  EXPECT_EQ(cuMemAllocPitch(&d, &pitch, 100, 7, 3), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemAllocPitch(&d, nullptr, 100, 7, 4), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemAllocPitch(&d, &pitch, 0, 7, 4), CUDA_ERROR_INVALID_VALUE);
}

// A 100 x 7 window at (3, 2) of a pageable host image goes to a pitched device buffer, on to a
// second one through the copy engine, back to pageable memory, to pinned memory on a stream and to
// host memory again; every byte of every destination is checked, those outside the window too.
TEST_F(RuntimePitched, TwoDimensionalCopiesBetweenEveryKindOfMemory) {
  const size_t width = 100, height = 7, src_pitch = 120, host_rows = 10;
  std::vector<uint8_t> src = Image(src_pitch, host_rows, 1);
  CUdeviceptr d1, d2;
  size_t p1, p2;
  ASSERT_CU(cuMemAllocPitch(&d1, &p1, width, height, 4));
  ASSERT_CU(cuMemAllocPitch(&d2, &p2, width + 300, height + 1, 4));
  ASSERT_CU(cuMemsetD8(d2, 0xee, p2 * (height + 1)));

  CUDA_MEMCPY2D c{};
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = src.data();
  c.srcXInBytes = 3;
  c.srcY = 2;
  c.srcPitch = src_pitch;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = d1;
  c.dstPitch = p1;
  c.WidthInBytes = width;
  c.Height = height;
  ASSERT_CU(cuMemcpy2D(&c));  // pageable -> device: staged rows

  CUDA_MEMCPY2D dd{};
  dd.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  dd.srcDevice = d1;
  dd.srcPitch = p1;
  dd.dstMemoryType = CU_MEMORYTYPE_UNIFIED;  // a device pointer of the context
  dd.dstDevice = d2;
  dd.dstXInBytes = 10;
  dd.dstY = 1;
  dd.dstPitch = p2;
  dd.WidthInBytes = width;
  dd.Height = height;
  ASSERT_CU(cuMemcpy2DUnaligned(&dd));  // device -> device: one pitched copy

  // The whole of d2 back: the window at (10, 1), 0xee around it.
  std::vector<uint8_t> all(p2 * (height + 1), 0);
  ASSERT_CU(cuMemcpyDtoH(all.data(), d2, all.size()));
  for (size_t y = 0; y < height + 1; ++y) {
    for (size_t x = 0; x < p2; ++x) {
      const bool inside = y >= 1 && y < 1 + height && x >= 10 && x < 10 + width;
      const uint8_t want = inside ? src[(y - 1 + 2) * src_pitch + (x - 10 + 3)] : 0xee;
      ASSERT_EQ(all[y * p2 + x], want) << x << "," << y;
    }
  }

  // device -> pageable host, into a larger image whose other bytes must stay.
  const size_t dst_pitch = 150;
  std::vector<uint8_t> back(dst_pitch * height, 0x55);
  CUDA_MEMCPY2D dh{};
  dh.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  dh.srcDevice = d1;
  dh.srcPitch = p1;
  dh.dstMemoryType = CU_MEMORYTYPE_HOST;
  dh.dstHost = back.data();
  dh.dstPitch = dst_pitch;
  dh.WidthInBytes = width;
  dh.Height = height;
  ASSERT_CU(cuMemcpy2D(&dh));
  for (size_t y = 0; y < height; ++y) {
    for (size_t x = 0; x < dst_pitch; ++x) {
      const uint8_t want = x < width ? src[(y + 2) * src_pitch + x + 3] : 0x55;
      ASSERT_EQ(back[y * dst_pitch + x], want) << x << "," << y;
    }
  }

  // device -> pinned host on a stream (one DMA), then pinned -> pageable host (host to host).
  void* pinned = nullptr;
  ASSERT_CU(cuMemAllocHost(&pinned, p1 * height));
  std::memset(pinned, 0, p1 * height);
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, 0));
  CUDA_MEMCPY2D dp = dh;
  dp.dstHost = pinned;
  dp.dstPitch = p1;
  ASSERT_CU(cuMemcpy2DAsync(&dp, s));
  ASSERT_CU(cuStreamSynchronize(s));
  std::vector<uint8_t> packed(width * height, 0);
  CUDA_MEMCPY2D hh{};
  hh.srcMemoryType = CU_MEMORYTYPE_HOST;
  hh.srcHost = pinned;
  hh.srcPitch = p1;
  hh.dstMemoryType = CU_MEMORYTYPE_HOST;
  hh.dstHost = packed.data();
  hh.dstPitch = width;
  hh.WidthInBytes = width;
  hh.Height = height;
  ASSERT_CU(cuMemcpy2DAsync(&hh, s));
  for (size_t y = 0; y < height; ++y) {
    ASSERT_EQ(std::memcmp(&packed[y * width], &src[(y + 2) * src_pitch + 3], width), 0) << y;
  }
  ASSERT_CU(cuStreamDestroy(s));
  ASSERT_CU(cuMemFreeHost(pinned));

  // Refusals: pitch below the width, a window past the allocation, arrays, no description.
  CUDA_MEMCPY2D bad = c;
  bad.dstPitch = width - 1;
  EXPECT_EQ(cuMemcpy2D(&bad), CUDA_ERROR_INVALID_VALUE);
  bad = c;
  bad.Height = height + 1;
  EXPECT_EQ(cuMemcpy2D(&bad), CUDA_ERROR_INVALID_VALUE);
  bad = c;
  bad.dstY = ~size_t(0) / 2;
  EXPECT_EQ(cuMemcpy2D(&bad), CUDA_ERROR_INVALID_VALUE);
  bad = c;
  bad.dstMemoryType = CU_MEMORYTYPE_ARRAY;  // naming no array
  EXPECT_EQ(cuMemcpy2D(&bad), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpy2D(nullptr), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuMemFree(d1));
  ASSERT_CU(cuMemFree(d2));
}

TEST_F(RuntimePitched, TwoDimensionalMemsets) {
  CUdeviceptr d;
  size_t pitch;
  const size_t rows = 9;
  ASSERT_CU(cuMemAllocPitch(&d, &pitch, 300, rows, 4));
  ASSERT_CU(cuMemsetD8(d, 0, pitch * rows));
  ASSERT_CU(cuMemsetD2D8(d + 1, pitch, 0xab, 299, rows));
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, 0));
  ASSERT_CU(cuMemsetD2D32Async(d + 4 * pitch, pitch, 0x01020304u, 10, 3, s));  // rows 4..6
  ASSERT_CU(cuStreamSynchronize(s));
  std::vector<uint8_t> all(pitch * rows);
  ASSERT_CU(cuMemcpyDtoH(all.data(), d, all.size()));
  for (size_t y = 0; y < rows; ++y) {
    for (size_t x = 0; x < pitch; ++x) {
      uint8_t want = (x >= 1 && x < 300) ? 0xab : 0;
      if (y >= 4 && y < 7 && x < 40) want = uint8_t(0x04 - x % 4);  // little-endian 0x01020304
      ASSERT_EQ(all[y * pitch + x], want) << x << "," << y;
    }
  }
  EXPECT_EQ(cuMemsetD2D32(d + 1, pitch, 1, 4, 2), CUDA_ERROR_INVALID_VALUE);  // unaligned
  EXPECT_EQ(cuMemsetD2D8(d, 100, 1, 200, 2), CUDA_ERROR_INVALID_VALUE);       // pitch < width
  EXPECT_EQ(cuMemsetD2D8(d, pitch, 1, pitch, rows + 1), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuStreamDestroy(s));
  ASSERT_CU(cuMemFree(d));
}

// A 5 x 4 x 3 box out of a 9 x 6 x 4 host volume into a pitched device volume and back.
TEST_F(RuntimePitched, ThreeDimensionalCopies) {
  const size_t w = 9, h = 6, depth = 4;
  std::vector<uint8_t> volume(w * h * depth);
  for (size_t i = 0; i < volume.size(); ++i) volume[i] = uint8_t(i * 31 + 5);
  CUdeviceptr d;
  size_t pitch;
  const size_t dev_h = 5;  // slice height on the device
  ASSERT_CU(cuMemAllocPitch(&d, &pitch, 8, dev_h * 3, 4));
  CUDA_MEMCPY3D c{};
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = volume.data();
  c.srcXInBytes = 2, c.srcY = 1, c.srcZ = 1;
  c.srcPitch = w, c.srcHeight = h;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = d;
  c.dstPitch = pitch, c.dstHeight = dev_h;
  c.WidthInBytes = 5, c.Height = 4, c.Depth = 3;
  ASSERT_CU(cuMemcpy3D(&c));
  std::vector<uint8_t> box(5 * 4 * 3, 0);
  CUDA_MEMCPY3D b{};
  b.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  b.srcDevice = d;
  b.srcPitch = pitch, b.srcHeight = dev_h;
  b.dstMemoryType = CU_MEMORYTYPE_HOST;
  b.dstHost = box.data();
  b.dstPitch = 5, b.dstHeight = 4;
  b.WidthInBytes = 5, b.Height = 4, b.Depth = 3;
  ASSERT_CU(cuMemcpy3DAsync(&b, nullptr));
  ASSERT_CU(cuCtxSynchronize());
  for (size_t z = 0; z < 3; ++z) {
    for (size_t y = 0; y < 4; ++y) {
      for (size_t x = 0; x < 5; ++x) {
        ASSERT_EQ(box[(z * 4 + y) * 5 + x], volume[((z + 1) * h + y + 1) * w + x + 2])
            << x << "," << y << "," << z;
      }
    }
  }
  CUDA_MEMCPY3D bad = c;
  bad.Depth = 4;  // past the device volume
  EXPECT_EQ(cuMemcpy3D(&bad), CUDA_ERROR_INVALID_VALUE);
  // Refused for its last slice only: the first three, which would fit, were not copied either.
  std::vector<uint8_t> before(pitch * dev_h * 3), after(before.size());
  ASSERT_CU(cuMemcpyDtoH(before.data(), d, before.size()));
  bad.srcZ = 0;  // slices the device holds now differ from what the refused copy would write
  EXPECT_EQ(cuMemcpy3D(&bad), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuMemcpyDtoH(after.data(), d, after.size()));
  EXPECT_EQ(after, before);
  bad = c;
  bad.srcLOD = 1;
  EXPECT_EQ(cuMemcpy3D(&bad), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuMemFree(d));
}

// ---- occupancy ----

using RuntimeOccupancy = RuntimeExtras;

TEST_F(RuntimeOccupancy, BlocksPerMultiprocessorFollowTheDeviceLimits) {
  // The device: 1536 threads, 8 blocks, 32768 registers and 48 KiB shared memory per SM; vadd
  // uses few registers and no shared memory, so threads and blocks are the limits.
  int regs = -1, sms = 0;
  ASSERT_CU(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, vadd_));
  ASSERT_CU(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev_));
  ASSERT_GT(regs, 0);
  ASSERT_LT(regs, 20);
  int n = -1;
  ASSERT_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, vadd_, 32, 0));
  EXPECT_EQ(n, 8);  // blocks per SM
  ASSERT_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, vadd_, 256, 0));
  EXPECT_EQ(n, 6);  // 1536 / 256
  ASSERT_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, vadd_, 1000, 0));
  EXPECT_EQ(n, 1);  // 32 warps of 48
  ASSERT_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, vadd_, 100, 20 << 10));
  EXPECT_EQ(n, 2);  // 48 KiB / 20 KiB of shared memory
  ASSERT_CU(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&n, vadd_, 100, 49 << 10,
                                                                 CU_OCCUPANCY_DEFAULT));
  EXPECT_EQ(n, 0);  // does not fit at all
  ASSERT_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, vadd_, 2048, 0));
  EXPECT_EQ(n, 0);  // above the kernel's limit
  EXPECT_EQ(cuOccupancyMaxActiveBlocksPerMultiprocessor(nullptr, vadd_, 32, 0),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, vadd_, 0, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(
      cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, reinterpret_cast<CUfunction>(&n), 32, 0),
      CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&n, vadd_, 32, 0, 0x10),
            CUDA_ERROR_INVALID_VALUE);
}

// The most dynamic shared memory that lets `n` blocks of 100 threads stay resident together: one
// 128-byte unit more and fewer fit; more blocks than the SM takes at all get 0.
TEST_F(RuntimeOccupancy, AvailableDynamicSharedMemoryKeepsThatManyBlocksResident) {
  for (const int n : {1, 2, 3, 5}) {
    SCOPED_TRACE(n);
    size_t bytes = 0;
    ASSERT_CU(cuOccupancyAvailableDynamicSMemPerBlock(&bytes, vadd_, n, 100));
    ASSERT_GT(bytes, 0u);
    int blocks = 0;
    ASSERT_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, vadd_, 100, bytes));
    EXPECT_GE(blocks, n);
    ASSERT_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, vadd_, 100, bytes + 128));
    EXPECT_LT(blocks, n);
  }
  size_t bytes = 1;
  ASSERT_CU(cuOccupancyAvailableDynamicSMemPerBlock(&bytes, vadd_, 9, 100));  // 8 blocks per SM
  EXPECT_EQ(bytes, 0u);
  EXPECT_EQ(cuOccupancyAvailableDynamicSMemPerBlock(nullptr, vadd_, 1, 100),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuOccupancyAvailableDynamicSMemPerBlock(&bytes, vadd_, 0, 100),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(
      cuOccupancyAvailableDynamicSMemPerBlock(&bytes, reinterpret_cast<CUfunction>(&bytes), 1, 100),
      CUDA_ERROR_INVALID_HANDLE);
}

size_t FortyBytesPerThread(int block) { return size_t(block) * 40; }

TEST_F(RuntimeOccupancy, PotentialBlockSizeFillsTheMultiprocessor) {
  int sms = 0, grid = -1, block = -1;
  ASSERT_CU(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev_));
  // The first size from the top with 1536 resident threads: 2 blocks of 768.
  ASSERT_CU(cuOccupancyMaxPotentialBlockSize(&grid, &block, vadd_, nullptr, 0, 0));
  EXPECT_EQ(block, 768);
  EXPECT_EQ(grid, 2 * sms);
  // At most 500 threads: 4 blocks of 384 beat 3 of 500.
  ASSERT_CU(cuOccupancyMaxPotentialBlockSize(&grid, &block, vadd_, nullptr, 0, 500));
  EXPECT_EQ(block, 384);
  EXPECT_EQ(grid, 4 * sms);
  // Shared memory growing with the block (40 bytes a thread): 2 blocks of 608 (23.75 KiB each,
  // 1216 threads) hold the most; 640 fits once, 576 twice (1152), 384 three times (1152).
  ASSERT_CU(cuOccupancyMaxPotentialBlockSizeWithFlags(&grid, &block, vadd_, FortyBytesPerThread, 0,
                                                      0, CU_OCCUPANCY_DEFAULT));
  EXPECT_EQ(block, 608);
  EXPECT_EQ(grid, 2 * sms);
  EXPECT_EQ(cuOccupancyMaxPotentialBlockSize(nullptr, &block, vadd_, nullptr, 0, 0),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuOccupancyMaxPotentialBlockSize(&grid, &block, vadd_, nullptr, 0, -1),
            CUDA_ERROR_INVALID_VALUE);
}

// ---- host functions on streams ----

using RuntimeHostFunctions = RuntimeExtras;

struct Trace {
  std::atomic<int> next{0};
  int order[8] = {};
  uint32_t seen[8] = {};
  const uint32_t* watch = nullptr;  // pinned memory the stream's earlier work wrote
  uint32_t* publish = nullptr;      // pinned memory the stream's later work reads
};

void CUDAAPI Step(void* data) {
  auto* t = static_cast<Trace*>(data);
  const int i = t->next.fetch_add(1);
  t->order[i] = i;
  t->seen[i] = __atomic_load_n(t->watch, __ATOMIC_ACQUIRE);
  if (i == 0) {
    // Slow: the stream's later work must still wait for it.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    __atomic_store_n(t->publish, 777u, __ATOMIC_RELEASE);
  }
}

// Work, a host function, more work, another host function: each function runs after the work
// queued before it (it sees its results) and the work queued after it waits for it (it reads what
// the first function wrote, 200 ms late). Destroying the stream leaves nothing behind.
TEST_F(RuntimeHostFunctions, RunInOrderWithTheStreamsWork) {
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, 0));
  void* pinned = nullptr;
  ASSERT_CU(cuMemAllocHost(&pinned, 4096));
  auto* words = static_cast<uint32_t*>(pinned);
  words[0] = 0, words[1] = 0;
  Trace t;
  t.watch = &words[0];
  t.publish = &words[1];
  CUdeviceptr d;
  ASSERT_CU(cuMemAlloc(&d, 256 * 4));
  ASSERT_CU(cuMemsetD32Async(d, 5, 256, s));
  uint32_t n = 256;
  void* params[] = {&d, &d, &d, &n};
  ASSERT_CU(cuLaunchKernel(vadd_, 1, 1, 1, 256, 1, 1, 0, s, params, nullptr));  // 10
  ASSERT_CU(cuMemcpyDtoHAsync(&words[0], d, 4, s));
  ASSERT_CU(cuLaunchHostFunc(s, Step, &t));
  ASSERT_CU(cuMemcpyHtoDAsync(d + 4, &words[1], 4, s));  // what Step published
  ASSERT_CU(cuLaunchKernel(vadd_, 1, 1, 1, 256, 1, 1, 0, s, params, nullptr));  // doubles
  ASSERT_CU(cuMemcpyDtoHAsync(&words[0], d, 4, s));
  ASSERT_CU(cuLaunchHostFunc(s, Step, &t));
  ASSERT_CU(cuStreamSynchronize(s));  // includes the host functions
  EXPECT_EQ(t.next.load(), 2);
  EXPECT_EQ(t.seen[0], 10u);
  EXPECT_EQ(t.seen[1], 20u);
  uint32_t second = 0;
  ASSERT_CU(cuMemcpyDtoH(&second, d + 4, 4));
  EXPECT_EQ(second, 777u * 2);
  EXPECT_EQ(cuLaunchHostFunc(s, nullptr, &t), CUDA_ERROR_INVALID_VALUE);
  // Queued and not yet run when the stream goes: it still runs, once.
  ASSERT_CU(cuLaunchKernel(vadd_, 1, 1, 1, 256, 1, 1, 0, s, params, nullptr));
  ASSERT_CU(cuLaunchHostFunc(s, Step, &t));
  ASSERT_CU(cuStreamDestroy(s));
  EXPECT_EQ(t.next.load(), 3);
  ASSERT_CU(cuMemFree(d));
  ASSERT_CU(cuMemFreeHost(pinned));
}

struct Seen {
  std::atomic<int> calls{0};
  CUresult status = CUresult(-1);
  CUstream stream = nullptr;
};

void CUDAAPI Note(CUstream stream, CUresult status, void* data) {
  auto* s = static_cast<Seen*>(data);
  s->status = status;
  s->stream = stream;
  s->calls.fetch_add(1);
}

// Callbacks hear how the stream's work went: success on the null stream; after a kernel that
// faults, the fault's code (or the call itself refuses when the fault was already known).
TEST_F(RuntimeHostFunctions, CallbacksGetTheStreamsStatus) {
  Seen ok;
  ASSERT_CU(cuStreamAddCallback(nullptr, Note, &ok, 0));
  ASSERT_CU(cuCtxSynchronize());
  EXPECT_EQ(ok.calls.load(), 1);
  EXPECT_EQ(ok.status, CUDA_SUCCESS);
  EXPECT_EQ(ok.stream, nullptr);
  EXPECT_EQ(cuStreamAddCallback(nullptr, Note, &ok, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuStreamAddCallback(nullptr, nullptr, &ok, 0), CUDA_ERROR_INVALID_VALUE);

  Seen faulted;
  uint64_t bad = 0x2000000000;
  void* params[] = {&bad};
  ASSERT_CU(cuLaunchKernel(poke_, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
  const CUresult queued = cuStreamAddCallback(nullptr, Note, &faulted, 0);
  EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  if (queued == CUDA_SUCCESS) {
    // The fault ends the synchronize at once; the callback follows on the library's thread.
    for (int i = 0; i < 1000 && faulted.calls.load() == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(faulted.calls.load(), 1);
    EXPECT_EQ(faulted.status, CUDA_ERROR_ILLEGAL_ADDRESS);
  } else {
    EXPECT_EQ(queued, CUDA_ERROR_ILLEGAL_ADDRESS);
    EXPECT_EQ(faulted.calls.load(), 0);
  }
  EXPECT_CU(cuCtxDestroy(ctx_));
  ctx_ = nullptr;
  EXPECT_LE(faulted.calls.load(), 1);
}

}  // namespace

// ---- cuLaunchKernelEx ----

namespace {

using RuntimeLaunchEx = RuntimeExtras;

TEST_F(RuntimeLaunchEx, TuningAttributesLaunchAndTheOthersAreRefused) {
  constexpr uint32_t kN = 1024;
  std::vector<uint32_t> a(kN), b(kN), c(kN, 0);
  for (uint32_t i = 0; i < kN; ++i) a[i] = i, b[i] = 5 * i;
  CUdeviceptr da, db, dc;
  for (CUdeviceptr* p : {&da, &db, &dc}) ASSERT_CU(cuMemAlloc(p, kN * 4));
  ASSERT_CU(cuMemcpyHtoD(da, a.data(), kN * 4));
  ASSERT_CU(cuMemcpyHtoD(db, b.data(), kN * 4));
  ASSERT_CU(cuMemsetD32(dc, 0, kN));
  uint32_t n = kN;
  void* args[] = {&da, &db, &dc, &n};
  CUlaunchAttribute attrs[3] = {};
  attrs[0].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
  attrs[0].value.priority = -1;
  attrs[1].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attrs[1].value.clusterDim = {1, 1, 1};
  attrs[2].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
  attrs[2].value.cooperative = 0;
  CUlaunchConfig config{kN / 128, 1, 1, 128, 1, 1, 0, nullptr, attrs, 3};
  ASSERT_CU(cuLaunchKernelEx(&config, vadd_, args, nullptr));
  ASSERT_CU(cuCtxSynchronize());
  ASSERT_CU(cuMemcpyDtoH(c.data(), dc, kN * 4));
  for (uint32_t i = 0; i < kN; ++i) ASSERT_EQ(c[i], 6 * i) << i;

  // What would change the launch's meaning is refused, and nothing runs.
  ASSERT_CU(cuMemsetD32(dc, 0, kN));
  attrs[2].value.cooperative = 1;
  EXPECT_EQ(cuLaunchKernelEx(&config, vadd_, args, nullptr), CUDA_ERROR_NOT_SUPPORTED);
  attrs[2].value.cooperative = 0;
  attrs[1].value.clusterDim = {2, 1, 1};
  EXPECT_EQ(cuLaunchKernelEx(&config, vadd_, args, nullptr), CUDA_ERROR_NOT_SUPPORTED);
  attrs[1].id = CUlaunchAttributeID(99);
  EXPECT_EQ(cuLaunchKernelEx(&config, vadd_, args, nullptr), CUDA_ERROR_INVALID_VALUE);
  config.attrs = nullptr;
  EXPECT_EQ(cuLaunchKernelEx(&config, vadd_, args, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLaunchKernelEx(nullptr, vadd_, args, nullptr), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuCtxSynchronize());
  ASSERT_CU(cuMemcpyDtoH(c.data(), dc, kN * 4));
  for (uint32_t i = 0; i < kN; ++i) ASSERT_EQ(c[i], 0u) << i;
  // No attributes at all: a plain launch.
  config.numAttrs = 0;
  ASSERT_CU(cuLaunchKernelEx(&config, vadd_, args, nullptr));
  ASSERT_CU(cuCtxSynchronize());
  ASSERT_CU(cuMemcpyDtoH(c.data(), dc, kN * 4));
  EXPECT_EQ(c[7], 42u);
  for (CUdeviceptr p : {da, db, dc}) EXPECT_CU(cuMemFree(p));
}

}  // namespace

// ---- stream-ordered allocation and memory pools ----

namespace {

using RuntimePools = RuntimeExtras;

uint64_t PoolAttr(CUmemoryPool pool, CUmemPool_attribute attr) {
  cuuint64_t v = ~0ull;
  EXPECT_EQ(cuMemPoolGetAttribute(pool, attr, &v), CUDA_SUCCESS) << attr;
  return v;
}

TEST_F(RuntimePools, AllocFreeReuseAndRelease) {
  int supported = 0;
  ASSERT_CU(cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, dev_));
  EXPECT_EQ(supported, 1);
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, 0));
  CUmemoryPool pool, current;
  ASSERT_CU(cuDeviceGetDefaultMemPool(&pool, dev_));
  ASSERT_CU(cuDeviceGetMemPool(&current, dev_));
  EXPECT_EQ(pool, current);
  constexpr size_t kBytes = 64 << 10;
  CUdeviceptr a;
  ASSERT_CU(cuMemAllocAsync(&a, kBytes, s));
  ASSERT_CU(cuMemsetD32Async(a, 0x5a5a5a5a, kBytes / 4, s));
  std::vector<uint32_t> host(kBytes / 4);
  ASSERT_CU(cuMemcpyDtoHAsync(host.data(), a, kBytes, s));
  EXPECT_EQ(PoolAttr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), kBytes);
  ASSERT_CU(cuMemFreeAsync(a, s));
  EXPECT_EQ(cuMemFreeAsync(a, s), CUDA_ERROR_INVALID_VALUE);  // freed already
  EXPECT_EQ(PoolAttr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0u);
  EXPECT_EQ(PoolAttr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), kBytes);
  ASSERT_CU(cuStreamSynchronize(s));
  EXPECT_EQ(host[100], 0x5a5a5a5au);
  // Release threshold 0 (the default): the synchronization gave the memory back.
  EXPECT_EQ(PoolAttr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0u);
  EXPECT_EQ(PoolAttr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), kBytes);

  // With a threshold the pool keeps it, and the next allocation of the size reuses it.
  cuuint64_t keep = ~0ull;
  ASSERT_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
  ASSERT_CU(cuMemAllocAsync(&a, kBytes, s));
  ASSERT_CU(cuMemFreeAsync(a, s));
  ASSERT_CU(cuStreamSynchronize(s));
  EXPECT_EQ(PoolAttr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), kBytes);
  CUdeviceptr b;
  ASSERT_CU(cuMemAllocAsync(&b, kBytes, s));
  EXPECT_EQ(b, a);
  // On the same stream a freed block is reused at once (stream order), no synchronization needed.
  ASSERT_CU(cuMemsetD32Async(b, 1, kBytes / 4, s));
  ASSERT_CU(cuMemFreeAsync(b, s));
  CUdeviceptr c;
  ASSERT_CU(cuMemAllocAsync(&c, kBytes, s));
  EXPECT_EQ(c, a);
  // cuMemFree frees a stream-ordered allocation too.
  ASSERT_CU(cuStreamSynchronize(s));
  ASSERT_CU(cuMemFree(c));
  EXPECT_EQ(PoolAttr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0u);
  ASSERT_CU(cuMemPoolTrimTo(pool, 0));
  EXPECT_EQ(PoolAttr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0u);

  // Refusals change nothing.
  CUdeviceptr plain;
  ASSERT_CU(cuMemAlloc(&plain, 4096));
  EXPECT_EQ(cuMemFreeAsync(plain, s), CUDA_ERROR_INVALID_VALUE);  // not stream-ordered
  ASSERT_CU(cuMemFree(plain));
  EXPECT_EQ(cuMemAllocAsync(&a, 0, s), CUDA_ERROR_INVALID_VALUE);
  cuuint64_t v = 5;
  EXPECT_EQ(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &v),
            CUDA_ERROR_INVALID_VALUE);
  v = 0;
  ASSERT_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &v));
  EXPECT_EQ(PoolAttr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 0u);
  // The reuse flags are ints (a 4-byte value: reading 8 would run past it).
  int follow = 0;
  ASSERT_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES, &follow));
  follow = 7;
  ASSERT_CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES, &follow));
  EXPECT_EQ(follow, 0);
  EXPECT_EQ(cuMemPoolDestroy(pool), CUDA_ERROR_INVALID_VALUE);  // the default pool stays
  ASSERT_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  EXPECT_EQ(cuMemAllocAsync(&a, kBytes, s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CUgraph g;
  EXPECT_EQ(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  ASSERT_CU(cuStreamDestroy(s));
}

TEST_F(RuntimePools, PoolsOfTheirOwn) {
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  CUmemoryPool pool;
  ASSERT_CU(cuMemPoolCreate(&pool, &props));
  CUdeviceptr a, b;
  ASSERT_CU(cuMemAllocFromPoolAsync(&a, 1000, pool, nullptr));
  ASSERT_CU(cuMemsetD8Async(a, 7, 1000, nullptr));
  uint8_t byte = 0;
  ASSERT_CU(cuMemcpyDtoH(&byte, a + 999, 1));
  EXPECT_EQ(byte, 7);
  ASSERT_CU(cuDeviceSetMemPool(dev_, pool));
  ASSERT_CU(cuMemAllocAsync(&b, 2000, nullptr));  // from the current pool: ours
  EXPECT_GE(PoolAttr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 3000u);
  CUmemAccess_flags flags;
  CUmemLocation here{CU_MEM_LOCATION_TYPE_DEVICE, 0};
  ASSERT_CU(cuMemPoolGetAccess(&flags, pool, &here));
  EXPECT_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  ASSERT_CU(cuMemFreeAsync(a, nullptr));
  ASSERT_CU(cuMemFreeAsync(b, nullptr));
  ASSERT_CU(cuMemPoolDestroy(pool));
  EXPECT_EQ(cuMemAllocFromPoolAsync(&a, 16, pool, nullptr), CUDA_ERROR_INVALID_VALUE);
  CUmemoryPool current;
  ASSERT_CU(cuDeviceGetMemPool(&current, dev_));
  CUmemoryPool default_pool;
  ASSERT_CU(cuDeviceGetDefaultMemPool(&default_pool, dev_));
  EXPECT_EQ(current, default_pool);  // the destroyed pool is no one's current pool
  props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  EXPECT_EQ(cuMemPoolCreate(&pool, &props), CUDA_ERROR_NOT_SUPPORTED);
  props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
  props.location.id = 3;
  EXPECT_EQ(cuMemPoolCreate(&pool, &props), CUDA_ERROR_INVALID_DEVICE);
}

}  // namespace

// ---- 16-bit memsets, unified copies, the per-thread stream's spellings ----

// NVIDIA's header names these only under CUDA_API_PER_THREAD_DEFAULT_STREAM; they are exports.
extern "C" CUresult cuMemsetD8_v2_ptds(CUdeviceptr dst, unsigned char v, size_t n);
extern "C" CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n);
extern "C" CUresult cuMemcpyDtoH_v2_ptds(void* dst, CUdeviceptr src, size_t n);

namespace {

using RuntimeMoreCopies = RuntimeExtras;

TEST_F(RuntimeMoreCopies, SixteenBitMemsetsFillExactlyTheirElements) {
  constexpr size_t kBytes = 4096;
  CUdeviceptr d;
  ASSERT_CU(cuMemAlloc(&d, kBytes));
  ASSERT_CU(cuMemsetD8(d, 0xee, kBytes));
  // 7 elements at a 2-byte (not 4-byte) aligned address.
  ASSERT_CU(cuMemsetD16(d + 2, 0xbeef, 7));
  std::vector<uint16_t> h(kBytes / 2);
  ASSERT_CU(cuMemcpyDtoH(h.data(), d, kBytes));
  EXPECT_EQ(h[0], 0xeeee);
  for (int i = 1; i <= 7; ++i) EXPECT_EQ(h[i], 0xbeef) << i;
  EXPECT_EQ(h[8], 0xeeee);
  // 2D: 3 rows of 5 elements, 64 bytes apart, on a stream.
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, 0));
  ASSERT_CU(cuMemsetD2D16Async(d + 1024, 64, 0x1234, 5, 3, s));
  ASSERT_CU(cuMemsetD16Async(d + 2048, 0x7777, 3, s));
  ASSERT_CU(cuStreamSynchronize(s));
  ASSERT_CU(cuMemcpyDtoH(h.data(), d, kBytes));
  for (int row = 0; row < 3; ++row) {
    for (int i = 0; i < 32; ++i) {
      EXPECT_EQ(h[512 + row * 32 + i], i < 5 ? 0x1234 : 0xeeee) << row << " " << i;
    }
  }
  EXPECT_EQ(h[1024 + 2], 0x7777);
  EXPECT_EQ(h[1024 + 3], 0xeeee);
  // Refused, and nothing written: an odd address, a range past the allocation.
  EXPECT_EQ(cuMemsetD16(d + 1, 0, 4), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemsetD16(d, 0, kBytes), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemsetD2D16(d + 1, 64, 0, 4, 2), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuMemcpyDtoH(h.data(), d, 64));
  EXPECT_EQ(h[0], 0xeeee);
  ASSERT_CU(cuStreamDestroy(s));
  ASSERT_CU(cuMemFree(d));
}

TEST_F(RuntimeMoreCopies, UnifiedCopiesTellHostFromDeviceByThePointer) {
  constexpr size_t kN = 1000;
  std::vector<uint8_t> src(kN), back(kN, 0);
  for (size_t i = 0; i < kN; ++i) src[i] = uint8_t(i * 7);
  CUdeviceptr a, b;
  ASSERT_CU(cuMemAlloc(&a, kN));
  ASSERT_CU(cuMemAlloc(&b, kN));
  ASSERT_CU(cuMemcpy(a, reinterpret_cast<CUdeviceptr>(src.data()), kN));   // host to device
  ASSERT_CU(cuMemcpyAsync(b, a, kN, nullptr));                             // device to device
  ASSERT_CU(cuMemcpy(reinterpret_cast<CUdeviceptr>(back.data()), b, kN));  // device to host
  EXPECT_EQ(back, src);
  // The per-thread default stream's spellings of the usual calls.
  std::fill(back.begin(), back.end(), 0);
  ASSERT_CU(cuMemsetD8_v2_ptds(a, 9, kN));
  ASSERT_CU(cuMemcpyDtoD_v2_ptds(b, a, kN));
  ASSERT_CU(cuMemcpyDtoH_v2_ptds(back.data(), b, kN));
  EXPECT_EQ(back[kN - 1], 9);
  ASSERT_CU(cuMemFree(a));
  ASSERT_CU(cuMemFree(b));
}

// ---- peer access, one device ----

using RuntimePeer = RuntimeExtras;

TEST_F(RuntimePeer, OneDeviceIsNoPeerOfItselfAndContextsGetNoPeerAccess) {
  int can = -1;
  ASSERT_CU(cuDeviceCanAccessPeer(&can, dev_, dev_));
  EXPECT_EQ(can, 0);
  EXPECT_EQ(cuDeviceCanAccessPeer(&can, dev_, 7), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cuDeviceCanAccessPeer(nullptr, dev_, dev_), CUDA_ERROR_INVALID_VALUE);
  int value = -1;
  EXPECT_EQ(cuDeviceGetP2PAttribute(&value, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, dev_, dev_),
            CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(value, -1);

  CUcontext other = nullptr;
  ASSERT_CU(cuCtxCreate(&other, nullptr, 0, dev_));  // now current
  ASSERT_CU(cuCtxSetCurrent(ctx_));
  EXPECT_EQ(cuCtxEnablePeerAccess(other, 0), CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
  EXPECT_EQ(cuCtxEnablePeerAccess(other, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuCtxEnablePeerAccess(ctx_, 0), CUDA_ERROR_INVALID_CONTEXT);  // itself
  EXPECT_EQ(cuCtxEnablePeerAccess(reinterpret_cast<CUcontext>(&can), 0),
            CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cuCtxDisablePeerAccess(other), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
  EXPECT_EQ(cuCtxDisablePeerAccess(reinterpret_cast<CUcontext>(&can)), CUDA_ERROR_INVALID_CONTEXT);
  ASSERT_CU(cuCtxDestroy(other));
}

TEST_F(RuntimePeer, CopiesWithinAContextAndBetweenTwo) {
  constexpr size_t kN = (5 << 20) + 123;  // more than one 4 MiB bounce chunk
  std::vector<uint8_t> src(kN), back(kN, 0);
  for (size_t i = 0; i < kN; ++i) src[i] = uint8_t(i * 31 + i / 4096);
  CUdeviceptr a, b;
  ASSERT_CU(cuMemAlloc(&a, kN));
  ASSERT_CU(cuMemAlloc(&b, kN));
  ASSERT_CU(cuMemcpyHtoD(a, src.data(), kN));
  // Within one context: a device-to-device copy, synchronous or on a stream.
  ASSERT_CU(cuMemcpyPeer(b, ctx_, a, ctx_, kN));
  ASSERT_CU(cuMemcpyDtoH(back.data(), b, kN));
  EXPECT_EQ(back, src);
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cuMemsetD8(b, 0, kN));
  ASSERT_CU(cuMemcpyPeerAsync(b + 1, ctx_, a, ctx_, 100, s));
  ASSERT_CU(cuStreamSynchronize(s));
  ASSERT_CU(cuMemcpyDtoH(back.data(), b, 101));
  EXPECT_EQ(back[0], 0);
  EXPECT_EQ(std::memcmp(back.data() + 1, src.data(), 100), 0);

  // Into a second context's memory (its own address space) and back out of it.
  CUcontext other = nullptr;
  ASSERT_CU(cuCtxCreate(&other, nullptr, 0, dev_));
  CUdeviceptr c;
  ASSERT_CU(cuMemAlloc(&c, kN));
  ASSERT_CU(cuCtxSetCurrent(ctx_));
  ASSERT_CU(cuMemcpyPeer(c, other, a, ctx_, kN));
  ASSERT_CU(cuMemsetD8(a, 0, kN));
  ASSERT_CU(cuMemcpyPeerAsync(a, ctx_, c, other, kN, s));
  ASSERT_CU(cuStreamSynchronize(s));
  std::fill(back.begin(), back.end(), 0);
  ASSERT_CU(cuMemcpyDtoH(back.data(), a, kN));
  EXPECT_EQ(back, src);
  // Refused whole: a range past either allocation, a dead context; nothing copied.
  ASSERT_CU(cuMemsetD8(a, 0, kN));
  EXPECT_EQ(cuMemcpyPeer(a, ctx_, c + 1, other, kN), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpyPeer(a, reinterpret_cast<CUcontext>(&back), c, other, 8),
            CUDA_ERROR_INVALID_CONTEXT);
  ASSERT_CU(cuMemcpyDtoH(back.data(), a, 64));
  EXPECT_EQ(back[0], 0);
  EXPECT_EQ(back[63], 0);
  ASSERT_CU(cuCtxDestroy(other));
  ASSERT_CU(cuCtxSetCurrent(ctx_));
  EXPECT_EQ(cuMemcpyPeer(a, ctx_, b, other, 8), CUDA_ERROR_INVALID_CONTEXT);
  // A primary context that was reset comes back empty: a copy out of it is refused, not a crash.
  CUcontext primary = nullptr;
  ASSERT_CU(cuDevicePrimaryCtxRetain(&primary, dev_));
  ASSERT_CU(cuDevicePrimaryCtxReset(dev_));
  EXPECT_EQ(cuMemcpyPeer(a, ctx_, b, primary, 8), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuCtxSetCurrent(ctx_));
  ASSERT_CU(cuDevicePrimaryCtxRelease(dev_));
  ASSERT_CU(cuStreamDestroy(s));
  ASSERT_CU(cuMemFree(a));
  ASSERT_CU(cuMemFree(b));
}

// ---- stream priorities and queries, context ids, kernel names ----

using RuntimeStreamQueries = RuntimeExtras;

TEST_F(RuntimeStreamQueries, PrioritiesFlagsContextsIdsAndDevices) {
  int least = -9, greatest = -9;
  ASSERT_CU(cuCtxGetStreamPriorityRange(&least, &greatest));
  EXPECT_EQ(least, 0);  // no priorities on this device: CUDA's [0, 0]
  EXPECT_EQ(greatest, 0);
  ASSERT_CU(cuCtxGetStreamPriorityRange(nullptr, &greatest));

  CUstream a, b;
  ASSERT_CU(cuStreamCreateWithPriority(&a, CU_STREAM_NON_BLOCKING, -5));  // clamped to 0
  ASSERT_CU(cuStreamCreate(&b, CU_STREAM_DEFAULT));
  int priority = -1;
  ASSERT_CU(cuStreamGetPriority(a, &priority));
  EXPECT_EQ(priority, 0);
  ASSERT_CU(cuStreamGetPriority(nullptr, &priority));
  EXPECT_EQ(priority, 0);
  unsigned flags = 99;
  ASSERT_CU(cuStreamGetFlags(a, &flags));
  EXPECT_EQ(flags, unsigned(CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cuStreamGetFlags(b, &flags));
  EXPECT_EQ(flags, unsigned(CU_STREAM_DEFAULT));
  ASSERT_CU(cuStreamGetFlags(CU_STREAM_LEGACY, &flags));
  EXPECT_EQ(flags, unsigned(CU_STREAM_DEFAULT));

  CUcontext c = nullptr;
  ASSERT_CU(cuStreamGetCtx(a, &c));
  EXPECT_EQ(c, ctx_);
  ASSERT_CU(cuStreamGetCtx(nullptr, &c));
  EXPECT_EQ(c, ctx_);
  CUgreenCtx green = reinterpret_cast<CUgreenCtx>(&c);
  ASSERT_CU(cuStreamGetCtx_v2(b, &c, &green));
  EXPECT_EQ(c, ctx_);
  EXPECT_EQ(green, nullptr);
  CUdevice d = -1;
  ASSERT_CU(cuStreamGetDevice(a, &d));
  EXPECT_EQ(d, dev_);

  unsigned long long ia = 0, ia2 = 0, ib = 0, inull = 0, ilegacy = 0;
  ASSERT_CU(cuStreamGetId(a, &ia));
  ASSERT_CU(cuStreamGetId(a, &ia2));
  ASSERT_CU(cuStreamGetId(b, &ib));
  ASSERT_CU(cuStreamGetId(nullptr, &inull));
  ASSERT_CU(cuStreamGetId(CU_STREAM_LEGACY, &ilegacy));
  EXPECT_NE(ia, 0u);
  EXPECT_EQ(ia, ia2);
  EXPECT_NE(ia, ib);
  EXPECT_NE(inull, ia);
  EXPECT_EQ(inull, ilegacy);  // the null stream is the legacy stream

  unsigned long long mine = 0, theirs = 0, current = 0;
  ASSERT_CU(cuCtxGetId(ctx_, &mine));
  ASSERT_CU(cuCtxGetId(nullptr, &current));
  EXPECT_EQ(mine, current);
  CUcontext other = nullptr;
  ASSERT_CU(cuCtxCreate(&other, nullptr, 0, dev_));
  ASSERT_CU(cuCtxGetId(other, &theirs));
  EXPECT_NE(mine, theirs);
  ASSERT_CU(cuCtxDestroy(other));
  EXPECT_EQ(cuCtxGetId(other, &theirs), CUDA_ERROR_INVALID_CONTEXT);
  ASSERT_CU(cuCtxSetCurrent(ctx_));

  // Bad arguments and dead handles.
  EXPECT_EQ(cuStreamGetFlags(a, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuStreamGetId(a, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuStreamGetCtx_v2(a, &c, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuCtxGetId(ctx_, nullptr), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuStreamDestroy(a));
  EXPECT_EQ(cuStreamGetPriority(a, &priority), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuStreamGetId(a, &ia), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuStreamCreateWithPriority(&a, 0x40, 0), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuStreamDestroy(b));

  const char* name = nullptr;
  ASSERT_CU(cuFuncGetName(&name, vadd_));
  EXPECT_STREQ(name, "vadd");
  EXPECT_EQ(cuFuncGetName(nullptr, vadd_), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuFuncGetName(&name, reinterpret_cast<CUfunction>(&name)), CUDA_ERROR_INVALID_HANDLE);
}

// The PCI address round trip in CUDA's forms, and the shared memory bank setting (the hardware's).
TEST_F(RuntimeStreamQueries, PciAddressAndSharedMemoryConfig) {
  char id[32];
  ASSERT_CU(cuDeviceGetPCIBusId(id, sizeof id, dev_));
  EXPECT_EQ(std::strlen(id), 12u);
  int domain = -1, bus = -1, device = -1;
  ASSERT_CU(cuDeviceGetAttribute(&domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev_));
  ASSERT_CU(cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev_));
  ASSERT_CU(cuDeviceGetAttribute(&device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev_));
  char want[32];
  std::snprintf(want, sizeof want, "%04x:%02x:%02x.0", domain, bus, device);
  EXPECT_STREQ(id, want);
  CUdevice found = -1;
  ASSERT_CU(cuDeviceGetByPCIBusId(&found, id));
  EXPECT_EQ(found, dev_);
  char shorter[32];
  std::snprintf(shorter, sizeof shorter, "%02x:%02x.0", bus, device);  // bus:device.function
  found = -1;
  ASSERT_CU(cuDeviceGetByPCIBusId(&found, shorter));
  EXPECT_EQ(found, dev_);
  char other[32];
  std::snprintf(other, sizeof other, "%04x:%02x:%02x.0", domain, (bus + 1) & 0xff, device);
  EXPECT_EQ(cuDeviceGetByPCIBusId(&found, other), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cuDeviceGetByPCIBusId(&found, "not a bus id"), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuDeviceGetByPCIBusId(&found, "0000:00:05.0 "), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuDeviceGetByPCIBusId(nullptr, id), CUDA_ERROR_INVALID_VALUE);
  char cut[5];
  ASSERT_CU(cuDeviceGetPCIBusId(cut, sizeof cut, dev_));
  EXPECT_EQ(std::string(cut), std::string(want).substr(0, 4));
  EXPECT_EQ(cuDeviceGetPCIBusId(id, sizeof id, 3), CUDA_ERROR_INVALID_DEVICE);

  CUsharedconfig config = CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE;
  ASSERT_CU(cuCtxGetSharedMemConfig(&config));
  EXPECT_EQ(config, CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE);
  ASSERT_CU(cuCtxSetSharedMemConfig(CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE));
  EXPECT_EQ(cuCtxSetSharedMemConfig(CUsharedconfig(3)), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuCtxGetSharedMemConfig(nullptr), CUDA_ERROR_INVALID_VALUE);
}

// cuEventRecordWithFlags: the default and the external flag record as cuEventRecord does outside a
// capture; the external flag in a capture is refused (no external event nodes), a bad flag too.
TEST_F(RuntimeStreamQueries, EventRecordWithFlags) {
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUevent a, b;
  ASSERT_CU(cuEventCreate(&a, CU_EVENT_DEFAULT));
  ASSERT_CU(cuEventCreate(&b, CU_EVENT_DEFAULT));
  CUdeviceptr d;
  ASSERT_CU(cuMemAlloc(&d, 1 << 20));
  ASSERT_CU(cuEventRecordWithFlags(a, s, CU_EVENT_RECORD_DEFAULT));
  ASSERT_CU(cuMemsetD8Async(d, 7, 1 << 20, s));
  ASSERT_CU(cuEventRecordWithFlags(b, s, CU_EVENT_RECORD_EXTERNAL));
  ASSERT_CU(cuEventSynchronize(b));
  float ms = -1;
  ASSERT_CU(cuEventElapsedTime(&ms, a, b));
  EXPECT_GE(ms, 0.0f);
  uint8_t last = 0;
  ASSERT_CU(cuMemcpyDtoH(&last, d + (1 << 20) - 1, 1));
  EXPECT_EQ(last, 7);
  EXPECT_EQ(cuEventRecordWithFlags(a, s, 2), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  EXPECT_EQ(cuEventRecordWithFlags(a, s, CU_EVENT_RECORD_EXTERNAL), CUDA_ERROR_NOT_SUPPORTED);
  CUgraph graph = nullptr;
  ASSERT_CU(cuStreamEndCapture(s, &graph));
  if (graph != nullptr) {
    ASSERT_CU(cuGraphDestroy(graph));
  }
  ASSERT_CU(cuEventDestroy(a));
  ASSERT_CU(cuEventDestroy(b));
  ASSERT_CU(cuStreamDestroy(s));
  ASSERT_CU(cuMemFree(d));
}

// cuMemHostGetFlags: the flags each pinned allocation was made with, at any address inside it;
// memory that is not pinned by cuMemHostAlloc/cuMemAllocHost is refused.
TEST_F(RuntimeStreamQueries, HostAllocationFlags) {
  void *plain = nullptr, *mapped = nullptr;
  ASSERT_CU(cuMemAllocHost(&plain, 8192));
  ASSERT_CU(cuMemHostAlloc(&mapped, 8192, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  unsigned flags = 99;
  ASSERT_CU(cuMemHostGetFlags(&flags, plain));
  EXPECT_EQ(flags, 0u);
  ASSERT_CU(cuMemHostGetFlags(&flags, static_cast<char*>(mapped) + 5000));
  EXPECT_EQ(flags, unsigned(CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  int stack = 0;
  EXPECT_EQ(cuMemHostGetFlags(&flags, &stack), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemHostGetFlags(nullptr, plain), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuMemFreeHost(mapped));
  EXPECT_EQ(cuMemHostGetFlags(&flags, mapped), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuMemFreeHost(plain));
}

// cuMemcpy3DPeer: a box from one pitched allocation into another, within a context and between two
// (staged slice by slice); a box past either allocation is refused and nothing moves.
TEST_F(RuntimePeer, ThreeDimensionalCopiesBetweenContexts) {
  constexpr size_t kW = 40, kH = 6, kD = 4;
  CUdeviceptr src;
  size_t spitch = 0;
  ASSERT_CU(cuMemAllocPitch(&src, &spitch, kW + 8, (kH + 1) * (kD + 1), 4));
  std::vector<uint8_t> image(spitch * (kH + 1) * (kD + 1));
  for (size_t i = 0; i < image.size(); ++i) image[i] = uint8_t(i * 7 + i / 251);
  ASSERT_CU(cuMemcpyHtoD(src, image.data(), image.size()));
  CUcontext other = nullptr;
  ASSERT_CU(cuCtxCreate(&other, nullptr, 0, dev_));
  CUdeviceptr dst;
  size_t dpitch = 0;
  ASSERT_CU(cuMemAllocPitch(&dst, &dpitch, kW, kH * kD, 4));
  ASSERT_CU(cuMemsetD8(dst, 0, dpitch * kH * kD));
  ASSERT_CU(cuCtxSetCurrent(ctx_));
  CUDA_MEMCPY3D_PEER p{};
  p.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  p.srcDevice = src;
  p.srcContext = ctx_;
  p.srcPitch = spitch;
  p.srcHeight = kH + 1;
  p.srcXInBytes = 3;  // a box at (3, 1, 1) of the source
  p.srcY = 1;
  p.srcZ = 1;
  p.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  p.dstDevice = dst;
  p.dstContext = other;
  p.dstPitch = dpitch;
  p.dstHeight = kH;
  p.WidthInBytes = kW;
  p.Height = kH;
  p.Depth = kD;
  ASSERT_CU(cuMemcpy3DPeer(&p));
  std::vector<uint8_t> back(dpitch * kH * kD);
  ASSERT_CU(cuCtxSetCurrent(other));
  ASSERT_CU(cuMemcpyDtoH(back.data(), dst, back.size()));
  size_t wrong = 0;
  for (size_t z = 0; z < kD; ++z) {
    for (size_t y = 0; y < kH; ++y) {
      for (size_t x = 0; x < kW; ++x) {
        const uint8_t want = image[((z + 1) * (kH + 1) + y + 1) * spitch + x + 3];
        wrong += back[(z * kH + y) * dpitch + x] != want;
      }
    }
  }
  EXPECT_EQ(wrong, 0u);
  // One slice deeper than the destination holds: refused, the destination unchanged.
  ASSERT_CU(cuMemsetD8(dst, 0x5a, dpitch * kH * kD));
  ASSERT_CU(cuCtxSetCurrent(ctx_));
  CUDA_MEMCPY3D_PEER deep = p;
  deep.dstZ = 1;
  EXPECT_EQ(cuMemcpy3DPeer(&deep), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuCtxSetCurrent(other));
  ASSERT_CU(cuMemcpyDtoH(back.data(), dst, back.size()));
  EXPECT_EQ(std::count(back.begin(), back.end(), 0x5a), std::ptrdiff_t(back.size()));
  // Within one context, on a stream.
  ASSERT_CU(cuCtxSetCurrent(ctx_));
  CUdeviceptr same;
  size_t same_pitch = 0;
  ASSERT_CU(cuMemAllocPitch(&same, &same_pitch, kW, kH * kD, 4));
  CUDA_MEMCPY3D_PEER q = p;
  q.dstDevice = same;
  q.dstContext = ctx_;
  q.dstPitch = same_pitch;
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cuMemcpy3DPeerAsync(&q, s));
  ASSERT_CU(cuStreamSynchronize(s));
  std::vector<uint8_t> same_back(same_pitch * kH * kD);
  ASSERT_CU(cuMemcpyDtoH(same_back.data(), same, same_back.size()));
  EXPECT_EQ(same_back[0], image[(1 * (kH + 1) + 1) * spitch + 3]);
  EXPECT_EQ(cuMemcpy3DPeer(nullptr), CUDA_ERROR_INVALID_VALUE);
  q.dstContext = reinterpret_cast<CUcontext>(&q);
  EXPECT_EQ(cuMemcpy3DPeer(&q), CUDA_ERROR_INVALID_CONTEXT);
  ASSERT_CU(cuStreamDestroy(s));
  ASSERT_CU(cuMemFree(same));
  ASSERT_CU(cuMemFree(src));
  ASSERT_CU(cuCtxDestroy(other));
  ASSERT_CU(cuCtxSetCurrent(ctx_));
}

// ---- CUDA arrays ----

using RuntimeArrays = RuntimeExtras;

TEST_F(RuntimeArrays, TwoDimensionalArraysTakeCopiesAtOffsetsAndDescribeThemselves) {
  CUDA_ARRAY_DESCRIPTOR d{100, 30, CU_AD_FORMAT_FLOAT, 1};
  CUarray a = nullptr;
  ASSERT_CU(cuArrayCreate(&a, &d));
  CUDA_ARRAY_DESCRIPTOR got{};
  ASSERT_CU(cuArrayGetDescriptor(&got, a));
  EXPECT_EQ(got.Width, 100u);
  EXPECT_EQ(got.Height, 30u);
  EXPECT_EQ(got.Format, CU_AD_FORMAT_FLOAT);
  EXPECT_EQ(got.NumChannels, 1u);
  // A 40 x 10 window of host floats into the array at (8 floats, row 2), then the whole array
  // back out.
  std::vector<float> window(40 * 10);
  for (size_t i = 0; i < window.size(); ++i) window[i] = float(i) * 0.5f + 1;
  std::vector<float> zeros(100 * 30, 0.0f);
  CUDA_MEMCPY2D in{};
  in.srcMemoryType = CU_MEMORYTYPE_HOST;
  in.srcHost = zeros.data();
  in.srcPitch = 400;
  in.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  in.dstArray = a;
  in.WidthInBytes = 400;
  in.Height = 30;
  ASSERT_CU(cuMemcpy2D(&in));
  in.srcHost = window.data();
  in.srcPitch = 160;
  in.dstXInBytes = 8 * sizeof(float);
  in.dstY = 2;
  in.WidthInBytes = 160;
  in.Height = 10;
  ASSERT_CU(cuMemcpy2D(&in));
  std::vector<float> all(100 * 30, -1.0f);
  CUDA_MEMCPY2D out{};
  out.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  out.srcArray = a;
  out.dstMemoryType = CU_MEMORYTYPE_HOST;
  out.dstHost = all.data();
  out.dstPitch = 400;
  out.WidthInBytes = 400;
  out.Height = 30;
  ASSERT_CU(cuMemcpy2D(&out));
  size_t wrong = 0;
  for (size_t y = 0; y < 30; ++y) {
    for (size_t x = 0; x < 100; ++x) {
      const bool inside = y >= 2 && y < 12 && x >= 8 && x < 48;
      const float want = inside ? window[(y - 2) * 40 + (x - 8)] : 0.0f;
      wrong += all[y * 100 + x] != want;
    }
  }
  EXPECT_EQ(wrong, 0u);
  // Past the array's rows or row width: refused.
  in.dstY = 21;
  EXPECT_EQ(cuMemcpy2D(&in), CUDA_ERROR_INVALID_VALUE);
  in.dstY = 0;
  in.dstXInBytes = 300;
  EXPECT_EQ(cuMemcpy2D(&in), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuArrayDestroy(a));
  EXPECT_EQ(cuArrayDestroy(a), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuArrayGetDescriptor(&got, a), CUDA_ERROR_INVALID_HANDLE);
  in.dstXInBytes = 0;
  EXPECT_EQ(cuMemcpy2D(&in), CUDA_ERROR_INVALID_VALUE);  // a destroyed array

  // What cannot be an array.
  CUDA_ARRAY_DESCRIPTOR bad{100, 30, CU_AD_FORMAT_FLOAT, 3};
  EXPECT_EQ(cuArrayCreate(&a, &bad), CUDA_ERROR_INVALID_VALUE);  // 3 channels
  bad = {0, 30, CU_AD_FORMAT_FLOAT, 1};
  EXPECT_EQ(cuArrayCreate(&a, &bad), CUDA_ERROR_INVALID_VALUE);
  bad = {8, 8, CUarray_format(0x7f), 1};
  EXPECT_EQ(cuArrayCreate(&a, &bad), CUDA_ERROR_INVALID_VALUE);
  CUDA_ARRAY3D_DESCRIPTOR cube{8, 8, 6, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_CUBEMAP};
  EXPECT_EQ(cuArray3DCreate(&a, &cube), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(cuArrayCreate(nullptr, &d), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(RuntimeArrays, ThreeDimensionalArraysTakeWholeBoxes) {
  constexpr size_t kW = 16, kH = 8, kD = 3, kElem = 4;  // uchar4
  CUDA_ARRAY3D_DESCRIPTOR d{kW, kH, kD, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0};
  CUarray a = nullptr;
  ASSERT_CU(cuArray3DCreate(&a, &d));
  CUDA_ARRAY3D_DESCRIPTOR got{};
  ASSERT_CU(cuArray3DGetDescriptor(&got, a));
  EXPECT_EQ(got.Depth, kD);
  EXPECT_EQ(got.NumChannels, 4u);
  std::vector<uint8_t> box(kW * kElem * kH * kD);
  for (size_t i = 0; i < box.size(); ++i) box[i] = uint8_t(i * 13 + i / 512);
  CUDA_MEMCPY3D in{};
  in.srcMemoryType = CU_MEMORYTYPE_HOST;
  in.srcHost = box.data();
  in.srcPitch = kW * kElem;
  in.srcHeight = kH;
  in.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  in.dstArray = a;
  in.WidthInBytes = kW * kElem;
  in.Height = kH;
  in.Depth = kD;
  ASSERT_CU(cuMemcpy3D(&in));
  // Out into pitched device memory (array to device), then to the host.
  CUdeviceptr dev;
  size_t pitch = 0;
  ASSERT_CU(cuMemAllocPitch(&dev, &pitch, kW * kElem, kH * kD, 4));
  CUDA_MEMCPY3D out{};
  out.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  out.srcArray = a;
  out.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  out.dstDevice = dev;
  out.dstPitch = pitch;
  out.dstHeight = kH;
  out.WidthInBytes = kW * kElem;
  out.Height = kH;
  out.Depth = kD;
  ASSERT_CU(cuMemcpy3D(&out));
  std::vector<uint8_t> back(pitch * kH * kD);
  ASSERT_CU(cuMemcpyDtoH(back.data(), dev, back.size()));
  size_t wrong = 0;
  for (size_t z = 0; z < kD; ++z) {
    for (size_t y = 0; y < kH; ++y) {
      for (size_t x = 0; x < kW * kElem; ++x) {
        wrong += back[(z * kH + y) * pitch + x] != box[(z * kH + y) * kW * kElem + x];
      }
    }
  }
  EXPECT_EQ(wrong, 0u);
  // One slice too many: refused.
  out.srcZ = 1;
  EXPECT_EQ(cuMemcpy3D(&out), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuMemFree(dev));
  ASSERT_CU(cuArrayDestroy(a));
}

}  // namespace

// ---- cuGetProcAddress ----

namespace gpuvm_proc_address_test {

void* Exported(const char* name) { return ::dlsym(RTLD_DEFAULT, name); }

void* Find(const char* function, int version, cuuint64_t flags = CU_GET_PROC_ADDRESS_DEFAULT,
           CUdriverProcAddressQueryResult* status = nullptr) {
  void* f = reinterpret_cast<void*>(1);
  EXPECT_EQ(cuGetProcAddress_v2(function, &f, version, flags, status), CUDA_SUCCESS) << function;
  return f;
}

TEST(RuntimeProcAddress, EachAbiVersionIsItsOwnExport) {
  // cuInit is not needed first (CUDA allows the lookup before it).
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  EXPECT_EQ(Find("cuMemAlloc", 13000, 0, &status), Exported("cuMemAlloc_v2"));
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SUCCESS);
  EXPECT_EQ(Find("cuMemAlloc", 2000), Exported("cuMemAlloc"));
  // A function changed twice: each version its own symbol, the newest at or below the asked one.
  EXPECT_EQ(Find("cuCtxCreate", 3020), Exported("cuCtxCreate_v2"));
  EXPECT_EQ(Find("cuCtxCreate", 11040), Exported("cuCtxCreate_v3"));
  EXPECT_EQ(Find("cuCtxCreate", 12000), Exported("cuCtxCreate_v3"));
  EXPECT_EQ(Find("cuCtxCreate", 13000), Exported("cuCtxCreate_v4"));
  // What nvcc 13's static runtime asks for: the 12.2 form, then the 12.3 one.
  EXPECT_EQ(Find("cuGraphAddNode", 12020), Exported("cuGraphAddNode"));
  EXPECT_EQ(Find("cuGraphAddNode", 12030), Exported("cuGraphAddNode_v2"));
  // Per-thread default stream: the _ptds/_ptsz form where the function has one, else the same.
  EXPECT_EQ(Find("cuMemcpyHtoD", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
            Exported("cuMemcpyHtoD_v2_ptds"));
  EXPECT_EQ(Find("cuMemcpyHtoDAsync", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
            Exported("cuMemcpyHtoDAsync_v2_ptsz"));
  EXPECT_EQ(Find("cuMemcpyHtoD", 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM),
            Exported("cuMemcpyHtoD_v2"));
  EXPECT_EQ(Find("cuMemAlloc", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
            Exported("cuMemAlloc_v2"));
  for (const char* name :
       {"cuMemAlloc_v2", "cuCtxCreate_v4", "cuGraphAddNode", "cuMemcpyHtoD_v2_ptds",
        "cuMemcpyHtoDAsync_v2_ptsz", "cuMemcpyHtoD_v2"}) {
    EXPECT_NE(Exported(name), nullptr) << name;
  }
}

TEST(RuntimeProcAddress, TheFoundFunctionWorks) {
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  using DriverGetVersion = CUresult (*)(int*);
  auto get_version = reinterpret_cast<DriverGetVersion>(Find("cuDriverGetVersion", 13000));
  ASSERT_NE(get_version, nullptr);
  int version = 0;
  EXPECT_EQ(get_version(&version), CUDA_SUCCESS);
  EXPECT_EQ(version, 13000);
}

TEST(RuntimeProcAddress, UnknownAndTooNewAnswerNullWithAStatus) {
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
  EXPECT_EQ(Find("cuNoSuchFunction", 13000, 0, &status), nullptr);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  EXPECT_EQ(Find("cuMemAlloc_v2", 13000, 0, &status), nullptr) << "base names only";
  EXPECT_EQ(Find("cuGraphAddNode", 12010, 0, &status), nullptr);  // it came in 12.2
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  // Bad requests change nothing.
  void* f = &status;
  EXPECT_EQ(cuGetProcAddress_v2(nullptr, &f, 13000, 0, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGetProcAddress_v2("cuMemAlloc", nullptr, 13000, 0, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGetProcAddress_v2("cuMemAlloc", &f, 14000, 0, nullptr), CUDA_ERROR_INVALID_VALUE)
      << "newer than this driver";
  EXPECT_EQ(cuGetProcAddress_v2("cuMemAlloc", &f, 0, 0, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGetProcAddress_v2("cuMemAlloc", &f, 13000, 4, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(f, &status);
}

// Every row of the generated table names an export of this library, in lookup order.
TEST(RuntimeProcAddress, EveryTableRowIsAnExportAndTheTableIsSorted) {
  struct Row {
    const char* function;
    int version;
    const char* symbol;
  };
  static constexpr Row kRows[] = {
#define GPUVM_PROC_ADDRESS(function, version, symbol) {#function, version, #symbol},
#include "runtime/abi/libcuda_proc_address.def"
#undef GPUVM_PROC_ADDRESS
  };
  ASSERT_GT(std::size(kRows), 400u);
  for (size_t i = 0; i < std::size(kRows); ++i) {
    const Row& r = kRows[i];
    EXPECT_NE(Exported(r.symbol), nullptr) << r.symbol;
    if (i > 0) {
      const int order = std::strcmp(kRows[i - 1].function, r.function);
      EXPECT_TRUE(order < 0 || (order == 0 && kRows[i - 1].version < r.version)) << r.function;
    }
    // The newest row of a function is what a request at its version answers.
    if (i + 1 == std::size(kRows) || std::strcmp(kRows[i + 1].function, r.function) != 0) {
      EXPECT_EQ(Find(r.function, 13000), Exported(r.symbol)) << r.function;
    }
  }
}

}  // namespace gpuvm_proc_address_test
