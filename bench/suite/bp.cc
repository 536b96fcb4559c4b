// bp: Rodinia's backprop in the kernel corpus's form (bench/kernels/backprop.cu) — one training
// step of a two-layer perceptron: the forward pass with per-block partial sums, the squash of the
// hidden layer, and the weight adjustment with momentum.
#include <vector>

#include "bench/suite/driver.h"
#include "bench/suite/problems.h"

namespace gpuvm::suite {
namespace {

struct Outputs {
  std::vector<float> partial, hidden, w, old_w;
};

void Run(const BackpropProblem& p, Report& report, Outputs* out) {
  const size_t input_bytes = p.input.size() * sizeof(float);
  const size_t w_bytes = p.w.size() * sizeof(float);
  const size_t partial_bytes = p.want_partial.size() * sizeof(float);
  const size_t hidden_bytes = (p.hid + 1) * sizeof(float);
  report.Enter(Phase::kInit);
  CUcontext context;
  std::string failed_call;
  if (const CUresult r = OpenContext(&context, &failed_call); r != CUDA_SUCCESS) {
    report.Fail(CuError(r, failed_call.c_str()));
    return;
  }
  CUmodule module;
  GPUVM_SUITE_CU(report, LoadCorpusModule(&module, "backprop.ptx"));
  CUfunction forward, squash, adjust;
  GPUVM_SUITE_CU(report, cuModuleGetFunction(&forward, module, "bp_layer_forward"));
  GPUVM_SUITE_CU(report, cuModuleGetFunction(&squash, module, "bp_layer_squash"));
  GPUVM_SUITE_CU(report, cuModuleGetFunction(&adjust, module, "bp_adjust_weights"));
  CUdeviceptr d_input, d_w, d_old_w, d_partial, d_hidden, d_delta;
  GPUVM_SUITE_CU(report, cuMemAlloc(&d_input, input_bytes));
  GPUVM_SUITE_CU(report, cuMemAlloc(&d_w, w_bytes));
  GPUVM_SUITE_CU(report, cuMemAlloc(&d_old_w, w_bytes));
  GPUVM_SUITE_CU(report, cuMemAlloc(&d_partial, partial_bytes));
  GPUVM_SUITE_CU(report, cuMemAlloc(&d_hidden, hidden_bytes));
  GPUVM_SUITE_CU(report, cuMemAlloc(&d_delta, hidden_bytes));

  report.Enter(Phase::kHtoD);
  GPUVM_SUITE_CU(report, cuMemcpyHtoD(d_input, p.input.data(), input_bytes));
  GPUVM_SUITE_CU(report, cuMemcpyHtoD(d_w, p.w.data(), w_bytes));
  GPUVM_SUITE_CU(report, cuMemcpyHtoD(d_old_w, p.old_w.data(), w_bytes));
  GPUVM_SUITE_CU(report, cuMemcpyHtoD(d_delta, p.delta.data(), hidden_bytes));
  GPUVM_SUITE_CU(report, cuMemsetD32(d_hidden, 0, p.hid + 1));

  report.Enter(Phase::kLaunch);
  int in = p.in, hid = p.hid, blocks = p.blocks;
  void* forward_args[] = {&d_input, &d_w, &d_partial, &in, &hid};
  GPUVM_SUITE_CU(report, cuLaunchKernel(forward, Blocks(hid, 16), Blocks(in, 16), 1, 16, 16, 1, 0,
                                        nullptr, forward_args, nullptr));
  void* squash_args[] = {&d_partial, &d_input, &d_w, &d_hidden, &blocks, &hid};
  GPUVM_SUITE_CU(report, cuLaunchKernel(squash, Blocks(hid, 256), 1, 1, 256, 1, 1, 0, nullptr,
                                        squash_args, nullptr));
  void* adjust_args[] = {&d_delta, &d_input, &d_w, &d_old_w, &in, &hid};
  GPUVM_SUITE_CU(report, cuLaunchKernel(adjust, Blocks(hid, 16), Blocks(in + 1, 16), 1, 16, 16, 1,
                                        0, nullptr, adjust_args, nullptr));
  GPUVM_SUITE_CU(report, cuCtxSynchronize());

  report.Enter(Phase::kDtoH);
  out->partial.resize(p.want_partial.size());
  out->hidden.resize(p.hid + 1);
  out->w.resize(p.w.size());
  out->old_w.resize(p.w.size());
  GPUVM_SUITE_CU(report, cuMemcpyDtoH(out->partial.data(), d_partial, partial_bytes));
  GPUVM_SUITE_CU(report, cuMemcpyDtoH(out->hidden.data(), d_hidden, hidden_bytes));
  GPUVM_SUITE_CU(report, cuMemcpyDtoH(out->w.data(), d_w, w_bytes));
  GPUVM_SUITE_CU(report, cuMemcpyDtoH(out->old_w.data(), d_old_w, w_bytes));

  report.Enter(Phase::kClose);
  for (CUdeviceptr d : {d_input, d_w, d_old_w, d_partial, d_hidden, d_delta}) {
    GPUVM_SUITE_CU(report, cuMemFree(d));
  }
  GPUVM_SUITE_CU(report, cuModuleUnload(module));
  GPUVM_SUITE_CU(report, cuCtxDestroy(context));
  report.End();
}

}  // namespace
}  // namespace gpuvm::suite

int main(int argc, char** argv) {
  using namespace gpuvm::suite;
  const Size size = ParseCommandLine(argc, argv, "bp");
  const BackpropProblem problem = MakeBackprop(size);
  Report report("bp", "driver", size, problem.Describe());
  Outputs out;
  Run(problem, report, &out);
  if (!report.failed()) report.Verify(problem.Check(out.partial, out.hidden, out.w, out.old_w));
  return report.Finish();
}
