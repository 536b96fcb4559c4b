// CUDA's error codes by name and description, for both APIs (cuGetErrorName/String,
// cudaGetErrorName/String), and the translation of gpuvm Status values (driver, JIT, fat binary
// reader) into the CUresult a CUDA program expects. Names and numeric values are CUDA's (facts of
// the documented ABI); the descriptions are short sentences in the spirit of CUDA's.
//
// Threading: pure functions over constant tables.
#ifndef GPUVM_RUNTIME_CORE_ERRORS_H_
#define GPUVM_RUNTIME_CORE_ERRORS_H_

#include "base/status.h"
#include "runtime/include/cuda.h"

namespace gpuvm::runtime {

// nullptr for a value that is not a CUresult / cudaError_t.
const char* CuErrorName(int code);
const char* CuErrorString(int code);
const char* CudaErrorName(int code);
const char* CudaErrorString(int code);

// The CUresult for a failed Status from below the API. `invalid` is what a kInvalidArgument /
// kOutOfRange / kNotFound means at the calling API (usually CUDA_ERROR_INVALID_VALUE).
CUresult ToCuResult(const Status& status, CUresult invalid = CUDA_ERROR_INVALID_VALUE);

}  // namespace gpuvm::runtime

#endif  // GPUVM_RUNTIME_CORE_ERRORS_H_
