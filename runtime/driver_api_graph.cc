// libcuda.so.1, graphs and stream capture (driver_api_graph.h has the model).
//
// Threading: every entry point may be called from any thread; g_mu guards all graph state.
#include "runtime/driver_api_graph.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "runtime/driver_api.h"

using gpuvm::runtime::driver_api::KernelSpec;
using gpuvm::runtime::driver_api::LaunchSpec;
using gpuvm::runtime::driver_api::PackParams;
using gpuvm::runtime::driver_api::Replay;

struct CUgraphNode_st {
  CUgraph_st* graph = nullptr;
  uint64_t serial = 0;  // unique for the process's life: an exec's key (an address may be reused)
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  std::vector<CUgraphNode_st*> deps;        // edges into this node
  std::vector<CUgraphNode_st*> dependents;  // edges out of it
  // The work: a kernel node's launch, or any other node's call (empty nodes have none).
  KernelSpec kernel;
  std::vector<void*> kernel_param_ptrs;  // into kernel.params, for GetParams
  Replay replay;
  // What the Get*Params calls answer, for nodes made from such parameters (a captured node holds
  // the captured call instead).
  std::optional<CUDA_MEMCPY3D> copy;
  std::optional<CUDA_MEMSET_NODE_PARAMS> memset;
  std::optional<CUDA_HOST_NODE_PARAMS> host;
  CUevent event = nullptr;
};

// A user object: the program's pointer and destructor, and its references (the program's, graphs'
// and executable graphs', and those a running graph launch holds until its steps have run).
struct CUuserObject_st {
  void* ptr = nullptr;
  CUhostFn destroy = nullptr;
  uint64_t refs = 0;  // guarded by g_user_mu
};

namespace {
// References a graph or an executable graph holds, per object.
using UserRefs = std::map<CUuserObject_st*, uint64_t>;
}  // namespace

struct CUgraph_st {
  std::vector<std::unique_ptr<CUgraphNode_st>> nodes;
  UserRefs user_refs;  // guarded by g_mu
};

namespace {

// One step of an instantiated graph.
struct Step {
  CUgraphNodeType type;
  std::shared_ptr<const KernelSpec> kernel;  // kernel nodes
  Replay replay;                             // the others (empty nodes: none)
  bool enabled = true;  // cuGraphNodeSetEnabled: a disabled step is an empty node until enabled
};

}  // namespace

struct CUgraphExec_st {
  CUctx_st* ctx = nullptr;
  std::vector<Step> steps;  // in dependency order
  // Node (serial) of the graph it was made from, or updated from, -> its step.
  std::unordered_map<uint64_t, size_t> index;
  // Per node of that graph in creation order: its step, type and dependencies (as creation
  // indices), which cuGraphExecUpdate compares a new graph with.
  struct Shape {
    size_t step;
    CUgraphNodeType type;
    std::vector<size_t> deps;
  };
  std::vector<Shape> shape;
  UserRefs user_refs;  // taken from the graph at instantiation; guarded by g_mu
};

namespace {

// Guards every user object's count (taken after g_mu where both are held; never the other way).
std::mutex g_user_mu;

bool LiveUserObject(CUuserObject o) { return Process::Get().IsLive(o, Process::Kind::kUserObject); }

// Adds `count` references; false for an object that is gone.
bool RetainUser(CUuserObject_st* o, uint64_t count) {
  std::lock_guard lock(g_user_mu);
  if (!LiveUserObject(o)) return false;
  o->refs += count;
  return true;
}

// Takes `count` references away; the last one runs the destructor on a thread of its own (CUDA
// runs it on an internal thread and forbids it to call CUDA, so it may not run under our locks or
// on the caller's stack). CUDA_ERROR_INVALID_VALUE, changing nothing, for an object that is gone
// or fewer references than asked.
CUresult ReleaseUser(CUuserObject_st* o, uint64_t count) {
  void* ptr = nullptr;
  CUhostFn destroy = nullptr;
  {
    std::lock_guard lock(g_user_mu);
    if (!LiveUserObject(o) || count > o->refs) return CUDA_ERROR_INVALID_VALUE;
    o->refs -= count;
    if (o->refs != 0) return CUDA_SUCCESS;
    Process::Get().Unregister(o);
    ptr = o->ptr;
    destroy = o->destroy;
    delete o;
  }
  std::thread([destroy, ptr] { destroy(ptr); }).detach();
  return CUDA_SUCCESS;
}

void ReleaseAll(const UserRefs& refs) {
  for (const auto& [o, n] : refs) (void)ReleaseUser(o, n);
}

// The same references again (a clone, an instantiation).
UserRefs RetainAll(const UserRefs& refs) {
  UserRefs out;
  for (const auto& [o, n] : refs) {
    if (RetainUser(o, n)) out[o] = n;
  }
  return out;
}

// A graph and its nodes go, handles and all, and the references it held.
void DeleteGraph(CUgraph_st* g) {
  Process& p = Process::Get();
  for (auto& n : g->nodes) p.Unregister(n.get());
  p.Unregister(g);
  ReleaseAll(g->user_refs);
  delete g;
}

}  // namespace

namespace gpuvm::runtime {

struct Capture {
  CUgraph_st* graph = nullptr;  // owned until cuStreamEndCapture hands it out
  CUstream_st* origin = nullptr;
  CUctx_st* ctx = nullptr;
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  bool ended = false;            // EndCapture ran or the origin went away
  bool counts_blocking = false;  // counted in ctx->blocking_captures while not ended
  uint64_t id = 0;
  // Every stream in the capture and the nodes its next node depends on.
  std::map<CUstream_st*, std::vector<CUgraphNode_st*>> tails;

  ~Capture() {
    if (graph != nullptr) DeleteGraph(graph);  // never handed out
  }
};

}  // namespace gpuvm::runtime

namespace {

using gpuvm::runtime::Capture;

std::mutex g_mu;
std::atomic<uint64_t> g_next_capture_id{1};
// Captures begun and not ended: while there are none, the event calls skip the lock.
std::atomic<int> g_active_captures{0};
uint64_t g_next_node_serial = 1;  // guarded by g_mu
thread_local CUstreamCaptureMode t_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

bool LiveGraph(CUgraph g) { return Process::Get().IsLive(g, Process::Kind::kGraph); }
bool LiveNode(CUgraphNode n) { return Process::Get().IsLive(n, Process::Kind::kGraphNode); }
bool LiveExec(CUgraphExec e) { return Process::Get().IsLive(e, Process::Kind::kGraphExec); }

// Leaves capture `cap` for good: no stream records into it any more. g_mu held.
void EndCaptureLocked(Capture* cap) {
  if (cap->ended) return;
  cap->ended = true;
  g_active_captures.fetch_sub(1, std::memory_order_acq_rel);
  if (cap->counts_blocking) cap->ctx->blocking_captures.fetch_sub(1, std::memory_order_acq_rel);
  for (auto& [s, tail] : cap->tails) {
    if (s->capture.get() == cap) {
      s->capturing.store(false, std::memory_order_release);
      s->capture.reset();  // may not destroy cap: the caller holds a reference
    }
  }
  cap->tails.clear();
}

CUgraphNode_st* AddNodeLocked(CUgraph_st* g, CUgraphNodeType type,
                              const std::vector<CUgraphNode_st*>& deps) {
  auto node = std::make_unique<CUgraphNode_st>();
  node->graph = g;
  node->serial = g_next_node_serial++;
  node->type = type;
  node->deps = deps;
  for (CUgraphNode_st* d : deps) d->dependents.push_back(node.get());
  CUgraphNode_st* raw = node.get();
  g->nodes.push_back(std::move(node));
  Process::Get().Register(raw, Process::Kind::kGraphNode);
  return raw;
}

// The node's recorded dependencies as a checked list: each a live node of `g`, none twice.
CUresult Dependencies(CUgraph_st* g, const CUgraphNode* deps, size_t n,
                      std::vector<CUgraphNode_st*>* out) {
  if (n > 0 && deps == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::set<CUgraphNode_st*> seen;
  for (size_t i = 0; i < n; ++i) {
    if (!LiveNode(deps[i]) || deps[i]->graph != g) return CUDA_ERROR_INVALID_VALUE;
    if (!seen.insert(deps[i]).second) return CUDA_ERROR_INVALID_VALUE;
    out->push_back(deps[i]);
  }
  return CUDA_SUCCESS;
}

// A kernel node's work from CUDA's parameters, checked as a launch would be (except the stream).
CUresult KernelFrom(const CUDA_KERNEL_NODE_PARAMS_v2& p, bool v2, KernelSpec* spec) {
  CUresult r = LiveFunction(p.func);
  if (r != CUDA_SUCCESS) return r;
  CUctx_st* ctx;
  if ((r = Current(&ctx)) != CUDA_SUCCESS) return r;
  if (v2 && (p.kern != nullptr || (p.ctx != nullptr && p.ctx != ctx))) {
    return CUDA_ERROR_INVALID_VALUE;  // no CUkernel objects; one context
  }
  if (p.func->module->ctx != ctx) return CUDA_ERROR_INVALID_CONTEXT;
  if (p.gridDimX == 0 || p.gridDimY == 0 || p.gridDimZ == 0 || p.blockDimX == 0 ||
      p.blockDimY == 0 || p.blockDimZ == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  spec->f = p.func;
  spec->grid[0] = p.gridDimX, spec->grid[1] = p.gridDimY, spec->grid[2] = p.gridDimZ;
  spec->block[0] = p.blockDimX, spec->block[1] = p.blockDimY, spec->block[2] = p.blockDimZ;
  spec->shared_bytes = p.sharedMemBytes;
  return PackParams(p.func, p.kernelParams, p.extra, &spec->params);
}

void SetKernelLocked(CUgraphNode_st* node, KernelSpec spec) {
  node->kernel = std::move(spec);
  node->kernel_param_ptrs.clear();
  for (const auto& param : node->kernel.f->kernel->params) {
    node->kernel_param_ptrs.push_back(node->kernel.params.data() + param.offset);
  }
}

// CUDA 11's kernel node parameters are CUDA 12's without the trailing kern and ctx (both null).
CUDA_KERNEL_NODE_PARAMS_v2 FromV1(const CUDA_KERNEL_NODE_PARAMS_v1& v1) {
  CUDA_KERNEL_NODE_PARAMS_v2 v2{};
  std::memcpy(&v2, &v1, sizeof v1);
  return v2;
}

CUDA_KERNEL_NODE_PARAMS_v2 KernelParamsOf(CUgraphNode_st* node) {
  CUDA_KERNEL_NODE_PARAMS_v2 p{};
  const KernelSpec& k = node->kernel;
  p.func = k.f;
  p.gridDimX = k.grid[0], p.gridDimY = k.grid[1], p.gridDimZ = k.grid[2];
  p.blockDimX = k.block[0], p.blockDimY = k.block[1], p.blockDimZ = k.block[2];
  p.sharedMemBytes = k.shared_bytes;
  p.kernelParams = node->kernel_param_ptrs.empty() ? nullptr : node->kernel_param_ptrs.data();
  p.ctx = k.f != nullptr ? k.f->module->ctx : nullptr;
  return p;
}

// Adds a node to `g` after `deps` (checked) and hands it out; `fill` sets its work. g_mu not held.
template <typename Fill>
CUresult AddNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t n,
                 CUgraphNodeType type, Fill fill) {
  CUresult r = CheckInit(out == nullptr);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(g_mu);
  if (!LiveGraph(g)) return CUDA_ERROR_INVALID_VALUE;
  std::vector<CUgraphNode_st*> checked;
  if ((r = Dependencies(g, deps, n, &checked)) != CUDA_SUCCESS) return r;
  CUgraphNode_st* node = AddNodeLocked(g, type, checked);
  fill(node);
  *out = node;
  return CUDA_SUCCESS;
}

// The answer of a call that reads a node of `type`: the node, checked.
CUresult NodeOfType(CUgraphNode node, CUgraphNodeType type) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!LiveNode(node) || node->type != type) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

// The checks a copy or memset node's parameters get, whether they make a node or give an
// executable graph's step new work: present, `ctx` null or the current context, and for copies no
// CUDA array side (a node's replay cannot describe one).
CUresult CheckNodeContext(CUcontext ctx) {
  CUctx_st* current;
  CUresult r = Current(&current);
  if (r != CUDA_SUCCESS) return r;
  return ctx != nullptr && ctx != current ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult CheckCopyNode(const CUDA_MEMCPY3D* copy, CUcontext ctx) {
  if (copy == nullptr) return CheckInit(true);
  if (CUresult r = CheckNodeContext(ctx); r != CUDA_SUCCESS) return r;
  if (copy->srcMemoryType == CU_MEMORYTYPE_ARRAY || copy->dstMemoryType == CU_MEMORYTYPE_ARRAY) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  return CUDA_SUCCESS;
}

CUresult CheckMemsetNode(const CUDA_MEMSET_NODE_PARAMS* m, CUcontext ctx) {
  if (m == nullptr) return CheckInit(true);
  if (CUresult r = CheckNodeContext(ctx); r != CUDA_SUCCESS) return r;
  if ((m->elementSize != 1 && m->elementSize != 2 && m->elementSize != 4) || m->width == 0 ||
      m->height == 0 || (m->height > 1 && m->pitch < m->width * m->elementSize)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

// Each node type's work, the same for a node and for an executable graph's step.
Replay CopyReplay(const CUDA_MEMCPY3D& c) {
  return [c](CUstream t) { return cuMemcpy3DAsync_v2(&c, t); };
}
Replay HostReplay(const CUDA_HOST_NODE_PARAMS& host) {
  return [host](CUstream t) { return cuLaunchHostFunc(t, host.fn, host.userData); };
}
Replay EventRecordReplay(CUevent e) {
  return [e](CUstream t) { return cuEventRecord(e, t); };
}
Replay EventWaitReplay(CUevent e) {
  return [e](CUstream t) { return cuStreamWaitEvent(t, e, 0); };
}
bool LiveEvent(CUevent e) { return Process::Get().IsLive(e, Process::Kind::kEvent); }

Replay MemsetReplay(const CUDA_MEMSET_NODE_PARAMS& m) {
  return [m](CUstream t) {
    switch (m.elementSize) {
      case 1:
        return cuMemsetD2D8Async(m.dst, m.pitch, (unsigned char)(m.value), m.width, m.height, t);
      case 2:
        return cuMemsetD2D16Async(m.dst, m.pitch, (unsigned short)(m.value), m.width, m.height, t);
      default:
        return cuMemsetD2D32Async(m.dst, m.pitch, m.value, m.width, m.height, t);
    }
  };
}

// Topological order of g's nodes (Kahn); false on a cycle. g_mu held.
bool Order(CUgraph_st* g, std::vector<CUgraphNode_st*>* order) {
  std::unordered_map<CUgraphNode_st*, size_t> waiting;
  std::deque<CUgraphNode_st*> ready;
  for (auto& n : g->nodes) {
    waiting[n.get()] = n->deps.size();
    if (n->deps.empty()) ready.push_back(n.get());
  }
  while (!ready.empty()) {
    CUgraphNode_st* n = ready.front();
    ready.pop_front();
    order->push_back(n);
    for (CUgraphNode_st* d : n->dependents) {
      if (--waiting[d] == 0) ready.push_back(d);
    }
  }
  return order->size() == g->nodes.size();
}

// Each node's dependencies as indices in the graph's creation order, sorted. g_mu held.
std::vector<std::vector<size_t>> DependencyIndices(CUgraph_st* g) {
  std::unordered_map<const CUgraphNode_st*, size_t> position;
  for (size_t i = 0; i < g->nodes.size(); ++i) position[g->nodes[i].get()] = i;
  std::vector<std::vector<size_t>> deps(g->nodes.size());
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    for (const CUgraphNode_st* d : g->nodes[i]->deps) deps[i].push_back(position.at(d));
    std::sort(deps[i].begin(), deps[i].end());
  }
  return deps;
}

Step StepOf(const CUgraphNode_st* n) {
  Step step{n->type, nullptr, n->replay};
  if (n->type == CU_GRAPH_NODE_TYPE_KERNEL) step.kernel = std::make_shared<KernelSpec>(n->kernel);
  return step;
}

}  // namespace

// ---- what the stream entry points call (driver_api_graph.h) ----

namespace gpuvm::runtime::driver_api {

namespace {

// The capture `s` records into, when it is active; g_mu held.
Capture* ActiveCapture(CUstream_st* s) {
  Capture* cap = s->capture.get();
  return cap != nullptr && !cap->ended ? cap : nullptr;
}

CUresult AddCaptured(CUstream_st* s, CUgraphNodeType type, KernelSpec* kernel, Replay replay) {
  std::lock_guard lock(g_mu);
  Capture* cap = ActiveCapture(s);
  if (cap == nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;  // ended meanwhile
  if (cap->status != CU_STREAM_CAPTURE_STATUS_ACTIVE) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  std::vector<CUgraphNode_st*>& tail = cap->tails[s];
  CUgraphNode_st* node = AddNodeLocked(cap->graph, type, tail);
  if (kernel != nullptr) {
    SetKernelLocked(node, std::move(*kernel));
  } else {
    node->replay = std::move(replay);
  }
  tail.assign(1, node);
  return CUDA_SUCCESS;
}

}  // namespace

CUresult CaptureNode(CUstream_st* s, CUgraphNodeType type, Replay replay) {
  return AddCaptured(s, type, nullptr, std::move(replay));
}

CUresult CaptureKernel(CUstream_st* s, KernelSpec spec) {
  return AddCaptured(s, CU_GRAPH_NODE_TYPE_KERNEL, &spec, nullptr);
}

CUresult CaptureEventRecord(CUstream_st* s, CUevent_st* e) {
  std::lock_guard lock(g_mu);
  Capture* cap = ActiveCapture(s);
  if (cap == nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
  if (cap->status != CU_STREAM_CAPTURE_STATUS_ACTIVE) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  e->capture = s->capture;
  e->capture_nodes = cap->tails[s];
  return CUDA_SUCCESS;
}

bool CapturedEvent(CUevent_st* e) {
  if (g_active_captures.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard lock(g_mu);
  return e->capture != nullptr && !e->capture->ended;
}

void ForgetEventCapture(CUevent_st* e) {
  // With no capture going on, whatever capture the event names has ended and counts for nothing.
  if (g_active_captures.load(std::memory_order_acquire) == 0) return;
  std::lock_guard lock(g_mu);
  e->capture.reset();
  e->capture_nodes.clear();
}

CUresult CaptureEventWait(CUstream_st* s, CUevent_st* e) {
  std::lock_guard lock(g_mu);
  Capture* mine = ActiveCapture(s);
  Capture* theirs = e->capture != nullptr && !e->capture->ended ? e->capture.get() : nullptr;
  // A capturing stream may wait only for work of its own capture (CUDA's isolation rule).
  if (theirs == nullptr)
    return mine != nullptr ? CUDA_ERROR_STREAM_CAPTURE_ISOLATION : CUDA_SUCCESS;
  if (mine != nullptr && mine != theirs) return CUDA_ERROR_STREAM_CAPTURE_MERGE;
  if (theirs->status != CU_STREAM_CAPTURE_STATUS_ACTIVE) {
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  if (s->is_default) {
    // The null stream cannot join a capture.
    theirs->status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  }
  std::vector<CUgraphNode_st*>& tail = theirs->tails[s];
  if (mine == nullptr) {  // the fork: s joins the capture
    s->capture = e->capture;
    s->capturing.store(true, std::memory_order_release);
    tail.clear();
  }
  for (CUgraphNode_st* n : e->capture_nodes) {
    if (std::find(tail.begin(), tail.end(), n) == tail.end()) tail.push_back(n);
  }
  return CUDA_SUCCESS;
}

CUresult RefuseInCapture(CUstream_st* s) {
  std::lock_guard lock(g_mu);
  if (Capture* cap = ActiveCapture(s)) cap->status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

CUresult RefuseLegacyInCapture(CUctx_st* ctx) {
  std::set<CUstream_st*> streams;
  {
    std::lock_guard lock(ctx->mu);
    streams = ctx->streams;
  }
  std::lock_guard lock(g_mu);
  for (CUstream_st* s : streams) {
    Capture* cap = ActiveCapture(s);
    if (cap != nullptr && (s->flags & CU_STREAM_NON_BLOCKING) == 0) {
      cap->status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    }
  }
  return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
}

void ForgetCapture(CUstream_st* s) {
  std::lock_guard lock(g_mu);
  std::shared_ptr<Capture> cap = s->capture;
  if (cap == nullptr) return;
  if (cap->origin == s) {
    cap->status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    EndCaptureLocked(cap.get());
  } else {
    cap->tails.erase(s);
    s->capturing.store(false, std::memory_order_release);
    s->capture.reset();
  }
}

}  // namespace gpuvm::runtime::driver_api

using gpuvm::runtime::driver_api::Capturing;

// ---- stream capture ----

GPUVM_EXPORT CUresult cuStreamBeginCapture_v2(CUstream handle, CUstreamCaptureMode mode) {
  CUctx_st* ctx;
  CUstream_st* s;
  CUresult r = CurrentStream(handle, &ctx, &s);
  if (r != CUDA_SUCCESS) return r;
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (s->is_default) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // the null stream
  std::lock_guard lock(g_mu);
  if (s->capture != nullptr) return CUDA_ERROR_ILLEGAL_STATE;  // already capturing
  auto cap = std::make_shared<Capture>();
  cap->graph = new CUgraph_st;
  cap->origin = s;
  cap->ctx = ctx;
  cap->mode = mode;
  cap->id = g_next_capture_id.fetch_add(1);
  cap->tails[s] = {};
  g_active_captures.fetch_add(1, std::memory_order_acq_rel);
  cap->counts_blocking = (s->flags & CU_STREAM_NON_BLOCKING) == 0;
  if (cap->counts_blocking) ctx->blocking_captures.fetch_add(1, std::memory_order_acq_rel);
  s->capture = std::move(cap);
  s->capturing.store(true, std::memory_order_release);
  return CUDA_SUCCESS;
}
GPUVM_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream handle, CUstreamCaptureMode mode) {
  return cuStreamBeginCapture_v2(handle, mode);
}
// CUDA 10.0's form, without a mode: global.
#undef cuStreamBeginCapture
GPUVM_EXPORT CUresult cuStreamBeginCapture(CUstream handle) {
  return cuStreamBeginCapture_v2(handle, CU_STREAM_CAPTURE_MODE_GLOBAL);
}
GPUVM_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream handle) {
  return cuStreamBeginCapture(handle);
}

GPUVM_EXPORT CUresult cuStreamEndCapture(CUstream handle, CUgraph* out) {
  CUctx_st* ctx;
  CUstream_st* s;
  CUresult r = Current(&ctx, /*check_health=*/false);
  if (r != CUDA_SUCCESS) return r;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if ((s = gpuvm::runtime::ResolveStream(ctx, handle)) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard lock(g_mu);
  std::shared_ptr<Capture> cap = s->capture;
  if (cap == nullptr || cap->ended) return CUDA_ERROR_ILLEGAL_STATE;  // not capturing
  if (cap->origin != s) return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
  // Every joined stream's work must lead into the origin's: the nodes the origin's tail depends on,
  // transitively.
  std::unordered_set<CUgraphNode_st*> joined;
  std::vector<CUgraphNode_st*> stack = cap->tails[s];
  while (!stack.empty()) {
    CUgraphNode_st* n = stack.back();
    stack.pop_back();
    if (!joined.insert(n).second) continue;
    for (CUgraphNode_st* d : n->deps) stack.push_back(d);
  }
  bool unjoined = false;
  for (auto& [other, tail] : cap->tails) {
    if (other == s) continue;
    for (CUgraphNode_st* n : tail) unjoined |= joined.count(n) == 0;
  }
  const bool invalidated = cap->status != CU_STREAM_CAPTURE_STATUS_ACTIVE;
  EndCaptureLocked(cap.get());
  *out = nullptr;
  if (invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  if (unjoined) return CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
  CUgraph_st* g = cap->graph;
  cap->graph = nullptr;
  Process::Get().Register(g, Process::Kind::kGraph);
  *out = g;
  return CUDA_SUCCESS;
}
GPUVM_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream handle, CUgraph* out) {
  return cuStreamEndCapture(handle, out);
}

namespace {

// cuStreamIsCapturing and cuStreamGetCaptureInfo in all its forms. The dependencies point into the
// capture's own list, valid until the stream's next captured call (as in CUDA).
CUresult CaptureInfo(CUstream handle, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
                     const CUgraphNode** deps, const void** edges, size_t* count) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx, /*check_health=*/false);
  if (r != CUDA_SUCCESS) return r;
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUstream_st* s = gpuvm::runtime::ResolveStream(ctx, handle);
  if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  // Asking the legacy stream during a blocking capture is the same misuse as using it (but
  // invalidates nothing).
  if (gpuvm::runtime::driver_api::LegacyStreamInCapture(ctx, s, handle)) {
    return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  }
  std::lock_guard lock(g_mu);
  Capture* cap = s->capture != nullptr && !s->capture->ended ? s->capture.get() : nullptr;
  *status = cap != nullptr ? cap->status : CU_STREAM_CAPTURE_STATUS_NONE;
  if (id != nullptr && cap != nullptr) *id = cap->id;
  if (graph != nullptr) *graph = cap != nullptr ? cap->graph : nullptr;
  std::vector<CUgraphNode_st*>* tail = cap != nullptr ? &cap->tails[s] : nullptr;
  if (deps != nullptr) *deps = tail != nullptr && !tail->empty() ? tail->data() : nullptr;
  if (edges != nullptr) *edges = nullptr;  // every edge is a default edge
  if (count != nullptr) *count = tail != nullptr ? tail->size() : 0;
  return CUDA_SUCCESS;
}

}  // namespace

GPUVM_EXPORT CUresult cuStreamIsCapturing(CUstream handle, CUstreamCaptureStatus* status) {
  return CaptureInfo(handle, status, nullptr, nullptr, nullptr, nullptr, nullptr);
}
GPUVM_EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream handle, CUstreamCaptureStatus* status) {
  return cuStreamIsCapturing(handle, status);
}

#undef cuStreamGetCaptureInfo
GPUVM_EXPORT CUresult cuStreamGetCaptureInfo(CUstream handle, CUstreamCaptureStatus* status,
                                             cuuint64_t* id) {
  return CaptureInfo(handle, status, id, nullptr, nullptr, nullptr, nullptr);
}
GPUVM_EXPORT CUresult cuStreamGetCaptureInfo_ptsz(CUstream handle, CUstreamCaptureStatus* status,
                                                  cuuint64_t* id) {
  return cuStreamGetCaptureInfo(handle, status, id);
}
GPUVM_EXPORT CUresult cuStreamGetCaptureInfo_v2(CUstream handle, CUstreamCaptureStatus* status,
                                                cuuint64_t* id, CUgraph* graph,
                                                const CUgraphNode** deps, size_t* count) {
  return CaptureInfo(handle, status, id, graph, deps, nullptr, count);
}
GPUVM_EXPORT CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream handle, CUstreamCaptureStatus* status,
                                                     cuuint64_t* id, CUgraph* graph,
                                                     const CUgraphNode** deps, size_t* count) {
  return cuStreamGetCaptureInfo_v2(handle, status, id, graph, deps, count);
}
GPUVM_EXPORT CUresult cuStreamGetCaptureInfo_v3(CUstream handle, CUstreamCaptureStatus* status,
                                                cuuint64_t* id, CUgraph* graph,
                                                const CUgraphNode** deps, const void** edges,
                                                size_t* count) {
  return CaptureInfo(handle, status, id, graph, deps, edges, count);
}
GPUVM_EXPORT CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream handle, CUstreamCaptureStatus* status,
                                                     cuuint64_t* id, CUgraph* graph,
                                                     const CUgraphNode** deps, const void** edges,
                                                     size_t* count) {
  return cuStreamGetCaptureInfo_v3(handle, status, id, graph, deps, edges, count);
}

// The mode is kept per thread and answered; the calls it would forbid during a global capture are
// not policed beyond the null-stream rule (driver_api_graph.h).
GPUVM_EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  if (mode == nullptr ||
      (*mode != CU_STREAM_CAPTURE_MODE_GLOBAL && *mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
       *mode != CU_STREAM_CAPTURE_MODE_RELAXED)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::swap(*mode, t_capture_mode);
  return CUDA_SUCCESS;
}

// ---- graphs ----

GPUVM_EXPORT CUresult cuGraphCreate(CUgraph* out, unsigned int flags) {
  CUresult r = CheckInit(out == nullptr || flags != 0);
  if (r != CUDA_SUCCESS) return r;
  auto* g = new CUgraph_st;
  Process::Get().Register(g, Process::Kind::kGraph);
  *out = g;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuGraphDestroy(CUgraph g) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(g_mu);
  if (!LiveGraph(g)) return CUDA_ERROR_INVALID_VALUE;
  DeleteGraph(g);
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuGraphClone(CUgraph* out, CUgraph original) {
  CUresult r = CheckInit(out == nullptr);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(g_mu);
  if (!LiveGraph(original)) return CUDA_ERROR_INVALID_VALUE;
  auto* g = new CUgraph_st;
  std::unordered_map<const CUgraphNode_st*, CUgraphNode_st*> copy_of;
  for (auto& n : original->nodes) {
    std::vector<CUgraphNode_st*> deps;
    for (CUgraphNode_st* d : n->deps) deps.push_back(copy_of.at(d));  // nodes come after deps
    CUgraphNode_st* c = AddNodeLocked(g, n->type, deps);
    if (n->type == CU_GRAPH_NODE_TYPE_KERNEL) SetKernelLocked(c, n->kernel);
    c->replay = n->replay;
    c->copy = n->copy, c->memset = n->memset, c->host = n->host, c->event = n->event;
    copy_of[n.get()] = c;
  }
  g->user_refs = RetainAll(original->user_refs);
  Process::Get().Register(g, Process::Kind::kGraph);
  *out = g;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode* out, CUgraph g, const CUgraphNode* deps,
                                              size_t n, const CUDA_KERNEL_NODE_PARAMS* params) {
  if (params == nullptr) return CheckInit(true);
  KernelSpec spec;
  CUresult r = KernelFrom(*params, true, &spec);
  if (r != CUDA_SUCCESS) return r;
  return AddNode(out, g, deps, n, CU_GRAPH_NODE_TYPE_KERNEL,
                 [&](CUgraphNode_st* node) { SetKernelLocked(node, std::move(spec)); });
}

#undef cuGraphAddKernelNode
GPUVM_EXPORT CUresult cuGraphAddKernelNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps,
                                           size_t n, const CUDA_KERNEL_NODE_PARAMS_v1* params) {
  if (params == nullptr) return CheckInit(true);
  const CUDA_KERNEL_NODE_PARAMS_v2 v2 = FromV1(*params);
  return cuGraphAddKernelNode_v2(out, g, deps, n, &v2);
}

GPUVM_EXPORT CUresult cuGraphAddMemcpyNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps,
                                           size_t n, const CUDA_MEMCPY3D* copy, CUcontext ctx) {
  if (CUresult r = CheckCopyNode(copy, ctx); r != CUDA_SUCCESS) return r;
  const CUDA_MEMCPY3D c = *copy;
  return AddNode(out, g, deps, n, CU_GRAPH_NODE_TYPE_MEMCPY, [&](CUgraphNode_st* node) {
    node->copy = c;
    node->replay = CopyReplay(c);
  });
}

GPUVM_EXPORT CUresult cuGraphAddMemsetNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps,
                                           size_t n, const CUDA_MEMSET_NODE_PARAMS* m,
                                           CUcontext ctx) {
  if (CUresult r = CheckMemsetNode(m, ctx); r != CUDA_SUCCESS) return r;
  const CUDA_MEMSET_NODE_PARAMS copy = *m;
  return AddNode(out, g, deps, n, CU_GRAPH_NODE_TYPE_MEMSET, [&](CUgraphNode_st* node) {
    node->memset = copy;
    node->replay = MemsetReplay(copy);
  });
}

GPUVM_EXPORT CUresult cuGraphAddHostNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps,
                                         size_t n, const CUDA_HOST_NODE_PARAMS* p) {
  if (p == nullptr || p->fn == nullptr) return CheckInit(true);
  const CUDA_HOST_NODE_PARAMS host = *p;
  return AddNode(out, g, deps, n, CU_GRAPH_NODE_TYPE_HOST, [&](CUgraphNode_st* node) {
    node->host = host;
    node->replay = HostReplay(host);
  });
}

GPUVM_EXPORT CUresult cuGraphAddEmptyNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps,
                                          size_t n) {
  return AddNode(out, g, deps, n, CU_GRAPH_NODE_TYPE_EMPTY, [](CUgraphNode_st*) {});
}

GPUVM_EXPORT CUresult cuGraphAddEventRecordNode(CUgraphNode* out, CUgraph g,
                                                const CUgraphNode* deps, size_t n, CUevent e) {
  if (!LiveEvent(e)) return CUDA_ERROR_INVALID_VALUE;
  return AddNode(out, g, deps, n, CU_GRAPH_NODE_TYPE_EVENT_RECORD, [&](CUgraphNode_st* node) {
    node->event = e;
    node->replay = EventRecordReplay(e);
  });
}

GPUVM_EXPORT CUresult cuGraphAddEventWaitNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps,
                                              size_t n, CUevent e) {
  if (!LiveEvent(e)) return CUDA_ERROR_INVALID_VALUE;
  return AddNode(out, g, deps, n, CU_GRAPH_NODE_TYPE_WAIT_EVENT, [&](CUgraphNode_st* node) {
    node->event = e;
    node->replay = EventWaitReplay(e);
  });
}

GPUVM_EXPORT CUresult cuGraphAddDependencies(CUgraph g, const CUgraphNode* from,
                                             const CUgraphNode* to, size_t n) {
  CUresult r = CheckInit(n > 0 && (from == nullptr || to == nullptr));
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(g_mu);
  if (!LiveGraph(g)) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < n; ++i) {  // all checked before any is added
    if (!LiveNode(from[i]) || !LiveNode(to[i]) || from[i]->graph != g || to[i]->graph != g ||
        from[i] == to[i]) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    const auto& deps = to[i]->deps;
    if (std::find(deps.begin(), deps.end(), from[i]) != deps.end()) return CUDA_ERROR_INVALID_VALUE;
    for (size_t j = 0; j < i; ++j) {
      if (from[j] == from[i] && to[j] == to[i]) return CUDA_ERROR_INVALID_VALUE;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    to[i]->deps.push_back(from[i]);
    from[i]->dependents.push_back(to[i]);
  }
  return CUDA_SUCCESS;
}

namespace {

// Writes `list` into a caller's array of *count entries (null: only the count), as CUDA's
// node-listing calls do: *count becomes the list's length.
CUresult ListNodes(const std::vector<CUgraphNode_st*>& list, CUgraphNode* out, size_t* count) {
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (out != nullptr) {
    const size_t n = std::min(*count, list.size());
    for (size_t i = 0; i < n; ++i) out[i] = list[i];
    for (size_t i = n; i < *count; ++i) out[i] = nullptr;
  }
  *count = list.size();
  return CUDA_SUCCESS;
}

}  // namespace

namespace {

// A listing call: `list(graph-or-node)` under the lock, after checking that handle is live.
template <typename Handle, typename List>
CUresult ListOf(Handle handle, bool live(Handle), List list, CUgraphNode* out, size_t* count) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(g_mu);
  if (!live(handle)) return CUDA_ERROR_INVALID_VALUE;
  return ListNodes(list(handle), out, count);
}

std::vector<CUgraphNode_st*> AllNodes(CUgraph g) {
  std::vector<CUgraphNode_st*> list;
  for (auto& n : g->nodes) list.push_back(n.get());
  return list;
}

std::vector<CUgraphNode_st*> RootNodes(CUgraph g) {
  std::vector<CUgraphNode_st*> list;
  for (auto& n : g->nodes) {
    if (n->deps.empty()) list.push_back(n.get());
  }
  return list;
}

}  // namespace

GPUVM_EXPORT CUresult cuGraphGetNodes(CUgraph g, CUgraphNode* nodes, size_t* count) {
  return ListOf(g, LiveGraph, AllNodes, nodes, count);
}

GPUVM_EXPORT CUresult cuGraphGetRootNodes(CUgraph g, CUgraphNode* nodes, size_t* count) {
  return ListOf(g, LiveGraph, RootNodes, nodes, count);
}

GPUVM_EXPORT CUresult cuGraphNodeGetDependencies(CUgraphNode node, CUgraphNode* deps,
                                                 size_t* count) {
  return ListOf(
      node, LiveNode, [](CUgraphNode n) { return n->deps; }, deps, count);
}

GPUVM_EXPORT CUresult cuGraphNodeGetDependentNodes(CUgraphNode node, CUgraphNode* out,
                                                   size_t* count) {
  return ListOf(
      node, LiveNode, [](CUgraphNode n) { return n->dependents; }, out, count);
}

GPUVM_EXPORT CUresult cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType* type) {
  CUresult r = CheckInit(type == nullptr);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(g_mu);
  if (!LiveNode(node)) return CUDA_ERROR_INVALID_VALUE;
  *type = node->type;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode node,
                                                    CUDA_KERNEL_NODE_PARAMS* params) {
  if (params == nullptr) return CheckInit(true);
  std::lock_guard lock(g_mu);
  CUresult r = NodeOfType(node, CU_GRAPH_NODE_TYPE_KERNEL);
  if (r != CUDA_SUCCESS) return r;
  *params = KernelParamsOf(node);
  return CUDA_SUCCESS;
}
#undef cuGraphKernelNodeGetParams
GPUVM_EXPORT CUresult cuGraphKernelNodeGetParams(CUgraphNode node,
                                                 CUDA_KERNEL_NODE_PARAMS_v1* params) {
  if (params == nullptr) return CheckInit(true);
  CUDA_KERNEL_NODE_PARAMS_v2 v2;
  CUresult r = cuGraphKernelNodeGetParams_v2(node, &v2);
  if (r == CUDA_SUCCESS) std::memcpy(params, &v2, sizeof *params);
  return r;
}

GPUVM_EXPORT CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode node,
                                                    const CUDA_KERNEL_NODE_PARAMS* params) {
  if (params == nullptr) return CheckInit(true);
  KernelSpec spec;
  CUresult r = KernelFrom(*params, true, &spec);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(g_mu);
  if ((r = NodeOfType(node, CU_GRAPH_NODE_TYPE_KERNEL)) != CUDA_SUCCESS) return r;
  SetKernelLocked(node, std::move(spec));
  return CUDA_SUCCESS;
}
#undef cuGraphKernelNodeSetParams
GPUVM_EXPORT CUresult cuGraphKernelNodeSetParams(CUgraphNode node,
                                                 const CUDA_KERNEL_NODE_PARAMS_v1* params) {
  if (params == nullptr) return CheckInit(true);
  const CUDA_KERNEL_NODE_PARAMS_v2 v2 = FromV1(*params);
  return cuGraphKernelNodeSetParams_v2(node, &v2);
}

namespace {

// A node's parameters as made (`field`), for the Get*Params call of nodes of `type`.
template <typename T>
CUresult ReadParams(CUgraphNode node, CUgraphNodeType type, std::optional<T> CUgraphNode_st::*field,
                    T* out) {
  if (out == nullptr) return CheckInit(true);
  std::lock_guard lock(g_mu);
  CUresult r = NodeOfType(node, type);
  if (r != CUDA_SUCCESS) return r;
  const std::optional<T>& params = node->*field;
  if (!params) return CUDA_ERROR_NOT_SUPPORTED;  // captured: no CUDA-shaped description
  *out = *params;
  return CUDA_SUCCESS;
}

}  // namespace

GPUVM_EXPORT CUresult cuGraphMemsetNodeGetParams(CUgraphNode node, CUDA_MEMSET_NODE_PARAMS* p) {
  return ReadParams(node, CU_GRAPH_NODE_TYPE_MEMSET, &CUgraphNode_st::memset, p);
}

GPUVM_EXPORT CUresult cuGraphMemcpyNodeGetParams(CUgraphNode node, CUDA_MEMCPY3D* p) {
  return ReadParams(node, CU_GRAPH_NODE_TYPE_MEMCPY, &CUgraphNode_st::copy, p);
}

GPUVM_EXPORT CUresult cuGraphHostNodeGetParams(CUgraphNode node, CUDA_HOST_NODE_PARAMS* p) {
  return ReadParams(node, CU_GRAPH_NODE_TYPE_HOST, &CUgraphNode_st::host, p);
}

// ---- executable graphs ----

GPUVM_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* out, CUgraph g,
                                                  unsigned long long flags) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  // AUTO_FREE_ON_LAUNCH (1) concerns allocation nodes, of which there are none; USE_NODE_PRIORITY
  // (8) has no effect with one stream. Upload (2) and device launch (4) are not offered.
  if (out == nullptr || (flags & ~0x9ull) != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(g_mu);
  if (!LiveGraph(g)) return CUDA_ERROR_INVALID_VALUE;
  std::vector<CUgraphNode_st*> order;
  if (!Order(g, &order)) return CUDA_ERROR_INVALID_VALUE;  // a cycle
  for (CUgraphNode_st* n : order) {
    if (n->type == CU_GRAPH_NODE_TYPE_KERNEL && n->kernel.f->module->ctx != ctx) {
      return CUDA_ERROR_INVALID_CONTEXT;
    }
  }
  auto exec = std::make_unique<CUgraphExec_st>();
  exec->ctx = ctx;
  std::unordered_map<const CUgraphNode_st*, size_t> step_of;
  for (CUgraphNode_st* n : order) {
    step_of[n] = exec->steps.size();
    exec->index[n->serial] = exec->steps.size();
    exec->steps.push_back(StepOf(n));
  }
  std::vector<std::vector<size_t>> deps = DependencyIndices(g);
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    exec->shape.push_back({step_of.at(g->nodes[i].get()), g->nodes[i]->type, std::move(deps[i])});
  }
  exec->user_refs = RetainAll(g->user_refs);
  CUgraphExec_st* raw = exec.release();
  Process::Get().Register(raw, Process::Kind::kGraphExec);
  *out = raw;
  return CUDA_SUCCESS;
}

#undef cuGraphInstantiate
GPUVM_EXPORT CUresult cuGraphInstantiate(CUgraphExec* out, CUgraph g, CUgraphNode* error_node,
                                         char* log, size_t log_size) {
  const CUresult r = cuGraphInstantiateWithFlags(out, g, 0);
  if (error_node != nullptr) *error_node = nullptr;
  if (log != nullptr && log_size > 0) log[0] = '\0';
  return r;
}
GPUVM_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec* out, CUgraph g, CUgraphNode* error_node,
                                            char* log, size_t log_size) {
  return cuGraphInstantiate(out, g, error_node, log, log_size);
}

GPUVM_EXPORT CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec exec, CUgraphNode node,
                                                        const CUDA_KERNEL_NODE_PARAMS* params) {
  if (params == nullptr) return CheckInit(true);
  KernelSpec spec;
  CUresult r = KernelFrom(*params, true, &spec);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(g_mu);
  if (!LiveExec(exec) || !LiveNode(node)) return CUDA_ERROR_INVALID_VALUE;
  auto it = exec->index.find(node->serial);
  if (it == exec->index.end() || exec->steps[it->second].type != CU_GRAPH_NODE_TYPE_KERNEL) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // CUDA: the function may not change its context; it may change otherwise.
  if (spec.f->module->ctx != exec->ctx) return CUDA_ERROR_INVALID_VALUE;
  exec->steps[it->second].kernel = std::make_shared<KernelSpec>(std::move(spec));
  return CUDA_SUCCESS;
}
#undef cuGraphExecKernelNodeSetParams
GPUVM_EXPORT CUresult cuGraphExecKernelNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                                     const CUDA_KERNEL_NODE_PARAMS_v1* params) {
  if (params == nullptr) return CheckInit(true);
  const CUDA_KERNEL_NODE_PARAMS_v2 v2 = FromV1(*params);
  return cuGraphExecKernelNodeSetParams_v2(exec, node, &v2);
}

namespace {

// A step of `exec` made from `node` (in the graph it was instantiated or last updated from) takes
// new work: the step must be of `type`. The graph's node itself keeps its parameters, as CUDA's
// Exec*SetParams leave the graph alone.
CUresult SetExecStep(CUgraphExec exec, CUgraphNode node, CUgraphNodeType type, Replay replay) {
  std::lock_guard lock(g_mu);
  if (!LiveExec(exec) || !LiveNode(node)) return CUDA_ERROR_INVALID_VALUE;
  auto it = exec->index.find(node->serial);
  if (it == exec->index.end() || exec->steps[it->second].type != type) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  exec->steps[it->second].replay = std::move(replay);
  return CUDA_SUCCESS;
}

}  // namespace

// The copy is checked when the graph runs, as an added node's is; it may name other memory than the
// instantiated node did (CUDA asks for the same contexts and 1D operands; this accepts more).
GPUVM_EXPORT CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                                     const CUDA_MEMCPY3D* copy, CUcontext ctx) {
  if (CUresult r = CheckCopyNode(copy, ctx); r != CUDA_SUCCESS) return r;
  return SetExecStep(exec, node, CU_GRAPH_NODE_TYPE_MEMCPY, CopyReplay(*copy));
}

GPUVM_EXPORT CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                                     const CUDA_MEMSET_NODE_PARAMS* m,
                                                     CUcontext ctx) {
  if (CUresult r = CheckMemsetNode(m, ctx); r != CUDA_SUCCESS) return r;
  return SetExecStep(exec, node, CU_GRAPH_NODE_TYPE_MEMSET, MemsetReplay(*m));
}

GPUVM_EXPORT CUresult cuGraphExecHostNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                                   const CUDA_HOST_NODE_PARAMS* p) {
  if (p == nullptr || p->fn == nullptr) return CheckInit(true);
  return SetExecStep(exec, node, CU_GRAPH_NODE_TYPE_HOST, HostReplay(*p));
}

GPUVM_EXPORT CUresult cuGraphExecEventRecordNodeSetEvent(CUgraphExec exec, CUgraphNode node,
                                                         CUevent e) {
  if (!LiveEvent(e)) return CUDA_ERROR_INVALID_VALUE;
  return SetExecStep(exec, node, CU_GRAPH_NODE_TYPE_EVENT_RECORD, EventRecordReplay(e));
}

GPUVM_EXPORT CUresult cuGraphExecEventWaitNodeSetEvent(CUgraphExec exec, CUgraphNode node,
                                                       CUevent e) {
  if (!LiveEvent(e)) return CUDA_ERROR_INVALID_VALUE;
  return SetExecStep(exec, node, CU_GRAPH_NODE_TYPE_WAIT_EVENT, EventWaitReplay(e));
}

// The new graph must have the instantiated one's shape: as many nodes, created in the same order
// with the same types and dependencies, and kernels of the same context. Then each step takes the
// new node's work, and the new graph's nodes name the steps for Exec*SetParams too.
GPUVM_EXPORT CUresult cuGraphExecUpdate_v2(CUgraphExec exec, CUgraph g,
                                           CUgraphExecUpdateResultInfo* info) {
  CUresult r = CheckInit(info == nullptr);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(g_mu);
  if (!LiveExec(exec) || !LiveGraph(g)) return CUDA_ERROR_INVALID_VALUE;
  *info = {CU_GRAPH_EXEC_UPDATE_SUCCESS, nullptr, nullptr};
  const auto refuse = [&](CUgraphExecUpdateResult why, CUgraphNode node) {
    *info = {why, node, nullptr};
    return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
  };
  if (g->nodes.size() != exec->shape.size()) {
    return refuse(CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, nullptr);
  }
  const std::vector<std::vector<size_t>> deps = DependencyIndices(g);
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    CUgraphNode_st* n = g->nodes[i].get();
    if (n->type != exec->shape[i].type) {
      return refuse(CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED, n);
    }
    if (deps[i] != exec->shape[i].deps)
      return refuse(CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, n);
    if (n->type == CU_GRAPH_NODE_TYPE_KERNEL && n->kernel.f->module->ctx != exec->ctx) {
      return refuse(CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE, n);
    }
  }
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    Step& step = exec->steps[exec->shape[i].step];
    const bool enabled = step.enabled;  // kept across updates, as the work is replaced
    step = StepOf(g->nodes[i].get());
    step.enabled = enabled;
    exec->index[g->nodes[i]->serial] = exec->shape[i].step;
  }
  return CUDA_SUCCESS;
}
#undef cuGraphExecUpdate
// CUDA 11's form: the failure's node and result in two out-parameters.
GPUVM_EXPORT CUresult cuGraphExecUpdate(CUgraphExec exec, CUgraph g, CUgraphNode* error_node,
                                        CUgraphExecUpdateResult* result) {
  if (error_node == nullptr || result == nullptr) return CheckInit(true);
  CUgraphExecUpdateResultInfo info{};
  const CUresult r = cuGraphExecUpdate_v2(exec, g, &info);
  *error_node = info.errorNode;
  *result = info.result;
  return r;
}

GPUVM_EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream handle) {
  CUctx_st* ctx;
  CUstream_st* s;
  CUresult r = CurrentStream(handle, &ctx, &s);
  if (r != CUDA_SUCCESS) return r;
  std::vector<Step> steps;
  // While its steps are queued, a launch holds references to the graph's user objects, given back
  // by a host function behind them (so destroying the executable graph meanwhile frees nothing
  // in use). A launch into a capturing stream records steps only, and holds none.
  auto held = std::make_unique<UserRefs>();
  const bool capturing = s->capturing.load(std::memory_order_acquire);
  {
    std::lock_guard lock(g_mu);
    if (!LiveExec(exec)) return CUDA_ERROR_INVALID_VALUE;
    if (exec->ctx != ctx) return CUDA_ERROR_INVALID_CONTEXT;
    steps = exec->steps;
    if (!capturing) *held = RetainAll(exec->user_refs);
  }
  struct Releaser {
    std::unique_ptr<UserRefs> refs;
    ~Releaser() {
      if (refs != nullptr) ReleaseAll(*refs);  // not queued: given back now
    }
  } releaser{held->empty() ? nullptr : std::move(held)};
  // Every step goes on the launch stream in dependency order; a launch into a capturing stream
  // records the steps there.
  for (const Step& step : steps) {
    if (!step.enabled) continue;
    if (step.kernel != nullptr) {
      r = LaunchSpec(*step.kernel, handle);
    } else if (step.replay) {
      r = step.replay(handle);
    }
    if (r != CUDA_SUCCESS) return r;
  }
  if (releaser.refs != nullptr) {
    UserRefs* refs = releaser.refs.get();
    const auto give_back = [](void* data) {
      std::unique_ptr<UserRefs> r(static_cast<UserRefs*>(data));
      ReleaseAll(*r);
    };
    if (cuLaunchHostFunc(handle, give_back, refs) == CUDA_SUCCESS) releaser.refs.release();
  }
  return CUDA_SUCCESS;
}
GPUVM_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream handle) {
  return cuGraphLaunch(exec, handle);
}

namespace {

// The step of `exec` made from `node`, which must be one that can be disabled (kernel, memset,
// memcpy, as CUDA allows); nullptr otherwise. g_mu held.
Step* EnablableStep(CUgraphExec exec, CUgraphNode node) {
  if (!LiveExec(exec) || !LiveNode(node)) return nullptr;
  auto it = exec->index.find(node->serial);
  if (it == exec->index.end()) return nullptr;
  Step& step = exec->steps[it->second];
  if (step.type != CU_GRAPH_NODE_TYPE_KERNEL && step.type != CU_GRAPH_NODE_TYPE_MEMSET &&
      step.type != CU_GRAPH_NODE_TYPE_MEMCPY) {
    return nullptr;
  }
  return &step;
}

}  // namespace

// A disabled step does nothing when the graph runs, until enabled again; its work is kept (and
// Exec*SetParams may still change it).
GPUVM_EXPORT CUresult cuGraphNodeSetEnabled(CUgraphExec exec, CUgraphNode node,
                                            unsigned int enabled) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(g_mu);
  Step* step = EnablableStep(exec, node);
  if (step == nullptr) return CUDA_ERROR_INVALID_VALUE;
  step->enabled = enabled != 0;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuGraphNodeGetEnabled(CUgraphExec exec, CUgraphNode node,
                                            unsigned int* enabled) {
  CUresult r = CheckInit(enabled == nullptr);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(g_mu);
  const Step* step = EnablableStep(exec, node);
  if (step == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *enabled = step->enabled ? 1 : 0;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuUserObjectCreate(CUuserObject* out, void* ptr, CUhostFn destroy,
                                         unsigned int initial_refs, unsigned int flags) {
  CUresult r = CheckInit(out == nullptr || destroy == nullptr || initial_refs == 0 ||
                         flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC);
  if (r != CUDA_SUCCESS) return r;
  auto* o = new CUuserObject_st{ptr, destroy, initial_refs};
  {
    std::lock_guard lock(g_user_mu);
    Process::Get().Register(o, Process::Kind::kUserObject);
  }
  *out = o;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuUserObjectRetain(CUuserObject o, unsigned int count) {
  CUresult r = CheckInit(count == 0);
  if (r != CUDA_SUCCESS) return r;
  return RetainUser(o, count) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

GPUVM_EXPORT CUresult cuUserObjectRelease(CUuserObject o, unsigned int count) {
  CUresult r = CheckInit(count == 0);
  if (r != CUDA_SUCCESS) return r;
  return ReleaseUser(o, count);
}

// The graph takes `count` new references, or (CU_GRAPH_USER_OBJECT_MOVE) the caller's own.
GPUVM_EXPORT CUresult cuGraphRetainUserObject(CUgraph g, CUuserObject o, unsigned int count,
                                              unsigned int flags) {
  CUresult r = CheckInit(count == 0 || (flags != 0 && flags != CU_GRAPH_USER_OBJECT_MOVE));
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(g_mu);
  if (!LiveGraph(g)) return CUDA_ERROR_INVALID_VALUE;
  if (flags == CU_GRAPH_USER_OBJECT_MOVE) {
    std::lock_guard user_lock(g_user_mu);
    if (!LiveUserObject(o)) return CUDA_ERROR_INVALID_VALUE;
  } else if (!RetainUser(o, count)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  g->user_refs[o] += count;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuGraphReleaseUserObject(CUgraph g, CUuserObject o, unsigned int count) {
  CUresult r = CheckInit(count == 0);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(g_mu);
  if (!LiveGraph(g)) return CUDA_ERROR_INVALID_VALUE;
  auto it = g->user_refs.find(o);
  if (it == g->user_refs.end() || it->second < count) return CUDA_ERROR_INVALID_VALUE;
  if ((r = ReleaseUser(o, count)) != CUDA_SUCCESS) return r;
  if ((it->second -= count) == 0) g->user_refs.erase(it);
  return CUDA_SUCCESS;
}

// Nothing to upload ahead: the steps are host-side calls.
GPUVM_EXPORT CUresult cuGraphUpload(CUgraphExec exec, CUstream handle) {
  CUctx_st* ctx;
  CUstream_st* s;
  CUresult r = CurrentStream(handle, &ctx, &s);
  if (r != CUDA_SUCCESS) return r;
  return LiveExec(exec) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
GPUVM_EXPORT CUresult cuGraphUpload_ptsz(CUgraphExec exec, CUstream handle) {
  return cuGraphUpload(exec, handle);
}

GPUVM_EXPORT CUresult cuGraphExecGetFlags(CUgraphExec exec, cuuint64_t* flags) {
  CUresult r = CheckInit(flags == nullptr);
  if (r != CUDA_SUCCESS) return r;
  if (!LiveExec(exec)) return CUDA_ERROR_INVALID_VALUE;
  *flags = 0;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(g_mu);
  if (!LiveExec(exec)) return CUDA_ERROR_INVALID_VALUE;
  Process::Get().Unregister(exec);
  ReleaseAll(exec->user_refs);  // launches still running hold references of their own
  delete exec;
  return CUDA_SUCCESS;
}
