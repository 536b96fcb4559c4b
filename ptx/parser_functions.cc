// The PTX parser, part 3: function headers (.entry/.func, parameter lists, performance
// directives), function bodies (statements, nested blocks), register declarations and their
// scopes, and labels. The class is in parser_impl.h.
#include <array>
#include <string>
#include <utility>
#include <vector>

#include "ptx/parser_impl.h"

namespace gpuvm::ptx::parser_internal {
namespace {

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

}  // namespace

// -------------------------------------------------------------------------------------------------
// Functions

Status Parser::ParseParams(std::vector<Variable>* out, bool allow_ptr) {
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

bool Parser::SameSignature(const std::vector<Variable>& a, const std::vector<Variable>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].SizeBytes() != b[i].SizeBytes()) return false;
  }
  return true;
}

Status Parser::ParseFunction(const Token& directive, bool is_entry, Linkage linkage) {
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

Status Parser::ParsePerformanceDirectives(Function* f) {
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
      return Unsupported(t.line, "cluster directives (." + std::string(w) + ") are not supported");
    } else {
      return Error(t.line, "unexpected '." + std::string(w) + "' in a function header");
    }
  }
  return Status::Ok();
}

// -------------------------------------------------------------------------------------------------
// Function bodies

Status Parser::ParseBody(uint32_t index) {
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

Status Parser::DeclareParam(const Variable& var, Symbol symbol) {
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

Status Parser::ParseStatement() {
  const Token& p = Peek();
  if (p.kind == TokenKind::kEnd) return Error(p.line, "unexpected end of input in a function body");
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

Status Parser::ParseRegisters(const Token& directive) {
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

Status Parser::ReserveRegisters(uint32_t line, uint64_t count) {
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

Status Parser::CheckFreeInScope(const Token& name) {
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

Status Parser::DeclareRegister(const Token& name, ScalarType type) {
  GPUVM_RETURN_IF_ERROR(CheckFreeInScope(name));
  GPUVM_RETURN_IF_ERROR(ReserveRegisters(name.line, 1));
  Entity e;
  e.is_register = true;
  e.reg = static_cast<RegId>(fn_->registers.size());
  scopes_.back().names[name.text] = e;
  fn_->registers.push_back(Register{type, std::string(name.text)});
  return Status::Ok();
}

Status Parser::DeclareRegisterRange(const Token& name, ScalarType type, uint32_t count) {
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
    return Error(name.line, "register range '" + std::string(prefix) + "<" + std::to_string(count) +
                                ">' redeclares " + std::string(prefix) +
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

const Entity* Parser::Lookup(std::string_view name) const {
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

uint32_t Parser::LabelIndex(std::string_view name, uint32_t line) {
  auto [it, inserted] = labels_.try_emplace(name, static_cast<uint32_t>(fn_->labels.size()));
  if (inserted) {
    fn_->labels.push_back(Label{std::string(name), 0, 0});
    label_defined_.push_back(false);
    label_uses_.push_back(line);
  }
  return it->second;
}

Status Parser::DefineLabel(const Token& name) {
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

}  // namespace gpuvm::ptx::parser_internal
