// compat-graphs: CUDA graphs the two ways programs build them.
//  1. Stream capture of one iteration of a pipeline — a pinned-memory copy in, two kernels, a
//     memset, a copy out — forked onto a second stream with events and joined back; the graph is
//     instantiated once and launched many times, the way programs amortize launch costs; then one
//     kernel's argument is changed in the instantiated graph (cudaGraphExecKernelNodeSetParams)
//     and the graph launched again; then, as programs that capture every step anew do, new
//     captures of the same shape put into the executable graph with cudaGraphExecUpdate.
//  2. A graph built node by node (cudaGraphAddMemsetNode, ...KernelNode, ...MemcpyNode,
//     ...HostNode, ...EmptyNode, cudaGraphAddDependencies), inspected (cudaGraphGetNodes,
//     cudaGraphNodeGetType, cudaGraphKernelNodeGetParams), cloned and launched.
//  3. What CUDA refuses during a capture: synchronizing the capturing stream
//     (cudaErrorStreamCaptureUnsupported, after which the capture ends invalidated) and a
//     synchronous copy on the legacy stream (cudaErrorStreamCaptureImplicit).
// Every value is an integer; the host checks every element after every phase.
#include <cstdint>
#include <string>
#include <vector>

#include "bench/compat/compat.h"

namespace gpuvm::compat {
namespace {

__global__ void add_scaled(int n, int a, const int* x, int* y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    y[i] += a * x[i];
  }
}

__global__ void square_into(int n, const int* x, int* z) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    z[i] = x[i] * x[i];
  }
}

__global__ void fill(int n, int v, int* y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    y[i] = v + i % 7;
  }
}

struct Scale {
  int n, launches;
};
Scale ScaleOf(Size size) { return size == Size::kTest ? Scale{1 << 12, 20} : Scale{1 << 18, 400}; }

int X(int i) { return i % 1000 - 500; }

void HostCount(void* data) { ++*static_cast<int*>(data); }

// What one step of the pipeline works on.
struct Pipeline {
  int n;
  size_t bytes;
  int blocks, threads;
  int *x, *y, *z, *hx, *hy, *hz;
  cudaStream_t main, side;
  cudaEvent_t forked, joined;
};

// One step, queued (or captured): x in; on the main stream y = 0, y += a1 * x, y += a2 * x; forked
// onto the side stream z = x * x; joined back; y and z out.
void EnqueueStep(Report& report, const Pipeline& p, int a1, int a2) {
  CHECK_CUDA(report, cudaMemcpyAsync(p.x, p.hx, p.bytes, cudaMemcpyHostToDevice, p.main));
  CHECK_CUDA(report, cudaEventRecord(p.forked, p.main));
  CHECK_CUDA(report, cudaStreamWaitEvent(p.side, p.forked, 0));
  square_into<<<p.blocks, p.threads, 0, p.side>>>(p.n, p.x, p.z);
  CHECK_LAUNCH(report);
  CHECK_CUDA(report, cudaMemcpyAsync(p.hz, p.z, p.bytes, cudaMemcpyDeviceToHost, p.side));
  CHECK_CUDA(report, cudaEventRecord(p.joined, p.side));
  CHECK_CUDA(report, cudaMemsetAsync(p.y, 0, p.bytes, p.main));
  add_scaled<<<p.blocks, p.threads, 0, p.main>>>(p.n, a1, p.x, p.y);
  CHECK_LAUNCH(report);
  add_scaled<<<p.blocks, p.threads, 0, p.main>>>(p.n, a2, p.x, p.y);
  CHECK_LAUNCH(report);
  CHECK_CUDA(report, cudaMemcpyAsync(p.hy, p.y, p.bytes, cudaMemcpyDeviceToHost, p.main));
  CHECK_CUDA(report, cudaStreamWaitEvent(p.main, p.joined, 0));
}

void Run(Size size, Report& report) {
  const Scale s = ScaleOf(size);
  const int n = s.n;
  const size_t bytes = size_t(n) * sizeof(int);
  const int blocks = 64, threads = 128;

  report.Enter(Phase::kInit);
  int *hx, *hy, *hz;
  CHECK_CUDA(report, cudaMallocHost(&hx, bytes));
  CHECK_CUDA(report, cudaMallocHost(&hy, bytes));
  CHECK_CUDA(report, cudaMallocHost(&hz, bytes));
  int *x, *y, *z;
  CHECK_CUDA(report, cudaMalloc(&x, bytes));
  CHECK_CUDA(report, cudaMalloc(&y, bytes));
  CHECK_CUDA(report, cudaMalloc(&z, bytes));
  cudaStream_t main_stream, side_stream;
  CHECK_CUDA(report, cudaStreamCreate(&main_stream));
  CHECK_CUDA(report, cudaStreamCreate(&side_stream));
  cudaEvent_t forked, joined;
  CHECK_CUDA(report, cudaEventCreateWithFlags(&forked, cudaEventDisableTiming));
  CHECK_CUDA(report, cudaEventCreateWithFlags(&joined, cudaEventDisableTiming));
  for (int i = 0; i < n; ++i) hx[i] = X(i);
  const Pipeline pipe{n,  bytes, blocks, threads,     x,           y,      z,
                      hx, hy,    hz,     main_stream, side_stream, forked, joined};

  // 1. Capture: x in; on the main stream y = 0 then y += 3x (twice: 6x); forked onto the side
  //    stream, z = x*x; joined; both out.
  report.Enter(Phase::kHtoD);
  cudaStreamCaptureStatus status;
  CHECK_CUDA(report, cudaStreamIsCapturing(main_stream, &status));
  CHECK_VALUE(report, status == cudaStreamCaptureStatusNone, "a new stream says it is capturing");
  CHECK_CUDA(report, cudaStreamBeginCapture(main_stream, cudaStreamCaptureModeGlobal));
  CHECK_CUDA(report, cudaStreamIsCapturing(main_stream, &status));
  CHECK_VALUE(report, status == cudaStreamCaptureStatusActive, "capture not active after begin");
  EnqueueStep(report, pipe, 3, 3);
  if (report.failed()) return;
  unsigned long long capture_id = 0;
  size_t captured_deps = 0;
  cudaGraph_t captured_so_far = nullptr;
  CHECK_CUDA(report, cudaStreamGetCaptureInfo(main_stream, &status, &capture_id, &captured_so_far,
                                              nullptr, nullptr, &captured_deps));
  CHECK_VALUE(report, status == cudaStreamCaptureStatusActive && captured_so_far != nullptr,
              "cudaStreamGetCaptureInfo: no active capture");
  CHECK_VALUE(report, captured_deps == 2,
              "the main stream should depend on 2 nodes after the join, has " +
                  std::to_string(captured_deps));
  cudaGraph_t graph;
  CHECK_CUDA(report, cudaStreamEndCapture(main_stream, &graph));
  CHECK_CUDA(report, cudaStreamIsCapturing(side_stream, &status));
  CHECK_VALUE(report, status == cudaStreamCaptureStatusNone, "the side stream still captures");
  size_t nodes = 0;
  CHECK_CUDA(report, cudaGraphGetNodes(graph, nullptr, &nodes));
  CHECK_VALUE(report, nodes == 7, "the capture made " + std::to_string(nodes) + " nodes, want 7");
  cudaGraphExec_t exec;
  CHECK_CUDA(report, cudaGraphInstantiate(&exec, graph, 0));

  report.Enter(Phase::kLaunch);
  for (int l = 0; l < s.launches; ++l) {
    for (int i = 0; i < n; i += 97) hx[i] = X(i) + l;  // the graph copies what is there at launch
    CHECK_CUDA(report, cudaGraphLaunch(exec, main_stream));
    CHECK_CUDA(report, cudaStreamSynchronize(main_stream));
    for (int i = 0; i < n; ++i) {
      const int xi = i % 97 == 0 ? X(i) + l : X(i);
      CHECK_VALUE(report, hy[i] == 6 * xi, Mismatch("y (captured graph)", i, hy[i], 6 * xi));
      CHECK_VALUE(report, hz[i] == xi * xi, Mismatch("z (captured graph)", i, hz[i], xi * xi));
    }
    for (int i = 0; i < n; i += 97) hx[i] = X(i);
  }
  // Change the second add's factor in the executable graph: y = 3x + 5x.
  cudaGraphNode_t all[16];
  size_t count = 16;
  CHECK_CUDA(report, cudaGraphGetNodes(graph, all, &count));
  cudaGraphNode_t second_add = nullptr;
  int adds = 0;
  for (size_t i = 0; i < count; ++i) {
    cudaGraphNodeType type;
    CHECK_CUDA(report, cudaGraphNodeGetType(all[i], &type));
    if (type != cudaGraphNodeTypeKernel) continue;
    cudaKernelNodeParams p;
    CHECK_CUDA(report, cudaGraphKernelNodeGetParams(all[i], &p));
    if (p.func == reinterpret_cast<void*>(add_scaled) && ++adds == 2) second_add = all[i];
  }
  CHECK_VALUE(report, second_add != nullptr, "the captured graph has no second add_scaled node");
  {
    int a = 5;
    int nn = n;
    void* args[] = {&nn, &a, &x, &y};
    cudaKernelNodeParams p{};
    p.func = reinterpret_cast<void*>(add_scaled);
    p.gridDim = dim3(blocks);
    p.blockDim = dim3(threads);
    p.kernelParams = args;
    CHECK_CUDA(report, cudaGraphExecKernelNodeSetParams(exec, second_add, &p));
  }
  CHECK_CUDA(report, cudaGraphLaunch(exec, main_stream));
  CHECK_CUDA(report, cudaStreamSynchronize(main_stream));
  for (int i = 0; i < n; ++i) {
    CHECK_VALUE(report, hy[i] == 8 * X(i), Mismatch("y (updated exec)", i, hy[i], 8 * X(i)));
  }

  // The pattern of programs that capture every step anew (an inference loop, one token at a
  // time): the new capture has the same shape, so cudaGraphExecUpdate puts it into the executable
  // graph instead of a new instantiation. Here the factors change each step: y = (k + 1)x.
  for (int k = 1; k <= 4; ++k) {
    cudaGraph_t step_graph;
    CHECK_CUDA(report, cudaStreamBeginCapture(main_stream, cudaStreamCaptureModeGlobal));
    EnqueueStep(report, pipe, 1, k);
    if (report.failed()) return;
    CHECK_CUDA(report, cudaStreamEndCapture(main_stream, &step_graph));
    cudaGraphExecUpdateResultInfo info;
    CHECK_CUDA(report, cudaGraphExecUpdate(exec, step_graph, &info));
    CHECK_VALUE(report, info.result == cudaGraphExecUpdateSuccess, "cudaGraphExecUpdate: no success");
    CHECK_CUDA(report, cudaGraphLaunch(exec, main_stream));
    CHECK_CUDA(report, cudaStreamSynchronize(main_stream));
    CHECK_CUDA(report, cudaGraphDestroy(step_graph));
    for (int i = 0; i < n; ++i) {
      const int want = (k + 1) * X(i);
      CHECK_VALUE(report, hy[i] == want, Mismatch("y (updated graph)", i, hy[i], want));
    }
  }

  // 2. Built by hand: memset y to 0 -> fill(y, 40) -> add_scaled(y, -2, x) -> copy y out -> host
  //    node counting; an empty node joining the memset and a copy of x in.
  report.Enter(Phase::kDtoH);
  cudaGraph_t built;
  CHECK_CUDA(report, cudaGraphCreate(&built, 0));
  cudaGraphNode_t memset_node, fill_node, add_node, copy_in, copy_out, host_node, empty_node;
  cudaMemsetParams ms{};
  ms.dst = y;
  ms.value = 0;
  ms.elementSize = 4;
  ms.width = size_t(n);
  ms.height = 1;
  CHECK_CUDA(report, cudaGraphAddMemsetNode(&memset_node, built, nullptr, 0, &ms));
  CHECK_CUDA(report, cudaGraphAddMemcpyNode1D(&copy_in, built, nullptr, 0, x, hx, bytes,
                                              cudaMemcpyHostToDevice));
  const cudaGraphNode_t both[] = {memset_node, copy_in};
  CHECK_CUDA(report, cudaGraphAddEmptyNode(&empty_node, built, both, 2));
  int nn = n, forty = 40, minus_two = -2;
  void* fill_args[] = {&nn, &forty, &y};
  cudaKernelNodeParams kp{};
  kp.func = reinterpret_cast<void*>(fill);
  kp.gridDim = dim3(blocks);
  kp.blockDim = dim3(threads);
  kp.kernelParams = fill_args;
  CHECK_CUDA(report, cudaGraphAddKernelNode(&fill_node, built, &empty_node, 1, &kp));
  void* add_args[] = {&nn, &minus_two, &x, &y};
  kp.func = reinterpret_cast<void*>(add_scaled);
  kp.kernelParams = add_args;
  CHECK_CUDA(report, cudaGraphAddKernelNode(&add_node, built, nullptr, 0, &kp));
  CHECK_CUDA(report, cudaGraphAddDependencies(built, &fill_node, &add_node, nullptr, 1));
  CHECK_CUDA(report, cudaGraphAddMemcpyNode1D(&copy_out, built, &add_node, 1, hy, y, bytes,
                                              cudaMemcpyDeviceToHost));
  int host_runs = 0;
  cudaHostNodeParams hp{HostCount, &host_runs};
  CHECK_CUDA(report, cudaGraphAddHostNode(&host_node, built, &copy_out, 1, &hp));
  size_t roots = 0;
  CHECK_CUDA(report, cudaGraphGetRootNodes(built, nullptr, &roots));
  CHECK_VALUE(report, roots == 2, "the built graph has " + std::to_string(roots) + " roots, want 2");
  // The arguments were copied when the node was made: changing them now changes nothing.
  forty = 1000;
  cudaGraph_t clone;
  CHECK_CUDA(report, cudaGraphClone(&clone, built));
  CHECK_CUDA(report, cudaGraphDestroy(built));
  cudaGraphExec_t built_exec;
  CHECK_CUDA(report, cudaGraphInstantiate(&built_exec, clone, 0));
  for (int l = 0; l < 3; ++l) {
    for (int i = 0; i < n; ++i) hy[i] = -1;
    CHECK_CUDA(report, cudaGraphLaunch(built_exec, main_stream));
    CHECK_CUDA(report, cudaStreamSynchronize(main_stream));
    for (int i = 0; i < n; ++i) {
      const int want = 40 + i % 7 - 2 * X(i);
      CHECK_VALUE(report, hy[i] == want, Mismatch("y (built graph)", i, hy[i], want));
    }
  }
  CHECK_VALUE(report, host_runs == 3,
              "the host node ran " + std::to_string(host_runs) + " times, want 3");

  // 2b. An instantiated graph's steps take new parameters (cudaGraphExec*SetParams): memset y to
  //     0 and copy it out to hy, then memset 7 and copy into hx's bytes instead, another host count.
  cudaGraph_t small;
  CHECK_CUDA(report, cudaGraphCreate(&small, 0));
  cudaGraphNode_t small_memset, small_copy, small_host;
  ms.value = 0;
  CHECK_CUDA(report, cudaGraphAddMemsetNode(&small_memset, small, nullptr, 0, &ms));
  CHECK_CUDA(report, cudaGraphAddMemcpyNode1D(&small_copy, small, &small_memset, 1, hy, y, bytes,
                                              cudaMemcpyDeviceToHost));
  int first_runs = 0, second_runs = 0;
  cudaHostNodeParams first_host{HostCount, &first_runs};
  CHECK_CUDA(report, cudaGraphAddHostNode(&small_host, small, &small_copy, 1, &first_host));
  cudaGraphExec_t small_exec;
  CHECK_CUDA(report, cudaGraphInstantiate(&small_exec, small, 0));
  ms.value = 7;
  CHECK_CUDA(report, cudaGraphExecMemsetNodeSetParams(small_exec, small_memset, &ms));
  std::vector<int> other(size_t(n), -1);
  CHECK_CUDA(report, cudaGraphExecMemcpyNodeSetParams1D(small_exec, small_copy, other.data(), y,
                                                        bytes, cudaMemcpyDeviceToHost));
  cudaHostNodeParams second_host{HostCount, &second_runs};
  CHECK_CUDA(report, cudaGraphExecHostNodeSetParams(small_exec, small_host, &second_host));
  for (int i = 0; i < n; ++i) hy[i] = -1;
  CHECK_CUDA(report, cudaGraphLaunch(small_exec, main_stream));
  CHECK_CUDA(report, cudaStreamSynchronize(main_stream));
  for (int i = 0; i < n; ++i) {
    CHECK_VALUE(report, other[i] == 7, Mismatch("the updated copy's target", i, other[i], 7));
    CHECK_VALUE(report, hy[i] == -1, Mismatch("the old copy's target", i, hy[i], -1));
  }
  CHECK_VALUE(report, first_runs == 0 && second_runs == 1,
              "host nodes ran " + std::to_string(first_runs) + " and " +
                  std::to_string(second_runs) + " times, want 0 and 1");
  CHECK_CUDA(report, cudaGraphExecDestroy(small_exec));
  CHECK_CUDA(report, cudaGraphDestroy(small));

  // 3. What a capture refuses.
  CHECK_CUDA(report, cudaStreamBeginCapture(main_stream, cudaStreamCaptureModeGlobal));
  add_scaled<<<blocks, threads, 0, main_stream>>>(n, 1, x, y);
  CHECK_LAUNCH(report);
  cudaError_t e = cudaStreamSynchronize(main_stream);
  CHECK_VALUE(report, e == cudaErrorStreamCaptureUnsupported,
              std::string("cudaStreamSynchronize in a capture returned ") + cudaGetErrorName(e));
  cudaGraph_t broken = nullptr;
  e = cudaStreamEndCapture(main_stream, &broken);
  CHECK_VALUE(report, e == cudaErrorStreamCaptureInvalidated && broken == nullptr,
              std::string("ending an invalidated capture returned ") + cudaGetErrorName(e));
  (void)cudaGetLastError();
  CHECK_CUDA(report, cudaStreamBeginCapture(main_stream, cudaStreamCaptureModeGlobal));
  e = cudaMemcpy(hy, y, bytes, cudaMemcpyDeviceToHost);
  CHECK_VALUE(report, e == cudaErrorStreamCaptureImplicit,
              std::string("a legacy-stream copy during a capture returned ") + cudaGetErrorName(e));
  e = cudaStreamEndCapture(main_stream, &broken);
  CHECK_VALUE(report, e == cudaErrorStreamCaptureInvalidated,
              std::string("ending that capture returned ") + cudaGetErrorName(e));
  (void)cudaGetLastError();
  // After the capture the legacy stream works again.
  CHECK_CUDA(report, cudaMemcpy(hy, y, bytes, cudaMemcpyDeviceToHost));

  report.Enter(Phase::kClose);
  CHECK_CUDA(report, cudaGraphExecDestroy(built_exec));
  CHECK_CUDA(report, cudaGraphDestroy(clone));
  CHECK_CUDA(report, cudaGraphExecDestroy(exec));
  CHECK_CUDA(report, cudaGraphDestroy(graph));
  CHECK_CUDA(report, cudaEventDestroy(forked));
  CHECK_CUDA(report, cudaEventDestroy(joined));
  CHECK_CUDA(report, cudaStreamDestroy(side_stream));
  CHECK_CUDA(report, cudaStreamDestroy(main_stream));
  CHECK_CUDA(report, cudaFree(x));
  CHECK_CUDA(report, cudaFree(y));
  CHECK_CUDA(report, cudaFree(z));
  CHECK_CUDA(report, cudaFreeHost(hx));
  CHECK_CUDA(report, cudaFreeHost(hy));
  CHECK_CUDA(report, cudaFreeHost(hz));
  report.End();
  CHECK_CUDA(report, cudaDeviceReset());
}

}  // namespace
}  // namespace gpuvm::compat

int main(int argc, char** argv) {
  using namespace gpuvm::compat;
  return CompatMain(
      argc, argv, "graphs",
      [](Size size) {
        const Scale s = ScaleOf(size);
        return std::to_string(s.n) + " ints, a captured 7-node graph launched " +
               std::to_string(s.launches) + " times, a built 7-node graph";
      },
      Run);
}
