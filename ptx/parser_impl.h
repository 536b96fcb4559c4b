// The PTX parser's private class, shared by the files that implement it: parser.cc (tokens,
// errors, module-level directives, whole-module checks, ParseModule), parser_variables.cc
// (variable declarations and initializers), parser_functions.cc (function headers and bodies,
// register declarations, labels) and parser_instructions.cc (instructions and their operands).
// Not for other users: the contract is ptx/parser.h.
//
// Threading: one Parser per ParseModule call, used by that call's thread only.
#ifndef GPUVM_PTX_PARSER_IMPL_H_
#define GPUVM_PTX_PARSER_IMPL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "ptx/ast.h"
#include "ptx/lexer.h"
#include "ptx/parser.h"

namespace gpuvm::ptx::parser_internal {

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

// The enumerator in [kFirst, kLast] that Name spells `text`, or E's kNone (0): the parser's
// look-ups of the small closed sets it knows by name. One index per instantiation, built on first
// use.
template <typename E, std::string_view (*Name)(E), E kFirst, E kLast>
E LookUpByName(std::string_view text) {
  static const auto* index = [] {
    auto* map = new std::unordered_map<std::string_view, E>();
    for (int i = static_cast<int>(kFirst); i <= static_cast<int>(kLast); ++i) {
      (*map)[Name(static_cast<E>(i))] = static_cast<E>(i);
    }
    return map;
  }();
  auto it = index->find(text);
  return it == index->end() ? E{} : it->second;
}

// The special register named `name` ("%tid"), or kNone.
inline SpecialRegister LookupSpecial(std::string_view name) {
  return LookUpByName<SpecialRegister, SpecialRegisterName, kFirstSpecialRegister,
                      kLastSpecialRegister>(name);
}

class Parser {
 public:
  Parser(std::string_view text, const ParseLimits& limits) : lex_(text), limits_(limits) {}

  Result<Module> Run();

 private:
  // ----------------------------------------------------------------------------------------------
  // Tokens and errors

  const Token& Peek() const { return lex_.Peek(); }

  Status Next(Token* out);
  Status Skip();
  Status CheckToken(const Token& t);
  std::string Where(uint32_t line) const;
  Status Error(uint32_t line, std::string message) const;
  Status Unsupported(uint32_t line, std::string message) const;
  Status Exhausted(uint32_t line, std::string message) const;
  static std::string Describe(const Token& t);
  Status Expect(char punct, std::string_view context);
  Status ExpectIdentifier(std::string_view context, Token* out);
  // A non-negative integer that fits in 32 bits (sizes, counts, alignments).
  Status ExpectUint32(std::string_view context, uint32_t* out);

  // ----------------------------------------------------------------------------------------------
  // Module level

  Status ParseTopLevel();
  Status RequireHeader(const Token& t);
  Status ParseVersion(const Token& directive);
  Status ParseTarget(const Token& directive);

  // `.section name { ... }` (DWARF from nvcc -G): skipped, braces balanced.
  Status SkipSection(const Token& directive);

  // `.pragma "a", "b";`
  Status SkipPragma();
  Status ParseModuleDeclaration(const Token& first);

  // ----------------------------------------------------------------------------------------------
  // Variables

  struct DeclAttributes {
    ScalarType type = ScalarType::kNone;
    uint32_t vector = 1;
    uint32_t align = 0;
    StateSpace ptr_space = StateSpace::kNone;
    uint32_t ptr_align = 0;
    bool ptr = false;
    bool managed = false;  // .attribute(.managed)
  };

  // The dot-words between the state space and the name: .align N, .v2/.v4, the type, and for
  // parameters `.ptr [.space] [.align N]`.
  Status ParseAttributes(const Token& start, bool is_param, DeclAttributes* out);
  static ScalarType ParseTypeWord(std::string_view w) {
    return LookUpByName<ScalarType, TypeName, ScalarType::kPred, ScalarType::kF64>(w);
  }
  Status CountVariable(uint32_t line);

  // `[N][M]` or `[]` after a name.
  Status ParseDims(Variable* var);

  // Computes elements and checks the size limit (unsized arrays count their known dimensions).
  Status SizeVariable(uint32_t line, Variable* var);

  // Variables of .global/.shared/.const (module or function scope), .local and .param (function
  // scope).
  Status ParseVariables(const Token& directive, StateSpace space, Linkage linkage,
                        bool in_function);
  Status DeclareGlobal(const Token& name, Variable var);
  Status DeclareLocal(const Token& name, Variable var);

  // Initializer: scalars (integers, floats, `name`, `name+N`, `generic(name)`), optionally in
  // braces. As in C, a nested brace starts a new row (sub-array or vector element) and a short row
  // is zero-filled: for `.u32 x[2][3]`, `{{1}, {2, 3}}` is 1 0 0 2 3 0.
  Status ParseInitializer(Variable* var);

  // Extends a variable's initializer image to `bytes`, within the module's initializer budget.
  Status GrowImage(uint32_t line, Variable* var, uint64_t bytes);
  Status ParseInitElement(Variable* var, uint64_t offset);

  // An integer or float literal token (after an optional '-') as an immediate operand.
  Status MakeImmediate(const Token& t, bool negative, Operand* out);

  // `+N`, `-N` or `+-N` after an address base.
  Status ParseOffset(int64_t* out);

  // ----------------------------------------------------------------------------------------------
  // Functions

  Status ParseParams(std::vector<Variable>* out, bool allow_ptr);
  static bool SameSignature(const std::vector<Variable>& a, const std::vector<Variable>& b);
  Status ParseFunction(const Token& directive, bool is_entry, Linkage linkage);
  Status ParsePerformanceDirectives(Function* f);

  // ----------------------------------------------------------------------------------------------
  // Function bodies

  Status ParseBody(uint32_t index);
  Status DeclareParam(const Variable& var, Symbol symbol);
  Status ParseStatement();

  // `.reg .type name`, `.reg .type %r<N>`, comma-separated.
  Status ParseRegisters(const Token& directive);
  Status ReserveRegisters(uint32_t line, uint64_t count);

  // Duplicate check for one exact name in the innermost scope (names and numbered ranges).
  Status CheckFreeInScope(const Token& name);
  Status DeclareRegister(const Token& name, ScalarType type);
  Status DeclareRegisterRange(const Token& name, ScalarType type, uint32_t count);

  // Innermost-first lookup of a register or function-scope variable.
  const Entity* Lookup(std::string_view name) const;
  uint32_t LabelIndex(std::string_view name, uint32_t line);
  Status DefineLabel(const Token& name);

  // ----------------------------------------------------------------------------------------------
  // Instructions

  Status ParseInstruction(const Token& head, Guard guard);
  Status OperandError(uint32_t line, const std::string& mnemonic, std::string message) const;

  // Resolves a name used as an operand: a register, a variable, or a function.
  Status ResolveName(const Token& name, const std::string& mnemonic, Operand* out);
  Status ParseOperand(bool label_context, const std::string& mnemonic, Operand* out);

  // After '[': `reg`, `name`, `N`, each optionally `+N`/`-N`/`+-N`, then ']'.
  Status ParseAddress(const std::string& mnemonic, Operand* out);

  // After '{': elements (registers, immediates, `_`) separated by commas, then '}'.
  Status ParseVector(const std::string& mnemonic, Operand* out);

  // `call (r...), f, (a...)` with either list optional. Operands: results, then arguments.
  Status ParseCall(const Token& head, const std::string& mnemonic, Instruction* inst);

  // ----------------------------------------------------------------------------------------------
  // Whole-module checks

  Status FinishModule();

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

}  // namespace gpuvm::ptx::parser_internal

#endif  // GPUVM_PTX_PARSER_IMPL_H_
