// Device printf through the driver API, as a program sees it (libcuda.so.1 and our cuda.h): a
// module nvcc compiled with a printf in its kernel, its output on stdout at each sync point CUDA
// documents and only there, the printf FIFO limit (CU_LIMIT_PRINTF_FIFO_SIZE) and what a full FIFO
// does, and a FIFO that starts empty after every drain.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "runtime/include/cuda.h"

namespace {

#define ASSERT_CU(expr) ASSERT_EQ((expr), CUDA_SUCCESS) << #expr
#define EXPECT_CU(expr) EXPECT_EQ((expr), CUDA_SUCCESS) << #expr

// nvcc 13 -ptx -O3 of:
//   extern "C" __global__ void hello(int tag, int* rets) {
//     int t = blockIdx.x * blockDim.x + threadIdx.x;
//     rets[t] = printf("tag %d thread %d of %u: %s %.1f\n", tag, t, gridDim.x * blockDim.x,
//                      (t & 1) ? "odd" : "even", t * 0.5f);
//   }
constexpr const char* kHelloPtx = R"(
.version 9.0
.target sm_75
.address_size 64
.extern .func  (.param .b32 func_retval0) vprintf
(
  .param .b64 vprintf_param_0,
  .param .b64 vprintf_param_1
)
;
.global .align 1 .b8 $str[4] = {111, 100, 100};
.global .align 1 .b8 $str$1[5] = {101, 118, 101, 110};
.global .align 1 .b8 $str$2[33] = {116, 97, 103, 32, 37, 100, 32, 116, 104, 114, 101, 97, 100, 32, 37, 100, 32, 111, 102, 32, 37, 117, 58, 32, 37, 115, 32, 37, 46, 49, 102, 10};
.visible .entry hello(
  .param .u32 hello_param_0,
  .param .u64 hello_param_1
)
{
  .local .align 16 .b8   __local_depot0[32];
  .reg .b64   %SP;
  .reg .b64   %SPL;
  .reg .pred   %p<2>;
  .reg .f32   %f<3>;
  .reg .b32   %r<10>;
  .reg .f64   %fd<2>;
  .reg .b64   %rd<15>;
  mov.u64   %SPL, __local_depot0;
  cvta.local.u64   %SP, %SPL;
  ld.param.u64   %rd1, [hello_param_1];
  cvta.to.global.u64   %rd2, %rd1;
  add.u64   %rd3, %SP, 0;
  add.u64   %rd4, %SPL, 0;
  mov.u32   %r1, %ctaid.x;
  mov.u32   %r2, %ntid.x;
  mov.u32   %r3, %tid.x;
  mov.u32   %r4, %nctaid.x;
  mul.lo.s32   %r5, %r4, %r2;
  mad.lo.s32   %r6, %r1, %r2, %r3;
  and.b32    %r7, %r6, 1;
  setp.eq.b32   %p1, %r7, 1;
  cvt.rn.f32.s32   %f1, %r6;
  mul.f32   %f2, %f1, 0f3F000000;
  cvt.f64.f32   %fd1, %f2;
  ld.param.u32   %r8, [hello_param_0];
  st.local.v2.u32   [%rd4], {%r8, %r6};
  st.local.u32   [%rd4+8], %r5;
  mov.u64   %rd5, $str$1;
  cvta.global.u64   %rd6, %rd5;
  mov.u64   %rd7, $str;
  cvta.global.u64   %rd8, %rd7;
  selp.b64   %rd9, %rd8, %rd6, %p1;
  mov.b64   %rd10, %fd1;
  st.local.v2.u64   [%rd4+16], {%rd9, %rd10};
  mov.u64   %rd11, $str$2;
  cvta.global.u64   %rd12, %rd11;
  { // callseq 0, 0
  .reg .b32 temp_param_reg;
  .param .b64 param0;
  st.param.b64   [param0+0], %rd12;
  .param .b64 param1;
  st.param.b64   [param1+0], %rd3;
  .param .b32 retval0;
  call.uni (retval0),
  vprintf,
  (
  param0,
  param1
  );
  ld.param.b32   %r9, [retval0+0];
  } // callseq 0
  mul.wide.s32   %rd13, %r6, 4;
  add.s64   %rd14, %rd2, %rd13;
  st.global.u32   [%rd14], %r9;
  ret;
}
)";

std::string Line(int tag, int t, int n) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "tag %d thread %d of %u: %s %.1f\n", tag, t, unsigned(n),
                (t & 1) ? "odd" : "even", t * 0.5);
  return buf;
}

// The lines of `text`, counted.
std::map<std::string, int> Lines(const std::string& text) {
  std::map<std::string, int> lines;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    end = end == std::string::npos ? text.size() : end + 1;
    ++lines[text.substr(at, end - at)];
    at = end;
  }
  return lines;
}

class RuntimePrintf : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_CU(cuInit(0));
    ASSERT_CU(cuDeviceGet(&dev_, 0));
    ASSERT_CU(cuCtxCreate(&ctx_, nullptr, 0, dev_));
    ASSERT_CU(cuModuleLoadData(&module_, kHelloPtx));
    ASSERT_CU(cuModuleGetFunction(&hello_, module_, "hello"));
    ASSERT_CU(cuMemAlloc(&rets_, 1024 * sizeof(int)));
  }
  void TearDown() override {
    if (ctx_) {
      EXPECT_CU(cuCtxDestroy(ctx_));
    }
  }
  void Launch(int tag, unsigned blocks, unsigned threads, CUstream stream = nullptr) {
    void* args[] = {&tag, &rets_};
    ASSERT_CU(cuLaunchKernel(hello_, blocks, 1, 1, threads, 1, 1, 0, stream, args, nullptr));
  }
  // Every thread's line of a `tag` launch of n threads, once.
  static std::map<std::string, int> Want(int tag, int n) {
    std::map<std::string, int> want;
    for (int t = 0; t < n; ++t) ++want[Line(tag, t, n)];
    return want;
  }
  std::vector<int> Rets(int n) {
    std::vector<int> r(n);
    EXPECT_CU(cuMemcpyDtoH(r.data(), rets_, n * sizeof(int)));
    return r;
  }

  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  CUmodule module_ = nullptr;
  CUfunction hello_ = nullptr;
  CUdeviceptr rets_ = 0;
};

TEST_F(RuntimePrintf, PrintsAtCtxSynchronizeOnly) {
  ::testing::internal::CaptureStdout();
  Launch(1, 2, 64);
  Launch(2, 1, 32);
  // Launches are no sync point: nothing yet (the records wait in the FIFO).
  std::string before = ::testing::internal::GetCapturedStdout();
  ::testing::internal::CaptureStdout();
  ASSERT_CU(cuCtxSynchronize());
  std::string after = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(before, "");
  std::map<std::string, int> want = Want(1, 128);
  for (const auto& [line, n] : Want(2, 32)) want[line] += n;
  EXPECT_EQ(Lines(after), want);
  // Nothing is printed twice: the next sync point has nothing to say.
  ::testing::internal::CaptureStdout();
  ASSERT_CU(cuCtxSynchronize());
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "");
  for (int r : Rets(32)) EXPECT_EQ(r, 5);  // printf returns its argument count
}

TEST_F(RuntimePrintf, OtherSyncPoints) {
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  ::testing::internal::CaptureStdout();
  Launch(3, 1, 8, s);
  ASSERT_CU(cuStreamSynchronize(s));
  EXPECT_EQ(Lines(::testing::internal::GetCapturedStdout()), Want(3, 8));

  CUevent e;
  ASSERT_CU(cuEventCreate(&e, 0));
  ::testing::internal::CaptureStdout();
  Launch(4, 1, 8, s);
  ASSERT_CU(cuEventRecord(e, s));
  ASSERT_CU(cuEventSynchronize(e));
  EXPECT_EQ(Lines(::testing::internal::GetCapturedStdout()), Want(4, 8));

  ::testing::internal::CaptureStdout();
  Launch(5, 1, 8);
  std::vector<int> r = Rets(8);  // a blocking copy
  EXPECT_EQ(Lines(::testing::internal::GetCapturedStdout()), Want(5, 8));
  EXPECT_EQ(r[7], 5);

  ::testing::internal::CaptureStdout();
  Launch(6, 1, 8);
  ASSERT_CU(cuModuleUnload(module_));
  module_ = nullptr;
  EXPECT_EQ(Lines(::testing::internal::GetCapturedStdout()), Want(6, 8));

  ASSERT_CU(cuModuleLoadData(&module_, kHelloPtx));
  ASSERT_CU(cuModuleGetFunction(&hello_, module_, "hello"));
  ::testing::internal::CaptureStdout();
  Launch(7, 1, 8);
  ASSERT_CU(cuEventDestroy(e));
  ASSERT_CU(cuStreamDestroy(s));
  ASSERT_CU(cuCtxDestroy(ctx_));
  ctx_ = nullptr;
  EXPECT_EQ(Lines(::testing::internal::GetCapturedStdout()), Want(7, 8));
}

TEST_F(RuntimePrintf, FifoLimit) {
  size_t v = 0;
  ASSERT_CU(cuCtxGetLimit(&v, CU_LIMIT_PRINTF_FIFO_SIZE));
  EXPECT_EQ(v, 1u << 20);
  EXPECT_EQ(cuCtxGetLimit(nullptr, CU_LIMIT_PRINTF_FIFO_SIZE), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuCtxGetLimit(&v, CUlimit(99)), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE), CUDA_ERROR_UNSUPPORTED_LIMIT);
  EXPECT_EQ(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 1 << 20), CUDA_ERROR_UNSUPPORTED_LIMIT);
  EXPECT_EQ(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 8), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, size_t{1} << 40), CUDA_ERROR_INVALID_VALUE);

  // A FIFO too small for a 256-thread launch: whole lines only, some of them; then, after the
  // drain, the next launch starts from an empty FIFO.
  ASSERT_CU(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 4096));
  ASSERT_CU(cuCtxGetLimit(&v, CU_LIMIT_PRINTF_FIFO_SIZE));
  EXPECT_EQ(v, 4096u);
  ::testing::internal::CaptureStdout();
  Launch(8, 4, 64);
  ASSERT_CU(cuCtxSynchronize());
  const std::map<std::string, int> partial = Lines(::testing::internal::GetCapturedStdout());
  const std::map<std::string, int> all = Want(8, 256);
  int lines = 0;
  for (const auto& [line, n] : partial) {
    EXPECT_EQ(all.count(line), 1u) << line;
    EXPECT_EQ(n, 1) << line;
    lines += n;
  }
  EXPECT_GT(lines, 10);
  EXPECT_LT(lines, 256);
  for (int r : Rets(256)) EXPECT_EQ(r, 5);  // dropped or not, printf "succeeded"
  ::testing::internal::CaptureStdout();
  Launch(9, 1, 4);
  ASSERT_CU(cuCtxSynchronize());
  EXPECT_EQ(Lines(::testing::internal::GetCapturedStdout()), Want(9, 4));

  // A new size after printf launches: what is buffered is printed first, then the loaded module
  // gets a FIFO of the new size.
  ::testing::internal::CaptureStdout();
  Launch(10, 1, 4);
  ASSERT_CU(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 1 << 16));
  EXPECT_EQ(Lines(::testing::internal::GetCapturedStdout()), Want(10, 4));
  ::testing::internal::CaptureStdout();
  Launch(11, 4, 64);
  ASSERT_CU(cuCtxSynchronize());
  EXPECT_EQ(Lines(::testing::internal::GetCapturedStdout()), Want(11, 256));
}

}  // namespace
