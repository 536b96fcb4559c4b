// Test support: GVISA assembly (docs/ISA.md) of kernels that tests of several layers launch: the
// guest driver's launch tests, the runtime's API tests (runtime/tests/test_kernels.h packs them
// into module images) and the multi-process tests. Header-only; not linked into production code.
//
// Threading: constants.
#ifndef GPUVM_GPU_ISA_SAMPLE_KERNELS_H_
#define GPUVM_GPU_ISA_SAMPLE_KERNELS_H_

namespace gpuvm::isa {

// vadd(const u32* a, const u32* b, u32* c, u32 n): c[i] = a[i] + b[i] for i < n.
inline constexpr char kVaddAsm[] = R"(
    .params 28
    s2r.u32 r0, %tid.x
    s2r.u32 r1, %ctaid.x
    s2r.u32 r2, %ntid.x
    mad.u32 r0, r1, r2, r0
    ld.const.c0.u32 r8, [rz+24]
    setp.ge.u32 p0, r0, r8
    @p0 bra done
    ld.const.c0.u64 r2, [rz+0]
    ld.const.c0.u64 r4, [rz+8]
    ld.const.c0.u64 r6, [rz+16]
    mulwide.u32 r10, r0, 4
    add.u64 r12, r2, r10
    ld.global.a64.u32 r14, [r12]
    add.u64 r12, r4, r10
    ld.global.a64.u32 r15, [r12]
    add.u32 r14, r14, r15
    add.u64 r12, r6, r10
    st.global.a64.u32 [r12], r14
  done:
    exit
)";

}  // namespace gpuvm::isa

#endif  // GPUVM_GPU_ISA_SAMPLE_KERNELS_H_
