#include "ptx/parser.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ptx/instruction_set.h"
#include "ptx/lexer.h"

namespace gpuvm::ptx {
namespace {

// A name visible in a scope: a register, or a variable (Symbol).
struct Entity {
  bool is_register = false;
  RegId reg = kNoReg;
  Symbol symbol;
};

// `%r<N>` declares %r0 .. %r(N-1): stored as one range instead of N names.
struct RegisterRange {
  RegId first = 0;
  uint32_t count = 0;
};

// One `{ }` level of a function body (the outermost holds the parameters).
struct Scope {
  std::unordered_map<std::string_view, Entity> names;
  std::unordered_map<std::string_view, RegisterRange> ranges;  // by prefix ("%r")
  // For each prefix, the smallest N of an exactly-declared name "<prefix>N", to catch a range that
  // overlaps names declared before it.
  std::unordered_map<std::string_view, uint64_t> min_numbered;
};

// Splits "%rd12" into ("%rd", 12). False when the name does not end in a canonical number (no
// leading zero, at most 9 digits).
bool SplitNumbered(std::string_view name, std::string_view* prefix, uint64_t* number) {
  size_t digits = 0;
  while (digits < name.size() && name[name.size() - 1 - digits] >= '0' &&
         name[name.size() - 1 - digits] <= '9') {
    ++digits;
  }
  if (digits == 0 || digits == name.size() || digits > 9) return false;
  std::string_view tail = name.substr(name.size() - digits);
  if (tail.size() > 1 && tail[0] == '0') return false;
  uint64_t value = 0;
  for (char c : tail) value = value * 10 + static_cast<uint64_t>(c - '0');
  *prefix = name.substr(0, name.size() - digits);
  *number = value;
  return true;
}

SpecialRegister LookupSpecial(std::string_view name) {
  static const auto* table = [] {
    auto* map = new std::unordered_map<std::string_view, SpecialRegister>();
    for (int i = 1; i <= static_cast<int>(SpecialRegister::kTotalSmemSize); ++i) {
      auto sreg = static_cast<SpecialRegister>(i);
      (*map)[SpecialRegisterName(sreg)] = sreg;
    }
    return map;
  }();
  auto it = table->find(name);
  return it == table->end() ? SpecialRegister::kNone : it->second;
}

bool IsPowerOfTwo(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

class Parser {
 public:
  Parser(std::string_view text, const ParseLimits& limits) : lex_(text), limits_(limits) {}

  Result<Module> Run() {
    Status status = ParseTopLevel();
    if (!status.ok()) return status;
    status = FinishModule();
    if (!status.ok()) return status;
    return std::move(module_);
  }

 private:
  // ----------------------------------------------------------------------------------------------
  // Tokens and errors

  const Token& Peek() const { return lex_.Peek(); }

  Status Next(Token* out) {
    *out = lex_.Next();
    return CheckToken(*out);
  }
  Status Skip() {
    Token t;
    return Next(&t);
  }
  Status CheckToken(const Token& t) {
    if (t.kind == TokenKind::kError) return Error(t.line, std::string(t.text));
    if ((t.kind == TokenKind::kIdentifier || t.kind == TokenKind::kDotWord ||
         t.kind == TokenKind::kString) &&
        t.text.size() > limits_.max_identifier_length) {
      return Status::ResourceExhausted(Where(t.line) + "name or string longer than " +
                                       std::to_string(limits_.max_identifier_length) +
                                       " characters");
    }
    return Status::Ok();
  }

  std::string Where(uint32_t line) const {
    if (fn_ != nullptr) return DescribeLocation(*fn_, line);
    return "line " + std::to_string(line) + ": ";
  }
  Status Error(uint32_t line, std::string message) const {
    return Status::InvalidArgument(Where(line) + message);
  }
  Status Unsupported(uint32_t line, std::string message) const {
    return Status::Unimplemented(Where(line) + message);
  }
  Status Exhausted(uint32_t line, std::string message) const {
    return Status::ResourceExhausted(Where(line) + message);
  }
  static std::string Describe(const Token& t) {
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
  Status Expect(char punct, std::string_view context) {
    const Token& t = Peek();
    if (!t.Is(punct)) {
      if (t.kind == TokenKind::kError) return Error(t.line, std::string(t.text));
      return Error(t.line, "expected '" + std::string(1, punct) + "' " + std::string(context) +
                               ", found " + Describe(t));
    }
    return Skip();
  }
  Status ExpectIdentifier(std::string_view context, Token* out) {
    GPUVM_RETURN_IF_ERROR(Next(out));
    if (out->kind != TokenKind::kIdentifier) {
      return Error(out->line, "expected " + std::string(context) + ", found " + Describe(*out));
    }
    return Status::Ok();
  }
  // A non-negative integer that fits in 32 bits (sizes, counts, alignments).
  Status ExpectUint32(std::string_view context, uint32_t* out) {
    Token t;
    GPUVM_RETURN_IF_ERROR(Next(&t));
    if (t.kind != TokenKind::kInteger) {
      return Error(t.line, "expected " + std::string(context) + ", found " + Describe(t));
    }
    if (t.int_value > 0xffffffffu) return Error(t.line, std::string(context) + " is too large");
    *out = static_cast<uint32_t>(t.int_value);
    return Status::Ok();
  }

  // ----------------------------------------------------------------------------------------------
  // Module level

  Status ParseTopLevel() {
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

  Status RequireHeader(const Token& t) {
    if (!seen_version_) return Error(t.line, "missing .version (it must come first)");
    if (!seen_target_) return Error(t.line, "missing .target (it must precede declarations)");
    if (!seen_address_size_) {
      return Unsupported(t.line, "32-bit PTX is not supported (no .address_size 64)");
    }
    return Status::Ok();
  }

  Status ParseVersion(const Token& directive) {
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
      return Unsupported(
          t.line, "PTX ISA version " + std::string(text) + " is newer than the supported 9.x");
    }
    module_.version_major = major;
    module_.version_minor = minor;
    seen_version_ = true;
    return Status::Ok();
  }

  Status ParseTarget(const Token& directive) {
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

  // `.section name { ... }` (DWARF from nvcc -G): skipped, braces balanced.
  Status SkipSection(const Token& directive) {
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

  // `.pragma "a", "b";`
  Status SkipPragma() {
    while (true) {
      Token t;
      GPUVM_RETURN_IF_ERROR(Next(&t));
      if (t.kind != TokenKind::kString) return Error(t.line, "expected a string after .pragma");
      if (!Peek().Is(',')) break;
      GPUVM_RETURN_IF_ERROR(Skip());
    }
    return Expect(';', "after .pragma");
  }

  Status ParseModuleDeclaration(const Token& first) {
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

  // ----------------------------------------------------------------------------------------------
  // Variables

  struct DeclAttributes {
    ScalarType type = ScalarType::kNone;
    uint32_t vector = 1;
    uint32_t align = 0;
    StateSpace ptr_space = StateSpace::kNone;
    uint32_t ptr_align = 0;
    bool ptr = false;
  };

  // The dot-words between the state space and the name: .align N, .v2/.v4, the type, and for
  // parameters
  // `.ptr [.space] [.align N]`.
  Status ParseAttributes(const Token& start, bool is_param, DeclAttributes* out) {
    while (Peek().kind == TokenKind::kDotWord) {
      Token t;
      GPUVM_RETURN_IF_ERROR(Next(&t));
      const std::string_view w = t.text;
      if (w == "align") {
        uint32_t align = 0;
        GPUVM_RETURN_IF_ERROR(ExpectUint32("an alignment", &align));
        if (!IsPowerOfTwo(align) || align > 4096) {
          return Error(t.line, "alignment must be a power of two up to 4096");
        }
        (out->ptr ? out->ptr_align : out->align) = align;
      } else if (w == "v2" || w == "v4" || w == "v8") {
        if (w == "v8") return Unsupported(t.line, ".v8 variables are not supported");
        if (out->vector != 1) return Error(t.line, "duplicate vector attribute");
        out->vector = w == "v2" ? 2 : 4;
      } else if (w == "ptr" && is_param) {
        if (out->ptr) return Error(t.line, "duplicate .ptr");
        out->ptr = true;
      } else if (out->ptr && (w == "global" || w == "shared" || w == "const" || w == "local")) {
        out->ptr_space = w == "global"   ? StateSpace::kGlobal
                         : w == "shared" ? StateSpace::kShared
                         : w == "const"  ? StateSpace::kConst
                                         : StateSpace::kLocal;
      } else {
        ScalarType type = ParseTypeWord(w);
        if (type == ScalarType::kNone) {
          return Error(t.line, "unexpected '." + std::string(w) + "' in a declaration");
        }
        if (out->type != ScalarType::kNone)
          return Error(t.line, "more than one type in a declaration");
        out->type = type;
      }
    }
    if (out->type == ScalarType::kNone) return Error(start.line, "declaration without a type");
    if (out->type == ScalarType::kB128) return Unsupported(start.line, ".b128 is not supported");
    return Status::Ok();
  }

  static ScalarType ParseTypeWord(std::string_view w) {
    static const auto* table = [] {
      auto* map = new std::unordered_map<std::string_view, ScalarType>();
      for (int i = 1; i <= static_cast<int>(ScalarType::kF64); ++i) {
        auto type = static_cast<ScalarType>(i);
        (*map)[TypeName(type)] = type;
      }
      return map;
    }();
    auto it = table->find(w);
    return it == table->end() ? ScalarType::kNone : it->second;
  }

  Status CountVariable(uint32_t line) {
    if (++total_variables_ > limits_.max_variables) {
      return Exhausted(line, "more than " + std::to_string(limits_.max_variables) + " variables");
    }
    return Status::Ok();
  }

  // `[N][M]` or `[]` after a name.
  Status ParseDims(Variable* var) {
    while (Peek().Is('[')) {
      Token open;
      GPUVM_RETURN_IF_ERROR(Next(&open));
      if (var->dims.size() >= 8) return Error(open.line, "more than 8 array dimensions");
      if (Peek().Is(']')) {
        if (!var->dims.empty() || var->unsized) {
          return Error(open.line, "only the first array dimension may be left out");
        }
        var->unsized = true;
        var->dims.push_back(0);
      } else {
        Token n;
        GPUVM_RETURN_IF_ERROR(Next(&n));
        if (n.kind != TokenKind::kInteger || n.int_value == 0) {
          return Error(n.line, "expected a positive array size");
        }
        var->dims.push_back(n.int_value);
      }
      GPUVM_RETURN_IF_ERROR(Expect(']', "after an array size"));
    }
    return Status::Ok();
  }

  // Computes elements and checks the size limit (unsized arrays count their known dimensions).
  Status SizeVariable(uint32_t line, Variable* var) {
    uint64_t elements = 1;
    for (uint64_t d : var->dims) {
      if (d == 0) continue;
      if (elements > limits_.max_variable_bytes / d) {
        return Exhausted(line, "variable '" + var->name + "' is too large");
      }
      elements *= d;
    }
    if (elements > limits_.max_variable_bytes / std::max<uint32_t>(1, var->ElementSize())) {
      return Exhausted(line, "variable '" + var->name + "' is too large");
    }
    var->elements = var->unsized ? 0 : elements;
    return Status::Ok();
  }

  // Variables of .global/.shared/.const (module or function scope), .local and .param (function
  // scope).
  Status ParseVariables(const Token& directive, StateSpace space, Linkage linkage,
                        bool in_function) {
    DeclAttributes attrs;
    GPUVM_RETURN_IF_ERROR(ParseAttributes(directive, /*is_param=*/false, &attrs));
    if (attrs.type == ScalarType::kPred) return Error(directive.line, "a variable cannot be .pred");
    while (true) {
      Token name;
      GPUVM_RETURN_IF_ERROR(ExpectIdentifier("a variable name", &name));
      Variable var;
      var.name = std::string(name.text);
      var.space = space;
      var.type = attrs.type;
      var.vector = attrs.vector;
      var.align = attrs.align;
      var.linkage = linkage;
      var.line = name.line;
      GPUVM_RETURN_IF_ERROR(ParseDims(&var));
      GPUVM_RETURN_IF_ERROR(SizeVariable(name.line, &var));
      if (Peek().Is('=')) {
        GPUVM_RETURN_IF_ERROR(Skip());
        if (space == StateSpace::kShared || space == StateSpace::kLocal ||
            space == StateSpace::kParam) {
          return Error(name.line, "." + std::string(StateSpaceName(space)) +
                                      " variables cannot have initializers");
        }
        GPUVM_RETURN_IF_ERROR(ParseInitializer(&var));
      }
      if (var.unsized) {
        if (!(linkage == Linkage::kExtern && space == StateSpace::kShared)) {
          return Error(name.line, "array '" + var.name + "' needs a size");
        }
        if (var.dims.size() > 1) {
          return Unsupported(name.line,
                             "multi-dimensional .extern .shared arrays are not supported");
        }
      }
      GPUVM_RETURN_IF_ERROR(CountVariable(name.line));
      if (in_function) {
        GPUVM_RETURN_IF_ERROR(DeclareLocal(name, std::move(var)));
      } else {
        GPUVM_RETURN_IF_ERROR(DeclareGlobal(name, std::move(var)));
      }
      if (!Peek().Is(',')) break;
      GPUVM_RETURN_IF_ERROR(Skip());
    }
    return Expect(';', "after a declaration");
  }

  Status DeclareGlobal(const Token& name, Variable var) {
    if (module_names_.contains(name.text)) {
      return Error(name.line, "duplicate name '" + std::string(name.text) + "'");
    }
    Symbol symbol{Symbol::Kind::kGlobal, static_cast<uint32_t>(module_.globals.size())};
    module_names_[name.text] = symbol;
    module_.globals.push_back(std::move(var));
    return Status::Ok();
  }

  Status DeclareLocal(const Token& name, Variable var) {
    GPUVM_RETURN_IF_ERROR(CheckFreeInScope(name));
    Entity e;
    e.symbol = Symbol{Symbol::Kind::kLocal, static_cast<uint32_t>(fn_->locals.size())};
    scopes_.back().names[name.text] = e;
    fn_->locals.push_back(std::move(var));
    return Status::Ok();
  }

  // Initializer: scalars (integers, floats, `name`, `name+N`, `generic(name)`) in braces nested to
  // any depth up to 8, flattened in order.
  // Initializer: scalars (integers, floats, `name`, `name+N`, `generic(name)`), optionally in
  // braces. As in C, a nested brace starts a new row (sub-array or vector element) and a short row
  // is zero-filled: for `.u32 x[2][3]`, `{{1}, {2, 3}}` is 1 0 0 2 3 0.
  Status ParseInitializer(Variable* var) {
    if (var->ElementSize() == 0) return Error(var->line, "initializer for an untyped variable");
    if (IsFloatType(var->type) && TypeSize(var->type) < 4) {
      return Unsupported(var->line, "initializers of half-precision variables are not supported");
    }
    const uint32_t scalar_size = TypeSize(var->type);
    const uint64_t capacity = var->unsized ? UINT64_MAX : var->elements * var->vector;
    // row_size[k]: scalars in one brace at nesting depth k + 2 (depth 1 is the whole variable).
    std::vector<uint64_t> row_size;
    {
      uint64_t size = var->vector;
      std::vector<uint64_t> inner;
      if (var->vector > 1) inner.push_back(size);
      for (size_t d = var->dims.size(); d-- > 1;) {
        size *= var->dims[d];
        inner.push_back(size);
      }
      row_size.assign(inner.rbegin(), inner.rend());
    }
    std::vector<uint64_t> row_start;  // start of each open nested brace (depth >= 2)
    uint64_t count = 0;
    int depth = 0;
    bool expect_value = true;
    while (true) {
      const Token& p = Peek();
      if (p.Is('{')) {
        if (!expect_value) return Error(p.line, "expected ',' in initializer");
        if (depth >= 1) {
          if (row_start.size() >= row_size.size()) {
            return Error(p.line, "initializer braces nested deeper than '" + var->name + "'");
          }
          const uint64_t size = row_size[row_start.size()];
          count = (count + size - 1) / size * size;  // a new row starts on a row boundary
          if (count >= capacity) {
            return Error(p.line, "too many initializers for '" + var->name + "'");
          }
          row_start.push_back(count);
        }
        ++depth;
        GPUVM_RETURN_IF_ERROR(Skip());
        continue;
      }
      if (p.Is('}')) {
        if (depth == 0) return Error(p.line, "unbalanced '}' in initializer");
        if (depth >= 2) {
          const uint64_t end = row_start.back() + row_size[row_start.size() - 1];
          if (count > end)
            return Error(p.line, "too many initializers in a brace of '" + var->name + "'");
          count = end;  // zero-fill the rest of the row
          row_start.pop_back();
        }
        --depth;
        GPUVM_RETURN_IF_ERROR(Skip());
        expect_value = false;
        if (depth == 0) break;
        continue;
      }
      if (p.Is(',')) {
        if (expect_value) return Error(p.line, "empty initializer element");
        GPUVM_RETURN_IF_ERROR(Skip());
        expect_value = true;
        continue;
      }
      if (!expect_value) {
        if (depth == 0) break;
        return Error(p.line, "expected ',' or '}' in initializer");
      }
      if (count >= capacity) return Error(p.line, "too many initializers for '" + var->name + "'");
      const uint64_t offset = count * scalar_size;
      GPUVM_RETURN_IF_ERROR(GrowImage(p.line, var, offset + scalar_size));
      GPUVM_RETURN_IF_ERROR(ParseInitElement(var, offset));
      ++count;
      expect_value = false;
      if (depth == 0) break;
    }
    if (var->unsized) {
      // `x[][4] = {...}`: the first dimension is the number of rows the scalars fill.
      uint64_t per_row = var->vector;
      for (size_t d = 1; d < var->dims.size(); ++d) per_row *= var->dims[d];
      const uint64_t rows = (count + per_row - 1) / per_row;
      if (rows == 0) return Error(var->line, "empty initializer for an unsized array");
      if (rows > limits_.max_variable_bytes / (per_row * scalar_size)) {
        return Exhausted(var->line, "variable '" + var->name + "' is too large");
      }
      var->dims[0] = rows;
      var->unsized = false;
      var->elements = rows * (per_row / var->vector);
      count = rows * per_row;
    }
    // Zero-filled rows at the end belong to the image too (the image may still stop short of the
    // variable's end; the rest is zero by definition).
    return GrowImage(var->line, var, count * scalar_size);
  }

  // Extends a variable's initializer image to `bytes`, within the module's initializer budget.
  Status GrowImage(uint32_t line, Variable* var, uint64_t bytes) {
    if (bytes <= var->init.size()) return Status::Ok();
    const uint64_t more = bytes - var->init.size();
    if (init_bytes_ + more > limits_.max_initializer_bytes) {
      return Exhausted(
          line, "initializers exceed " + std::to_string(limits_.max_initializer_bytes) + " bytes");
    }
    init_bytes_ += more;
    var->init.resize(bytes, 0);
    return Status::Ok();
  }

  Status ParseInitElement(Variable* var, uint64_t offset) {
    const uint32_t size = TypeSize(var->type);
    Token t;
    GPUVM_RETURN_IF_ERROR(Next(&t));
    if (t.kind == TokenKind::kIdentifier) {
      // An address: `x`, `x+N`, `generic(x)`.
      Relocation reloc;
      reloc.offset = offset;
      reloc.size = size;
      Token name = t;
      if (t.text == "generic" && Peek().Is('(')) {
        GPUVM_RETURN_IF_ERROR(Skip());
        GPUVM_RETURN_IF_ERROR(ExpectIdentifier("a variable name", &name));
        GPUVM_RETURN_IF_ERROR(Expect(')', "after generic(name"));
        reloc.generic = true;
      }
      if ((size != 4 && size != 8) || IsFloatType(var->type)) {
        return Error(t.line, "an address initializer needs a 32- or 64-bit integer variable");
      }
      auto it = module_names_.find(name.text);
      if (it == module_names_.end()) {
        return Error(name.line, "undeclared name '" + std::string(name.text) + "' in initializer");
      }
      reloc.is_function = it->second.kind == Symbol::Kind::kFunction;
      reloc.index = it->second.index;
      if (Peek().Is('+') || Peek().Is('-')) {
        int64_t addend = 0;
        GPUVM_RETURN_IF_ERROR(ParseOffset(&addend));
        reloc.addend = addend;
      }
      var->relocations.push_back(reloc);
      return Status::Ok();
    }
    bool negative = false;
    if (t.Is('-')) {
      negative = true;
      GPUVM_RETURN_IF_ERROR(Next(&t));
    }
    Operand value;
    GPUVM_RETURN_IF_ERROR(MakeImmediate(t, negative, &value));
    uint64_t bits = 0;
    if (var->type == ScalarType::kF32) {
      bits = value.imm_kind == ImmKind::kF32 ? value.imm_bits
                                             : std::bit_cast<uint32_t>(value.ImmAsFloat());
    } else if (var->type == ScalarType::kF64) {
      bits = std::bit_cast<uint64_t>(value.ImmAsDouble());
    } else {
      if (value.imm_kind != ImmKind::kInt) {
        if (!(IsBitType(var->type) && ((value.imm_kind == ImmKind::kF32 && size == 4) ||
                                       (value.imm_kind == ImmKind::kF64 && size == 8)))) {
          return Error(t.line, "floating-point initializer for an integer variable");
        }
      } else if (size < 8) {
        const int64_t v = static_cast<int64_t>(value.imm_bits);
        if (v < -(int64_t{1} << (size * 8 - 1)) || v > (int64_t{1} << (size * 8)) - 1) {
          return Error(t.line, "initializer " + std::to_string(v) + " does not fit ." +
                                   std::string(TypeName(var->type)));
        }
      }
      bits = value.imm_bits;
    }
    for (uint32_t i = 0; i < size; ++i)
      var->init[offset + i] = static_cast<uint8_t>(bits >> (8 * i));
    return Status::Ok();
  }

  // An integer or float literal token (after an optional '-') as an immediate operand.
  Status MakeImmediate(const Token& t, bool negative, Operand* out) {
    out->kind = OperandKind::kImmediate;
    if (t.kind == TokenKind::kInteger) {
      out->imm_kind = ImmKind::kInt;
      if (negative) {
        if (t.int_value > (uint64_t{1} << 63)) return Error(t.line, "integer literal out of range");
        out->imm_bits = ~t.int_value + 1;
      } else {
        out->imm_bits = t.int_value;
      }
      return Status::Ok();
    }
    if (t.kind == TokenKind::kFloat) {
      out->imm_kind = t.float_kind;
      out->imm_bits = t.float_bits;
      if (negative)
        out->imm_bits ^= t.float_kind == ImmKind::kF32 ? (uint64_t{1} << 31) : (uint64_t{1} << 63);
      return Status::Ok();
    }
    return Error(t.line, "expected a number, found " + Describe(t));
  }

  // `+N`, `-N` or `+-N` after an address base.
  Status ParseOffset(int64_t* out) {
    bool negative = false;
    Token t;
    GPUVM_RETURN_IF_ERROR(Next(&t));
    if (t.Is('-')) negative = true;
    if (t.Is('+') && Peek().Is('-')) {
      GPUVM_RETURN_IF_ERROR(Skip());
      negative = true;
    }
    Token n;
    GPUVM_RETURN_IF_ERROR(Next(&n));
    if (n.kind != TokenKind::kInteger) return Error(n.line, "expected an integer offset");
    if (n.int_value > (negative ? (uint64_t{1} << 63) : (uint64_t{1} << 63) - 1)) {
      return Error(n.line, "offset out of range");
    }
    *out = negative ? static_cast<int64_t>(~n.int_value + 1) : static_cast<int64_t>(n.int_value);
    return Status::Ok();
  }

  // ----------------------------------------------------------------------------------------------
  // Functions

  Status ParseParams(std::vector<Variable>* out, bool allow_ptr) {
    GPUVM_RETURN_IF_ERROR(Expect('(', "to open a parameter list"));
    if (Peek().Is(')')) return Skip();
    while (true) {
      Token space;
      GPUVM_RETURN_IF_ERROR(Next(&space));
      if (space.IsDotWord("reg")) {
        return Unsupported(space.line, ".reg parameters are not supported (nvcc uses .param)");
      }
      if (!space.IsDotWord("param")) {
        return Error(space.line, "expected .param in a parameter list, found " + Describe(space));
      }
      DeclAttributes attrs;
      GPUVM_RETURN_IF_ERROR(ParseAttributes(space, allow_ptr, &attrs));
      if (attrs.type == ScalarType::kPred) return Error(space.line, "a parameter cannot be .pred");
      Token name;
      GPUVM_RETURN_IF_ERROR(ExpectIdentifier("a parameter name", &name));
      Variable var;
      var.name = std::string(name.text);
      var.space = StateSpace::kParam;
      var.type = attrs.type;
      var.vector = attrs.vector;
      var.align = attrs.align;
      var.ptr_space = attrs.ptr_space;
      var.ptr_align = attrs.ptr_align;
      var.line = name.line;
      GPUVM_RETURN_IF_ERROR(ParseDims(&var));
      if (var.unsized) return Error(name.line, "a parameter needs a size");
      GPUVM_RETURN_IF_ERROR(SizeVariable(name.line, &var));
      GPUVM_RETURN_IF_ERROR(CountVariable(name.line));
      if (out->size() >= limits_.max_operands) {
        return Exhausted(name.line,
                         "more than " + std::to_string(limits_.max_operands) + " parameters");
      }
      out->push_back(std::move(var));
      if (!Peek().Is(',')) break;
      GPUVM_RETURN_IF_ERROR(Skip());
    }
    return Expect(')', "to close a parameter list");
  }

  static bool SameSignature(const std::vector<Variable>& a, const std::vector<Variable>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].SizeBytes() != b[i].SizeBytes()) return false;
    }
    return true;
  }

  Status ParseFunction(const Token& directive, bool is_entry, Linkage linkage) {
    Function f;
    f.is_entry = is_entry;
    f.linkage = linkage;
    f.line = directive.line;
    if (!is_entry && Peek().Is('(')) GPUVM_RETURN_IF_ERROR(ParseParams(&f.returns, false));
    Token name;
    GPUVM_RETURN_IF_ERROR(ExpectIdentifier("a function name", &name));
    f.name = std::string(name.text);
    if (Peek().Is('(')) GPUVM_RETURN_IF_ERROR(ParseParams(&f.params, is_entry));
    GPUVM_RETURN_IF_ERROR(ParsePerformanceDirectives(&f));

    // A prototype followed by the definition shares one Function.
    uint32_t index;
    auto it = module_names_.find(name.text);
    if (it != module_names_.end()) {
      if (it->second.kind != Symbol::Kind::kFunction) {
        return Error(name.line, "duplicate name '" + f.name + "'");
      }
      index = it->second.index;
      Function& prior = module_.functions[index];
      if (prior.is_entry != is_entry || !SameSignature(prior.params, f.params) ||
          !SameSignature(prior.returns, f.returns)) {
        return Error(name.line, "'" + f.name + "' does not match its earlier declaration");
      }
      if (prior.has_body && Peek().Is('{')) {
        return Error(name.line, "'" + f.name + "' is defined twice");
      }
      if (!Peek().Is('{')) return Expect(';', "after a function declaration");
      prior.params = std::move(f.params);
      prior.returns = std::move(f.returns);
      prior.maxntid = f.maxntid;
      prior.reqntid = f.reqntid;
      prior.minnctapersm = f.minnctapersm;
      prior.maxnreg = f.maxnreg;
      prior.noreturn = prior.noreturn || f.noreturn;
      prior.line = f.line;
      if (linkage != Linkage::kNone) prior.linkage = linkage;
    } else {
      if (module_.functions.size() >= limits_.max_functions) {
        return Exhausted(name.line,
                         "more than " + std::to_string(limits_.max_functions) + " functions");
      }
      index = static_cast<uint32_t>(module_.functions.size());
      module_names_[name.text] = Symbol{Symbol::Kind::kFunction, index};
      module_.functions.push_back(std::move(f));
    }
    if (!Peek().Is('{')) {
      if (is_entry) return Error(name.line, "kernel '" + std::string(name.text) + "' has no body");
      return Expect(';', "after a function declaration");
    }
    return ParseBody(index);
  }

  Status ParsePerformanceDirectives(Function* f) {
    while (Peek().kind == TokenKind::kDotWord) {
      Token t;
      GPUVM_RETURN_IF_ERROR(Next(&t));
      const std::string_view w = t.text;
      if (w == "maxntid" || w == "reqntid") {
        std::array<uint32_t, 3>& dims = w == "maxntid" ? f->maxntid : f->reqntid;
        dims = {1, 1, 1};
        for (int i = 0; i < 3; ++i) {
          GPUVM_RETURN_IF_ERROR(ExpectUint32("a thread count", &dims[i]));
          if (dims[i] == 0) return Error(t.line, "thread count must be positive");
          if (!Peek().Is(',')) break;
          if (i == 2) return Error(t.line, "at most three dimensions");
          GPUVM_RETURN_IF_ERROR(Skip());
        }
      } else if (w == "minnctapersm") {
        GPUVM_RETURN_IF_ERROR(ExpectUint32("a block count", &f->minnctapersm));
      } else if (w == "maxnreg") {
        GPUVM_RETURN_IF_ERROR(ExpectUint32("a register count", &f->maxnreg));
      } else if (w == "noreturn" && !f->is_entry) {
        f->noreturn = true;
      } else if (w == "pragma") {
        GPUVM_RETURN_IF_ERROR(SkipPragma());
      } else if (w == "maxclusterrank" || w == "reqnctapercluster" || w == "explicitcluster") {
        return Unsupported(t.line,
                           "cluster directives (." + std::string(w) + ") are not supported");
      } else {
        return Error(t.line, "unexpected '." + std::string(w) + "' in a function header");
      }
    }
    return Status::Ok();
  }

  // ----------------------------------------------------------------------------------------------
  // Function bodies

  Status ParseBody(uint32_t index) {
    fn_ = &module_.functions[index];
    fn_->has_body = true;
    fn_->registers.clear();
    fn_->locals.clear();
    fn_->labels.clear();
    fn_->body.clear();
    labels_.clear();
    label_defined_.clear();
    label_uses_.clear();
    scopes_.clear();
    // Scope 0: the parameters.
    scopes_.emplace_back();
    for (uint32_t i = 0; i < fn_->params.size(); ++i) {
      GPUVM_RETURN_IF_ERROR(DeclareParam(fn_->params[i], Symbol{Symbol::Kind::kParam, i}));
    }
    for (uint32_t i = 0; i < fn_->returns.size(); ++i) {
      GPUVM_RETURN_IF_ERROR(DeclareParam(fn_->returns[i], Symbol{Symbol::Kind::kReturn, i}));
    }
    Token open;
    GPUVM_RETURN_IF_ERROR(Next(&open));  // '{'
    scopes_.emplace_back();
    while (scopes_.size() > 1) {
      GPUVM_RETURN_IF_ERROR(ParseStatement());
    }
    // Labels referenced but never placed.
    for (size_t i = 0; i < fn_->labels.size(); ++i) {
      if (!label_defined_[i]) {
        return Error(label_uses_[i], "undefined label '" + fn_->labels[i].name + "'");
      }
    }
    fn_ = nullptr;
    return Status::Ok();
  }

  Status DeclareParam(const Variable& var, Symbol symbol) {
    // Names of the function's own params live in text_ via the Variable's string: keep a stable
    // view.
    std::string_view name = var.name;
    Scope& scope = scopes_.back();
    if (scope.names.contains(name)) {
      return Error(var.line, "duplicate parameter '" + var.name + "'");
    }
    Entity e;
    e.symbol = symbol;
    scope.names[name] = e;
    return Status::Ok();
  }

  Status ParseStatement() {
    const Token& p = Peek();
    if (p.kind == TokenKind::kEnd)
      return Error(p.line, "unexpected end of input in a function body");
    if (p.Is('{')) {
      if (scopes_.size() - 1 >= limits_.max_block_nesting) {
        return Exhausted(p.line,
                         "blocks nested deeper than " + std::to_string(limits_.max_block_nesting));
      }
      scopes_.emplace_back();
      return Skip();
    }
    if (p.Is('}')) {
      scopes_.pop_back();
      return Skip();
    }
    if (p.kind == TokenKind::kDotWord) {
      Token t;
      GPUVM_RETURN_IF_ERROR(Next(&t));
      const std::string_view w = t.text;
      if (w == "reg") return ParseRegisters(t);
      if (w == "local") return ParseVariables(t, StateSpace::kLocal, Linkage::kNone, true);
      if (w == "shared") return ParseVariables(t, StateSpace::kShared, Linkage::kNone, true);
      if (w == "param") return ParseVariables(t, StateSpace::kParam, Linkage::kNone, true);
      if (w == "const") return ParseVariables(t, StateSpace::kConst, Linkage::kNone, true);
      if (w == "global") return ParseVariables(t, StateSpace::kGlobal, Linkage::kNone, true);
      if (w == "pragma") return SkipPragma();
      if (w == "loc" || w == "file") {
        lex_.SkipRestOfLine(t.line);
        return Status::Ok();
      }
      return Error(t.line, "unexpected directive '." + std::string(w) + "' in a function body");
    }
    Guard guard;
    if (p.Is('@')) {
      GPUVM_RETURN_IF_ERROR(Skip());
      if (Peek().Is('!')) {
        GPUVM_RETURN_IF_ERROR(Skip());
        guard.negated = true;
      }
      Token reg;
      GPUVM_RETURN_IF_ERROR(ExpectIdentifier("a predicate register after '@'", &reg));
      const Entity* e = Lookup(reg.text);
      if (e == nullptr || !e->is_register) {
        return Error(reg.line, "undeclared predicate '" + std::string(reg.text) + "'");
      }
      if (fn_->registers[e->reg].type != ScalarType::kPred) {
        return Error(reg.line, "guard " + std::string(reg.text) + " is not a .pred register");
      }
      guard.reg = e->reg;
    }
    Token head;
    GPUVM_RETURN_IF_ERROR(Next(&head));
    if (head.kind != TokenKind::kIdentifier) {
      return Error(head.line, "expected an instruction or label, found " + Describe(head));
    }
    if (!guard.present() && Peek().Is(':')) {
      GPUVM_RETURN_IF_ERROR(Skip());
      return DefineLabel(head);
    }
    return ParseInstruction(head, guard);
  }

  // `.reg .type name`, `.reg .type %r<N>`, comma-separated.
  Status ParseRegisters(const Token& directive) {
    DeclAttributes attrs;
    GPUVM_RETURN_IF_ERROR(ParseAttributes(directive, false, &attrs));
    if (attrs.vector != 1) return Unsupported(directive.line, "vector registers are not supported");
    if (attrs.align != 0) return Error(directive.line, "registers take no alignment");
    while (true) {
      Token name;
      GPUVM_RETURN_IF_ERROR(ExpectIdentifier("a register name", &name));
      if (LookupSpecial(name.text) != SpecialRegister::kNone) {
        return Error(name.line, "'" + std::string(name.text) + "' is a special register");
      }
      if (Peek().Is('<')) {
        GPUVM_RETURN_IF_ERROR(Skip());
        uint32_t count = 0;
        GPUVM_RETURN_IF_ERROR(ExpectUint32("a register count", &count));
        GPUVM_RETURN_IF_ERROR(Expect('>', "after a register count"));
        GPUVM_RETURN_IF_ERROR(DeclareRegisterRange(name, attrs.type, count));
      } else {
        GPUVM_RETURN_IF_ERROR(DeclareRegister(name, attrs.type));
      }
      if (!Peek().Is(',')) break;
      GPUVM_RETURN_IF_ERROR(Skip());
    }
    return Expect(';', "after a register declaration");
  }

  Status ReserveRegisters(uint32_t line, uint64_t count) {
    if (fn_->registers.size() + count > limits_.max_registers_per_function) {
      return Exhausted(line, "more than " + std::to_string(limits_.max_registers_per_function) +
                                 " registers in one function");
    }
    if (total_registers_ + count > limits_.max_registers_per_module) {
      return Exhausted(line, "more than " + std::to_string(limits_.max_registers_per_module) +
                                 " registers in the module");
    }
    total_registers_ += count;
    return Status::Ok();
  }

  // Duplicate check for one exact name in the innermost scope (names and numbered ranges).
  Status CheckFreeInScope(const Token& name) {
    Scope& scope = scopes_.back();
    if (scope.names.contains(name.text)) {
      return Error(name.line, "duplicate name '" + std::string(name.text) + "'");
    }
    std::string_view prefix;
    uint64_t number = 0;
    if (SplitNumbered(name.text, &prefix, &number)) {
      auto it = scope.ranges.find(prefix);
      if (it != scope.ranges.end() && number < it->second.count) {
        return Error(name.line, "duplicate name '" + std::string(name.text) + "'");
      }
      auto [min_it, inserted] = scope.min_numbered.try_emplace(prefix, number);
      if (!inserted && number < min_it->second) min_it->second = number;
    }
    return Status::Ok();
  }

  Status DeclareRegister(const Token& name, ScalarType type) {
    GPUVM_RETURN_IF_ERROR(CheckFreeInScope(name));
    GPUVM_RETURN_IF_ERROR(ReserveRegisters(name.line, 1));
    Entity e;
    e.is_register = true;
    e.reg = static_cast<RegId>(fn_->registers.size());
    scopes_.back().names[name.text] = e;
    fn_->registers.push_back(Register{type, std::string(name.text)});
    return Status::Ok();
  }

  Status DeclareRegisterRange(const Token& name, ScalarType type, uint32_t count) {
    const std::string_view prefix = name.text;
    if (prefix.back() >= '0' && prefix.back() <= '9') {
      return Unsupported(name.line,
                         "register range prefix '" + std::string(prefix) + "' ends in a digit");
    }
    if (count == 0) return Status::Ok();
    Scope& scope = scopes_.back();
    if (scope.ranges.contains(prefix)) {
      return Error(name.line, "duplicate register range '" + std::string(prefix) + "<N>'");
    }
    auto min_it = scope.min_numbered.find(prefix);
    if (min_it != scope.min_numbered.end() && min_it->second < count) {
      return Error(name.line, "register range '" + std::string(prefix) + "<" +
                                  std::to_string(count) + ">' redeclares " + std::string(prefix) +
                                  std::to_string(min_it->second));
    }
    GPUVM_RETURN_IF_ERROR(ReserveRegisters(name.line, count));
    RegisterRange range{static_cast<RegId>(fn_->registers.size()), count};
    scope.ranges[prefix] = range;
    fn_->registers.reserve(fn_->registers.size() + count);
    std::string base(prefix);
    for (uint32_t i = 0; i < count; ++i) {
      fn_->registers.push_back(Register{type, base + std::to_string(i)});
    }
    return Status::Ok();
  }

  // Innermost-first lookup of a register or function-scope variable.
  const Entity* Lookup(std::string_view name) const {
    std::string_view prefix;
    uint64_t number = 0;
    const bool numbered = SplitNumbered(name, &prefix, &number);
    for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope) {
      auto it = scope->names.find(name);
      if (it != scope->names.end()) return &it->second;
      if (numbered) {
        auto r = scope->ranges.find(prefix);
        if (r != scope->ranges.end() && number < r->second.count) {
          lookup_scratch_ = Entity{true, r->second.first + static_cast<RegId>(number), Symbol{}};
          return &lookup_scratch_;
        }
      }
    }
    return nullptr;
  }

  uint32_t LabelIndex(std::string_view name, uint32_t line) {
    auto [it, inserted] = labels_.try_emplace(name, static_cast<uint32_t>(fn_->labels.size()));
    if (inserted) {
      fn_->labels.push_back(Label{std::string(name), 0, 0});
      label_defined_.push_back(false);
      label_uses_.push_back(line);
    }
    return it->second;
  }

  Status DefineLabel(const Token& name) {
    if (fn_->labels.size() >= limits_.max_instructions) {
      return Exhausted(name.line, "too many labels");
    }
    uint32_t index = LabelIndex(name.text, name.line);
    if (label_defined_[index]) {
      return Error(name.line, "duplicate label '" + std::string(name.text) + "'");
    }
    label_defined_[index] = true;
    Label& label = fn_->labels[index];
    label.target = static_cast<uint32_t>(fn_->body.size());
    label.line = name.line;
    return Status::Ok();
  }

  // ----------------------------------------------------------------------------------------------
  // Instructions

  Status ParseInstruction(const Token& head, Guard guard) {
    if (++total_instructions_ > limits_.max_instructions) {
      return Exhausted(head.line,
                       "more than " + std::to_string(limits_.max_instructions) + " instructions");
    }
    std::string mnemonic(head.text);
    // Collect the modifiers first, so every error can quote the whole mnemonic.
    std::vector<std::string_view> words;
    while (Peek().kind == TokenKind::kDotWord) {
      Token m;
      GPUVM_RETURN_IF_ERROR(Next(&m));
      if (words.size() >= 16) return Error(head.line, "too many modifiers on '" + mnemonic + "'");
      words.push_back(m.text);
      mnemonic += '.';
      mnemonic += m.text;
    }
    auto fail = [&](std::string message) {
      return Error(head.line, "instruction '" + mnemonic + "': " + message);
    };
    const OpcodeInfo* info = FindOpcode(head.text);
    if (info == nullptr)
      return Unsupported(head.line, "unsupported instruction '" + mnemonic + "'");
    Instruction inst;
    inst.opcode = info->opcode;
    inst.guard = guard;
    inst.line = head.line;
    for (std::string_view w : words) {
      std::string err = ApplyModifier(*info, w, &inst);
      if (!err.empty()) return fail(err);
    }
    if (info->mnemonic == "bar" && !inst.Has(kFlagWarp)) inst.flags |= kFlagAligned;
    std::string err = CheckModifiers(*info, inst);
    if (!err.empty()) {
      const bool half = inst.type == ScalarType::kF16 || inst.type == ScalarType::kBF16 ||
                        inst.type == ScalarType::kF16x2 || inst.type == ScalarType::kBF16x2;
      if (half) {
        return Unsupported(head.line, "instruction '" + mnemonic +
                                          "': half-precision arithmetic is not supported (" + err +
                                          ")");
      }
      return fail(err);
    }

    if (inst.opcode == Opcode::kCall) {
      GPUVM_RETURN_IF_ERROR(ParseCall(head, mnemonic, &inst));
    } else if (!Peek().Is(';')) {
      while (true) {
        if (inst.operands.size() >= limits_.max_operands) return fail("too many operands");
        Operand op;
        GPUVM_RETURN_IF_ERROR(ParseOperand(inst.opcode == Opcode::kBra, mnemonic, &op));
        inst.operands.push_back(std::move(op));
        if (!Peek().Is(',')) break;
        GPUVM_RETURN_IF_ERROR(Skip());
      }
    }
    if (!Peek().Is(';')) {
      return fail("expected ',' or ';' after an operand, found " + Describe(Peek()));
    }
    GPUVM_RETURN_IF_ERROR(Skip());
    err = CheckOperands(module_, *fn_, inst);
    if (!err.empty()) return fail(err);
    fn_->body.push_back(std::move(inst));
    return Status::Ok();
  }

  Status OperandError(uint32_t line, const std::string& mnemonic, std::string message) const {
    return Error(line, "instruction '" + mnemonic + "': " + message);
  }

  // Resolves a name used as an operand: a register, a variable, or a function.
  Status ResolveName(const Token& name, const std::string& mnemonic, Operand* out) {
    if (const Entity* e = Lookup(name.text)) {
      if (e->is_register) {
        out->kind = OperandKind::kRegister;
        out->reg = e->reg;
      } else {
        out->kind = OperandKind::kSymbol;
        out->symbol = e->symbol;
      }
      return Status::Ok();
    }
    auto it = module_names_.find(name.text);
    if (it != module_names_.end()) {
      out->kind = OperandKind::kSymbol;
      out->symbol = it->second;
      return Status::Ok();
    }
    return OperandError(name.line, mnemonic, "undeclared name '" + std::string(name.text) + "'");
  }

  Status ParseOperand(bool label_context, const std::string& mnemonic, Operand* out) {
    Token t;
    GPUVM_RETURN_IF_ERROR(Next(&t));
    if (t.Is('[')) return ParseAddress(mnemonic, out);
    if (t.Is('{')) return ParseVector(mnemonic, out);
    if (t.Is('-') || t.kind == TokenKind::kInteger || t.kind == TokenKind::kFloat) {
      bool negative = t.Is('-');
      if (negative) GPUVM_RETURN_IF_ERROR(Next(&t));
      return MakeImmediate(t, negative, out);
    }
    bool negated = false;
    if (t.Is('!')) {
      negated = true;
      GPUVM_RETURN_IF_ERROR(Next(&t));
    }
    if (t.kind != TokenKind::kIdentifier) {
      return OperandError(t.line, mnemonic, "expected an operand, found " + Describe(t));
    }
    if (label_context && !negated) {
      out->kind = OperandKind::kLabel;
      out->label = LabelIndex(t.text, t.line);
      return Status::Ok();
    }
    if (t.text == "_" && !negated) {
      out->kind = OperandKind::kSink;
      return Status::Ok();
    }
    if (SpecialRegister sreg = LookupSpecial(t.text); sreg != SpecialRegister::kNone) {
      if (negated) return OperandError(t.line, mnemonic, "'!' on a special register");
      out->kind = OperandKind::kSpecial;
      out->sreg = sreg;
      if (SpecialRegisterHasComponent(sreg)) {
        Token c;
        GPUVM_RETURN_IF_ERROR(Next(&c));
        if (!(c.IsDotWord("x") || c.IsDotWord("y") || c.IsDotWord("z"))) {
          return OperandError(t.line, mnemonic,
                              std::string(t.text) + " needs a component (.x, .y or .z)");
        }
        out->component = static_cast<uint8_t>(c.text[0] - 'x');
      }
      return Status::Ok();
    }
    GPUVM_RETURN_IF_ERROR(ResolveName(t, mnemonic, out));
    if (Peek().kind == TokenKind::kDotWord) {
      return OperandError(t.line, mnemonic, "vector register components are not supported");
    }
    if (out->kind == OperandKind::kRegister) {
      out->negated = negated;
      if (Peek().Is('|')) {
        if (negated) return OperandError(t.line, mnemonic, "'!' on a register pair");
        GPUVM_RETURN_IF_ERROR(Skip());
        Token second;
        GPUVM_RETURN_IF_ERROR(ExpectIdentifier("a register after '|'", &second));
        const Entity* e = Lookup(second.text);
        if (e == nullptr || !e->is_register) {
          return OperandError(second.line, mnemonic,
                              "undeclared register '" + std::string(second.text) + "'");
        }
        out->kind = OperandKind::kRegisterPair;
        out->reg2 = e->reg;
      }
      return Status::Ok();
    }
    if (negated) return OperandError(t.line, mnemonic, "'!' needs a predicate register");
    // A symbol: `name` or `name+N`.
    if (Peek().Is('+') || Peek().Is('-')) GPUVM_RETURN_IF_ERROR(ParseOffset(&out->offset));
    return Status::Ok();
  }

  // After '[': `reg`, `name`, `N`, each optionally `+N`/`-N`/`+-N`, then ']'.
  Status ParseAddress(const std::string& mnemonic, Operand* out) {
    out->kind = OperandKind::kAddress;
    Token t;
    GPUVM_RETURN_IF_ERROR(Next(&t));
    if (t.kind == TokenKind::kIdentifier) {
      Operand base;
      GPUVM_RETURN_IF_ERROR(ResolveName(t, mnemonic, &base));
      if (base.kind == OperandKind::kRegister) {
        out->base = AddressBase::kRegister;
        out->reg = base.reg;
      } else {
        out->base = AddressBase::kSymbol;
        out->symbol = base.symbol;
      }
      if (Peek().Is('+') || Peek().Is('-')) GPUVM_RETURN_IF_ERROR(ParseOffset(&out->offset));
    } else if (t.kind == TokenKind::kInteger) {
      if (t.int_value > static_cast<uint64_t>(INT64_MAX)) {
        return OperandError(t.line, mnemonic, "address out of range");
      }
      out->base = AddressBase::kNone;
      out->offset = static_cast<int64_t>(t.int_value);
    } else {
      return OperandError(t.line, mnemonic, "expected an address, found " + Describe(t));
    }
    if (!Peek().Is(']')) {
      return OperandError(Peek().line, mnemonic,
                          "expected ']' to close an address, found " + Describe(Peek()));
    }
    return Skip();
  }

  // After '{': elements (registers, immediates, `_`) separated by commas, then '}'.
  Status ParseVector(const std::string& mnemonic, Operand* out) {
    out->kind = OperandKind::kVector;
    while (true) {
      if (out->elements.size() >= 4) {
        return OperandError(Peek().line, mnemonic, "a vector has at most 4 elements");
      }
      Token t;
      GPUVM_RETURN_IF_ERROR(Next(&t));
      Operand e;
      if (t.Is('-') || t.kind == TokenKind::kInteger || t.kind == TokenKind::kFloat) {
        bool negative = t.Is('-');
        if (negative) GPUVM_RETURN_IF_ERROR(Next(&t));
        GPUVM_RETURN_IF_ERROR(MakeImmediate(t, negative, &e));
      } else if (t.kind == TokenKind::kIdentifier && t.text == "_") {
        e.kind = OperandKind::kSink;
      } else if (t.kind == TokenKind::kIdentifier) {
        const Entity* entity = Lookup(t.text);
        if (entity == nullptr || !entity->is_register) {
          return OperandError(t.line, mnemonic,
                              "vector element '" + std::string(t.text) + "' is not a register");
        }
        e.kind = OperandKind::kRegister;
        e.reg = entity->reg;
      } else {
        return OperandError(t.line, mnemonic, "expected a vector element, found " + Describe(t));
      }
      out->elements.push_back(std::move(e));
      if (!Peek().Is(',')) break;
      GPUVM_RETURN_IF_ERROR(Skip());
    }
    if (out->elements.size() != 2 && out->elements.size() != 4) {
      return OperandError(Peek().line, mnemonic, "a vector needs 2 or 4 elements");
    }
    return Expect('}', "to close a vector");
  }

  // `call (r...), f, (a...)` with either list optional. Operands: results, then arguments.
  Status ParseCall(const Token& head, const std::string& mnemonic, Instruction* inst) {
    auto fail = [&](uint32_t line, std::string message) {
      return OperandError(line, mnemonic, message);
    };
    auto parse_list = [&](std::vector<Operand>* list) -> Status {
      GPUVM_RETURN_IF_ERROR(Skip());  // '('
      if (Peek().Is(')')) return Skip();
      while (true) {
        if (inst->operands.size() + list->size() >= limits_.max_operands) {
          return fail(head.line, "too many call operands");
        }
        Token name;
        GPUVM_RETURN_IF_ERROR(Next(&name));
        if (name.kind != TokenKind::kIdentifier) {
          return fail(name.line, "call operands must be .param variables, found " + Describe(name));
        }
        Operand op;
        GPUVM_RETURN_IF_ERROR(ResolveName(name, mnemonic, &op));
        list->push_back(std::move(op));
        if (!Peek().Is(',')) break;
        GPUVM_RETURN_IF_ERROR(Skip());
      }
      return Expect(')', "to close a call list");
    };
    std::vector<Operand> results, args;
    if (Peek().Is('(')) {
      GPUVM_RETURN_IF_ERROR(parse_list(&results));
      GPUVM_RETURN_IF_ERROR(Expect(',', "after a call's result list"));
    }
    Token callee;
    GPUVM_RETURN_IF_ERROR(Next(&callee));
    if (callee.kind != TokenKind::kIdentifier) {
      return fail(callee.line, "expected the called function, found " + Describe(callee));
    }
    Operand target;
    GPUVM_RETURN_IF_ERROR(ResolveName(callee, mnemonic, &target));
    if (target.kind != OperandKind::kSymbol || target.symbol.kind != Symbol::Kind::kFunction) {
      if (target.kind == OperandKind::kRegister) {
        return Unsupported(callee.line,
                           "instruction '" + mnemonic + "': indirect calls are not supported");
      }
      return fail(callee.line, "'" + std::string(callee.text) + "' is not a function");
    }
    inst->callee = target.symbol.index;
    if (Peek().Is(',')) {
      GPUVM_RETURN_IF_ERROR(Skip());
      if (!Peek().Is('(')) return fail(Peek().line, "expected '(' to open a call's argument list");
      GPUVM_RETURN_IF_ERROR(parse_list(&args));
      if (Peek().Is(',')) {
        return Unsupported(Peek().line, "instruction '" + mnemonic +
                                            "': calls through a prototype are not supported");
      }
    }
    inst->call_results = static_cast<uint32_t>(results.size());
    for (Operand& op : results) inst->operands.push_back(std::move(op));
    for (Operand& op : args) inst->operands.push_back(std::move(op));
    return Status::Ok();
  }

  // ----------------------------------------------------------------------------------------------
  // Whole-module checks

  Status FinishModule() {
    for (const Function& f : module_.functions) {
      for (const Instruction& inst : f.body) {
        if (inst.opcode != Opcode::kCall) continue;
        const Function& callee = module_.functions[inst.callee];
        // nvcc's device-side assert handler is the one external function the JIT understands
        // (it becomes a trap with the assert reason; docs/JIT.md).
        if (!callee.has_body && callee.name != "__assertfail") {
          return Status::Unimplemented(
              DescribeLocation(f, inst.line) + "instruction '" + InstructionMnemonic(inst) +
              "': calls '" + callee.name +
              "', which is declared but not defined in this module (external functions such as "
              "vprintf/malloc are not supported)");
        }
      }
    }
    return Status::Ok();
  }

  Lexer lex_;
  const ParseLimits limits_;
  Module module_;
  bool seen_version_ = false, seen_target_ = false, seen_address_size_ = false;
  // Module-scope names (globals and functions); keys view the input text.
  std::unordered_map<std::string_view, Symbol> module_names_;
  // The function being parsed.
  Function* fn_ = nullptr;
  std::vector<Scope> scopes_;
  std::unordered_map<std::string_view, uint32_t> labels_;
  std::vector<bool> label_defined_;
  std::vector<uint32_t> label_uses_;  // line of the first reference, for "undefined label"
  mutable Entity lookup_scratch_;
  uint64_t total_registers_ = 0;
  uint64_t total_instructions_ = 0;
  uint64_t total_variables_ = 0;
  uint64_t init_bytes_ = 0;
};

}  // namespace

Result<Module> ParseModule(std::string_view text, const ParseLimits& limits) {
  if (text.size() > limits.max_module_bytes) {
    return Status::ResourceExhausted("PTX module of " + std::to_string(text.size()) +
                                     " bytes exceeds the limit of " +
                                     std::to_string(limits.max_module_bytes));
  }
  Parser parser(text, limits);
  return parser.Run();
}

}  // namespace gpuvm::ptx
