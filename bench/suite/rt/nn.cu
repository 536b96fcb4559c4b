// nn, runtime-API build (stock nvcc): the twin of ../nn.cc — distances and a per-block argmin on
// the GPU, the final pick on the host.
#include "bench/kernels/nn.cu"
#include "bench/suite/problems.h"
#include "bench/suite/rt/rt.h"

namespace gpuvm::suite {
namespace {

void Run(const NnProblem& p, Report& report, NnProblem::Outputs* out) {
  const NnProblem::Bytes bytes = p.BufferBytes();
  if (!OpenDevice(report, nn_distance)) return;
  float2* d_records;
  float *d_dist, *d_block_min;
  int* d_block_index;
  GPUVM_SUITE_RT(report, cudaMalloc(&d_records, bytes.records));
  GPUVM_SUITE_RT(report, cudaMalloc(&d_dist, bytes.dist));
  GPUVM_SUITE_RT(report, cudaMalloc(&d_block_min, bytes.block));
  GPUVM_SUITE_RT(report, cudaMalloc(&d_block_index, bytes.block));

  report.Enter(Phase::kHtoD);
  GPUVM_SUITE_RT(report,
                 cudaMemcpy(d_records, p.records.data(), bytes.records, cudaMemcpyHostToDevice));

  report.Enter(Phase::kLaunch);
  nn_distance<<<Blocks(p.n, 256), 256>>>(d_records, d_dist, p.n, p.lat, p.lng);
  GPUVM_SUITE_RT_LAUNCHED(report);
  nn_argmin<<<Blocks(p.n, 256), 256>>>(d_dist, d_block_min, d_block_index, p.n);
  GPUVM_SUITE_RT_LAUNCHED(report);
  GPUVM_SUITE_RT(report, cudaDeviceSynchronize());

  report.Enter(Phase::kDtoH);
  p.SizeOutputs(out);
  GPUVM_SUITE_RT(
      report, cudaMemcpy(out->block_min.data(), d_block_min, bytes.block, cudaMemcpyDeviceToHost));
  GPUVM_SUITE_RT(report, cudaMemcpy(out->block_index.data(), d_block_index, bytes.block,
                                    cudaMemcpyDeviceToHost));
  GPUVM_SUITE_RT(report, cudaMemcpy(out->dist.data(), d_dist, bytes.dist, cudaMemcpyDeviceToHost));
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
