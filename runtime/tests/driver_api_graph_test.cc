// libcuda.so.1's graphs and stream capture as programs see them (runtime/driver_api_graph.h):
// captured work runs only when the graph is launched, and every launch again; graphs built node by
// node run in dependency order; what CUDA refuses during a capture is refused, and the refusals
// change nothing else (the legacy stream works again once the capture ends).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "runtime/include/cuda.h"
#include "runtime/tests/test_kernels.h"

namespace {

#define ASSERT_CU(expr) ASSERT_EQ((expr), CUDA_SUCCESS) << #expr
#define EXPECT_CU(expr) EXPECT_EQ((expr), CUDA_SUCCESS) << #expr

constexpr uint32_t kN = 4096;

class RuntimeGraphs : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_CU(cuInit(0));
    ASSERT_CU(cuDeviceGet(&dev_, 0));
    ASSERT_CU(cuCtxCreate(&ctx_, nullptr, 0, dev_));
    image_ = gpuvm::runtime::testing::TestModuleImage();
    ASSERT_CU(cuModuleLoadData(&module_, image_.data()));
    ASSERT_CU(cuModuleGetFunction(&vadd_, module_, "vadd"));
    for (CUdeviceptr* p : {&a_, &b_, &c_}) ASSERT_CU(cuMemAlloc(p, kN * 4));
    std::vector<uint32_t> a(kN), b(kN);
    for (uint32_t i = 0; i < kN; ++i) a[i] = 3 * i, b[i] = i + 11;
    ASSERT_CU(cuMemcpyHtoD(a_, a.data(), kN * 4));
    ASSERT_CU(cuMemcpyHtoD(b_, b.data(), kN * 4));
    ASSERT_CU(cuMemsetD32(c_, 0, kN));
    ASSERT_CU(cuStreamCreate(&s_, 0));
  }
  void TearDown() override {
    if (ctx_) {
      EXPECT_CU(cuCtxDestroy(ctx_));
    }
  }
  // c = a + b on `stream`.
  CUresult LaunchVadd(CUstream stream, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c) {
    uint32_t n = kN;
    void* args[] = {&a, &b, &c, &n};
    return cuLaunchKernel(vadd_, kN / 128, 1, 1, 128, 1, 1, 0, stream, args, nullptr);
  }
  std::vector<uint32_t> Read(CUdeviceptr p) {
    std::vector<uint32_t> v(kN);
    EXPECT_CU(cuMemcpyDtoH(v.data(), p, kN * 4));
    return v;
  }

  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  CUmodule module_ = nullptr;
  CUfunction vadd_ = nullptr;
  std::vector<uint8_t> image_;
  CUdeviceptr a_ = 0, b_ = 0, c_ = 0;
  CUstream s_ = nullptr;
};

TEST_F(RuntimeGraphs, CapturedWorkRunsAtEachLaunchOnly) {
  std::vector<uint32_t> host(kN, 5);
  ASSERT_CU(cuMemHostRegister(host.data(), kN * 4, 0));
  ASSERT_CU(cuStreamBeginCapture(s_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ASSERT_CU(cuMemcpyHtoDAsync(a_, host.data(), kN * 4, s_));
  ASSERT_CU(LaunchVadd(s_, a_, b_, c_));
  CUgraph graph;
  ASSERT_CU(cuStreamEndCapture(s_, &graph));
  // Nothing ran: c is still zero, a still 3i.
  std::vector<uint32_t> c = Read(c_);
  for (uint32_t i = 0; i < kN; ++i) ASSERT_EQ(c[i], 0u) << i;
  size_t nodes = 0;
  ASSERT_CU(cuGraphGetNodes(graph, nullptr, &nodes));
  EXPECT_EQ(nodes, 2u);
  CUgraphExec exec;
  ASSERT_CU(cuGraphInstantiate(&exec, graph, 0));
  for (uint32_t round = 0; round < 3; ++round) {
    for (uint32_t i = 0; i < kN; ++i) host[i] = 100 * round + i;  // read at launch, not capture
    ASSERT_CU(cuGraphLaunch(exec, s_));
    ASSERT_CU(cuStreamSynchronize(s_));
    c = Read(c_);
    for (uint32_t i = 0; i < kN; ++i)
      ASSERT_EQ(c[i], 100 * round + i + i + 11) << round << " " << i;
  }
  EXPECT_CU(cuGraphExecDestroy(exec));
  EXPECT_CU(cuGraphDestroy(graph));
  EXPECT_CU(cuMemHostUnregister(host.data()));
}

TEST_F(RuntimeGraphs, BuiltGraphRunsInDependencyOrder) {
  // memset c to 7 -> vadd(c = a + b) -> memcpy c to a; added in reverse, joined by dependencies.
  CUgraph g;
  ASSERT_CU(cuGraphCreate(&g, 0));
  CUDA_MEMCPY3D copy{};
  copy.srcMemoryType = CU_MEMORYTYPE_DEVICE, copy.srcDevice = c_;
  copy.dstMemoryType = CU_MEMORYTYPE_DEVICE, copy.dstDevice = a_;
  copy.WidthInBytes = kN * 4, copy.Height = 1, copy.Depth = 1;
  CUgraphNode copy_node, kernel_node, memset_node;
  ASSERT_CU(cuGraphAddMemcpyNode(&copy_node, g, nullptr, 0, &copy, ctx_));
  uint32_t n = kN;
  void* args[] = {&a_, &b_, &c_, &n};
  CUDA_KERNEL_NODE_PARAMS kp{};
  kp.func = vadd_;
  kp.gridDimX = kN / 128, kp.gridDimY = 1, kp.gridDimZ = 1;
  kp.blockDimX = 128, kp.blockDimY = 1, kp.blockDimZ = 1;
  kp.kernelParams = args;
  ASSERT_CU(cuGraphAddKernelNode(&kernel_node, g, nullptr, 0, &kp));
  CUDA_MEMSET_NODE_PARAMS ms{};
  ms.dst = c_, ms.value = 7, ms.elementSize = 4, ms.width = kN, ms.height = 1;
  ASSERT_CU(cuGraphAddMemsetNode(&memset_node, g, nullptr, 0, &ms, ctx_));
  const CUgraphNode from[] = {memset_node, kernel_node};
  const CUgraphNode to[] = {kernel_node, copy_node};
  ASSERT_CU(cuGraphAddDependencies(g, from, to, 2));
  CUgraphExec exec;
  ASSERT_CU(cuGraphInstantiate(&exec, g, 0));
  ASSERT_CU(cuGraphLaunch(exec, s_));
  ASSERT_CU(cuStreamSynchronize(s_));
  std::vector<uint32_t> a = Read(a_);
  for (uint32_t i = 0; i < kN; ++i) ASSERT_EQ(a[i], 3 * i + i + 11) << i;
  // The kernel node's parameters read back, pointing at the graph's own copy of the arguments.
  CUDA_KERNEL_NODE_PARAMS got{};
  ASSERT_CU(cuGraphKernelNodeGetParams(kernel_node, &got));
  EXPECT_EQ(got.func, vadd_);
  EXPECT_EQ(got.gridDimX, kN / 128);
  ASSERT_NE(got.kernelParams, nullptr);
  EXPECT_EQ(*static_cast<CUdeviceptr*>(got.kernelParams[2]), c_);
  EXPECT_NE(got.kernelParams[2], args[2]);
  EXPECT_CU(cuGraphExecDestroy(exec));
  EXPECT_CU(cuGraphDestroy(g));
}

TEST_F(RuntimeGraphs, ForkMustBeJoinedBack) {
  CUstream side;
  ASSERT_CU(cuStreamCreate(&side, 0));
  CUevent fork;
  ASSERT_CU(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
  ASSERT_CU(cuStreamBeginCapture(s_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ASSERT_CU(cuEventRecord(fork, s_));
  ASSERT_CU(cuStreamWaitEvent(side, fork, 0));
  CUstreamCaptureStatus status;
  ASSERT_CU(cuStreamIsCapturing(side, &status));
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  ASSERT_CU(LaunchVadd(side, a_, b_, c_));
  CUgraph graph = reinterpret_cast<CUgraph>(0x1);
  EXPECT_EQ(cuStreamEndCapture(s_, &graph), CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
  EXPECT_EQ(graph, nullptr);
  ASSERT_CU(cuStreamIsCapturing(side, &status));
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_NONE);
  // Nothing of the capture ran, and both streams work as usual again.
  std::vector<uint32_t> c = Read(c_);
  for (uint32_t i = 0; i < kN; ++i) ASSERT_EQ(c[i], 0u) << i;
  ASSERT_CU(LaunchVadd(side, a_, b_, c_));
  ASSERT_CU(cuStreamSynchronize(side));
  EXPECT_EQ(Read(c_)[5], 15u + 16u);
  // An event recorded in a capture and then again outside it is an ordinary event again: waiting
  // for it joins no capture.
  ASSERT_CU(cuStreamBeginCapture(s_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ASSERT_CU(cuEventRecord(fork, s_));
  ASSERT_CU(cuEventRecord(fork, side));
  ASSERT_CU(cuStreamWaitEvent(side, fork, 0));
  ASSERT_CU(cuStreamIsCapturing(side, &status));
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_NONE);
  ASSERT_CU(cuStreamEndCapture(s_, &graph));
  EXPECT_CU(cuGraphDestroy(graph));
  EXPECT_CU(cuEventDestroy(fork));
  EXPECT_CU(cuStreamDestroy(side));
}

TEST_F(RuntimeGraphs, RefusalsDuringCapture) {
  CUevent outside;
  ASSERT_CU(cuEventCreate(&outside, 0));
  ASSERT_CU(cuEventRecord(outside, nullptr));
  ASSERT_CU(cuStreamBeginCapture(s_, CU_STREAM_CAPTURE_MODE_RELAXED));
  EXPECT_EQ(cuStreamBeginCapture(s_, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_ERROR_ILLEGAL_STATE);
  // Waiting for work outside the capture: isolation.
  EXPECT_EQ(cuStreamWaitEvent(s_, outside, 0), CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
  // The legacy null stream synchronizes with the capturing stream: refused, capture invalidated.
  std::vector<uint32_t> c(kN);
  EXPECT_EQ(cuMemcpyDtoH(c.data(), c_, kN * 4), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
  EXPECT_EQ(LaunchVadd(s_, a_, b_, c_), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CUgraph graph;
  EXPECT_EQ(cuStreamEndCapture(s_, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  EXPECT_EQ(cuStreamEndCapture(s_, &graph), CUDA_ERROR_ILLEGAL_STATE);  // not capturing any more
  ASSERT_CU(cuMemcpyDtoH(c.data(), c_, kN * 4));  // the legacy stream works again
  // Synchronizing a capturing stream: refused and invalidated too.
  ASSERT_CU(cuStreamBeginCapture(s_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  EXPECT_EQ(cuStreamSynchronize(s_), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  EXPECT_EQ(cuStreamQuery(s_), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  EXPECT_EQ(cuStreamEndCapture(s_, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  // The null stream cannot capture; a non-blocking stream's capture leaves the legacy stream free.
  EXPECT_EQ(cuStreamBeginCapture(nullptr, CU_STREAM_CAPTURE_MODE_GLOBAL),
            CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CUstream free_running;
  ASSERT_CU(cuStreamCreate(&free_running, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cuStreamBeginCapture(free_running, CU_STREAM_CAPTURE_MODE_GLOBAL));
  EXPECT_CU(cuMemcpyDtoH(c.data(), c_, kN * 4));
  // A capturing stream destroyed mid-capture ends it; the context is as before.
  EXPECT_CU(cuStreamDestroy(free_running));
  ASSERT_CU(cuStreamBeginCapture(s_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  EXPECT_CU(cuStreamDestroy(s_));
  s_ = nullptr;
  EXPECT_CU(cuMemcpyDtoH(c.data(), c_, kN * 4));
  EXPECT_CU(cuEventDestroy(outside));
}

TEST_F(RuntimeGraphs, ExecUpdateTakesAGraphOfTheSameShape) {
  // Capture c = a + b, instantiate; capture c = b + b, update the executable graph with it.
  const auto capture = [&](CUdeviceptr x, CUdeviceptr y, bool extra, CUgraph* g) {
    ASSERT_CU(cuStreamBeginCapture(s_, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ASSERT_CU(LaunchVadd(s_, x, y, c_));
    if (extra) {
      ASSERT_CU(cuMemsetD32Async(a_, 1, kN, s_));
    }
    ASSERT_CU(cuStreamEndCapture(s_, g));
  };
  CUgraph first, second, bigger;
  capture(a_, b_, false, &first);
  CUgraphExec exec;
  ASSERT_CU(cuGraphInstantiate(&exec, first, 0));
  capture(b_, b_, false, &second);
  CUgraphExecUpdateResultInfo info{};
  ASSERT_CU(cuGraphExecUpdate(exec, second, &info));
  EXPECT_EQ(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
  ASSERT_CU(cuGraphLaunch(exec, s_));
  ASSERT_CU(cuStreamSynchronize(s_));
  EXPECT_EQ(Read(c_)[9], 2u * (9 + 11));
  // Another shape: refused, and the executable graph is what it was.
  capture(a_, b_, true, &bigger);
  EXPECT_EQ(cuGraphExecUpdate(exec, bigger, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  EXPECT_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
  ASSERT_CU(cuMemsetD32(c_, 0, kN));
  ASSERT_CU(cuGraphLaunch(exec, s_));
  ASSERT_CU(cuStreamSynchronize(s_));
  EXPECT_EQ(Read(c_)[9], 2u * (9 + 11));
  EXPECT_EQ(Read(a_)[9], 27u);  // the bigger graph's memset never ran
  // A node of another type in the same place.
  CUgraph other_type;
  ASSERT_CU(cuGraphCreate(&other_type, 0));
  CUgraphNode empty;
  ASSERT_CU(cuGraphAddEmptyNode(&empty, other_type, nullptr, 0));
  EXPECT_EQ(cuGraphExecUpdate(exec, other_type, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  EXPECT_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED);
  EXPECT_EQ(info.errorNode, empty);
  for (CUgraph g : {first, second, bigger, other_type}) EXPECT_CU(cuGraphDestroy(g));
  EXPECT_CU(cuGraphExecDestroy(exec));
}

// An instantiated graph's memset, copy, host and event steps take new parameters; the graph's own
// nodes keep theirs, and a node of another type or graph is refused.
TEST_F(RuntimeGraphs, ExecNodesTakeNewParameters) {
  CUgraph g;
  ASSERT_CU(cuGraphCreate(&g, 0));
  CUDA_MEMSET_NODE_PARAMS ms{};
  ms.dst = c_, ms.value = 5, ms.elementSize = 4, ms.width = kN, ms.height = 1;
  CUgraphNode fill, copy, host, record;
  ASSERT_CU(cuGraphAddMemsetNode(&fill, g, nullptr, 0, &ms, nullptr));
  CUDA_MEMCPY3D cp{};  // c_ -> a_, the whole buffer
  cp.srcMemoryType = cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  cp.srcDevice = c_, cp.dstDevice = a_;
  cp.WidthInBytes = kN * 4, cp.Height = 1, cp.Depth = 1;
  ASSERT_CU(cuGraphAddMemcpyNode(&copy, g, &fill, 1, &cp, nullptr));
  static std::atomic<int> calls_a{0}, calls_b{0};
  calls_a = calls_b = 0;
  CUDA_HOST_NODE_PARAMS hp{[](void*) { ++calls_a; }, nullptr};
  ASSERT_CU(cuGraphAddHostNode(&host, g, &copy, 1, &hp));
  CUevent e1, e2;
  ASSERT_CU(cuEventCreate(&e1, 0));
  ASSERT_CU(cuEventCreate(&e2, 0));
  ASSERT_CU(cuGraphAddEventRecordNode(&record, g, &host, 1, e1));
  CUgraphExec exec;
  ASSERT_CU(cuGraphInstantiate(&exec, g, 0));
  ASSERT_CU(cuGraphLaunch(exec, s_));
  ASSERT_CU(cuStreamSynchronize(s_));
  EXPECT_EQ(Read(a_)[7], 5u);
  EXPECT_EQ(calls_a.load(), 1);
  EXPECT_EQ(cuEventQuery(e2), CUDA_SUCCESS);  // never recorded: complete
  // New parameters: fill 9, copy into b_ instead, the other host function, record e2.
  ms.value = 9;
  ASSERT_CU(cuGraphExecMemsetNodeSetParams(exec, fill, &ms, nullptr));
  cp.dstDevice = b_;
  ASSERT_CU(cuGraphExecMemcpyNodeSetParams(exec, copy, &cp, nullptr));
  hp.fn = [](void*) { ++calls_b; };
  ASSERT_CU(cuGraphExecHostNodeSetParams(exec, host, &hp));
  ASSERT_CU(cuGraphExecEventRecordNodeSetEvent(exec, record, e2));
  ASSERT_CU(cuMemsetD32(a_, 0, kN));
  ASSERT_CU(cuGraphLaunch(exec, s_));
  ASSERT_CU(cuEventSynchronize(e2));
  ASSERT_CU(cuStreamSynchronize(s_));
  EXPECT_EQ(Read(b_)[7], 9u);
  EXPECT_EQ(Read(a_)[7], 0u) << "the copy went to b_";
  EXPECT_EQ(calls_a.load(), 1);
  EXPECT_EQ(calls_b.load(), 1);
  // The graph's nodes kept theirs: a new instantiation does what the first did.
  CUDA_MEMSET_NODE_PARAMS got{};
  ASSERT_CU(cuGraphMemsetNodeGetParams(fill, &got));
  EXPECT_EQ(got.value, 5u);
  // Refusals: a node of another type, a node of another graph, bad parameters; nothing changes.
  EXPECT_EQ(cuGraphExecMemsetNodeSetParams(exec, copy, &ms, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGraphExecHostNodeSetParams(exec, fill, &hp), CUDA_ERROR_INVALID_VALUE);
  CUgraph other;
  ASSERT_CU(cuGraphCreate(&other, 0));
  CUgraphNode stranger;
  ASSERT_CU(cuGraphAddMemsetNode(&stranger, other, nullptr, 0, &ms, nullptr));
  EXPECT_EQ(cuGraphExecMemsetNodeSetParams(exec, stranger, &ms, nullptr), CUDA_ERROR_INVALID_VALUE);
  CUDA_MEMSET_NODE_PARAMS bad = ms;
  bad.elementSize = 3;
  EXPECT_EQ(cuGraphExecMemsetNodeSetParams(exec, fill, &bad, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGraphExecEventRecordNodeSetEvent(exec, record, reinterpret_cast<CUevent>(&bad)),
            CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuGraphLaunch(exec, s_));
  ASSERT_CU(cuStreamSynchronize(s_));
  EXPECT_EQ(Read(b_)[7], 9u);
  EXPECT_EQ(calls_b.load(), 2);
  EXPECT_CU(cuGraphExecDestroy(exec));
  EXPECT_CU(cuGraphDestroy(g));
  EXPECT_CU(cuGraphDestroy(other));
  EXPECT_CU(cuEventDestroy(e1));
  EXPECT_CU(cuEventDestroy(e2));
}

// A disabled memset or copy step does nothing until enabled again; host nodes cannot be disabled.
TEST_F(RuntimeGraphs, StepsCanBeDisabledAndEnabled) {
  CUgraph g;
  ASSERT_CU(cuGraphCreate(&g, 0));
  CUDA_MEMSET_NODE_PARAMS ms{};
  ms.dst = c_, ms.value = 3, ms.elementSize = 4, ms.width = kN, ms.height = 1;
  CUgraphNode fill, copy, host;
  ASSERT_CU(cuGraphAddMemsetNode(&fill, g, nullptr, 0, &ms, nullptr));
  CUDA_MEMCPY3D cp{};  // c_ -> b_
  cp.srcMemoryType = cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  cp.srcDevice = c_, cp.dstDevice = b_;
  cp.WidthInBytes = kN * 4, cp.Height = 1, cp.Depth = 1;
  ASSERT_CU(cuGraphAddMemcpyNode(&copy, g, &fill, 1, &cp, nullptr));
  CUDA_HOST_NODE_PARAMS hp{[](void*) {}, nullptr};
  ASSERT_CU(cuGraphAddHostNode(&host, g, &copy, 1, &hp));
  CUgraphExec exec;
  ASSERT_CU(cuGraphInstantiate(&exec, g, 0));
  unsigned enabled = 7;
  ASSERT_CU(cuGraphNodeGetEnabled(exec, fill, &enabled));
  EXPECT_EQ(enabled, 1u);
  ASSERT_CU(cuGraphNodeSetEnabled(exec, copy, 0));
  ASSERT_CU(cuGraphNodeGetEnabled(exec, copy, &enabled));
  EXPECT_EQ(enabled, 0u);
  CUgraphExecUpdateResultInfo info{};  // an update keeps the step disabled
  ASSERT_CU(cuGraphExecUpdate(exec, g, &info));
  ASSERT_CU(cuGraphNodeGetEnabled(exec, copy, &enabled));
  EXPECT_EQ(enabled, 0u);
  ASSERT_CU(cuGraphLaunch(exec, s_));
  ASSERT_CU(cuStreamSynchronize(s_));
  EXPECT_EQ(Read(c_)[5], 3u);
  EXPECT_EQ(Read(b_)[5], 5u + 11) << "the disabled copy did not run (b_ as the fixture made it)";
  ASSERT_CU(cuGraphNodeSetEnabled(exec, copy, 1));
  ASSERT_CU(cuGraphLaunch(exec, s_));
  ASSERT_CU(cuStreamSynchronize(s_));
  EXPECT_EQ(Read(b_)[5], 3u);
  // Only kernel, memset and copy steps; a node of another graph; a null result.
  EXPECT_EQ(cuGraphNodeSetEnabled(exec, host, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGraphNodeGetEnabled(exec, host, &enabled), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGraphNodeGetEnabled(exec, fill, nullptr), CUDA_ERROR_INVALID_VALUE);
  CUgraph other;
  ASSERT_CU(cuGraphCreate(&other, 0));
  CUgraphNode stranger;
  ASSERT_CU(cuGraphAddMemsetNode(&stranger, other, nullptr, 0, &ms, nullptr));
  EXPECT_EQ(cuGraphNodeSetEnabled(exec, stranger, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_CU(cuGraphExecDestroy(exec));
  EXPECT_CU(cuGraphDestroy(g));
  EXPECT_CU(cuGraphDestroy(other));
}

// A user object's destructor runs once its last reference goes: the program's, its graph's, its
// executable graph's, and a running launch's (which outlives the executable graph's destruction).
TEST_F(RuntimeGraphs, UserObjectsLiveAsLongAsTheirLastReference) {
  static std::atomic<int> destroyed{0};
  destroyed = 0;
  const auto destroy = [](void* p) { static_cast<std::atomic<int>*>(p)->fetch_add(1); };
  const auto wait_destroyed = [](int want) {
    for (int i = 0; i < 2000 && destroyed.load() < want; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return destroyed.load();
  };
  // The program's own references only.
  CUuserObject solo;
  ASSERT_CU(cuUserObjectCreate(&solo, &destroyed, destroy, 2, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
  ASSERT_CU(cuUserObjectRetain(solo, 1));
  ASSERT_CU(cuUserObjectRelease(solo, 2));
  EXPECT_EQ(cuUserObjectRelease(solo, 2), CUDA_ERROR_INVALID_VALUE) << "only one left";
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(destroyed.load(), 0);
  ASSERT_CU(cuUserObjectRelease(solo, 1));
  EXPECT_EQ(wait_destroyed(1), 1);
  EXPECT_EQ(cuUserObjectRetain(solo, 1), CUDA_ERROR_INVALID_VALUE) << "gone";

  // Moved into a graph, instantiated, the graph destroyed, launched, the exec destroyed while the
  // launch's steps wait behind a blocked host function.
  CUuserObject held;
  ASSERT_CU(cuUserObjectCreate(&held, &destroyed, destroy, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
  CUgraph g;
  ASSERT_CU(cuGraphCreate(&g, 0));
  CUDA_MEMSET_NODE_PARAMS ms{};
  ms.dst = c_, ms.value = 4, ms.elementSize = 4, ms.width = kN, ms.height = 1;
  CUgraphNode fill;
  ASSERT_CU(cuGraphAddMemsetNode(&fill, g, nullptr, 0, &ms, nullptr));
  ASSERT_CU(cuGraphRetainUserObject(g, held, 1, CU_GRAPH_USER_OBJECT_MOVE));
  EXPECT_EQ(cuGraphReleaseUserObject(g, held, 2), CUDA_ERROR_INVALID_VALUE) << "the graph has one";
  CUgraph clone;
  ASSERT_CU(cuGraphClone(&clone, g));
  CUgraphExec exec;
  ASSERT_CU(cuGraphInstantiate(&exec, g, 0));
  ASSERT_CU(cuGraphDestroy(g));
  ASSERT_CU(cuGraphDestroy(clone));
  static std::atomic<bool> gate{false};
  gate = false;
  ASSERT_CU(cuLaunchHostFunc(
      s_,
      [](void*) {
        while (!gate.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      },
      nullptr));
  ASSERT_CU(cuGraphLaunch(exec, s_));
  ASSERT_CU(cuGraphExecDestroy(exec));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(destroyed.load(), 1) << "the queued launch still holds a reference";
  gate = true;
  ASSERT_CU(cuStreamSynchronize(s_));
  EXPECT_EQ(wait_destroyed(2), 2);
  EXPECT_EQ(Read(c_)[3], 4u);

  // Refusals change nothing.
  CUuserObject o;
  EXPECT_EQ(cuUserObjectCreate(&o, nullptr, destroy, 0, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuUserObjectCreate(&o, nullptr, destroy, 1, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuUserObjectCreate(&o, nullptr, nullptr, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC),
            CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuUserObjectCreate(&o, &destroyed, destroy, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
  CUgraph g2;
  ASSERT_CU(cuGraphCreate(&g2, 0));
  EXPECT_EQ(cuGraphRetainUserObject(g2, o, 1, 7), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGraphRetainUserObject(g2, o, 0, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGraphReleaseUserObject(g2, o, 1), CUDA_ERROR_INVALID_VALUE) << "not the graph's";
  ASSERT_CU(cuGraphRetainUserObject(g2, o, 2, 0));  // two new references: three in all
  ASSERT_CU(cuGraphReleaseUserObject(g2, o, 1));
  ASSERT_CU(cuUserObjectRelease(o, 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(destroyed.load(), 2) << "the graph still holds one";
  ASSERT_CU(cuGraphDestroy(g2));
  EXPECT_EQ(wait_destroyed(3), 3);
}

TEST_F(RuntimeGraphs, MemsetNodesOfEveryElementSize) {
  CUgraph g;
  ASSERT_CU(cuGraphCreate(&g, 0));
  CUgraphNode last = nullptr;
  const struct {
    unsigned element, value;
    size_t offset;
  } fills[] = {{1, 0xab, 0}, {2, 0xcdef, 64}, {4, 0x01234567, 128}};
  for (const auto& f : fills) {
    CUDA_MEMSET_NODE_PARAMS ms{};
    ms.dst = c_ + f.offset, ms.value = f.value, ms.elementSize = f.element;
    ms.width = 16 / f.element, ms.height = 1;
    CUgraphNode node;
    ASSERT_CU(cuGraphAddMemsetNode(&node, g, last ? &last : nullptr, last ? 1 : 0, &ms, ctx_));
    last = node;
  }
  CUDA_MEMSET_NODE_PARAMS bad{};
  bad.dst = c_, bad.elementSize = 3, bad.width = 1, bad.height = 1;
  CUgraphNode refused;
  EXPECT_EQ(cuGraphAddMemsetNode(&refused, g, nullptr, 0, &bad, ctx_), CUDA_ERROR_INVALID_VALUE);
  CUgraphExec exec;
  ASSERT_CU(cuGraphInstantiate(&exec, g, 0));
  ASSERT_CU(cuGraphLaunch(exec, s_));
  ASSERT_CU(cuStreamSynchronize(s_));
  std::vector<uint8_t> bytes(192);
  ASSERT_CU(cuMemcpyDtoH(bytes.data(), c_, bytes.size()));
  EXPECT_EQ(bytes[15], 0xab);
  EXPECT_EQ(bytes[16], 0);
  EXPECT_EQ(bytes[64], 0xef);
  EXPECT_EQ(bytes[79], 0xcd);
  EXPECT_EQ(bytes[128], 0x67);
  EXPECT_EQ(bytes[143], 0x01);
  EXPECT_EQ(bytes[144], 0);
  EXPECT_CU(cuGraphExecDestroy(exec));
  EXPECT_CU(cuGraphDestroy(g));
}

TEST_F(RuntimeGraphs, BadGraphsAndHandlesAreRefused) {
  CUgraph g, other;
  ASSERT_CU(cuGraphCreate(&g, 0));
  ASSERT_CU(cuGraphCreate(&other, 0));
  EXPECT_EQ(cuGraphCreate(&g, 1), CUDA_ERROR_INVALID_VALUE);
  CUgraphNode x, y, foreign;
  ASSERT_CU(cuGraphAddEmptyNode(&x, g, nullptr, 0));
  ASSERT_CU(cuGraphAddEmptyNode(&y, g, &x, 1));
  ASSERT_CU(cuGraphAddEmptyNode(&foreign, other, nullptr, 0));
  CUgraphNode z;
  EXPECT_EQ(cuGraphAddEmptyNode(&z, g, &foreign, 1), CUDA_ERROR_INVALID_VALUE);  // another graph's
  const CUgraphNode twice[] = {x, x};
  EXPECT_EQ(cuGraphAddEmptyNode(&z, g, twice, 2), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGraphAddEmptyNode(&z, g, nullptr, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGraphAddDependencies(g, &x, &x, 1), CUDA_ERROR_INVALID_VALUE);  // a self edge
  EXPECT_EQ(cuGraphAddDependencies(g, &x, &y, 1), CUDA_ERROR_INVALID_VALUE);  // already there
  size_t count = 0;
  ASSERT_CU(cuGraphGetNodes(g, nullptr, &count));
  EXPECT_EQ(count, 2u);  // no refused call left a node behind
  // A cycle: y -> x as well. Instantiation refuses it.
  ASSERT_CU(cuGraphAddDependencies(g, &y, &x, 1));
  CUgraphExec exec;
  EXPECT_EQ(cuGraphInstantiate(&exec, g, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_CU(cuGraphDestroy(g));
  EXPECT_EQ(cuGraphDestroy(g), CUDA_ERROR_INVALID_VALUE);  // gone
  CUgraphNodeType type;
  EXPECT_EQ(cuGraphNodeGetType(x, &type), CUDA_ERROR_INVALID_VALUE);  // its nodes too
  EXPECT_EQ(cuGraphLaunch(reinterpret_cast<CUgraphExec>(&count), s_), CUDA_ERROR_INVALID_VALUE);
  // A kernel node with a bad function or configuration is refused when made.
  CUDA_KERNEL_NODE_PARAMS kp{};
  kp.func = reinterpret_cast<CUfunction>(&count);
  kp.gridDimX = kp.gridDimY = kp.gridDimZ = kp.blockDimX = kp.blockDimY = kp.blockDimZ = 1;
  EXPECT_EQ(cuGraphAddKernelNode(&z, other, nullptr, 0, &kp), CUDA_ERROR_INVALID_HANDLE);
  kp.func = vadd_;
  kp.gridDimX = 0;
  EXPECT_EQ(cuGraphAddKernelNode(&z, other, nullptr, 0, &kp), CUDA_ERROR_INVALID_VALUE);
  EXPECT_CU(cuGraphDestroy(other));
}

}  // namespace
