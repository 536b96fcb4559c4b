// libcuda.so.1, execution: cuLaunchKernel — the grid checks, the parameter buffer from either
// kernelParams or extra, and the launch on its stream (driver_api.h has the shared checks); and
// the legacy execution control API (cuFuncSetBlockShape ... cuLaunchGrid) on top of it.
//
// Threading: every entry point may be called from any thread (see runtime/core/objects.h).
#include <algorithm>
#include <cstring>
#include <iterator>
#include <mutex>
#include <vector>

#include "runtime/driver_api.h"
#include "runtime/driver_api_graph.h"

using gpuvm::runtime::driver_api::CaptureKernel;
using gpuvm::runtime::driver_api::Capturing;
using gpuvm::runtime::driver_api::PackParams;

static_assert(sizeof(CUlaunchAttribute) == 72 && sizeof(CUlaunchConfig) == 56,
              "launch attribute layouts differ from CUDA's");

namespace gpuvm::runtime::driver_api {

CUresult PackParams(CUfunction f, void** params, void** extra, std::vector<uint8_t>* out) {
  // Either an array of pointers (one per parameter) or one packed buffer in `extra`.
  const gpuvm::runtime::CompiledKernel& k = *f->kernel;
  std::vector<uint8_t>& buffer = *out;
  buffer.assign(k.param_bytes, 0);
  if (params != nullptr && extra != nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (extra != nullptr) {
    const void* packed = nullptr;
    size_t packed_size = 0;
    bool have_size = false;
    for (int i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (i >= 64) return CUDA_ERROR_INVALID_VALUE;  // no END marker in sight
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
        packed = extra[i + 1];
      } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
        if (extra[i + 1] == nullptr) return CUDA_ERROR_INVALID_VALUE;
        packed_size = *static_cast<const size_t*>(extra[i + 1]);
        have_size = true;
      } else {
        return CUDA_ERROR_INVALID_VALUE;
      }
    }
    if (k.param_bytes > 0 && (packed == nullptr || !have_size || packed_size < k.param_bytes)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (k.param_bytes > 0) std::memcpy(buffer.data(), packed, k.param_bytes);
  } else if (!k.params.empty()) {
    if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < k.params.size(); ++i) {
      if (params[i] == nullptr) return CUDA_ERROR_INVALID_VALUE;
      std::memcpy(buffer.data() + k.params[i].offset, params[i], k.params[i].size);
    }
  }
  return CUDA_SUCCESS;
}

CUresult LaunchSpec(const KernelSpec& spec, CUstream stream) {
  size_t size = spec.params.size();
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, const_cast<uint8_t*>(spec.params.data()),
                   CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  return cuLaunchKernel(spec.f, spec.grid[0], spec.grid[1], spec.grid[2], spec.block[0],
                        spec.block[1], spec.block[2], spec.shared_bytes, stream, nullptr, extra);
}

}  // namespace gpuvm::runtime::driver_api

GPUVM_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                     unsigned int gz, unsigned int bx, unsigned int by,
                                     unsigned int bz, unsigned int shared_bytes, CUstream handle,
                                     void** params, void** extra) {
  using namespace gpuvm::guest;
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (!Process::Get().IsLive(f, Process::Kind::kFunction)) return CUDA_ERROR_INVALID_HANDLE;
  if (f->module->ctx != ctx) return CUDA_ERROR_INVALID_CONTEXT;
  CUstream_st* s;
  if ((r = StreamFor(ctx, handle, &s)) != CUDA_SUCCESS) return r;
  // Launch configuration, as CUDA checks it. CUDA says only "invalid value"; GPUVM_LOG says which
  // limit (docs/RUNTIME.md).
  const auto refuse = [&](const char* why) {
    if (gpuvm::runtime::VerboseLog()) {
      fprintf(stderr,
              "gpuvm: launch of '%s' refused: %s (grid %u x %u x %u, block %u x %u x %u, %u bytes "
              "of dynamic shared memory + %u static)\n",
              f->kernel->name.c_str(), why, gx, gy, gz, bx, by, bz, shared_bytes,
              gpuvm::isa::ProgramSharedBytes(f->header));
    }
    return CUDA_ERROR_INVALID_VALUE;
  };
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0)
    return refuse("a dimension is 0");
  if (gx > kMaxGridDim[0] || gy > kMaxGridDim[1] || gz > kMaxGridDim[2])
    return refuse("the grid is larger than the device's maximum");
  if (bx > kMaxBlockDim[0] || by > kMaxBlockDim[1] || bz > kMaxBlockDim[2])
    return refuse("the block is larger than the device's maximum");
  uint64_t threads = uint64_t(bx) * by * bz;
  uint32_t limit = f->header.max_threads ? f->header.max_threads : kMaxThreadsPerBlock;
  if (threads > kMaxThreadsPerBlock || threads > limit)
    return refuse("more threads per block than the kernel or the device allows");
  // The translator's own shared bytes (bar.red's word) are not the program's: they do not count.
  if (uint64_t(shared_bytes) + gpuvm::isa::ProgramSharedBytes(f->header) >
      kMaxSharedBytesPerBlock) {
    return refuse("more shared memory per block than the device has");
  }
  std::vector<uint8_t> buffer;
  if ((r = PackParams(f, params, extra, &buffer)) != CUDA_SUCCESS) return r;
  if (Capturing(s)) {
    return CaptureKernel(s, {f, {gx, gy, gz}, {bx, by, bz}, shared_bytes, std::move(buffer)});
  }
  if ((r = Ordered(s)) != CUDA_SUCCESS) return r;
  LaunchParams launch;
  launch.code_address = f->module->code_va;
  launch.entry_offset = f->entry_offset;
  launch.grid = {gx, gy, gz};
  launch.block = {bx, by, bz};
  // SHARED_SIZE covers the kernel's static shared memory and the dynamic bytes after it
  // (gpu/isa/module.h); the driver programs what it is given.
  launch.shared_bytes = f->header.shared_bytes + shared_bytes;
  launch.local_bytes_per_thread = f->header.local_bytes;
  launch.params = buffer;
  if (f->module->const_bank_va) {
    launch.banks.push_back(
        {1, f->module->const_bank_va, uint32_t(f->module->compiled.const_image.size())});
  }
  if (f->module->address_bank_va) {
    launch.banks.push_back({2, f->module->address_bank_va, f->module->compiled.address_bank_bytes});
  }
  // A kernel that may call printf needs the context's FIFO; the lock keeps a drain from resetting
  // it between the set-up and the submission.
  std::unique_lock<std::mutex> printf_hold;
  if ((r = gpuvm::runtime::PreparePrintfLaunch(f->module, s, &printf_hold)) != CUDA_SUCCESS) {
    return r;
  }
  auto fence = s->channel->Launch(launch);
  return fence.ok() ? CUDA_SUCCESS : ContextError(ctx, fence.status());
}

// Attributes that only tune how a launch runs (cache hints, priority, scheduling preferences,
// permission to overlap) are accepted and have no effect on the software GPU. Those that change
// what a launch means — a cooperative launch (grid-wide synchronization), thread-block clusters
// (compute capability 9.0), programmatic or completion events, device-updatable graph nodes — are
// CUDA_ERROR_NOT_SUPPORTED; an unknown one is CUDA_ERROR_INVALID_VALUE.
GPUVM_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params,
                                       void** extra) {
  if (config == nullptr || (config->numAttrs > 0 && config->attrs == nullptr)) {
    return CheckInit(true);
  }
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    const CUlaunchAttribute& a = config->attrs[i];
    // The id is the caller's int: read it as one (an unknown value is no CUlaunchAttributeID).
    int id;
    std::memcpy(&id, &a.id, sizeof id);
    switch (id) {
      case CU_LAUNCH_ATTRIBUTE_IGNORE:
      case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
      case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
      case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
      case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
      case CU_LAUNCH_ATTRIBUTE_PRIORITY:
      case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
      case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
      case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
        break;
      case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
        if (a.value.cooperative != 0) return CUDA_ERROR_NOT_SUPPORTED;
        break;
      case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: {
        const auto& c = a.value.clusterDim;
        if ((c.x > 1 || c.y > 1 || c.z > 1)) return CUDA_ERROR_NOT_SUPPORTED;
        break;
      }
      case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT:
      case CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT:
      case CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE:
        return CUDA_ERROR_NOT_SUPPORTED;
      default:
        return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return cuLaunchKernel(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                        config->blockDimY, config->blockDimZ, config->sharedMemBytes,
                        config->hStream, params, extra);
}
GPUVM_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f,
                                            void** params, void** extra) {
  return cuLaunchKernelEx(config, f, params, extra);
}

// ---- the legacy execution control API (cuda.h) ----
// The state lives in the function (CUfunc_st::legacy_*); the launch goes through cuLaunchKernel
// with the parameter buffer as `extra`, so it is checked like any other launch.

namespace {

CUresult SetParamBytes(CUfunction f, int offset, const void* bytes, size_t n) {
  CUresult r = LiveFunction(f);
  if (r != CUDA_SUCCESS) return r;
  if (offset < 0 || (n > 0 && bytes == nullptr) ||
      size_t(offset) + n > CUfunc_st::kLegacyParamBytes) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard lock(f->legacy_mu);
  if (n > 0) std::memcpy(f->legacy_params.data() + offset, bytes, n);
  return CUDA_SUCCESS;
}

CUresult LaunchLegacy(CUfunction f, int grid_width, int grid_height, CUstream stream) {
  CUresult r = LiveFunction(f);
  if (r != CUDA_SUCCESS) return r;
  if (grid_width <= 0 || grid_height <= 0) return CUDA_ERROR_INVALID_VALUE;
  // A copy: another thread may set parameters for the next launch meanwhile.
  unsigned block[3];
  unsigned shared;
  std::vector<uint8_t> params;
  {
    std::lock_guard lock(f->legacy_mu);
    std::copy(std::begin(f->legacy_block), std::end(f->legacy_block), block);
    shared = f->legacy_shared_bytes;
    params.assign(f->legacy_params.begin(), f->legacy_params.begin() + f->legacy_param_size);
  }
  size_t size = params.size();
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, params.data(), CU_LAUNCH_PARAM_BUFFER_SIZE,
                   &size, CU_LAUNCH_PARAM_END};
  return cuLaunchKernel(f, unsigned(grid_width), unsigned(grid_height), 1, block[0], block[1],
                        block[2], shared, stream, nullptr, extra);
}

}  // namespace

GPUVM_EXPORT CUresult cuFuncSetBlockShape(CUfunction f, int x, int y, int z) {
  CUresult r = LiveFunction(f);
  if (r != CUDA_SUCCESS) return r;
  if (x <= 0 || y <= 0 || z <= 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(f->legacy_mu);
  f->legacy_block[0] = unsigned(x);
  f->legacy_block[1] = unsigned(y);
  f->legacy_block[2] = unsigned(z);
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuFuncSetSharedSize(CUfunction f, unsigned int bytes) {
  CUresult r = LiveFunction(f);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(f->legacy_mu);
  f->legacy_shared_bytes = bytes;  // checked against the limit at launch, like cuLaunchKernel's
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuParamSetSize(CUfunction f, unsigned int numbytes) {
  CUresult r = LiveFunction(f);
  if (r != CUDA_SUCCESS) return r;
  if (numbytes > CUfunc_st::kLegacyParamBytes) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(f->legacy_mu);
  f->legacy_param_size = numbytes;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuParamSeti(CUfunction f, int offset, unsigned int value) {
  return SetParamBytes(f, offset, &value, sizeof value);
}

GPUVM_EXPORT CUresult cuParamSetf(CUfunction f, int offset, float value) {
  return SetParamBytes(f, offset, &value, sizeof value);
}

GPUVM_EXPORT CUresult cuParamSetv(CUfunction f, int offset, void* ptr, unsigned int numbytes) {
  return SetParamBytes(f, offset, ptr, numbytes);
}

GPUVM_EXPORT CUresult cuParamSetTexRef(CUfunction f, int, CUtexref) {
  CUresult r = LiveFunction(f);
  return r != CUDA_SUCCESS ? r : CUDA_ERROR_NOT_SUPPORTED;
}

GPUVM_EXPORT CUresult cuLaunch(CUfunction f) { return LaunchLegacy(f, 1, 1, nullptr); }

GPUVM_EXPORT CUresult cuLaunchGrid(CUfunction f, int grid_width, int grid_height) {
  return LaunchLegacy(f, grid_width, grid_height, nullptr);
}

GPUVM_EXPORT CUresult cuLaunchGridAsync(CUfunction f, int grid_width, int grid_height,
                                        CUstream stream) {
  return LaunchLegacy(f, grid_width, grid_height, stream);
}
