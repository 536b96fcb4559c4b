// nn, runtime-API build (stock nvcc): the twin of ../nn.cc — distances and a per-block argmin on
// the GPU, the final pick on the host.
#include "bench/kernels/nn.cu"
#include "bench/suite/problems.h"
#include "bench/suite/rt/rt.h"

namespace gpuvm::suite {
namespace {

void Run(const NnProblem& p, Report& report, NnProblem::Outputs* out) {
  const size_t records_bytes = p.records.size() * sizeof(float);
  const size_t dist_bytes = static_cast<size_t>(p.n) * sizeof(float);
  const size_t block_bytes = static_cast<size_t>(p.blocks) * sizeof(float);
  if (!OpenDevice(report, nn_distance)) return;
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
  p.SizeOutputs(out);
  GPUVM_SUITE_RT(
      report, cudaMemcpy(out->block_min.data(), d_block_min, block_bytes, cudaMemcpyDeviceToHost));
  GPUVM_SUITE_RT(report, cudaMemcpy(out->block_index.data(), d_block_index, block_bytes,
                                    cudaMemcpyDeviceToHost));
  GPUVM_SUITE_RT(report, cudaMemcpy(out->dist.data(), d_dist, dist_bytes, cudaMemcpyDeviceToHost));
  report.Enter(Phase::kLaunch);  // the host's final step belongs to the computation
  out->nearest = NnPick(out->block_min, out->block_index);

  CloseDevice(report, {d_records, d_dist, d_block_min, d_block_index});
}

}  // namespace
}  // namespace gpuvm::suite

int main(int argc, char** argv) {
  using namespace gpuvm::suite;
  return ProgramMain<NnProblem>(argc, argv, "nn", "runtime", MakeNn, Run);
}
