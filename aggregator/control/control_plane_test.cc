// The aggregator's control flags (ConsumeControlFlag): values land in ControlOptions, bad values
// are refused with a clear error and leave the options as they were.
#include "aggregator/control/control_plane.h"

#include <gtest/gtest.h>

namespace gpuvm::control {
namespace {

TEST(ControlFlagsTest, BandTuningFlagsSetTheirOptions) {
  ControlOptions options;
  ASSERT_TRUE(*ConsumeControlFlag("--band-lag-us", "500", &options));
  ASSERT_TRUE(*ConsumeControlFlag("--band-threshold-us", "8000", &options));
  ASSERT_TRUE(*ConsumeControlFlag("--band-hold-us", "700", &options));
  EXPECT_EQ(options.band_lag_us, 500);
  EXPECT_EQ(options.band_threshold_us, 8000);
  EXPECT_EQ(options.band_hold_us, 700);
  EXPECT_TRUE(options.band_buffering_idle);
  ASSERT_TRUE(*ConsumeControlFlag("--band-buffering", "preempt", &options));
  EXPECT_FALSE(options.band_buffering_idle);
  ASSERT_TRUE(*ConsumeControlFlag("--band-buffering", "idle", &options));
  EXPECT_TRUE(options.band_buffering_idle);
}

TEST(ControlFlagsTest, BadBandValuesAreRefusedAndChangeNothing) {
  ControlOptions options;
  const ControlOptions before = options;
  for (auto [flag, value] : {std::pair{"--band-lag-us", "-1"},
                             {"--band-lag-us", "2000000"},
                             {"--band-lag-us", "1ms"},
                             {"--band-threshold-us", "999"},
                             {"--band-threshold-us", ""},
                             {"--band-threshold-us", "99999999999999999999"},
                             {"--band-buffering", "Idle"},
                             {"--band-buffering", ""}}) {
    Result<bool> r = ConsumeControlFlag(flag, value, &options);
    EXPECT_FALSE(r.ok()) << flag << " " << value;
  }
  EXPECT_EQ(options.band_lag_us, before.band_lag_us);
  EXPECT_EQ(options.band_threshold_us, before.band_threshold_us);
  EXPECT_EQ(options.band_buffering_idle, before.band_buffering_idle);
}

TEST(ControlFlagsTest, OtherFlagsAreNotOurs) {
  ControlOptions options;
  Result<bool> r = ConsumeControlFlag("--vram-mib", "64", &options);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);
}

}  // namespace
}  // namespace gpuvm::control
