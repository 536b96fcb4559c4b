// cpy and pincpy: GPUvm's copy benchmarks — 64 MiB to the GPU and back. cpy copies from pageable
// memory (malloc: the runtime stages it through its bounce buffers); pincpy from page-locked memory
// (cuMemAllocHost: the GPU's copy engine DMAs it directly). GPUVM_SUITE_NAME picks which.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>

#include "bench/suite/driver.h"
#include "bench/suite/problems.h"

#ifndef GPUVM_SUITE_NAME
#error "GPUVM_SUITE_NAME must name the benchmark (cpy or pincpy)"
#endif

namespace gpuvm::suite {
namespace {

constexpr std::string_view kName = GPUVM_SUITE_NAME;
constexpr bool kPinned = kName == "pincpy";

// Host buffers: pinned ones are allocated in init (cuMemAllocHost needs the context), pageable
// ones before the program's phases start.
struct HostBuffers {
  uint8_t* src = nullptr;
  uint8_t* dst = nullptr;
  std::unique_ptr<uint8_t[]> pageable_src, pageable_dst;
};

void Run(const CopyProblem& p, Report& report, HostBuffers& host) {
  Session session(report);
  if (!session.Open(nullptr)) return;
  if (kPinned) {
    void* src = nullptr;
    void* dst = nullptr;
    GPUVM_SUITE_CU(report, cuMemAllocHost(&src, p.bytes));
    GPUVM_SUITE_CU(report, cuMemAllocHost(&dst, p.bytes));
    host.src = static_cast<uint8_t*>(src);
    host.dst = static_cast<uint8_t*>(dst);
    report.End();
    p.Fill(host.src);  // the data exists before the copy starts, as for cpy
    report.Enter(Phase::kInit);
  }
  CUdeviceptr d_buffer;
  GPUVM_SUITE_CU(report, cuMemAlloc(&d_buffer, p.bytes));

  report.Enter(Phase::kHtoD);
  GPUVM_SUITE_CU(report, cuMemcpyHtoD(d_buffer, host.src, p.bytes));

  report.Enter(Phase::kDtoH);
  GPUVM_SUITE_CU(report, cuMemcpyDtoH(host.dst, d_buffer, p.bytes));

  report.End();
  report.Verify(p.Check(host.dst));  // before the pinned buffers go

  report.Enter(Phase::kClose);
  if (kPinned) {
    GPUVM_SUITE_CU(report, cuMemFreeHost(host.src));
    GPUVM_SUITE_CU(report, cuMemFreeHost(host.dst));
  }
  session.Close({d_buffer});
}

}  // namespace
}  // namespace gpuvm::suite

int main(int argc, char** argv) {
  using namespace gpuvm::suite;
  const Size size = ParseCommandLine(argc, argv, GPUVM_SUITE_NAME);
  const CopyProblem problem = MakeCopy(size);
  Report report(
      std::string(kName), "driver", size,
      problem.Describe() + (kPinned ? " (pinned host memory)" : " (pageable host memory)"));
  HostBuffers host;
  if (!kPinned) {
    host.pageable_src.reset(new uint8_t[problem.bytes]);
    host.pageable_dst.reset(new uint8_t[problem.bytes]);
    host.src = host.pageable_src.get();
    host.dst = host.pageable_dst.get();
    problem.Fill(host.src);
    std::memset(host.dst, 0, problem.bytes);  // fault the pages in now, not during the copy
  }
  Run(problem, report, host);
  return report.Finish();
}
