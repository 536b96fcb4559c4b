// libcudart.so.13, graphs and stream capture: the runtime's forms of the driver's (runtime/
// driver_api_graph.h has the model), converting the runtime's parameter structures — a kernel is
// named by its host stub, copies by cudaMemcpy3DParms — and recording each call's error as the
// thread's last error. Edge data (CUDA 12.3's annotated edges) is accepted only when all zero, the
// default edge, which is the only kind there is here.
//
// Threading: every entry point may be called from any thread.
#include <cstring>

#include "runtime/cudart/cudart_internal.h"
#include "runtime/include/cuda.h"
#include "runtime/include/cuda_runtime_api.h"

#define GPUVM_EXPORT extern "C" __attribute__((visibility("default")))

static_assert(sizeof(cudaKernelNodeParams) == 56,
              "cudaKernelNodeParams layout differs from CUDA's");
static_assert(sizeof(cudaMemsetParams) == 40, "cudaMemsetParams layout differs from CUDA's");
static_assert(sizeof(cudaGraphEdgeData) == 8);

using gpuvm::cudart::EnsureCurrentContext;
using gpuvm::cudart::RecordDriverResult;
using gpuvm::cudart::RecordLastError;

namespace {

using gpuvm::cudart::InContext;

cudaError_t Rec(CUresult r) { return RecordDriverResult(r); }

// Edge data must be absent or the default (all zero) for each of `n` edges.
bool DefaultEdges(const cudaGraphEdgeData* edges, size_t n) {
  for (size_t i = 0; edges != nullptr && i < n; ++i) {
    static const cudaGraphEdgeData kDefault{};
    if (std::memcmp(&edges[i], &kDefault, sizeof kDefault) != 0) return false;
  }
  return true;
}

// Fills the caller's edge-data array (when given) with default edges for `n` entries.
void FillDefaultEdges(cudaGraphEdgeData* edges, size_t n) {
  if (edges != nullptr) std::memset(edges, 0, n * sizeof *edges);
}

cudaError_t DriverKernel(const cudaKernelNodeParams* p, CUDA_KERNEL_NODE_PARAMS* out) {
  if (p == nullptr) return RecordLastError(cudaErrorInvalidValue);
  *out = CUDA_KERNEL_NODE_PARAMS{};
  const cudaError_t e = gpuvm::cudart::KernelFunction(p->func, &out->func);
  if (e != cudaSuccess) return e;
  out->gridDimX = p->gridDim.x, out->gridDimY = p->gridDim.y, out->gridDimZ = p->gridDim.z;
  out->blockDimX = p->blockDim.x, out->blockDimY = p->blockDim.y, out->blockDimZ = p->blockDim.z;
  out->sharedMemBytes = p->sharedMemBytes;
  out->kernelParams = p->kernelParams;
  out->extra = p->extra;
  return cudaSuccess;
}

// A copy node's parameters in the driver's words (the current context made first: DriverCopy
// resolves pointers in it).
cudaError_t DriverCopyNode(const cudaMemcpy3DParms* p, CUDA_MEMCPY3D* out) {
  const CUresult r = EnsureCurrentContext();
  if (r != CUDA_SUCCESS) return Rec(r);
  return gpuvm::cudart::DriverCopy(p, out);
}

// The 1D copy nodes' description: `count` bytes as a one-row 3D copy.
cudaMemcpy3DParms Linear1D(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  cudaMemcpy3DParms p{};
  p.srcPtr = cudaPitchedPtr{const_cast<void*>(src), count, count, 1};
  p.dstPtr = cudaPitchedPtr{dst, count, count, 1};
  p.extent = cudaExtent{count, 1, 1};
  p.kind = kind;
  return p;
}

CUDA_MEMSET_NODE_PARAMS DriverMemset(const cudaMemsetParams& p) {
  CUDA_MEMSET_NODE_PARAMS m{};
  m.dst = reinterpret_cast<CUdeviceptr>(p.dst);
  m.pitch = p.pitch;
  m.value = p.value;
  m.elementSize = p.elementSize;
  m.width = p.width;
  m.height = p.height;
  return m;
}

}  // namespace

// ---- stream capture ----

GPUVM_EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  return InContext(cuStreamBeginCapture_v2, stream, CUstreamCaptureMode(mode));
}
GPUVM_EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream,
                                                     cudaStreamCaptureMode mode) {
  return cudaStreamBeginCapture(stream, mode);
}
GPUVM_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  return InContext(cuStreamEndCapture, stream, graph);
}
GPUVM_EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t* graph) {
  return cudaStreamEndCapture(stream, graph);
}
GPUVM_EXPORT cudaError_t cudaStreamIsCapturing(cudaStream_t stream,
                                               cudaStreamCaptureStatus* status) {
  return InContext(cuStreamIsCapturing, stream, reinterpret_cast<CUstreamCaptureStatus*>(status));
}
GPUVM_EXPORT cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t stream,
                                                    cudaStreamCaptureStatus* status) {
  return cudaStreamIsCapturing(stream, status);
}
GPUVM_EXPORT cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream,
                                                  cudaStreamCaptureStatus* status,
                                                  unsigned long long* id, cudaGraph_t* graph,
                                                  const cudaGraphNode_t** deps,
                                                  const cudaGraphEdgeData** edges, size_t* count) {
  if (status == nullptr) return RecordLastError(cudaErrorInvalidValue);
  const void* edge_data = nullptr;
  const cudaError_t e =
      InContext(cuStreamGetCaptureInfo_v3, stream, reinterpret_cast<CUstreamCaptureStatus*>(status),
                id, graph, deps, edges != nullptr ? &edge_data : nullptr, count);
  if (e == cudaSuccess && edges != nullptr) *edges = nullptr;  // all default edges
  return e;
}
GPUVM_EXPORT cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t stream,
                                                       cudaStreamCaptureStatus* status,
                                                       unsigned long long* id, cudaGraph_t* graph,
                                                       const cudaGraphNode_t** deps,
                                                       const cudaGraphEdgeData** edges,
                                                       size_t* count) {
  return cudaStreamGetCaptureInfo(stream, status, id, graph, deps, edges, count);
}
GPUVM_EXPORT cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  return Rec(cuThreadExchangeStreamCaptureMode(reinterpret_cast<CUstreamCaptureMode*>(mode)));
}

// ---- graphs ----

GPUVM_EXPORT cudaError_t cudaGraphCreate(cudaGraph_t* graph, unsigned int flags) {
  return InContext(cuGraphCreate, graph, flags);
}
GPUVM_EXPORT cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  return InContext(cuGraphDestroy, graph);
}
GPUVM_EXPORT cudaError_t cudaGraphClone(cudaGraph_t* clone, cudaGraph_t original) {
  return InContext(cuGraphClone, clone, original);
}

GPUVM_EXPORT cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                                const cudaGraphNode_t* deps, size_t n,
                                                const cudaKernelNodeParams* p) {
  CUDA_KERNEL_NODE_PARAMS params;
  const cudaError_t e = DriverKernel(p, &params);
  if (e != cudaSuccess) return e;
  return InContext(cuGraphAddKernelNode_v2, node, graph, deps, n, &params);
}

GPUVM_EXPORT cudaError_t cudaGraphKernelNodeGetParams(cudaGraphNode_t node,
                                                      cudaKernelNodeParams* p) {
  if (p == nullptr) return RecordLastError(cudaErrorInvalidValue);
  CUDA_KERNEL_NODE_PARAMS params;
  const cudaError_t e = InContext(cuGraphKernelNodeGetParams_v2, node, &params);
  if (e != cudaSuccess) return e;
  // The runtime names a kernel by its host stub; a kernel loaded through the driver API has none.
  p->func = const_cast<void*>(gpuvm::cudart::HostFunctionOf(params.func));
  p->gridDim = dim3{params.gridDimX, params.gridDimY, params.gridDimZ};
  p->blockDim = dim3{params.blockDimX, params.blockDimY, params.blockDimZ};
  p->sharedMemBytes = params.sharedMemBytes;
  p->kernelParams = params.kernelParams;
  p->extra = params.extra;
  return cudaSuccess;
}

GPUVM_EXPORT cudaError_t cudaGraphKernelNodeSetParams(cudaGraphNode_t node,
                                                      const cudaKernelNodeParams* p) {
  CUDA_KERNEL_NODE_PARAMS params;
  const cudaError_t e = DriverKernel(p, &params);
  if (e != cudaSuccess) return e;
  return InContext(cuGraphKernelNodeSetParams_v2, node, &params);
}

GPUVM_EXPORT cudaError_t cudaGraphExecKernelNodeSetParams(cudaGraphExec_t exec,
                                                          cudaGraphNode_t node,
                                                          const cudaKernelNodeParams* p) {
  CUDA_KERNEL_NODE_PARAMS params;
  const cudaError_t e = DriverKernel(p, &params);
  if (e != cudaSuccess) return e;
  return InContext(cuGraphExecKernelNodeSetParams_v2, exec, node, &params);
}

// The instantiated graph's step takes new work; the graph's node keeps its own (CUDA's rule).
GPUVM_EXPORT cudaError_t cudaGraphExecMemcpyNodeSetParams(cudaGraphExec_t exec,
                                                          cudaGraphNode_t node,
                                                          const cudaMemcpy3DParms* p) {
  CUDA_MEMCPY3D copy;
  const cudaError_t e = DriverCopyNode(p, &copy);
  if (e != cudaSuccess) return e;
  return InContext(cuGraphExecMemcpyNodeSetParams, exec, node, &copy, CUcontext{nullptr});
}

GPUVM_EXPORT cudaError_t cudaGraphExecMemcpyNodeSetParams1D(cudaGraphExec_t exec,
                                                            cudaGraphNode_t node, void* dst,
                                                            const void* src, size_t count,
                                                            cudaMemcpyKind kind) {
  const cudaMemcpy3DParms p = Linear1D(dst, src, count, kind);
  return cudaGraphExecMemcpyNodeSetParams(exec, node, &p);
}

GPUVM_EXPORT cudaError_t cudaGraphExecMemsetNodeSetParams(cudaGraphExec_t exec,
                                                          cudaGraphNode_t node,
                                                          const cudaMemsetParams* p) {
  if (p == nullptr) return RecordLastError(cudaErrorInvalidValue);
  const CUDA_MEMSET_NODE_PARAMS m = DriverMemset(*p);
  return InContext(cuGraphExecMemsetNodeSetParams, exec, node, &m, CUcontext{nullptr});
}

GPUVM_EXPORT cudaError_t cudaGraphExecHostNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                                        const cudaHostNodeParams* p) {
  if (p == nullptr) return RecordLastError(cudaErrorInvalidValue);
  const CUDA_HOST_NODE_PARAMS host{p->fn, p->userData};
  return InContext(cuGraphExecHostNodeSetParams, exec, node, &host);
}

GPUVM_EXPORT cudaError_t cudaGraphExecEventRecordNodeSetEvent(cudaGraphExec_t exec,
                                                              cudaGraphNode_t node,
                                                              cudaEvent_t event) {
  return InContext(cuGraphExecEventRecordNodeSetEvent, exec, node, event);
}

GPUVM_EXPORT cudaError_t cudaGraphExecEventWaitNodeSetEvent(cudaGraphExec_t exec,
                                                            cudaGraphNode_t node,
                                                            cudaEvent_t event) {
  return InContext(cuGraphExecEventWaitNodeSetEvent, exec, node, event);
}

GPUVM_EXPORT cudaError_t cudaUserObjectCreate(CUuserObject* out, void* ptr, cudaHostFn_t destroy,
                                              unsigned int initial_refs, unsigned int flags) {
  return InContext(cuUserObjectCreate, out, ptr, destroy, initial_refs, flags);
}
GPUVM_EXPORT cudaError_t cudaUserObjectRetain(CUuserObject o, unsigned int count) {
  return InContext(cuUserObjectRetain, o, count);
}
GPUVM_EXPORT cudaError_t cudaUserObjectRelease(CUuserObject o, unsigned int count) {
  return InContext(cuUserObjectRelease, o, count);
}
GPUVM_EXPORT cudaError_t cudaGraphRetainUserObject(cudaGraph_t graph, CUuserObject o,
                                                   unsigned int count, unsigned int flags) {
  return InContext(cuGraphRetainUserObject, graph, o, count, flags);
}
GPUVM_EXPORT cudaError_t cudaGraphReleaseUserObject(cudaGraph_t graph, CUuserObject o,
                                                    unsigned int count) {
  return InContext(cuGraphReleaseUserObject, graph, o, count);
}

GPUVM_EXPORT cudaError_t cudaGraphNodeSetEnabled(cudaGraphExec_t exec, cudaGraphNode_t node,
                                                 unsigned int enabled) {
  return InContext(cuGraphNodeSetEnabled, exec, node, enabled);
}

GPUVM_EXPORT cudaError_t cudaGraphNodeGetEnabled(cudaGraphExec_t exec, cudaGraphNode_t node,
                                                 unsigned int* enabled) {
  return InContext(cuGraphNodeGetEnabled, exec, node, enabled);
}

GPUVM_EXPORT cudaError_t cudaGraphAddMemcpyNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                                const cudaGraphNode_t* deps, size_t n,
                                                const cudaMemcpy3DParms* p) {
  CUDA_MEMCPY3D copy;
  const cudaError_t e = DriverCopyNode(p, &copy);
  if (e != cudaSuccess) return e;
  return InContext(cuGraphAddMemcpyNode, node, graph, deps, n, &copy, CUcontext{nullptr});
}

GPUVM_EXPORT cudaError_t cudaGraphAddMemcpyNode1D(cudaGraphNode_t* node, cudaGraph_t graph,
                                                  const cudaGraphNode_t* deps, size_t n, void* dst,
                                                  const void* src, size_t count,
                                                  cudaMemcpyKind kind) {
  const cudaMemcpy3DParms p = Linear1D(dst, src, count, kind);
  return cudaGraphAddMemcpyNode(node, graph, deps, n, &p);
}

GPUVM_EXPORT cudaError_t cudaGraphAddMemsetNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                                const cudaGraphNode_t* deps, size_t n,
                                                const cudaMemsetParams* p) {
  if (p == nullptr) return RecordLastError(cudaErrorInvalidValue);
  const CUDA_MEMSET_NODE_PARAMS m = DriverMemset(*p);
  return InContext(cuGraphAddMemsetNode, node, graph, deps, n, &m, CUcontext{nullptr});
}

GPUVM_EXPORT cudaError_t cudaGraphMemsetNodeGetParams(cudaGraphNode_t node, cudaMemsetParams* p) {
  if (p == nullptr) return RecordLastError(cudaErrorInvalidValue);
  CUDA_MEMSET_NODE_PARAMS m;
  const cudaError_t e = InContext(cuGraphMemsetNodeGetParams, node, &m);
  if (e != cudaSuccess) return e;
  p->dst = reinterpret_cast<void*>(m.dst);
  p->pitch = m.pitch;
  p->value = m.value;
  p->elementSize = m.elementSize;
  p->width = m.width;
  p->height = m.height;
  return cudaSuccess;
}

GPUVM_EXPORT cudaError_t cudaGraphAddHostNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                              const cudaGraphNode_t* deps, size_t n,
                                              const cudaHostNodeParams* p) {
  if (p == nullptr) return RecordLastError(cudaErrorInvalidValue);
  const CUDA_HOST_NODE_PARAMS host{p->fn, p->userData};
  return InContext(cuGraphAddHostNode, node, graph, deps, n, &host);
}

GPUVM_EXPORT cudaError_t cudaGraphHostNodeGetParams(cudaGraphNode_t node, cudaHostNodeParams* p) {
  if (p == nullptr) return RecordLastError(cudaErrorInvalidValue);
  CUDA_HOST_NODE_PARAMS host;
  const cudaError_t e = InContext(cuGraphHostNodeGetParams, node, &host);
  if (e == cudaSuccess) *p = cudaHostNodeParams{host.fn, host.userData};
  return e;
}

GPUVM_EXPORT cudaError_t cudaGraphAddEmptyNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                               const cudaGraphNode_t* deps, size_t n) {
  return InContext(cuGraphAddEmptyNode, node, graph, deps, n);
}

GPUVM_EXPORT cudaError_t cudaGraphAddEventRecordNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                                     const cudaGraphNode_t* deps, size_t n,
                                                     cudaEvent_t event) {
  return InContext(cuGraphAddEventRecordNode, node, graph, deps, n, event);
}

GPUVM_EXPORT cudaError_t cudaGraphAddEventWaitNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                                   const cudaGraphNode_t* deps, size_t n,
                                                   cudaEvent_t event) {
  return InContext(cuGraphAddEventWaitNode, node, graph, deps, n, event);
}

GPUVM_EXPORT cudaError_t cudaGraphAddDependencies(cudaGraph_t graph, const cudaGraphNode_t* from,
                                                  const cudaGraphNode_t* to,
                                                  const cudaGraphEdgeData* edges, size_t n) {
  if (!DefaultEdges(edges, n)) return RecordLastError(cudaErrorNotSupported);
  return InContext(cuGraphAddDependencies, graph, from, to, n);
}

GPUVM_EXPORT cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes,
                                           size_t* count) {
  return InContext(cuGraphGetNodes, graph, nodes, count);
}

GPUVM_EXPORT cudaError_t cudaGraphGetRootNodes(cudaGraph_t graph, cudaGraphNode_t* nodes,
                                               size_t* count) {
  return InContext(cuGraphGetRootNodes, graph, nodes, count);
}

GPUVM_EXPORT cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, cudaGraphNodeType* type) {
  return InContext(cuGraphNodeGetType, node, reinterpret_cast<CUgraphNodeType*>(type));
}

namespace {

// A driver listing of a node's neighbours, with default edges for the caller's edge-data array.
cudaError_t Neighbours(CUresult (*list)(CUgraphNode, CUgraphNode*, size_t*), cudaGraphNode_t node,
                       cudaGraphNode_t* out, cudaGraphEdgeData* edges, size_t* count) {
  const size_t room = count != nullptr ? *count : 0;
  const cudaError_t e = InContext(list, node, out, count);
  if (e == cudaSuccess && out != nullptr) FillDefaultEdges(edges, room);
  return e;
}

}  // namespace

GPUVM_EXPORT cudaError_t cudaGraphNodeGetDependencies(cudaGraphNode_t node, cudaGraphNode_t* deps,
                                                      cudaGraphEdgeData* edges, size_t* count) {
  return Neighbours(cuGraphNodeGetDependencies, node, deps, edges, count);
}

GPUVM_EXPORT cudaError_t cudaGraphNodeGetDependentNodes(cudaGraphNode_t node, cudaGraphNode_t* out,
                                                        cudaGraphEdgeData* edges, size_t* count) {
  return Neighbours(cuGraphNodeGetDependentNodes, node, out, edges, count);
}

// ---- executable graphs ----

GPUVM_EXPORT cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                              unsigned long long flags) {
  return InContext(cuGraphInstantiateWithFlags, exec, graph, flags);
}
GPUVM_EXPORT cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph,
                                                       unsigned long long flags) {
  return cudaGraphInstantiate(exec, graph, flags);
}
GPUVM_EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  return InContext(cuGraphLaunch, exec, stream);
}
GPUVM_EXPORT cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t exec, cudaStream_t stream) {
  return cudaGraphLaunch(exec, stream);
}
GPUVM_EXPORT cudaError_t cudaGraphUpload(cudaGraphExec_t exec, cudaStream_t stream) {
  return InContext(cuGraphUpload, exec, stream);
}
GPUVM_EXPORT cudaError_t cudaGraphUpload_ptsz(cudaGraphExec_t exec, cudaStream_t stream) {
  return cudaGraphUpload(exec, stream);
}
GPUVM_EXPORT cudaError_t cudaGraphExecGetFlags(cudaGraphExec_t exec, unsigned long long* flags) {
  return InContext(cuGraphExecGetFlags, exec, reinterpret_cast<cuuint64_t*>(flags));
}
GPUVM_EXPORT cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph,
                                             cudaGraphExecUpdateResultInfo* info) {
  static_assert(sizeof(cudaGraphExecUpdateResultInfo) == sizeof(CUgraphExecUpdateResultInfo));
  return InContext(cuGraphExecUpdate_v2, exec, graph,
                   reinterpret_cast<CUgraphExecUpdateResultInfo*>(info));
}
GPUVM_EXPORT cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  return InContext(cuGraphExecDestroy, exec);
}
