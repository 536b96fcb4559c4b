// JSON numbers from doubles: the one number writer of the project's JSON (the benchmark harness's
// results file, bench/harness/json.cc; the suite programs' result line, bench/suite/report.cc; the
// aggregator's control plane, aggregator/control/service.cc), next to json_string.h.
//
// A number is written so that parsing it gives back the same double: an integer below 2^53 in
// magnitude as its digits ("42", "-0"), anything else as the shortest decimal that reads back to
// the same value (std::to_chars: "0.1", "1.2345678901234567", "1e+300"). A fixed number of
// significant digits (the "%.9g" these writers used) loses values: 4503599627370495.5 became
// 4.50359963e+15, which reads back as an integer and printed differently the second time.
// NaN and infinities have no JSON form: they are written as null.
//
// Header-only, plain C++17 without project dependencies: nvcc compiles it into the runtime-API
// programs (bench/suite/rt/), which link nothing of ours but our libcudart.
//
// Threading: a pure function.
#ifndef GPUVM_BASE_JSON_NUMBER_H_
#define GPUVM_BASE_JSON_NUMBER_H_

#include <charconv>
#include <cmath>
#include <string>
#include <system_error>

namespace gpuvm {

// Appends `value` to `out` as a JSON number (null when it is not finite).
inline void AppendJsonNumber(std::string& out, double value) {
  if (!std::isfinite(value)) {
    out += "null";
    return;
  }
  // 24 characters hold the longest shortest form ("-2.2250738585072014e-308"); fixed notation of
  // an integer below 2^53 is at most 17.
  char buf[32];
  const bool integer = value == std::floor(value) && std::fabs(value) < 9007199254740992.0;
  const std::to_chars_result r =
      integer ? std::to_chars(buf, buf + sizeof buf, value, std::chars_format::fixed)
              : std::to_chars(buf, buf + sizeof buf, value);
  if (r.ec != std::errc()) {
    out += "null";  // cannot happen with this buffer; null rather than a torn number
    return;
  }
  out.append(buf, r.ptr);
}

inline std::string JsonNumber(double value) {
  std::string out;
  AppendJsonNumber(out, value);
  return out;
}

}  // namespace gpuvm

#endif  // GPUVM_BASE_JSON_NUMBER_H_
