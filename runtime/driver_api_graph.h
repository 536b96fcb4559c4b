// CUDA graphs and stream capture in libcuda.so.1 (driver_api_graph.cc): the objects behind CUgraph,
// CUgraphNode and CUgraphExec, and what the entry points that queue work on a stream call when that
// stream is capturing.
//
// The model. A graph is nodes with dependency edges. Instantiating it orders the nodes
// topologically (Kahn) and freezes each node's work as a step; launching it runs the steps in that
// order on the launch stream, so every dependency is honoured and branches that CUDA may run
// concurrently run one after the other (one stream keeps the order; correctness does not need
// more). A step is the same entry point a program would call (cuLaunchKernel with the node's
// parameter buffer, cuMemcpy3DAsync, cuMemsetD2D*Async, cuLaunchHostFunc, cuEventRecord,
// cuStreamWaitEvent), so it is checked as such at every launch.
//
// Capture. cuStreamBeginCapture makes a stream record instead of run: each operation queued on it
// becomes a node that depends on the stream's previous node(s). An event recorded in a capturing
// stream carries those nodes; another stream that waits for it joins the capture (fork), and the
// origin stream waiting for an event recorded in a joined stream takes in that stream's work
// (join). cuStreamEndCapture hands out the graph, or CUDA_ERROR_STREAM_CAPTURE_UNJOINED when a
// joined stream's work was not joined back. While a blocking stream of a context captures, the
// legacy null stream of that context may not be used (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, and the
// capture is invalidated), and a capturing stream may not be synchronized or queried
// (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, invalidated too), as in CUDA.
//
// Executable-graph update (cuGraphExecUpdate) takes a graph of the same shape: as many nodes, made
// in the same order, with the same types and dependencies.
//
// Not here (CUDA_ERROR_NOT_SUPPORTED, runtime/abi/libcuda_not_supported.def): child-graph, memory
// allocation, external-semaphore, batch-memop and conditional nodes, Exec*SetParams other than the
// kernel's, edge data, node enabling, user objects, device-side launch.
//
// Threading: one lock (the graph layer's) guards every graph, node, exec and capture; launches copy
// their steps under it and run them without it.
#ifndef GPUVM_RUNTIME_DRIVER_API_GRAPH_H_
#define GPUVM_RUNTIME_DRIVER_API_GRAPH_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "runtime/core/objects.h"
#include "runtime/include/cuda.h"

namespace gpuvm::runtime::driver_api {

// One kernel launch, its parameters packed as the kernel's parameter buffer.
struct KernelSpec {
  CUfunction f = nullptr;
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned shared_bytes = 0;
  std::vector<uint8_t> params;
};

// A node's work, run on the stream a graph is launched on.
using Replay = std::function<CUresult(CUstream)>;

// The parameter buffer of a launch of `f` from cuLaunchKernel's `params` (one pointer per
// parameter) or `extra` (one packed buffer), checked as cuLaunchKernel checks them
// (driver_api_launch.cc).
CUresult PackParams(CUfunction f, void** params, void** extra, std::vector<uint8_t>* out);
// cuLaunchKernel of `spec` on `stream`.
CUresult LaunchSpec(const KernelSpec& spec, CUstream stream);

// True when work queued on `s` is recorded into a capture instead of run.
inline bool Capturing(const CUstream_st* s) { return s->capturing.load(std::memory_order_acquire); }
// Records work on capturing stream `s` as a node of `type` after the stream's capture dependencies.
// CUDA_ERROR_STREAM_CAPTURE_INVALIDATED when the capture was invalidated.
CUresult CaptureNode(CUstream_st* s, CUgraphNodeType type, Replay replay);
CUresult CaptureKernel(CUstream_st* s, KernelSpec spec);
// cuEventRecord on capturing stream `s`: the event carries the stream's capture dependencies.
CUresult CaptureEventRecord(CUstream_st* s, CUevent_st* e);
// cuStreamWaitEvent when `s` captures or `e` was recorded in a capture: the fork or join.
CUresult CaptureEventWait(CUstream_st* s, CUevent_st* e);
// True when `e` was recorded in a capture that is still going on.
bool CapturedEvent(CUevent_st* e);
// `e` is recorded outside any capture: it no longer carries a capture's nodes.
void ForgetEventCapture(CUevent_st* e);
// A call CUDA does not allow on capturing stream `s` (a synchronization, a query): invalidates the
// capture and returns CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED.
CUresult RefuseInCapture(CUstream_st* s);
// The legacy null stream was used while `ctx` had a blocking stream capturing: invalidates those
// captures; CUDA_ERROR_STREAM_CAPTURE_IMPLICIT.
CUresult RefuseLegacyInCapture(CUctx_st* ctx);
// Stream `s` is being destroyed: it leaves its capture (which is invalidated if `s` began it).
void ForgetCapture(CUstream_st* s);

}  // namespace gpuvm::runtime::driver_api

#endif  // GPUVM_RUNTIME_DRIVER_API_GRAPH_H_
