// libcuda.so.1 as code written for older CUDA sees it: the 3-argument cuCtxCreate (through
// GPUVM_CUDA_CTX_CREATE_V2, cuda.h) and the legacy execution control API Gdev's programs launch
// with (cuFuncSetBlockShape, cuFuncSetSharedSize, cuParamSet*, cuLaunch, cuLaunchGrid,
// cuLaunchGridAsync): results checked, and bad handles and values refused.
#define GPUVM_CUDA_CTX_CREATE_V2
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/include/cuda.h"
#include "runtime/tests/test_kernels.h"

namespace {

#define ASSERT_CU(expr) ASSERT_EQ((expr), CUDA_SUCCESS) << #expr
#define EXPECT_CU(expr) EXPECT_EQ((expr), CUDA_SUCCESS) << #expr

class RuntimeLegacyApi : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_CU(cuInit(0));
    ASSERT_CU(cuDeviceGet(&dev_, 0));
    ASSERT_CU(cuCtxCreate(&ctx_, 0, dev_));  // the 3-argument form: cuCtxCreate_v2
    image_ = gpuvm::runtime::testing::TestModuleImage();
    ASSERT_CU(cuModuleLoadData(&module_, image_.data()));
    ASSERT_CU(cuModuleGetFunction(&vadd_, module_, "vadd"));
  }
  void TearDown() override {
    if (ctx_) {
      EXPECT_CU(cuCtxDestroy(ctx_));
    }
  }
  // vadd(a, b, c, n): c[i] = a[i] + b[i] for i < n, its parameters set the way Gdev's tests do:
  // one cuParamSet* per parameter at a running offset, then cuParamSetSize.
  void SetVaddParams(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, uint32_t n) {
    int offset = 0;
    for (CUdeviceptr p : {a, b, c}) {
      ASSERT_CU(cuParamSetv(vadd_, offset, &p, sizeof p));
      offset += sizeof p;
    }
    ASSERT_CU(cuParamSeti(vadd_, offset, n));
    offset += sizeof n;
    ASSERT_CU(cuParamSetSize(vadd_, offset));
  }

  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  CUmodule module_ = nullptr;
  CUfunction vadd_ = nullptr;
  std::vector<uint8_t> image_;
};

TEST_F(RuntimeLegacyApi, GdevStyleLaunchesAreCorrect) {
  const uint32_t n = 5000;
  std::vector<uint32_t> a(n), b(n), c(n, 0);
  for (uint32_t i = 0; i < n; ++i) {
    a[i] = 7 * i;
    b[i] = i + 3;
  }
  CUdeviceptr da, db, dc;
  ASSERT_CU(cuMemAlloc(&da, n * 4));
  ASSERT_CU(cuMemAlloc(&db, n * 4));
  ASSERT_CU(cuMemAlloc(&dc, n * 4));
  ASSERT_CU(cuMemcpyHtoD(da, a.data(), n * 4));
  ASSERT_CU(cuMemcpyHtoD(db, b.data(), n * 4));
  ASSERT_CU(cuFuncSetBlockShape(vadd_, 128, 1, 1));
  ASSERT_CU(cuFuncSetSharedSize(vadd_, 0));
  SetVaddParams(da, db, dc, n);
  ASSERT_CU(cuLaunchGrid(vadd_, (n + 127) / 128, 1));
  ASSERT_CU(cuCtxSynchronize());
  ASSERT_CU(cuMemcpyDtoH(c.data(), dc, n * 4));
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(c[i], 8 * i + 3) << i;

  // Async on a stream, with the operands swapped: the parameters set last are the ones launched.
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, 0));
  SetVaddParams(dc, da, db, n);  // b = c + a
  ASSERT_CU(cuLaunchGridAsync(vadd_, (n + 127) / 128, 1, s));
  ASSERT_CU(cuStreamSynchronize(s));
  ASSERT_CU(cuMemcpyDtoH(b.data(), db, n * 4));
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(b[i], 15 * i + 3) << i;
  ASSERT_CU(cuStreamDestroy(s));

  // cuLaunch is a 1x1 grid: one block of 128 threads touches only the first 128 elements.
  ASSERT_CU(cuMemsetD32(dc, 0, n));
  SetVaddParams(da, da, dc, n);
  ASSERT_CU(cuLaunch(vadd_));
  ASSERT_CU(cuCtxSynchronize());
  ASSERT_CU(cuMemcpyDtoH(c.data(), dc, n * 4));
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(c[i], i < 128 ? 14 * i : 0u) << i;
  ASSERT_CU(cuMemFree(da));
  ASSERT_CU(cuMemFree(db));
  ASSERT_CU(cuMemFree(dc));
}

TEST_F(RuntimeLegacyApi, BadHandlesAndValuesAreRefused) {
  // No block shape yet: the launch is refused, not run with a made-up one.
  CUdeviceptr d;
  ASSERT_CU(cuMemAlloc(&d, 4096));
  SetVaddParams(d, d, d, 0);
  EXPECT_EQ(cuLaunchGrid(vadd_, 1, 1), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuFuncSetBlockShape(vadd_, 32, 1, 1));
  EXPECT_EQ(cuFuncSetBlockShape(vadd_, 0, 1, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuFuncSetBlockShape(vadd_, 32, -1, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuFuncSetBlockShape(vadd_, 2048, 1, 1), CUDA_SUCCESS);  // refused at launch
  EXPECT_EQ(cuLaunchGrid(vadd_, 1, 1), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuFuncSetBlockShape(vadd_, 32, 1, 1));
  EXPECT_EQ(cuLaunchGrid(vadd_, 0, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLaunchGrid(vadd_, 1, -5), CUDA_ERROR_INVALID_VALUE);
  // Parameters outside the 4 KiB buffer, negative offsets, a null source.
  EXPECT_EQ(cuParamSeti(vadd_, 4093, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuParamSeti(vadd_, -4, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuParamSetv(vadd_, 0, nullptr, 8), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuParamSetSize(vadd_, 4097), CUDA_ERROR_INVALID_VALUE);
  // Fewer parameter bytes than the kernel reads (28): refused at launch.
  ASSERT_CU(cuParamSetSize(vadd_, 20));
  EXPECT_EQ(cuLaunchGrid(vadd_, 1, 1), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuParamSetSize(vadd_, 28));
  ASSERT_CU(cuLaunchGrid(vadd_, 1, 1));  // n = 0: nothing to do, but a valid launch
  ASSERT_CU(cuCtxSynchronize());
  // Shared memory past the per-block limit is refused at launch.
  ASSERT_CU(cuFuncSetSharedSize(vadd_, 48 * 1024 + 1));
  EXPECT_EQ(cuLaunch(vadd_), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuFuncSetSharedSize(vadd_, 0));
  // Texture references do not exist here.
  EXPECT_EQ(cuParamSetTexRef(vadd_, CU_PARAM_TR_DEFAULT, nullptr), CUDA_ERROR_NOT_SUPPORTED);
  // Not a function, or one whose module is gone.
  int not_a_function = 0;
  auto* bogus = reinterpret_cast<CUfunction>(&not_a_function);
  EXPECT_EQ(cuFuncSetBlockShape(bogus, 1, 1, 1), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuParamSeti(nullptr, 0, 1), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuLaunch(bogus), CUDA_ERROR_INVALID_HANDLE);
  ASSERT_CU(cuModuleUnload(module_));
  EXPECT_EQ(cuLaunchGrid(vadd_, 1, 1), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuParamSetSize(vadd_, 0), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuFuncSetSharedSize(vadd_, 0), CUDA_ERROR_INVALID_HANDLE);
  ASSERT_CU(cuMemFree(d));
}

}  // namespace
