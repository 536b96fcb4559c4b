// bp: Rodinia's backprop in the kernel corpus's form (bench/kernels/backprop.cu) — one training
// step of a two-layer perceptron: the forward pass with per-block partial sums, the squash of the
// hidden layer, and the weight adjustment with momentum.
#include "bench/suite/driver.h"
#include "bench/suite/problems.h"

namespace gpuvm::suite {
namespace {

void Run(const BackpropProblem& p, Report& report, BackpropProblem::Outputs* out) {
  const BackpropProblem::Bytes bytes = p.BufferBytes();
  Session session(report);
  CUfunction forward, squash, adjust;
  if (!session.Open("backprop.ptx", {{"bp_layer_forward", &forward},
                                     {"bp_layer_squash", &squash},
                                     {"bp_adjust_weights", &adjust}})) {
    return;
  }
  CUdeviceptr d_input, d_w, d_old_w, d_partial, d_hidden, d_delta;
  if (!session.Alloc({{&d_input, bytes.input},
                      {&d_w, bytes.w},
                      {&d_old_w, bytes.w},
                      {&d_partial, bytes.partial},
                      {&d_hidden, bytes.hidden},
                      {&d_delta, bytes.hidden}})) {
    return;
  }

  report.Enter(Phase::kHtoD);
  if (!session.CopyIn({{d_input, p.input.data(), bytes.input},
                       {d_w, p.w.data(), bytes.w},
                       {d_old_w, p.old_w.data(), bytes.w},
                       {d_delta, p.delta.data(), bytes.hidden}})) {
    return;
  }
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
  p.SizeOutputs(out);
  session.CopyOut({{out->partial.data(), d_partial, bytes.partial},
                   {out->hidden.data(), d_hidden, bytes.hidden},
                   {out->w.data(), d_w, bytes.w},
                   {out->old_w.data(), d_old_w, bytes.w}});
}

}  // namespace
}  // namespace gpuvm::suite

int main(int argc, char** argv) {
  using namespace gpuvm::suite;
  return ProgramMain<BackpropProblem>(argc, argv, "bp", "driver", MakeBackprop, Run);
}
