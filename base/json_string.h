// JSON string literals: the one escaping routine of the project, shared by the benchmark harness's
// JSON writer (bench/harness/json.cc), the suite programs' result line (bench/suite/report.cc) and
// the aggregator's control plane (aggregator/control/protocol.cc). `"` and `\` are escaped, \n \r
// \t by name, other control characters as \u00XX; every other byte (UTF-8 included) is copied as
// is, so a multi-byte character stays one character.
//
// Header-only, plain C++17 without project dependencies: nvcc compiles it into the runtime-API
// programs (bench/suite/rt/), which link nothing of ours but our libcudart.
//
// Threading: a pure function.
#ifndef GPUVM_BASE_JSON_STRING_H_
#define GPUVM_BASE_JSON_STRING_H_

#include <cstdio>
#include <string>
#include <string_view>

namespace gpuvm {

// Appends `text` to `out` as a quoted JSON string.
inline void AppendJsonString(std::string& out, std::string_view text) {
  out += '"';
  for (const char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

}  // namespace gpuvm

#endif  // GPUVM_BASE_JSON_STRING_H_
