// Doubles that a JSON number writer must keep bit for bit: the values a writer with 9 significant
// digits ("%.9g", the benchmark harness's old format) changed or cut (4503599627370495.5 became
// 4.50359963e+15, which reads back as an integer), subnormals, the extremes, -0 and a few plain
// ones. Shared by the tests of base/json_number.h and of the harness's JSON (bench/harness).
//
// Test-only data; threading: constants.
#ifndef GPUVM_BASE_TESTING_ROUND_TRIP_DOUBLES_H_
#define GPUVM_BASE_TESTING_ROUND_TRIP_DOUBLES_H_

namespace gpuvm::testing {

inline constexpr double kRoundTripDoubles[] = {4503599627370495.5,
                                               0.1234567891234,
                                               1.0000000001,
                                               123456789.123,
                                               0.30000000000000004,
                                               1e-300,
                                               2.2250738585072014e-308,
                                               4.9406564584124654e-324,
                                               1.7976931348623157e308,
                                               9007199254740993.0,
                                               -0.0,
                                               -1234567.0,
                                               0.1,
                                               2.5,
                                               1e15,
                                               0.001953125,
                                               6.02214076e23};

}  // namespace gpuvm::testing

#endif  // GPUVM_BASE_TESTING_ROUND_TRIP_DOUBLES_H_
