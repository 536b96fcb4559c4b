// What the driver-API programs of the suite share (bench/suite/*.cc): CUDA error reporting into a
// Report, context bring-up, and loading a kernel-corpus module (bench/kernels/*.ptx, embedded in
// the kernel corpus library) the way a Gdev test loads its .ptx/.cubin file; a Session does the
// init and close phases every program has.
//
// The programs link gpuvm's libcuda.so.1 like any CUDA program (-lcuda), so they run natively
// (GPUVM_BUS=native, the software GPU in-process) or unchanged inside a VM (gpuvm-vm).
//
// Threading: the program's main thread.
#ifndef GPUVM_BENCH_SUITE_DRIVER_H_
#define GPUVM_BENCH_SUITE_DRIVER_H_

#include <initializer_list>
#include <string>
#include <vector>

#include "bench/suite/report.h"
#include "runtime/include/cuda.h"

namespace gpuvm::suite {

// "<call>: <CUDA error name> (<code>)".
std::string CuError(CUresult result, const char* call);

// Records the failure of `call` in `report` and returns from the enclosing void function.
#define GPUVM_SUITE_CU(report, call) \
  GPUVM_SUITE_CHECK(report, (call), #call, CUDA_SUCCESS, ::gpuvm::suite::CuError)

// cuInit, device 0, a new context made current. The first failing call's error on failure.
CUresult OpenContext(CUcontext* context, std::string* failed_call);

// Loads `ptx_file` ("madd.ptx") of the kernel corpus (its text embedded in this program) with
// cuModuleLoadData: the JIT runs here. CUDA_ERROR_FILE_NOT_FOUND when the corpus lacks it.
CUresult LoadCorpusModule(CUmodule* module, const char* ptx_file);

// A program's context, corpus module and device buffers. Each call records the first failing CUDA
// call in the Report and returns false; the program then stops (GPUVM_SUITE_CU's rule). A Session
// that opened closes itself (Close) when it goes, unless a call failed or the program closed it.
class Session {
 public:
  explicit Session(Report& report) : report_(report) {}
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  struct Kernel {
    const char* name;
    CUfunction* function;
  };
  struct Buffer {
    CUdeviceptr* address;
    size_t bytes;
  };
  struct HostToDevice {
    CUdeviceptr device;
    const void* host;
    size_t bytes;
  };
  struct DeviceToHost {
    void* host;
    CUdeviceptr device;
    size_t bytes;
  };

  // Enters Phase::kInit, opens the context (OpenContext) and, unless `ptx_file` is null, loads that
  // corpus module and looks up `kernels` in it (cuModuleGetFunction).
  bool Open(const char* ptx_file, std::initializer_list<Kernel> kernels = {});
  // cuMemAlloc of each buffer, in order; Close frees them.
  bool Alloc(std::initializer_list<Buffer> buffers);
  // cuMemcpyHtoD / cuMemcpyDtoH of each copy, in order (the caller enters the phase).
  bool CopyIn(std::initializer_list<HostToDevice> copies);
  bool CopyOut(std::initializer_list<DeviceToHost> copies);
  // Enters Phase::kClose, frees the buffers of Alloc and then `more` in order, unloads the module
  // (if one was loaded), destroys the context and ends the phase.
  bool Close(std::initializer_list<CUdeviceptr> more = {});

 private:
  bool Check(CUresult result, const std::string& call);

  Report& report_;
  CUcontext context_ = nullptr;
  CUmodule module_ = nullptr;
  std::vector<CUdeviceptr> buffers_;
  bool open_ = false;  // the context exists and Close has not run
};

}  // namespace gpuvm::suite

#endif  // GPUVM_BENCH_SUITE_DRIVER_H_
