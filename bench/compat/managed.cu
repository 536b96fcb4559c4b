// compat-managed: managed memory the way CUDA's introductions teach it — cudaMallocManaged arrays
// filled on the host, a SAXPY launched on them, cudaDeviceSynchronize, the result read on the host
// through the same pointers; a kernel that fills a managed struct the host then reads; the hints
// programs add for speed (cudaMemAdvise, cudaMemPrefetchAsync to the device and back to the host,
// cudaStreamAttachMemAsync on a stream of their own); cudaPointerGetAttributes on the pointers; the
// device attributes programs test before they use managed memory; cudaMemcpy with
// cudaMemcpyDefault between managed and ordinary memory; cudaFree; and `__managed__` variables —
// one with an initializer the host reads before any CUDA call, one the host sets and a kernel
// counts into, read back directly and with cudaMemcpyFromSymbol. The SAXPY's values are small
// integers held in floats, so every result is exact on any device; the host checks every element.
#include <cstdint>
#include <string>
#include <vector>

#include "bench/compat/compat.h"

namespace gpuvm::compat {
namespace {

__global__ void saxpy(int n, float a, const float* x, float* y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    y[i] = a * x[i] + y[i];
  }
}

// A result structure the kernel fills and the host reads, the way programs return a few numbers.
struct Summary {
  int count;
  int blocks_seen;
  unsigned long long checksum;  // sum of the integer values of y
  float first, last;
};

__global__ void summarize(int n, const float* y, Summary* out) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    atomicAdd(&out->checksum, static_cast<unsigned long long>(static_cast<long long>(y[i])));
    atomicAdd(&out->count, 1);
  }
  if (threadIdx.x == 0) atomicAdd(&out->blocks_seen, 1);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    out->first = y[0];
    out->last = y[n - 1];
  }
}

// `__managed__` variables: nvcc's host code reaches them through pointers the runtime fills in.
__device__ __managed__ float g_factors[2] = {3.0f, 0.5f};
__device__ __managed__ int g_big = 0;

// Counts the y values above g_factors[0] * 100 into g_big.
__global__ void count_big(int n, const float* y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    if (y[i] > g_factors[0] * 100.0f) atomicAdd(&g_big, 1);
  }
}

struct Scale {
  int n, reps;
};
Scale ScaleOf(Size size) { return size == Size::kTest ? Scale{1 << 15, 3} : Scale{1 << 22, 10}; }

float X(int i) { return static_cast<float>(i % 101); }
float Y0(int i) { return static_cast<float>(i % 37); }

std::string TypeName(cudaMemoryType type) {
  switch (type) {
    case cudaMemoryTypeUnregistered:
      return "unregistered";
    case cudaMemoryTypeHost:
      return "host";
    case cudaMemoryTypeDevice:
      return "device";
    case cudaMemoryTypeManaged:
      return "managed";
  }
  return "unknown (" + std::to_string(static_cast<int>(type)) + ")";
}

// The __managed__ counter counted by a kernel over `y_dev` (a device-side view of `y`), read on the
// host directly and with cudaMemcpyFromSymbol.
void CountIntoManagedVariable(Report& report, int n, const float* y_dev, const float* y, int blocks,
                              int threads) {
  count_big<<<blocks, threads>>>(n, y_dev);
  CHECK_LAUNCH(report);
  CHECK_CUDA(report, cudaDeviceSynchronize());
  int big = 0;
  for (int i = 0; i < n; ++i) big += y[i] > g_factors[0] * 100.0f ? 1 : 0;
  CHECK_VALUE(report, g_big == 1000000 + big, Mismatch("g_big", 0, g_big, 1000000 + big));
  int copied = 0;
  CHECK_CUDA(report, cudaMemcpyFromSymbol(&copied, g_big, sizeof copied));
  CHECK_VALUE(report, copied == g_big, Mismatch("g_big (cudaMemcpyFromSymbol)", 0, copied, g_big));
}

// A device without managed memory (gpuvm under PVDRM): the samples' way is to say so and skip
// cudaMallocManaged; `__managed__` variables are still expected to work.
void RunWithoutManagedMemory(Size size, Report& report) {
  const Scale s = ScaleOf(size);
  std::printf("no managed memory on this device: cudaMallocManaged parts waived\n");
  std::vector<float> y(s.n);
  for (int i = 0; i < s.n; ++i) y[i] = 9 * X(i) + Y0(i);
  float* d = nullptr;
  CHECK_CUDA(report, cudaMalloc(&d, y.size() * sizeof(float)));
  CHECK_CUDA(report, cudaMemcpy(d, y.data(), y.size() * sizeof(float), cudaMemcpyHostToDevice));
  report.Enter(Phase::kLaunch);
  CountIntoManagedVariable(report, s.n, d, y.data(), 64, 256);
  if (report.failed()) return;
  report.Enter(Phase::kClose);
  CHECK_CUDA(report, cudaFree(d));
  report.End();
}

void Run(Size size, Report& report) {
  const Scale s = ScaleOf(size);
  report.Enter(Phase::kInit);
  // Before any CUDA call: the initializer is there on the host.
  CHECK_VALUE(report, g_factors[0] == 3.0f && g_factors[1] == 0.5f,
              "a __managed__ variable's initializer is not visible on the host");
  g_big = 1000000;  // the kernel counts on from here
  const int dev = 0;
  CHECK_CUDA(report, cudaSetDevice(dev));
  int managed = 0, concurrent = 0, sms = 0;
  CHECK_CUDA(report, cudaDeviceGetAttribute(&managed, cudaDevAttrManagedMemory, dev));
  CHECK_CUDA(report, cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, dev));
  CHECK_CUDA(report, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  if (managed == 0) return RunWithoutManagedMemory(size, report);
  CHECK_VALUE(report, managed == 1, "cudaDevAttrManagedMemory is " + std::to_string(managed));
  cudaDeviceProp prop;
  CHECK_CUDA(report, cudaGetDeviceProperties(&prop, dev));
  CHECK_VALUE(report, prop.managedMemory == managed && prop.concurrentManagedAccess == concurrent,
              "the properties and the attributes disagree on managed memory");
  std::printf("device %d: %s, managed memory %d, concurrent managed access %d\n", dev, prop.name,
              managed, concurrent);

  const size_t bytes = size_t(s.n) * sizeof(float);
  float *x = nullptr, *y = nullptr;
  Summary* summary = nullptr;
  CHECK_CUDA(report, cudaMallocManaged(&x, bytes));
  CHECK_CUDA(report, cudaMallocManaged(&y, bytes, cudaMemAttachGlobal));
  CHECK_CUDA(report, cudaMallocManaged(&summary, sizeof(Summary), cudaMemAttachHost));
  // Filled on the host through the pointers cudaMallocManaged returned.
  for (int i = 0; i < s.n; ++i) {
    x[i] = X(i);
    y[i] = Y0(i);
  }
  *summary = Summary{};

  // What the runtime says of the pointers: managed, one address on both sides.
  for (void* p :
       {static_cast<void*>(x), static_cast<void*>(y + s.n / 2), static_cast<void*>(summary)}) {
    cudaPointerAttributes attr;
    CHECK_CUDA(report, cudaPointerGetAttributes(&attr, p));
    CHECK_VALUE(report, attr.type == cudaMemoryTypeManaged,
                "cudaPointerGetAttributes: type " + TypeName(attr.type) + ", want managed");
    CHECK_VALUE(report, attr.devicePointer == p && attr.hostPointer == p,
                "cudaPointerGetAttributes: the device and host pointers are not the pointer");
    CHECK_VALUE(report, attr.device == dev,
                "cudaPointerGetAttributes: device " + std::to_string(attr.device));
  }

  report.Enter(Phase::kHtoD);
  // Hints, as programs write them for speed; they change no result.
  cudaStream_t stream;
  CHECK_CUDA(report, cudaStreamCreate(&stream));
  const cudaMemLocation gpu{cudaMemLocationTypeDevice, dev};
  const cudaMemLocation cpu{cudaMemLocationTypeHost, 0};
  CHECK_CUDA(report, cudaMemAdvise(x, bytes, cudaMemAdviseSetReadMostly, gpu));
  CHECK_CUDA(report, cudaMemAdvise(y, bytes, cudaMemAdviseSetPreferredLocation, gpu));
  CHECK_CUDA(report, cudaMemAdvise(y, bytes, cudaMemAdviseSetAccessedBy, cpu));
  CHECK_CUDA(report, cudaStreamAttachMemAsync(stream, y, 0, cudaMemAttachSingle));
  CHECK_CUDA(report, cudaMemPrefetchAsync(x, bytes, gpu, 0, stream));
  CHECK_CUDA(report, cudaMemPrefetchAsync(y, bytes, gpu, 0, stream));

  report.Enter(Phase::kLaunch);
  const int threads = 256;
  const int blocks = std::min((s.n + threads - 1) / threads, sms * 8);
  for (int r = 0; r < s.reps; ++r) {
    saxpy<<<blocks, threads, 0, stream>>>(s.n, static_cast<float>(r + 2), x, y);
    CHECK_LAUNCH(report);
  }
  CHECK_CUDA(report, cudaStreamAttachMemAsync(stream, y, 0, cudaMemAttachGlobal));
  CHECK_CUDA(report, cudaMemPrefetchAsync(y, bytes, cpu, 0, stream));
  CHECK_CUDA(report, cudaStreamSynchronize(stream));
  summarize<<<blocks, threads>>>(s.n, y, summary);
  CHECK_LAUNCH(report);
  CHECK_CUDA(report, cudaDeviceSynchronize());

  report.Enter(Phase::kDtoH);
  // Read on the host through the same pointers.
  float a_sum = 0;
  for (int r = 0; r < s.reps; ++r) a_sum += static_cast<float>(r + 2);
  unsigned long long checksum = 0;
  for (int i = 0; i < s.n; ++i) {
    const float want = a_sum * X(i) + Y0(i);
    CHECK_VALUE(report, y[i] == want,
                Mismatch("y", i, static_cast<long long>(y[i]), static_cast<long long>(want)));
    CHECK_VALUE(report, x[i] == X(i),
                Mismatch("x", i, static_cast<long long>(x[i]), static_cast<long long>(X(i))));
    checksum += static_cast<unsigned long long>(want);
  }
  CHECK_VALUE(report, summary->count == s.n, Mismatch("summary count", 0, summary->count, s.n));
  CHECK_VALUE(report, summary->blocks_seen == blocks,
              Mismatch("summary blocks", 0, summary->blocks_seen, blocks));
  CHECK_VALUE(report, summary->checksum == checksum,
              Mismatch("summary checksum", 0, static_cast<long long>(summary->checksum),
                       static_cast<long long>(checksum)));
  CHECK_VALUE(report, summary->first == y[0] && summary->last == y[s.n - 1],
              "the summary's first and last values are not y's");

  // The __managed__ counter, counted by a kernel and read on the host both ways; here in managed
  // memory, at one address for both sides.
  CountIntoManagedVariable(report, s.n, y, y, blocks, threads);
  if (report.failed()) return;
  cudaPointerAttributes big_attr;
  CHECK_CUDA(report, cudaPointerGetAttributes(&big_attr, &g_big));
  CHECK_VALUE(report, big_attr.type == cudaMemoryTypeManaged,
              "a __managed__ variable's memory is " + TypeName(big_attr.type) + ", want managed");

  // cudaMemcpyDefault between managed and ordinary memory, both ways.
  std::vector<float> host(s.n);
  CHECK_CUDA(report, cudaMemcpy(host.data(), y, bytes, cudaMemcpyDefault));
  float* d = nullptr;
  CHECK_CUDA(report, cudaMalloc(&d, bytes));
  CHECK_CUDA(report, cudaMemcpy(d, x, bytes, cudaMemcpyDefault));
  CHECK_CUDA(report, cudaMemcpy(y, d, bytes, cudaMemcpyDefault));
  CHECK_VALUE(report, host[s.n - 1] == a_sum * X(s.n - 1) + Y0(s.n - 1),
              "cudaMemcpyDefault from managed memory copied the wrong bytes");
  for (int i = 0; i < s.n; ++i) {
    CHECK_VALUE(
        report, y[i] == X(i),
        Mismatch("y after copies", i, static_cast<long long>(y[i]), static_cast<long long>(X(i))));
  }

  report.Enter(Phase::kClose);
  CHECK_CUDA(report, cudaStreamDestroy(stream));
  CHECK_CUDA(report, cudaFree(d));
  CHECK_CUDA(report, cudaFree(x));
  CHECK_CUDA(report, cudaFree(y));
  CHECK_CUDA(report, cudaFree(summary));
  report.End();
  CHECK_CUDA(report, cudaDeviceReset());
}

}  // namespace
}  // namespace gpuvm::compat

int main(int argc, char** argv) {
  using namespace gpuvm::compat;
  return CompatMain(
      argc, argv, "managed",
      [](Size size) {
        const Scale s = ScaleOf(size);
        return std::to_string(s.n) + " floats in managed memory, " + std::to_string(s.reps) +
               " SAXPY launches";
      },
      Run);
}
