// nn: Rodinia's nearest neighbour in the kernel corpus's form (bench/kernels/nn.cu) — the distance
// of every record to the target and a per-block argmin on the GPU; the host picks the nearest
// record from the block results, as Rodinia's nn keeps the final selection on the host.
#include "bench/suite/driver.h"
#include "bench/suite/problems.h"

namespace gpuvm::suite {
namespace {

void Run(const NnProblem& p, Report& report, NnProblem::Outputs* out) {
  const NnProblem::Bytes bytes = p.BufferBytes();
  Session session(report);
  CUfunction distance, argmin;
  if (!session.Open("nn.ptx") || !session.Function("nn_distance", &distance) ||
      !session.Function("nn_argmin", &argmin)) {
    return;
  }
  CUdeviceptr d_records, d_dist, d_block_min, d_block_index;
  GPUVM_SUITE_CU(report, cuMemAlloc(&d_records, bytes.records));
  GPUVM_SUITE_CU(report, cuMemAlloc(&d_dist, bytes.dist));
  GPUVM_SUITE_CU(report, cuMemAlloc(&d_block_min, bytes.block));
  GPUVM_SUITE_CU(report, cuMemAlloc(&d_block_index, bytes.block));

  report.Enter(Phase::kHtoD);
  GPUVM_SUITE_CU(report, cuMemcpyHtoD(d_records, p.records.data(), bytes.records));

  report.Enter(Phase::kLaunch);
  int n = p.n;
  float lat = p.lat, lng = p.lng;
  void* distance_args[] = {&d_records, &d_dist, &n, &lat, &lng};
  GPUVM_SUITE_CU(report, cuLaunchKernel(distance, Blocks(n, 256), 1, 1, 256, 1, 1, 0, nullptr,
                                        distance_args, nullptr));
  void* argmin_args[] = {&d_dist, &d_block_min, &d_block_index, &n};
  GPUVM_SUITE_CU(report, cuLaunchKernel(argmin, Blocks(n, 256), 1, 1, 256, 1, 1, 0, nullptr,
                                        argmin_args, nullptr));
  GPUVM_SUITE_CU(report, cuCtxSynchronize());

  report.Enter(Phase::kDtoH);
  p.SizeOutputs(out);
  GPUVM_SUITE_CU(report, cuMemcpyDtoH(out->block_min.data(), d_block_min, bytes.block));
  GPUVM_SUITE_CU(report, cuMemcpyDtoH(out->block_index.data(), d_block_index, bytes.block));
  GPUVM_SUITE_CU(report, cuMemcpyDtoH(out->dist.data(), d_dist, bytes.dist));
  report.Enter(Phase::kLaunch);  // the host's final step belongs to the computation
  out->nearest = NnPick(out->block_min, out->block_index);

  session.Close({d_records, d_dist, d_block_min, d_block_index});
}

}  // namespace
}  // namespace gpuvm::suite

int main(int argc, char** argv) {
  using namespace gpuvm::suite;
  return ProgramMain<NnProblem>(argc, argv, "nn", "driver", MakeNn, Run);
}
