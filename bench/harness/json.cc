#include "bench/harness/json.h"

#include <cmath>
#include <cstdlib>

#include "base/json_number.h"
#include "base/json_string.h"

namespace gpuvm::bench {

Json Json::Bool(bool v) {
  Json j;
  j.type_ = Type::kBool;
  j.bool_ = v;
  return j;
}
Json Json::Number(double v) {
  Json j;
  j.type_ = Type::kNumber;
  j.number_ = v;
  return j;
}
Json Json::String(std::string v) {
  Json j;
  j.type_ = Type::kString;
  j.string_ = std::move(v);
  return j;
}
Json Json::Array() {
  Json j;
  j.type_ = Type::kArray;
  return j;
}
Json Json::Object() {
  Json j;
  j.type_ = Type::kObject;
  return j;
}

const Json* Json::Find(std::string_view key) const {
  const Json* found = nullptr;
  for (const auto& [k, v] : members_) {
    if (k == key) found = &v;
  }
  return found;
}

Json& Json::Push(Json v) {
  items_.push_back(std::move(v));
  return items_.back();
}

Json& Json::Set(std::string key, Json v) {
  for (auto& [k, existing] : members_) {
    if (k == key) {
      existing = std::move(v);
      return existing;
    }
  }
  members_.emplace_back(std::move(key), std::move(v));
  return members_.back().second;
}

namespace {

void AppendValue(std::string& out, const Json& v) {
  switch (v.type()) {
    case Json::Type::kNull:
      out += "null";
      break;
    case Json::Type::kBool:
      out += v.bool_value() ? "true" : "false";
      break;
    case Json::Type::kNumber:
      AppendJsonNumber(out, v.number());  // exact: what we write parses to the same double
      break;
    case Json::Type::kString:
      AppendJsonString(out, v.string());
      break;
    case Json::Type::kArray: {
      out += '[';
      bool first = true;
      for (const Json& item : v.items()) {
        if (!first) out += ',';
        first = false;
        AppendValue(out, item);
      }
      out += ']';
      break;
    }
    case Json::Type::kObject: {
      out += '{';
      bool first = true;
      for (const auto& [key, item] : v.members()) {
        if (!first) out += ',';
        first = false;
        AppendJsonString(out, key);
        out += ':';
        AppendValue(out, item);
      }
      out += '}';
      break;
    }
  }
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Result<Json> ParseDocument() {
    SkipSpace();
    GPUVM_ASSIGN_OR_RETURN(Json v, ParseValue(0));
    SkipSpace();
    if (pos_ != text_.size()) return Error("the end of the document");
    return v;
  }

 private:
  Status Error(std::string_view expected) const {
    return Status::InvalidArgument("JSON: expected " + std::string(expected) + " at byte " +
                                   std::to_string(pos_));
  }

  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Consume(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Result<Json> ParseValue(int depth) {
    if (depth > kMaxJsonDepth) return Error("less nesting");
    if (pos_ >= text_.size()) return Error("a value");
    const char c = text_[pos_];
    if (c == '{') return ParseObject(depth);
    if (c == '[') return ParseArray(depth);
    if (c == '"') {
      GPUVM_ASSIGN_OR_RETURN(std::string s, ParseString());
      return Json::String(std::move(s));
    }
    if (Consume("true")) return Json::Bool(true);
    if (Consume("false")) return Json::Bool(false);
    if (Consume("null")) return Json();
    if (c == '-' || (c >= '0' && c <= '9')) return ParseNumber();
    return Error("a value");
  }

  Result<Json> ParseObject(int depth) {
    ++pos_;  // '{'
    Json object = Json::Object();
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return object;
    }
    for (;;) {
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"') return Error("a member name");
      GPUVM_ASSIGN_OR_RETURN(std::string key, ParseString());
      SkipSpace();
      if (!Consume(":")) return Error("':'");
      SkipSpace();
      GPUVM_ASSIGN_OR_RETURN(Json value, ParseValue(depth + 1));
      object.Set(std::move(key), std::move(value));
      SkipSpace();
      if (Consume("}")) return object;
      if (!Consume(",")) return Error("',' or '}'");
    }
  }

  Result<Json> ParseArray(int depth) {
    ++pos_;  // '['
    Json array = Json::Array();
    SkipSpace();
    if (Consume("]")) return array;
    for (;;) {
      SkipSpace();
      GPUVM_ASSIGN_OR_RETURN(Json value, ParseValue(depth + 1));
      array.Push(std::move(value));
      SkipSpace();
      if (Consume("]")) return array;
      if (!Consume(",")) return Error("',' or ']'");
    }
  }

  // JSON's number grammar, checked before strtod sees it.
  Result<Json> ParseNumber() {
    const size_t start = pos_;
    auto digits = [&] {
      const size_t from = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      return pos_ - from;
    };
    if (text_[pos_] == '-') ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '0') {
      ++pos_;
    } else if (digits() == 0) {
      return Error("digits");
    }
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) return Error("digits after '.'");
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (digits() == 0) return Error("exponent digits");
    }
    const std::string number(text_.substr(start, pos_ - start));
    const double value = std::strtod(number.c_str(), nullptr);
    if (!std::isfinite(value)) return Error("a finite number");
    return Json::Number(value);
  }

  Result<unsigned> ParseHex4() {
    if (text_.size() - pos_ < 4) return Error("4 hex digits");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= static_cast<unsigned>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        v |= static_cast<unsigned>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        v |= static_cast<unsigned>(c - 'A' + 10);
      } else {
        --pos_;
        return Error("a hex digit");
      }
    }
    return v;
  }

  static void AppendUtf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  Result<std::string> ParseString() {
    ++pos_;  // '"'
    std::string out;
    for (;;) {
      if (pos_ >= text_.size()) return Error("'\"' to end the string");
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) {
        --pos_;
        return Error("no control characters in strings");
      }
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) return Error("an escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          GPUVM_ASSIGN_OR_RETURN(unsigned cp, ParseHex4());
          if (cp >= 0xd800 && cp < 0xdc00) {
            if (!Consume("\\u")) return Error("the low half of a surrogate pair");
            GPUVM_ASSIGN_OR_RETURN(unsigned low, ParseHex4());
            if (low < 0xdc00 || low >= 0xe000) return Error("a low surrogate");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          } else if (cp >= 0xdc00 && cp < 0xe000) {
            return Error("no lone low surrogate");
          }
          AppendUtf8(out, cp);
          break;
        }
        default:
          --pos_;
          return Error("a valid escape");
      }
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

std::string Json::Serialize() const {
  std::string out;
  AppendValue(out, *this);
  return out;
}

Result<Json> ParseJson(std::string_view text) {
  if (text.size() > kMaxJsonBytes) {
    return Status::InvalidArgument("JSON: " + std::to_string(text.size()) +
                                   " bytes, more than the limit of " +
                                   std::to_string(kMaxJsonBytes));
  }
  return Parser(text).ParseDocument();
}

}  // namespace gpuvm::bench
