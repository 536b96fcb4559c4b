// The PTX parser, part 4: one instruction (guard, mnemonic and modifiers decoded and checked by
// ptx/instruction_set.h) and its operands: registers, special registers, immediates, symbols,
// addresses, vectors, labels, and call argument lists. The class is in parser_impl.h.
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ptx/instruction_set.h"
#include "ptx/parser_impl.h"

namespace gpuvm::ptx::parser_internal {

// -------------------------------------------------------------------------------------------------
// Instructions

Status Parser::ParseInstruction(const Token& head, Guard guard) {
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
  if (info == nullptr) return Unsupported(head.line, "unsupported instruction '" + mnemonic + "'");
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

Status Parser::OperandError(uint32_t line, const std::string& mnemonic, std::string message) const {
  return Error(line, "instruction '" + mnemonic + "': " + message);
}

Status Parser::ResolveName(const Token& name, const std::string& mnemonic, Operand* out) {
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

Status Parser::ParseOperand(bool label_context, const std::string& mnemonic, Operand* out) {
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

Status Parser::ParseAddress(const std::string& mnemonic, Operand* out) {
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

Status Parser::ParseVector(const std::string& mnemonic, Operand* out) {
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

Status Parser::ParseCall(const Token& head, const std::string& mnemonic, Instruction* inst) {
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

}  // namespace gpuvm::ptx::parser_internal
