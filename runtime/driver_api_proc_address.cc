// libcuda.so.1: cuGetProcAddress(_v2), the driver's functions by base name and ABI version
// (docs/RUNTIME.md, "Finding driver functions by name"). Which exported symbol is which version of
// a function comes from runtime/abi/libcuda_proc_address.def (generated from the CUDA toolkit's
// facts by scripts/gen-proc-address-table.py); the symbol itself is looked up in this library, so
// the answer is always one of our own exports.
//
// Threading: every entry point may be called from any thread, before cuInit too (as CUDA allows).
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <string>

#include "runtime/driver_api.h"

namespace {

struct ProcVersion {
  const char* function;
  int version;
  const char* symbol;
};

// Sorted by function, then version (the generator writes it so; a test checks).
constexpr ProcVersion kVersions[] = {
#define GPUVM_PROC_ADDRESS(function, version, symbol) {#function, version, #symbol},
#include "runtime/abi/libcuda_proc_address.def"
#undef GPUVM_PROC_ADDRESS
};

// The driver version this library reports (cuDriverGetVersion): newer requests are refused.
constexpr int kDriverVersion = 13000;

// This library, for dlsym: found through one of its own functions, so whatever name it was loaded
// under (libcuda.so.1, a path) is the one searched.
void* OwnLibrary() {
  static void* const handle = [] {
    Dl_info info{};
    if (::dladdr(reinterpret_cast<void*>(&OwnLibrary), &info) == 0 || info.dli_fname == nullptr) {
      return static_cast<void*>(nullptr);
    }
    return ::dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  }();
  return handle;
}

void* Export(const std::string& name) {
  void* lib = OwnLibrary();
  return lib != nullptr ? ::dlsym(lib, name.c_str()) : nullptr;
}

CUresult Answer(void** pfn, void* f, CUdriverProcAddressQueryResult status,
                CUdriverProcAddressQueryResult* out) {
  *pfn = f;
  if (out != nullptr) *out = status;
  return CUDA_SUCCESS;  // CUDA answers success with NULL for a symbol it has not
}

}  // namespace

GPUVM_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version,
                                          cuuint64_t flags,
                                          CUdriverProcAddressQueryResult* symbol_status) {
  if (symbol == nullptr || pfn == nullptr || cuda_version <= 0 || cuda_version > kDriverVersion ||
      (flags & ~uint64_t{CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                         CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM}) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const auto less = [](const ProcVersion& row, const char* name) {
    return std::strcmp(row.function, name) < 0;
  };
  const ProcVersion* first =
      std::lower_bound(std::begin(kVersions), std::end(kVersions), symbol, less);
  const ProcVersion* last = first;
  while (last != std::end(kVersions) && std::strcmp(last->function, symbol) == 0) ++last;
  if (first == last)
    return Answer(pfn, nullptr, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, symbol_status);
  // The newest ABI version the caller was built for.
  const ProcVersion* chosen = nullptr;
  for (const ProcVersion* row = first; row != last; ++row) {
    if (row->version <= cuda_version) chosen = row;
  }
  if (chosen == nullptr) {
    return Answer(pfn, nullptr, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, symbol_status);
  }
  // Per-thread default stream: the function's _ptds or _ptsz form where it has one. DEFAULT is the
  // legacy stream: a program compiled for per-thread streams asks with the flag (or through
  // cudaGetDriverEntryPoint_ptsz).
  void* f = nullptr;
  if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0) {
    f = Export(std::string(chosen->symbol) + "_ptds");
    if (f == nullptr) f = Export(std::string(chosen->symbol) + "_ptsz");
  }
  if (f == nullptr) f = Export(chosen->symbol);
  if (f == nullptr)
    return Answer(pfn, nullptr, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, symbol_status);
  return Answer(pfn, f, CU_GET_PROC_ADDRESS_SUCCESS, symbol_status);
}

GPUVM_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version,
                                       cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, cuda_version, flags, nullptr);
}
