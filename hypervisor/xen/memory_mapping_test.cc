#include "hypervisor/xen/memory_mapping.h"

#include "gtest/gtest.h"

namespace gpuvm::hv::xen {
namespace {

TEST(XenMemoryMapping, FramesOfARealApertureRange) {
  MemoryBacking aperture;
  aperture.machine_address = 0xd0000000ull + 0x200000;  // a BAR3 aperture page of a real board
  auto plan = PlanMemoryMapping(0x1800004000ull, 0x1800005fffull, aperture);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->first_gfn, 0x1800004u);
  EXPECT_EQ(plan->first_mfn, 0xd0200u);
  EXPECT_EQ(plan->frames, 2u);
}

TEST(XenMemoryMapping, AMemfdCannotBackGuestFramesOnXen) {
  MemoryBacking memfd;
  memfd.fd = 7;
  EXPECT_EQ(PlanMemoryMapping(0, 0xfff, memfd).status().code(), StatusCode::kUnimplemented);
}

TEST(XenMemoryMapping, RefusesPartialPagesAndHugeRanges) {
  MemoryBacking aperture;
  EXPECT_EQ(PlanMemoryMapping(0x800, 0x17ff, aperture).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanMemoryMapping(0x2000, 0xfff, aperture).status().code(),
            StatusCode::kInvalidArgument);
  aperture.machine_address = 0x123;
  EXPECT_EQ(PlanMemoryMapping(0, 0xfff, aperture).status().code(), StatusCode::kInvalidArgument);
  aperture.machine_address = 0;
  EXPECT_EQ(PlanMemoryMapping(0, (uint64_t{1} << 33) - 1, aperture).status().code(),
            StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace gpuvm::hv::xen
