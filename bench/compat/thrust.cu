// compat-thrust: the template libraries every CUDA toolkit ships, Thrust and CUB, as programs use
// them: sorts (radix sort of ints and of floats, a stable sort by key), scans (also of 8-byte
// values), reductions (a plain one, a max, a transform_reduce in double), unique, copy_if, count,
// and CUB's two-phase DeviceReduce / DeviceScan calls (size query, then the run). Their kernels
// are nvcc's hand-tuned ones: parameters addressed through registers, bmsk, bar.red at the 48 KiB
// shared limit, decoupled look-back scans that poll other blocks' {status, value} words in global
// memory. Every result is checked against the host's <algorithm>. Thrust reports errors by
// throwing: a throw is the program's failure.
#include <thrust/copy.h>
#include <thrust/count.h>
#include <thrust/device_vector.h>
#include <thrust/functional.h>
#include <thrust/host_vector.h>
#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>
#include <thrust/system_error.h>
#include <thrust/transform_reduce.h>
#include <thrust/unique.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cub/cub.cuh>
#include <numeric>
#include <vector>

#include "bench/compat/compat.h"

namespace gpuvm::compat {
namespace {

struct Square {
  __host__ __device__ double operator()(float x) const { return double(x) * x; }
};
struct IsOdd {
  __host__ __device__ bool operator()(int x) const { return (x & 1) != 0; }
};

int Elements(Size size) { return size == Size::kTest ? 50000 : 1 << 21; }

void Run(Size size, Report& report) {
  const int n = Elements(size);
  std::vector<int> ints(n);
  std::vector<float> floats(n);
  uint32_t x = 12345;
  for (int i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    ints[i] = int((x >> 12) % 1000);
    floats[i] = float(int((x >> 9) % 2000) - 1000) + 0.25f;
  }
  try {
    report.Enter(Phase::kInit);
    CHECK_CUDA(report, cudaSetDevice(0));
    thrust::device_vector<int> d_ints(n), d_scan(n), d_keys(n), d_values(n), d_odds(n);
    thrust::device_vector<float> d_floats(n), d_sorted(n);
    int* d_sum = nullptr;
    CHECK_CUDA(report, cudaMalloc(&d_sum, sizeof(int)));

    report.Enter(Phase::kHtoD);
    thrust::copy(ints.begin(), ints.end(), d_ints.begin());
    thrust::copy(floats.begin(), floats.end(), d_floats.begin());

    report.Enter(Phase::kLaunch);
    d_sorted = d_floats;
    thrust::sort(d_sorted.begin(), d_sorted.end());
    thrust::inclusive_scan(d_ints.begin(), d_ints.end(), d_scan.begin());
    // 8-byte values: CUB's look-back publishes {status, value} as 16 bytes.
    thrust::device_vector<long long> d_wide(d_ints.begin(), d_ints.end()), d_wide_scan(n);
    thrust::inclusive_scan(d_wide.begin(), d_wide.end(), d_wide_scan.begin());
    const long long sum = thrust::reduce(d_ints.begin(), d_ints.end(), 0LL);
    const int max = thrust::reduce(d_ints.begin(), d_ints.end(), -1, thrust::maximum<int>());
    const double squares = thrust::transform_reduce(d_floats.begin(), d_floats.end(), Square(), 0.0,
                                                    thrust::plus<double>());
    d_keys = d_ints;
    thrust::sequence(d_values.begin(), d_values.end());
    thrust::sort_by_key(d_keys.begin(), d_keys.end(), d_values.begin());
    thrust::device_vector<int> d_unique = d_keys;
    const long long unique = thrust::unique(d_unique.begin(), d_unique.end()) - d_unique.begin();
    const long long odds =
        thrust::copy_if(d_ints.begin(), d_ints.end(), d_odds.begin(), IsOdd()) - d_odds.begin();
    const long long fives = thrust::count(d_ints.begin(), d_ints.end(), 500);
    // CUB's own interface: ask for the scratch size, then run.
    const int* in = thrust::raw_pointer_cast(d_ints.data());
    size_t scratch_bytes = 0;
    CHECK_CUDA(report, cub::DeviceReduce::Sum(nullptr, scratch_bytes, in, d_sum, n));
    thrust::device_vector<uint8_t> scratch(scratch_bytes);
    CHECK_CUDA(report, cub::DeviceReduce::Sum(thrust::raw_pointer_cast(scratch.data()),
                                              scratch_bytes, in, d_sum, n));
    thrust::device_vector<int> d_exclusive(n);
    size_t scan_bytes = 0;
    CHECK_CUDA(report,
               cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, in,
                                             thrust::raw_pointer_cast(d_exclusive.data()), n));
    thrust::device_vector<uint8_t> scan_scratch(scan_bytes);
    CHECK_CUDA(report, cub::DeviceScan::ExclusiveSum(
                           thrust::raw_pointer_cast(scan_scratch.data()), scan_bytes, in,
                           thrust::raw_pointer_cast(d_exclusive.data()), n));
    CHECK_CUDA(report, cudaDeviceSynchronize());

    report.Enter(Phase::kDtoH);
    thrust::host_vector<float> sorted = d_sorted;
    thrust::host_vector<int> scan = d_scan, keys = d_keys, values = d_values,
                             exclusive = d_exclusive;
    thrust::host_vector<long long> wide_scan = d_wide_scan;
    int cub_sum = 0;
    CHECK_CUDA(report, cudaMemcpy(&cub_sum, d_sum, sizeof cub_sum, cudaMemcpyDeviceToHost));
    report.Enter(Phase::kClose);
    CHECK_CUDA(report, cudaFree(d_sum));
    report.End();

    std::vector<float> want_sorted = floats;
    std::sort(want_sorted.begin(), want_sorted.end());
    for (int i = 0; i < n; ++i) {
      CHECK_VALUE(report, sorted[i] == want_sorted[i],
                  "sort: element " + std::to_string(i) + " is " + std::to_string(sorted[i]) +
                      ", want " + std::to_string(want_sorted[i]));
    }
    long long running = 0;
    for (int i = 0; i < n; ++i) {
      CHECK_VALUE(report, exclusive[i] == running,
                  Mismatch("exclusive_sum", i, exclusive[i], running));
      running += ints[i];
      CHECK_VALUE(report, scan[i] == running, Mismatch("inclusive_scan", i, scan[i], running));
      CHECK_VALUE(report, wide_scan[i] == running,
                  Mismatch("inclusive_scan (long long)", i, wide_scan[i], running));
    }
    CHECK_VALUE(report, sum == running, Mismatch("reduce", 0, sum, running));
    CHECK_VALUE(report, cub_sum == running,
                Mismatch("cub::DeviceReduce::Sum", 0, cub_sum, running));
    const int want_max = *std::max_element(ints.begin(), ints.end());
    CHECK_VALUE(report, max == want_max, Mismatch("reduce(maximum)", 0, max, want_max));
    double want_squares = 0;
    for (float f : floats) want_squares += double(f) * f;
    CHECK_VALUE(
        report, std::fabs(squares - want_squares) <= 1e-9 * want_squares,
        "transform_reduce: " + std::to_string(squares) + ", want " + std::to_string(want_squares));
    for (int i = 0; i < n; ++i) {
      CHECK_VALUE(report, values[i] >= 0 && values[i] < n && ints[values[i]] == keys[i],
                  Mismatch("sort_by_key value", i, values[i], -1));
      if (i > 0) {
        CHECK_VALUE(report, keys[i - 1] <= keys[i], Mismatch("sort_by_key key", i, keys[i], -1));
        CHECK_VALUE(report, keys[i - 1] != keys[i] || values[i - 1] < values[i],
                    "sort_by_key is not stable at " + std::to_string(i));
      }
    }
    std::vector<int> distinct = ints;
    std::sort(distinct.begin(), distinct.end());
    const long long want_unique = std::unique(distinct.begin(), distinct.end()) - distinct.begin();
    CHECK_VALUE(report, unique == want_unique, Mismatch("unique", 0, unique, want_unique));
    const long long want_odds =
        std::count_if(ints.begin(), ints.end(), [](int v) { return v & 1; });
    CHECK_VALUE(report, odds == want_odds, Mismatch("copy_if", 0, odds, want_odds));
    const long long want_fives = std::count(ints.begin(), ints.end(), 500);
    CHECK_VALUE(report, fives == want_fives, Mismatch("count", 0, fives, want_fives));
  } catch (const thrust::system_error& e) {
    report.Fail(std::string("thrust threw: ") + e.what());
  } catch (const std::exception& e) {
    report.Fail(std::string("exception: ") + e.what());
  }
}

}  // namespace
}  // namespace gpuvm::compat

int main(int argc, char** argv) {
  using namespace gpuvm::compat;
  return CompatMain(
      argc, argv, "thrust",
      [](Size size) {
        return std::to_string(Elements(size)) + " ints and floats through Thrust/CUB";
      },
      Run);
}
