// libcuda.so.1, occupancy: how many blocks of a kernel fit one multiprocessor at once, and the
// block size that fits the most threads — from the limits the device reports (cuDeviceGetAttribute:
// threads, blocks, registers and shared memory per multiprocessor) and the kernel's own registers
// per thread and static shared memory, as the JIT made them (cuFuncGetAttribute). Allocation units
// are Fermi's: registers per warp in units of 64, shared memory in units of 128 bytes.
//
// Threading: every entry point may be called from any thread (see runtime/core/objects.h).
#include <algorithm>
#include <cstddef>

#include "runtime/driver_api.h"

namespace {

struct Limits {
  int sms = 0, threads_per_sm = 0, blocks_per_sm = 0, regs_per_sm = 0, shared_per_sm = 0;
  int warp = 0;
  int regs = 0, static_shared = 0, max_threads = 0;  // the kernel's
};

CUresult LimitsFor(CUfunction f, Limits* l) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (!Process::Get().IsLive(f, Process::Kind::kFunction)) return CUDA_ERROR_INVALID_HANDLE;
  if (f->module->ctx != ctx) return CUDA_ERROR_INVALID_CONTEXT;
  CUdevice dev;
  if ((r = cuCtxGetDevice(&dev)) != CUDA_SUCCESS) return r;
  const std::pair<int*, CUdevice_attribute> device[] = {
      {&l->sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT},
      {&l->threads_per_sm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR},
      {&l->blocks_per_sm, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR},
      {&l->regs_per_sm, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR},
      {&l->shared_per_sm, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR},
      {&l->warp, CU_DEVICE_ATTRIBUTE_WARP_SIZE}};
  for (const auto& [out, attribute] : device) {
    if ((r = cuDeviceGetAttribute(out, attribute, dev)) != CUDA_SUCCESS) return r;
  }
  const std::pair<int*, CUfunction_attribute> kernel[] = {
      {&l->regs, CU_FUNC_ATTRIBUTE_NUM_REGS},
      {&l->static_shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES},
      {&l->max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK}};
  for (const auto& [out, attribute] : kernel) {
    if ((r = cuFuncGetAttribute(out, attribute, f)) != CUDA_SUCCESS) return r;
  }
  if (l->warp <= 0 || l->threads_per_sm <= 0) return CUDA_ERROR_UNKNOWN;
  return CUDA_SUCCESS;
}

int AlignUp(long long v, int unit) { return int((v + unit - 1) / unit * unit); }

// Blocks of `block` threads using `dynamic` bytes of dynamic shared memory resident on one
// multiprocessor at once; 0 when one block does not fit at all.
int ActiveBlocks(const Limits& l, int block, size_t dynamic) {
  if (block <= 0 || block > l.max_threads) return 0;
  const long long shared = (long long)l.static_shared + (long long)dynamic;
  if (dynamic > size_t(l.shared_per_sm) || shared > l.shared_per_sm) return 0;
  const int warps = (block + l.warp - 1) / l.warp;
  int blocks = std::min(l.blocks_per_sm, l.threads_per_sm / (warps * l.warp));
  if (l.regs > 0) {
    const int regs_per_warp = AlignUp((long long)l.regs * l.warp, 64);
    blocks = std::min(blocks, l.regs_per_sm / regs_per_warp / warps);
  }
  if (shared > 0) blocks = std::min(blocks, l.shared_per_sm / AlignUp(shared, 128));
  return std::max(blocks, 0);
}

CUresult MaxActiveBlocks(int* num_blocks, CUfunction f, int block, size_t dynamic, unsigned flags) {
  if (num_blocks == nullptr || block <= 0 ||
      (flags & ~unsigned(CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE)))
    return CheckInit(true);
  Limits l;
  CUresult r = LimitsFor(f, &l);
  if (r != CUDA_SUCCESS) return r;
  *num_blocks = ActiveBlocks(l, block, dynamic);
  return CUDA_SUCCESS;
}

CUresult MaxPotentialBlockSize(int* min_grid, int* block_size, CUfunction f,
                               CUoccupancyB2DSize dynamic_of, size_t dynamic, int limit,
                               unsigned flags) {
  if (min_grid == nullptr || block_size == nullptr || limit < 0 ||
      (flags & ~unsigned(CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE))) {
    return CheckInit(true);
  }
  Limits l;
  CUresult r = LimitsFor(f, &l);
  if (r != CUDA_SUCCESS) return r;
  int top = std::min(l.max_threads, l.threads_per_sm);
  if (limit > 0) top = std::min(top, limit);
  // From the largest block down, whole warps (and `top` itself): the first size with the most
  // resident threads wins, so ties go to larger blocks.
  int best_block = 0, best_blocks = 0;
  long long best_threads = -1;
  for (int block = top; block > 0;) {
    const size_t bytes = dynamic_of != nullptr ? dynamic_of(block) : dynamic;
    const int blocks = ActiveBlocks(l, block, bytes);
    if ((long long)blocks * block > best_threads) {
      best_threads = (long long)blocks * block;
      best_block = block;
      best_blocks = blocks;
    }
    block = block % l.warp != 0 ? block / l.warp * l.warp : block - l.warp;
  }
  *block_size = best_blocks > 0 ? best_block : 0;
  *min_grid = best_blocks * l.sms;
  return CUDA_SUCCESS;
}

}  // namespace

GPUVM_EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* num_blocks, CUfunction f,
                                                                  int block_size,
                                                                  size_t dynamic_shared) {
  return MaxActiveBlocks(num_blocks, f, block_size, dynamic_shared, 0);
}

GPUVM_EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int* num_blocks, CUfunction f, int block_size, size_t dynamic_shared, unsigned int flags) {
  return MaxActiveBlocks(num_blocks, f, block_size, dynamic_shared, flags);
}

// The most dynamic shared memory a block may use so that `num_blocks` blocks of `block_size`
// threads are resident on one multiprocessor at once; 0 when that many do not fit even without it.
GPUVM_EXPORT CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t* dynamic_shared, CUfunction f,
                                                              int num_blocks, int block_size) {
  if (dynamic_shared == nullptr || num_blocks <= 0 || block_size <= 0) return CheckInit(true);
  Limits l;
  CUresult r = LimitsFor(f, &l);
  if (r != CUDA_SUCCESS) return r;
  if (ActiveBlocks(l, block_size, 0) < num_blocks) {
    *dynamic_shared = 0;
    return CUDA_SUCCESS;
  }
  // Each block's shared memory is allocated in 128-byte units: the share of one block, rounded
  // down to a unit, less what the kernel declares statically.
  const long long share = (long long)l.shared_per_sm / num_blocks / 128 * 128;
  long long dynamic = std::max(0ll, share - l.static_shared);
  while (dynamic > 0 && ActiveBlocks(l, block_size, size_t(dynamic)) < num_blocks) dynamic -= 128;
  *dynamic_shared = size_t(std::max(0ll, dynamic));
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuOccupancyMaxPotentialBlockSize(int* min_grid, int* block_size, CUfunction f,
                                                       CUoccupancyB2DSize dynamic_of,
                                                       size_t dynamic_shared, int limit) {
  return MaxPotentialBlockSize(min_grid, block_size, f, dynamic_of, dynamic_shared, limit, 0);
}

GPUVM_EXPORT CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(int* min_grid, int* block_size,
                                                                CUfunction f,
                                                                CUoccupancyB2DSize dynamic_of,
                                                                size_t dynamic_shared, int limit,
                                                                unsigned int flags) {
  return MaxPotentialBlockSize(min_grid, block_size, f, dynamic_of, dynamic_shared, limit, flags);
}
