// hs: Rodinia's hotspot in the kernel corpus's form (bench/kernels/hotspot.cu) — explicit time
// steps of a 2D thermal simulation, ping-ponging between two temperature grids.
#include "bench/suite/driver.h"
#include "bench/suite/problems.h"

namespace gpuvm::suite {
namespace {

void Run(const HotspotProblem& p, Report& report, HotspotProblem::Outputs* out) {
  const size_t bytes = p.temp.size() * sizeof(float);
  Session session(report);
  CUfunction hotspot;
  if (!session.Open("hotspot.ptx", {{"hotspot", &hotspot}})) return;
  CUdeviceptr d_power, d_a, d_b;
  if (!session.Alloc({{&d_power, bytes}, {&d_a, bytes}, {&d_b, bytes}})) return;

  report.Enter(Phase::kHtoD);
  if (!session.CopyIn({{d_power, p.power.data(), bytes}, {d_a, p.temp.data(), bytes}})) return;
  GPUVM_SUITE_CU(report, cuMemsetD32(d_b, 0, p.temp.size()));

  report.Enter(Phase::kLaunch);
  int rows = p.rows, cols = p.cols;
  // The 20-byte HotspotParams struct is passed by value (its PTX parameter is a .b8 array).
  float params[5];
  for (int i = 0; i < 5; ++i) params[i] = p.params[i];
  for (int s = 0; s < p.steps; ++s) {
    CUdeviceptr from = s % 2 == 0 ? d_a : d_b, to = s % 2 == 0 ? d_b : d_a;
    void* args[] = {&d_power, &from, &to, &rows, &cols, params};
    GPUVM_SUITE_CU(report, cuLaunchKernel(hotspot, Blocks(cols, 16), Blocks(rows, 16), 1, 16, 16, 1,
                                          0, nullptr, args, nullptr));
  }
  GPUVM_SUITE_CU(report, cuCtxSynchronize());

  report.Enter(Phase::kDtoH);
  p.SizeOutputs(out);
  session.CopyOut({{out->a.data(), d_a, bytes}, {out->b.data(), d_b, bytes}});
}

}  // namespace
}  // namespace gpuvm::suite

int main(int argc, char** argv) {
  using namespace gpuvm::suite;
  return ProgramMain<HotspotProblem>(argc, argv, "hs", "driver", MakeHotspot, Run);
}
