// A VM's GPU share as people write it, the one syntax of every place that takes one: gpuvm-vm
// --share, gpuvm-aggregator --vm-share NAME=PERCENT and --default-share, `gpuvm-ctl set-share`
// (the control protocol, aggregator/control/protocol.h) and the `shareP` option of a VM's name
// (vm_name.h).
//
// PERCENT is 0 to 100 with at most three decimals and an optional '%': "25", "12.5", "33.333",
// "40%". Refused, with one message per kind of mistake: negative values, above 100, more than
// three decimals, exponents, hex, "nan", "inf", spaces, anything else.
//
// Threading: pure functions.
#ifndef GPUVM_BASE_SHARE_H_
#define GPUVM_BASE_SHARE_H_

#include <string>
#include <string_view>

#include "base/status.h"

namespace gpuvm {

// InvalidArgument naming the mistake ("share '-5' is negative; shares are 0-100%").
Result<double> ParseSharePercent(std::string_view text);

// The shortest text ParseSharePercent reads back as `percent` rounded to three decimals, without
// '%': 25 -> "25", 12.5 -> "12.5", 100/3 -> "33.333". Negative or non-finite values give "0".
std::string FormatSharePercent(double percent);

}  // namespace gpuvm

#endif  // GPUVM_BASE_SHARE_H_
