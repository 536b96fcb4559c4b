// How the project's text parsers (VM names, shares, the control protocol) show input they refuse:
// one quoting rule, so that every error message cuts and masks the same way, and the digit test
// they share (ASCII only, unlike std::isdigit, which follows the locale).
//
// Threading: pure functions.
#ifndef GPUVM_BASE_QUOTE_H_
#define GPUVM_BASE_QUOTE_H_

#include <string>
#include <string_view>

namespace gpuvm {

inline bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }

// `s` in single quotes for an error message: at most 40 characters (then "..."), anything
// unprintable as '?', so that a hostile peer cannot write control characters into a log.
std::string QuoteForMessage(std::string_view s);

}  // namespace gpuvm

#endif  // GPUVM_BASE_QUOTE_H_
