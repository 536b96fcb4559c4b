// nn, runtime-API build (stock nvcc): the twin of ../nn.cc — distances and a per-block argmin on
// the GPU, the final pick on the host.
#include <vector>

#include "bench/kernels/nn.cu"
#include "bench/suite/problems.h"
#include "bench/suite/rt/rt.h"

namespace gpuvm::suite {
namespace {

struct Outputs {
  std::vector<float> dist, block_min;
  std::vector<int32_t> block_index;
  int32_t nearest = -1;
};

void Run(const NnProblem& p, Report& report, Outputs* out) {
  const size_t records_bytes = p.records.size() * sizeof(float);
  const size_t dist_bytes = static_cast<size_t>(p.n) * sizeof(float);
  const size_t block_bytes = static_cast<size_t>(p.blocks) * sizeof(float);
  report.Enter(Phase::kInit);
  GPUVM_SUITE_RT_OPEN(report);
  GPUVM_SUITE_RT_LOAD(report, nn_distance);
  float2* d_records;
  float *d_dist, *d_block_min;
  int* d_block_index;
  GPUVM_SUITE_RT(report, cudaMalloc(&d_records, records_bytes));
  GPUVM_SUITE_RT(report, cudaMalloc(&d_dist, dist_bytes));
  GPUVM_SUITE_RT(report, cudaMalloc(&d_block_min, block_bytes));
  GPUVM_SUITE_RT(report, cudaMalloc(&d_block_index, block_bytes));

  report.Enter(Phase::kHtoD);
  GPUVM_SUITE_RT(report,
                 cudaMemcpy(d_records, p.records.data(), records_bytes, cudaMemcpyHostToDevice));

  report.Enter(Phase::kLaunch);
  nn_distance<<<Blocks(p.n, 256), 256>>>(d_records, d_dist, p.n, p.lat, p.lng);
  GPUVM_SUITE_RT_LAUNCHED(report);
  nn_argmin<<<Blocks(p.n, 256), 256>>>(d_dist, d_block_min, d_block_index, p.n);
  GPUVM_SUITE_RT_LAUNCHED(report);
  GPUVM_SUITE_RT(report, cudaDeviceSynchronize());

  report.Enter(Phase::kDtoH);
  out->dist.resize(p.n);
  out->block_min.resize(p.blocks);
  out->block_index.resize(p.blocks);
  GPUVM_SUITE_RT(
      report, cudaMemcpy(out->block_min.data(), d_block_min, block_bytes, cudaMemcpyDeviceToHost));
  GPUVM_SUITE_RT(report, cudaMemcpy(out->block_index.data(), d_block_index, block_bytes,
                                    cudaMemcpyDeviceToHost));
  GPUVM_SUITE_RT(report, cudaMemcpy(out->dist.data(), d_dist, dist_bytes, cudaMemcpyDeviceToHost));
  report.Enter(Phase::kLaunch);  // the host's final step belongs to the computation
  out->nearest = NnPick(out->block_min, out->block_index);

  report.Enter(Phase::kClose);
  GPUVM_SUITE_RT(report, cudaFree(d_records));
  GPUVM_SUITE_RT(report, cudaFree(d_dist));
  GPUVM_SUITE_RT(report, cudaFree(d_block_min));
  GPUVM_SUITE_RT(report, cudaFree(d_block_index));
  GPUVM_SUITE_RT(report, cudaDeviceReset());
  report.End();
}

}  // namespace
}  // namespace gpuvm::suite

int main(int argc, char** argv) {
  using namespace gpuvm::suite;
  const Size size = ParseCommandLine(argc, argv, "nn");
  const NnProblem problem = MakeNn(size);
  Report report("nn", "runtime", size, problem.Describe());
  Outputs out;
  Run(problem, report, &out);
  if (!report.failed()) {
    report.Verify(problem.Check(out.dist, out.block_min, out.block_index, out.nearest));
  }
  return report.Finish();
}
