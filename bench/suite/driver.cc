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

bool Session::Check(CUresult result, const std::string& call) {
  if (result == CUDA_SUCCESS) return true;
  report_.Fail(CuError(result, call.c_str()));
  return false;
}

bool Session::Open(const char* ptx_file, std::initializer_list<Kernel> kernels) {
  report_.Enter(Phase::kInit);
  std::string failed_call;
  if (const CUresult r = OpenContext(&context_, &failed_call); r != CUDA_SUCCESS) {
    return Check(r, failed_call);
  }
  open_ = true;
  if (ptx_file == nullptr) return true;
  if (!Check(LoadCorpusModule(&module_, ptx_file),
             std::string("LoadCorpusModule(") + ptx_file + ")")) {
    return false;
  }
  for (const Kernel& k : kernels) {
    if (!Check(cuModuleGetFunction(k.function, module_, k.name),
               std::string("cuModuleGetFunction(") + k.name + ")")) {
      return false;
    }
  }
  return true;
}

bool Session::Alloc(std::initializer_list<Buffer> buffers) {
  for (const Buffer& b : buffers) {
    if (!Check(cuMemAlloc(b.address, b.bytes),
               "cuMemAlloc(" + std::to_string(b.bytes) + " bytes)")) {
      return false;
    }
    buffers_.push_back(*b.address);
  }
  return true;
}

bool Session::CopyIn(std::initializer_list<HostToDevice> copies) {
  for (const HostToDevice& c : copies) {
    if (!Check(cuMemcpyHtoD(c.device, c.host, c.bytes), "cuMemcpyHtoD")) return false;
  }
  return true;
}

bool Session::CopyOut(std::initializer_list<DeviceToHost> copies) {
  for (const DeviceToHost& c : copies) {
    if (!Check(cuMemcpyDtoH(c.host, c.device, c.bytes), "cuMemcpyDtoH")) return false;
  }
  return true;
}

Session::~Session() {
  if (open_ && !report_.failed()) Close();
}

bool Session::Close(std::initializer_list<CUdeviceptr> more) {
  open_ = false;
  report_.Enter(Phase::kClose);
  buffers_.insert(buffers_.end(), more.begin(), more.end());
  for (const CUdeviceptr buffer : buffers_) {
    if (!Check(cuMemFree(buffer), "cuMemFree")) return false;
  }
  buffers_.clear();
  if (module_ != nullptr && !Check(cuModuleUnload(module_), "cuModuleUnload")) return false;
  if (!Check(cuCtxDestroy(context_), "cuCtxDestroy")) return false;
  report_.End();
  return true;
}

}  // namespace gpuvm::suite
