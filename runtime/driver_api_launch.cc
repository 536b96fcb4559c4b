// libcuda.so.1, execution: cuLaunchKernel — the grid checks, the parameter buffer from either
// kernelParams or extra, and the launch on its stream (driver_api.h has the shared checks).
//
// Threading: every entry point may be called from any thread (see runtime/core/objects.h).
#include <cstring>
#include <vector>

#include "runtime/driver_api.h"

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
  // Launch configuration, as CUDA checks it.
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (gx > kMaxGridDim[0] || gy > kMaxGridDim[1] || gz > kMaxGridDim[2])
    return CUDA_ERROR_INVALID_VALUE;
  if (bx > kMaxBlockDim[0] || by > kMaxBlockDim[1] || bz > kMaxBlockDim[2])
    return CUDA_ERROR_INVALID_VALUE;
  uint64_t threads = uint64_t(bx) * by * bz;
  uint32_t limit = f->header.max_threads ? f->header.max_threads : kMaxThreadsPerBlock;
  if (threads > kMaxThreadsPerBlock || threads > limit) return CUDA_ERROR_INVALID_VALUE;
  if (uint64_t(shared_bytes) + f->header.shared_bytes > kMaxSharedBytesPerBlock) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // Parameters: either an array of pointers (one per parameter) or one packed buffer in `extra`.
  const gpuvm::runtime::CompiledKernel& k = *f->kernel;
  std::vector<uint8_t> buffer(k.param_bytes, 0);
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
  auto fence = s->channel->Launch(launch);
  return fence.ok() ? CUDA_SUCCESS : ContextError(ctx, fence.status());
}
