// compat-gdev: a driver-API program written the way Gdev's test programs (and CUDA code of the
// CUDA 2/3 era) are: the 3-argument cuCtxCreate (our cuda.h's GPUVM_CUDA_CTX_CREATE_V2 macro),
// cuModuleLoad of a PTX file nvcc made (gdev_kernels.cu, path given at build time), and the
// legacy execution control API — cuFuncSetBlockShape, cuParamSeti/Setf/Setv at running offsets,
// cuParamSetSize, cuLaunchGrid — then cuCtxSynchronize. Both kernels' results are checked.
#define GPUVM_CUDA_CTX_CREATE_V2
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/suite/report.h"
#include "runtime/include/cuda.h"

#ifndef GPUVM_COMPAT_GDEV_PTX
#error "GPUVM_COMPAT_GDEV_PTX: the path of the PTX nvcc made from gdev_kernels.cu"
#endif

namespace gpuvm::compat {
namespace {

using suite::Phase;
using suite::Report;
using suite::Size;

std::string CuFailure(CUresult r, const char* call, int line) {
  const char* name = nullptr;
  if (cuGetErrorName(r, &name) != CUDA_SUCCESS || name == nullptr) name = "?";
  return "gdev.cc:" + std::to_string(line) + ": " + call + " failed: " + name + " (" +
         std::to_string(static_cast<int>(r)) + ")";
}

#define CHECK_CU(report, call)                              \
  do {                                                      \
    const CUresult compat_r_ = (call);                      \
    if (compat_r_ != CUDA_SUCCESS) {                        \
      (report).Fail(CuFailure(compat_r_, #call, __LINE__)); \
      return;                                               \
    }                                                       \
  } while (0)

// Gdev's ALIGN_UP for parameter offsets.
int AlignUp(int offset, int alignment) { return (offset + alignment - 1) / alignment * alignment; }

unsigned MatrixN(Size size) { return size == Size::kTest ? 64 : 1024; }

void Run(Size size, Report& report) {
  const unsigned n = MatrixN(size);
  const size_t count = size_t(n) * n, bytes = count * sizeof(unsigned);
  std::vector<unsigned> a(count), b(count), c(count, 0);
  for (size_t i = 0; i < count; ++i) {
    a[i] = unsigned(i * 3);
    b[i] = unsigned(i ^ 0x5a5a);
  }
  const int m = 1000;
  std::vector<float> x(m), y(m, 0);
  for (int i = 0; i < m; ++i) x[i] = float(i) * 0.5f;

  report.Enter(Phase::kInit);
  CUdevice dev;
  CUcontext ctx;
  CUmodule module;
  CUfunction madd, scale;
  CHECK_CU(report, cuInit(0));
  CHECK_CU(report, cuDeviceGet(&dev, 0));
  CHECK_CU(report, cuCtxCreate(&ctx, 0, dev));
  CHECK_CU(report, cuModuleLoad(&module, GPUVM_COMPAT_GDEV_PTX));
  CHECK_CU(report, cuModuleGetFunction(&madd, module, "gdev_madd"));
  CHECK_CU(report, cuModuleGetFunction(&scale, module, "gdev_scale"));
  CUdeviceptr d_a, d_b, d_c, d_x, d_y;
  CHECK_CU(report, cuMemAlloc(&d_a, bytes));
  CHECK_CU(report, cuMemAlloc(&d_b, bytes));
  CHECK_CU(report, cuMemAlloc(&d_c, bytes));
  CHECK_CU(report, cuMemAlloc(&d_x, m * sizeof(float)));
  CHECK_CU(report, cuMemAlloc(&d_y, m * sizeof(float)));

  report.Enter(Phase::kHtoD);
  CHECK_CU(report, cuMemcpyHtoD(d_a, a.data(), bytes));
  CHECK_CU(report, cuMemcpyHtoD(d_b, b.data(), bytes));
  CHECK_CU(report, cuMemcpyHtoD(d_x, x.data(), m * sizeof(float)));

  report.Enter(Phase::kLaunch);
  // madd: 16x16 blocks over the matrix, parameters at running offsets.
  const int block = 16;
  CHECK_CU(report, cuFuncSetBlockShape(madd, block, block, 1));
  int offset = 0;
  for (CUdeviceptr* p : {&d_a, &d_b, &d_c}) {
    offset = AlignUp(offset, alignof(CUdeviceptr));
    CHECK_CU(report, cuParamSetv(madd, offset, p, sizeof *p));
    offset += sizeof *p;
  }
  offset = AlignUp(offset, alignof(unsigned));
  CHECK_CU(report, cuParamSeti(madd, offset, n));
  offset += sizeof(unsigned);
  CHECK_CU(report, cuParamSetSize(madd, offset));
  const int grid = int((n + block - 1) / block);
  CHECK_CU(report, cuLaunchGrid(madd, grid, grid));
  // scale: a float through cuParamSetf, an int and the count after it.
  CHECK_CU(report, cuFuncSetBlockShape(scale, 128, 1, 1));
  offset = 0;
  for (CUdeviceptr* p : {&d_x, &d_y}) {
    CHECK_CU(report, cuParamSetv(scale, offset, p, sizeof *p));
    offset += sizeof *p;
  }
  CHECK_CU(report, cuParamSetf(scale, offset, 3.0f));
  offset += sizeof(float);
  CHECK_CU(report, cuParamSeti(scale, offset, unsigned(-7)));
  offset += sizeof(int);
  CHECK_CU(report, cuParamSeti(scale, offset, m));
  offset += sizeof(int);
  CHECK_CU(report, cuParamSetSize(scale, offset));
  CHECK_CU(report, cuLaunchGrid(scale, (m + 127) / 128, 1));
  CHECK_CU(report, cuCtxSynchronize());

  report.Enter(Phase::kDtoH);
  CHECK_CU(report, cuMemcpyDtoH(c.data(), d_c, bytes));
  CHECK_CU(report, cuMemcpyDtoH(y.data(), d_y, m * sizeof(float)));

  report.Enter(Phase::kClose);
  for (CUdeviceptr p : {d_a, d_b, d_c, d_x, d_y}) CHECK_CU(report, cuMemFree(p));
  CHECK_CU(report, cuModuleUnload(module));
  CHECK_CU(report, cuCtxDestroy(ctx));
  report.End();

  for (size_t i = 0; i < count; ++i) {
    if (c[i] != a[i] + b[i]) {
      report.Verify("c[" + std::to_string(i) + "] = " + std::to_string(c[i]) + ", want " +
                    std::to_string(a[i] + b[i]));
      return;
    }
  }
  for (int i = 0; i < m; ++i) {
    const float want = x[i] * 3.0f + -7.0f;  // exact: x is a multiple of 0.5 below 500
    if (y[i] != want) {
      report.Verify("y[" + std::to_string(i) + "] = " + std::to_string(y[i]) + ", want " +
                    std::to_string(want));
      return;
    }
  }
}

}  // namespace
}  // namespace gpuvm::compat

int main(int argc, char** argv) {
  using namespace gpuvm::compat;
  const Size size = gpuvm::suite::ParseCommandLine(argc, argv, "gdev");
  const unsigned n = MatrixN(size);
  Report report("gdev", "driver", size,
                std::to_string(n) + "x" + std::to_string(n) +
                    " madd and a 1000-float scale, legacy launches");
  Run(size, report);
  return report.Finish();
}
