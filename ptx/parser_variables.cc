// The PTX parser, part 2: variable declarations (.global/.shared/.const/.local/.param), their
// attributes, array dimensions and sizes, and initializers (numbers, addresses of variables,
// nested braces). The class is in parser_impl.h.
#include <bit>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ptx/parser_impl.h"

namespace gpuvm::ptx::parser_internal {
namespace {

bool IsPowerOfTwo(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

}  // namespace

// -------------------------------------------------------------------------------------------------
// Variables

Status Parser::ParseAttributes(const Token& start, bool is_param, DeclAttributes* out) {
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
    } else if (w == "attribute" && !is_param) {
      // `.attribute(.managed)`: a managed variable (one address for host and device). PTX also
      // has `.unified(uuid)`, which nothing here places.
      GPUVM_RETURN_IF_ERROR(Expect('(', "after .attribute"));
      Token a;
      GPUVM_RETURN_IF_ERROR(Next(&a));
      if (a.kind != TokenKind::kDotWord || a.text != "managed") {
        return Unsupported(a.line, "only .attribute(.managed) is supported");
      }
      out->managed = true;
      GPUVM_RETURN_IF_ERROR(Expect(')', "after .attribute(.managed"));
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

Status Parser::CountVariable(uint32_t line) {
  if (++total_variables_ > limits_.max_variables) {
    return Exhausted(line, "more than " + std::to_string(limits_.max_variables) + " variables");
  }
  return Status::Ok();
}

Status Parser::ParseDims(Variable* var) {
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

Status Parser::SizeVariable(uint32_t line, Variable* var) {
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

Status Parser::ParseVariables(const Token& directive, StateSpace space, Linkage linkage,
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
    var.managed = attrs.managed;
    if (var.managed && space != StateSpace::kGlobal) {
      return Error(name.line, ".attribute(.managed) applies to .global variables only");
    }
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
        return Unsupported(name.line, "multi-dimensional .extern .shared arrays are not supported");
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

Status Parser::DeclareGlobal(const Token& name, Variable var) {
  if (module_names_.contains(name.text)) {
    return Error(name.line, "duplicate name '" + std::string(name.text) + "'");
  }
  Symbol symbol{Symbol::Kind::kGlobal, static_cast<uint32_t>(module_.globals.size())};
  module_names_[name.text] = symbol;
  module_.globals.push_back(std::move(var));
  return Status::Ok();
}

Status Parser::DeclareLocal(const Token& name, Variable var) {
  GPUVM_RETURN_IF_ERROR(CheckFreeInScope(name));
  Entity e;
  e.symbol = Symbol{Symbol::Kind::kLocal, static_cast<uint32_t>(fn_->locals.size())};
  scopes_.back().names[name.text] = e;
  fn_->locals.push_back(std::move(var));
  return Status::Ok();
}

Status Parser::ParseInitializer(Variable* var) {
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

Status Parser::GrowImage(uint32_t line, Variable* var, uint64_t bytes) {
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

Status Parser::ParseInitElement(Variable* var, uint64_t offset) {
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
  for (uint32_t i = 0; i < size; ++i) var->init[offset + i] = static_cast<uint8_t>(bits >> (8 * i));
  return Status::Ok();
}

Status Parser::MakeImmediate(const Token& t, bool negative, Operand* out) {
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

Status Parser::ParseOffset(int64_t* out) {
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

}  // namespace gpuvm::ptx::parser_internal
