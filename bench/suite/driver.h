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

#include "bench/suite/report.h"
#include "runtime/include/cuda.h"

namespace gpuvm::suite {

// "<call>: <CUDA error name> (<code>)".
std::string CuError(CUresult result, const char* call);

// Records the failure of `call` in `report` and returns from the enclosing void function.
#define GPUVM_SUITE_CU(report, call)                                \
  do {                                                              \
    const CUresult suite_result_ = (call);                          \
    if (suite_result_ != CUDA_SUCCESS) {                            \
      (report).Fail(::gpuvm::suite::CuError(suite_result_, #call)); \
      return;                                                       \
    }                                                               \
  } while (0)

// cuInit, device 0, a new context made current. The first failing call's error on failure.
CUresult OpenContext(CUcontext* context, std::string* failed_call);

// Loads `ptx_file` ("madd.ptx") of the kernel corpus (its text embedded in this program) with
// cuModuleLoadData: the JIT runs here. CUDA_ERROR_FILE_NOT_FOUND when the corpus lacks it.
CUresult LoadCorpusModule(CUmodule* module, const char* ptx_file);

// A program's context and corpus module. Each call records the first failing CUDA call in the
// Report and returns false; the program then stops (GPUVM_SUITE_CU's rule).
class Session {
 public:
  explicit Session(Report& report) : report_(report) {}

  // Enters Phase::kInit, opens the context (OpenContext) and, unless `ptx_file` is null, loads that
  // corpus module.
  bool Open(const char* ptx_file);
  // cuModuleGetFunction of `name` in the module.
  bool Function(const char* name, CUfunction* function);
  // Enters Phase::kClose, frees `buffers` in order, unloads the module (if one was loaded),
  // destroys the context and ends the phase.
  bool Close(std::initializer_list<CUdeviceptr> buffers);

 private:
  bool Check(CUresult result, const std::string& call);

  Report& report_;
  CUcontext context_ = nullptr;
  CUmodule module_ = nullptr;
};

}  // namespace gpuvm::suite

#endif  // GPUVM_BENCH_SUITE_DRIVER_H_
