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
  if (!session.Open("nn.ptx", {{"nn_distance", &distance}, {"nn_argmin", &argmin}})) return;
  CUdeviceptr d_records, d_dist, d_block_min, d_block_index;
  if (!session.Alloc({{&d_records, bytes.records},
                      {&d_dist, bytes.dist},
                      {&d_block_min, bytes.block},
                      {&d_block_index, bytes.block}})) {
    return;
  }

  report.Enter(Phase::kHtoD);
  if (!session.CopyIn({{d_records, p.records.data(), bytes.records}})) return;

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
  if (!session.CopyOut({{out->block_min.data(), d_block_min, bytes.block},
                        {out->block_index.data(), d_block_index, bytes.block},
                        {out->dist.data(), d_dist, bytes.dist}})) {
    return;
  }
  report.Enter(Phase::kLaunch);  // the host's final step belongs to the computation
  out->nearest = NnPick(out->block_min, out->block_index);
}

}  // namespace
}  // namespace gpuvm::suite

int main(int argc, char** argv) {
  using namespace gpuvm::suite;
  return ProgramMain<NnProblem>(argc, argv, "nn", "driver", MakeNn, Run);
}
