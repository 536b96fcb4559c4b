// bp, runtime-API build (stock nvcc): the twin of ../bp.cc — Rodinia's backprop in the kernel
// corpus's form, one training step of a two-layer perceptron.
#include "bench/kernels/backprop.cu"
#include "bench/suite/problems.h"
#include "bench/suite/rt/rt.h"

namespace gpuvm::suite {
namespace {

void Run(const BackpropProblem& p, Report& report, BackpropProblem::Outputs* out) {
  const BackpropProblem::Bytes bytes = p.BufferBytes();
  if (!OpenDevice(report, bp_layer_forward)) return;
  float *d_input, *d_w, *d_old_w, *d_partial, *d_hidden, *d_delta;
  GPUVM_SUITE_RT(report, cudaMalloc(&d_input, bytes.input));
  GPUVM_SUITE_RT(report, cudaMalloc(&d_w, bytes.w));
  GPUVM_SUITE_RT(report, cudaMalloc(&d_old_w, bytes.w));
  GPUVM_SUITE_RT(report, cudaMalloc(&d_partial, bytes.partial));
  GPUVM_SUITE_RT(report, cudaMalloc(&d_hidden, bytes.hidden));
  GPUVM_SUITE_RT(report, cudaMalloc(&d_delta, bytes.hidden));

  report.Enter(Phase::kHtoD);
  GPUVM_SUITE_RT(report, cudaMemcpy(d_input, p.input.data(), bytes.input, cudaMemcpyHostToDevice));
  GPUVM_SUITE_RT(report, cudaMemcpy(d_w, p.w.data(), bytes.w, cudaMemcpyHostToDevice));
  GPUVM_SUITE_RT(report, cudaMemcpy(d_old_w, p.old_w.data(), bytes.w, cudaMemcpyHostToDevice));
  GPUVM_SUITE_RT(report, cudaMemcpy(d_delta, p.delta.data(), bytes.hidden, cudaMemcpyHostToDevice));
  GPUVM_SUITE_RT(report, cudaMemset(d_hidden, 0, bytes.hidden));

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
                 cudaMemcpy(out->partial.data(), d_partial, bytes.partial, cudaMemcpyDeviceToHost));
  GPUVM_SUITE_RT(report,
                 cudaMemcpy(out->hidden.data(), d_hidden, bytes.hidden, cudaMemcpyDeviceToHost));
  GPUVM_SUITE_RT(report, cudaMemcpy(out->w.data(), d_w, bytes.w, cudaMemcpyDeviceToHost));
  GPUVM_SUITE_RT(report, cudaMemcpy(out->old_w.data(), d_old_w, bytes.w, cudaMemcpyDeviceToHost));

  CloseDevice(report, {d_input, d_w, d_old_w, d_partial, d_hidden, d_delta});
}

}  // namespace
}  // namespace gpuvm::suite

int main(int argc, char** argv) {
  using namespace gpuvm::suite;
  return ProgramMain<BackpropProblem>(argc, argv, "bp", "runtime", MakeBackprop, Run);
}
