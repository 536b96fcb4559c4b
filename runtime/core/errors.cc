#include "runtime/core/errors.h"

#include <algorithm>
#include <iterator>

namespace gpuvm::runtime {
namespace {

struct ErrorInfo {
  int code;
  const char* name;
  const char* description;
};

// Sorted by code.
constexpr ErrorInfo kDriverErrors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {5, "CUDA_ERROR_PROFILER_DISABLED", "profiler disabled while using an external profiling tool"},
    {6, "CUDA_ERROR_PROFILER_NOT_INITIALIZED", "profiler not initialized"},
    {7, "CUDA_ERROR_PROFILER_ALREADY_STARTED", "profiler already started"},
    {8, "CUDA_ERROR_PROFILER_ALREADY_STOPPED", "profiler already stopped"},
    {34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {36, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER", "the call requires a newer driver"},
    {46, "CUDA_ERROR_DEVICE_UNAVAILABLE", "CUDA-capable device(s) is/are busy or unavailable"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {102, "CUDA_ERROR_DEVICE_NOT_LICENSED", "device doesn't have valid Grid license"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {202, "CUDA_ERROR_CONTEXT_ALREADY_CURRENT", "context already current"},
    {205, "CUDA_ERROR_MAP_FAILED", "mapping of buffer object failed"},
    {206, "CUDA_ERROR_UNMAP_FAILED", "unmapping of buffer object failed"},
    {207, "CUDA_ERROR_ARRAY_IS_MAPPED", "array is mapped"},
    {208, "CUDA_ERROR_ALREADY_MAPPED", "resource already mapped"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU",
     "no kernel image is available for execution on the device"},
    {210, "CUDA_ERROR_ALREADY_ACQUIRED", "resource already acquired"},
    {211, "CUDA_ERROR_NOT_MAPPED", "resource not mapped"},
    {212, "CUDA_ERROR_NOT_MAPPED_AS_ARRAY", "resource not mapped as array"},
    {213, "CUDA_ERROR_NOT_MAPPED_AS_POINTER", "resource not mapped as pointer"},
    {214, "CUDA_ERROR_ECC_UNCORRECTABLE", "uncorrectable ECC error encountered"},
    {215, "CUDA_ERROR_UNSUPPORTED_LIMIT", "limit is not supported on this architecture"},
    {216, "CUDA_ERROR_CONTEXT_ALREADY_IN_USE",
     "exclusive-thread device already in use by a different thread"},
    {217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
     "peer access is not supported between these two devices"},
    {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {219, "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT", "invalid OpenGL or DirectX context"},
    {220, "CUDA_ERROR_NVLINK_UNCORRECTABLE",
     "uncorrectable NVLink error detected during the execution"},
    {221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND", "PTX JIT compiler library not found"},
    {222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
     "the provided PTX was compiled with an unsupported toolchain."},
    {223, "CUDA_ERROR_JIT_COMPILATION_DISABLED", "PTX JIT compilation was disabled"},
    {224, "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY",
     "the provided execution affinity is not supported"},
    {225, "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC",
     "the provided PTX contains unsupported call to cudaDeviceSynchronize"},
    {226, "CUDA_ERROR_CONTAINED",
     "an exception occurred on the device that is now contained by the GPU's error containment "
     "capability"},
    {300, "CUDA_ERROR_INVALID_SOURCE", "device kernel image is invalid"},
    {301, "CUDA_ERROR_FILE_NOT_FOUND", "file not found"},
    {302, "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND", "shared object symbol not found"},
    {303, "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED", "shared object initialization failed"},
    {304, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on this OS"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {401, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
    {402, "CUDA_ERROR_LOSSY_QUERY", "attempted introspection would be semantically lossy"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
    {702, "CUDA_ERROR_LAUNCH_TIMEOUT", "the launch timed out and was terminated"},
    {703, "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING", "launch uses incompatible texturing mode"},
    {704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled"},
    {705, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "peer access has not been enabled"},
    {708, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", "cannot set while device is active in this process"},
    {709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
    {710, "CUDA_ERROR_ASSERT", "device-side assert triggered"},
    {711, "CUDA_ERROR_TOO_MANY_PEERS", "peer mapping resources exhausted"},
    {712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
    {714, "CUDA_ERROR_HARDWARE_STACK_ERROR", "hardware stack error"},
    {715, "CUDA_ERROR_ILLEGAL_INSTRUCTION", "an illegal instruction was encountered"},
    {716, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"},
    {717, "CUDA_ERROR_INVALID_ADDRESS_SPACE",
     "operation not supported on global/shared address space"},
    {718, "CUDA_ERROR_INVALID_PC", "invalid program counter"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {720, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", "too many blocks in cooperative launch"},
    {721, "CUDA_ERROR_TENSOR_MEMORY_LEAK", "tensor memory not completely freed"},
    {800, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {802, "CUDA_ERROR_SYSTEM_NOT_READY", "system not yet initialized"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
     "system has unsupported display driver / cuda driver combination"},
    {804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
     "forward compatibility was attempted on non supported HW"},
    {805, "CUDA_ERROR_MPS_CONNECTION_FAILED", "mps connection failed"},
    {806, "CUDA_ERROR_MPS_RPC_FAILURE", "mps rpc failure"},
    {807, "CUDA_ERROR_MPS_SERVER_NOT_READY", "mps server not ready"},
    {808, "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED", "mps max clients reached"},
    {809, "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED", "mps max connections reached"},
    {810, "CUDA_ERROR_MPS_CLIENT_TERMINATED", "mps client terminated"},
    {811, "CUDA_ERROR_CDP_NOT_SUPPORTED", "cdp not supported"},
    {812, "CUDA_ERROR_CDP_VERSION_MISMATCH", "cdp version mismatch"},
    {900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "stream capture unsupported"},
    {901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "stream capture invalidated"},
    {902, "CUDA_ERROR_STREAM_CAPTURE_MERGE", "stream capture merge"},
    {903, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", "stream capture unmatched"},
    {904, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED", "stream capture unjoined"},
    {905, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION", "stream capture isolation"},
    {906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", "stream capture implicit"},
    {907, "CUDA_ERROR_CAPTURED_EVENT", "captured event"},
    {908, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", "stream capture wrong thread"},
    {909, "CUDA_ERROR_TIMEOUT", "wait operation timed out"},
    {910, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE", "graph exec update failure"},
    {911, "CUDA_ERROR_EXTERNAL_DEVICE", "external device"},
    {912, "CUDA_ERROR_INVALID_CLUSTER_SIZE", "invalid cluster size"},
    {913, "CUDA_ERROR_FUNCTION_NOT_LOADED", "function not loaded"},
    {914, "CUDA_ERROR_INVALID_RESOURCE_TYPE", "invalid resource type"},
    {915, "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION", "invalid resource configuration"},
    {916, "CUDA_ERROR_KEY_ROTATION", "key rotation"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

constexpr ErrorInfo kRuntimeErrors[] = {
    {0, "cudaSuccess", "no error"},
    {1, "cudaErrorInvalidValue", "invalid argument"},
    {2, "cudaErrorMemoryAllocation", "out of memory"},
    {3, "cudaErrorInitializationError", "initialization error"},
    {4, "cudaErrorCudartUnloading", "driver shutting down"},
    {5, "cudaErrorProfilerDisabled", "profiler disabled while using an external profiling tool"},
    {6, "cudaErrorProfilerNotInitialized", "profiler not initialized"},
    {7, "cudaErrorProfilerAlreadyStarted", "profiler already started"},
    {8, "cudaErrorProfilerAlreadyStopped", "profiler already stopped"},
    {9, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {12, "cudaErrorInvalidPitchValue", "invalid pitch argument"},
    {13, "cudaErrorInvalidSymbol", "invalid device symbol"},
    {16, "cudaErrorInvalidHostPointer", "invalid host pointer"},
    {17, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {18, "cudaErrorInvalidTexture", "invalid texture reference"},
    {19, "cudaErrorInvalidTextureBinding", "invalid texture binding"},
    {20, "cudaErrorInvalidChannelDescriptor", "invalid channel descriptor"},
    {21, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {22, "cudaErrorAddressOfConstant", "address of constant"},
    {23, "cudaErrorTextureFetchFailed", "texture fetch failed"},
    {24, "cudaErrorTextureNotBound", "texture not bound"},
    {25, "cudaErrorSynchronizationError", "incorrect use of __syncthreads()"},
    {26, "cudaErrorInvalidFilterSetting", "invalid filter setting"},
    {27, "cudaErrorInvalidNormSetting", "invalid norm setting"},
    {28, "cudaErrorMixedDeviceExecution", "mixed device execution"},
    {31, "cudaErrorNotYetImplemented", "function not yet implemented"},
    {32, "cudaErrorMemoryValueTooLarge", "memory value too large"},
    {34, "cudaErrorStubLibrary", "CUDA driver is a stub library"},
    {35, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {36, "cudaErrorCallRequiresNewerDriver", "the call requires a newer driver"},
    {37, "cudaErrorInvalidSurface", "invalid surface"},
    {43, "cudaErrorDuplicateVariableName", "duplicate variable name"},
    {44, "cudaErrorDuplicateTextureName", "duplicate texture name"},
    {45, "cudaErrorDuplicateSurfaceName", "duplicate surface name"},
    {46, "cudaErrorDevicesUnavailable", "CUDA-capable device(s) is/are busy or unavailable"},
    {49, "cudaErrorIncompatibleDriverContext", "incompatible driver context"},
    {52, "cudaErrorMissingConfiguration", "__global__ function call is not configured"},
    {53, "cudaErrorPriorLaunchFailure", "unspecified launch failure in prior launch"},
    {65, "cudaErrorLaunchMaxDepthExceeded", "launch max depth exceeded"},
    {66, "cudaErrorLaunchFileScopedTex", "launch file scoped tex"},
    {67, "cudaErrorLaunchFileScopedSurf", "launch file scoped surf"},
    {68, "cudaErrorSyncDepthExceeded", "sync depth exceeded"},
    {69, "cudaErrorLaunchPendingCountExceeded", "launch pending count exceeded"},
    {98, "cudaErrorInvalidDeviceFunction", "invalid device function"},
    {100, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {101, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {102, "cudaErrorDeviceNotLicensed", "device doesn't have valid Grid license"},
    {103, "cudaErrorSoftwareValidityNotEstablished", "software validity not established"},
    {127, "cudaErrorStartupFailure", "startup failure in cuda runtime"},
    {200, "cudaErrorInvalidKernelImage", "device kernel image is invalid"},
    {201, "cudaErrorDeviceUninitialized", "invalid device context"},
    {205, "cudaErrorMapBufferObjectFailed", "mapping of buffer object failed"},
    {206, "cudaErrorUnmapBufferObjectFailed", "unmapping of buffer object failed"},
    {207, "cudaErrorArrayIsMapped", "array is mapped"},
    {208, "cudaErrorAlreadyMapped", "resource already mapped"},
    {209, "cudaErrorNoKernelImageForDevice",
     "no kernel image is available for execution on the device"},
    {210, "cudaErrorAlreadyAcquired", "resource already acquired"},
    {211, "cudaErrorNotMapped", "resource not mapped"},
    {212, "cudaErrorNotMappedAsArray", "resource not mapped as array"},
    {213, "cudaErrorNotMappedAsPointer", "resource not mapped as pointer"},
    {214, "cudaErrorECCUncorrectable", "uncorrectable ECC error encountered"},
    {215, "cudaErrorUnsupportedLimit", "limit is not supported on this architecture"},
    {216, "cudaErrorDeviceAlreadyInUse",
     "exclusive-thread device already in use by a different thread"},
    {217, "cudaErrorPeerAccessUnsupported",
     "peer access is not supported between these two devices"},
    {218, "cudaErrorInvalidPtx", "a PTX JIT compilation failed"},
    {219, "cudaErrorInvalidGraphicsContext", "invalid OpenGL or DirectX context"},
    {220, "cudaErrorNvlinkUncorrectable",
     "uncorrectable NVLink error detected during the execution"},
    {221, "cudaErrorJitCompilerNotFound", "PTX JIT compiler library not found"},
    {222, "cudaErrorUnsupportedPtxVersion",
     "the provided PTX was compiled with an unsupported toolchain."},
    {223, "cudaErrorJitCompilationDisabled", "PTX JIT compilation was disabled"},
    {224, "cudaErrorUnsupportedExecAffinity", "the provided execution affinity is not supported"},
    {225, "cudaErrorUnsupportedDevSideSync",
     "the provided PTX contains unsupported call to cudaDeviceSynchronize"},
    {226, "cudaErrorContained",
     "an exception occurred on the device that is now contained by the GPU's error containment "
     "capability"},
    {300, "cudaErrorInvalidSource", "device kernel image is invalid"},
    {301, "cudaErrorFileNotFound", "file not found"},
    {302, "cudaErrorSharedObjectSymbolNotFound", "shared object symbol not found"},
    {303, "cudaErrorSharedObjectInitFailed", "shared object initialization failed"},
    {304, "cudaErrorOperatingSystem", "OS call failed or operation not supported on this OS"},
    {400, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {401, "cudaErrorIllegalState", "the operation cannot be performed in the present state"},
    {402, "cudaErrorLossyQuery", "attempted introspection would be semantically lossy"},
    {500, "cudaErrorSymbolNotFound", "named symbol not found"},
    {600, "cudaErrorNotReady", "device not ready"},
    {700, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {701, "cudaErrorLaunchOutOfResources", "too many resources requested for launch"},
    {702, "cudaErrorLaunchTimeout", "the launch timed out and was terminated"},
    {703, "cudaErrorLaunchIncompatibleTexturing", "launch uses incompatible texturing mode"},
    {704, "cudaErrorPeerAccessAlreadyEnabled", "peer access is already enabled"},
    {705, "cudaErrorPeerAccessNotEnabled", "peer access has not been enabled"},
    {708, "cudaErrorSetOnActiveProcess", "cannot set while device is active in this process"},
    {709, "cudaErrorContextIsDestroyed", "context is destroyed"},
    {710, "cudaErrorAssert", "device-side assert triggered"},
    {711, "cudaErrorTooManyPeers", "peer mapping resources exhausted"},
    {712, "cudaErrorHostMemoryAlreadyRegistered",
     "part or all of the requested memory range is already mapped"},
    {713, "cudaErrorHostMemoryNotRegistered",
     "pointer does not correspond to a registered memory region"},
    {714, "cudaErrorHardwareStackError", "hardware stack error"},
    {715, "cudaErrorIllegalInstruction", "an illegal instruction was encountered"},
    {716, "cudaErrorMisalignedAddress", "misaligned address"},
    {717, "cudaErrorInvalidAddressSpace", "operation not supported on global/shared address space"},
    {718, "cudaErrorInvalidPc", "invalid program counter"},
    {719, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {720, "cudaErrorCooperativeLaunchTooLarge", "too many blocks in cooperative launch"},
    {721, "cudaErrorTensorMemoryLeak", "tensor memory not completely freed"},
    {800, "cudaErrorNotPermitted", "operation not permitted"},
    {801, "cudaErrorNotSupported", "operation not supported"},
    {802, "cudaErrorSystemNotReady", "system not yet initialized"},
    {803, "cudaErrorSystemDriverMismatch",
     "system has unsupported display driver / cuda driver combination"},
    {804, "cudaErrorCompatNotSupportedOnDevice",
     "forward compatibility was attempted on non supported HW"},
    {805, "cudaErrorMpsConnectionFailed", "mps connection failed"},
    {806, "cudaErrorMpsRpcFailure", "mps rpc failure"},
    {807, "cudaErrorMpsServerNotReady", "mps server not ready"},
    {808, "cudaErrorMpsMaxClientsReached", "mps max clients reached"},
    {809, "cudaErrorMpsMaxConnectionsReached", "mps max connections reached"},
    {810, "cudaErrorMpsClientTerminated", "mps client terminated"},
    {811, "cudaErrorCdpNotSupported", "cdp not supported"},
    {812, "cudaErrorCdpVersionMismatch", "cdp version mismatch"},
    {900, "cudaErrorStreamCaptureUnsupported", "stream capture unsupported"},
    {901, "cudaErrorStreamCaptureInvalidated", "stream capture invalidated"},
    {902, "cudaErrorStreamCaptureMerge", "stream capture merge"},
    {903, "cudaErrorStreamCaptureUnmatched", "stream capture unmatched"},
    {904, "cudaErrorStreamCaptureUnjoined", "stream capture unjoined"},
    {905, "cudaErrorStreamCaptureIsolation", "stream capture isolation"},
    {906, "cudaErrorStreamCaptureImplicit", "stream capture implicit"},
    {907, "cudaErrorCapturedEvent", "captured event"},
    {908, "cudaErrorStreamCaptureWrongThread", "stream capture wrong thread"},
    {909, "cudaErrorTimeout", "wait operation timed out"},
    {910, "cudaErrorGraphExecUpdateFailure", "graph exec update failure"},
    {911, "cudaErrorExternalDevice", "external device"},
    {912, "cudaErrorInvalidClusterSize", "invalid cluster size"},
    {913, "cudaErrorFunctionNotLoaded", "function not loaded"},
    {914, "cudaErrorInvalidResourceType", "invalid resource type"},
    {915, "cudaErrorInvalidResourceConfiguration", "invalid resource configuration"},
    {999, "cudaErrorUnknown", "unknown error"},
};

template <size_t N>
const ErrorInfo* Find(const ErrorInfo (&table)[N], int code) {
  auto it = std::lower_bound(std::begin(table), std::end(table), code,
                             [](const ErrorInfo& e, int c) { return e.code < c; });
  return it != std::end(table) && it->code == code ? it : nullptr;
}

}  // namespace

const char* CuErrorName(int code) {
  const ErrorInfo* e = Find(kDriverErrors, code);
  return e ? e->name : nullptr;
}
const char* CuErrorString(int code) {
  const ErrorInfo* e = Find(kDriverErrors, code);
  return e ? e->description : nullptr;
}
const char* CudaErrorName(int code) {
  const ErrorInfo* e = Find(kRuntimeErrors, code);
  return e ? e->name : nullptr;
}
const char* CudaErrorString(int code) {
  const ErrorInfo* e = Find(kRuntimeErrors, code);
  return e ? e->description : nullptr;
}

CUresult ToCuResult(const Status& status, CUresult invalid) {
  switch (status.code()) {
    case StatusCode::kOk:
      return CUDA_SUCCESS;
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kNotFound:
      return invalid;
    case StatusCode::kAlreadyExists:
      return CUDA_ERROR_INVALID_VALUE;
    case StatusCode::kResourceExhausted:
      return CUDA_ERROR_OUT_OF_MEMORY;
    case StatusCode::kDeadlineExceeded:
      return CUDA_ERROR_LAUNCH_TIMEOUT;
    case StatusCode::kAborted:
      return CUDA_ERROR_LAUNCH_FAILED;  // callers with the context's fault map it precisely
    case StatusCode::kUnimplemented:
      return CUDA_ERROR_NOT_SUPPORTED;
    case StatusCode::kUnavailable:
      return CUDA_ERROR_NO_DEVICE;
    case StatusCode::kPermissionDenied:
      return CUDA_ERROR_NOT_PERMITTED;
    case StatusCode::kFailedPrecondition:
      return CUDA_ERROR_ILLEGAL_STATE;
    case StatusCode::kDataLoss:
    case StatusCode::kInternal:
      return CUDA_ERROR_UNKNOWN;
  }
  return CUDA_ERROR_UNKNOWN;
}

}  // namespace gpuvm::runtime
