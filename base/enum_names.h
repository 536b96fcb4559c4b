// Names of enum values (for logs, JSON, command lines) kept in one table per enum: NameOf reads a
// value's name from it and ValueNamed the value back, so each spelling is written once and a name
// function and its parser cannot drift apart. Tables are a handful of rows; lookups are linear.
//
// Threading: constexpr tables and pure functions; any thread.
#ifndef GPUVM_BASE_ENUM_NAMES_H_
#define GPUVM_BASE_ENUM_NAMES_H_

#include <cstddef>
#include <optional>
#include <string_view>

namespace gpuvm {

template <typename E>
struct EnumName {
  E value;
  const char* name;
};

// The name `table` gives `value`, or `unknown` where it gives none (a value cast from a number).
template <typename E, size_t N>
constexpr const char* NameOf(const EnumName<E> (&table)[N], E value, const char* unknown) {
  for (const EnumName<E>& row : table) {
    if (row.value == value) return row.name;
  }
  return unknown;
}

// The value `table` names `name`, if any (exact spelling).
template <typename E, size_t N>
constexpr std::optional<E> ValueNamed(const EnumName<E> (&table)[N], std::string_view name) {
  for (const EnumName<E>& row : table) {
    if (name == row.name) return row.value;
  }
  return std::nullopt;
}

}  // namespace gpuvm

#endif  // GPUVM_BASE_ENUM_NAMES_H_
