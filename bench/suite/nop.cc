// nop: no GPU operation — context creation and destruction only. GPUvm's nop, the benchmark that
// measures what bringing a GPU context up and down costs in each mode (the paper's FV Naive: 389x).
#include "bench/suite/driver.h"
#include "bench/suite/report.h"

namespace gpuvm::suite {
namespace {

void Run(Report& report) {
  Session session(report);
  if (session.Open(nullptr)) session.Close({});
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
