// libcuda.so.1, devices: cuDeviceGet*, attributes, compute capability (driver_api.h has the
// shared checks).
//
// Threading: every entry point may be called from any thread (see runtime/core/objects.h).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include "runtime/driver_api.h"

GPUVM_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  CUresult r = CheckInit(device == nullptr);
  if (r != CUDA_SUCCESS) return r;
  if (!ValidDevice(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuDeviceGetCount(int* count) {
  CUresult r = CheckInit(count == nullptr);
  if (r != CUDA_SUCCESS) return r;
  *count = Process::Get().device_count();
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  CUresult r = CheckInit(name == nullptr || len <= 0);
  if (r != CUDA_SUCCESS) return r;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  const std::string& n = Process::Get().facts().name;
  size_t copy = std::min<size_t>(n.size(), size_t(len) - 1);
  std::memcpy(name, n.data(), copy);
  name[copy] = '\0';
  return CUDA_SUCCESS;
}

// The device's PCI address as CUDA writes it, "domain:bus:device.function" in hexadecimal
// ("0000:00:05.0": 13 bytes with the terminator); cut to `len` bytes as cuDeviceGetName does.
GPUVM_EXPORT CUresult cuDeviceGetPCIBusId(char* bus_id, int len, CUdevice dev) {
  CUresult r = CheckInit(bus_id == nullptr || len <= 0);
  if (r != CUDA_SUCCESS) return r;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  const auto& f = Process::Get().facts();
  char text[32];
  std::snprintf(text, sizeof text, "%04x:%02x:%02x.0", unsigned(f.pci_domain) & 0xffff,
                unsigned(f.pci_bus) & 0xff, unsigned(f.pci_device) & 0x1f);
  const size_t copy = std::min<size_t>(std::strlen(text), size_t(len) - 1);
  std::memcpy(bus_id, text, copy);
  bus_id[copy] = '\0';
  return CUDA_SUCCESS;
}

// The device at a PCI address in any of CUDA's forms: "domain:bus:device.function",
// "domain:bus:device" or "bus:device.function" (hexadecimal). A well-formed address of no device
// here: CUDA_ERROR_INVALID_DEVICE.
GPUVM_EXPORT CUresult cuDeviceGetByPCIBusId(CUdevice* dev, const char* bus_id) {
  CUresult r = CheckInit(dev == nullptr || bus_id == nullptr);
  if (r != CUDA_SUCCESS) return r;
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  int used = 0;
  const size_t length = std::strlen(bus_id);
  const bool full =
      std::sscanf(bus_id, "%x:%x:%x.%x%n", &domain, &bus, &device, &function, &used) == 4 &&
      size_t(used) == length;
  bool parsed = full;
  if (!parsed) {
    domain = function = 0;
    parsed = std::sscanf(bus_id, "%x:%x:%x%n", &domain, &bus, &device, &used) == 3 &&
             size_t(used) == length;
  }
  if (!parsed) {
    domain = function = 0;
    parsed = std::sscanf(bus_id, "%x:%x.%x%n", &bus, &device, &function, &used) == 3 &&
             size_t(used) == length;
  }
  if (!parsed || domain > 0xffff || bus > 0xff || device > 0x1f || function > 7) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const auto& f = Process::Get().facts();
  if (domain != unsigned(f.pci_domain) || bus != unsigned(f.pci_bus) ||
      device != unsigned(f.pci_device) || function != 0) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  *dev = 0;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  CUresult r = CheckInit(bytes == nullptr);
  if (r != CUDA_SUCCESS) return r;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = Process::Get().facts().vram_bytes;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
  using namespace gpuvm::guest;
  CUresult r = CheckInit(pi == nullptr);
  if (r != CUDA_SUCCESS) return r;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  const gpuvm::runtime::DeviceFacts& f = Process::Get().facts();
  int v = 0;
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      v = kMaxThreadsPerBlock;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
      v = kMaxBlockDim[0];
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
      v = kMaxBlockDim[1];
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
      v = kMaxBlockDim[2];
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
      v = kMaxGridDim[0];
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
      v = kMaxGridDim[1];
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
      v = kMaxGridDim[2];
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
      v = kMaxSharedBytesPerBlock;
      break;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY:
      v = 64 << 10;
      break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
      v = 32;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH:
      v = std::numeric_limits<int>::max();
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
      v = 32768;
      break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
      v = f.clock_khz;
      break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT:
      v = 512;
      break;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      v = f.multiprocessors;
      break;
    case CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT:
      v = 512;
      break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
      v = f.pci_bus;
      break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
      v = f.pci_device;
      break;
    case CU_DEVICE_ATTRIBUTE_TCC_DRIVER:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
      v = f.memory_clock_khz;
      break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
      v = f.memory_bus_width;
      break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
      v = f.l2_bytes;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
      v = 1536;
      break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
      // Managed memory has one address on both sides, but pinned and registered host memory have
      // GPU addresses of their own (a 40-bit GPU cannot reach a host address above 1 TiB at the
      // same address), which unified addressing would promise they do not.
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
      // Managed memory is coherent pinned host memory: the CPU may use it while kernels run (as on
      // devices with concurrent managed access). Not under a DRM kernel driver (PVDRM), which
      // chooses GPU addresses itself (docs/RUNTIME.md, "Managed memory").
      v = Process::Get().bus_mode() == gpuvm::runtime::BusMode::kPvdrm ||
                  Process::Get().bus_mode() == gpuvm::runtime::BusMode::kDrm
              ? 0
              : 1;
      break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
      v = f.pci_domain;
      break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT:
      v = 32;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      v = f.cc_major;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      v = f.cc_minor;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
      v = kMaxSharedBytesPerBlock;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR:
      v = 32768;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
      v = kMaxSharedBytesPerBlock;
      break;
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR:
      v = 8;
      break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:  // cuMemAllocAsync and the pools
      v = 1;
      break;
    default:
      // Every other documented attribute is a feature this device does not have.
      if (int(attrib) <= 0 || int(attrib) >= CU_DEVICE_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
      v = 0;
  }
  *pi = v;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuDeviceComputeCapability(int* major, int* minor, CUdevice dev) {
  CUresult r = CheckInit(major == nullptr || minor == nullptr);
  if (r != CUDA_SUCCESS) return r;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *major = Process::Get().facts().cc_major;
  *minor = Process::Get().facts().cc_minor;
  return CUDA_SUCCESS;
}
