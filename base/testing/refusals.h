// What the tests of a text parser check of bad input: each text is refused, with a message that
// contains a given piece (and, where asked, a given status code). Shared by the tests of the VM
// name and share syntax (base/), the control protocol (aggregator/control) and the GVISA assembler
// (gpu/isa).
//
// Test-only; threading: the test's thread.
#ifndef GPUVM_BASE_TESTING_REFUSALS_H_
#define GPUVM_BASE_TESTING_REFUSALS_H_

#include <gtest/gtest.h>

#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"

namespace gpuvm::testing {

// One bad input, and a piece of the sentence that refuses it.
struct Refusal {
  std::string_view text;
  std::string_view says;
};

// `parse(text)` (anything that returns a Result) refuses every row's text, saying the row's piece;
// with `code`, its status has that code.
template <typename Parse>
void ExpectRefusals(Parse&& parse, std::span<const Refusal> rows,
                    std::optional<StatusCode> code = std::nullopt) {
  for (const Refusal& row : rows) {
    const auto r = parse(row.text);
    EXPECT_FALSE(r.ok()) << row.text;
    if (r.ok()) continue;
    if (code) {
      EXPECT_EQ(r.status().code(), *code) << row.text;
    }
    EXPECT_NE(r.status().message().find(row.says), std::string::npos)
        << row.text << ": " << r.status().message();
  }
}
template <typename Parse>
void ExpectRefusals(Parse&& parse, std::initializer_list<Refusal> rows,
                    std::optional<StatusCode> code = std::nullopt) {
  ExpectRefusals(parse, std::span<const Refusal>(rows.begin(), rows.size()), code);
}

}  // namespace gpuvm::testing

#endif  // GPUVM_BASE_TESTING_REFUSALS_H_
