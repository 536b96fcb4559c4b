// Kernels for the runtime's API tests, written in GVISA assembly (docs/ISA.md) and packed as
// isa::Module images, so the tests run whether or not the PTX translator is in the build.
// cuModuleLoadData accepts these images directly; cudart accepts a fat binary wrapper pointing at
// one (a gpuvm extension).
//
// Threading: plain functions.
#ifndef GPUVM_RUNTIME_TESTS_TEST_KERNELS_H_
#define GPUVM_RUNTIME_TESTS_TEST_KERNELS_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "gpu/isa/assembler.h"
#include "gpu/isa/module.h"
#include "gpu/isa/sample_kernels.h"

namespace gpuvm::runtime::testing {

// vadd(const u32* a, const u32* b, u32* c, u32 n): c[i] = a[i] + b[i] for i < n.
using isa::kVaddAsm;

// poke(u64 address): every thread stores 1 to `address` (a bad pointer makes an MMU fault).
inline constexpr char kPokeAsm[] = R"(
    .params 8
    ld.const.c0.u64 r2, [rz+0]
    mov.u32 r4, 1
    st.global.a64.u32 [r2], r4
    exit
)";

// fill_from_global(u32* out): out[tid] = *(u32*)global0 + tid, where global0's address is read from
// constant bank 2 slot 0 (the loader writes it), and adds the first word of constant bank 1.
inline constexpr char kGlobalsAsm[] = R"(
    .params 8
    .maxthreads 256
    s2r.u32 r0, %tid.x
    ld.const.c2.u64 r2, [rz+0]
    ld.global.a64.u32 r4, [r2]
    ld.const.c1.u32 r5, [rz+0]
    add.u32 r4, r4, r5
    add.u32 r4, r4, r0
    ld.const.c0.u64 r6, [rz+0]
    mulwide.u32 r8, r0, 4
    add.u64 r6, r6, r8
    st.global.a64.u32 [r6], r4
    exit
)";

// Kernels that fault on the device, one per trap reason of the software GPU (docs/SOFTWARE-GPU.md
// "Compute traps"), each taking one u64 parameter (a valid device pointer), and the CUDA code a
// program sees at its next synchronizing call (docs/RUNTIME.md "Errors").
struct FaultKernel {
  const char* name;
  const char* assembly;
  int cuda_error;  // CUresult == cudaError_t
};
inline constexpr FaultKernel kFaultKernels[] = {
    {"store_misaligned",
     ".params 8\nld.const.c0.u64 r2, [rz+0]\nst.global.a64.u32 [r2+2], r2\nexit",
     716},  // CUDA_ERROR_MISALIGNED_ADDRESS
    {"return_to_nowhere", ".params 8\nmov.u32 r30, 100000\nret r30",
     715},  // CUDA_ERROR_ILLEGAL_INSTRUCTION
    {"shared_out_of_window", ".params 8\n.shared 64\nst.shared.u32 [rz+64], r0\nexit",
     700},                    // CUDA_ERROR_ILLEGAL_ADDRESS
    {"global_out_of_bounds",  // 256 MiB past the pointer: an MMU fault
     ".params 8\nld.const.c0.u64 r2, [rz+0]\nmov.u64 r4, 0x1000000\nadd.u64 r2, r2, r4\n"
     "st.global.a64.u32 [r2], r2\nexit",
     700},  // CUDA_ERROR_ILLEGAL_ADDRESS
    {"trap_instruction", ".params 8\ns2r.u32 r0, %tid.x\nsetp.eq.u32 p0, r0, 5\n@p0 trap\nexit",
     719},  // CUDA_ERROR_LAUNCH_FAILED
    {"assert_fails", ".params 8\ns2r.u32 r0, %tid.x\nsetp.eq.u32 p0, r0, 9\n@p0 trap.assert\nexit",
     710},                // CUDA_ERROR_ASSERT
    {"barrier_deadlock",  // even threads wait at barrier 0, odd ones at barrier 1
     ".params 8\ns2r.u32 r0, %tid.x\nand.u32 r7, r0, 1\nsetp.eq.u32 p0, r7, 0\n@p0 bar 0\n"
     "@!p0 bar 1\nexit",
     702},  // CUDA_ERROR_LAUNCH_TIMEOUT
};

// `bytes`, or the test program ends saying what `what` failed with (the kernels are constants: a
// failure is a bug in this file).
inline std::vector<uint8_t> OrDie(Result<std::vector<uint8_t>> bytes, const char* what) {
  if (!bytes.ok()) {
    fprintf(stderr, "%s: %s\n", what, bytes.status().ToString().c_str());
    abort();
  }
  return std::move(*bytes);
}

inline std::vector<uint8_t> AssembleOrDie(const char* text) {
  return OrDie(isa::Assemble(text), "test kernel does not assemble");
}

// A module with vadd, poke and fill_from_global, one global "counter" (u32, initial value 40) and a
// const image whose first word is 2.
inline std::vector<uint8_t> TestModuleImage() {
  isa::Module m;
  m.kernels.push_back(
      {"vadd", AssembleOrDie(kVaddAsm), {{0, 8, 8}, {8, 8, 8}, {16, 8, 8}, {24, 4, 4}}});
  m.kernels.push_back({"poke", AssembleOrDie(kPokeAsm), {{0, 8, 8}}});
  m.kernels.push_back({"fill_from_global", AssembleOrDie(kGlobalsAsm), {{0, 8, 8}}});
  isa::ModuleGlobal counter;
  counter.name = "counter";
  counter.size = 4;
  counter.align = 4;
  counter.init = {40, 0, 0, 0};
  m.globals.push_back(counter);
  isa::ModuleGlobal self_pointer;  // holds the address of counter + 4 (a relocation)
  self_pointer.name = "pointer_to_counter";
  self_pointer.size = 8;
  self_pointer.align = 8;
  self_pointer.relocations.push_back({0, 8, 0, 4});
  m.globals.push_back(self_pointer);
  m.const_image = {2, 0, 0, 0};
  return OrDie(isa::EncodeModule(m), "test module does not encode");
}

// A module with the kernels of kFaultKernels.
inline std::vector<uint8_t> FaultModuleImage() {
  isa::Module m;
  for (const FaultKernel& k : kFaultKernels)
    m.kernels.push_back({k.name, AssembleOrDie(k.assembly), {{0, 8, 8}}});
  return OrDie(isa::EncodeModule(m), "fault module does not encode");
}

}  // namespace gpuvm::runtime::testing

#endif  // GPUVM_RUNTIME_TESTS_TEST_KERNELS_H_
