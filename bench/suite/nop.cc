// nop: no GPU operation — context creation and destruction only. GPUvm's nop, the benchmark that
// measures what bringing a GPU context up and down costs in each mode (the paper's FV Naive: 389x).
#include "bench/suite/driver.h"
#include "bench/suite/report.h"

namespace gpuvm::suite {
namespace {

void Run(Report& report) {
  report.Enter(Phase::kInit);
  CUcontext context;
  std::string failed_call;
  if (const CUresult r = OpenContext(&context, &failed_call); r != CUDA_SUCCESS) {
    report.Fail(CuError(r, failed_call.c_str()));
    return;
  }
  report.Enter(Phase::kClose);
  GPUVM_SUITE_CU(report, cuCtxDestroy(context));
  report.End();
}

}  // namespace
}  // namespace gpuvm::suite

int main(int argc, char** argv) {
  using namespace gpuvm::suite;
  const Size size = ParseCommandLine(argc, argv, "nop");
  Report report("nop", "driver", size, "context create + destroy");
  Run(report);
  return report.Finish();
}
