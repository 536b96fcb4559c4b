#include "ptx/lexer.h"

#include <bit>
#include <charconv>
#include <cstring>

namespace gpuvm::ptx {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHexDigit(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
// PTX "followsym": [a-zA-Z0-9_$].
bool IsFollowChar(char c) { return IsAlpha(c) || IsDigit(c) || c == '_' || c == '$'; }
uint32_t HexValue(char c) {
  if (IsDigit(c)) return static_cast<uint32_t>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<uint32_t>(c - 'a' + 10);
  return static_cast<uint32_t>(c - 'A' + 10);
}

constexpr std::string_view kPunctuation = ",;:{}[]()+-!@|<>=~*/&^%";

}  // namespace

Lexer::Lexer(std::string_view text) : text_(text) { current_ = Lex(); }

Token Lexer::Next() {
  Token token = current_;
  if (current_.kind != TokenKind::kEnd) current_ = Lex();
  return token;
}

void Lexer::SkipRestOfLine(uint32_t line) {
  // `current_` is the lookahead; drop it and everything after it that sits on that line.
  while (current_.kind != TokenKind::kEnd && current_.line == line) current_ = Lex();
}

Token Lexer::MakeError(std::string_view message) const {
  Token token;
  token.kind = TokenKind::kError;
  token.text = message;
  token.line = line_;
  return token;
}

void Lexer::SkipSpaceAndComments(Token* error) {
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c == '\n') {
      ++line_;
      ++pos_;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      ++pos_;
    } else if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '/') {
      while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
    } else if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '*') {
      uint32_t start_line = line_;
      pos_ += 2;
      bool closed = false;
      while (pos_ < text_.size()) {
        if (text_[pos_] == '*' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '/') {
          pos_ += 2;
          closed = true;
          break;
        }
        if (text_[pos_] == '\n') ++line_;
        ++pos_;
      }
      if (!closed) {
        *error = MakeError("unterminated /* comment");
        error->line = start_line;
        return;
      }
    } else {
      return;
    }
  }
}

Token Lexer::Lex() {
  Token error;
  SkipSpaceAndComments(&error);
  if (error.kind == TokenKind::kError) return error;
  Token token;
  token.line = line_;
  if (pos_ >= text_.size()) {
    token.kind = TokenKind::kEnd;
    return token;
  }
  const size_t start = pos_;
  const char c = text_[pos_];

  // Identifiers: [a-zA-Z][followsym]* or [_$%][followsym]+ (a lone `_` is the sink operand).
  if (IsAlpha(c) || c == '_' || c == '$' || c == '%') {
    ++pos_;
    while (pos_ < text_.size() && IsFollowChar(text_[pos_])) ++pos_;
    if (c == '%' && pos_ == start + 1) {
      token.kind = TokenKind::kPunct;
      token.punct = '%';
      token.text = text_.substr(start, 1);
      return token;
    }
    token.text = text_.substr(start, pos_ - start);
    // WARP_SZ, PTX's predefined identifier for the warp size, is a constant wherever an integer
    // may stand (operands, offsets, array sizes); the software GPU's warps are 32 wide.
    if (token.text == "WARP_SZ") {
      token.kind = TokenKind::kInteger;
      token.int_value = 32;
      return token;
    }
    token.kind = TokenKind::kIdentifier;
    return token;
  }

  // Dot-words: `.word`, with `::`-joined parts (`.shared::cta`, `.L2::64B`). A dot followed by a
  // digit starts a decimal float (`.5`).
  if (c == '.') {
    // A dot right after a name (no space) always starts a modifier, even one beginning with a digit
    // (`tex.2d`); elsewhere a dot before a digit starts a decimal float (`.5`).
    const bool after_name = pos_ > 0 && IsFollowChar(text_[pos_ - 1]);
    if (!after_name && pos_ + 1 < text_.size() && IsDigit(text_[pos_ + 1])) return LexNumber();
    ++pos_;
    const size_t word_start = pos_;
    while (pos_ < text_.size()) {
      if (IsFollowChar(text_[pos_])) {
        ++pos_;
      } else if (text_[pos_] == ':' && pos_ + 2 < text_.size() && text_[pos_ + 1] == ':' &&
                 IsFollowChar(text_[pos_ + 2])) {
        pos_ += 2;
      } else {
        break;
      }
    }
    if (pos_ == word_start) return MakeError("'.' not followed by a directive or modifier name");
    token.kind = TokenKind::kDotWord;
    token.text = text_.substr(word_start, pos_ - word_start);
    return token;
  }

  if (IsDigit(c)) return LexNumber();

  if (c == '"') {
    ++pos_;
    const size_t body = pos_;
    while (pos_ < text_.size() && text_[pos_] != '"' && text_[pos_] != '\n') {
      if (text_[pos_] == '\\' && pos_ + 1 < text_.size() && text_[pos_ + 1] != '\n') ++pos_;
      ++pos_;
    }
    if (pos_ >= text_.size() || text_[pos_] != '"') return MakeError("unterminated string");
    token.kind = TokenKind::kString;
    token.text = text_.substr(body, pos_ - body);
    ++pos_;
    return token;
  }

  if (kPunctuation.find(c) != std::string_view::npos) {
    ++pos_;
    token.kind = TokenKind::kPunct;
    token.punct = c;
    token.text = text_.substr(start, 1);
    return token;
  }

  ++pos_;  // always make progress, even on garbage
  if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
    return MakeError("unexpected non-printable or non-ASCII character");
  }
  return MakeError("unexpected character");
}

Token Lexer::LexNumber() {
  Token token;
  token.line = line_;
  const size_t start = pos_;
  auto rest = [&](size_t i) { return i < text_.size() ? text_[i] : '\0'; };

  // Hexadecimal float bit patterns: 0fXXXXXXXX (f32) and 0dXXXXXXXXXXXXXXXX (f64).
  if (rest(pos_) == '0' && (rest(pos_ + 1) == 'f' || rest(pos_ + 1) == 'F' ||
                            rest(pos_ + 1) == 'd' || rest(pos_ + 1) == 'D')) {
    const bool is_double = rest(pos_ + 1) == 'd' || rest(pos_ + 1) == 'D';
    const size_t digits = is_double ? 16 : 8;
    size_t i = pos_ + 2;
    uint64_t bits = 0;
    size_t n = 0;
    while (n < digits && IsHexDigit(rest(i))) {
      bits = (bits << 4) | HexValue(rest(i));
      ++i;
      ++n;
    }
    pos_ = i;
    while (pos_ < text_.size() && IsFollowChar(text_[pos_])) ++pos_;
    if (n != digits || pos_ != i) {
      return MakeError(is_double ? "0d literal needs exactly 16 hex digits"
                                 : "0f literal needs exactly 8 hex digits");
    }
    token.kind = TokenKind::kFloat;
    token.float_kind = is_double ? ImmKind::kF64 : ImmKind::kF32;
    token.float_bits = bits;
    token.text = text_.substr(start, pos_ - start);
    return token;
  }

  // Find the extent: digits/letters/dots, and a sign right after an exponent 'e' of a decimal
  // float.
  size_t end = pos_;
  bool has_dot = false, has_exp = false;
  const bool is_prefixed = rest(pos_) == '0' && (rest(pos_ + 1) == 'x' || rest(pos_ + 1) == 'X' ||
                                                 rest(pos_ + 1) == 'b' || rest(pos_ + 1) == 'B');
  while (end < text_.size()) {
    char ch = text_[end];
    if (IsFollowChar(ch)) {
      if (!is_prefixed && (ch == 'e' || ch == 'E')) {
        has_exp = true;
        if (rest(end + 1) == '+' || rest(end + 1) == '-') ++end;
      }
      ++end;
    } else if (ch == '.' && !is_prefixed) {
      has_dot = true;
      ++end;
    } else {
      break;
    }
  }
  std::string_view lexeme = text_.substr(start, end - start);
  pos_ = end;
  token.text = lexeme;

  if (has_dot || has_exp) {
    double value = 0;
    auto result = std::from_chars(lexeme.data(), lexeme.data() + lexeme.size(), value);
    if (result.ec != std::errc() || result.ptr != lexeme.data() + lexeme.size()) {
      return MakeError("malformed floating-point literal");
    }
    token.kind = TokenKind::kFloat;
    token.float_kind = ImmKind::kF64;
    token.float_bits = std::bit_cast<uint64_t>(value);
    return token;
  }

  std::string_view digits = lexeme;
  if (!digits.empty() && (digits.back() == 'U' || digits.back() == 'u')) {
    token.unsigned_suffix = true;
    digits.remove_suffix(1);
  }
  int base = 10;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    base = 16;
    digits.remove_prefix(2);
  } else if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'b' || digits[1] == 'B')) {
    base = 2;
    digits.remove_prefix(2);
  } else if (digits.size() > 1 && digits[0] == '0') {
    base = 8;
    digits.remove_prefix(1);
  }
  uint64_t value = 0;
  auto result = std::from_chars(digits.data(), digits.data() + digits.size(), value, base);
  if (digits.empty() || result.ptr != digits.data() + digits.size()) {
    return MakeError("malformed integer literal");
  }
  if (result.ec == std::errc::result_out_of_range) return MakeError("integer literal out of range");
  if (result.ec != std::errc()) return MakeError("malformed integer literal");
  token.kind = TokenKind::kInteger;
  token.int_value = value;
  return token;
}

}  // namespace gpuvm::ptx
