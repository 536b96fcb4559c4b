// The little JSON gpuvm-bench needs: a value type, a strict parser for what benchmark programs
// report (untrusted — a program runs inside a VM; bounded depth and size, clear errors), and a
// writer for the results file (one object per line, keys in insertion order).
//
// Not a general JSON library: numbers are doubles (integers are exact up to 2^53, enough for
// counters and nanoseconds), \u escapes outside ASCII become UTF-8, surrogate pairs are joined.
//
// Threading: values; no shared state.
#ifndef GPUVM_BENCH_HARNESS_JSON_H_
#define GPUVM_BENCH_HARNESS_JSON_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace gpuvm::bench {

class Json {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

  Json() = default;  // null
  static Json Bool(bool v);
  static Json Number(double v);
  static Json String(std::string v);
  static Json Array();
  static Json Object();

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  bool bool_value() const { return bool_; }
  double number() const { return number_; }
  const std::string& string() const { return string_; }
  const std::vector<Json>& items() const { return items_; }
  const std::vector<std::pair<std::string, Json>>& members() const { return members_; }

  // Object member by key (the last one if repeated), or nullptr.
  const Json* Find(std::string_view key) const;

  // Building: Push onto an array, Set on an object (replaces an existing key, keeps its place).
  Json& Push(Json v);
  Json& Set(std::string key, Json v);

  // One line, no spaces; numbers that are integers print without a fraction, others as the
  // shortest decimal that parses back to the same double (base/json_number.h).
  std::string Serialize() const;

 private:
  Type type_ = Type::kNull;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;
  std::vector<Json> items_;
  std::vector<std::pair<std::string, Json>> members_;
};

// Limits of ParseJson: input bytes and nesting depth.
inline constexpr size_t kMaxJsonBytes = 1 << 20;
inline constexpr int kMaxJsonDepth = 32;

// Parses exactly one JSON value (surrounding whitespace allowed). InvalidArgument with the byte
// offset and what was expected on malformed input.
Result<Json> ParseJson(std::string_view text);

}  // namespace gpuvm::bench

#endif  // GPUVM_BENCH_HARNESS_JSON_H_
