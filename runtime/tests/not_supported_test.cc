// The entry points of runtime/abi/*_not_supported.def as a program meets them: found under
// NVIDIA's names, answering the not-supported code (the runtime's also as the last error), and
// saying which function it was on stderr once, not at every call.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

#include "runtime/include/cuda.h"
#include "runtime/include/cuda_runtime_api.h"

namespace {

using EntryPoint = int (*)();

EntryPoint Find(const char* name) {
  return reinterpret_cast<EntryPoint>(::dlsym(RTLD_DEFAULT, name));
}

// Calls `name` twice; returns both results and what the calls printed.
struct Calls {
  int first = 0, second = 0;
  std::string said_first, said_second;
};
Calls CallTwice(const char* name) {
  Calls c;
  EntryPoint f = Find(name);
  EXPECT_NE(f, nullptr) << name << " is not exported";
  if (f == nullptr) return c;
  ::testing::internal::CaptureStderr();
  c.first = f();
  c.said_first = ::testing::internal::GetCapturedStderr();
  ::testing::internal::CaptureStderr();
  c.second = f();
  c.said_second = ::testing::internal::GetCapturedStderr();
  return c;
}

TEST(RuntimeNotSupported, DriverEntryPointsAnswerAndSayWhichOnce) {
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  // One of the current API, and an old unsuffixed ABI name (cuMemAlloc before CUDA 3.2).
  for (const char* name : {"cuGraphAddChildGraphNode", "cuGraphicsMapResources", "cuMemAlloc"}) {
    Calls c = CallTwice(name);
    EXPECT_EQ(c.first, CUDA_ERROR_NOT_SUPPORTED) << name;
    EXPECT_EQ(c.second, CUDA_ERROR_NOT_SUPPORTED) << name;
    EXPECT_EQ(c.said_first,
              "gpuvm: " + std::string(name) + " is not supported (CUDA_ERROR_NOT_SUPPORTED)\n");
    EXPECT_EQ(c.said_second, "") << "logged twice";
  }
}

TEST(RuntimeNotSupported, RuntimeEntryPointsSetTheLastError) {
  (void)cudaGetLastError();
  Calls c = CallTwice("cudaGraphAddChildGraphNode");
  EXPECT_EQ(c.first, cudaErrorNotSupported);
  EXPECT_EQ(c.second, cudaErrorNotSupported);
  EXPECT_NE(c.said_first.find("cudaGraphAddChildGraphNode is not supported"), std::string::npos)
      << c.said_first;
  EXPECT_EQ(c.said_second, "");
  EXPECT_EQ(cudaGetLastError(), cudaErrorNotSupported);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(RuntimeNotSupported, ImplementedFunctionsAreNotInTheTable) {
  // A real function answers for real (a channel descriptor is plain data).
  cudaChannelFormatDesc d = cudaCreateChannelDesc(8, 16, 0, 0, cudaChannelFormatKindUnsigned);
  EXPECT_EQ(d.x, 8);
  EXPECT_EQ(d.y, 16);
  EXPECT_EQ(d.z, 0);
  EXPECT_EQ(d.f, cudaChannelFormatKindUnsigned);
  int count = 0;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(count, 1);
}

}  // namespace
