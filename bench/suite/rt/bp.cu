// bp, runtime-API build (stock nvcc): the twin of ../bp.cc — Rodinia's backprop in the kernel
// corpus's form, one training step of a two-layer perceptron.
#include "bench/kernels/backprop.cu"
#include "bench/suite/problems.h"
#include "bench/suite/rt/rt.h"

namespace gpuvm::suite {
namespace {

void Run(const BackpropProblem& p, Report& report, BackpropProblem::Outputs* out) {
  const size_t input_bytes = p.input.size() * sizeof(float);
  const size_t w_bytes = p.w.size() * sizeof(float);
  const size_t partial_bytes = p.want_partial.size() * sizeof(float);
  const size_t hidden_bytes = (p.hid + 1) * sizeof(float);
  if (!OpenDevice(report, bp_layer_forward)) return;
  float *d_input, *d_w, *d_old_w, *d_partial, *d_hidden, *d_delta;
  GPUVM_SUITE_RT(report, cudaMalloc(&d_input, input_bytes));
  GPUVM_SUITE_RT(report, cudaMalloc(&d_w, w_bytes));
  GPUVM_SUITE_RT(report, cudaMalloc(&d_old_w, w_bytes));
  GPUVM_SUITE_RT(report, cudaMalloc(&d_partial, partial_bytes));
  GPUVM_SUITE_RT(report, cudaMalloc(&d_hidden, hidden_bytes));
  GPUVM_SUITE_RT(report, cudaMalloc(&d_delta, hidden_bytes));

  report.Enter(Phase::kHtoD);
  GPUVM_SUITE_RT(report, cudaMemcpy(d_input, p.input.data(), input_bytes, cudaMemcpyHostToDevice));
  GPUVM_SUITE_RT(report, cudaMemcpy(d_w, p.w.data(), w_bytes, cudaMemcpyHostToDevice));
  GPUVM_SUITE_RT(report, cudaMemcpy(d_old_w, p.old_w.data(), w_bytes, cudaMemcpyHostToDevice));
  GPUVM_SUITE_RT(report, cudaMemcpy(d_delta, p.delta.data(), hidden_bytes, cudaMemcpyHostToDevice));
  GPUVM_SUITE_RT(report, cudaMemset(d_hidden, 0, hidden_bytes));

  report.Enter(Phase::kLaunch);
  bp_layer_forward<<<dim3(Blocks(p.hid, 16), Blocks(p.in, 16)), dim3(16, 16)>>>(
      d_input, d_w, d_partial, p.in, p.hid);
  GPUVM_SUITE_RT_LAUNCHED(report);
  bp_layer_squash<<<Blocks(p.hid, 256), 256>>>(d_partial, d_input, d_w, d_hidden, p.blocks, p.hid);
  GPUVM_SUITE_RT_LAUNCHED(report);
  bp_adjust_weights<<<dim3(Blocks(p.hid, 16), Blocks(p.in + 1, 16)), dim3(16, 16)>>>(
      d_delta, d_input, d_w, d_old_w, p.in, p.hid);
  GPUVM_SUITE_RT_LAUNCHED(report);
  GPUVM_SUITE_RT(report, cudaDeviceSynchronize());

  report.Enter(Phase::kDtoH);
  p.SizeOutputs(out);
  GPUVM_SUITE_RT(report,
                 cudaMemcpy(out->partial.data(), d_partial, partial_bytes, cudaMemcpyDeviceToHost));
  GPUVM_SUITE_RT(report,
                 cudaMemcpy(out->hidden.data(), d_hidden, hidden_bytes, cudaMemcpyDeviceToHost));
  GPUVM_SUITE_RT(report, cudaMemcpy(out->w.data(), d_w, w_bytes, cudaMemcpyDeviceToHost));
  GPUVM_SUITE_RT(report, cudaMemcpy(out->old_w.data(), d_old_w, w_bytes, cudaMemcpyDeviceToHost));

  CloseDevice(report, {d_input, d_w, d_old_w, d_partial, d_hidden, d_delta});
}

}  // namespace
}  // namespace gpuvm::suite

int main(int argc, char** argv) {
  using namespace gpuvm::suite;
  return ProgramMain<BackpropProblem>(argc, argv, "bp", "runtime", MakeBackprop, Run);
}
