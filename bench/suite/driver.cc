#include "bench/suite/driver.h"

#include <string>

#include "bench/kernels/kernel_corpus.h"

namespace gpuvm::suite {

std::string CuError(CUresult result, const char* call) {
  const char* name = nullptr;
  if (cuGetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr) name = "unknown error";
  return std::string(call) + ": " + name + " (" + std::to_string(static_cast<int>(result)) + ")";
}

CUresult OpenContext(CUcontext* context, std::string* failed_call) {
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) {
    *failed_call = "cuInit";
    return r;
  }
  CUdevice device;
  r = cuDeviceGet(&device, 0);
  if (r != CUDA_SUCCESS) {
    *failed_call = "cuDeviceGet";
    return r;
  }
  r = cuCtxCreate(context, nullptr, 0, device);
  if (r != CUDA_SUCCESS) *failed_call = "cuCtxCreate";
  return r;
}

CUresult LoadCorpusModule(CUmodule* module, const char* ptx_file) {
  // The embedded text is NUL-terminated static storage (embed_ptx.cmake writes string literals).
  const std::string_view ptx = kernels::PtxSource(ptx_file);
  if (ptx.empty()) return CUDA_ERROR_FILE_NOT_FOUND;
  const std::string text(ptx);
  return cuModuleLoadData(module, text.c_str());
}

}  // namespace gpuvm::suite
