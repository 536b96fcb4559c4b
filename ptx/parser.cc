// The PTX parser (ptx/parser.h), part 1: the token and error helpers every part uses, the
// module-level directives (.version, .target, .address_size, declarations at module scope), the
// whole-module checks, and ParseModule. The class is in parser_impl.h; the other parts are
// parser_variables.cc, parser_functions.cc and parser_instructions.cc.
#include "ptx/parser.h"

#include <charconv>
#include <string>
#include <utility>

#include "ptx/instruction_set.h"
#include "ptx/parser_impl.h"

namespace gpuvm::ptx {
namespace parser_internal {

Result<Module> Parser::Run() {
  Status status = ParseTopLevel();
  if (!status.ok()) return status;
  status = FinishModule();
  if (!status.ok()) return status;
  return std::move(module_);
}

// -------------------------------------------------------------------------------------------------
// Tokens and errors

Status Parser::Next(Token* out) {
  *out = lex_.Next();
  return CheckToken(*out);
}

Status Parser::Skip() {
  Token t;
  return Next(&t);
}

Status Parser::CheckToken(const Token& t) {
  if (t.kind == TokenKind::kError) return Error(t.line, std::string(t.text));
  if ((t.kind == TokenKind::kIdentifier || t.kind == TokenKind::kDotWord ||
       t.kind == TokenKind::kString) &&
      t.text.size() > limits_.max_identifier_length) {
    return Status::ResourceExhausted(Where(t.line) + "name or string longer than " +
                                     std::to_string(limits_.max_identifier_length) + " characters");
  }
  return Status::Ok();
}

std::string Parser::Where(uint32_t line) const {
  if (fn_ != nullptr) return DescribeLocation(*fn_, line);
  return "line " + std::to_string(line) + ": ";
}

Status Parser::Error(uint32_t line, std::string message) const {
  return Status::InvalidArgument(Where(line) + message);
}

Status Parser::Unsupported(uint32_t line, std::string message) const {
  return Status::Unimplemented(Where(line) + message);
}

Status Parser::Exhausted(uint32_t line, std::string message) const {
  return Status::ResourceExhausted(Where(line) + message);
}

std::string Parser::Describe(const Token& t) {
  switch (t.kind) {
    case TokenKind::kEnd:
      return "end of input";
    case TokenKind::kDotWord:
      return "'." + std::string(t.text) + "'";
    case TokenKind::kString:
      return "a string";
    default:
      return "'" + std::string(t.text) + "'";
  }
}

Status Parser::Expect(char punct, std::string_view context) {
  const Token& t = Peek();
  if (!t.Is(punct)) {
    if (t.kind == TokenKind::kError) return Error(t.line, std::string(t.text));
    return Error(t.line, "expected '" + std::string(1, punct) + "' " + std::string(context) +
                             ", found " + Describe(t));
  }
  return Skip();
}

Status Parser::ExpectIdentifier(std::string_view context, Token* out) {
  GPUVM_RETURN_IF_ERROR(Next(out));
  if (out->kind != TokenKind::kIdentifier) {
    return Error(out->line, "expected " + std::string(context) + ", found " + Describe(*out));
  }
  return Status::Ok();
}

Status Parser::ExpectUint32(std::string_view context, uint32_t* out) {
  Token t;
  GPUVM_RETURN_IF_ERROR(Next(&t));
  if (t.kind != TokenKind::kInteger) {
    return Error(t.line, "expected " + std::string(context) + ", found " + Describe(t));
  }
  if (t.int_value > 0xffffffffu) return Error(t.line, std::string(context) + " is too large");
  *out = static_cast<uint32_t>(t.int_value);
  return Status::Ok();
}

// -------------------------------------------------------------------------------------------------
// Module level

Status Parser::ParseTopLevel() {
  while (Peek().kind != TokenKind::kEnd) {
    Token t;
    GPUVM_RETURN_IF_ERROR(Next(&t));
    if (t.kind != TokenKind::kDotWord) {
      return Error(t.line, "expected a directive at module scope, found " + Describe(t));
    }
    const std::string_view word = t.text;
    if (word == "version") {
      GPUVM_RETURN_IF_ERROR(ParseVersion(t));
    } else if (word == "target") {
      GPUVM_RETURN_IF_ERROR(ParseTarget(t));
    } else if (word == "address_size") {
      uint32_t size = 0;
      GPUVM_RETURN_IF_ERROR(ExpectUint32("an address size", &size));
      if (size != 64) return Unsupported(t.line, "only .address_size 64 is supported");
      seen_address_size_ = true;
    } else if (word == "file" || word == "loc") {
      lex_.SkipRestOfLine(t.line);
    } else if (word == "section") {
      GPUVM_RETURN_IF_ERROR(SkipSection(t));
    } else if (word == "pragma") {
      GPUVM_RETURN_IF_ERROR(SkipPragma());
    } else {
      GPUVM_RETURN_IF_ERROR(RequireHeader(t));
      GPUVM_RETURN_IF_ERROR(ParseModuleDeclaration(t));
    }
  }
  // A module without declarations still needs its whole header (the printer writes it back).
  return RequireHeader(Peek());
}

Status Parser::RequireHeader(const Token& t) {
  if (!seen_version_) return Error(t.line, "missing .version (it must come first)");
  if (!seen_target_) return Error(t.line, "missing .target (it must precede declarations)");
  if (!seen_address_size_) {
    return Unsupported(t.line, "32-bit PTX is not supported (no .address_size 64)");
  }
  return Status::Ok();
}

Status Parser::ParseVersion(const Token& directive) {
  if (seen_version_) return Error(directive.line, "duplicate .version");
  Token t;
  GPUVM_RETURN_IF_ERROR(Next(&t));
  // "9.0" lexes as a float; read the digits from its text.
  std::string_view text = t.text;
  size_t dot = text.find('.');
  uint32_t major = 0, minor = 0;
  auto parse = [](std::string_view s, uint32_t* v) {
    if (s.empty() || s.size() > 3) return false;
    auto r = std::from_chars(s.data(), s.data() + s.size(), *v);
    return r.ec == std::errc() && r.ptr == s.data() + s.size();
  };
  if (t.kind != TokenKind::kFloat || dot == std::string_view::npos ||
      !parse(text.substr(0, dot), &major) || !parse(text.substr(dot + 1), &minor)) {
    return Error(t.line, "expected a version like 9.0 after .version");
  }
  if (major > 9) {
    return Unsupported(t.line,
                       "PTX ISA version " + std::string(text) + " is newer than the supported 9.x");
  }
  module_.version_major = major;
  module_.version_minor = minor;
  seen_version_ = true;
  return Status::Ok();
}

Status Parser::ParseTarget(const Token& directive) {
  if (!seen_version_) return Error(directive.line, "expected .version before .target");
  if (seen_target_) return Error(directive.line, "duplicate .target");
  while (true) {
    Token t;
    GPUVM_RETURN_IF_ERROR(ExpectIdentifier("a target name", &t));
    std::string_view name = t.text;
    if (name.starts_with("sm_")) {
      if (!module_.target.empty()) return Error(t.line, "more than one sm_ target");
      std::string_view digits = name.substr(3);
      if (!digits.empty() && (digits.back() == 'a' || digits.back() == 'f')) {
        digits.remove_suffix(1);
      }
      uint32_t sm = 0;
      auto r = std::from_chars(digits.data(), digits.data() + digits.size(), sm);
      if (digits.empty() || digits.size() > 4 || r.ec != std::errc() ||
          r.ptr != digits.data() + digits.size()) {
        return Error(t.line, "malformed target '" + std::string(name) + "'");
      }
      if (sm < 20) return Unsupported(t.line, "target " + std::string(name) + " is too old");
      module_.target = std::string(name);
      module_.sm_version = sm;
    } else if (name == "map_f64_to_f32") {
      return Unsupported(t.line, "target option map_f64_to_f32 is not supported");
    } else if (name != "texmode_unified" && name != "texmode_independent" && name != "debug") {
      return Error(t.line, "unknown target '" + std::string(name) + "'");
    }
    if (!Peek().Is(',')) break;
    GPUVM_RETURN_IF_ERROR(Skip());
  }
  if (module_.target.empty()) return Error(directive.line, ".target names no sm_ architecture");
  seen_target_ = true;
  return Status::Ok();
}

Status Parser::SkipSection(const Token& directive) {
  while (!Peek().Is('{')) {
    if (Peek().kind == TokenKind::kEnd) return Error(directive.line, "unterminated .section");
    GPUVM_RETURN_IF_ERROR(Skip());
  }
  uint64_t depth = 0;
  do {
    Token t;
    GPUVM_RETURN_IF_ERROR(Next(&t));
    if (t.kind == TokenKind::kEnd) return Error(directive.line, "unterminated .section");
    if (t.Is('{')) ++depth;
    if (t.Is('}')) --depth;
  } while (depth > 0);
  return Status::Ok();
}

Status Parser::SkipPragma() {
  while (true) {
    Token t;
    GPUVM_RETURN_IF_ERROR(Next(&t));
    if (t.kind != TokenKind::kString) return Error(t.line, "expected a string after .pragma");
    if (!Peek().Is(',')) break;
    GPUVM_RETURN_IF_ERROR(Skip());
  }
  return Expect(';', "after .pragma");
}

Status Parser::ParseModuleDeclaration(const Token& first) {
  Token t = first;
  Linkage linkage = Linkage::kNone;
  if (t.text == "visible" || t.text == "extern" || t.text == "weak" || t.text == "common") {
    linkage = t.text == "visible"  ? Linkage::kVisible
              : t.text == "extern" ? Linkage::kExtern
              : t.text == "weak"   ? Linkage::kWeak
                                   : Linkage::kCommon;
    GPUVM_RETURN_IF_ERROR(Next(&t));
    if (t.kind != TokenKind::kDotWord) {
      return Error(t.line, "expected a declaration after a linkage directive");
    }
  }
  const std::string_view word = t.text;
  if (word == "entry" || word == "func") return ParseFunction(t, word == "entry", linkage);
  if (word == "global" || word == "shared" || word == "const") {
    if (linkage == Linkage::kExtern && word != "shared") {
      return Unsupported(
          t.line, "external ." + std::string(word) + " variables are not supported (no linker)");
    }
    StateSpace space = word == "global"   ? StateSpace::kGlobal
                       : word == "shared" ? StateSpace::kShared
                                          : StateSpace::kConst;
    return ParseVariables(t, space, linkage, /*in_function=*/false);
  }
  if (word == "tex" || word == "surf" || word == "sampler" || word == "texref" ||
      word == "samplerref" || word == "surfref") {
    return Unsupported(t.line,
                       "textures and surfaces (." + std::string(word) + ") are not supported");
  }
  if (word == "local") {
    return Unsupported(t.line, "module-scope .local variables are not supported");
  }
  return Error(t.line, "unexpected directive '." + std::string(word) + "' at module scope");
}

// -------------------------------------------------------------------------------------------------
// Whole-module checks

Status Parser::FinishModule() {
  for (const Function& f : module_.functions) {
    for (const Instruction& inst : f.body) {
      if (inst.opcode != Opcode::kCall) continue;
      const Function& callee = module_.functions[inst.callee];
      // The external functions the JIT understands are CUDA's device runtime's assert handler
      // (a trap with the assert reason) and vprintf (device printf); docs/JIT.md.
      if (!callee.has_body && callee.name != "__assertfail" && callee.name != "vprintf") {
        return Status::Unimplemented(
            DescribeLocation(f, inst.line) + "instruction '" + InstructionMnemonic(inst) +
            "': calls '" + callee.name +
            "', which is declared but not defined in this module (external functions such as "
            "malloc are not supported; vprintf and __assertfail are)");
      }
    }
  }
  return Status::Ok();
}

}  // namespace parser_internal

Result<Module> ParseModule(std::string_view text, const ParseLimits& limits) {
  if (text.size() > limits.max_module_bytes) {
    return Status::ResourceExhausted("PTX module of " + std::to_string(text.size()) +
                                     " bytes exceeds the limit of " +
                                     std::to_string(limits.max_module_bytes));
  }
  parser_internal::Parser parser(text, limits);
  return parser.Run();
}

}  // namespace gpuvm::ptx
