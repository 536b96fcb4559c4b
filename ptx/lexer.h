// The PTX lexer: turns PTX text into tokens on demand (one token of lookahead), tracking line
// numbers. Internal to the PTX front end (ptx/parser_impl.h); the AST (ptx/ast.h) is the public
// contract.
//
// Tokens: identifiers (`add`, `%r1`, `$L__BB0_1`, `_Z3fooi`), dot-words (`.reg`, `.u32`,
// `.L2::64B`; the text excludes the dot), integers (decimal, 0x hex, 0 octal, 0b binary, optional U
// suffix), floating literals (0fXXXXXXXX, 0dXXXXXXXXXXXXXXXX, decimal 1.5e3), strings ("..."),
// single-character punctuation. The predefined identifier WARP_SZ lexes as the integer 32. Comments
// (// and /* */) and whitespace are skipped. A malformed token becomes a kError token whose text is
// the reason; the lexer never reads past the end of its input.
//
// Threading: one lexer per parse; not shared.
#ifndef GPUVM_PTX_LEXER_H_
#define GPUVM_PTX_LEXER_H_

#include <cstdint>
#include <string_view>

#include "ptx/ast.h"

namespace gpuvm::ptx {

enum class TokenKind : uint8_t {
  kEnd,
  kError,       // text: what is wrong
  kIdentifier,  // text: the name
  kDotWord,     // text: the word after the dot
  kInteger,  // int_value (the magnitude as written; a leading '-' is a separate punctuation token)
  kFloat,    // float_kind + float_bits (see ImmKind in ptx/ast.h)
  kString,   // text: the contents without quotes (escapes are not interpreted)
  kPunct,    // punct: one of , ; : { } [ ] ( ) + - ! @ | < > = ~ * / & ^ %
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string_view text;  // the source text of the token (for kError: the message)
  uint32_t line = 0;
  char punct = 0;
  uint64_t int_value = 0;
  ImmKind float_kind = ImmKind::kNone;
  uint64_t float_bits = 0;
  bool unsigned_suffix = false;  // integer written with a U suffix

  bool Is(char c) const { return kind == TokenKind::kPunct && punct == c; }
  bool IsDotWord(std::string_view word) const {
    return kind == TokenKind::kDotWord && text == word;
  }
};

class Lexer {
 public:
  explicit Lexer(std::string_view text);

  const Token& Peek() const { return current_; }
  Token Next();
  // Discards every remaining token on `line` (for .loc/.file, which end at a newline instead of
  // ';').
  void SkipRestOfLine(uint32_t line);

 private:
  Token Lex();
  void SkipSpaceAndComments(Token* error);
  Token LexNumber();
  Token MakeError(std::string_view message) const;

  std::string_view text_;
  size_t pos_ = 0;
  uint32_t line_ = 1;
  Token current_;
};

}  // namespace gpuvm::ptx

#endif  // GPUVM_PTX_LEXER_H_
