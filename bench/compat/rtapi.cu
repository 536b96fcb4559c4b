// compat-rtapi: the runtime API as CUDA's samples and their helper headers use it — device query
// (cudaGetDeviceCount, cudaSetDevice, cudaGetDeviceProperties, cudaDeviceGetAttribute), pinned
// buffers, a stream with cudaMemcpyAsync both ways around a kernel, events timing the stream,
// cudaDeviceSynchronize, and every call checked; also the occupancy API's block size, a host
// function on the stream (cudaLaunchHostFunc), a 2D copy of a window (cudaMemcpy2DAsync), every
// other launch made with cudaLaunchKernelEx and launch attributes, and the stream made as
// multi-GPU-aware samples make it: a peer check of every device pair and a stream created with the
// greatest priority of the device's range. The
// kernel is a y = a*x + y over integers (exact on any device), repeated `reps` times on the
// stream; the host checks every element.
#include <cstdint>
#include <vector>

#include "bench/compat/compat.h"

namespace gpuvm::compat {
namespace {

__global__ void axpy(int n, int a, const int* x, int* y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    y[i] = a * x[i] + y[i];
  }
}

// What a host function on the stream saw of the first result.
struct HostCheck {
  const int* y;
  int seen;
};
void CUDART_CB SeeFirst(void* data) {
  auto* check = static_cast<HostCheck*>(data);
  check->seen = check->y[0];
}

struct Scale {
  int n, reps;
};
Scale ScaleOf(Size size) { return size == Size::kTest ? Scale{1 << 14, 2} : Scale{1 << 20, 8}; }

void Run(Size size, Report& report) {
  const Scale s = ScaleOf(size);
  report.Enter(Phase::kInit);
  int count = 0;
  CHECK_CUDA(report, cudaGetDeviceCount(&count));
  CHECK_VALUE(report, count >= 1, "cudaGetDeviceCount found no device");
  const int dev = 0;
  CHECK_CUDA(report, cudaSetDevice(dev));
  cudaDeviceProp prop;
  CHECK_CUDA(report, cudaGetDeviceProperties(&prop, dev));
  int sms = 0, max_threads = 0, warp = 0, major = 0, minor = 0;
  CHECK_CUDA(report, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CHECK_CUDA(report, cudaDeviceGetAttribute(&max_threads, cudaDevAttrMaxThreadsPerBlock, dev));
  CHECK_CUDA(report, cudaDeviceGetAttribute(&warp, cudaDevAttrWarpSize, dev));
  CHECK_CUDA(report, cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CHECK_CUDA(report, cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  // The attributes and the properties structure must tell the same story.
  CHECK_VALUE(report, sms == prop.multiProcessorCount && sms > 0,
              "multiprocessor count: attribute " + std::to_string(sms) + ", properties " +
                  std::to_string(prop.multiProcessorCount));
  CHECK_VALUE(report, max_threads == prop.maxThreadsPerBlock && max_threads >= 256,
              "max threads per block disagree or are too few");
  CHECK_VALUE(report, warp == prop.warpSize && warp == 32, "warp size is not 32");
  CHECK_VALUE(report, major == prop.major && minor == prop.minor,
              "compute capability: attributes and properties disagree");
  std::printf("device %d: %s, compute capability %d.%d, %d SMs, %zu MiB\n", dev, prop.name,
              prop.major, prop.minor, sms, static_cast<size_t>(prop.totalGlobalMem >> 20));

  const size_t bytes = size_t(s.n) * sizeof(int);
  int *h_x = nullptr, *h_y = nullptr, *d_x = nullptr, *d_y = nullptr;
  CHECK_CUDA(report, cudaMallocHost(&h_x, bytes));
  CHECK_CUDA(report, cudaMallocHost(&h_y, bytes));
  CHECK_CUDA(report, cudaMalloc(&d_x, bytes));
  CHECK_CUDA(report, cudaMalloc(&d_y, bytes));
  // As the multi-GPU-aware samples do: peer access between every pair of devices where it is
  // possible (with one device there is no pair), then a stream of the highest priority.
  for (int a = 0; a < count; ++a) {
    for (int b = 0; b < count; ++b) {
      if (a == b) continue;
      int can = 0;
      CHECK_CUDA(report, cudaDeviceCanAccessPeer(&can, a, b));
      if (can) {
        CHECK_CUDA(report, cudaSetDevice(a));
        CHECK_CUDA(report, cudaDeviceEnablePeerAccess(b, 0));
      }
    }
  }
  CHECK_CUDA(report, cudaSetDevice(dev));
  int least_priority = 0, greatest_priority = 0;
  CHECK_CUDA(report, cudaDeviceGetStreamPriorityRange(&least_priority, &greatest_priority));
  CHECK_VALUE(report, greatest_priority <= least_priority, "stream priority range upside down");
  cudaStream_t stream;
  CHECK_CUDA(report,
             cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, greatest_priority));
  int priority = least_priority + 1;
  unsigned stream_flags = 0;
  CHECK_CUDA(report, cudaStreamGetPriority(stream, &priority));
  CHECK_CUDA(report, cudaStreamGetFlags(stream, &stream_flags));
  CHECK_VALUE(report, priority >= greatest_priority && priority <= least_priority,
              "the stream's priority is outside the device's range");
  CHECK_VALUE(report, stream_flags == cudaStreamNonBlocking,
              "the stream's flags are not the ones it was made with");
  cudaEvent_t start, stop;
  CHECK_CUDA(report, cudaEventCreate(&start));
  CHECK_CUDA(report, cudaEventCreate(&stop));
  for (int i = 0; i < s.n; ++i) {
    h_x[i] = (i * 7) % 1009 - 500;
    h_y[i] = (i * 13) % 997;
  }

  report.Enter(Phase::kHtoD);
  CHECK_CUDA(report, cudaEventRecord(start, stream));
  CHECK_CUDA(report, cudaMemcpyAsync(d_x, h_x, bytes, cudaMemcpyHostToDevice, stream));
  CHECK_CUDA(report, cudaMemcpyAsync(d_y, h_y, bytes, cudaMemcpyHostToDevice, stream));
  report.Enter(Phase::kLaunch);
  // The block size the samples ask the occupancy API for (NVIDIA's header template over
  // cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags), then launch with a fixed 256.
  int min_grid = 0, best_block = 0;
  CHECK_CUDA(report, cudaOccupancyMaxPotentialBlockSize(&min_grid, &best_block, axpy, 0, 0));
  CHECK_VALUE(report, best_block >= warp && best_block <= max_threads && min_grid >= sms,
              "cudaOccupancyMaxPotentialBlockSize: block " + std::to_string(best_block) +
                  ", grid " + std::to_string(min_grid));
  const int threads = 256;
  const int blocks = std::min((s.n + threads - 1) / threads, sms * 8);
  for (int r = 0; r < s.reps; ++r) {
    if (r % 2 == 0) {
      axpy<<<blocks, threads, 0, stream>>>(s.n, r + 2, d_x, d_y);
      CHECK_LAUNCH(report);
      continue;
    }
    // CUDA 12's launch with attributes (NVIDIA's header template over cudaLaunchKernelExC), with
    // the tuning attributes programs pass: a priority, and leave to overlap with the previous one.
    cudaLaunchAttribute attrs[2] = {};
    attrs[0].id = cudaLaunchAttributePriority;
    attrs[0].val.priority = 0;
    attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[1].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(blocks);
    config.blockDim = dim3(threads);
    config.stream = stream;
    config.attrs = attrs;
    config.numAttrs = 2;
    CHECK_CUDA(report,
               cudaLaunchKernelEx(&config, axpy, s.n, r + 2, static_cast<const int*>(d_x), d_y));
  }
  report.Enter(Phase::kDtoH);
  CHECK_CUDA(report, cudaMemcpyAsync(h_y, d_y, bytes, cudaMemcpyDeviceToHost, stream));
  // A host function after the copy: it sees the copied result (the stream's earlier work is done).
  HostCheck check{h_y, -1};
  CHECK_CUDA(report, cudaLaunchHostFunc(stream, SeeFirst, &check));
  // A 16 x 8 window of y, viewed as rows of 64 ints, into a packed host array.
  int window[8][16];
  CHECK_CUDA(report, cudaMemcpy2DAsync(window, sizeof window[0], d_y + 64 + 3, 64 * sizeof(int),
                                       sizeof window[0], 8, cudaMemcpyDeviceToHost, stream));
  CHECK_CUDA(report, cudaEventRecord(stop, stream));
  CHECK_CUDA(report, cudaEventSynchronize(stop));
  CHECK_CUDA(report, cudaDeviceSynchronize());
  float ms = -1;
  CHECK_CUDA(report, cudaEventElapsedTime(&ms, start, stop));
  CHECK_VALUE(report, ms >= 0, "cudaEventElapsedTime gave a negative time");
  std::printf("stream work: %.3f ms by the events\n", ms);

  report.Enter(Phase::kClose);
  CHECK_CUDA(report, cudaEventDestroy(start));
  CHECK_CUDA(report, cudaEventDestroy(stop));
  CHECK_CUDA(report, cudaStreamDestroy(stream));
  CHECK_CUDA(report, cudaFree(d_x));
  CHECK_CUDA(report, cudaFree(d_y));
  report.End();

  int a_sum = 0;
  for (int r = 0; r < s.reps; ++r) a_sum += r + 2;
  for (int i = 0; i < s.n; ++i) {
    const int want = (i * 13) % 997 + a_sum * ((i * 7) % 1009 - 500);
    CHECK_VALUE(report, h_y[i] == want, Mismatch("y", i, h_y[i], want));
  }
  CHECK_VALUE(report, check.seen == h_y[0], Mismatch("host function's y", 0, check.seen, h_y[0]));
  for (int r = 0; r < 8; ++r) {
    for (int c = 0; c < 16; ++c) {
      const int i = 64 + 3 + r * 64 + c;
      CHECK_VALUE(report, window[r][c] == h_y[i], Mismatch("window", i, window[r][c], h_y[i]));
    }
  }
  CHECK_CUDA(report, cudaFreeHost(h_x));
  CHECK_CUDA(report, cudaFreeHost(h_y));
  CHECK_CUDA(report, cudaDeviceReset());
}

}  // namespace
}  // namespace gpuvm::compat

int main(int argc, char** argv) {
  using namespace gpuvm::compat;
  return CompatMain(
      argc, argv, "rtapi",
      [](Size size) {
        const Scale s = ScaleOf(size);
        return std::to_string(s.n) + " ints, " + std::to_string(s.reps) + " launches on a stream";
      },
      Run);
}
